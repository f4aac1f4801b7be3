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
//! Nothing here logs a SASL body: PLAIN messages carry passwords and SCRAM
//! messages carry proofs.

use sluice_chain::ChainError;
use sluice_codec::{Request, Response};
use tracing::{debug, info, warn};

use super::KafkaSinkCluster;
use super::send::{Dest, ready};
use crate::auth::login::Login;
use crate::auth::{Admit, Outcome, SaslStep};
use crate::close::{CloseError, Invariant};
use crate::pending::{Combine, PartState, PendingResponse, Post};
use crate::route::{Meta, OnFailure};

impl KafkaSinkCluster {
    /// Passes `request` through the gate, then routes it.
    pub(super) async fn admit(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let admit = self.auth.admit(&mut request).inspect_err(|e| {
            warn!(api = ?request.api_key(), "closing the client: {e}");
        })?;
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
            Admit::Answer(body) => Ok(Some(ready(&request, *body))),
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
        let outcome = match self.auth.on_answer(step, response) {
            Ok(outcome) => outcome,
            Err(e) => {
                self.auth.fail(CloseError::UnreadableSaslAnswer {
                    step,
                    source: std::sync::Arc::new(e),
                });
                return;
            }
        };
        let Outcome::Authenticated {
            identity,
            session_lifetime,
        } = outcome
        else {
            if let (Outcome::Failed, Some(reason)) = (&outcome, self.auth.closing()) {
                info!("client authentication failed; closing after the answer: {reason}");
            }
            return;
        };
        let username = identity.username().to_owned();
        let kind = match &identity {
            crate::auth::Identity::Plain(_) => "PLAIN".to_owned(),
            crate::auth::Identity::Scram { mechanism, .. } => mechanism.name().to_owned(),
        };
        match Login::for_identity(identity, self.shared.tokens.as_ref()) {
            Some(login) => {
                info!(user = username, mechanism = kind, "client authenticated");
                self.connections.decide(login, session_lifetime);
            }
            None => self.auth.fail(Invariant::ScramWithoutTokenTask),
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
