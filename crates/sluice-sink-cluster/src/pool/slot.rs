//! [`Slot`]: one broker slot of a client connection (a broker by id, the
//! bootstrap connection, or the client's auth connection) and the life of
//! the connection in it, stored as a [`SlotState`] and changed only in
//! [`Slot::on`].
//!
//! A broker closes a connection whose SASL session has expired on the next
//! request it reads. For a connection authenticated with a delegation token
//! the session ends when the token does; for any SASL connection it ends at
//! `session_lifetime_ms` (KIP-368, `connections.max.reauth.ms`). So a new
//! connection must be opened *before* that moment and take the new
//! requests, while the answers owed on the old one keep flowing back.
//!
//! ```text
//!              Opened                    Check: a newer token is published,
//! ┌──────────┐ ────────▶ ┌──────┐        or 85% of the SASL session passed    ┌────────┐
//! │ Unopened │           │ Open │ ──────────────────────────────────────────▶ │ AtRisk │
//! └──────────┘ ◀──────── └──────┘ ◀────────────────────────────────────────── └────────┘
//!   Retire (it drains), Take │ ▲   Opened: the fresh connection takes over;       │
//!   (from AtRisk too)        │ │   the old one is dropped and drains              │
//!   the link closed (Check,  │ │ Opened: reopened, counted                        │
//!   Discard) or Abort        ▼ │ as a recreation                                  │
//!                       ┌────────┐                                                │
//!                       │ Closed │ ◀──────────────────────────────────────────────┘
//!                       └────────┘           the link closed, or Abort
//! ```
//!
//! Every send passes the gate ([`crate::pool::Pool`]), which first feeds
//! [`Event::Check`] and acts on the [`Action`]: send, open, or renew.
//!
//! # Token renewal and draining
//!
//! The token task publishes a user's next token at half the current one's
//! lifetime `L` ([`DelegationToken::rotate_at`], the one place that rule
//! lives). A token connection is at risk as soon as a newer generation is
//! published, never from its own age: one replacement per token. While a
//! rotation fails and is retried, connections keep the old token (a new
//! connection would use the same one).
//!
//! ```text
//! token A created ─────────── token B published ─────────── A expires
//! t=0                          t=L/2                          t=L
//! conn 1 (A): r1 r2 ───────────┤ at risk: the next send renews
//! conn 2 (B):                  r3 r4 ───────────────────────▶ until C at t=L
//! conn 1 after Opened(conn 2): dropped, drains r1 r2, then closes
//! the client sees r1 r2 r3 r4 (the pending queue keeps request order)
//! ```
//!
//! A replaced or retired connection is dropped: a dropped
//! [`BrokerConnection`] writes what is queued, reads what is owed (each
//! answer within its read deadline) and then closes. That is the one drain.

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use sluice_broker::{BrokerConnection, BrokerError};
use tokio::sync::watch;
use tokio::time::Instant;

/// The share of a SASL session's lifetime (KIP-368) after which its
/// connection is replaced, like Java clients that re-authenticate at 85–95%.
pub(crate) const SESSION_AT_RISK_FRACTION: f64 = 0.85;

/// What a [`Slot`] needs from a connection; [`BrokerConnection`] in
/// production, a stand-in in unit tests.
pub(crate) trait Link {
    /// Requests sent on it that are still owed a response.
    fn outstanding(&self) -> usize;
    /// Whether it has closed.
    fn is_closed(&self) -> bool;
    /// Ends it at once with `error` (nothing queued is written).
    fn abort(&self, error: BrokerError);

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

    fn abort(&self, error: BrokerError) {
        BrokerConnection::abort(self, error);
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
    /// How it authenticated: what can put it at risk and whether Sluice may
    /// renew it at all (never the client's own auth connection).
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

    /// The same link under another authentication: the auth connection
    /// becomes a general one once the client's login is known (`now` starts
    /// a PLAIN session's clock; `None` keeps the one it was opened with).
    pub(crate) fn reauthenticated(
        self,
        auth: Auth,
        now: Option<Instant>,
        session_lifetime: Option<Duration>,
    ) -> Self {
        let opened_at = now.unwrap_or(self.opened_at);
        Self::new(self.link, auth, opened_at, session_lifetime)
    }

    /// Why it must be replaced at `now`, as the `reason` label of
    /// `sluice_broker_connections_recreated_total`; `None` while it may be
    /// used as it is.
    fn due(&self, now: Instant) -> Option<Renewal> {
        if let Auth::Token(token) = &self.auth
            && token.superseded()
        {
            return Some(Renewal::TokenAtRisk);
        }
        self.session_renew_at
            .is_some_and(|at| now >= at)
            .then_some(Renewal::Session)
    }
}

/// Why an at-risk connection is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// A newer delegation token is published.
    TokenAtRisk,
    /// 85% of its SASL session has passed.
    Session,
}

impl Renewal {
    /// The `reason` label of `sluice_broker_connections_recreated_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Renewal::TokenAtRisk => "token_at_risk",
            Renewal::Session => "session",
        }
    }
}

/// Where a slot stands. Stored, and changed only by [`Slot::on`].
#[derive(Debug)]
pub(crate) enum SlotState<C = BrokerConnection> {
    /// No connection was ever put here, or it was retired.
    Unopened,
    /// Requests go out on it.
    Open(KafkaConnection<C>),
    /// Still serving what it owes, but its token or SASL session is due:
    /// the gate renews it before the next send.
    AtRisk(KafkaConnection<C>, Renewal),
    /// Its connection closed (the broker failed or closed it, or Sluice
    /// aborted it) and was dropped: it had failed whatever it owed. The next
    /// open here is a recreation.
    Closed,
}

/// What happens to a slot.
#[derive(Debug)]
pub(crate) enum Event<C = BrokerConnection> {
    /// The gate looks at the slot before a send, at `now`.
    Check(Instant),
    /// A connection, connected and logged in, is put here.
    Opened(KafkaConnection<C>),
    /// A send found the connection failed: drop it if it has closed.
    Discard,
    /// End the connection at once with this error (a hung broker that left
    /// the cluster), then drop it.
    Abort(BrokerError),
    /// Take the connection out of use; it drains.
    Retire,
    /// Move the connection to another slot (the bootstrap connection
    /// adopted as its broker's, the auth connection kept as bootstrap).
    Take,
}

/// What the slot's owner must do after an [`Event`].
#[derive(Debug)]
pub(crate) enum Action<C = BrokerConnection> {
    /// Nothing more.
    None,
    /// Send on the connection now in the slot.
    Send,
    /// Open a connection and feed it back as [`Event::Opened`].
    Open,
    /// Open a fresh connection and feed it back as [`Event::Opened`]: the
    /// current one is at risk.
    Renew(Renewal),
    /// A connection took the place of a closed one: count the recreation.
    Reopened,
    /// A fresh connection took the place of an at-risk one, which drains.
    Renewed(Renewal),
    /// The slot's closed connection was dropped.
    Dropped,
    /// The connection taken out by [`Event::Take`].
    Taken(KafkaConnection<C>),
}

/// One broker slot.
#[derive(Debug)]
pub(crate) struct Slot<C: Link = BrokerConnection> {
    state: SlotState<C>,
}

impl<C: Link> Default for Slot<C> {
    fn default() -> Self {
        Self {
            state: SlotState::Unopened,
        }
    }
}

impl<C: Link> Slot<C> {
    /// The connection in the slot, usable or at risk.
    pub(crate) fn conn(&self) -> Option<&KafkaConnection<C>> {
        match &self.state {
            SlotState::Open(conn) | SlotState::AtRisk(conn, _) => Some(conn),
            SlotState::Unopened | SlotState::Closed => None,
        }
    }

    /// Its state.
    #[cfg(test)]
    pub(crate) fn state(&self) -> &SlotState<C> {
        &self.state
    }

    /// The one place a slot changes (see the module diagram).
    pub(crate) fn on(&mut self, event: Event<C>) -> Action<C> {
        use SlotState as S;
        let state = std::mem::replace(&mut self.state, S::Unopened);
        let (next, action) = match (state, event) {
            (S::Open(conn) | S::AtRisk(conn, _), Event::Check(_)) if conn.link.is_closed() => {
                (S::Closed, Action::Open)
            }
            (S::Open(conn), Event::Check(now)) => match conn.due(now) {
                Some(why) => (S::AtRisk(conn, why), Action::Renew(why)),
                None => (S::Open(conn), Action::Send),
            },
            (S::AtRisk(conn, why), Event::Check(_)) => (S::AtRisk(conn, why), Action::Renew(why)),
            (state @ (S::Unopened | S::Closed), Event::Check(_)) => (state, Action::Open),
            (S::Closed, Event::Opened(conn)) => (S::Open(conn), Action::Reopened),
            (S::AtRisk(_old, why), Event::Opened(conn)) => (S::Open(conn), Action::Renewed(why)),
            // A connection moved here replaces whatever was here, which drains.
            (S::Unopened | S::Open(_), Event::Opened(conn)) => (S::Open(conn), Action::None),
            (S::Open(conn) | S::AtRisk(conn, _), Event::Discard | Event::Abort(_))
                if conn.link.is_closed() =>
            {
                (S::Closed, Action::Dropped)
            }
            (S::Open(conn) | S::AtRisk(conn, _), Event::Abort(error)) => {
                conn.link.abort(error);
                (S::Closed, Action::Dropped)
            }
            (S::Open(_) | S::AtRisk(..), Event::Retire) => (S::Unopened, Action::None),
            (S::Open(conn) | S::AtRisk(conn, _), Event::Take) => (S::Unopened, Action::Taken(conn)),
            (state, Event::Discard | Event::Abort(_) | Event::Retire | Event::Take) => {
                (state, Action::None)
            }
        };
        self.state = next;
        action
    }
}
