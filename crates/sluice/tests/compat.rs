//! The test binary of the compatibility phase of `scripts/test`: the client
//! compatibility matrix (`compat/matrix.rs`) on the older broker releases
//! people run, each on a 3-broker cluster of its own that `scripts/test`
//! starts ([`COMPAT_CLUSTERS`]). The tests are `#[ignore]`d in the
//! workspace run and run in that phase:
//! `cargo test -p sluice --test compat -- --ignored --test-threads=1`.
//! The same matrix on the suite's brokers (`trio`) is part of the workspace
//! phase (`it/compat.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "compat/matrix.rs"]
mod matrix;

use matrix::matrix;

/// The clusters of the older broker versions, as `scripts/test` names
/// them: `compat-<major.minor>`, 3 nodes each.
const COMPAT_CLUSTERS: [&str; 2] = ["compat-3.9", "compat-4.1"];

#[test]
#[ignore = "needs cluster `compat-3.9` (scripts/test starts it)"]
fn every_client_library_works_with_kafka_3_9_brokers() {
    matrix(COMPAT_CLUSTERS[0]);
}

#[test]
#[ignore = "needs cluster `compat-4.1` (scripts/test starts it)"]
fn every_client_library_works_with_kafka_4_1_brokers() {
    matrix(COMPAT_CLUSTERS[1]);
}
