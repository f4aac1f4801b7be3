//! `KafkaSinkSingle`: forwards every request of a client connection to one
//! broker.
//!
//! Each client connection gets its own [`BrokerConnection`], opened on its
//! first request. Requests pass through as their original bytes (only the
//! correlation id is patched by the connection); responses come back in
//! request order through a FIFO of response receivers. Metadata,
//! FindCoordinator and DescribeCluster responses are rewritten (see
//! `rewrite`) so that the client keeps connecting through Sluice.
//!
//! When the broker connection fails, every request owed a response resolves
//! to the [`BrokerError`], which [`Sink::recv`] returns as
//! [`ChainError::Broker`]; the source then closes the client connection with
//! that reason. (`KafkaSinkCluster` answers such failures with Kafka errors.)
//!
//! Its TLS towards the broker can be reloaded while it runs (each new
//! broker connection takes the connector current then), and its readiness
//! probe asks the one broker (see [`sluice_chain::readiness`]).

#![deny(missing_docs)]

mod rewrite;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rustls_pki_types::ServerName;
use sluice_broker::{
    AddressParseError, BrokerAddress, BrokerConnectOptions, BrokerConnection, BrokerError,
    ResponseReceiver,
};
use sluice_codec::{Request, Response};
use sluice_config::KafkaSinkSingleConfig;
use sluice_tls::{self as broker_tls, TlsError};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use sluice_chain::readiness::{self, ProbeTargets, Readiness};
use sluice_chain::{ChainError, ConnectionContext, Sink, SinkBuilder};
use sluice_tls::reload::Reload;
use sluice_tls::{self as tls, SharedConnector};

use rewrite::AdvertisedAddress;

/// A `KafkaSinkSingle` configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SinkSingleError {
    /// Neither `destination_port` nor `destination_address` was set.
    #[error("KafkaSinkSingle: set one of `destination_port` and `destination_address`")]
    NoDestination,
    /// Both were set.
    #[error("KafkaSinkSingle: set only one of `destination_port` and `destination_address`")]
    BothDestinations,
    /// `destination_port` needs the host of `listen_addr`, which did not parse.
    #[error("KafkaSinkSingle: cannot take the destination host from listen_addr: {0}")]
    ListenAddr(AddressParseError),
    /// `destination_address` did not parse.
    #[error("KafkaSinkSingle: destination_address: {0}")]
    Destination(AddressParseError),
    /// The TLS settings are unusable.
    #[error("KafkaSinkSingle: {0}")]
    Tls(#[from] TlsError),
}

/// Builds a `KafkaSinkSingle` for each client connection.
#[derive(Debug, Clone)]
pub struct KafkaSinkSingleBuilder {
    name: Arc<str>,
    target: Arc<Target>,
}

/// The broker every connection of the sink goes to, and how.
#[derive(Debug, Clone)]
struct Target {
    destination: BrokerAddress,
    /// Without TLS: [`Target::options`] adds the connector current now.
    options: BrokerConnectOptions,
    tls: Option<(SharedConnector, ServerName<'static>)>,
}

impl Target {
    /// The options for a new connection, with the TLS in use now.
    fn options(&self) -> BrokerConnectOptions {
        let mut options = self.options.clone();
        if let Some((connector, name)) = &self.tls {
            options.tls = Some((connector.current(), name.clone()));
        }
        options
    }
}

impl ProbeTargets for Target {
    fn candidates(&self) -> Vec<BrokerAddress> {
        vec![self.destination.clone()]
    }

    fn options_for(&self, _addr: &BrokerAddress) -> Result<BrokerConnectOptions, BrokerError> {
        Ok(self.options())
    }
}

impl KafkaSinkSingleBuilder {
    /// Validates `cfg` and prepares TLS. `listen_addr` is the source's
    /// listen address: with `destination_port`, the broker is on its host.
    pub fn new(cfg: &KafkaSinkSingleConfig, listen_addr: &str) -> Result<Self, SinkSingleError> {
        let destination = match (&cfg.destination_address, cfg.destination_port) {
            (Some(address), None) => {
                BrokerAddress::parse(address).map_err(SinkSingleError::Destination)?
            }
            (None, Some(port)) => {
                let listen =
                    BrokerAddress::parse(listen_addr).map_err(SinkSingleError::ListenAddr)?;
                BrokerAddress::new(listen.host, port)
            }
            (Some(_), Some(_)) => return Err(SinkSingleError::BothDestinations),
            (None, None) => return Err(SinkSingleError::NoDestination),
        };
        let mut options = BrokerConnectOptions::new(Duration::from_millis(cfg.connect_timeout_ms));
        options.read_timeout = cfg.read_timeout_secs.map(Duration::from_secs);
        let name = cfg.name.as_deref().unwrap_or("KafkaSinkSingle");
        let tls = match &cfg.tls {
            Some(tls_cfg) => Some((
                tls::reloadable_connector(name, tls_cfg)?,
                broker_tls::server_name(&destination.host)?,
            )),
            None => None,
        };
        Ok(Self {
            name: Arc::from(name),
            target: Arc::new(Target {
                destination,
                options,
                tls,
            }),
        })
    }

    /// The broker every connection goes to.
    #[cfg(test)]
    pub(crate) fn destination(&self) -> &BrokerAddress {
        &self.target.destination
    }
}

impl SinkBuilder for KafkaSinkSingleBuilder {
    fn build(&self, _ctx: &ConnectionContext) -> Box<dyn Sink> {
        Box::new(KafkaSinkSingle {
            name: self.name.clone(),
            target: self.target.clone(),
            connection: None,
            pending: VecDeque::new(),
        })
    }

    fn tls_reloads(&self) -> Vec<Arc<dyn Reload>> {
        self.target
            .tls
            .iter()
            .map(|(connector, _)| Arc::clone(connector) as Arc<dyn Reload>)
            .collect()
    }

    fn start_readiness(&self, cancel: &CancellationToken) -> Option<Arc<Readiness>> {
        Some(readiness::spawn(
            &self.name,
            Arc::clone(&self.target) as Arc<dyn ProbeTargets>,
            readiness::PROBE_INTERVAL,
            cancel.clone(),
        ))
    }
}

/// One client connection's sink: one broker connection and a FIFO of the
/// responses it is owed.
pub(crate) struct KafkaSinkSingle {
    name: Arc<str>,
    target: Arc<Target>,
    connection: Option<BrokerConnection>,
    pending: VecDeque<ResponseReceiver>,
}

impl std::fmt::Debug for KafkaSinkSingle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkSingle")
            .field("name", &self.name)
            .field("destination", &self.target.destination)
            .field("connected", &self.connection.is_some())
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl KafkaSinkSingle {
    /// The broker connection, opened on first use. A connection the broker
    /// closed while idle is replaced; one that failed with responses still
    /// owed is kept, so that the failure reaches the client in order.
    async fn connection(
        &mut self,
        ctx: &ConnectionContext,
    ) -> Result<&BrokerConnection, BrokerError> {
        let reusable = self
            .connection
            .as_ref()
            .is_some_and(|c| !c.is_closed() || !self.pending.is_empty());
        if !reusable {
            if let Some(old) = self.connection.take() {
                debug!(
                    connection = ctx.connection_id,
                    broker = %self.target.destination,
                    reason = %old.failure().map(|e| e.to_string()).unwrap_or_default(),
                    "reconnecting to the broker after an idle close"
                );
            }
            let connection =
                BrokerConnection::connect(self.target.destination.clone(), &self.target.options())
                    .await?;
            self.connection = Some(connection);
        }
        self.connection
            .as_ref()
            .ok_or_else(|| BrokerError::Shutdown {
                broker: self.target.destination.clone(),
            })
    }
}

#[async_trait]
impl Sink for KafkaSinkSingle {
    fn name(&self) -> &str {
        &self.name
    }

    async fn send(&mut self, request: Request, ctx: &ConnectionContext) -> Result<(), ChainError> {
        let connection = self.connection(ctx).await?;
        if let Some(receiver) = connection.send(request).await? {
            self.pending.push_back(receiver);
        }
        Ok(())
    }

    async fn recv(&mut self, ctx: &ConnectionContext) -> Result<Response, ChainError> {
        let Some(head) = self.pending.front_mut() else {
            return std::future::pending().await;
        };
        // Cancel-safe: the receiver stays queued until it resolves.
        let result = head.await;
        self.pending.pop_front();
        let mut response = match result {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(ChainError::Broker(e)),
            // The connection completes every reply it takes; a dropped one
            // is the connection going away.
            Err(_) => {
                return Err(ChainError::Broker(BrokerError::Shutdown {
                    broker: self.target.destination.clone(),
                }));
            }
        };
        let to = AdvertisedAddress::from_socket_addr(ctx.local_addr);
        rewrite::rewrite_response(&mut response, &to).map_err(|e| {
            ChainError::Broker(BrokerError::Protocol {
                broker: self.target.destination.clone(),
                reason: e.to_string(),
            })
        })?;
        Ok(response)
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }
}
