//! A Kafka Streams application on the Streams rebalance protocol (KIP-1071)
//! with `exactly_once_v2` through one Sluice node, a broker killed with
//! SIGKILL while it counts and restarted: every count exact, no client
//! connection closed by Sluice.
//!
//! The application (`tests/clients/java/StreamsCount.java`) counts records
//! per key while a producer writes them; its checker reads the counts
//! read_committed and requires each key's to be 1, 2, 3, ... exactly, so a
//! record lost or processed twice fails it. Without StreamsGroupHeartbeat
//! routed by Sluice the application never starts processing ("The cluster
//! does not support the STREAMS group protocol").

use std::time::{Duration, Instant};

use sluice_testkit::clients;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::ToolProcess;
use sluice_testkit::unique;

use super::support::{CLOSED_ON_ERROR, VICTIM, serial, start};

const RECORDS: usize = 20_000;
const KEYS: usize = 50;
/// How long the producer takes over its records: the broker is killed,
/// comes back, and the application still has records to count after that.
const PRODUCE_MS: &str = "80000";
/// The application's own limit; the test waits a minute longer.
const PROGRAM_TIMEOUT_MS: u64 = 300_000;

/// The `counted=` of the application's last `PROGRESS` line.
fn counted(app: &ToolProcess) -> usize {
    app.stdout()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("PROGRESS "))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("counted="))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits (bounded) until the application has counted `n` records.
fn wait_counted(app: &mut ToolProcess, n: usize, timeout: Duration, when: &str) {
    let start = Instant::now();
    loop {
        app.assert_running();
        let got = counted(app);
        if got >= n {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{when}: the Streams application counted {got} of {n} records within {timeout:?}\n\
             --- stdout (tail) ---\n{}",
            tail(&app.stdout(), 3000)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tail(s: &str, n: usize) -> &str {
    let at = s.len().saturating_sub(n);
    let at = (at..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[at..]
}

#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn streams_protocol_exactly_once_counts_are_exact_across_a_broker_kill() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let (sluice, addr) = start(&cluster);
    let prefix = unique("streams-eos");
    let state = tempfile::tempdir().expect("state dir");
    let (records, keys, timeout) = (
        RECORDS.to_string(),
        KEYS.to_string(),
        PROGRAM_TIMEOUT_MS.to_string(),
    );
    let args = [
        "--bootstrap",
        &addr,
        "--prefix",
        &prefix,
        "--state-dir",
        &state.path().display().to_string(),
        "--records",
        &records,
        "--keys",
        &keys,
        "--produce-ms",
        PRODUCE_MS,
        "--timeout-ms",
        &timeout,
    ];
    let command = clients::java_streams_program(&cluster, "StreamsCount.java", &args);
    let mut app = ToolProcess::spawn(command, "StreamsCount.java");

    wait_counted(
        &mut app,
        RECORDS / 5,
        Duration::from_secs(180),
        "before the kill",
    );
    let at_kill = counted(&app);
    let killed = cluster.kill_node(VICTIM);
    eprintln!("streams: broker {VICTIM} killed at {at_kill} records counted");
    wait_counted(
        &mut app,
        at_kill + RECORDS / 10,
        Duration::from_secs(120),
        "with a broker down",
    );
    killed.restart();
    let at_restart = counted(&app);
    eprintln!("streams: broker {VICTIM} restarted at {at_restart} records counted");
    assert!(
        at_restart < RECORDS - RECORDS / 20,
        "the broker came back too late to matter ({at_restart} of {RECORDS} records counted)"
    );

    let out = app.wait_exit(Duration::from_millis(PROGRAM_TIMEOUT_MS) + Duration::from_secs(60));
    let result = out
        .stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or("no RESULT line")
        .to_owned();
    println!("{result}");
    assert!(
        out.code == Some(0) && result.starts_with("RESULT PASS"),
        "the Streams application failed through Sluice: {result}\n--- stdout (tail) ---\n{}\n\
         --- stderr (tail) ---\n{}",
        tail(&out.stdout, 4000),
        tail(&out.stderr, 4000)
    );
    let heartbeats = sluice.metric("sluice_requests_total", &["api=\"StreamsGroupHeartbeat\""]);
    assert!(
        heartbeats >= 1.0,
        "the application used the Streams protocol through Sluice"
    );
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}
