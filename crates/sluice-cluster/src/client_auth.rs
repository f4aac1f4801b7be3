//! The client authentication state machine of one client connection: what
//! may reach a broker before the client has authenticated, which SASL
//! mechanisms are offered, and who the client turned out to be.
//!
//! Sluice carries a client's authentication onto every broker connection it
//! opens for that client, so it only offers mechanisms it can carry:
//!
//! - **PLAIN**: the client's exchange goes to one broker; on success its
//!   credentials (read from the PLAIN message) are replayed on every other
//!   broker connection.
//! - **SCRAM-SHA-256/512, with `authorize_scram_over_mtls`**: the client's
//!   exchange goes to one broker; on success the username (from the
//!   client-first-message) selects the delegation token that authenticates
//!   every other broker connection. Without `authorize_scram_over_mtls` SCRAM
//!   is not offered: it cannot be replayed.
//!
//! Other mechanisms (GSSAPI, OAUTHBEARER) cannot be replayed either and are
//! not offered. A handshake for a mechanism that is not offered is answered
//! with UNSUPPORTED_SASL_MECHANISM and the offered ones, then the client is
//! closed, as a broker would.
//!
//! # The gate
//!
//! Until the client is authenticated only ApiVersions, SaslHandshake and
//! SaslAuthenticate leave Sluice, on the client's *auth connection*. A client
//! that sends anything else first:
//! - where authentication is required (`authorize_scram_over_mtls`,
//!   `require_authentication`, or brokers that accepted a SaslHandshake
//!   before the client connected): is closed, as a SASL listener closes
//!   it, and no broker connection is opened for it;
//! - otherwise: is taken to use no authentication (a cluster without SASL),
//!   and its requests are routed as usual from then on.
//!
//! A client that started authenticating and sends anything else before it
//! succeeded is closed. A failed authentication is answered with the
//! broker's error, then the client is closed ([`State::Closing`]): requests
//! that follow are dropped, the close is logged with the reason.
//!
//! The driver settles every SASL answer (runs it through
//! [`ClientAuth::on_answer`]) before it admits the next request, so the state
//! seen by [`ClientAuth::admit`] is never behind the broker.
//!
//! # Sessions and re-authentication (KIP-368)
//!
//! The broker's `session_lifetime_ms` (its `connections.max.reauth.ms`) in
//! the final SaslAuthenticate answer reaches the client unchanged, and
//! starts the client's session with Sluice. The client re-authenticates
//! mid-connection before it ends; how that is checked against a broker
//! again, what a client whose session ended gets, and what happens when no
//! broker answers: [`reauth`]. Sluice's own broker connections are renewed
//! before their own sessions end (the driver's `pool/slot.rs`).
//!
//! SaslAuthenticate v0 answers carry no lifetime, so a client's v0 round
//! goes to the broker as v1 (the request bodies are the same) and its answer
//! goes back to the client as v0: Sluice learns the lifetime whatever
//! version the client speaks, and closes a v0 client (which cannot
//! re-authenticate) at the end of its session, as the broker would. An
//! answer below v1 never starts or renews a session: it fails the client.

mod error;
pub mod messages;
pub mod reauth;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use std::time::Instant;

use sluice_codec::kafka_protocol::messages::SaslAuthenticateResponse;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, CodecError, Request, RequestKind, Response, ResponseKind};

pub use error::{ClaimError, ClientAuthError, GateError, SaslMisuse};

use crate::error_codes::{ErrorCode, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM};
pub use messages::{PlainCredentials, parse_scram_client_first};
use reauth::Session;

/// A SCRAM mechanism, by the hash its exchange uses: the SCRAM client's
/// own type (the exchange itself is the broker's business).
pub use sluice_scram::ScramMechanism;

/// A SASL mechanism Sluice can carry onto its broker connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN: the credentials are replayed.
    Plain,
    /// SCRAM: a delegation token of the user stands in (SCRAM over mTLS).
    Scram(ScramMechanism),
}

impl Mechanism {
    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }

    /// Rounds of SaslAuthenticate until the exchange is complete.
    pub fn rounds(self) -> u8 {
        match self {
            Mechanism::Plain => 1,
            Mechanism::Scram(_) => 2,
        }
    }
}

/// Who an authenticated client is, and how to authenticate for it.
#[derive(Debug, Clone)]
pub enum Identity {
    /// PLAIN: the client's own credentials.
    Plain(Arc<PlainCredentials>),
    /// SCRAM: the user, and the mechanism its token connections must use.
    Scram {
        /// The username the broker authenticated.
        username: Arc<str>,
        /// The client's mechanism (a token proof must match the handshake).
        mechanism: ScramMechanism,
    },
}

impl Identity {
    /// The username.
    pub fn username(&self) -> &str {
        match self {
            Identity::Plain(c) => c.username(),
            Identity::Scram { username, .. } => username,
        }
    }
}

/// Which SASL request an answer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslStep {
    /// SaslHandshake: the offered mechanisms are filtered.
    Handshake,
    /// SaslAuthenticate: success or failure decides the client's fate.
    Authenticate,
    /// SaslAuthenticate of a re-authentication, on a fresh connection that
    /// Sluice opened and sent its own SaslHandshake on.
    Reauthenticate,
}

/// What to do with a client request.
#[derive(Debug)]
pub enum Admit {
    /// Route it as usual.
    Route,
    /// The client's first request is not about authentication: it uses none
    /// (only without `authorize_scram_over_mtls`). Route it as usual.
    RouteWithoutAuth,
    /// Send it on the client's auth connection. `Some`: a SASL request whose
    /// answer must go through [`ClientAuth::on_answer`].
    AuthConnection(Option<SaslStep>),
    /// Answer it with this body (then close the client if it is closing).
    Answer(Box<ResponseKind>),
    /// A re-authentication round: send it on a re-authentication connection
    /// for `mechanism`, opened fresh (with Sluice's own SaslHandshake) when
    /// `first_round`, else the one the first round went on.
    Reauthenticate {
        /// The session's mechanism.
        mechanism: Mechanism,
        /// The exchange's first SaslAuthenticate.
        first_round: bool,
    },
    /// Answer it with its API's error answer carrying this code, then close
    /// the client (a request in the middle of a re-authentication).
    Refuse(ErrorCode),
    /// The client's session ended and it sent something other than a
    /// re-authentication: the client is closed (logged once at INFO, by the
    /// source when it closes the client: a routine close).
    Expired,
    /// The client is being closed: drop it.
    Drop,
}

/// What an answer did to the client's authentication.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing decided yet.
    Continue,
    /// The client authenticated.
    Authenticated {
        /// Who it is.
        identity: Identity,
        /// The broker's `session_lifetime_ms` for the auth connection.
        session_lifetime: Option<Duration>,
    },
    /// The client re-authenticated as the same user.
    Reauthenticated {
        /// Who it is (for PLAIN: with the password it gave this time).
        identity: Identity,
        /// The broker's `session_lifetime_ms` for the re-authentication.
        session_lifetime: Option<Duration>,
    },
    /// Authentication failed: the answer goes to the client, then it is closed.
    Failed,
}

/// Where the client stands.
#[derive(Debug)]
enum State<R> {
    /// Nothing sent yet but ApiVersions.
    Start,
    /// SaslHandshake for `requested` sent; its answer is not settled.
    Handshake { requested: String },
    /// The mechanism was accepted; `answered` SaslAuthenticate rounds went well.
    Exchange {
        mechanism: Mechanism,
        answered: u8,
        pending: Option<Pending>,
        /// A SaslAuthenticate of v1 or later was seen (the client can learn
        /// its session lifetime, so it may re-authenticate).
        versioned: bool,
    },
    /// Re-authenticating (the first authentication's [`Session`] stands
    /// meanwhile); `answered` SaslAuthenticate rounds went well.
    Reauth {
        /// The mechanism the client asked for in its new SaslHandshake.
        requested: Mechanism,
        answered: u8,
        pending: Option<Pending>,
    },
    /// Authenticated.
    Authenticated,
    /// The client does not authenticate.
    WithoutAuth,
    /// To be closed, for this reason, once the answers owed are written.
    Closing(R),
}

/// Who the client claims to be, until the broker agrees.
#[derive(Debug)]
enum Pending {
    Plain(Arc<PlainCredentials>),
    Scram(Arc<str>),
}

/// The authentication state of one client connection. `R` is why the
/// client is closed: [`ClientAuthError`], or the driver's own reason that
/// wraps it (the driver closes the client for reasons of its own too).
#[derive(Debug)]
pub struct ClientAuth<R = ClientAuthError> {
    /// `authorize_scram_over_mtls` is configured: SCRAM is offered.
    scram_over_mtls: bool,
    /// The client must authenticate before anything else reaches a broker.
    required: bool,
    state: State<R>,
    /// The session of an authenticated client: set by the first successful
    /// authentication, renewed by each re-authentication.
    session: Option<Session>,
    /// The mechanisms the client was offered (the broker's, filtered), for
    /// the answer to a re-authentication's SaslHandshake.
    offered: Vec<StrBytes>,
}

impl<R: From<ClientAuthError>> ClientAuth<R> {
    /// A client that has sent nothing yet (it must authenticate with
    /// `scram_over_mtls`; see also [`ClientAuth::requiring`]).
    pub fn new(scram_over_mtls: bool) -> Self {
        Self {
            scram_over_mtls,
            required: scram_over_mtls,
            state: State::Start,
            session: None,
            offered: Vec::new(),
        }
    }

    /// The same client, that must authenticate when `required` (the brokers
    /// require SASL).
    pub fn requiring(mut self, required: bool) -> Self {
        self.required |= required;
        self
    }

    /// Whether the client is past the gate: authenticated (also while it
    /// re-authenticates), or using no authentication. Before that, only its
    /// auth connection exists.
    pub fn decided(&self) -> bool {
        matches!(self.state, State::Authenticated | State::WithoutAuth) || self.session.is_some()
    }

    /// Whether the client must authenticate (see [`ClientAuth::new`]).
    pub fn required(&self) -> bool {
        self.required
    }

    /// The reason the client is being closed, if it is.
    pub fn closing(&self) -> Option<&R> {
        match &self.state {
            State::Closing(reason) => Some(reason),
            _ => None,
        }
    }

    /// Closes the client (once its owed answers are written) for `reason`.
    pub fn fail(&mut self, reason: impl Into<R>) {
        if !matches!(self.state, State::Closing(_)) {
            self.state = State::Closing(reason.into());
        }
    }

    /// The mechanism called `name` if Sluice can carry it (exact name, as
    /// Kafka compares them).
    pub fn carried(&self, name: &str) -> Option<Mechanism> {
        if name == Mechanism::Plain.name() {
            return Some(Mechanism::Plain);
        }
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.name() == name && self.scram_over_mtls)
            .map(Mechanism::Scram)
    }

    /// Decides what happens to `request`. `Err`: close the client now. A
    /// SaslAuthenticate round that goes to a broker is at v1 or later
    /// afterwards (see [`with_session_lifetime`]); the client's answer must
    /// then be written at the version it asked for. `now`: when the request
    /// was read (a session ends by the clock).
    pub fn admit(&mut self, request: &mut Request, now: Instant) -> Result<Admit, GateError> {
        let admit = self.gate(request, now)?;
        if matches!(
            admit,
            Admit::AuthConnection(Some(SaslStep::Authenticate)) | Admit::Reauthenticate { .. }
        ) {
            with_session_lifetime(request)?;
        }
        Ok(admit)
    }

    fn gate(&mut self, request: &mut Request, now: Instant) -> Result<Admit, GateError> {
        if matches!(self.state, State::Closing(_)) {
            return Ok(Admit::Drop);
        }
        if matches!(self.state, State::Authenticated) {
            return self.admit_authenticated(request, now);
        }
        if matches!(self.state, State::Reauth { .. }) {
            return self.admit_reauth(request);
        }
        match request.api_key() {
            ApiKey::ApiVersions if self.decided() => Ok(Admit::Route),
            ApiKey::ApiVersions => Ok(Admit::AuthConnection(None)),
            ApiKey::SaslHandshake => self.admit_handshake(request),
            ApiKey::SaslAuthenticate => self.admit_authenticate(request),
            api => self.admit_other(api),
        }
    }

    fn admit_handshake(&mut self, request: &mut Request) -> Result<Admit, GateError> {
        match &self.state {
            State::WithoutAuth => return Ok(Admit::Route),
            State::Start => {}
            _ => return Err(SaslMisuse::SecondHandshake.into()),
        }
        if request.api_version() == 0 {
            return Err(SaslMisuse::HandshakeV0.into());
        }
        let RequestKind::SaslHandshake(body) = request.body()? else {
            return Err(SaslMisuse::WrongBody(ApiKey::SaslHandshake).into());
        };
        self.state = State::Handshake {
            requested: body.mechanism.to_string(),
        };
        Ok(Admit::AuthConnection(Some(SaslStep::Handshake)))
    }

    fn admit_authenticate(&mut self, request: &mut Request) -> Result<Admit, GateError> {
        let version = request.api_version();
        let (mechanism, answered) = match &mut self.state {
            State::WithoutAuth => return Ok(Admit::Route),
            State::Exchange {
                mechanism,
                answered,
                versioned,
                ..
            } => {
                // Like Kafka: any one SaslAuthenticate of v1+ will do.
                *versioned |= version > 0;
                (*mechanism, *answered)
            }
            _ => {
                return Err(SaslMisuse::AuthenticateBeforeHandshake.into());
            }
        };
        if answered >= mechanism.rounds() {
            return Err(SaslMisuse::AuthenticateAfterExchange.into());
        }
        if answered > 0 {
            return Ok(Admit::AuthConnection(Some(SaslStep::Authenticate)));
        }
        match self.claim(request, mechanism)? {
            Ok(claim) => {
                if let State::Exchange { pending: slot, .. } = &mut self.state {
                    *slot = Some(claim);
                }
                Ok(Admit::AuthConnection(Some(SaslStep::Authenticate)))
            }
            Err(answer) => Ok(answer),
        }
    }

    /// Reads who the client's first SaslAuthenticate of an exchange claims to
    /// be. `Ok(Err(answer))`: Sluice refuses the message itself; the client
    /// gets `answer` and is closed.
    fn claim(
        &mut self,
        request: &mut Request,
        mechanism: Mechanism,
    ) -> Result<Result<Pending, Admit>, GateError> {
        let RequestKind::SaslAuthenticate(body) = request.body()? else {
            return Err(SaslMisuse::WrongBody(ApiKey::SaslAuthenticate).into());
        };
        let claim = match mechanism {
            Mechanism::Plain => PlainCredentials::parse(&body.auth_bytes)
                .map(|c| Pending::Plain(Arc::new(c)))
                .map_err(ClaimError::Message),
            Mechanism::Scram(_) => match parse_scram_client_first(&body.auth_bytes) {
                Ok(first) if first.tokenauth => Err(ClaimError::TokenAuth),
                Ok(first) => Ok(Pending::Scram(Arc::from(first.username))),
                Err(e) => Err(ClaimError::Message(e)),
            },
        };
        Ok(claim.map_err(|reason| {
            let message = format!("Authentication failed: {reason}");
            self.state = State::Closing(ClientAuthError::Claim(reason).into());
            Admit::Answer(Box::new(ResponseKind::SaslAuthenticate(
                SaslAuthenticateResponse::default()
                    .with_error_code(SASL_AUTHENTICATION_FAILED.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            )))
        }))
    }

    fn admit_other(&mut self, api: ApiKey) -> Result<Admit, GateError> {
        match &self.state {
            State::WithoutAuth => Ok(Admit::Route),
            State::Start if self.required => Err(SaslMisuse::Unauthenticated(api).into()),
            State::Start => {
                self.state = State::WithoutAuth;
                Ok(Admit::RouteWithoutAuth)
            }
            _ => Err(SaslMisuse::DuringExchange(api).into()),
        }
    }

    /// Settles the broker's answer to a SASL request sent at `step`: filters
    /// the offered mechanisms and moves the state on (`session_lifetime_ms`
    /// goes to the client as the broker gave it, and starts its session).
    /// The answer (possibly rewritten) then goes to the client. `now`: when
    /// it was settled (a session starts then).
    pub fn on_answer(
        &mut self,
        step: SaslStep,
        response: &mut Response,
        now: Instant,
    ) -> Result<Outcome, CodecError> {
        let version = response.api_version();
        if step != SaslStep::Handshake && version < 1 {
            self.fail(ClientAuthError::UnversionedSaslAnswer(version));
            return Ok(Outcome::Failed);
        }
        match (step, response.body_mut()?) {
            (SaslStep::Handshake, ResponseKind::SaslHandshake(answer)) => {
                answer
                    .mechanisms
                    .retain(|m| self.carried(m.as_str()).is_some());
                self.offered.clone_from(&answer.mechanisms);
                let requested = match &self.state {
                    State::Handshake { requested } => requested.clone(),
                    _ => return Ok(self.unexpected_answer()),
                };
                let Some(mechanism) = self.carried(&requested) else {
                    answer.error_code = UNSUPPORTED_SASL_MECHANISM.code();
                    self.state =
                        State::Closing(ClientAuthError::MechanismNotOffered { requested }.into());
                    return Ok(Outcome::Failed);
                };
                if answer.error_code != 0 {
                    self.state = State::Closing(
                        ClientAuthError::MechanismRefused {
                            mechanism: requested,
                            code: ErrorCode::from_wire(answer.error_code),
                        }
                        .into(),
                    );
                    return Ok(Outcome::Failed);
                }
                self.state = State::Exchange {
                    mechanism,
                    answered: 0,
                    pending: None,
                    versioned: false,
                };
                Ok(Outcome::Continue)
            }
            (SaslStep::Authenticate, ResponseKind::SaslAuthenticate(answer)) => {
                let lifetime = lifetime_of(answer.session_lifetime_ms);
                let code = ErrorCode::from_wire(answer.error_code);
                let message = answer.error_message.as_ref().map(|m| m.to_string());
                Ok(self.on_authenticate(code, message, lifetime, now))
            }
            (SaslStep::Reauthenticate, ResponseKind::SaslAuthenticate(answer)) => {
                Ok(self.on_reauthenticate(answer, now))
            }
            _ => Ok(self.unexpected_answer()),
        }
    }

    fn on_authenticate(
        &mut self,
        code: ErrorCode,
        message: Option<String>,
        session_lifetime: Option<Duration>,
        now: Instant,
    ) -> Outcome {
        let State::Exchange {
            mechanism,
            answered,
            pending,
            versioned,
        } = &mut self.state
        else {
            return self.unexpected_answer();
        };
        if !code.is_none() {
            self.state =
                State::Closing(ClientAuthError::AuthenticationFailed { code, message }.into());
            return Outcome::Failed;
        }
        *answered += 1;
        if *answered < mechanism.rounds() {
            return Outcome::Continue;
        }
        let Some(identity) = reauth::identity_of(pending.take(), *mechanism) else {
            return self.unexpected_answer();
        };
        self.session = Some(Session::new(
            *mechanism,
            Arc::from(identity.username()),
            *versioned,
            session_lifetime,
            now,
        ));
        self.state = State::Authenticated;
        Outcome::Authenticated {
            identity,
            session_lifetime,
        }
    }

    fn unexpected_answer(&mut self) -> Outcome {
        self.fail(ClientAuthError::UnexpectedSaslAnswer);
        Outcome::Failed
    }
}

/// A `session_lifetime_ms` as a duration; `None` when the broker sets none.
fn lifetime_of(ms: i64) -> Option<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// SaslAuthenticate v0 and v1 requests have the same body; only v1's answer
/// carries `session_lifetime_ms`. A v0 `request` is rebuilt at v1 so that the
/// broker tells Sluice the session's lifetime (the client's answer goes back
/// at v0: [`in_client_version`]).
fn with_session_lifetime(request: &mut Request) -> Result<(), CodecError> {
    if request.api_key() != ApiKey::SaslAuthenticate || request.api_version() >= 1 {
        return Ok(());
    }
    let body = request.body()?.clone();
    let header = request.header();
    *request = Request::from_body(
        ApiKey::SaslAuthenticate,
        1,
        header.correlation_id,
        header.client_id.clone(),
        body,
    );
    Ok(())
}

/// `response` at the version the client asked for, `client_version`: a
/// SaslAuthenticate answer that a broker gave at v1 for a client's v0 round
/// is rebuilt at v0 (without the lifetime, which v0 cannot carry). Other
/// answers are already at the client's version and stay as they are.
pub fn in_client_version(response: Response, client_version: i16) -> Result<Response, CodecError> {
    if response.api_key() != ApiKey::SaslAuthenticate || response.api_version() == client_version {
        return Ok(response);
    }
    let correlation_id = response.correlation_id();
    let body = response.into_body()?;
    Ok(Response::from_body(
        ApiKey::SaslAuthenticate,
        client_version,
        correlation_id,
        body,
    ))
}
