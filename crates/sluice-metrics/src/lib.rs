//! Metric names and the observability endpoint.
//!
//! Every metric Sluice records is named here, so that the names (and their
//! labels) are documented in one place and cannot drift between the code that
//! records them and the dashboards that read them ([`names::ALL`] lists them
//! for the tests that check `docs/metrics.md` and the Grafana dashboard).
//! Code records through the `metrics` facade
//! (`metrics::counter!(names::REQUESTS, "api" => ...)`); [`install_prometheus`]
//! installs the Prometheus recorder and serves its endpoint: `/metrics`,
//! `/health` and `/ready`.
//!
//! - [`catalog`]: each metric's type and `# HELP` text.
//! - `process`: the standard `process_*` metrics, read at each scrape.
//! - `endpoint`: the HTTP endpoint.

#![deny(missing_docs)]

pub mod catalog;
mod endpoint;
mod process;

use std::net::SocketAddr;
use std::sync::Arc;

use metrics_exporter_prometheus::Matcher;

pub use endpoint::{Check, Probes};
pub use metrics;

/// Metric names. Labels are listed in each doc comment.
pub mod names {
    /// Gauge: client connections open now. Labels: `source`.
    pub const CLIENT_CONNECTIONS_OPEN: &str = "sluice_client_connections_open";
    /// Counter: client connections accepted. Labels: `source`.
    pub const CLIENT_CONNECTIONS_TOTAL: &str = "sluice_client_connections_total";
    /// Counter: client connections refused by the connection limit
    /// (`reason="limit"`), the cap of connections not yet authenticated
    /// (`"unauthenticated_limit"`) or a TLS handshake failure (`"tls"`).
    /// Labels: `source`, `reason`.
    pub const CLIENT_CONNECTIONS_REJECTED: &str = "sluice_client_connections_rejected_total";
    /// Counter: client connection tasks that panicked (a bug in Sluice);
    /// each closed only its own connection. Labels: `source`.
    pub const CLIENT_CONNECTION_PANICS: &str = "sluice_client_connection_panics_total";
    /// Counter: client connections closed by Sluice because of an error.
    /// Labels: `source`, `side`.
    pub const CLIENT_CONNECTIONS_CLOSED_ON_ERROR: &str =
        "sluice_client_connections_closed_on_error_total";
    /// Counter: requests received from clients. Labels: `api`.
    pub const REQUESTS: &str = "sluice_requests_total";
    /// Counter: responses sent to clients. Labels: `api`.
    pub const RESPONSES: &str = "sluice_responses_total";
    /// Counter: errors. Labels: `side` (client|broker|internal), `retriable`.
    pub const ERRORS: &str = "sluice_errors_total";
    /// Counter: bytes read from clients.
    pub const BYTES_IN: &str = "sluice_client_bytes_in_total";
    /// Counter: bytes written to clients.
    pub const BYTES_OUT: &str = "sluice_client_bytes_out_total";
    /// Counter: broker connections opened. Labels: `broker`.
    pub const BROKER_CONNECTIONS_OPENED: &str = "sluice_broker_connections_opened_total";
    /// Counter: broker connections of a client connection opened again to
    /// replace another. Labels: `reason` (`token_at_risk`: its delegation
    /// token was about to expire or was superseded; `session`: its SASL
    /// session (KIP-368) was about to end; `closed`: it had closed).
    pub const BROKER_CONNECTIONS_RECREATED: &str = "sluice_broker_connections_recreated_total";
    /// Counter: broker connections that ended (other than by Sluice closing
    /// them) while requests on them were still owed a response: each one
    /// failed those requests. Labels: `broker`, `kind`. Idle ends are counted
    /// in [`BROKER_CONNECTIONS_IDLE_CLOSED`] instead, so that an alert on
    /// this counter does not fire on routine idle timeouts.
    pub const BROKER_RECEIVE_ERRORS: &str = "sluice_broker_receive_errors_total";
    /// Counter: broker connections that ended (closed by the broker, reset,
    /// ...) while they owed nothing: normal idle closes
    /// (`connections.max.idle.ms`, a middlebox). Nothing failed; the next
    /// request reopens the connection. Labels: `broker`, `kind`.
    pub const BROKER_CONNECTIONS_IDLE_CLOSED: &str = "sluice_broker_connections_idle_closed_total";
    /// Counter: client requests (or parts of split ones) sent to a broker in
    /// another rack than the local Sluice node's, when both racks are known.
    /// Consumer fetches stay in the rack where an in-sync replica is there;
    /// everything else goes where Kafka requires (leader, coordinator).
    /// Labels: `api`.
    pub const OUT_OF_RACK_REQUESTS: &str = "sluice_out_of_rack_requests_total";
    /// Histogram: seconds to create a delegation token and see it on every
    /// broker (successful creations only).
    pub const DELEGATION_TOKEN_CREATE_SECONDS: &str = "sluice_delegation_token_create_seconds";
    /// Gauge: users with a delegation token held by a token task.
    pub const DELEGATION_TOKENS_CACHED: &str = "sluice_delegation_tokens_cached";
    /// Counter: delegation tokens created.
    pub const DELEGATION_TOKEN_CREATIONS: &str = "sluice_delegation_token_creations_total";
    /// Counter: failed delegation token creations (first ones and rotations).
    pub const DELEGATION_TOKEN_FAILURES: &str = "sluice_delegation_token_failures_total";
    /// Counter: error responses synthesized for requests a broker never
    /// answered, and a leaving node's answers for its leaders and
    /// coordinators. Labels: `api`.
    pub const SYNTHESIZED_ERROR_RESPONSES: &str = "sluice_synthesized_error_responses_total";
    /// Counter: fetch sessions (KIP-227) opened, by clients with Sluice
    /// (`side="client"`) and by Sluice with brokers (`side="broker"`).
    /// Labels: `side`.
    pub const FETCH_SESSIONS_OPENED: &str = "sluice_fetch_sessions_opened_total";
    /// Counter: incremental fetches, received from clients (`side="client"`)
    /// and sent to brokers (`side="broker"`). Labels: `side`.
    pub const FETCH_INCREMENTAL: &str = "sluice_fetch_incremental_total";
    /// Counter: fetch session errors: answered to clients (`side="client"`)
    /// or received from brokers (`side="broker"`), by `error`
    /// (`FETCH_SESSION_ID_NOT_FOUND`, `INVALID_FETCH_SESSION_EPOCH`). Labels:
    /// `side`, `error`.
    pub const FETCH_SESSION_ERRORS: &str = "sluice_fetch_session_errors_total";
    /// Counter: split fetches answered before every part had (their data was
    /// ready); the parts still out are parked for the next fetch.
    pub const FETCHES_ANSWERED_EARLY: &str = "sluice_fetches_answered_early_total";
    /// Counter: fetch parts sent ahead of a client's next fetch, to a broker
    /// that just served it records (see the consume path's read-ahead).
    pub const FETCHES_READ_AHEAD: &str = "sluice_fetches_read_ahead_total";
    /// Gauge: a memory budget's limit in bytes: the process's
    /// (`scope="process"`) or each connection's of a source
    /// (`scope="connection"`, with `source`). Labels: `scope`, `source`.
    pub const MEMORY_BUDGET_BYTES: &str = "sluice_memory_budget_bytes";
    /// Gauge: bytes held by every client connection together, counted
    /// against the process budget. Labels: `scope` (`"process"`).
    pub const MEMORY_BUDGET_USED_BYTES: &str = "sluice_memory_budget_used_bytes";
    /// Counter: times a client connection stopped reading requests because
    /// a memory budget was full: its own (`budget="connection"`) or the
    /// process's (`budget="process"`). Labels: `source`, `budget`.
    pub const CLIENT_READS_PAUSED: &str = "sluice_client_reads_paused_total";
    /// Counter: Fetch requests whose `max_bytes` was lowered to fit a memory
    /// budget. Labels: `source`.
    pub const FETCH_MAX_BYTES_CLAMPED: &str = "sluice_fetch_max_bytes_clamped_total";
    /// Counter: TLS reloads (on SIGHUP, or when a certificate, key or CA
    /// file changed), by `side` (`client`: a listener's TLS; `broker`: a
    /// sink's TLS to brokers), `name` (the source or sink) and `result`
    /// (`ok`; `error`: the new files were refused and the ones in use
    /// stay). Labels: `side`, `name`, `result`.
    pub const TLS_RELOADS: &str = "sluice_tls_reloads_total";
    /// Gauge: when the certificate in use expires (its `notAfter`), in
    /// seconds since the Unix epoch: a listener's server certificate, or the
    /// client certificate a sink presents to brokers (mTLS). Labels: `side`,
    /// `name`.
    pub const TLS_CERTIFICATE_EXPIRY: &str = "sluice_tls_certificate_expiry_timestamp_seconds";
    /// Gauge: 1 when the sink passed its latest readiness probe (a broker
    /// reachable and metadata loaded, see `/ready`), else 0. Labels: `sink`.
    pub const SINK_READY: &str = "sluice_sink_ready";
    /// Gauge: brokers that answered the sink's latest readiness probe.
    /// Labels: `sink`.
    pub const SINK_BROKERS_REACHABLE: &str = "sluice_sink_brokers_reachable";
    /// Gauge, always 1: which build is running. Labels: `version`, `commit`.
    pub const BUILD_INFO: &str = "sluice_build_info";
    /// Histogram (buckets [`LATENCY_BUCKETS_SECONDS`](crate::LATENCY_BUCKETS_SECONDS)):
    /// seconds from when Sluice takes a client's request (read whole and
    /// admitted by the memory budgets) to when its answer has been written
    /// to the client. Labels: `api`.
    pub const CLIENT_REQUEST_DURATION: &str = "sluice_client_request_duration_seconds";
    /// Histogram (buckets [`LATENCY_BUCKETS_SECONDS`](crate::LATENCY_BUCKETS_SECONDS)):
    /// seconds from when Sluice writes a request (or a part of a split one)
    /// to a broker connection to when the broker's answer to it has been
    /// read. Labels: `api`, `broker`.
    pub const BROKER_REQUEST_DURATION: &str = "sluice_broker_request_duration_seconds";
    /// Counter: broker connections that could not be opened: refused or
    /// unreachable (`kind="connect"`), no answer within the connect timeout
    /// (`"connect_timeout"`), or the TLS handshake failed
    /// (`"tls_handshake"`). Labels: `broker`, `kind`.
    pub const BROKER_CONNECT_FAILURES: &str = "sluice_broker_connect_failures_total";
    /// Counter (standard name): user and system CPU time the process has
    /// used, in seconds. Read at each scrape.
    pub const PROCESS_CPU_SECONDS: &str = "process_cpu_seconds_total";
    /// Gauge (standard name): the process's resident memory in bytes
    /// (`VmRSS`). Read at each scrape.
    pub const PROCESS_RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
    /// Gauge (standard name): file descriptors the process holds open
    /// (sockets included). Read at each scrape.
    pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
    /// Gauge (standard name): the most file descriptors the process may
    /// open (its soft `RLIMIT_NOFILE`). Read at each scrape.
    pub const PROCESS_MAX_FDS: &str = "process_max_fds";

    /// Every name above, for the tests that hold the metrics reference and
    /// the dashboard to what Sluice exports.
    pub const ALL: &[&str] = &[
        CLIENT_CONNECTIONS_OPEN,
        CLIENT_CONNECTIONS_TOTAL,
        CLIENT_CONNECTIONS_REJECTED,
        CLIENT_CONNECTION_PANICS,
        CLIENT_CONNECTIONS_CLOSED_ON_ERROR,
        REQUESTS,
        RESPONSES,
        ERRORS,
        BYTES_IN,
        BYTES_OUT,
        BROKER_CONNECTIONS_OPENED,
        BROKER_CONNECTIONS_RECREATED,
        BROKER_RECEIVE_ERRORS,
        BROKER_CONNECTIONS_IDLE_CLOSED,
        OUT_OF_RACK_REQUESTS,
        DELEGATION_TOKEN_CREATE_SECONDS,
        DELEGATION_TOKENS_CACHED,
        DELEGATION_TOKEN_CREATIONS,
        DELEGATION_TOKEN_FAILURES,
        SYNTHESIZED_ERROR_RESPONSES,
        FETCH_SESSIONS_OPENED,
        FETCH_INCREMENTAL,
        FETCH_SESSION_ERRORS,
        FETCHES_ANSWERED_EARLY,
        FETCHES_READ_AHEAD,
        MEMORY_BUDGET_BYTES,
        MEMORY_BUDGET_USED_BYTES,
        CLIENT_READS_PAUSED,
        FETCH_MAX_BYTES_CLAMPED,
        TLS_RELOADS,
        TLS_CERTIFICATE_EXPIRY,
        SINK_READY,
        SINK_BROKERS_REACHABLE,
        BUILD_INFO,
        CLIENT_REQUEST_DURATION,
        BROKER_REQUEST_DURATION,
        BROKER_CONNECT_FAILURES,
        PROCESS_CPU_SECONDS,
        PROCESS_RESIDENT_MEMORY,
        PROCESS_OPEN_FDS,
        PROCESS_MAX_FDS,
    ];
}

/// The bucket bounds, in seconds, of the request latency histograms
/// ([`names::CLIENT_REQUEST_DURATION`], [`names::BROKER_REQUEST_DURATION`]):
/// from half a millisecond (a local broker's metadata answer) to 10 s; a
/// request held longer (a JoinGroup waiting for its group) counts in `+Inf`.
/// Buckets rather than quantiles, so that a fleet's percentiles can be
/// computed across nodes (`histogram_quantile` over `sum by (le)`).
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Sets [`names::BUILD_INFO`] for this binary's `version` and `commit`.
pub fn record_build_info(version: &'static str, commit: &'static str) {
    metrics::gauge!(names::BUILD_INFO, "version" => version, "commit" => commit).set(1.0);
}

/// The endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the metrics endpoint on {addr}: {reason}")]
pub struct MetricsError {
    addr: SocketAddr,
    reason: String,
}

/// Installs the global recorder and serves `/metrics`, `/health` and
/// `/ready` on `addr`, the last two as `probes` say. Binds before it
/// returns, so that a port in use fails startup.
///
/// Must be called from within a tokio runtime.
pub fn install_prometheus(addr: SocketAddr, probes: Arc<dyn Probes>) -> Result<(), MetricsError> {
    let error = |reason: String| MetricsError { addr, reason };
    let listener = endpoint::bind(addr).map_err(|e| error(e.to_string()))?;
    let mut builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    for name in [
        names::CLIENT_REQUEST_DURATION,
        names::BROKER_REQUEST_DURATION,
    ] {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_owned()), LATENCY_BUCKETS_SECONDS)
            .map_err(|e| error(e.to_string()))?;
    }
    let handle = builder
        .install_recorder()
        .map_err(|e| error(e.to_string()))?;
    catalog::describe_all();
    endpoint::spawn(listener, handle, probes);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::names;

    /// `names::ALL` lists every constant of `names`: a name added without
    /// it would escape the reference and dashboard checks.
    #[test]
    fn all_lists_every_name() {
        let source = include_str!("lib.rs");
        // Each name declared before `ALL`, also when rustfmt wrapped it.
        let before_all = source.split("pub const ALL").next().unwrap();
        let declared: Vec<&str> = before_all
            .split("pub const ")
            .skip(1)
            .filter_map(|decl| decl.split(';').next()?.split('"').nth(1))
            .collect();
        assert!(declared.len() > 20, "{declared:?}");
        for name in &declared {
            assert!(
                names::ALL.contains(name),
                "{name} is missing from names::ALL"
            );
        }
        assert_eq!(
            declared.len(),
            names::ALL.len(),
            "names::ALL has duplicates"
        );
    }
}
