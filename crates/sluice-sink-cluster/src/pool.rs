//! The broker connections of one client connection, and the one gate every
//! request to a broker passes.
//!
//! A client connection talks to every broker it needs through its own
//! connections, one per [`Target`] slot ([`slot`]: the one state machine of
//! a slot and its diagram), opened lazily the first time a request is
//! routed there. Before any broker id is known there is the *bootstrap*
//! connection, to the first reachable `first_contact_points` entry (the
//! starting entry rotates between client connections to spread them). Once
//! a Metadata answer names the broker behind it, it is adopted as that
//! broker's connection and named with the broker's id
//! ([`BrokerConnection::set_broker_id`](sluice_broker::BrokerConnection::set_broker_id)) for its logs and metric labels.
//!
//! # The gate
//!
//! Every send, the client's and Sluice's own, takes a [`Sendable`], and
//! only the gate makes one: it feeds the slot [`Event::Check`] and acts on
//! the answer. A closed connection is reopened, one whose token or SASL
//! session is due is replaced by a freshly logged-in one (the old one
//! drains: [`slot`]), a broker marked down is refused at once
//! ([`health`]), and the connection must belong to the client's login.
//! Each recreation is counted in
//! `sluice_broker_connections_recreated_total{reason}`. Work that may as
//! well be skipped (a fetch read ahead) asks [`Pool::ready`], the same gate
//! without opening or waiting.
//!
//! # Authentication
//!
//! Until the client's authentication is decided (see
//! [`sluice_cluster::client_auth`]) only the *auth connection* exists: the
//! client's ApiVersions, SaslHandshake and SaslAuthenticate go there, to a
//! first contact point, untouched. Then [`Pool::decide`] sets the [`Login`]
//! every later connection authenticates with, and the auth connection is
//! either kept as the bootstrap connection (no authentication, or PLAIN: it
//! is authenticated as the client) or retired (SCRAM: the client's own
//! connection is not a token connection). Asking for a broker connection
//! before that is refused.

pub(crate) mod dial;
mod gate;
pub(crate) mod login;
pub(crate) mod slot;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_auth::{AuthError, sasl_handshake};
use sluice_broker::{BrokerAddress, BrokerError, Unaddressed};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use sluice_metrics::names;

use crate::close::Invariant;
use crate::shared::Shared;
use dial::{connect, open, open_with};
pub(crate) use gate::Sendable;
pub(crate) use login::{ConnError, Login};
use slot::{Action, Auth, Event, KafkaConnection, Link, Renewal, Slot};
use sluice_cluster::client_auth::PlainCredentials;
use sluice_cluster::topology::{BrokerId, MetadataApplied};

pub(crate) use crate::target::Target;

/// One client connection's broker connections.
pub(crate) struct Pool {
    /// The sink's state shared by every client connection: the cluster view
    /// (where each broker id is), connect options and TLS, cached
    /// ApiVersions, the contact points and their rotation, the token task,
    /// the brokers' health. Shared because the client connections of one
    /// sink must agree on the cluster and on which brokers are healthy.
    shared: Arc<Shared>,
    /// The slot of each target: at most one connection per broker, one
    /// bootstrap connection before its broker is known, and the auth
    /// connection until the client's authentication is decided. One per
    /// broker because a broker answers one connection's requests in order,
    /// which the pending queue relies on, and because a client must not cost
    /// a broker more connections than it would without Sluice.
    slots: HashMap<Target, Slot>,
    /// How new connections authenticate; `None` until the client's
    /// authentication is decided. Until then only the auth connection may be
    /// opened: any other could not yet authenticate as the client.
    login: Option<Login>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("slots", &self.slots.keys().collect::<Vec<_>>())
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

impl Pool {
    /// No connection yet.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            slots: HashMap::new(),
            login: None,
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
        let pooled: Vec<Target> = self
            .slots
            .keys()
            .copied()
            .filter(|t| *t != Target::Auth)
            .collect();
        for target in pooled {
            self.on(target, Event::Retire);
        }
        if let Some(auth) = self.take(Target::Auth) {
            let kept = match &login {
                Login::None => Some(auth.reauthenticated(Auth::General, None, None)),
                Login::Plain(_) => Some(auth.reauthenticated(
                    Auth::General,
                    Some(Instant::now()),
                    session_lifetime,
                )),
                // Dropped: it drains.
                Login::Token(_) => None,
            };
            if let Some(kept) = kept {
                self.on(Target::Bootstrap, Event::Opened(kept));
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
                    self.on(Target::Auth, Event::Opened(auth));
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

    /// The connection a re-authentication's first round went on, through
    /// the gate without opening anything: gone if it closed since (a later
    /// round cannot go to another broker).
    pub(crate) fn reauth_connection(&mut self) -> Result<Sendable<'_>, ConnError> {
        // A closed one fails with its own failure, before the check drops it.
        self.pass(Target::Auth)?;
        let check = Event::Check(Instant::now());
        match self.slots.get_mut(&Target::Auth).map(|slot| slot.on(check)) {
            Some(Action::Send) => self.pass(Target::Auth),
            _ => Err(self.gone(Target::Auth)),
        }
    }

    /// Retires the re-authentication connection, if there is one (it drains
    /// while it owes an answer).
    pub(crate) fn end_reauth(&mut self) {
        if self.decided() {
            self.on(Target::Auth, Event::Retire);
        }
    }

    /// After a PLAIN re-authentication: later connections replay the
    /// credentials the broker just accepted (the password may have changed).
    pub(crate) fn replay_credentials(&mut self, credentials: Arc<PlainCredentials>) {
        if let Some(Login::Plain(current)) = &mut self.login {
            *current = credentials;
        }
    }

    /// The gate without opening, renewing or waiting: the connection behind
    /// `target` if a request may go out on it now as it is. For work that
    /// may as well be skipped (a fetch read ahead): a connection at risk is
    /// left to the next request that must go out, which renews it.
    pub(crate) fn ready(&mut self, target: Target) -> Option<Sendable<'_>> {
        let slot = self.slots.get_mut(&target)?;
        match slot.on(Event::Check(Instant::now())) {
            Action::Send => self.pass(target).ok(),
            _ => None,
        }
    }

    /// The client's auth connection, opened (or reopened) if needed.
    pub(crate) async fn auth_connection(&mut self) -> Result<Sendable<'_>, ConnError> {
        self.ensure(Target::Auth).await?;
        self.pass(Target::Auth)
    }

    /// The connection to broker `id`, opened, reopened or renewed if needed.
    pub(crate) async fn broker(&mut self, id: BrokerId) -> Result<Sendable<'_>, ConnError> {
        self.ensure(Target::Broker(id)).await?;
        self.pass(Target::Broker(id))
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
    ) -> Result<(Target, Sendable<'_>), ConnError> {
        let target = if self.decided() {
            self.pick_any(avoid).await?
        } else {
            self.ensure(Target::Auth).await?;
            Target::Auth
        };
        Ok((target, self.pass(target)?))
    }

    async fn pick_any(&mut self, avoid: Option<Target>) -> Result<Target, ConnError> {
        let open = self
            .slots
            .iter()
            .filter_map(|(target, slot)| match (target, slot.conn()) {
                (Target::Broker(id), Some(c)) => Some((*id, c.link())),
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

    /// The gate's first half: makes the connection behind `target` usable,
    /// as its slot's [`Event::Check`] says: opens it if there is none,
    /// reopens it if it closed, renews it if its token or session is due.
    async fn ensure(&mut self, target: Target) -> Result<(), ConnError> {
        let action = self
            .slots
            .entry(target)
            .or_default()
            .on(Event::Check(Instant::now()));
        match action {
            Action::Send => Ok(()),
            Action::Renew(why) => self.renew(target, why).await,
            _ => self.open_into(target).await,
        }
    }

    /// The gate's second half, the one place a [`Sendable`] is made: the
    /// slot's connection, once it is open and belongs to this client's
    /// login (for a token connection: with this user's token).
    fn pass(&self, target: Target) -> Result<Sendable<'_>, ConnError> {
        let Some(conn) = self.slots.get(&target).and_then(Slot::conn) else {
            return Err(self.gone(target));
        };
        if conn.link().is_closed() {
            return Err(self.gone(target));
        }
        if let Some(login) = &self.login
            && target != Target::Auth
            && !login.owns(conn)
        {
            let broker = conn.link().address();
            warn!(broker = %broker, "a broker connection does not belong to the client's login; closing the client");
            return Err(ConnError::Fatal(
                Invariant::ConnectionOfAnotherLogin(broker.clone()).into(),
            ));
        }
        Ok(Sendable::new(conn.link()))
    }

    /// Feeds `event` to `target`'s slot and logs or counts what it did.
    fn on(&mut self, target: Target, event: Event) -> Action {
        let Some(slot) = self.slots.get_mut(&target) else {
            return match event {
                Event::Opened(conn) => self
                    .slots
                    .entry(target)
                    .or_default()
                    .on(Event::Opened(conn)),
                _ => Action::None,
            };
        };
        let action = slot.on(event);
        match action {
            Action::Reopened if target != Target::Auth => {
                count_recreation("closed");
                debug!(target = ?target, "reopened a closed broker connection");
            }
            Action::Renewed(why) => count_recreation(why.label()),
            _ => {}
        }
        action
    }

    /// Takes the connection out of `target`'s slot, to move it elsewhere.
    fn take(&mut self, target: Target) -> Option<KafkaConnection> {
        match self.on(target, Event::Take) {
            Action::Taken(conn) if !conn.link().is_closed() => Some(conn),
            _ => None,
        }
    }

    /// Opens the auth connection: unauthenticated, to the first contact
    /// point that answers.
    async fn open_auth(&mut self) -> Result<KafkaConnection, ConnError> {
        let mut last_error = None;
        for addr in self.contact_order() {
            let opened_at = Instant::now();
            match connect(&self.shared, addr).await {
                Ok(conn) => {
                    return Ok(KafkaConnection::new(
                        conn,
                        Auth::ClientSasl,
                        opened_at,
                        None,
                    ));
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

    /// Opens a connection for `target` (logged in with the client's login,
    /// but for the auth connection) and puts it there.
    async fn open_into(&mut self, target: Target) -> Result<(), ConnError> {
        let conn = match target {
            Target::Broker(id) => {
                let addr = self.address_of(id)?;
                open_with(&self.shared, self.login.as_mut(), addr).await?
            }
            Target::Bootstrap => self.open_bootstrap().await?,
            Target::Auth => self.open_auth().await?,
        };
        self.on(target, Event::Opened(conn));
        Ok(())
    }

    /// Replaces the at-risk connection behind `target` with a new one; the
    /// old one drains.
    async fn renew(&mut self, target: Target, why: Renewal) -> Result<(), ConnError> {
        let Some(addr) = self
            .slots
            .get(&target)
            .and_then(Slot::conn)
            .map(|c| c.link().address().clone())
        else {
            return self.open_into(target).await;
        };
        let next = open_with(&self.shared, self.login.as_mut(), addr.clone()).await?;
        let generation = match next.auth() {
            Auth::Token(token) => Some(token.generation()),
            Auth::ClientSasl | Auth::General => None,
        };
        self.on(target, Event::Opened(next));
        match (why, generation) {
            (Renewal::TokenAtRisk, Some(generation)) => info!(
                broker = %addr,
                broker_id = addr.id,
                token_generation = generation,
                "replaced a broker connection before its delegation token expires"
            ),
            _ => debug!(
                broker = %addr,
                "replaced a broker connection before its sasl session expires"
            ),
        }
        Ok(())
    }

    /// Ends the connection behind `target` at once with `error`, then drops
    /// it (see [`BrokerConnection::abort`](sluice_broker::BrokerConnection::abort)): for a broker that hangs and has
    /// left the cluster, whose owed requests were answered as failed.
    pub(crate) fn abort(&mut self, target: Target, error: BrokerError) {
        self.on(target, Event::Abort(error));
    }

    /// Drops the connection behind `target` if it has closed (a closed
    /// connection has already failed everything it owed). Returns whether one
    /// was dropped.
    pub(crate) fn discard(&mut self, target: Target) -> bool {
        let failure = self
            .slots
            .get(&target)
            .and_then(Slot::conn)
            .map(|c| (c.link().address().clone(), c.link().failure()));
        let dropped = matches!(self.on(target, Event::Discard), Action::Dropped);
        if dropped && let Some((broker, failure)) = failure {
            debug!(
                broker = %broker,
                reason = %failure.map(|e| e.to_string()).unwrap_or_default(),
                "dropping a closed broker connection; it is reopened on next use"
            );
        }
        dropped
    }

    /// How long the broker behind `target` has gone unheard, as the stall
    /// check weighs it: the connection there has heard nothing for that
    /// long, nor has any other connection of the sink to the same broker
    /// ([`crate::health::Health::quiet_for`]). Zero without a connection.
    pub(crate) fn quiet_for(&self, target: Target, now: Instant) -> Duration {
        let Some(link) = self
            .slots
            .get(&target)
            .and_then(Slot::conn)
            .map(KafkaConnection::link)
        else {
            return Duration::ZERO;
        };
        let own = link.quiet_for(now);
        match self.shared.health.quiet_for(link.address(), now) {
            Some(any) => own.min(any),
            None => own,
        }
    }

    /// Keeps the connections in step with a Metadata answer: the bootstrap
    /// connection becomes its broker's connection, and connections to brokers
    /// that left the cluster are closed once they owe nothing.
    pub(crate) fn on_metadata(&mut self, applied: &MetadataApplied) {
        for id in &applied.removed_brokers {
            let target = Target::Broker(*id);
            let idle = self
                .slots
                .get(&target)
                .and_then(Slot::conn)
                .is_some_and(|c| !c.link().owes());
            if idle {
                self.on(target, Event::Retire);
            }
        }
        let Some(addr) = self
            .slots
            .get(&Target::Bootstrap)
            .and_then(Slot::conn)
            .map(|c| c.link().address().clone())
        else {
            return;
        };
        let id = {
            let view = self.shared.view.read();
            view.brokers()
                .find(|b| {
                    b.address.host.as_str() == addr.host && b.address.port == i32::from(addr.port)
                })
                .map(|b| b.id)
        };
        let Some(id) = id else {
            return;
        };
        let served = self
            .slots
            .get(&Target::Broker(id))
            .and_then(Slot::conn)
            .is_some_and(|c| !c.link().is_closed());
        if served {
            return;
        }
        if let Some(conn) = self.take(Target::Bootstrap) {
            // From now on its logs, errors and metric labels name broker `id`.
            if !conn.link().set_broker_id(id.0) {
                debug!(broker = %addr, broker_id = id.0, "the bootstrap connection already names another broker id");
            }
            debug!(broker = %addr, broker_id = id.0, "the bootstrap connection serves broker {}", id.0);
            self.on(Target::Broker(id), Event::Retire);
            self.on(Target::Broker(id), Event::Opened(conn));
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
        match self
            .slots
            .get(&target)
            .and_then(Slot::conn)
            .map(KafkaConnection::link)
        {
            Some(link) => {
                ConnError::Broker(link.failure().unwrap_or_else(|| BrokerError::Shutdown {
                    broker: link.address().clone(),
                }))
            }
            None => ConnError::Fatal(Invariant::NoConnection(target).into()),
        }
    }

    /// The address of the connection behind `target`, for tests.
    #[cfg(test)]
    pub(crate) fn address(&self, target: Target) -> Option<&BrokerAddress> {
        self.slots
            .get(&target)
            .and_then(Slot::conn)
            .map(|c| c.link().address())
    }
}

fn no_contact_point(last_error: Option<BrokerError>) -> ConnError {
    ConnError::Broker(last_error.unwrap_or(BrokerError::Unaddressed(Unaddressed::NoContactPoint)))
}

fn count_recreation(reason: &'static str) {
    metrics::counter!(names::BROKER_CONNECTIONS_RECREATED, "reason" => reason).increment(1);
}
