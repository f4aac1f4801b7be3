//! Re-authentication (KIP-368) of a client mid-connection, and the end of
//! its session, with the rules of Kafka's broker (`SocketServer`,
//! `KafkaChannel`, `SaslServerAuthenticator`):
//!
//! - **The session.** The final SaslAuthenticate answer of an
//!   authentication carries the broker's `session_lifetime_ms` (its
//!   `connections.max.reauth.ms`) to the client unchanged; the session ends
//!   that long after Sluice settled the answer. 0: the session does not end.
//! - **Re-authentication begins** with a SaslHandshake once authenticated,
//!   allowed when the session has a lifetime, the first authentication used
//!   SaslAuthenticate v1+ (so the client learned the lifetime), and the last
//!   re-authentication began at least a second ago. Otherwise the
//!   SaslHandshake is answered ILLEGAL_SASL_STATE, and a SaslAuthenticate
//!   outside an exchange too, as Kafka answers them, and the client stays.
//! - **The handshake** is answered by Sluice (Kafka has already told the
//!   client which mechanisms exist): a mechanism Sluice does not carry gets
//!   UNSUPPORTED_SASL_MECHANISM and the client is closed; another mechanism
//!   than the session's is accepted, then the client closed before its
//!   SaslAuthenticate, as Kafka does.
//! - **The exchange is checked against a broker again**, like the first
//!   authentication: the client's SaslAuthenticate rounds go to a fresh
//!   connection to a first contact point, on which Sluice sent its own
//!   SaslHandshake for the mechanism. The broker's answers go to the client
//!   (a refusal, e.g. a changed password or a deleted user, is answered,
//!   then the client is closed). A success as another user is answered
//!   SASL_AUTHENTICATION_FAILED ("Cannot change principals during
//!   re-authentication ...") and closes the client. A success renews the
//!   session from the broker's new lifetime.
//! - **Requests pipelined** behind the client's SaslHandshake before the
//!   exchange ends: the broker answers such a request with its error answer
//!   carrying ILLEGAL_SASL_STATE and closes the connection; so does Sluice.
//!   Requests sent before the handshake are answered in order as always;
//!   those after the final SaslAuthenticate wait for its answer to be
//!   settled, then flow on the renewed session.
//! - **The end of the session.** A client whose session has ended and that
//!   sends anything but a SaslHandshake that begins a re-authentication is
//!   closed: the answers it is owed for earlier requests are written (Kafka
//!   has answered those before it reads the next request), that request is
//!   not answered, and the close is logged once at INFO.
//! - **No broker to check with.** When no first contact point can be
//!   connected, or the broker fails during the exchange, the client's
//!   SaslAuthenticate is answered NETWORK_EXCEPTION with the reason and the
//!   client is closed: Kafka's clients take that error (not an
//!   authentication failure) as a lost connection, retry what they had in
//!   flight and reconnect, authenticating from scratch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Request, RequestKind, ResponseKind};

use super::{
    Admit, ClientAuth, ClientAuthError, GateError, Identity, Mechanism, Outcome, Pending,
    SaslMisuse, State, lifetime_of,
};
use crate::error_codes::{
    ErrorCode, ILLEGAL_SASL_STATE, NETWORK_EXCEPTION, NONE, SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
};

/// Kafka's shortest interval between two re-authentications of a connection.
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// The session of an authenticated client.
#[derive(Debug)]
pub struct Session {
    /// The mechanism of the first authentication; a re-authentication must
    /// use it.
    mechanism: Mechanism,
    /// The user the broker authenticated; a re-authentication must be as it.
    username: Arc<str>,
    /// The first authentication used SaslAuthenticate v1+.
    versioned: bool,
    /// When the session ends; `None`: never.
    expires_at: Option<Instant>,
    /// When the last re-authentication began.
    last_reauth: Option<Instant>,
}

impl Session {
    /// A session that began `now` and lasts `lifetime` (`None`: no end).
    pub(super) fn new(
        mechanism: Mechanism,
        username: Arc<str>,
        versioned: bool,
        lifetime: Option<Duration>,
        now: Instant,
    ) -> Self {
        Self {
            mechanism,
            username,
            versioned,
            expires_at: lifetime.map(|l| now + l),
            last_reauth: None,
        }
    }

    /// Whether the session has ended at `now` (strictly after its end, as
    /// Kafka compares).
    pub fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| now > at)
    }

    /// Whether a SaslHandshake at `now` begins a re-authentication.
    fn may_reauthenticate(&self, now: Instant) -> bool {
        self.expires_at.is_some()
            && self.versioned
            && self
                .last_reauth
                .is_none_or(|at| now.saturating_duration_since(at) >= MIN_REAUTH_INTERVAL)
    }
}

impl<R: From<ClientAuthError>> ClientAuth<R> {
    /// The user of an authenticated client.
    pub fn username(&self) -> Option<Arc<str>> {
        self.session.as_ref().map(|s| Arc::clone(&s.username))
    }

    /// When the client's session ends, if it is authenticated and it does.
    pub fn session_expiry(&self) -> Option<Instant> {
        self.session.as_ref().and_then(|s| s.expires_at)
    }

    /// The gate for an authenticated client (see the module doc).
    pub(super) fn admit_authenticated(
        &mut self,
        request: &mut Request,
        now: Instant,
    ) -> Result<Admit, GateError> {
        let Some(session) = &self.session else {
            self.fail(ClientAuthError::UnexpectedSaslAnswer);
            return Ok(Admit::Drop);
        };
        let api = request.api_key();
        if api == ApiKey::SaslHandshake && session.may_reauthenticate(now) {
            return self.begin(request, now);
        }
        if session.expired(now) {
            let user = Arc::clone(&session.username);
            self.fail(ClientAuthError::SessionExpired { user, api });
            return Ok(Admit::Expired);
        }
        Ok(match api {
            ApiKey::SaslHandshake => Admit::Answer(Box::new(ResponseKind::SaslHandshake(
                SaslHandshakeResponse::default().with_error_code(ILLEGAL_SASL_STATE.code()),
            ))),
            ApiKey::SaslAuthenticate => Admit::Answer(Box::new(ResponseKind::SaslAuthenticate(
                SaslAuthenticateResponse::default()
                    .with_error_code(ILLEGAL_SASL_STATE.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "SaslAuthenticate request received after successful authentication",
                    ))),
            ))),
            _ => Admit::Route,
        })
    }

    /// A SaslHandshake that begins a re-authentication: answered here.
    fn begin(&mut self, request: &mut Request, now: Instant) -> Result<Admit, GateError> {
        if request.api_version() == 0 {
            return Err(SaslMisuse::HandshakeV0.into());
        }
        let RequestKind::SaslHandshake(body) = request.body()? else {
            return Err(SaslMisuse::WrongBody(ApiKey::SaslHandshake).into());
        };
        let requested = body.mechanism.to_string();
        let offered = self.offered.clone();
        let answer = |code: ErrorCode| {
            Admit::Answer(Box::new(ResponseKind::SaslHandshake(
                SaslHandshakeResponse::default()
                    .with_error_code(code.code())
                    .with_mechanisms(offered),
            )))
        };
        let Some(mechanism) = self.carried(&requested) else {
            self.state = State::Closing(ClientAuthError::MechanismNotOffered { requested }.into());
            return Ok(answer(UNSUPPORTED_SASL_MECHANISM));
        };
        let Some(session) = &mut self.session else {
            self.fail(ClientAuthError::UnexpectedSaslAnswer);
            return Ok(Admit::Drop);
        };
        session.last_reauth = Some(now);
        if mechanism != session.mechanism {
            self.state = State::Closing(
                ClientAuthError::ReauthMechanismChanged {
                    from: session.mechanism.name(),
                    to: mechanism.name(),
                }
                .into(),
            );
        } else {
            self.state = State::Reauth {
                requested: mechanism,
                answered: 0,
                pending: None,
            };
        }
        Ok(answer(NONE))
    }

    /// The gate during a re-authentication: only its SaslAuthenticate rounds.
    pub(super) fn admit_reauth(&mut self, request: &mut Request) -> Result<Admit, GateError> {
        let State::Reauth {
            requested,
            answered,
            ..
        } = &self.state
        else {
            return Ok(Admit::Drop);
        };
        let (mechanism, answered) = (*requested, *answered);
        let api = request.api_key();
        if api != ApiKey::SaslAuthenticate {
            self.fail(ClientAuthError::Sasl(SaslMisuse::DuringReauthentication(
                api,
            )));
            return Ok(Admit::Refuse(ILLEGAL_SASL_STATE));
        }
        if answered > 0 {
            return Ok(Admit::Reauthenticate {
                mechanism,
                first_round: false,
            });
        }
        match self.claim(request, mechanism)? {
            Ok(claim) => {
                if let State::Reauth { pending, .. } = &mut self.state {
                    *pending = Some(claim);
                }
                Ok(Admit::Reauthenticate {
                    mechanism,
                    first_round: true,
                })
            }
            Err(answer) => Ok(answer),
        }
    }

    /// Settles the broker's answer to a re-authentication round.
    pub(super) fn on_reauthenticate(
        &mut self,
        answer: &mut SaslAuthenticateResponse,
        now: Instant,
    ) -> Outcome {
        let State::Reauth {
            requested,
            answered,
            pending,
        } = &mut self.state
        else {
            return self.unexpected_answer();
        };
        if answer.error_code != 0 {
            self.state = State::Closing(
                ClientAuthError::ReauthenticationFailed {
                    code: ErrorCode::from_wire(answer.error_code),
                    message: answer.error_message.as_ref().map(|m| m.to_string()),
                }
                .into(),
            );
            return Outcome::Failed;
        }
        *answered += 1;
        if *answered < requested.rounds() {
            return Outcome::Continue;
        }
        let Some(identity) = identity_of(pending.take(), *requested) else {
            return self.unexpected_answer();
        };
        let Some(session) = &mut self.session else {
            return self.unexpected_answer();
        };
        if identity.username() != &*session.username {
            let message = format!(
                "Cannot change principals during re-authentication from User.{}: User.{}",
                session.username,
                identity.username()
            );
            *answer = SaslAuthenticateResponse::default()
                .with_error_code(SASL_AUTHENTICATION_FAILED.code())
                .with_error_message(Some(StrBytes::from_string(message)));
            self.state = State::Closing(
                ClientAuthError::PrincipalChanged {
                    from: Arc::clone(&session.username),
                    to: Arc::from(identity.username()),
                }
                .into(),
            );
            return Outcome::Failed;
        }
        let session_lifetime = lifetime_of(answer.session_lifetime_ms);
        session.expires_at = session_lifetime.map(|l| now + l);
        self.state = State::Authenticated;
        Outcome::Reauthenticated {
            identity,
            session_lifetime,
        }
    }

    /// No broker could check a re-authentication: the client's
    /// SaslAuthenticate gets this answer (NETWORK_EXCEPTION, which Kafka's
    /// clients retry by reconnecting, unless the broker refused Sluice's
    /// own SaslHandshake for it with `refused`), then the client is closed.
    pub fn reauth_unchecked(&mut self, reason: R, refused: Option<ErrorCode>) -> ResponseKind
    where
        R: std::fmt::Display,
    {
        let message = format!("re-authentication could not be checked: {reason}; reconnect");
        let code = refused.unwrap_or(NETWORK_EXCEPTION);
        self.fail(reason);
        ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        )
    }
}

impl Identity {
    /// The PLAIN credentials, for a PLAIN identity.
    pub fn plain(&self) -> Option<&Arc<super::PlainCredentials>> {
        match self {
            Identity::Plain(c) => Some(c),
            Identity::Scram { .. } => None,
        }
    }
}

/// Who a completed exchange authenticated, from its claim.
pub(super) fn identity_of(pending: Option<Pending>, mechanism: Mechanism) -> Option<Identity> {
    match (pending, mechanism) {
        (Some(Pending::Plain(credentials)), _) => Some(Identity::Plain(credentials)),
        (Some(Pending::Scram(username)), Mechanism::Scram(mechanism)) => Some(Identity::Scram {
            username,
            mechanism,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
