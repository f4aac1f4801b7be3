//! `KafkaSinkCluster`: one client connection fans out to every broker it needs,
//! while the client believes the Sluice nodes are the whole cluster.
//!
//! - [`topology`]: the cluster as Sluice sees it (brokers, partition leaders,
//!   coordinators) and the Sluice nodes that clients see instead.
//! - [`rewrite`]: Metadata, FindCoordinator, DescribeCluster, DescribeGroups and
//!   ApiVersions rewritten so that only Sluice nodes appear.
//! - [`split`]: requests that span brokers split per broker, and their
//!   responses merged back in order.

pub mod rewrite;
pub mod split;
pub mod topology;
