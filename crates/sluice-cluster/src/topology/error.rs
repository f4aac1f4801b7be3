//! Errors in the Sluice node configuration as the cluster sink reads it.
//!
//! `sluice-config` validates the file at startup; these errors exist because
//! the sink must not trust that it was called with a validated config (tests,
//! future callers), and a bad node list must fail loudly rather than panic.

use sluice_error::{ErrorClass, ErrorSide};

/// An unusable `shotover_nodes` / `local_shotover_broker_id` configuration.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// `shotover_nodes` is empty.
    #[error("shotover_nodes: must list at least one node")]
    NoNodes,
    /// Two nodes share a broker id.
    #[error("shotover_nodes: broker id {0} appears more than once")]
    DuplicateBrokerId(i32),
    /// `local_shotover_broker_id` names no node.
    #[error("local_shotover_broker_id {0}: no node in shotover_nodes has this broker id")]
    UnknownLocalNode(i32),
    /// An address is not `host:port`.
    #[error("shotover node {broker_id}: {field} `{address}`: {reason}")]
    BadAddress {
        /// The node's broker id.
        broker_id: i32,
        /// The config field the address is in.
        field: &'static str,
        /// The address as configured.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl ErrorClass for TopologyError {
    fn side(&self) -> ErrorSide {
        ErrorSide::Internal
    }

    fn retriable(&self) -> bool {
        false
    }
}
