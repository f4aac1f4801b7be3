//! `KafkaSinkCluster`: one client connection fans out to every broker it needs,
//! while the client believes the Sluice nodes are the whole cluster.
//!
//! - `api`: one descriptor per Kafka API, the table everything that
//!   depends on an API's key reads.
//! - `topology`: the cluster as Sluice sees it (brokers, partition leaders,
//!   coordinators) and the Sluice nodes that clients see instead.
//! - `rewrite`: Metadata, FindCoordinator, DescribeCluster, DescribeGroups and
//!   ApiVersions rewritten so that only Sluice nodes appear.
//! - `split`: requests that span brokers split per broker, and their
//!   responses merged back in order.
//! - `consume`: a fetch split over brokers answered as soon as its data
//!   is ready; parts still out serve the next fetch.
//! - `route`: the routing decisions, as pure functions: which broker serves
//!   each API, what to do with the answer, what to answer when a broker fails.
//! - `sink`: the sink driver ([`KafkaSinkClusterBuilder`],
//!   [`KafkaSinkCluster`]) that sends, waits and combines.
//! - `auth`: the client authentication state machine (the pre-auth gate,
//!   offered SASL mechanisms, PLAIN replay, SCRAM over mTLS) and how a
//!   client's broker connections authenticate.
//! - `kafka_connection`: a broker connection that knows when its token or
//!   SASL session forces a replacement, and drains the one it replaced.
//! - `connections`: one client connection's broker connections.
//! - `pending`: the responses a client connection is owed, in order.
//! - `peers`: health checks of the other Sluice nodes.

#![deny(missing_docs)]

mod api;
mod auth;
mod close;
mod connections;
mod consume;
mod kafka_connection;
mod peers;
mod pending;
mod rewrite;
mod route;
mod sink;
mod split;
mod topology;

pub use sink::{KafkaSinkCluster, KafkaSinkClusterBuilder, Leave, SinkClusterError};

// What `sluice-fuzz-targets` drives directly: the split and merge of the split
// apis, the response rewrites, the SASL message parsers, and the routing view
// its fixtures build.
pub use auth::messages::{PlainCredentials, parse_scram_client_first, unescape_saslname};
pub use rewrite::{Rewriter, codec_versions, intersect_api_versions, rewrite_configs_answer};
pub use split::dispatch::{error_response, merge_responses, split_request};
pub use split::{Coordinators, PartResult, PartitionLeaders, Routing};
pub use topology::{Address, ClusterView, CoordinatorKeyType, ShotoverNode, TopicRef};
