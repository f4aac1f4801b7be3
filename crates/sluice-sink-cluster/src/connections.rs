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
//! Until the client's authentication is decided (see [`sluice_cluster::client_auth`]) only
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
//! Every time a request is routed to a target its [`ConnectionState`] is
//! checked (the states and their timeline: [`crate::kafka_connection`]): a
//! closed one is reopened, and one at risk of its token or SASL session
//! expiring is replaced by a freshly authenticated one
//! ([`KafkaConnection::replace`]). The replaced connection joins the one
//! [`Draining`] list, where it answers what it owes (the pending queue keeps
//! the answers in client order) and is dropped once it owes nothing. Each
//! recreation is counted in `sluice_broker_connections_recreated_total{reason}`.
//!
//! A connection that closed is dropped and reopened on next use. A closed
//! connection has already failed every request it owed, so dropping it loses
//! nothing; a live one is never dropped while it may owe responses.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sluice_auth::{AuthError, sasl_handshake};
use sluice_broker::{BrokerAddress, BrokerConnection, BrokerError, Unaddressed};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use sluice_metrics::names;

use crate::close::Invariant;
pub(crate) use crate::kafka_connection::login::{ConnError, Login};
use crate::kafka_connection::open::{connect, open, open_with};
use crate::kafka_connection::{Auth, ConnectionState, Draining, KafkaConnection, Link};
use crate::sink::Shared;
use sluice_cluster::client_auth::PlainCredentials;
use sluice_cluster::topology::{BrokerId, MetadataApplied};

/// Which connection a request went out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// The connection to a broker known by id.
    Broker(BrokerId),
    /// The bootstrap connection, before its broker id was known.
    Bootstrap,
    /// The client's auth connection, before its authentication is decided.
    Auth,
}

/// One client connection's broker connections.
pub(crate) struct Connections {
    /// The sink's state shared by every client connection: the cluster view
    /// (where each broker id is), connect options and TLS, cached
    /// ApiVersions, the contact points and their rotation, the token task.
    /// Shared because the client connections of one sink must agree on the
    /// cluster, and learn each broker's versions once for all of them.
    shared: Arc<Shared>,
    /// The live connection of each target: at most one per broker, one
    /// bootstrap connection before its broker is known, and the auth
    /// connection until the client's authentication is decided. One per
    /// broker because a broker answers one connection's requests in order,
    /// which the pending queue relies on, and because a client must not cost
    /// a broker more connections than it would without Sluice.
    slots: HashMap<Target, KafkaConnection>,
    /// Connections taken out of use (replaced, retired) that still owe
    /// answers: the one draining list. Kept rather than dropped so that the
    /// requests they owe are answered, not failed.
    draining: Draining,
    /// How new connections authenticate; `None` until the client's
    /// authentication is decided. Until then only the auth connection may be
    /// opened: any other could not yet authenticate as the client.
    login: Option<Login>,
    /// Targets whose connection closed: the next open there is a recreation,
    /// counted in `sluice_broker_connections_recreated_total{reason="closed"}`
    /// and logged as such, which a first open is not.
    closed: HashSet<Target>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("slots", &self.slots.keys().collect::<Vec<_>>())
            .field("draining", &self.draining.len())
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
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            slots: HashMap::new(),
            draining: Draining::default(),
            login: None,
            closed: HashSet::new(),
        }
    }

    /// Whether the client's authentication is decided (connections other
    /// than the auth connection may be opened).
    pub(crate) fn decided(&self) -> bool {
        self.login.is_some()
    }

    /// Sets how every later connection authenticates. The auth connection
    /// becomes the bootstrap connection when it is authenticated as the
    /// client (PLAIN, whose SASL session lasts `session_lifetime` from now)
    /// or not at all; after SCRAM it drains (the client's own connection is
    /// not a token connection).
    pub(crate) fn decide(&mut self, login: Login, session_lifetime: Option<Duration>) {
        for target in self.pooled_targets() {
            self.retire(target);
        }
        if let Some(auth) = self.slots.remove(&Target::Auth)
            && !auth.link().is_closed()
        {
            match &login {
                Login::None => {
                    let opened_at = auth.opened_at();
                    let kept = auth.reauthenticated(Auth::General, opened_at, None);
                    self.slots.insert(Target::Bootstrap, kept);
                }
                Login::Plain(_) => {
                    let kept =
                        auth.reauthenticated(Auth::General, Instant::now(), session_lifetime);
                    self.slots.insert(Target::Bootstrap, kept);
                }
                Login::Token(_) => auth.retire(&mut self.draining),
            }
        }
        self.login = Some(login);
    }

    /// Opens a fresh connection for a client's re-authentication (KIP-368):
    /// unauthenticated, to the first contact point that answers, with
    /// Sluice's own SaslHandshake for `mechanism` sent on it, so that the
    /// client's SaslAuthenticate rounds follow there. It takes the auth
    /// connection's slot (an earlier one is retired). A broker that cannot be
    /// reached or fails is skipped; one that refuses the mechanism ends the
    /// search with its refusal.
    pub(crate) async fn open_reauth(&mut self, mechanism: &str) -> Result<(), AuthError> {
        self.end_reauth();
        let mut last_error = None;
        for addr in self.contact_order() {
            let opened_at = Instant::now();
            let conn = match connect(&self.shared, addr).await {
                Ok(conn) => conn,
                Err(e) => {
                    debug!(broker = %e.target(), "first contact point unreachable for a re-authentication: {e}");
                    last_error = Some(AuthError::Broker(e));
                    continue;
                }
            };
            match sasl_handshake(&conn, mechanism).await {
                Ok(()) => {
                    let auth = KafkaConnection::new(conn, Auth::ClientSasl, opened_at, None);
                    self.slots.insert(Target::Auth, auth);
                    return Ok(());
                }
                Err(e @ (AuthError::MechanismNotEnabled { .. } | AuthError::ErrorCode { .. })) => {
                    return Err(e);
                }
                Err(e) => {
                    debug!(broker = %conn.address(), "re-authentication handshake failed: {e}");
                    last_error = Some(e);
                }
            }
        }
        Err(
            last_error.unwrap_or(AuthError::Broker(BrokerError::Unaddressed(
                Unaddressed::NoContactPoint,
            ))),
        )
    }

    /// The connection a re-authentication's first round went on; gone if it
    /// closed since (a later round cannot go to another broker).
    pub(crate) fn reauth_connection(&self) -> Result<&BrokerConnection, ConnError> {
        self.get(Target::Auth)
            .ok_or_else(|| self.gone(Target::Auth))
    }

    /// Retires the re-authentication connection, if there is one (it drains
    /// while it owes an answer).
    pub(crate) fn end_reauth(&mut self) {
        if self.decided() {
            self.retire(Target::Auth);
        }
    }

    /// After a PLAIN re-authentication: later connections replay the
    /// credentials the broker just accepted (the password may have changed).
    pub(crate) fn replay_credentials(&mut self, credentials: Arc<PlainCredentials>) {
        if let Some(Login::Plain(current)) = &mut self.login {
            *current = credentials;
        }
    }

    /// The open connection behind `target`, if there is one.
    pub(crate) fn get(&self, target: Target) -> Option<&BrokerConnection> {
        self.slots
            .get(&target)
            .map(KafkaConnection::link)
            .filter(|c| !c.is_closed())
    }

    /// The connection behind `target` if a request may go out on it now
    /// without opening, reopening or replacing anything: the checks of
    /// [`Self::ensure`], without waiting. For work that may as well be
    /// skipped (a fetch read ahead): a connection at risk is left to the
    /// next request that must go out, which replaces it.
    pub(crate) fn ready(&self, target: Target) -> Option<&BrokerConnection> {
        let conn = self.slots.get(&target)?;
        let owned = self.login.as_ref().is_none_or(|login| login.owns(conn));
        (owned && conn.state(Instant::now()) == ConnectionState::Open).then(|| conn.link())
    }

    /// The client's auth connection, opened (or reopened) if needed.
    pub(crate) async fn auth_connection(&mut self) -> Result<&BrokerConnection, ConnError> {
        self.ensure(Target::Auth).await?;
        self.get(Target::Auth)
            .ok_or_else(|| self.gone(Target::Auth))
    }

    /// The connection to broker `id`, opened, reopened or replaced if needed.
    pub(crate) async fn broker(&mut self, id: BrokerId) -> Result<&BrokerConnection, ConnError> {
        self.ensure(Target::Broker(id)).await?;
        self.get(Target::Broker(id))
            .ok_or_else(|| self.gone(Target::Broker(id)))
    }

    /// Makes sure broker `id`'s ApiVersions are learned: through its
    /// connection once the client's authentication is decided, else through
    /// a connection opened only for that.
    pub(crate) async fn learn_api_versions(&mut self, id: BrokerId) -> Result<(), ConnError> {
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
    pub(crate) async fn any(
        &mut self,
        avoid: Option<Target>,
    ) -> Result<(Target, &BrokerConnection), ConnError> {
        let target = if self.decided() {
            self.pick_any(avoid).await?
        } else {
            self.ensure(Target::Auth).await?;
            Target::Auth
        };
        let conn = self.get(target).ok_or_else(|| self.gone(target))?;
        Ok((target, conn))
    }

    async fn pick_any(&mut self, avoid: Option<Target>) -> Result<Target, ConnError> {
        let open = self
            .slots
            .iter()
            .filter_map(|(target, c)| match target {
                Target::Broker(id) => Some((*id, c.link())),
                _ => None,
            })
            .filter(|(id, c)| !c.is_closed() && avoid != Some(Target::Broker(*id)))
            .filter(|(_, c)| !self.shared.is_suspect(c.address()))
            .min_by_key(|(id, c)| {
                let out = self.shared.out_of_rack(&self.shared.view.read(), *id);
                (out, c.outstanding())
            })
            .map(|(id, _)| Target::Broker(id));
        if let Some(target) = open {
            match self.ensure(target).await {
                Ok(()) => return Ok(target),
                Err(ConnError::Broker(e)) => {
                    debug!(broker = %e.target(), "cannot renew a connection for a request any broker serves: {e}");
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
                    debug!(broker = %e.target(), "cannot reach broker for a request any broker serves: {e}");
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
        Err(ConnError::Broker(last_error.unwrap_or(
            BrokerError::Unaddressed(Unaddressed::NoOtherBroker),
        )))
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
        self.draining.reap();
        if target == Target::Auth {
            return self.ensure_auth().await;
        }
        let now = Instant::now();
        let state = self
            .slots
            .get(&target)
            .map_or(ConnectionState::Closed, |c| c.state(now));
        match state {
            ConnectionState::Open => self.check_owner(target),
            ConnectionState::AtRiskOfAuthExpiry => self.renew(target).await,
            ConnectionState::Closed => {
                if self.slots.remove(&target).is_some() {
                    // Closed: it has failed whatever it owed.
                    self.closed.insert(target);
                }
                self.open_into(target).await
            }
        }
    }

    /// Opens the auth connection if it is not open: unauthenticated, to the
    /// first contact point that answers.
    async fn ensure_auth(&mut self) -> Result<(), ConnError> {
        if self.get(Target::Auth).is_some() {
            return Ok(());
        }
        self.slots.remove(&Target::Auth);
        let mut last_error = None;
        for addr in self.contact_order() {
            let opened_at = Instant::now();
            match connect(&self.shared, addr).await {
                Ok(conn) => {
                    let auth = KafkaConnection::new(conn, Auth::ClientSasl, opened_at, None);
                    self.slots.insert(Target::Auth, auth);
                    return Ok(());
                }
                Err(e) => {
                    debug!(broker = %e.target(), "first contact point unreachable: {e}");
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
                    debug!(broker = %e.target(), "first contact point unreachable: {e}");
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
            debug!(broker = %conn.link().address(), "reopened a closed broker connection");
        }
        self.slots.insert(target, conn);
        Ok(())
    }

    /// Replaces the at-risk connection behind `target` with a new one; the
    /// old one drains.
    async fn renew(&mut self, target: Target) -> Result<(), ConnError> {
        let Some(current) = self.slots.get(&target) else {
            return self.open_into(target).await;
        };
        let addr = current.link().address().clone();
        let reason = current.renewal_reason();
        let next = self.open_authenticated(addr.clone()).await?;
        let generation = match next.auth() {
            Auth::Token(token) => Some(token.generation()),
            Auth::ClientSasl | Auth::General => None,
        };
        let Some(slot) = self.slots.get_mut(&target) else {
            return Err(self.gone(target));
        };
        slot.replace(next, &mut self.draining);
        count_recreation(reason);
        match generation {
            Some(generation) => info!(
                broker = %addr,
                broker_id = addr.id,
                token_generation = generation,
                draining = self.draining.len(),
                "replaced a broker connection before its delegation token expires"
            ),
            None => debug!(
                broker = %addr,
                draining = self.draining.len(),
                "replaced a broker connection before its sasl session expires"
            ),
        }
        Ok(())
    }

    /// Checks that the open connection behind `target` was opened for this
    /// client's login (for a token connection: with this user's token).
    fn check_owner(&self, target: Target) -> Result<(), ConnError> {
        let (Some(login), Some(conn)) = (&self.login, self.slots.get(&target)) else {
            return Ok(());
        };
        if login.owns(conn) {
            return Ok(());
        }
        let broker = conn.link().address();
        warn!(broker = %broker, "a broker connection does not belong to the client's login; closing the client");
        Err(ConnError::Fatal(
            Invariant::ConnectionOfAnotherLogin(broker.clone()).into(),
        ))
    }

    /// Opens a connection to `addr` authenticated with the client's login.
    async fn open_authenticated(
        &mut self,
        addr: BrokerAddress,
    ) -> Result<KafkaConnection, ConnError> {
        open_with(&self.shared, self.login.as_mut(), addr).await
    }

    /// Ends the connection behind `target` at once with `error`, then drops
    /// it (see [`BrokerConnection::abort`]): for a broker that hangs and has
    /// left the cluster, whose owed requests were answered as failed.
    pub(crate) fn abort(&mut self, target: Target, error: BrokerError) {
        if let Some(conn) = self.slots.get(&target) {
            conn.link().abort(error);
            self.discard(target);
        }
    }

    /// Drops the connection behind `target` if it has closed (a closed
    /// connection has already failed everything it owed). Returns whether one
    /// was dropped.
    pub(crate) fn discard(&mut self, target: Target) -> bool {
        if !self
            .slots
            .get(&target)
            .is_some_and(|c| c.link().is_closed())
        {
            return false;
        }
        let Some(conn) = self.slots.remove(&target) else {
            return false;
        };
        if target != Target::Auth {
            self.closed.insert(target);
        }
        let link = conn.link();
        debug!(
            broker = %link.address(),
            reason = %link.failure().map(|e| e.to_string()).unwrap_or_default(),
            "dropping a closed broker connection; it is reopened on next use"
        );
        true
    }

    /// Keeps the connections in step with a Metadata answer: the bootstrap
    /// connection becomes its broker's connection, and connections to brokers
    /// that left the cluster are closed once they owe nothing.
    pub(crate) fn on_metadata(&mut self, applied: &MetadataApplied) {
        for id in &applied.removed_brokers {
            let target = Target::Broker(*id);
            if self.slots.get(&target).is_some_and(|c| !c.link().owes()) {
                self.slots.remove(&target);
            }
        }
        let Some(boot) = self.slots.get(&Target::Bootstrap) else {
            return;
        };
        let addr = boot.link().address().clone();
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
            && let Some(conn) = self.slots.remove(&Target::Bootstrap)
        {
            // From now on its logs, errors and metric labels name broker `id`.
            if !conn.link().set_broker_id(id.0) {
                debug!(broker = %addr, broker_id = id.0, "the bootstrap connection already names another broker id");
            }
            debug!(broker = %addr, broker_id = id.0, "the bootstrap connection serves broker {}", id.0);
            self.retire(Target::Broker(id));
            self.slots.insert(Target::Broker(id), conn);
        }
    }

    /// The targets of connections opened with the client's login.
    fn pooled_targets(&self) -> Vec<Target> {
        self.slots
            .keys()
            .copied()
            .filter(|t| *t != Target::Auth)
            .collect()
    }

    /// Takes the connection behind `target` out of use; it drains while it
    /// still owes responses.
    fn retire(&mut self, target: Target) {
        if let Some(conn) = self.slots.remove(&target) {
            conn.retire(&mut self.draining);
        }
    }

    /// The address of broker `id` from the view.
    fn address_of(&self, id: BrokerId) -> Result<BrokerAddress, BrokerError> {
        let view = self.shared.view.read();
        let Some(address) = view.broker_address(id) else {
            return Err(BrokerError::Unaddressed(Unaddressed::NotInMetadata {
                id: id.0,
            }));
        };
        let port = u16::try_from(address.port).map_err(|_| {
            BrokerError::Unaddressed(Unaddressed::InvalidPort {
                id: id.0,
                host: address.host.to_string(),
                port: address.port,
            })
        })?;
        Ok(BrokerAddress::new(address.host.as_str(), port).with_id(id.0))
    }

    /// The error for a target found without an open connection right after
    /// it was opened: the failure of its connection, which closed since
    /// (or was closed by Sluice); no connection at all is a bug.
    fn gone(&self, target: Target) -> ConnError {
        match self.slots.get(&target).map(KafkaConnection::link) {
            Some(link) => {
                ConnError::Broker(link.failure().unwrap_or_else(|| BrokerError::Shutdown {
                    broker: link.address().clone(),
                }))
            }
            None => ConnError::Fatal(Invariant::NoConnection(target).into()),
        }
    }
}

fn no_contact_point(last_error: Option<BrokerError>) -> ConnError {
    ConnError::Broker(last_error.unwrap_or(BrokerError::Unaddressed(Unaddressed::NoContactPoint)))
}

fn count_recreation(reason: &'static str) {
    metrics::counter!(names::BROKER_CONNECTIONS_RECREATED, "reason" => reason).increment(1);
}
