//! [`KafkaConnection`]: one broker connection of a client connection, the
//! one owner of its life: opened and authenticated ([`open`]), used, put at
//! risk by its authentication's end, replaced, drained and closed.
//!
//! A broker closes a connection whose SASL session has expired on the next
//! request it reads. For a connection authenticated with a delegation token,
//! the session ends when the token does; for any SASL connection, it ends at
//! `session_lifetime_ms` (KIP-368, `connections.max.reauth.ms`). Sluice must
//! therefore open a new connection *before* that moment and move new requests
//! onto it, while the responses still owed on the old one keep flowing back.
//!
//! # States
//!
//! ```text
//!            open + authenticate (open::open_with)
//!  ┌────────┐ ────────────────────────────────▶ ┌──────┐
//!  │ Closed │                                   │ Open │ ◀─────────────────────┐
//!  └────────┘ ◀──────────────────────────────── └──────┘                       │
//!      ▲        the broker failed or closed it     │ a newer token is          │ replace(): a fresh,
//!      │                                           │ published, or 85% of the  │ authenticated one takes
//!      │                                           ▼ SASL session has passed   │ its place
//!      │                                  ┌────────────────────┐               │
//!      └───────────────────────────────── │ AtRiskOfAuthExpiry │ ──────────────┘
//!         closed before it was replaced   └────────────────────┘
//!                                                   │ the replaced link
//!                                                   ▼
//!                                             ┌──────────┐  owes nothing (or has closed,
//!                                             │ Draining │ ────────────────────────────▶ dropped
//!                                             └──────────┘  which failed what it owed)
//! ```
//!
//! `Closed` is also the state of a target with no connection yet. Every time
//! a request is routed to a target its state is checked
//! ([`KafkaConnection::state`]): a `Closed` one is (re)opened, an at-risk one
//! replaced, and then the request is sent.
//!
//! # When a token connection is at risk
//!
//! The token task re-creates a user's token when half of the current one's
//! own lifetime `L` has passed ([`DelegationToken::rotate_at`], the one place
//! that rule lives) and publishes it with the next generation. A connection
//! authenticated with a token is at risk as soon as a newer generation is
//! published: its at-risk time follows its token's expiry, never its own age,
//! so a connection is replaced once per token, however late in the token's
//! life it was opened:
//!
//! ```text
//! token A created ───────────── token B published ─────────── A expires ─ B published... C
//! t=0                            t=L/2 (A.rotate_at)           t=L         t=L (B.rotate_at)
//!   │ conn 1 opened with A (t≈0)   │ conn 1 at risk: replaced by conn 2 (B), conn 1 drains
//!   │ conn x opened with A at t≈L/2, just before B: at risk when B appears, replaced then
//!   │                              │ conn 2 lives until C is published at t=L, half of B's
//!   │                              │ lifetime later: one replacement per token
//! ```
//!
//! A rotation that fails is retried by the token task while the old token
//! stays valid: connections keep using it (a new connection would use the
//! same token, so replacing would not help) until the successor appears.
//!
//! # Draining
//!
//! ```text
//! requests:  r1 r2 ──────────── (at risk) r3 r4
//! conn old:  r1 r2 ─ responses drain ─▶ dropped once nothing is owed
//! conn new:                          r3 r4 ─▶
//! client sees responses in request order: r1 r2 r3 r4 (the pending queue is
//! ordered by client request, so the old connection's come first)
//! ```
//!
//! A client connection has one [`Draining`] list for every connection taken
//! out of use that still owes answers, however many there are: a client is
//! never closed because an earlier connection still drains. What bounds a
//! draining connection is what bounds any request: each answer owed is
//! failed at its read deadline (the read timeout on top of the API's own
//! legitimate wait: a Fetch's `max_wait_ms`, a JoinGroup's rebalance
//! timeout, ...), which closes the connection. Dropping a [`BrokerConnection`]
//! never cuts it either: what is queued is written and what is owed is read.

pub(crate) mod login;
pub(crate) mod open;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use sluice_broker::BrokerConnection;
use tokio::sync::watch;
use tokio::time::Instant;

/// The share of a SASL session's lifetime (KIP-368) after which its
/// connection is replaced, like Java clients that re-authenticate at 85–95%.
pub(crate) const SESSION_AT_RISK_FRACTION: f64 = 0.85;

/// What a caller must do with a target's connection before routing a
/// request to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionState {
    /// There is none, or the broker failed or closed it: open a new one.
    Closed,
    /// Usable.
    Open,
    /// Still usable, but must be replaced before its next request: a newer
    /// delegation token is published, or its SASL session is about to end.
    AtRiskOfAuthExpiry,
}

/// What [`KafkaConnection`] needs from a connection; [`BrokerConnection`]
/// in production, a stand-in in unit tests.
pub(crate) trait Link {
    /// Requests sent on it that are still owed a response.
    fn outstanding(&self) -> usize;
    /// Whether it has closed.
    fn is_closed(&self) -> bool;

    /// Whether it still owes answers (a closed one has failed them all).
    fn owes(&self) -> bool {
        !self.is_closed() && self.outstanding() > 0
    }
}

impl Link for BrokerConnection {
    fn outstanding(&self) -> usize {
        BrokerConnection::outstanding(self)
    }

    fn is_closed(&self) -> bool {
        BrokerConnection::is_closed(self)
    }
}

/// The token a connection authenticated with, and where newer ones appear.
#[derive(Debug, Clone)]
pub(crate) struct TokenBinding {
    /// The user's published token: a change of generation here is what puts
    /// the connection at risk.
    current: watch::Receiver<Arc<DelegationToken>>,
    /// Generation of the token the connection authenticated with.
    generation: u64,
}

impl TokenBinding {
    /// Binds to the token currently published on `current`. Bind *before*
    /// authenticating with it: a token published in between then puts the
    /// new connection at risk at once, instead of going unnoticed.
    pub(crate) fn new(current: watch::Receiver<Arc<DelegationToken>>) -> Self {
        let generation = current.borrow().generation;
        Self {
            current,
            generation,
        }
    }

    /// Generation of the token the connection authenticated with.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether this binding follows the same user's channel as `other`.
    pub(crate) fn same_channel(&self, other: &watch::Receiver<Arc<DelegationToken>>) -> bool {
        self.current.same_channel(other)
    }

    fn superseded(&self) -> bool {
        self.current.borrow().generation != self.generation
    }
}

/// How a connection authenticated, which decides what can put it at risk.
#[derive(Debug)]
pub(crate) enum Auth {
    /// The client's auth connection: it carries the client's own ApiVersions
    /// and SASL exchange, untouched, until the client's authentication is
    /// decided. Sluice never renews it: it is the client's session.
    ClientSasl,
    /// Not authenticated by Sluice, or with the client's PLAIN credentials.
    General,
    /// With the client's user's delegation token (SCRAM over mTLS).
    Token(TokenBinding),
}

/// One live broker connection and what decides its life.
#[derive(Debug)]
pub(crate) struct KafkaConnection<C = BrokerConnection> {
    /// The connection itself: a [`BrokerConnection`] in production, a
    /// stand-in in unit tests, so that every transition is tested without a
    /// broker.
    link: C,
    /// How it authenticated: what can put it at risk (a newer token, the
    /// SASL session's end) and whether Sluice may renew it at all (never the
    /// client's own auth connection).
    auth: Auth,
    /// When it was opened: a PLAIN session kept from the auth connection
    /// starts its clock when the client's authentication is decided.
    opened_at: Instant,
    /// When its SASL session (KIP-368) must be renewed, if the broker
    /// limits it: 85% into the `session_lifetime_ms` the broker granted.
    session_renew_at: Option<Instant>,
}

impl<C: Link> KafkaConnection<C> {
    /// A connection opened at `opened_at`, whose SASL session (if any) lasts
    /// `session_lifetime` from then.
    pub(crate) fn new(
        link: C,
        auth: Auth,
        opened_at: Instant,
        session_lifetime: Option<Duration>,
    ) -> Self {
        Self {
            link,
            auth,
            opened_at,
            session_renew_at: session_lifetime
                .map(|life| opened_at + life.mul_f64(SESSION_AT_RISK_FRACTION)),
        }
    }

    /// The connection new requests go to.
    pub(crate) fn link(&self) -> &C {
        &self.link
    }

    /// How it authenticated.
    pub(crate) fn auth(&self) -> &Auth {
        &self.auth
    }

    /// When it was opened.
    pub(crate) fn opened_at(&self) -> Instant {
        self.opened_at
    }

    /// Its state at `now`, checked every time a request is routed to it.
    pub(crate) fn state(&self, now: Instant) -> ConnectionState {
        if self.link.is_closed() {
            return ConnectionState::Closed;
        }
        let token_due = match &self.auth {
            Auth::Token(token) => token.superseded(),
            Auth::ClientSasl | Auth::General => false,
        };
        let session_due = self.session_renew_at.is_some_and(|at| now >= at);
        if token_due || session_due {
            ConnectionState::AtRiskOfAuthExpiry
        } else {
            ConnectionState::Open
        }
    }

    /// Why it is being replaced, as the `reason` label of
    /// `sluice_broker_connections_recreated_total`.
    pub(crate) fn renewal_reason(&self) -> &'static str {
        match &self.auth {
            Auth::Token(token) if token.superseded() => "token_at_risk",
            _ => "session",
        }
    }

    /// Puts `next` (open and authenticated) in its place; the replaced link
    /// drains in `draining`.
    pub(crate) fn replace(&mut self, next: Self, draining: &mut Draining<C>) {
        let previous = std::mem::replace(self, next);
        draining.push(previous.link);
    }

    /// Takes the connection out of use; its link drains in `draining`.
    pub(crate) fn retire(self, draining: &mut Draining<C>) {
        draining.push(self.link);
    }

    /// The same link under another authentication: the auth connection
    /// becomes a general one once the client's login is known (`now` starts
    /// a PLAIN session's clock).
    pub(crate) fn reauthenticated(
        self,
        auth: Auth,
        now: Instant,
        session_lifetime: Option<Duration>,
    ) -> Self {
        Self::new(self.link, auth, now, session_lifetime)
    }
}

/// Broker connections taken out of use that still owe answers; dropped as
/// soon as they owe nothing. One per client connection.
#[derive(Debug)]
pub(crate) struct Draining<C = BrokerConnection> {
    /// The connections still owing answers, oldest first. A list, not one
    /// slot per target: a target may be replaced again before its previous
    /// connection has drained, and neither may be dropped while it owes.
    links: Vec<C>,
}

impl<C> Default for Draining<C> {
    fn default() -> Self {
        Self { links: Vec::new() }
    }
}

impl<C: Link> Draining<C> {
    /// Keeps `link` while it owes answers; drops it at once otherwise.
    pub(crate) fn push(&mut self, link: C) {
        if link.owes() {
            self.links.push(link);
        }
    }

    /// Drops the connections that owe nothing any more.
    pub(crate) fn reap(&mut self) {
        self.links.retain(Link::owes);
    }

    /// How many still drain.
    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// The ones still draining, oldest first.
    #[cfg(test)]
    pub(crate) fn links(&self) -> &[C] {
        &self.links
    }
}
