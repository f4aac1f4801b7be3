//! [`KafkaConnection`]: a broker connection that knows when it must be
//! replaced, and keeps its predecessor until that has drained.
//!
//! A broker closes a connection whose SASL session has expired on the next
//! request it reads. For a connection authenticated with a delegation token,
//! the session ends when the token does; for any SASL connection, it ends at
//! `session_lifetime_ms` (KIP-368, `connections.max.reauth.ms`). Sluice must
//! therefore open a new connection *before* that moment and move new requests
//! onto it, while responses still owed on the old one keep flowing back.
//!
//! # When a token connection is replaced
//!
//! The token task creates a user's token and re-creates it at half its
//! lifetime `L`. A connection opened with a token is *at risk* once it is
//! older than `0.5 × 0.75 × L`, or as soon as a newer token has been
//! published, whichever comes first. The extra 25% covers the race in which a
//! connection authenticates with the old token just before the new one is
//! published:
//!
//! ```text
//! token A created ──────────────── token B created ──────────── token A expires
//! t=0                               t=L/2                         t=L
//!   │ conn 1 opened with A (t≈0)      │ B published: conn 1 at risk (generation changed)
//!   │                                 │ conn 2 opened with A just before B arrived (t≈L/2)
//!   │                                 │   conn 2 is at risk at t≈L/2 (generation) and by
//!   │                                 │   timer at t≈L/2 + 3L/8 = 7L/8 at the latest,
//!   │                                 │   still before A expires at L.
//! ```
//!
//! An at-risk connection is replaced when a request is next routed to its
//! broker:
//!
//! ```text
//! requests:  r1 r2 ──────────── (at risk) r3 r4
//! conn old:  r1 r2 ─ responses drain ─▶ closed once nothing is owed
//! conn new:                          r3 r4 ─▶
//! client sees responses in request order: r1 r2 r3 r4 (the pending queue is
//! ordered by client request, so the old connection's come first)
//! ```
//!
//! If a connection due for replacement still has an `old_connection` owing
//! responses, a response has been pending for longer than a whole refresh
//! interval: [`KafkaConnection::replace`] reports that as an error rather
//! than dropping the old connection (which would fail its requests) or
//! keeping a chain of them.

use std::sync::Arc;
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use sluice_chain::broker::{BrokerAddress, BrokerConnection};
use tokio::sync::watch;
use tokio::time::Instant;

/// The share of a token's lifetime after which a connection authenticated
/// with it is replaced: the token is re-created at 1/2, plus 25% margin.
pub const TOKEN_AT_RISK_FRACTION: f64 = 0.5 * 0.75;

/// The share of a SASL session's lifetime (KIP-368) after which its
/// connection is replaced, like Java clients that re-authenticate at 85–95%.
pub const SESSION_AT_RISK_FRACTION: f64 = 0.85;

/// What a caller must do with a connection before routing a request to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Usable.
    Open,
    /// Closed (the broker failed it or closed it while idle): open a new one.
    Unopened,
    /// Still usable, but must be replaced before its next request: its
    /// token or SASL session is about to expire.
    AtRiskOfAuthTokenExpiry,
}

/// What [`KafkaConnection`] needs from a connection; [`BrokerConnection`]
/// in production, a stand-in in unit tests.
pub trait Link {
    /// Requests sent on it that are still owed a response.
    fn outstanding(&self) -> usize;
    /// Whether it has closed.
    fn is_closed(&self) -> bool;
    /// The broker it talks to.
    fn broker(&self) -> &BrokerAddress;
}

impl Link for BrokerConnection {
    fn outstanding(&self) -> usize {
        BrokerConnection::outstanding(self)
    }

    fn is_closed(&self) -> bool {
        BrokerConnection::is_closed(self)
    }

    fn broker(&self) -> &BrokerAddress {
        self.address()
    }
}

/// The token a connection authenticated with, and where newer ones appear.
#[derive(Debug, Clone)]
pub struct TokenBinding {
    /// The user's published token.
    pub current: watch::Receiver<Arc<DelegationToken>>,
    /// Generation of the token the connection authenticated with.
    pub generation: u64,
    /// That token's lifetime.
    pub lifetime: Duration,
}

impl TokenBinding {
    /// Binds to the token currently published on `current`.
    pub fn new(current: watch::Receiver<Arc<DelegationToken>>) -> Self {
        let (generation, lifetime) = {
            let token = current.borrow();
            (token.generation, token.lifetime())
        };
        Self {
            current,
            generation,
            lifetime,
        }
    }

    fn superseded(&self) -> bool {
        self.current.borrow().generation != self.generation
    }
}

/// One live connection and the one it replaced, if that still owes responses.
#[derive(Debug)]
pub struct Managed<C> {
    connection: C,
    old_connection: Option<C>,
    opened_at: Instant,
    /// When the SASL session (KIP-368) must be renewed, if the broker limits it.
    session_renew_at: Option<Instant>,
}

impl<C: Link> Managed<C> {
    /// A connection opened at `opened_at`, whose SASL session (if any) lasts
    /// `session_lifetime` from then.
    pub fn new(connection: C, opened_at: Instant, session_lifetime: Option<Duration>) -> Self {
        Self {
            connection,
            old_connection: None,
            opened_at,
            session_renew_at: session_lifetime
                .map(|life| opened_at + life.mul_f64(SESSION_AT_RISK_FRACTION)),
        }
    }

    fn session_due(&self, now: Instant) -> bool {
        self.session_renew_at.is_some_and(|at| now >= at)
    }
}

/// A broker connection of the cluster sink.
#[derive(Debug)]
pub enum KafkaConnection<C = BrokerConnection> {
    /// A plain connection, or one authenticated with the client's own
    /// credentials (SASL PLAIN replay).
    General(Managed<C>),
    /// A connection authenticated with the user's delegation token.
    ScramOverMtls {
        /// The connection and its draining predecessor.
        managed: Managed<C>,
        /// The token it authenticated with.
        token: TokenBinding,
    },
}

/// Why a connection could not be replaced.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReplaceError {
    /// The previous replacement has not drained.
    #[error(
        "{broker}: cannot replace the connection: the connection it replaced still owes \
         {outstanding} response(s), pending for longer than a token refresh interval"
    )]
    StillDraining {
        /// The broker.
        broker: BrokerAddress,
        /// Responses the old connection still owes.
        outstanding: usize,
    },
}

impl<C: Link> KafkaConnection<C> {
    /// A plain connection.
    pub fn general(connection: C, opened_at: Instant, session_lifetime: Option<Duration>) -> Self {
        Self::General(Managed::new(connection, opened_at, session_lifetime))
    }

    /// A connection authenticated with the token in `token`.
    pub fn scram_over_mtls(
        connection: C,
        opened_at: Instant,
        session_lifetime: Option<Duration>,
        token: TokenBinding,
    ) -> Self {
        Self::ScramOverMtls {
            managed: Managed::new(connection, opened_at, session_lifetime),
            token,
        }
    }

    fn managed(&self) -> &Managed<C> {
        match self {
            Self::General(m) | Self::ScramOverMtls { managed: m, .. } => m,
        }
    }

    fn managed_mut(&mut self) -> &mut Managed<C> {
        match self {
            Self::General(m) | Self::ScramOverMtls { managed: m, .. } => m,
        }
    }

    /// The connection new requests go to.
    pub fn connection(&self) -> &C {
        &self.managed().connection
    }

    /// The replaced connection still draining, if any.
    pub fn old_connection(&self) -> Option<&C> {
        self.managed().old_connection.as_ref()
    }

    /// The connection's state at `now`. Checked every time a request is
    /// routed to this broker.
    pub fn state(&self, now: Instant) -> ConnectionState {
        let managed = self.managed();
        if managed.connection.is_closed() {
            return ConnectionState::Unopened;
        }
        let token_due = match self {
            Self::General(_) => false,
            Self::ScramOverMtls { token, .. } => {
                token.superseded()
                    || now >= managed.opened_at + token.lifetime.mul_f64(TOKEN_AT_RISK_FRACTION)
            }
        };
        if token_due || managed.session_due(now) {
            ConnectionState::AtRiskOfAuthTokenExpiry
        } else {
            ConnectionState::Open
        }
    }

    /// Drops the replaced connection once it owes nothing (or has closed,
    /// which already failed everything it owed).
    pub fn reap(&mut self) {
        let managed = self.managed_mut();
        if managed
            .old_connection
            .as_ref()
            .is_some_and(|old| old.outstanding() == 0 || old.is_closed())
        {
            managed.old_connection = None;
        }
    }

    /// Replaces the live connection with `next` (already authenticated).
    /// The current one is kept as `old_connection` while it owes responses.
    pub fn replace(&mut self, next: KafkaConnection<C>) -> Result<(), ReplaceError> {
        self.reap();
        if let Some(old) = self.old_connection() {
            return Err(ReplaceError::StillDraining {
                broker: old.broker().clone(),
                outstanding: old.outstanding(),
            });
        }
        let previous = std::mem::replace(self, next);
        let previous = match previous {
            Self::General(m) | Self::ScramOverMtls { managed: m, .. } => m.connection,
        };
        if previous.outstanding() > 0 && !previous.is_closed() {
            self.managed_mut().old_connection = Some(previous);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
