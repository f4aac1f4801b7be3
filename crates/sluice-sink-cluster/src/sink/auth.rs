//! The driver side of client authentication: every request passes the gate
//! ([`ClientAuth::admit`]) before it is routed, and every SASL answer is
//! settled ([`ClientAuth::on_answer`]) before the next request is admitted.
//!
//! Settling waits for the SASL answers in flight inside `send`. That is what
//! keeps a request pipelined behind SaslAuthenticate from reaching a broker
//! before the broker has accepted the client: the source awaits `send` to
//! completion before it reads the next request. The wait is bounded by the
//! request timeout.
//!
//! A re-authentication (KIP-368, rules in [`sluice_cluster::client_auth::reauth`]) goes the
//! same way: its SaslAuthenticate rounds are sent on a fresh connection
//! opened for it ([`Pool::open_reauth`](crate::pool::Pool::open_reauth))
//! and settled before the next request; a broker that fails meanwhile
//! becomes a NETWORK_EXCEPTION answer, not a silent close.
//!
//! Until the client is authenticated (or has shown it uses no
//! authentication) only ApiVersions, SaslHandshake and SaslAuthenticate
//! leave Sluice, on the client's auth connection to a first contact point.
//! Then every broker connection opened for the client authenticates like
//! it: PLAIN credentials are replayed, and a SCRAM user's connections use
//! the user's delegation token from the sink's one token task
//! (`authorize_scram_over_mtls`). A failed authentication answers the
//! client with the broker's error, then closes it: `Sink::pending` counts
//! the close as owed, and `recv` returns it as an error once every earlier
//! answer has gone out. Nothing here logs a SASL body: PLAIN messages carry
//! passwords and SCRAM messages carry proofs.
//!
//! [`Authn`] holds the gate and applies what a settled answer decided (the
//! broker connections' login, the token's voucher, the close); the gate's
//! admission and the wait for the SASL answers in flight are
//! `KafkaSinkCluster`'s (`sink.rs`), since they reach the owed answers.

use std::sync::Arc;

use sluice_auth::AuthError;
use sluice_codec::Response;
use tracing::{info, warn};

use super::io::Io;
use super::{Shared, now};
use crate::close::{CloseError, Invariant};
use crate::pending::{Combine, PendingResponse, Post};
use crate::pool::Login;
use sluice_cluster::client_auth::{ClientAuth, Outcome, SaslStep};

/// Where the client's authentication stands, and the SASL answers not
/// settled yet.
#[derive(Debug)]
pub(super) struct Authn {
    /// The client's authentication state machine (the gate).
    pub(super) gate: ClientAuth<CloseError>,
    /// SASL requests whose answers are not settled yet.
    pub(super) in_flight: usize,
}

impl Authn {
    /// The answer for a re-authentication no broker could check; the client
    /// is closed after it.
    pub(super) fn reauth_unchecked(
        &mut self,
        io: &mut Io,
        e: AuthError,
    ) -> sluice_codec::ResponseKind {
        let reason = CloseError::ReauthUnchecked {
            user: self.gate.username().unwrap_or_else(|| Arc::from("")),
            source: Arc::new(e),
        };
        warn!("closing the client after answering its re-authentication: {reason}");
        io.pool.end_reauth();
        let refused = reason.reauth_answer_code();
        self.gate.reauth_unchecked(reason, refused)
    }

    /// Runs a SASL answer through the state machine (rewriting it for the
    /// client) and applies what it decided.
    pub(super) fn settle_answer(&mut self, io: &mut Io, step: SaslStep, response: &mut Response) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let outcome = match self.gate.on_answer(step, response, now()) {
            Ok(outcome) => outcome,
            Err(e) => {
                self.gate.fail(CloseError::UnreadableSaslAnswer {
                    step,
                    source: std::sync::Arc::new(e),
                });
                return;
            }
        };
        if step == SaslStep::Handshake && matches!(outcome, Outcome::Continue) {
            // The broker's listener speaks SASL, so it requires it.
            io.shared.learn_sasl_required();
        }
        let (identity, session_lifetime) = match outcome {
            Outcome::Authenticated {
                identity,
                session_lifetime,
            } => (identity, session_lifetime),
            Outcome::Reauthenticated {
                identity,
                session_lifetime,
            } => return self.reauthenticated(io, &identity, session_lifetime),
            Outcome::Failed => {
                if step == SaslStep::Reauthenticate {
                    io.pool.end_reauth();
                }
                if let Some(reason) = self.gate.closing() {
                    info!("client authentication failed; closing after the answer: {reason}");
                }
                return;
            }
            Outcome::Continue => return,
        };
        self.vouch(&io.shared, &identity);
        let username = identity.username().to_owned();
        let kind = match &identity {
            sluice_cluster::client_auth::Identity::Plain(_) => "PLAIN".to_owned(),
            sluice_cluster::client_auth::Identity::Scram { mechanism, .. } => {
                mechanism.name().to_owned()
            }
        };
        match Login::for_identity(identity, io.shared.tokens.as_ref()) {
            Some(login) => {
                info!(user = username, mechanism = kind, "client authenticated");
                io.pool.decide(login, session_lifetime);
            }
            None => self.gate.fail(Invariant::ScramWithoutTokenTask),
        }
    }

    /// Applies a successful re-authentication: its connection retires, and
    /// PLAIN credentials (perhaps a new password) are replayed from now on.
    fn reauthenticated(
        &mut self,
        io: &mut Io,
        identity: &sluice_cluster::client_auth::Identity,
        session_lifetime: Option<std::time::Duration>,
    ) {
        io.pool.end_reauth();
        if let Some(credentials) = identity.plain() {
            io.pool.replay_credentials(Arc::clone(credentials));
        }
        self.vouch(&io.shared, identity);
        info!(
            user = identity.username(),
            session_lifetime_ms = session_lifetime.map_or(0, |l| l.as_millis()),
            "client re-authenticated"
        );
    }

    /// A broker just accepted a SCRAM client's credentials: its user's token
    /// may be renewed until the client's session ends (see
    /// [`sluice_auth::token`]).
    fn vouch(&self, shared: &Shared, identity: &sluice_cluster::client_auth::Identity) {
        if let (sluice_cluster::client_auth::Identity::Scram { username, .. }, Some(tokens)) =
            (identity, &shared.tokens)
        {
            let until = self
                .gate
                .session_expiry()
                .map(tokio::time::Instant::from_std);
            tokens.vouch(username, until);
        }
    }
}

/// The SASL step of an entry whose answer is not settled yet.
pub(super) fn sasl_step(entry: &PendingResponse) -> Option<SaslStep> {
    match &entry.combine {
        Combine::Whole(whole) => match whole.post {
            Post::Sasl(step) => Some(step),
            _ => None,
        },
        _ => None,
    }
}
