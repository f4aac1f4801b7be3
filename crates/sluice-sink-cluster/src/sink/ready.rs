//! What the sink's readiness probe asks (see [`sluice_chain::readiness`]):
//! every broker of the view and every first contact point, connected to as
//! the sink connects (TLS included); the view's brokers count as metadata
//! loaded by clients.

use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerError};
use sluice_chain::readiness::ProbeTargets;

use super::Shared;

impl ProbeTargets for Shared {
    fn candidates(&self) -> Vec<BrokerAddress> {
        let mut all: Vec<BrokerAddress> = self
            .view
            .read()
            .brokers()
            .filter_map(|b| {
                let port = u16::try_from(b.address.port).ok()?;
                Some(BrokerAddress::new(b.address.host.as_str(), port).with_id(b.id.0))
            })
            .collect();
        all.extend(self.contact_points.iter().cloned());
        all
    }

    fn options_for(&self, addr: &BrokerAddress) -> Result<BrokerConnectOptions, BrokerError> {
        Shared::options_for(self, addr)
    }

    fn known_brokers(&self) -> usize {
        self.view.read().brokers().count()
    }
}
