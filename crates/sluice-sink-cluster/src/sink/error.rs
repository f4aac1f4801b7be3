//! The sink's errors: a configuration it cannot use, and internal requests
//! (Metadata refresh, FindCoordinator) that failed.
//!
//! A failed internal request never fails the client's request by itself: the
//! sink logs it and routes with what it knows, so the affected partitions or
//! groups get a retriable Kafka error and the client retries.

use sluice_broker::{AddressParseError, BrokerError, CallError};
use sluice_chain::ChainError;
use sluice_codec::ApiKey;
use sluice_error::{ErrorClass, ErrorSide};
use sluice_tls::TlsError;

use sluice_cluster::topology::TopologyError;

/// A `KafkaSinkCluster` configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SinkClusterError {
    /// `shotover_nodes` / `local_shotover_broker_id` are unusable.
    #[error("KafkaSinkCluster: {0}")]
    Topology(#[from] TopologyError),
    /// `first_contact_points` is empty.
    #[error("KafkaSinkCluster: first_contact_points: must list at least one broker")]
    NoContactPoints,
    /// A contact point is not `host:port`.
    #[error("KafkaSinkCluster: first_contact_points: {0}")]
    ContactPoint(#[from] AddressParseError),
    /// The TLS settings are unusable.
    #[error("KafkaSinkCluster: {0}")]
    Tls(#[from] TlsError),
    /// `authorize_scram_over_mtls` is unusable (its TLS files, contact points).
    #[error("KafkaSinkCluster: authorize_scram_over_mtls: {0}")]
    ScramOverMtls(#[from] sluice_auth::AuthError),
}

impl ErrorClass for SinkClusterError {
    fn side(&self) -> ErrorSide {
        ErrorSide::Internal
    }

    fn retriable(&self) -> bool {
        false
    }
}

/// An internal request (sent by Sluice to fill its view) that got no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InternalRequestError {
    /// No broker could be reached.
    #[error("{api:?}: {source}")]
    Broker {
        /// The internal request's api.
        api: ApiKey,
        /// What failed.
        source: BrokerError,
    },
    /// The broker asked got the request wrong, late or not at all.
    #[error("{0}")]
    Call(#[from] CallError),
    /// The client cannot be served any more (its broker connections cannot
    /// be authenticated): it is closed with this error.
    #[error("{api:?}: {source}")]
    Fatal {
        /// The internal request's api.
        api: ApiKey,
        /// Why the client is closed.
        source: ChainError,
    },
}

impl InternalRequestError {
    /// The error that closes the client, if this failure is fatal to it; a
    /// failed internal request is otherwise only logged.
    pub(crate) fn into_fatal(self) -> Option<ChainError> {
        match self {
            InternalRequestError::Fatal { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl ErrorClass for InternalRequestError {
    fn side(&self) -> ErrorSide {
        match self {
            InternalRequestError::Broker { source, .. } => source.side(),
            InternalRequestError::Call(e) => e.side(),
            InternalRequestError::Fatal { source, .. } => source.side(),
        }
    }

    fn retriable(&self) -> bool {
        match self {
            InternalRequestError::Broker { source, .. } => source.retriable(),
            InternalRequestError::Call(e) => e.retriable(),
            InternalRequestError::Fatal { .. } => false,
        }
    }
}
