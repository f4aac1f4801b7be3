//! [`AuthError`]: everything that can go wrong while authenticating a broker
//! connection or managing delegation tokens.
//!
//! Errors name the broker they are about and carry the broker's Kafka error
//! code and message when the broker refused something, so that a sink can
//! pass the right code on to its client. Like every error in Sluice they are
//! classified through [`ErrorClass`]. `AuthError` is `Clone` because one
//! failed token creation is reported to every connection that waited for it.
//! No variant ever holds a password, token HMAC or SCRAM proof.

use std::sync::Arc;
use std::time::Duration;

use sluice_broker::{AddressParseError, BrokerAddress, BrokerError, CallError};
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_error::{ErrorClass, ErrorSide};
use sluice_tls::TlsError;

use crate::scram::ScramError;

/// Kafka's `SASL_AUTHENTICATION_FAILED`: wrong credentials.
pub const SASL_AUTHENTICATION_FAILED: i16 = ResponseError::SaslAuthenticationFailed.code();

/// Authentication or token management failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// The broker connection failed (a request that failed with it is
    /// here too: see the `From<CallError>`).
    #[error("{0}")]
    Broker(#[from] BrokerError),
    /// A request got no usable answer: none in time, or one that cannot be
    /// decoded.
    #[error("{0}")]
    Call(Arc<CallError>),
    /// The broker answered a request with a Kafka error code.
    #[error("{broker}: {api} failed with error {code} ({}){}", error_name(*code), detail(message))]
    ErrorCode {
        /// The broker it happened with.
        broker: BrokerAddress,
        /// The request that failed, e.g. `SaslAuthenticate`.
        api: &'static str,
        /// The Kafka error code.
        code: i16,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// The broker does not have the SASL mechanism enabled.
    #[error("{broker}: sasl mechanism {mechanism} is not enabled (the broker offers: {offered})")]
    MechanismNotEnabled {
        /// The broker it happened with.
        broker: BrokerAddress,
        /// The mechanism Sluice asked for.
        mechanism: String,
        /// The mechanisms the broker offers, comma separated.
        offered: String,
    },
    /// The SCRAM exchange failed on Sluice's side: a server message that
    /// cannot be used, or a server signature that does not verify.
    #[error("{broker}: {source}")]
    Scram {
        /// The broker it happened with.
        broker: BrokerAddress,
        /// What was wrong with the exchange.
        source: ScramError,
    },
    /// A broker's response could not be decoded or made no sense.
    #[error("{broker}: unexpected {api} response: {reason}")]
    UnexpectedResponse {
        /// The broker it happened with.
        broker: BrokerAddress,
        /// The request, e.g. `SaslHandshake`.
        api: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// A step took longer than allowed.
    #[error("{what} timed out after {}ms", timeout.as_millis())]
    Timeout {
        /// The step.
        what: String,
        /// How long it was allowed.
        timeout: Duration,
    },
    /// The super-user TLS configuration cannot be used.
    #[error("delegation token task: {0}")]
    Tls(Arc<TlsError>),
    /// A configured contact point is not `host:port`.
    #[error("delegation token task: mtls_port_contact_points: {0}")]
    ContactPoint(#[from] AddressParseError),
    /// No mTLS contact point could be reached.
    #[error("no mtls contact point is reachable: {reasons}")]
    NoContactPoint {
        /// Why each contact point could not be used.
        reasons: String,
    },
    /// A created token did not reach every broker in time.
    #[error(
        "delegation token {token_id} for user {user} did not reach {missing} within {}ms",
        timeout.as_millis()
    )]
    NotPropagated {
        /// The token's owner.
        user: String,
        /// The token's id.
        token_id: String,
        /// The brokers that did not list the token, comma separated.
        missing: String,
        /// How long Sluice waited.
        timeout: Duration,
    },
    /// The token task was shut down.
    #[error("the delegation token task is shut down")]
    Shutdown,
    /// The blocking task computing a SCRAM proof panicked or was cancelled
    /// (shared: the token task hands one error to every waiting login).
    #[error("scram proof computation failed: {0}")]
    ProofTask(std::sync::Arc<tokio::task::JoinError>),
    /// A token creation's watch ended without a result (a bug: every
    /// creation publishes one).
    #[error("token creation ended without a result")]
    NoCreationResult,
}

impl AuthError {
    /// The Kafka error code the broker answered with, if any.
    pub fn error_code(&self) -> Option<i16> {
        match self {
            AuthError::ErrorCode { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<TlsError> for AuthError {
    fn from(e: TlsError) -> Self {
        AuthError::Tls(Arc::new(e))
    }
}

impl From<CallError> for AuthError {
    /// A failed connection stays [`AuthError::Broker`], whichever request
    /// found it, so that an owner tells a broker it cannot reach from one
    /// that answered.
    fn from(e: CallError) -> Self {
        match e {
            CallError::NotSent { source, .. } | CallError::Broker { source, .. } => {
                AuthError::Broker(source)
            }
            other => AuthError::Call(Arc::new(other)),
        }
    }
}

impl ErrorClass for AuthError {
    fn side(&self) -> ErrorSide {
        match self {
            AuthError::Broker(e) => e.side(),
            AuthError::Call(e) => e.side(),
            // Wrong credentials: the client's (or the token's) fault.
            AuthError::ErrorCode { code, .. } if *code == SASL_AUTHENTICATION_FAILED => {
                ErrorSide::Client
            }
            AuthError::ErrorCode { .. }
            | AuthError::MechanismNotEnabled { .. }
            | AuthError::Scram { .. }
            | AuthError::UnexpectedResponse { .. }
            | AuthError::Timeout { .. }
            | AuthError::NoContactPoint { .. }
            | AuthError::NotPropagated { .. } => ErrorSide::Broker,
            AuthError::Tls(_)
            | AuthError::ContactPoint(_)
            | AuthError::Shutdown
            | AuthError::ProofTask(_)
            | AuthError::NoCreationResult => ErrorSide::Internal,
        }
    }

    fn retriable(&self) -> bool {
        match self {
            AuthError::Broker(e) => e.retriable(),
            AuthError::Call(e) => e.retriable(),
            AuthError::ErrorCode { code, .. } => {
                ResponseError::try_from_code(*code).is_some_and(|e| e.is_retriable())
            }
            AuthError::Timeout { .. }
            | AuthError::NoContactPoint { .. }
            | AuthError::NotPropagated { .. } => true,
            AuthError::MechanismNotEnabled { .. }
            | AuthError::Scram { .. }
            | AuthError::UnexpectedResponse { .. }
            | AuthError::Tls(_)
            | AuthError::ContactPoint(_)
            | AuthError::Shutdown
            | AuthError::ProofTask(_)
            | AuthError::NoCreationResult => false,
        }
    }
}

/// Kafka's name for an error code, e.g. `SaslAuthenticationFailed`.
fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(_)) | None => "unknown".to_owned(),
        Some(e) => format!("{e:?}"),
    }
}

fn detail(message: &Option<String>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_named_and_classified() {
        let e = AuthError::ErrorCode {
            broker: BrokerAddress::new("127.0.0.1", 9093).with_id(2),
            api: "SaslAuthenticate",
            code: SASL_AUTHENTICATION_FAILED,
            message: Some("Authentication failed".into()),
        };
        assert_eq!(
            e.to_string(),
            "broker 2 at 127.0.0.1:9093: SaslAuthenticate failed with error 58 \
             (SaslAuthenticationFailed): Authentication failed"
        );
        assert_eq!(e.error_code(), Some(58));
        assert_eq!(e.side(), ErrorSide::Client);
        assert!(!e.retriable());

        let e = AuthError::ErrorCode {
            broker: BrokerAddress::new("h", 1),
            api: "Metadata",
            code: 7,
            message: None,
        };
        assert_eq!(
            e.to_string(),
            "broker at h:1: Metadata failed with error 7 (RequestTimedOut)"
        );
        assert_eq!(e.side(), ErrorSide::Broker);
        assert!(e.retriable());
    }
}
