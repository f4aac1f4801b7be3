//! The errors of a chain: [`ChainError`], what a transform or sink returns,
//! and [`SinkError`], a sink's own error kept in its own type.
//!
//! Every error is classified where it is raised ([`ErrorClass`], defined in
//! `sluice-broker`, the lowest crate whose errors are classified): on which
//! side it happened and whether retrying can help. That classification
//! decides what the client gets: a retriable Kafka error code, a
//! non-retriable one, or a closed connection.

use sluice_broker::BrokerError;
use sluice_codec::{ApiKey, CodecError};
use sluice_error::{ErrorClass, ErrorSide};

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
    Broker(#[from] BrokerError),
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
