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

use std::sync::Arc;

use sluice_auth::AuthError;
use sluice_chain::ChainError;
use sluice_codec::{ApiKey, Request, Response};
use tracing::{debug, info, warn};

use super::send::Dest;
use super::{KafkaSinkCluster, now};
use crate::close::{CloseError, Invariant, gate_error};
use crate::pending::{Combine, PartState, PendingResponse, Post};
use crate::pool::Login;
use sluice_cluster::client_auth::{Admit, Mechanism, Outcome, SaslStep};
use sluice_cluster::route::{self, Meta, OnFailure};

impl KafkaSinkCluster {
    /// Passes `request` through the gate, then routes it.
    pub(super) async fn admit(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let client_version = request.api_version();
        let admit = self
            .auth
            .admit(&mut request, now())
            .map_err(gate_error)
            .inspect_err(|e| {
                warn!(api = ?request.api_key(), "closing the client: {e}");
            })?;
        // The gate may have raised a SaslAuthenticate round's version; the
        // client's answer goes out at the version it asked for.
        let entry = self.admitted(request, admit).await?;
        Ok(entry.map(|mut entry| {
            if entry.api_key == ApiKey::SaslAuthenticate {
                entry.api_version = client_version;
            }
            entry
        }))
    }

    /// Carries out the gate's decision on `request`.
    async fn admitted(
        &mut self,
        mut request: Request,
        admit: Admit,
    ) -> Result<Option<PendingResponse>, ChainError> {
        match admit {
            Admit::Route => self.route(request).await,
            Admit::RouteWithoutAuth => {
                debug!("the client does not authenticate");
                self.connections.decide(Login::None, None);
                self.route(request).await
            }
            Admit::AuthConnection(None) => {
                self.send_meta(request, Meta::ApiVersions, Dest::Auth).await
            }
            Admit::AuthConnection(Some(step)) => {
                let entry = self
                    .send_whole(request, Dest::Auth, Post::Sasl(step), OnFailure::Close)
                    .await?;
                self.sasl_in_flight += usize::from(entry.is_some());
                Ok(entry)
            }
            Admit::Answer(body) => Ok(Some(PendingResponse::answering(&request, *body))),
            Admit::Reauthenticate {
                mechanism,
                first_round,
            } => self.reauthenticate(request, mechanism, first_round).await,
            Admit::Refuse(code) => {
                let reason = self.auth.closing().map(ToString::to_string);
                info!(
                    reason = reason.unwrap_or_default(),
                    "closing the client after answering its request with error {code}"
                );
                let (api, version) = (request.api_key(), request.api_version());
                let body = request
                    .body()
                    .ok()
                    .and_then(|body| route::failure_answer(api, body, version, code));
                Ok(body.map(|body| PendingResponse::answering(&request, body)))
            }
            // Logged once, at INFO, when the source closes the client
            // (`routine_close`).
            Admit::Expired => Ok(None),
            Admit::Drop => {
                debug!(
                    api = ?request.api_key(),
                    reason = %self.auth.closing().map(ToString::to_string).unwrap_or_default(),
                    "dropping a request: the client is being closed"
                );
                Ok(None)
            }
        }
    }

    /// Sends one round of the client's re-authentication; the first opens
    /// its connection. No broker to send it to: answered NETWORK_EXCEPTION
    /// (or the broker's refusal of the mechanism), then the client closes.
    async fn reauthenticate(
        &mut self,
        request: Request,
        mechanism: Mechanism,
        first_round: bool,
    ) -> Result<Option<PendingResponse>, ChainError> {
        if first_round && let Err(e) = self.connections.open_reauth(mechanism.name()).await {
            let body = self.reauth_unchecked(e);
            return Ok(Some(PendingResponse::answering(&request, body)));
        }
        let step = SaslStep::Reauthenticate;
        let entry = self
            .send_whole(request, Dest::Reauth, Post::Sasl(step), OnFailure::Close)
            .await?;
        self.sasl_in_flight += usize::from(entry.is_some());
        Ok(entry)
    }

    /// The answer for a re-authentication no broker could check; the client
    /// is closed after it.
    fn reauth_unchecked(&mut self, e: AuthError) -> sluice_codec::ResponseKind {
        let reason = CloseError::ReauthUnchecked {
            user: self.auth.username().unwrap_or_else(|| Arc::from("")),
            source: Arc::new(e),
        };
        warn!("closing the client after answering its re-authentication: {reason}");
        self.connections.end_reauth();
        let refused = reason.reauth_answer_code();
        self.auth.reauth_unchecked(reason, refused)
    }

    /// Waits for every SASL answer in flight and settles it, in order.
    pub(super) async fn settle_sasl(&mut self) -> Result<(), ChainError> {
        if self.sasl_in_flight == 0 {
            return Ok(());
        }
        let timeout = self.shared.request_timeout;
        for index in 0..self.pending.len() {
            let Some(step) = self.pending.get(index).and_then(|e| sasl_step(e)) else {
                continue;
            };
            let Some(entry) = self.pending.get_mut(index) else {
                continue;
            };
            if tokio::time::timeout(timeout, entry.wait_parts())
                .await
                .is_err()
            {
                let reason = CloseError::SaslAnswerTimeout {
                    api: entry.api_key,
                    timeout,
                };
                warn!("closing the client: {reason}");
                return Err(reason.into());
            }
            let result = entry.parts.first_mut().and_then(|p| p.take_result());
            let settled = match result {
                Some(Ok(mut response)) => {
                    self.settle_answer(step, &mut response);
                    Some(Ok(response))
                }
                Some(Err(error)) if step == SaslStep::Reauthenticate => {
                    self.sasl_in_flight = self.sasl_in_flight.saturating_sub(1);
                    let body = self.reauth_unchecked(AuthError::Broker(error));
                    self.pending.get(index).map(|entry| {
                        Ok(Response::from_body(
                            entry.api_key,
                            entry.api_version,
                            entry.correlation_id,
                            body,
                        ))
                    })
                }
                Some(Err(error)) => {
                    self.auth
                        .fail(CloseError::BrokerDuringAuthentication(error.clone()));
                    Some(Err(error))
                }
                None => None,
            };
            if let Some(entry) = self.pending.get_mut(index) {
                if let (Some(result), Some(part)) = (settled, entry.parts.first_mut()) {
                    part.state = PartState::Done(result);
                }
                if let Combine::Whole(whole) = &mut entry.combine {
                    whole.post = Post::None;
                }
            }
        }
        self.sasl_in_flight = 0;
        Ok(())
    }

    /// Runs a SASL answer through the state machine (rewriting it for the
    /// client) and applies what it decided.
    pub(super) fn settle_answer(&mut self, step: SaslStep, response: &mut Response) {
        self.sasl_in_flight = self.sasl_in_flight.saturating_sub(1);
        let outcome = match self.auth.on_answer(step, response, now()) {
            Ok(outcome) => outcome,
            Err(e) => {
                self.auth.fail(CloseError::UnreadableSaslAnswer {
                    step,
                    source: std::sync::Arc::new(e),
                });
                return;
            }
        };
        if step == SaslStep::Handshake && matches!(outcome, Outcome::Continue) {
            // The broker's listener speaks SASL, so it requires it.
            self.shared.learn_sasl_required();
        }
        let (identity, session_lifetime) = match outcome {
            Outcome::Authenticated {
                identity,
                session_lifetime,
            } => (identity, session_lifetime),
            Outcome::Reauthenticated {
                identity,
                session_lifetime,
            } => return self.reauthenticated(&identity, session_lifetime),
            Outcome::Failed => {
                if step == SaslStep::Reauthenticate {
                    self.connections.end_reauth();
                }
                if let Some(reason) = self.auth.closing() {
                    info!("client authentication failed; closing after the answer: {reason}");
                }
                return;
            }
            Outcome::Continue => return,
        };
        self.vouch(&identity);
        let username = identity.username().to_owned();
        let kind = match &identity {
            sluice_cluster::client_auth::Identity::Plain(_) => "PLAIN".to_owned(),
            sluice_cluster::client_auth::Identity::Scram { mechanism, .. } => {
                mechanism.name().to_owned()
            }
        };
        match Login::for_identity(identity, self.shared.tokens.as_ref()) {
            Some(login) => {
                info!(user = username, mechanism = kind, "client authenticated");
                self.connections.decide(login, session_lifetime);
            }
            None => self.auth.fail(Invariant::ScramWithoutTokenTask),
        }
    }

    /// Applies a successful re-authentication: its connection retires, and
    /// PLAIN credentials (perhaps a new password) are replayed from now on.
    fn reauthenticated(
        &mut self,
        identity: &sluice_cluster::client_auth::Identity,
        session_lifetime: Option<std::time::Duration>,
    ) {
        self.connections.end_reauth();
        if let Some(credentials) = identity.plain() {
            self.connections.replay_credentials(Arc::clone(credentials));
        }
        self.vouch(identity);
        info!(
            user = identity.username(),
            session_lifetime_ms = session_lifetime.map_or(0, |l| l.as_millis()),
            "client re-authenticated"
        );
    }

    /// A broker just accepted a SCRAM client's credentials: its user's token
    /// may be renewed until the client's session ends (see
    /// [`sluice_auth::token`]).
    fn vouch(&self, identity: &sluice_cluster::client_auth::Identity) {
        if let (sluice_cluster::client_auth::Identity::Scram { username, .. }, Some(tokens)) =
            (identity, &self.shared.tokens)
        {
            let until = self
                .auth
                .session_expiry()
                .map(tokio::time::Instant::from_std);
            tokens.vouch(username, until);
        }
    }
}

/// The SASL step of an entry whose answer is not settled yet.
fn sasl_step(entry: &PendingResponse) -> Option<SaslStep> {
    match &entry.combine {
        Combine::Whole(whole) => match whole.post {
            Post::Sasl(step) => Some(step),
            _ => None,
        },
        _ => None,
    }
}
