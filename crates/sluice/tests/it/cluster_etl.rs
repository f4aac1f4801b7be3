//! A chained consume-transform-produce workload (an ETL) through one Sluice
//! node (KafkaSinkCluster) in front of the shared 3-broker cluster `trio`:
//! `compat/franz-go-etl` (franz-go) runs chains of groups (classic range,
//! classic cooperative-sticky with static members, KIP-848, and
//! transactional cooperative-sticky and KIP-848 chains with read_committed),
//! members joining and leaving throughout, and checks that every record
//! arrives exactly once at the end of each chain within a bound of a few
//! times its direct run time. The same workload runs with Kafka's Java
//! clients (`tests/clients/java/EtlChain.java`: classic and KIP-848 groups,
//! with and without transactions).
//!
//! It guards two things such a workload found: a consumer that reconnected
//! and named its old fetch session in a full fetch was answered
//! FETCH_SESSION_ID_NOT_FOUND forever (franz-go then fetches at epoch -1
//! with that id, and every chain stalled): every member here cuts its fetch
//! connections (`ss -K` on the client end) while it processes, so each
//! chain goes through such reconnects; and the stall detector fired on
//! healthy brokers for requests queued behind long waits on one broker
//! connection (checked here too: no such WARN in Sluice's log).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::FindCoordinatorRequest;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_metrics::names::FETCH_SESSION_ERRORS;
use sluice_testkit::clients::{self, ClientOutput};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{fronted, repo_root, unique, wait};

/// The workload's own limit (it runs in about a minute through Sluice on
/// an idle machine; direct, about as long).
const WORKLOAD_TIMEOUT: &str = "150s";
/// The Java workload's own limit (about 40 s directly on an idle machine,
/// as long through Sluice).
const JAVA_WORKLOAD_TIMEOUT_MS: &str = "150000";
/// A program's limit: the workload's, plus closing its clients (and, for
/// Java, compiling the program).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(200);

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// `compat/franz-go-etl` built from its lock file into the cargo target dir.
fn etl_program() -> PathBuf {
    let dir = repo_root().join("compat/franz-go-etl");
    let binary = repo_root().join("target/compat/franz-go-etl");
    let mut build = Command::new("go");
    build
        .args(["build", "-mod=readonly", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=readonly");
    let out = clients::run(
        build,
        None,
        Duration::from_secs(480),
        "go build (franz-go-etl)",
    );
    assert_eq!(
        out.code,
        Some(0),
        "go build of compat/franz-go-etl failed\n{}\n{}",
        out.stdout,
        out.stderr
    );
    binary
}

/// Waits (bounded) until the cluster has a transaction coordinator. On a
/// fresh cluster the first transactional lookup creates
/// `__transaction_state` (50 partitions, 3 replicas), which a loaded
/// machine takes long enough over to eat the workload's own bound.
fn wait_transaction_coordinator(cluster: &Cluster) {
    let addr = format!("127.0.0.1:{}", cluster.port(1, "PLAINTEXT"));
    wait::until(
        Duration::from_secs(120),
        "a transaction coordinator",
        || {
            let mut client = RawClient::connect(&addr);
            let ResponseKind::FindCoordinator(f) = client.request(
                ApiKey::FindCoordinator,
                4,
                RequestKind::FindCoordinator(
                    FindCoordinatorRequest::default()
                        .with_key_type(1)
                        .with_coordinator_keys(vec![StrBytes::from_static_str("etl-warm-up")]),
                ),
            ) else {
                return Err("not a FindCoordinator answer".to_owned());
            };
            match f.coordinators.first().map(|c| c.error_code) {
                Some(0) => Ok(()),
                code => Err(format!("error code {code:?}")),
            }
        },
    );
}

/// One chained ETL at a time: two at once on a 2-core machine would eat
/// each other's bound.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn chained_group_etl_delivers_every_record_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::get(TRIO);
    let program = etl_program();
    wait_transaction_coordinator(&cluster);
    let (sluice, addr) = fronted::start_one(sluice_bin(), &cluster);
    let mut run = Command::new(&program);
    run.args(["--bootstrap", &addr, "--prefix", &unique("etl")])
        .args(["--records", "20000", "--timeout", WORKLOAD_TIMEOUT]);
    let out = clients::run(run, None, PROGRAM_TIMEOUT, "franz-go-etl");
    check_run(&sluice, &out, "franz-go");
}

/// The same workload with Kafka's Java clients (`tests/clients/java/EtlChain.java`):
/// classic range and cooperative-sticky groups, KIP-848 groups
/// (`group.protocol=consumer`), and transactional classic and KIP-848
/// chains (`sendOffsetsToTransaction`, read_committed); members join and
/// leave; every record arrives exactly once within the bound (about 40 s
/// directly on an idle machine).
#[test]
fn java_chained_group_etl_delivers_every_record_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::get(TRIO);
    wait_transaction_coordinator(&cluster);
    let (sluice, addr) = fronted::start_one(sluice_bin(), &cluster);
    let prefix = unique("jetl");
    let args = [
        "--bootstrap",
        &addr,
        "--prefix",
        &prefix,
        "--records",
        "20000",
        "--timeout-ms",
        JAVA_WORKLOAD_TIMEOUT_MS,
    ];
    let run = clients::java_program(&cluster, "EtlChain.java", &args);
    let out = clients::run(run, None, PROGRAM_TIMEOUT, "EtlChain.java");
    check_run(&sluice, &out, "Java");
}

/// Asserts that the ETL program's run `out` through `sluice` passed, and
/// that Sluice's stall detector did not fire on the healthy brokers.
fn check_run(sluice: &SluiceProcess, out: &ClientOutput, client: &str) {
    println!("{}", out.stdout);
    let log = sluice.log();
    let session_errors = ["FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"]
        .map(|e| {
            let label = format!("error=\"{e}\"");
            let n = sluice.metric(FETCH_SESSION_ERRORS, &["side=\"client\"", &label]);
            format!("{e} {}", n as u64)
        })
        .join(", ");
    println!("etl: Sluice's fetch session errors to clients: {session_errors}");
    assert_eq!(
        out.code,
        Some(0),
        "the {client} chained ETL through Sluice failed (fetch session errors to clients: \
         {session_errors})\n--- stdout ---\n{}\n--- stderr (tail) ---\n{}",
        out.stdout,
        tail(&out.stderr, 4000)
    );
    // A first stall check (DEBUG) costs one Metadata request; a broker is
    // warned about only when it is still quiet at the recheck.
    let false_alarms = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("has not answered a request"))
        .collect::<Vec<_>>();
    assert!(
        false_alarms.is_empty(),
        "the stall detector warned about healthy brokers:\n{}",
        false_alarms.join("\n")
    );
}

fn tail(s: &str, n: usize) -> &str {
    let at = s.len().saturating_sub(n);
    let at = (at..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[at..]
}
