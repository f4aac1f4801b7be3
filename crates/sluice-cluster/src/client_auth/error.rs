//! Why a client's authentication closes it: [`ClientAuthError`], each
//! variant classified here, where it is raised; the driver wraps it in its
//! own close reason.

use std::sync::Arc;

use sluice_codec::{ApiKey, CodecError};
use sluice_error::{ErrorClass, ErrorSide};

use super::messages::MessageError;
use crate::error_codes::{ErrorCode, SASL_AUTHENTICATION_FAILED};

/// Why the client authentication state machine closes a client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientAuthError {
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
        code: ErrorCode,
    },
    /// The broker refused the client's authentication.
    #[error(
        "authentication failed: the broker answered SaslAuthenticate with error {code}{}",
        message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    AuthenticationFailed {
        /// The broker's error code.
        code: ErrorCode,
        /// The broker's message.
        message: Option<String>,
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
        code: ErrorCode,
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
    /// A bug in Sluice: a SASL answer that does not match the
    /// authentication state.
    #[error("internal: a SASL answer that does not match the authentication state")]
    UnexpectedSaslAnswer,
    /// A bug in Sluice: a SaslAuthenticate answer below v1 reached the state
    /// machine; it carries no session lifetime (Sluice sends every round at
    /// v1 or later).
    #[error("internal: a SaslAuthenticate answer at v{0}, which carries no session lifetime")]
    UnversionedSaslAnswer(i16),
}

/// How the client broke the SASL exchange's rules.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SaslMisuse {
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
pub enum ClaimError {
    /// It does not parse.
    #[error("{0}")]
    Message(#[from] MessageError),
    /// SCRAM with `tokenauth`: the client authenticates with a delegation
    /// token of its own, which Sluice cannot replay.
    #[error("delegation token authentication (tokenauth) is not supported through sluice")]
    TokenAuth,
}

/// Why the gate refuses a request outright: the client is closed at once.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The client broke the SASL exchange's rules.
    #[error(transparent)]
    Refused(#[from] ClientAuthError),
    /// The request's body cannot be read.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

impl From<SaslMisuse> for GateError {
    fn from(e: SaslMisuse) -> Self {
        GateError::Refused(ClientAuthError::Sasl(e))
    }
}

impl ErrorClass for ClientAuthError {
    fn side(&self) -> ErrorSide {
        match self {
            ClientAuthError::Sasl(_)
            | ClientAuthError::Claim(_)
            | ClientAuthError::MechanismNotOffered { .. }
            | ClientAuthError::SessionExpired { .. }
            | ClientAuthError::ReauthMechanismChanged { .. }
            | ClientAuthError::PrincipalChanged { .. } => ErrorSide::Client,
            ClientAuthError::AuthenticationFailed { code, .. }
            | ClientAuthError::ReauthenticationFailed { code, .. }
                if *code == SASL_AUTHENTICATION_FAILED =>
            {
                ErrorSide::Client
            }
            ClientAuthError::AuthenticationFailed { .. }
            | ClientAuthError::ReauthenticationFailed { .. }
            | ClientAuthError::MechanismRefused { .. } => ErrorSide::Broker,
            ClientAuthError::UnexpectedSaslAnswer | ClientAuthError::UnversionedSaslAnswer(_) => {
                ErrorSide::Internal
            }
        }
    }

    fn retriable(&self) -> bool {
        false
    }

    /// A session that ended is closed by brokers in normal operation.
    fn routine_close(&self) -> bool {
        matches!(self, ClientAuthError::SessionExpired { .. })
    }
}
