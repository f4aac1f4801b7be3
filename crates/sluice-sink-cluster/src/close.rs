//! Why the cluster sink closes a client connection: [`CloseError`], handed
//! to the source as [`ChainError::Sink`](sluice_chain::ChainError::Sink),
//! each variant classified where it is defined (the client's doing, a
//! broker's, or a bug in Sluice) instead of flattened into a string.

use std::sync::Arc;
use std::time::Duration;

use sluice_auth::AuthError;
use sluice_broker::{BrokerAddress, BrokerError};
use sluice_chain::ChainError;
use sluice_codec::{ApiKey, CodecError};
use sluice_error::{ErrorClass, ErrorSide};

use crate::auth::SaslStep;
use crate::auth::messages::MessageError;
use crate::connections::Target;
use crate::split::SplitError;

/// SASL_AUTHENTICATION_FAILED: wrong credentials.
const SASL_AUTHENTICATION_FAILED: i16 =
    sluice_codec::kafka_protocol::ResponseError::SaslAuthenticationFailed.code();

/// Why the cluster sink closes a client connection.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CloseError {
    /// The client sent an API only brokers may send.
    #[error("client request refused: {api:?} is not available through sluice")]
    NotForClients {
        /// The API.
        api: ApiKey,
    },
    /// The client broke the SASL exchange's rules.
    #[error("client request refused: {0}")]
    Sasl(#[from] SaslMisuse),
    /// The client's first SASL message cannot be used.
    #[error("authentication refused by sluice: {0}")]
    Claim(#[from] ClaimError),
    /// The client asked for a mechanism Sluice does not carry.
    #[error("the client asked for SASL mechanism {requested:?}, which sluice does not offer")]
    MechanismNotOffered {
        /// The mechanism asked for.
        requested: String,
    },
    /// The broker refused the mechanism Sluice carries.
    #[error("the broker refused SASL mechanism {mechanism} with error {code}")]
    MechanismRefused {
        /// The mechanism.
        mechanism: String,
        /// The broker's error code.
        code: i16,
    },
    /// The broker refused the client's authentication.
    #[error(
        "authentication failed: the broker answered SaslAuthenticate with error {code}{}",
        message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    AuthenticationFailed {
        /// The broker's error code.
        code: i16,
        /// The broker's message.
        message: Option<String>,
    },
    /// A broker failed while the client authenticated through it.
    #[error("the broker failed during authentication: {0}")]
    BrokerDuringAuthentication(BrokerError),
    /// The broker's answer to a SASL request cannot be read.
    #[error("the broker's {step:?} answer cannot be read: {source}")]
    UnreadableSaslAnswer {
        /// The step it answered.
        step: SaslStep,
        /// The decode error.
        source: Arc<CodecError>,
    },
    /// No answer to the client's SASL request within the request timeout:
    /// the broker is slow or gone.
    #[error("no answer to the client's {api:?} within {}ms", timeout.as_millis())]
    SaslAnswerTimeout {
        /// The SASL API.
        api: ApiKey,
        /// How long Sluice waited.
        timeout: Duration,
    },
    /// A broker no longer accepts the client's PLAIN credentials when they
    /// are replayed on a new connection.
    #[error("{broker}: the broker no longer accepts the client's PLAIN credentials: {source}")]
    CredentialsRejected {
        /// The broker.
        broker: BrokerAddress,
        /// Its refusal.
        source: Arc<AuthError>,
    },
    /// The user's delegation token cannot be had (SCRAM over mTLS).
    #[error("no delegation token for user {user}: {source}")]
    NoToken {
        /// The user.
        user: Arc<str>,
        /// Why.
        source: Arc<AuthError>,
    },
    /// The client's session ended (KIP-368) and it sent something other
    /// than a re-authentication.
    #[error(
        "the sasl session of user {user} has expired (connections.max.reauth.ms) and the client sent {api:?} instead of re-authenticating"
    )]
    SessionExpired {
        /// The user.
        user: Arc<str>,
        /// What the client sent.
        api: ApiKey,
    },
    /// A re-authentication asked for another mechanism than the session's.
    #[error("sasl mechanism {to} requested for re-authentication of mechanism {from}")]
    ReauthMechanismChanged {
        /// The session's mechanism.
        from: &'static str,
        /// The one asked for.
        to: &'static str,
    },
    /// The broker refused the client's re-authentication (e.g. its password
    /// changed or the user was deleted).
    #[error(
        "re-authentication failed: the broker answered SaslAuthenticate with error {code}{}",
        message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    ReauthenticationFailed {
        /// The broker's error code.
        code: i16,
        /// The broker's message.
        message: Option<String>,
    },
    /// A re-authentication succeeded as another user.
    #[error("cannot change principals during re-authentication from User:{from} to User:{to}")]
    PrincipalChanged {
        /// The session's user.
        from: Arc<str>,
        /// The user of the re-authentication.
        to: Arc<str>,
    },
    /// No broker could check the client's re-authentication.
    #[error("no broker could check the re-authentication of user {user}: {source}")]
    ReauthUnchecked {
        /// The user.
        user: Arc<str>,
        /// Why.
        source: Arc<AuthError>,
    },
    /// A bug in Sluice: an invariant did not hold.
    #[error("internal: {0}")]
    Invariant(#[from] Invariant),
    /// A split request's answers could not be merged.
    #[error("internal: {0}")]
    Merge(Arc<SplitError>),
    /// No Sluice node is up to be named in an answer.
    #[error("internal: no sluice node is up to answer with")]
    NoSluiceNodeUp,
}

/// How the client broke the SASL exchange's rules.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SaslMisuse {
    /// Another API between a re-authentication's SaslHandshake and the end
    /// of its exchange.
    #[error("{0:?} during sasl re-authentication")]
    DuringReauthentication(ApiKey),
    /// A second SaslHandshake during the exchange.
    #[error("a second SaslHandshake during authentication")]
    SecondHandshake,
    /// SaslHandshake v0 (SASL without Kafka framing).
    #[error("SaslHandshake v0 (SASL without Kafka framing) is not supported")]
    HandshakeV0,
    /// A request whose body is of another API than its key says.
    #[error("a {0:?} request of another kind")]
    WrongBody(ApiKey),
    /// SaslAuthenticate before a successful SaslHandshake.
    #[error("SaslAuthenticate before a successful SaslHandshake")]
    AuthenticateBeforeHandshake,
    /// SaslAuthenticate after the exchange completed.
    #[error("a SaslAuthenticate after the exchange completed")]
    AuthenticateAfterExchange,
    /// Another API before authentication, where it is required.
    #[error("{0:?} before authentication: this listener requires SASL authentication")]
    Unauthenticated(ApiKey),
    /// Another API in the middle of the exchange.
    #[error("{0:?} before authentication completed")]
    DuringExchange(ApiKey),
}

/// Why the client's first SASL message cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ClaimError {
    /// It does not parse.
    #[error("{0}")]
    Message(#[from] MessageError),
    /// SCRAM with `tokenauth`: the client authenticates with a delegation
    /// token of its own, which Sluice cannot replay.
    #[error("delegation token authentication (tokenauth) is not supported through sluice")]
    TokenAuth,
}

/// An invariant of the sink that did not hold: a bug, reported with what
/// it was about.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Invariant {
    /// A SASL answer that does not match the authentication state.
    #[error("a SASL answer that does not match the authentication state")]
    UnexpectedSaslAnswer,
    /// A SaslAuthenticate answer below v1 reached the state machine: it
    /// carries no session lifetime (Sluice sends every round at v1 or later).
    #[error("a SaslAuthenticate answer at v{0}, which carries no session lifetime")]
    UnversionedSaslAnswer(i16),
    /// A SCRAM client authenticated though the sink has no token task.
    #[error("a SCRAM client authenticated without a token task")]
    ScramWithoutTokenTask,
    /// A broker connection was asked for before the client's login was known.
    #[error(
        "{0}: a broker connection was requested before the client's authentication was decided"
    )]
    ConnectionBeforeLogin(BrokerAddress),
    /// A broker connection was not opened for this client's login.
    #[error("{0}: the connection was not authenticated for this client")]
    ConnectionOfAnotherLogin(BrokerAddress),
    /// A connection target had no connection right after it was opened.
    #[error("{0:?}: no connection right after it was opened")]
    NoConnection(Target),
    /// A request's part was combined before it was done, or twice.
    #[error("{0:?}: a part combined before its answer was in")]
    PartNotDone(ApiKey),
    /// An answer whose part names no broker (only a part that was sent
    /// has an answer, and it names the broker it went to).
    #[error("{0:?}: an answer without the broker it came from")]
    AnswerWithoutBroker(ApiKey),
    /// A whole request's pending entry has no part.
    #[error("{0:?}: a whole request without its part")]
    WholeWithoutPart(ApiKey),
    /// A request split by key that this sink cannot merge.
    #[error("{0:?} cannot be merged by key")]
    NotMergeableByKey(ApiKey),
    /// A request routed as split that the split module does not split.
    #[error("a request routed as split cannot be split")]
    NotSplittable,
    /// A config request with refused resources and no answer for them.
    #[error("{0:?}: no answer for refused config resources")]
    NoAnswerForRefused(ApiKey),
    /// A request that cannot be served and has no place for an error.
    #[error("{api:?} v{version}: cannot be served and its response has no place for error {code}")]
    NoPlaceForError {
        /// The API.
        api: ApiKey,
        /// The client's version.
        version: i16,
        /// The error code.
        code: i16,
    },
    /// A Fetch whose body is not a Fetch.
    #[error("a fetch without a fetch body")]
    FetchWithoutBody,
    /// A fetch part sent without a receiver.
    #[error("a fetch part expects an answer")]
    FetchPartWithoutAnswer,
    /// A fetch part with no record of what it asked.
    #[error("fetch part {0} has no record of what it asked")]
    FetchPartWithoutMeta(usize),
}

impl ErrorClass for CloseError {
    fn side(&self) -> ErrorSide {
        match self {
            CloseError::NotForClients { .. }
            | CloseError::Sasl(_)
            | CloseError::Claim(_)
            | CloseError::MechanismNotOffered { .. }
            | CloseError::SessionExpired { .. }
            | CloseError::ReauthMechanismChanged { .. }
            | CloseError::PrincipalChanged { .. } => ErrorSide::Client,
            CloseError::AuthenticationFailed { code, .. }
            | CloseError::ReauthenticationFailed { code, .. }
                if *code == SASL_AUTHENTICATION_FAILED =>
            {
                ErrorSide::Client
            }
            CloseError::ReauthUnchecked { source, .. } => source.side(),
            CloseError::CredentialsRejected { source, .. } => source.side(),
            CloseError::AuthenticationFailed { .. }
            | CloseError::ReauthenticationFailed { .. }
            | CloseError::MechanismRefused { .. }
            | CloseError::UnreadableSaslAnswer { .. }
            | CloseError::SaslAnswerTimeout { .. } => ErrorSide::Broker,
            CloseError::BrokerDuringAuthentication(e) => e.side(),
            CloseError::NoToken { source, .. } => source.side(),
            CloseError::Invariant(_) | CloseError::Merge(_) | CloseError::NoSluiceNodeUp => {
                ErrorSide::Internal
            }
        }
    }

    fn retriable(&self) -> bool {
        match self {
            CloseError::SaslAnswerTimeout { .. } | CloseError::NoSluiceNodeUp => true,
            CloseError::BrokerDuringAuthentication(e) => e.retriable(),
            CloseError::NoToken { source, .. } | CloseError::ReauthUnchecked { source, .. } => {
                source.retriable()
            }
            _ => false,
        }
    }

    /// A session that ended is closed by brokers in normal operation.
    fn routine_close(&self) -> bool {
        matches!(self, CloseError::SessionExpired { .. })
    }
}

impl CloseError {
    /// The error code a client's re-authentication is answered with when
    /// the broker refused Sluice's own SaslHandshake for it (`None`: the
    /// broker could not be asked; the answer is NETWORK_EXCEPTION).
    pub(crate) fn reauth_answer_code(&self) -> Option<i16> {
        let CloseError::ReauthUnchecked { source, .. } = self else {
            return None;
        };
        match &**source {
            AuthError::MechanismNotEnabled { .. } => Some(crate::auth::UNSUPPORTED_SASL_MECHANISM),
            AuthError::ErrorCode { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<CloseError> for ChainError {
    fn from(e: CloseError) -> Self {
        ChainError::sink(e)
    }
}

impl From<Invariant> for ChainError {
    fn from(e: Invariant) -> Self {
        ChainError::sink(CloseError::Invariant(e))
    }
}

impl From<SaslMisuse> for ChainError {
    fn from(e: SaslMisuse) -> Self {
        ChainError::sink(CloseError::Sasl(e))
    }
}
