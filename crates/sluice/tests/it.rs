//! Sluice's integration tests of the workspace phase of `scripts/test`, in
//! one test binary (one link of the dev-dependencies, not one per file):
//! the built `sluice` binary run as users run it, against the real Kafka
//! clusters `single` and `trio` that `scripts/test` starts, with real
//! clients. One module per subject, its file `it/<module>.rs` (and its
//! cases under `it/<module>/`), its tests named `it::<module>::<test>`;
//! `cargo test -p sluice --test it <module>::` runs one.
//!
//! The tests of the other phases have binaries of their own: `lifecycle.rs`
//! (the serial phase: tests that kill brokers), `reauth.rs` (cluster
//! `reauth`) and `compat.rs` (the client matrix on older brokers).

mod it {
    mod cli;
    mod cluster_admin;
    mod cluster_api_versions;
    mod cluster_auth;
    mod cluster_broker_configs;
    mod cluster_consume;
    mod cluster_etl;
    mod cluster_failover;
    mod cluster_rack;
    mod cluster_rolling;
    mod cluster_share;
    mod cluster_sink;
    mod cluster_txn;
    mod compat;
    mod hostile;
    mod k8s_manifests;
    mod memory_bounds;
    mod observability;
    mod packaging;
    mod runtime_control;
    mod single_sink;
    mod tls_reload;
    mod token_soak;
}
