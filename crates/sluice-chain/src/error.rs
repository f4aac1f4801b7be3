//! Error classification shared by the whole proxy.
//!
//! Every error is classified where it is raised: on which side it happened
//! ([`ErrorSide`]) and whether retrying can help. That classification decides
//! what the client gets: a retriable Kafka error code, a non-retriable one, or a
//! closed connection.

use sluice_codec::{ApiKey, CodecError};

/// Where an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorSide {
    /// The client broke the protocol or sent something we refuse.
    Client,
    /// A broker failed, or its connection did.
    Broker,
    /// A bug or resource problem inside Sluice.
    Internal,
}

impl ErrorSide {
    /// A short label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorSide::Client => "client",
            ErrorSide::Broker => "broker",
            ErrorSide::Internal => "internal",
        }
    }
}

/// Classification of an error.
pub trait ErrorClass {
    /// Where the error comes from.
    fn side(&self) -> ErrorSide;
    /// Whether the same request may succeed if retried.
    fn retriable(&self) -> bool;
    /// Whether closing a client for this is routine, as a broker closes a
    /// client for it in normal operation (e.g. its SASL session ended): the
    /// close is then logged at INFO, not WARN.
    fn routine_close(&self) -> bool {
        false
    }
}

/// An error of one sink or transform, in its own type: what it is and where
/// it comes from stay with it (its [`ErrorClass`]), where a string would
/// flatten both.
pub trait SinkError: std::error::Error + ErrorClass + Send + Sync + 'static {}

impl<T: std::error::Error + ErrorClass + Send + Sync + 'static> SinkError for T {}

/// An error raised by a transform or sink.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A message could not be decoded or encoded.
    #[error("{0}")]
    Codec(#[from] CodecError),
    /// A broker connection failed.
    #[error("{0}")]
    Broker(#[from] crate::broker::BrokerError),
    /// The client used a version of an API that Sluice does not offer (its
    /// ApiVersions answer says which it does); Kafka closes such a client.
    #[error("client request refused: {api:?} v{version} is not a version sluice offers")]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version the client used.
        version: i16,
    },
    /// A sink's or transform's own error, classified by itself.
    #[error("{0}")]
    Sink(Box<dyn SinkError>),
}

impl ChainError {
    /// Wraps a sink's own error.
    pub fn sink(error: impl SinkError) -> Self {
        ChainError::Sink(Box::new(error))
    }
}

impl ErrorClass for ChainError {
    fn side(&self) -> ErrorSide {
        match self {
            ChainError::Codec(_) | ChainError::UnsupportedVersion { .. } => ErrorSide::Client,
            ChainError::Broker(e) => e.side(),
            ChainError::Sink(e) => e.side(),
        }
    }

    fn retriable(&self) -> bool {
        match self {
            ChainError::Broker(e) => e.retriable(),
            ChainError::Sink(e) => e.retriable(),
            _ => false,
        }
    }

    fn routine_close(&self) -> bool {
        match self {
            ChainError::Sink(e) => e.routine_close(),
            _ => false,
        }
    }
}
