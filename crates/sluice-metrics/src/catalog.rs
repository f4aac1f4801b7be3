//! What each metric is, for the `# HELP` and `# TYPE` lines of `/metrics`.
//!
//! One entry per name in [`names::ALL`]: its Prometheus type and a
//! one-line help text. [`describe_all`] hands the texts of the metrics the
//! recorder renders to it (`describe_counter!` and friends), once the
//! recorder is installed; the `process_*` metrics are rendered by
//! [`crate::process`], which reads their help text here too. The unit test
//! below keeps this table and [`names::ALL`] in step, and the integration
//! tests hold `docs/metrics.md` to the types given here.

use crate::names;

/// A metric's type as Prometheus sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// A value now.
    Gauge,
    /// Recorded with `histogram!` and rendered with buckets (`_bucket{le}`).
    Histogram,
    /// Recorded with `histogram!` and rendered as quantiles (`{quantile}`).
    Summary,
}

impl Kind {
    /// The word on the metric's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// One metric: name, type and help text.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name (one of [`names::ALL`]).
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Its `# HELP` text.
    pub help: &'static str,
}

const fn m(name: &'static str, kind: Kind, help: &'static str) -> Metric {
    Metric { name, kind, help }
}

use Kind::{Counter, Gauge, Histogram, Summary};

/// Every metric Sluice exports.
pub const CATALOG: &[Metric] = &[
    m(
        names::CLIENT_CONNECTIONS_OPEN,
        Gauge,
        "Client connections open now.",
    ),
    m(
        names::CLIENT_CONNECTIONS_TOTAL,
        Counter,
        "Client connections accepted.",
    ),
    m(
        names::CLIENT_CONNECTIONS_REJECTED,
        Counter,
        "Client connections refused, by reason (limit, unauthenticated_limit, unauthenticated_address_limit, tls).",
    ),
    m(
        names::CLIENT_CONNECTION_PANICS,
        Counter,
        "Client connection tasks that panicked (a bug in Sluice); each closed only its own connection.",
    ),
    m(
        names::CLIENT_CONNECTIONS_CLOSED_ON_ERROR,
        Counter,
        "Client connections Sluice closed because of an error, by whose (client, broker, internal).",
    ),
    m(names::REQUESTS, Counter, "Requests received from clients."),
    m(names::RESPONSES, Counter, "Responses sent to clients."),
    m(
        names::ERRORS,
        Counter,
        "Errors, by whose (client, broker, internal) and whether the client may retry.",
    ),
    m(names::BYTES_IN, Counter, "Bytes read from clients."),
    m(names::BYTES_OUT, Counter, "Bytes written to clients."),
    m(
        names::BROKER_CONNECTIONS_OPENED,
        Counter,
        "Broker connections opened (not the readiness probe's).",
    ),
    m(
        names::BROKER_CONNECTIONS_RECREATED,
        Counter,
        "Broker connections opened again to replace one, by reason (token_at_risk, session, closed).",
    ),
    m(
        names::BROKER_RECEIVE_ERRORS,
        Counter,
        "Broker connections that ended while requests were owed an answer; those requests failed.",
    ),
    m(
        names::BROKER_CONNECTIONS_IDLE_CLOSED,
        Counter,
        "Broker connections that ended while they owed nothing (routine idle closes).",
    ),
    m(
        names::OUT_OF_RACK_REQUESTS,
        Counter,
        "Requests or parts sent to a broker in another rack than this Sluice node's.",
    ),
    m(
        names::DELEGATION_TOKEN_CREATE_SECONDS,
        Summary,
        "Seconds to create a delegation token and see it on every broker (successful creations).",
    ),
    m(
        names::DELEGATION_TOKENS_CACHED,
        Gauge,
        "Users with a delegation token held now.",
    ),
    m(
        names::DELEGATION_TOKEN_CREATIONS,
        Counter,
        "Delegation tokens created (first ones and rotations).",
    ),
    m(
        names::DELEGATION_TOKEN_FAILURES,
        Counter,
        "Failed delegation token creations (retried with backoff).",
    ),
    m(
        names::SYNTHESIZED_ERROR_RESPONSES,
        Counter,
        "Error answers Sluice made for requests no broker answered, and a leaving node's redirections.",
    ),
    m(
        names::FETCH_SESSIONS_OPENED,
        Counter,
        "Fetch sessions opened, by clients with Sluice (client) and by Sluice with brokers (broker).",
    ),
    m(
        names::FETCH_INCREMENTAL,
        Counter,
        "Incremental fetches received from clients (client) and sent to brokers (broker).",
    ),
    m(
        names::FETCH_SESSION_ERRORS,
        Counter,
        "Fetch session errors answered to clients or received from brokers.",
    ),
    m(
        names::FETCHES_ANSWERED_EARLY,
        Counter,
        "Split fetches answered before every part had.",
    ),
    m(
        names::FETCHES_READ_AHEAD,
        Counter,
        "Fetch parts sent ahead of a client's next fetch.",
    ),
    m(
        names::MEMORY_BUDGET_BYTES,
        Gauge,
        "A memory budget's limit in bytes: the process's or each connection's of a source.",
    ),
    m(
        names::MEMORY_BUDGET_USED_BYTES,
        Gauge,
        "Bytes every client connection holds together, against the process budget.",
    ),
    m(
        names::CLIENT_READS_PAUSED,
        Counter,
        "Times a client connection stopped reading because a memory budget was full.",
    ),
    m(
        names::FETCH_MAX_BYTES_CLAMPED,
        Counter,
        "Fetches whose max_bytes was lowered to fit a memory budget.",
    ),
    m(
        names::TLS_RELOADS,
        Counter,
        "TLS reloads (SIGHUP or a changed file), by side, name and result (ok, error).",
    ),
    m(
        names::TLS_CERTIFICATE_EXPIRY,
        Gauge,
        "When the certificate in use expires, in seconds since the Unix epoch.",
    ),
    m(
        names::SINK_READY,
        Gauge,
        "1 when the sink passed its latest readiness probe, else 0.",
    ),
    m(
        names::SINK_BROKERS_REACHABLE,
        Gauge,
        "Brokers that answered the sink's latest readiness probe.",
    ),
    m(
        names::BUILD_INFO,
        Gauge,
        "Always 1: the version and commit of the running binary.",
    ),
    m(
        names::CLIENT_REQUEST_DURATION,
        Histogram,
        "Seconds from taking a client's request to having written its answer, by API.",
    ),
    m(
        names::BROKER_REQUEST_DURATION,
        Histogram,
        "Seconds from writing a request or part to a broker to having read its answer, by API and broker.",
    ),
    m(
        names::BROKER_CONNECT_FAILURES,
        Counter,
        "Broker connections that could not be opened, by broker and kind (connect, connect_timeout, tls_handshake).",
    ),
    m(
        names::PROCESS_CPU_SECONDS,
        Counter,
        "Total user and system CPU time spent in seconds.",
    ),
    m(
        names::PROCESS_RESIDENT_MEMORY,
        Gauge,
        "Resident memory size in bytes.",
    ),
    m(
        names::PROCESS_OPEN_FDS,
        Gauge,
        "Number of open file descriptors.",
    ),
    m(
        names::PROCESS_MAX_FDS,
        Gauge,
        "Maximum number of open file descriptors.",
    ),
];

/// The catalog entry of `name`.
pub fn lookup(name: &str) -> Option<&'static Metric> {
    CATALOG.iter().find(|m| m.name == name)
}

/// Whether [`crate::process`] renders `name` (not the recorder).
pub(crate) fn is_process(name: &str) -> bool {
    name.starts_with("process_")
}

/// Hands every help text the recorder renders to the installed recorder.
pub(crate) fn describe_all() {
    for metric in CATALOG.iter().filter(|m| !is_process(m.name)) {
        match metric.kind {
            Kind::Counter => metrics::describe_counter!(metric.name, metric.help),
            Kind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            Kind::Histogram | Kind::Summary => {
                metrics::describe_histogram!(metric.name, metric.help)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_one_entry() {
        for name in names::ALL {
            let entries = CATALOG.iter().filter(|m| m.name == *name).count();
            assert_eq!(entries, 1, "{name} has {entries} catalog entries");
        }
        assert_eq!(CATALOG.len(), names::ALL.len(), "an entry names no metric");
        for metric in CATALOG {
            assert!(
                !metric.help.is_empty() && !metric.help.contains('\n'),
                "{}: one line of help",
                metric.name
            );
            let counter = metric.kind == Kind::Counter;
            assert_eq!(
                counter,
                metric.name.ends_with("_total"),
                "{}: counters, and only counters, end in _total",
                metric.name
            );
        }
    }
}
