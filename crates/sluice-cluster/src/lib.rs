//! The no-IO core of the cluster sink: everything Sluice decides about a
//! Kafka cluster it hides, as data in and data out.
//!
//! The core opens no socket, awaits nothing, takes no lock and reads no
//! clock: the driver (`sluice-sink-cluster`) passes the time in as `now`,
//! does the IO the core's answers call for, and logs and counts them. That
//! keeps every decision here testable as plain functions over real Kafka
//! messages, and fuzzable.
//!
//! Modules, bottom-up. A module uses only those listed before it, except
//! two edges still to cut: `api` reads `split` (the per-part failure codes
//! and the OffsetFetch split version), and `route` and `rewrite` use each
//! other (the ApiVersions intersection and the config-resource plan).
//!
//! - `hash`: the hash maps of the per-partition work (a fast seeded
//!   hasher).
//! - `error_codes`: `ErrorCode`, the Kafka error codes Sluice reads or
//!   writes, by name.
//! - `api`: one descriptor per Kafka API, the table everything that
//!   depends on an API's key reads; `api::failure`, the trait that builds
//!   the answer to a failed request (implemented per family in `split` and
//!   `route`, found from the row by `route::failure_answer`).
//! - `topology`: the cluster as Sluice sees it (brokers, partition leaders,
//!   coordinators) and the Sluice nodes that clients see instead.
//! - `split`: requests that span brokers split per broker, and their
//!   responses merged back in order.
//! - `route`: the routing decisions: which broker serves each API, what to
//!   do with the answer, what to answer when a broker fails.
//! - `rewrite`: Metadata, FindCoordinator, DescribeCluster, DescribeGroups
//!   and ApiVersions rewritten so that only Sluice nodes appear.
//! - `consume`: a fetch split over brokers answered as soon as its data
//!   is ready; parts still out serve the next fetch.
//! - `client_auth`: the client authentication state machine (the pre-auth
//!   gate, offered SASL mechanisms, PLAIN replay, SCRAM over mTLS,
//!   re-authentication).
//! - `exchange`: an owed answer's life once its parts stop waiting: what
//!   to send again, what to retry elsewhere, and how the parts' answers
//!   become the client's answer.
//! - `plan`: the request half: what to do next with a client request
//!   (answer it, look something up first, send it whole or in parts), and
//!   when a part's broker is checked on as stalled.

#![deny(missing_docs)]

pub mod hash;

pub mod error_codes;

pub mod api;
pub mod topology;

pub mod split;

pub mod rewrite;
pub mod route;

pub mod client_auth;
pub mod consume;

pub mod exchange;

pub mod plan;

pub use client_auth::messages::{PlainCredentials, parse_scram_client_first, unescape_saslname};
pub use rewrite::{Rewriter, codec_versions, intersect_api_versions, rewrite_configs_answer};
pub use split::dispatch::{SplitAnswers, merge_responses, split_request};
pub use split::{Coordinators, PartResult, PartitionLeaders, Routing};
pub use topology::{Address, ClusterView, CoordinatorKeyType, ShotoverNode, TopicRef};

#[cfg(test)]
mod tests {
    /// The core neither does IO nor logs: it returns what happened, and the
    /// driver logs it. Neither an async runtime nor a logger is a dependency.
    #[test]
    fn the_core_depends_on_no_runtime_and_no_logger() {
        let manifest = include_str!("../Cargo.toml");
        for line in manifest.lines().map(str::trim) {
            assert!(
                !line.starts_with("tokio") && !line.starts_with("tracing"),
                "sluice-cluster depends on {line}"
            );
        }
    }
}
