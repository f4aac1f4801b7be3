//! The broker connections of one client connection.
//!
//! A client connection talks to every broker it needs through its own
//! [`BrokerConnection`]s, opened lazily the first time a request is routed to
//! a broker (by id, from the view's broker addresses). Before any broker id
//! is known there is the *bootstrap* connection, to the first reachable
//! `first_contact_points` entry (the starting entry rotates between client
//! connections to spread them). Once a Metadata answer names the broker
//! behind it, the bootstrap connection is adopted as that broker's connection
//! instead of opening a second one.
//!
//! A connection that closed (its broker failed, or closed it while idle) is
//! dropped and reopened on next use. A closed connection has already failed
//! every request it owed, so dropping it loses nothing; a live one is never
//! dropped while it may owe responses.
//!
//! When a connection to a broker is opened and Sluice has not heard that
//! broker's ApiVersions yet, it asks once (v3) and caches the answer in the
//! sink's shared state: it decides the versions of internal requests and
//! feeds the ApiVersions intersection shown to clients.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_chain::broker::{BrokerAddress, BrokerConnection, BrokerError};
use sluice_codec::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Request, RequestKind, ResponseKind};
use tracing::debug;

use crate::sink::Shared;
use crate::topology::{BrokerId, MetadataApplied};

/// The ApiVersions version Sluice asks brokers with.
const INTERNAL_API_VERSIONS_VERSION: i16 = 3;

/// Which connection a request went out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// The connection to a broker known by id.
    Broker(BrokerId),
    /// The bootstrap connection, before its broker id was known.
    Bootstrap,
}

/// One client connection's broker connections.
pub struct Connections {
    shared: Arc<Shared>,
    brokers: HashMap<BrokerId, BrokerConnection>,
    bootstrap: Option<BrokerConnection>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("brokers", &self.brokers.keys().collect::<Vec<_>>())
            .field("bootstrap", &self.bootstrap.is_some())
            .finish()
    }
}

impl Connections {
    /// No connection yet.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            brokers: HashMap::new(),
            bootstrap: None,
        }
    }

    /// The open connection behind `target`, if there is one.
    pub fn get(&self, target: Target) -> Option<&BrokerConnection> {
        let conn = match target {
            Target::Broker(id) => self.brokers.get(&id),
            Target::Bootstrap => self.bootstrap.as_ref(),
        };
        conn.filter(|c| !c.is_closed())
    }

    /// The connection to broker `id`, opened (or reopened) if needed.
    pub async fn broker(&mut self, id: BrokerId) -> Result<&BrokerConnection, BrokerError> {
        if self.get(Target::Broker(id)).is_none() {
            self.discard(Target::Broker(id));
            let addr = self.address_of(id)?;
            let conn = open(&self.shared, addr).await?;
            self.brokers.insert(id, conn);
        }
        self.get(Target::Broker(id))
            .ok_or_else(|| BrokerError::Shutdown {
                broker: BrokerAddress::new("unknown", 0).with_id(id.0),
            })
    }

    /// Some connection for a request any broker can serve, avoiding `avoid`
    /// (the one that just failed): the open connection with the fewest
    /// requests outstanding, else a new one to a known broker, else the
    /// bootstrap connection.
    pub async fn any(
        &mut self,
        avoid: Option<Target>,
    ) -> Result<(Target, &BrokerConnection), BrokerError> {
        let target = self.pick_any(avoid).await?;
        let conn = self.get(target).ok_or_else(|| BrokerError::Shutdown {
            broker: BrokerAddress::new("unknown", 0),
        })?;
        Ok((target, conn))
    }

    async fn pick_any(&mut self, avoid: Option<Target>) -> Result<Target, BrokerError> {
        let open = self
            .brokers
            .iter()
            .filter(|(id, c)| !c.is_closed() && avoid != Some(Target::Broker(**id)))
            .min_by_key(|(_, c)| c.outstanding())
            .map(|(id, _)| *id);
        if let Some(id) = open {
            return Ok(Target::Broker(id));
        }
        let known = self.known_brokers();
        let mut last_error = None;
        for id in known {
            if avoid == Some(Target::Broker(id)) {
                continue;
            }
            match self.broker(id).await {
                Ok(_) => return Ok(Target::Broker(id)),
                Err(e) => {
                    debug!(broker = %e.broker(), "cannot reach broker for a request any broker serves: {e}");
                    last_error = Some(e);
                }
            }
        }
        if avoid != Some(Target::Bootstrap) {
            match self.bootstrap().await {
                Ok(()) => return Ok(Target::Bootstrap),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| BrokerError::Connect {
            broker: BrokerAddress::new("any", 0),
            reason: "no other broker is known".into(),
        }))
    }

    /// The known brokers, starting at the view's round-robin pick.
    fn known_brokers(&self) -> Vec<BrokerId> {
        let view = self.shared.view.read();
        let mut ids: Vec<BrokerId> = view.brokers().map(|b| b.id).collect();
        if let Some(first) = view.any_broker()
            && let Some(at) = ids.iter().position(|id| *id == first)
        {
            ids.rotate_left(at);
        }
        ids
    }

    /// Opens the bootstrap connection if it is not open.
    async fn bootstrap(&mut self) -> Result<(), BrokerError> {
        if self.get(Target::Bootstrap).is_some() {
            return Ok(());
        }
        self.bootstrap = None;
        let points = &self.shared.contact_points;
        let start = self
            .shared
            .next_contact
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut last_error = None;
        for k in 0..points.len() {
            let addr = points[(start + k) % points.len()].clone();
            match open(&self.shared, addr).await {
                Ok(conn) => {
                    self.bootstrap = Some(conn);
                    return Ok(());
                }
                Err(e) => {
                    debug!(broker = %e.broker(), "first contact point unreachable: {e}");
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| BrokerError::Connect {
            broker: BrokerAddress::new("first_contact_points", 0),
            reason: "no contact point configured".into(),
        }))
    }

    /// Drops the connection behind `target` if it has closed (a closed
    /// connection has already failed everything it owed). Returns whether one
    /// was dropped.
    pub fn discard(&mut self, target: Target) -> bool {
        let slot = match target {
            Target::Broker(id) => match self.brokers.get(&id) {
                Some(c) if c.is_closed() => self.brokers.remove(&id),
                _ => None,
            },
            Target::Bootstrap => match &self.bootstrap {
                Some(c) if c.is_closed() => self.bootstrap.take(),
                _ => None,
            },
        };
        match slot {
            Some(old) => {
                debug!(
                    broker = %old.address(),
                    reason = %old.failure().map(|e| e.to_string()).unwrap_or_default(),
                    "dropping a closed broker connection; it is reopened on next use"
                );
                true
            }
            None => false,
        }
    }

    /// Keeps the connections in step with a Metadata answer: the bootstrap
    /// connection becomes its broker's connection, and connections to brokers
    /// that left the cluster are closed once they owe nothing.
    pub fn on_metadata(&mut self, applied: &MetadataApplied) {
        for id in &applied.removed_brokers {
            if self.brokers.get(id).is_some_and(|c| c.outstanding() == 0) {
                self.brokers.remove(id);
            }
        }
        let Some(boot) = &self.bootstrap else {
            return;
        };
        let addr = boot.address().clone();
        let id = {
            let view = self.shared.view.read();
            view.brokers()
                .find(|b| {
                    b.address.host.as_str() == addr.host && b.address.port == i32::from(addr.port)
                })
                .map(|b| b.id)
        };
        if let Some(id) = id
            && self.get(Target::Broker(id)).is_none()
            && let Some(conn) = self.bootstrap.take()
        {
            debug!(broker = %addr, broker_id = id.0, "the bootstrap connection serves broker {}", id.0);
            self.brokers.insert(id, conn);
        }
    }

    /// The address of broker `id` from the view.
    fn address_of(&self, id: BrokerId) -> Result<BrokerAddress, BrokerError> {
        let view = self.shared.view.read();
        let Some(address) = view.broker_address(id) else {
            return Err(BrokerError::Connect {
                broker: BrokerAddress::new("unknown", 0).with_id(id.0),
                reason: "the broker is not in the cluster metadata".into(),
            });
        };
        let port = u16::try_from(address.port).map_err(|_| BrokerError::Connect {
            broker: BrokerAddress::new(address.host.as_str(), 0).with_id(id.0),
            reason: format!("invalid port {} in the cluster metadata", address.port),
        })?;
        Ok(BrokerAddress::new(address.host.as_str(), port).with_id(id.0))
    }
}

/// Opens a connection to `addr` and, the first time Sluice talks to that
/// broker, learns its ApiVersions.
async fn open(shared: &Shared, addr: BrokerAddress) -> Result<BrokerConnection, BrokerError> {
    let options = shared.options_for(&addr)?;
    let conn = BrokerConnection::connect(addr, &options).await?;
    if shared.api_versions_of(conn.address()).is_none() {
        match fetch_api_versions(shared, &conn).await {
            Ok(versions) => shared.remember_api_versions(conn.address(), versions),
            Err(reason) => {
                debug!(broker = %conn.address(), "cannot learn the broker's api versions: {reason}");
            }
        }
    }
    Ok(conn)
}

/// Asks a broker for its ApiVersions (v3), bounded by the request timeout.
async fn fetch_api_versions(
    shared: &Shared,
    conn: &BrokerConnection,
) -> Result<ApiVersionsResponse, String> {
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let request = Request::from_body(
        ApiKey::ApiVersions,
        INTERNAL_API_VERSIONS_VERSION,
        0,
        Some(bytes::Bytes::from_static(b"sluice")),
        RequestKind::ApiVersions(body),
    );
    let receiver = conn
        .send(request)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no response expected")?;
    let response = tokio::time::timeout(shared.request_timeout, receiver)
        .await
        .map_err(|_| format!("no answer within {:?}", shared.request_timeout))?
        .map_err(|_| "the connection dropped the request".to_owned())?
        .map_err(|e| e.to_string())?;
    match response.into_body().map_err(|e| e.to_string())? {
        ResponseKind::ApiVersions(v) if v.error_code == 0 => Ok(v),
        ResponseKind::ApiVersions(v) => Err(format!("error code {}", v.error_code)),
        _ => Err("not an ApiVersions response".into()),
    }
}
