//! Test support for Sluice's integration tests.
//!
//! Integration tests run against a real Kafka cluster started by
//! `scripts/kafka/cluster.sh` (the test command starts it once and shares it),
//! real Sluice processes, and real clients: Kafka's own Java tools and
//! librdkafka through Python's `confluent-kafka`. Nothing here imitates a
//! broker. Every wait is bounded and fails with a message saying what it waited
//! for.
//!
//! - [`cluster`]: the running test cluster, read from its `cluster.json`.
//! - [`sluice`]: a Sluice process with a given topology.
//! - [`fronted`]: KafkaSinkCluster nodes in front of a test cluster, and the
//!   real cluster's view behind them (leaders, offsets).
//! - [`clients`]: Kafka's Java tools and the librdkafka client scripts.
//! - [`listings`]: groups, transactions and log dirs as clients list them
//!   through Sluice (tools and raw requests), and making them directly.
//! - [`raw`]: a minimal Kafka protocol client for tests that break the protocol.
//! - [`requests`]: the request bodies tests send with the raw client.
//! - [`scram`]: Sluice with SCRAM over mTLS, clients' SCRAM settings, and
//!   the brokers' own log of expired SASL sessions.
//! - [`nodes`]: killing and restarting brokers, resetting their connections.
//! - [`delivery`]: VerifiableProducer/VerifiableConsumer (and a librdkafka
//!   consumer printing the same events) in the background, and the proof
//!   that every acknowledged record was consumed.
//! - [`consumption`]: how they were consumed: contiguous polls within each
//!   assignment, no record committed twice, the records themselves.
//! - [`wait`]: bounded polling.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![deny(missing_docs)]

pub mod clients;
pub mod cluster;
pub mod consumption;
pub mod delivery;
pub mod fronted;
pub mod listings;
pub mod nodes;
mod process;
pub mod raw;
pub mod requests;
pub mod scram;
pub mod sluice;
pub mod wait;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The state directory shared with the scripts (`SLUICE_STATE_DIR`, default `<repo>/.sluice`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("SLUICE_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".sluice"))
}

/// A free TCP port on 127.0.0.1 (bound and released; the race is harmless on a test machine).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A unique name for topics and groups, so tests sharing a cluster never collide.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
