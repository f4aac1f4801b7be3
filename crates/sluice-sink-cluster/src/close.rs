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

use crate::target::Target;
use sluice_cluster::client_auth::{ClientAuthError, GateError, SaslStep};
use sluice_cluster::error_codes::{ErrorCode, UNSUPPORTED_SASL_MECHANISM};
use sluice_cluster::split::SplitError;

/// Why the cluster sink closes a client connection.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CloseError {
    /// The client sent an API only brokers may send.
    #[error("client request refused: {api:?} is not available through sluice")]
    NotForClients {
        /// The API.
        api: ApiKey,
    },
    /// The client's authentication closes it.
    #[error(transparent)]
    Auth(#[from] ClientAuthError),
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

/// An invariant of the sink that did not hold: a bug, reported with what
/// it was about.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Invariant {
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
        code: ErrorCode,
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
    /// A share request's part sent without a receiver.
    #[error("{0:?}: a share part expects an answer")]
    SharePartWithoutAnswer(ApiKey),
    /// A request whose plan asked for a lookup again after its lookup.
    #[error("{0:?}: planned a lookup after its lookup")]
    LookedUpTwice(ApiKey),
    /// A share request routed as such whose body is not one.
    #[error("{0:?}: a share request without a ShareFetch or ShareAcknowledge body")]
    ShareWithoutBody(ApiKey),
}

impl ErrorClass for CloseError {
    fn side(&self) -> ErrorSide {
        match self {
            CloseError::NotForClients { .. } => ErrorSide::Client,
            CloseError::Auth(e) => e.side(),
            CloseError::ReauthUnchecked { source, .. } => source.side(),
            CloseError::CredentialsRejected { source, .. } => source.side(),
            CloseError::UnreadableSaslAnswer { .. } | CloseError::SaslAnswerTimeout { .. } => {
                ErrorSide::Broker
            }
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
            CloseError::Auth(e) => e.retriable(),
            CloseError::BrokerDuringAuthentication(e) => e.retriable(),
            CloseError::NoToken { source, .. } | CloseError::ReauthUnchecked { source, .. } => {
                source.retriable()
            }
            _ => false,
        }
    }

    /// A session that ended is closed by brokers in normal operation.
    fn routine_close(&self) -> bool {
        matches!(self, CloseError::Auth(e) if e.routine_close())
    }
}

impl CloseError {
    /// The error code a client's re-authentication is answered with when
    /// the broker refused Sluice's own SaslHandshake for it (`None`: the
    /// broker could not be asked; the answer is NETWORK_EXCEPTION).
    pub(crate) fn reauth_answer_code(&self) -> Option<ErrorCode> {
        let CloseError::ReauthUnchecked { source, .. } = self else {
            return None;
        };
        match &**source {
            AuthError::MechanismNotEnabled { .. } => Some(UNSUPPORTED_SASL_MECHANISM),
            AuthError::ErrorCode { code, .. } => Some(ErrorCode::from_wire(*code)),
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

/// The client's request refused by the authentication gate, as the error
/// the client is closed with.
pub(crate) fn gate_error(e: GateError) -> ChainError {
    match e {
        GateError::Refused(e) => ChainError::sink(CloseError::Auth(e)),
        GateError::Codec(e) => ChainError::Codec(e),
    }
}
