//! One probe round: every candidate broker at once (see the parent module
//! for what is asked and why).
//!
//! Each round opens a fresh connection to each broker and closes it when
//! done, so that the probe holds no broker connection between rounds (an
//! idle Sluice keeps none, and the connections that client traffic holds
//! are all there is to see on the brokers). Its connections are marked
//! [`probe`](BrokerConnectOptions::probe): not counted in the broker
//! connection metrics. Each broker has a slot that outlives rounds and
//! remembers what the broker's listener is: the first round asks
//! SaslHandshake to find out, later rounds only ApiVersions on a SASL
//! listener (it accepts nothing else before authentication) and ApiVersions
//! then Metadata on one without.

use std::collections::HashMap;

use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslHandshakeRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::{BrokerProbe, BrokerState, PROBE_TIMEOUT, ProbeTargets, Round};
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerConnection, BrokerError, Call};

/// Client id and software name of the probe's requests.
const CLIENT_ID: &str = "sluice-readiness";
/// ApiVersions version sent (v3: with the client's software name).
const API_VERSIONS_VERSION: i16 = 3;
/// SaslHandshake version sent.
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// The newest Metadata version the probe asks (topic ids, no topics asked).
const METADATA_VERSION_MAX: i16 = 12;
/// Kafka's `ILLEGAL_SASL_STATE`: SaslHandshake on a listener without SASL.
const ILLEGAL_SASL_STATE: i16 = ResponseError::IllegalSaslState.code();

/// The slots of every broker probed last round.
#[derive(Default)]
pub(super) struct Prober {
    slots: HashMap<String, Slot>,
}

impl Prober {
    /// Probes every candidate of `targets` at once.
    pub(super) async fn round(&mut self, targets: &dyn ProbeTargets) -> Round {
        let mut candidates: Vec<(String, BrokerAddress)> = Vec::new();
        for addr in targets.candidates() {
            let key = addr.host_port().to_string();
            if !candidates.iter().any(|(k, _)| *k == key) {
                candidates.push((key, addr));
            }
        }
        self.slots
            .retain(|key, _| candidates.iter().any(|(k, _)| k == key));
        for (key, addr) in &candidates {
            self.slots
                .entry(key.clone())
                .or_insert_with(|| Slot::new(addr.clone()));
        }
        let probes = self.slots.iter_mut().map(|(key, slot)| {
            let options = targets.options_for(&slot.address);
            async move {
                BrokerProbe {
                    address: key.clone(),
                    state: slot.probe(options).await,
                }
            }
        });
        let mut brokers = futures::future::join_all(probes).await;
        brokers.sort_by(|a, b| a.address.cmp(&b.address));
        Round {
            at: Instant::now(),
            brokers,
        }
    }
}

/// One broker across rounds.
struct Slot {
    address: BrokerAddress,
    /// Whether its listener requires SASL, once known.
    sasl: Option<bool>,
    /// The Metadata version to ask, from its ApiVersions.
    metadata_version: i16,
}

impl Slot {
    fn new(address: BrokerAddress) -> Self {
        Self {
            address,
            sasl: None,
            metadata_version: METADATA_VERSION_MAX,
        }
    }

    /// Probes the broker, within the connect timeout and three requests.
    async fn probe(&mut self, options: Result<BrokerConnectOptions, BrokerError>) -> BrokerState {
        let mut options = match options {
            Ok(options) => options,
            Err(e) => return BrokerState::Unreachable(e.to_string()),
        };
        options.probe = true;
        let budget = options.connect_timeout + PROBE_TIMEOUT * 3;
        match tokio::time::timeout(budget, self.run(&options)).await {
            Ok(state) => state,
            Err(_) => {
                BrokerState::Unreachable(format!("no answer within {}ms", budget.as_millis()))
            }
        }
    }

    /// One connection: ApiVersions, SaslHandshake while the listener is not
    /// known, Metadata without SASL. Dropped (closed) at the end.
    async fn run(&mut self, options: &BrokerConnectOptions) -> BrokerState {
        let conn = match BrokerConnection::connect(self.address.clone(), options).await {
            Ok(conn) => conn,
            Err(e) => return BrokerState::Unreachable(e.to_string()),
        };
        match api_versions(&conn).await {
            Ok(version) => self.metadata_version = version,
            Err(e) => return BrokerState::Unreachable(e),
        }
        let sasl = match self.sasl {
            Some(known) => known,
            None => match requires_sasl(&conn).await {
                Ok(sasl) => sasl,
                Err(e) => return BrokerState::NoMetadata(e),
            },
        };
        self.sasl = Some(sasl);
        if sasl {
            return BrokerState::AuthenticationRequired;
        }
        match metadata(&conn, self.metadata_version).await {
            Ok(brokers) => BrokerState::Metadata { brokers },
            Err(e) => {
                // Ask again next round: the listener may have changed.
                self.sasl = None;
                BrokerState::NoMetadata(e)
            }
        }
    }
}

/// ApiVersions; returns the Metadata version to ask.
async fn api_versions(conn: &BrokerConnection) -> Result<i16, String> {
    let name = StrBytes::from_static_str(CLIENT_ID);
    let version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
    let body = ApiVersionsRequest::default()
        .with_client_software_name(name)
        .with_client_software_version(version);
    let answer = call(conn, API_VERSIONS_VERSION, body).await?;
    if answer.error_code != 0 {
        return Err(format!(
            "{}: ApiVersions error {}",
            conn.address(),
            answer.error_code
        ));
    }
    let range = answer
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Metadata as i16)
        .map(|k| (k.min_version, k.max_version));
    Ok(match range {
        Some((min, max)) => max.min(METADATA_VERSION_MAX).max(min),
        None => METADATA_VERSION_MAX,
    })
}

/// Whether the listener requires SASL: on one without, a broker answers
/// SaslHandshake with `ILLEGAL_SASL_STATE`.
async fn requires_sasl(conn: &BrokerConnection) -> Result<bool, String> {
    let body = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let answer = call(conn, SASL_HANDSHAKE_VERSION, body).await?;
    Ok(answer.error_code != ILLEGAL_SASL_STATE)
}

/// Metadata of no topic; returns how many brokers it lists.
async fn metadata(conn: &BrokerConnection, version: i16) -> Result<usize, String> {
    let body = MetadataRequest::default()
        .with_topics(Some(Vec::new()))
        .with_allow_auto_topic_creation(false);
    let answer = call(conn, version, body).await?;
    Ok(answer.brokers.len())
}

/// Sends `body` and waits, within [`PROBE_TIMEOUT`], for its answer; a
/// failure is the probe's reason (what `/ready` reports).
async fn call<C: Call>(
    conn: &BrokerConnection,
    version: i16,
    body: C,
) -> Result<C::Response, String> {
    conn.call_as(CLIENT_ID, version, body, PROBE_TIMEOUT)
        .await
        .map_err(|e| e.to_string())
}
