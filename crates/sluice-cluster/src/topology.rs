//! The cluster as Sluice sees it, and the Sluice nodes that clients see instead.
//!
//! Two pictures of "the cluster" live side by side, and must never be confused:
//!
//! - [`ClusterView`] is the real Kafka cluster: brokers and their addresses,
//!   partition leaders, group and transaction coordinators. It is built from
//!   the Metadata and FindCoordinator responses Sluice receives, and it is the
//!   only thing Sluice routes by. The driver shares one among every client
//!   connection of a sink.
//! - [`SluiceNodes`] is the configured set of Sluice instances
//!   (`shotover_nodes`), each marked up or down by the peer health checks.
//!   These are the only nodes a client ever hears about (see `rewrite`).
//!
//! [`staleness`] says which Kafka error codes mean the view is out of date, so
//! that the router refreshes it instead of retrying against the same broker.

mod error;
mod nodes;
mod stale;
mod view;

pub use error::TopologyError;
pub use nodes::{Address, ShotoverNode};
pub use nodes::{Marked, SluiceNodes};
pub use stale::{Staleness, staleness};
pub use view::{ClusterView, CoordinatorKeyType, TopicRef};
pub use view::{FOLLOWER_FETCH_VERSION, MetadataApplied, OlderEpoch, TopicId};

/// Re-exported so that callers name broker ids the way `kafka-protocol` does.
pub use sluice_codec::kafka_protocol::messages::BrokerId;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
