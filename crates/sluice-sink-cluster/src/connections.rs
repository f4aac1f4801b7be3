//! The broker connections of one client connection.
//!
//! A client connection talks to every broker it needs through its own
//! [`KafkaConnection`]s, opened lazily the first time a request is routed to
//! a broker (by id, from the view's broker addresses). Before any broker id
//! is known there is the *bootstrap* connection, to the first reachable
//! `first_contact_points` entry (the starting entry rotates between client
//! connections to spread them). Once a Metadata answer names the broker
//! behind it, the bootstrap connection is adopted as that broker's connection
//! instead of opening a second one, and named with the broker's id
//! ([`BrokerConnection::set_broker_id`]) so that its logs and metric labels
//! say which broker it is.
//!
//! # Authentication
//!
//! Until the client's authentication is decided (see [`crate::auth`]) only
//! the *auth connection* exists: the client's ApiVersions, SaslHandshake and
//! SaslAuthenticate go there, to a first contact point, untouched, and
//! nothing of Sluice's own (a broker's SASL listener accepts one ApiVersions
//! before SaslHandshake, and it must be the client's). Then
//! [`Connections::decide`] sets the [`Login`] every later connection
//! authenticates with, and the auth connection is either kept as the
//! bootstrap connection (no authentication, or PLAIN: it is authenticated as
//! the client) or retired (SCRAM: the client's own connection is not a token
//! connection). Asking for a broker connection before that is refused.
//!
//! # Replacement
//!
//! Every time a request is routed to a connection its [`ConnectionState`] is
//! checked: a closed one is reopened, and one at risk of its token or SASL
//! session expiring is replaced by a freshly authenticated one
//! ([`KafkaConnection::replace`]): the old one drains the responses it owes
//! (the pending queue keeps them in client order) and is dropped once it owes
//! nothing ([`KafkaConnection::reap`]). Each recreation is counted in
//! `sluice_broker_connections_recreated_total{reason}`.
//!
//! A connection that closed is dropped (retired while an older connection it
//! replaced still drains) and reopened on next use. A closed connection has
//! already failed every request it owed, so dropping it loses nothing; a live
//! one is never dropped while it may owe responses.
//!
//! When a connection to a broker is opened and Sluice has not heard that
//! broker's ApiVersions yet, it asks once (v3, before authenticating, which
//! Kafka allows) and caches the answer in the sink's shared state: it decides
//! the versions of internal requests and feeds the ApiVersions intersection
//! shown to clients.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sluice_chain::ChainError;
use sluice_chain::broker::{BrokerAddress, BrokerConnection, BrokerError};
use sluice_codec::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Request, RequestKind, ResponseKind};
use sluice_metrics::names;
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use crate::auth::login::{ConnError, Login};
use crate::kafka_connection::{ConnectionState, KafkaConnection, ReplaceError};
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
    /// The client's auth connection, before its authentication is decided.
    Auth,
}

/// The client's auth connection.
#[derive(Debug)]
struct AuthConnection {
    conn: BrokerConnection,
    opened_at: Instant,
}

/// One client connection's broker connections.
pub struct Connections {
    shared: Arc<Shared>,
    connection_id: u64,
    brokers: HashMap<BrokerId, KafkaConnection>,
    bootstrap: Option<KafkaConnection>,
    auth: Option<AuthConnection>,
    /// Connections taken out of use that still owe responses.
    retired: Vec<KafkaConnection>,
    /// How new connections authenticate; `None` until the client's
    /// authentication is decided.
    login: Option<Login>,
    /// Targets whose connection closed: the next open is a recreation.
    closed: HashSet<Target>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("brokers", &self.brokers.keys().collect::<Vec<_>>())
            .field("bootstrap", &self.bootstrap.is_some())
            .field("auth", &self.auth.is_some())
            .field("retired", &self.retired.len())
            .field("login", &self.login.as_ref().map(login_kind))
            .finish()
    }
}

fn login_kind(login: &Login) -> &'static str {
    match login {
        Login::None => "none",
        Login::Plain(_) => "plain",
        Login::Token(_) => "token",
    }
}

impl Connections {
    /// No connection yet.
    pub fn new(shared: Arc<Shared>, connection_id: u64) -> Self {
        Self {
            shared,
            connection_id,
            brokers: HashMap::new(),
            bootstrap: None,
            auth: None,
            retired: Vec::new(),
            login: None,
            closed: HashSet::new(),
        }
    }

    /// Whether the client's authentication is decided (connections other
    /// than the auth connection may be opened).
    pub fn decided(&self) -> bool {
        self.login.is_some()
    }

    /// Sets how every later connection authenticates. The auth connection
    /// becomes the bootstrap connection when it is authenticated as the
    /// client (PLAIN, whose SASL session lasts `session_lifetime`) or not at
    /// all; after SCRAM it is retired.
    pub fn decide(&mut self, login: Login, session_lifetime: Option<Duration>) {
        for target in self.pooled_targets() {
            self.retire(target);
        }
        if let Some(AuthConnection { conn, opened_at }) = self.auth.take()
            && !conn.is_closed()
        {
            let kept = match &login {
                Login::None => Some(KafkaConnection::general(conn, opened_at, None)),
                Login::Plain(_) => Some(KafkaConnection::general(
                    conn,
                    Instant::now(),
                    session_lifetime,
                )),
                Login::Token(_) => {
                    let old = KafkaConnection::general(conn, opened_at, None);
                    if owes(&old) {
                        self.retired.push(old);
                    }
                    None
                }
            };
            self.bootstrap = kept;
        }
        self.login = Some(login);
    }

    /// The open connection behind `target`, if there is one.
    pub fn get(&self, target: Target) -> Option<&BrokerConnection> {
        let conn = match target {
            Target::Auth => self.auth.as_ref().map(|a| &a.conn),
            _ => self.slot(target).map(KafkaConnection::connection),
        };
        conn.filter(|c| !c.is_closed())
    }

    /// The client's auth connection, opened (or reopened) if needed.
    pub async fn auth_connection(&mut self) -> Result<&BrokerConnection, ConnError> {
        self.ensure(Target::Auth).await?;
        self.get(Target::Auth).ok_or_else(|| gone(Target::Auth))
    }

    /// The connection to broker `id`, opened, reopened or replaced if needed.
    pub async fn broker(&mut self, id: BrokerId) -> Result<&BrokerConnection, ConnError> {
        self.ensure(Target::Broker(id)).await?;
        self.get(Target::Broker(id))
            .ok_or_else(|| gone(Target::Broker(id)))
    }

    /// Makes sure broker `id`'s ApiVersions are learned: through its
    /// connection once the client's authentication is decided, else through
    /// a connection opened only for that.
    pub async fn learn_api_versions(&mut self, id: BrokerId) -> Result<(), ConnError> {
        if self.decided() {
            return self.broker(id).await.map(drop);
        }
        let addr = self.address_of(id)?;
        open(&self.shared, addr).await?;
        Ok(())
    }

    /// Some connection for a request any broker can serve, avoiding `avoid`
    /// (the one that just failed): the auth connection until the client's
    /// authentication is decided; then the open connection with the fewest
    /// requests outstanding (in the local rack first), else a new one to a
    /// known broker (in the rack first), else the bootstrap connection.
    pub async fn any(
        &mut self,
        avoid: Option<Target>,
    ) -> Result<(Target, &BrokerConnection), ConnError> {
        let target = if self.decided() {
            self.pick_any(avoid).await?
        } else {
            self.ensure(Target::Auth).await?;
            Target::Auth
        };
        let conn = self.get(target).ok_or_else(|| gone(target))?;
        Ok((target, conn))
    }

    async fn pick_any(&mut self, avoid: Option<Target>) -> Result<Target, ConnError> {
        let open = self
            .brokers
            .iter()
            .filter(|(id, c)| !c.connection().is_closed() && avoid != Some(Target::Broker(**id)))
            .filter(|(_, c)| !self.shared.is_suspect(c.connection().address()))
            .min_by_key(|(id, c)| {
                let out = self.shared.out_of_rack(&self.shared.view.read(), **id);
                (out, c.connection().outstanding())
            })
            .map(|(id, _)| Target::Broker(*id));
        if let Some(target) = open {
            match self.ensure(target).await {
                Ok(()) => return Ok(target),
                Err(ConnError::Broker(e)) => {
                    debug!(connection = self.connection_id, broker = %e.broker(), "cannot renew a connection for a request any broker serves: {e}");
                }
                Err(fatal) => return Err(fatal),
            }
        }
        let mut last_error = None;
        for id in self.known_brokers() {
            if avoid == Some(Target::Broker(id)) {
                continue;
            }
            match self.ensure(Target::Broker(id)).await {
                Ok(()) => return Ok(Target::Broker(id)),
                Err(ConnError::Broker(e)) => {
                    debug!(connection = self.connection_id, broker = %e.broker(), "cannot reach broker for a request any broker serves: {e}");
                    last_error = Some(e);
                }
                Err(fatal) => return Err(fatal),
            }
        }
        if avoid != Some(Target::Bootstrap) {
            match self.ensure(Target::Bootstrap).await {
                Ok(()) => return Ok(Target::Bootstrap),
                Err(ConnError::Broker(e)) => last_error = Some(e),
                Err(fatal) => return Err(fatal),
            }
        }
        Err(ConnError::Broker(last_error.unwrap_or_else(|| {
            BrokerError::Connect {
                broker: BrokerAddress::new("any", 0),
                reason: "no other broker is known".into(),
            }
        })))
    }

    /// The known brokers, starting at the view's round-robin pick, with the
    /// suspect ones (a request to them failed recently) last.
    fn known_brokers(&self) -> Vec<BrokerId> {
        let mut ids: Vec<BrokerId> = {
            let view = self.shared.view.read();
            let mut ids: Vec<BrokerId> = view.brokers().map(|b| b.id).collect();
            if let Some(first) = view.any_broker()
                && let Some(at) = ids.iter().position(|id| *id == first)
            {
                ids.rotate_left(at);
            }
            ids
        };
        // A stable sort keeps the round-robin order within each group.
        let view = self.shared.view.read();
        ids.sort_by_key(|id| {
            (
                self.shared.is_suspect_id(&view, *id),
                self.shared.out_of_rack(&view, *id),
            )
        });
        ids
    }

    /// Makes the connection behind `target` usable: opens it if there is
    /// none, reopens it if it closed, replaces it if its token or session is
    /// at risk, and checks it belongs to this client's login.
    async fn ensure(&mut self, target: Target) -> Result<(), ConnError> {
        if target == Target::Auth {
            return self.ensure_auth().await;
        }
        self.reap_retired();
        let now = Instant::now();
        let state = self.slot_mut(target).map(|c| {
            c.reap();
            c.state(now)
        });
        match state {
            Some(ConnectionState::Open) => self.check_owner(target),
            Some(ConnectionState::AtRiskOfAuthTokenExpiry) => self.renew(target).await,
            Some(ConnectionState::Unopened) => {
                self.retire(target);
                self.closed.insert(target);
                self.open_into(target).await
            }
            None => self.open_into(target).await,
        }
    }

    /// Opens the auth connection if it is not open.
    async fn ensure_auth(&mut self) -> Result<(), ConnError> {
        if self.get(Target::Auth).is_some() {
            return Ok(());
        }
        self.auth = None;
        let mut last_error = None;
        for addr in self.contact_order() {
            let opened_at = Instant::now();
            match connect(&self.shared, addr).await {
                Ok(conn) => {
                    self.auth = Some(AuthConnection { conn, opened_at });
                    return Ok(());
                }
                Err(e) => {
                    debug!(broker = %e.broker(), "first contact point unreachable: {e}");
                    last_error = Some(e);
                }
            }
        }
        Err(no_contact_point(last_error))
    }

    /// Opens the bootstrap connection, authenticated with the client's login,
    /// to the first contact point that works.
    async fn open_bootstrap(&mut self) -> Result<KafkaConnection, ConnError> {
        let mut last_error = None;
        for addr in self.contact_order() {
            match open_with(&self.shared, self.login.as_mut(), addr).await {
                Ok(conn) => return Ok(conn),
                Err(ConnError::Broker(e)) => {
                    debug!(broker = %e.broker(), "first contact point unreachable: {e}");
                    last_error = Some(e);
                }
                Err(fatal) => return Err(fatal),
            }
        }
        Err(no_contact_point(last_error))
    }

    /// The first contact points, starting at the shared rotation.
    fn contact_order(&self) -> Vec<BrokerAddress> {
        let points = &self.shared.contact_points;
        let start = self
            .shared
            .next_contact
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (0..points.len())
            .map(|k| points[(start + k) % points.len()].clone())
            .collect()
    }

    /// Opens an authenticated connection for `target` and puts it there.
    async fn open_into(&mut self, target: Target) -> Result<(), ConnError> {
        let conn = match target {
            Target::Broker(id) => {
                let addr = self.address_of(id)?;
                self.open_authenticated(addr).await?
            }
            Target::Bootstrap => self.open_bootstrap().await?,
            Target::Auth => return self.ensure_auth().await,
        };
        if self.closed.remove(&target) {
            count_recreation("closed");
            debug!(connection = self.connection_id, broker = %conn.connection().address(), "reopened a closed broker connection");
        }
        match target {
            Target::Broker(id) => {
                self.brokers.insert(id, conn);
            }
            _ => self.bootstrap = Some(conn),
        }
        Ok(())
    }

    /// Replaces the at-risk connection behind `target` with a new one.
    async fn renew(&mut self, target: Target) -> Result<(), ConnError> {
        let Some(current) = self.slot(target) else {
            return self.open_into(target).await;
        };
        let addr = current.connection().address().clone();
        let reason = match current {
            KafkaConnection::ScramOverMtls { .. } => "token_at_risk",
            KafkaConnection::General(_) => "session",
        };
        // `replace` refuses while the previous replacement drains: say so
        // before opening a connection that would be thrown away.
        if let Some(old) = current.old_connection() {
            let e = ReplaceError::StillDraining {
                broker: old.address().clone(),
                outstanding: old.outstanding(),
            };
            return Err(self.replace_failed(&addr, &e));
        }
        let next = self.open_authenticated(addr.clone()).await?;
        let generation = match &next {
            KafkaConnection::ScramOverMtls { token, .. } => Some(token.generation),
            KafkaConnection::General(_) => None,
        };
        let Some(slot) = self.slot_mut(target) else {
            return Err(gone(target));
        };
        if let Err(e) = slot.replace(next) {
            return Err(self.replace_failed(&addr, &e));
        }
        count_recreation(reason);
        match generation {
            Some(generation) => info!(
                connection = self.connection_id,
                broker = %addr,
                broker_id = addr.id,
                token_generation = generation,
                "replaced a broker connection before its delegation token expires"
            ),
            None => debug!(
                connection = self.connection_id,
                broker = %addr,
                "replaced a broker connection before its sasl session expires"
            ),
        }
        Ok(())
    }

    fn replace_failed(&self, addr: &BrokerAddress, e: &ReplaceError) -> ConnError {
        warn!(connection = self.connection_id, broker = %addr, "closing the client: {e}");
        ConnError::Fatal(ChainError::Internal(e.to_string()))
    }

    /// Checks that the open connection behind `target` was opened for this
    /// client's login (for a token connection: with this user's token).
    fn check_owner(&self, target: Target) -> Result<(), ConnError> {
        let (Some(login), Some(conn)) = (&self.login, self.slot(target)) else {
            return Ok(());
        };
        if login.owns(conn) {
            return Ok(());
        }
        let broker = conn.connection().address();
        warn!(connection = self.connection_id, broker = %broker, "a broker connection does not belong to the client's login; closing the client");
        Err(ConnError::Fatal(ChainError::Internal(format!(
            "{broker}: the connection was not authenticated for this client"
        ))))
    }

    /// Opens a connection to `addr` authenticated with the client's login.
    async fn open_authenticated(
        &mut self,
        addr: BrokerAddress,
    ) -> Result<KafkaConnection, ConnError> {
        open_with(&self.shared, self.login.as_mut(), addr).await
    }

    /// Drops the connection behind `target` if it has closed (a closed
    /// connection has already failed everything it owed). Returns whether one
    /// was dropped.
    pub fn discard(&mut self, target: Target) -> bool {
        let failure = match target {
            Target::Auth => match &self.auth {
                Some(a) if a.conn.is_closed() => self.auth.take().map(|a| a.conn),
                _ => None,
            }
            .map(|c| (c.address().clone(), c.failure())),
            _ => match self.slot(target) {
                Some(c) if c.connection().is_closed() => {
                    let conn = c.connection();
                    let failure = (conn.address().clone(), conn.failure());
                    self.retire(target);
                    self.closed.insert(target);
                    Some(failure)
                }
                _ => None,
            },
        };
        match failure {
            Some((broker, reason)) => {
                debug!(
                    connection = self.connection_id,
                    broker = %broker,
                    reason = %reason.map(|e| e.to_string()).unwrap_or_default(),
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
            if self.brokers.get(id).is_some_and(|c| !owes(c)) {
                self.brokers.remove(id);
            }
        }
        let Some(boot) = &self.bootstrap else {
            return;
        };
        let addr = boot.connection().address().clone();
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
            // From now on its logs, errors and metric labels name broker `id`.
            if let Some(old) = conn.old_connection() {
                old.set_broker_id(id.0);
            }
            if !conn.connection().set_broker_id(id.0) {
                debug!(broker = %addr, broker_id = id.0, "the bootstrap connection already names another broker id");
            }
            debug!(broker = %addr, broker_id = id.0, "the bootstrap connection serves broker {}", id.0);
            self.retire(Target::Broker(id));
            self.brokers.insert(id, conn);
        }
    }

    fn slot(&self, target: Target) -> Option<&KafkaConnection> {
        match target {
            Target::Broker(id) => self.brokers.get(&id),
            Target::Bootstrap => self.bootstrap.as_ref(),
            Target::Auth => None,
        }
    }

    fn slot_mut(&mut self, target: Target) -> Option<&mut KafkaConnection> {
        match target {
            Target::Broker(id) => self.brokers.get_mut(&id),
            Target::Bootstrap => self.bootstrap.as_mut(),
            Target::Auth => None,
        }
    }

    fn pooled_targets(&self) -> Vec<Target> {
        self.brokers
            .keys()
            .map(|id| Target::Broker(*id))
            .chain(self.bootstrap.is_some().then_some(Target::Bootstrap))
            .collect()
    }

    /// Takes the connection behind `target` out of use; keeps it while it
    /// (or the one it replaced) still owes responses.
    fn retire(&mut self, target: Target) {
        let taken = match target {
            Target::Broker(id) => self.brokers.remove(&id),
            Target::Bootstrap => self.bootstrap.take(),
            Target::Auth => None,
        };
        if let Some(mut conn) = taken {
            conn.reap();
            if owes(&conn) {
                self.retired.push(conn);
            }
        }
    }

    fn reap_retired(&mut self) {
        if self.retired.is_empty() {
            return;
        }
        self.retired.retain_mut(|c| {
            c.reap();
            owes(c)
        });
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

/// Whether a connection (or the one it replaced) still owes responses.
fn owes(conn: &KafkaConnection) -> bool {
    let live = conn.connection();
    (!live.is_closed() && live.outstanding() > 0) || conn.old_connection().is_some()
}

fn gone(target: Target) -> ConnError {
    let broker = match target {
        Target::Broker(id) => BrokerAddress::new("unknown", 0).with_id(id.0),
        Target::Bootstrap => BrokerAddress::new("bootstrap", 0),
        Target::Auth => BrokerAddress::new("auth", 0),
    };
    ConnError::Broker(BrokerError::Shutdown { broker })
}

fn no_contact_point(last_error: Option<BrokerError>) -> ConnError {
    ConnError::Broker(last_error.unwrap_or_else(|| BrokerError::Connect {
        broker: BrokerAddress::new("first_contact_points", 0),
        reason: "no contact point configured".into(),
    }))
}

fn count_recreation(reason: &'static str) {
    metrics::counter!(names::BROKER_CONNECTIONS_RECREATED, "reason" => reason).increment(1);
}

/// Opens a connection to `addr` and authenticates it with `login`; refused
/// while the client's authentication is undecided (`None`): before that,
/// only the auth connection may exist.
async fn open_with(
    shared: &Shared,
    login: Option<&mut Login>,
    addr: BrokerAddress,
) -> Result<KafkaConnection, ConnError> {
    let Some(login) = login else {
        return Err(ConnError::Fatal(ChainError::Internal(format!(
            "{addr}: a broker connection was requested before the client's authentication was decided"
        ))));
    };
    let conn = open(shared, addr).await?;
    login.authenticate(conn, Instant::now()).await
}

/// Opens a connection to `addr` and nothing else: for the auth connection,
/// which carries only the client's requests (a broker's SASL listener
/// accepts a single ApiVersions before SaslHandshake, and it is the
/// client's).
async fn connect(shared: &Shared, addr: BrokerAddress) -> Result<BrokerConnection, BrokerError> {
    let options = shared.options_for(&addr)?;
    BrokerConnection::connect(addr, &options).await
}

/// Opens a connection to `addr` and, the first time Sluice talks to that
/// broker, learns its ApiVersions.
async fn open(shared: &Shared, addr: BrokerAddress) -> Result<BrokerConnection, BrokerError> {
    let conn = connect(shared, addr).await?;
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
