//! Token rotation soak: Java clients authenticated with SCRAM run for minutes
//! through a Sluice whose delegation tokens live 30 s, against the shared
//! 3-node cluster (`trio`), and never notice a rotation.
//!
//! Over the run (`SLUICE_SOAK_SECS`, default 300 s, at 100 records/s) the
//! token is re-created every 15 s, and every broker connection Sluice holds
//! must move to the new token before the old one expires. The test shows:
//!
//! - the clients see nothing: no failed send, no failed commit, no
//!   `Node N disconnected.`, and every acknowledged record is consumed;
//! - Sluice did rotate: tokens created and connections replaced with reason
//!   `token_at_risk` at the rate the lifetime implies, each replacement
//!   logged;
//! - no broker closed a connection under Sluice: Sluice counts no receive
//!   error and logs no WARN, and no broker logged an expired SASL session
//!   (`Disconnecting expired channel`, logged only at DEBUG, so the test
//!   turns that broker logger to DEBUG while it runs).
//!
//! A second test sends with `acks=0` through tokens of 10 s: every broker
//! connection Sluice replaces writes what was queued on it before it closes,
//! so a producer that never hears back loses nothing.
//!
//! A third keeps one broker's fetches on read-ahead for more than two
//! token lifetimes: a Java consumer catching up one record batch per fetch
//! is served every fetch by the part Sluice read ahead for it, so no fetch
//! of the client's own reaches that broker. A part read ahead must check
//! its connection as every request does, and move to the new token in
//! time: no broker closes a connection for an expired session, and Sluice
//! counts no receive error and logs no WARN.
//!
//! No broker is killed here; the tests run in the normal phase.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_testkit::clients;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{self, Produced, ProducerRun, disconnects};
use sluice_testkit::scram::{self, DebugLogger, EXPIRED_CHANNEL, NEW_CONNECTION, PROCESSOR_LOGGER};
use sluice_testkit::{fronted, unique, wait};

const LIFETIME_SECS: u64 = 30;
const RATE: u64 = 100;
const PARTITIONS: u32 = 6;
const CLIENT_CONFIG: &str = "scram512-admin";
const REPLACED_LOG: &str = "replaced a broker connection before its delegation token expires";

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// The soak's length: `SLUICE_SOAK_SECS`, default 300.
fn soak_secs() -> u64 {
    std::env::var("SLUICE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

/// Log lines at WARN or above (`<timestamp> <LEVEL> <target>: ...`).
fn warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| matches!(l.split_whitespace().nth(1), Some("WARN" | "ERROR")))
        .collect()
}

/// Lines of a Java tool's stderr at WARN or above (`[time] LEVEL ...`).
fn java_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("] WARN ") || l.contains("] ERROR "))
        .collect()
}

/// Broker log lines that say a connection was closed for an expired SASL
/// session (only a token connection has one here: the cluster sets no
/// `connections.max.reauth.ms`).
fn expired_session(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    line.contains(EXPIRED_CHANNEL)
        || lower.contains("session expired")
        || lower.contains("re-authentication")
        || lower.contains("reauthentication")
}

/// Broker log lines about a failed authentication. Other tests sharing the
/// cluster fail logins on purpose (wrong passwords) and the line names only
/// the client's host, so these are reported, not asserted; a token login of
/// this Sluice that failed would fail a client request, which Sluice logs
/// at WARN (asserted).
fn failed_authentication(line: &str) -> bool {
    line.contains("Failed authentication") || line.contains("SaslAuthenticationException")
}

/// Line counts of every node's `server.log`.
fn broker_log_marks(cluster: &Cluster) -> Vec<usize> {
    (1..=cluster.node_count())
        .map(|id| scram::log_line_count(cluster, id))
        .collect()
}

#[test]
fn java_clients_ride_through_minutes_of_token_rotation() {
    let secs = soak_secs();
    let cluster = Cluster::get(TRIO);
    let _debug = DebugLogger::enable(&cluster, PROCESSOR_LOGGER);
    let marks = broker_log_marks(&cluster);
    let (sluice, listen) = scram::start(sluice_bin(), &cluster, LIFETIME_SECS, 60);
    let topic = unique("token-soak");
    cluster.create_topic_with_configs(&topic, PARTITIONS, 3, &["min.insync.replicas=2"]);
    let props = cluster.client_config(CLIENT_CONFIG);

    let mut consumer = delivery::start_consumer_with(
        &cluster,
        &listen,
        &topic,
        &unique("token-soak-group"),
        &["--command-config", &props],
    );
    delivery::wait_assigned(&mut consumer, PARTITIONS as usize, Duration::from_secs(90));
    let mut run = ProducerRun::idempotent(secs * RATE, RATE);
    run.config
        .extend(scram::client_properties(&cluster, CLIENT_CONFIG));
    let started = Instant::now();
    let mut producer = run.start(&cluster, &listen, &topic);
    // Poll both tools while the producer runs, so a dead consumer fails fast.
    wait::until(
        Duration::from_secs(secs + 240),
        "the producer to send every record",
        || {
            consumer.assert_running();
            if producer.exited() {
                Ok(())
            } else {
                let acked = Produced::from_events(&producer.events()).acked.len();
                Err(format!("{acked} acked after {:?}", started.elapsed()))
            }
        },
    );
    let out = producer.wait_exit(Duration::from_secs(30));
    out.assert_success("VerifiableProducer");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    let producer_stderr = out.stderr;
    let ran = started.elapsed();

    let consumed = delivery::wait_consumed(
        &mut consumer,
        &topic,
        &produced.acked,
        Duration::from_secs(120),
    );
    let out = consumer.terminate(Duration::from_secs(60));
    let consumer_events = delivery::events(&out.stdout);
    let consumer_stderr = out.stderr;

    let metric = |name: &str, labels: &[&str]| sluice.metric(name, labels);
    let created = metric("sluice_delegation_token_creations_total", &[]);
    let replaced = metric(
        "sluice_broker_connections_recreated_total",
        &["reason=\"token_at_risk\""],
    );
    let log = sluice.log();
    let replaced_logged = log.matches(REPLACED_LOG).count();
    eprintln!(
        "soak: {ran:?}, {} acked, {} consumed; tokens created {created}, token connections \
         replaced {replaced} ({replaced_logged} logged); client WARN lines: producer {}, consumer {}",
        produced.acked.len(),
        consumed.records,
        java_warnings(&producer_stderr).len(),
        java_warnings(&consumer_stderr).len(),
    );

    // The clients saw nothing.
    assert!(
        produced.errors.is_empty(),
        "no failed send: {:?}",
        produced.errors
    );
    assert_eq!(produced.sent, Some(secs * RATE));
    assert_eq!(
        produced.acked.len() as u64,
        secs * RATE,
        "every record acknowledged"
    );
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    assert_eq!(
        delivery::failed_commits(&consumer_events),
        Vec::<String>::new(),
        "no failed commit"
    );
    assert_eq!(
        (disconnects(&producer_stderr), disconnects(&consumer_stderr)),
        (Vec::new(), Vec::new()),
        "the clients never see a disconnect"
    );
    let client_errors: Vec<&str> = java_warnings(&producer_stderr)
        .into_iter()
        .chain(java_warnings(&consumer_stderr))
        .collect();
    assert!(
        client_errors.is_empty(),
        "the clients log no WARN or ERROR:\n{}",
        client_errors.join("\n")
    );

    // Sluice rotated: a token every L/2, and the connections in use moved
    // to each new token: at least the producer's one per broker at every
    // rotation but the first and the last (about 13 per rotation are seen).
    let rotations = secs / (LIFETIME_SECS / 2);
    assert!(
        created >= (rotations / 2).max(2) as f64,
        "tokens created over {secs} s with a {LIFETIME_SECS} s lifetime: {created}"
    );
    assert!(
        replaced >= (3 * rotations.saturating_sub(2)).max(1) as f64,
        "token connections replaced ahead of expiry over {secs} s: {replaced}"
    );
    assert!(
        replaced_logged as f64 >= replaced,
        "each replacement is logged: {replaced_logged} lines for {replaced}"
    );

    // Nothing closed a connection under Sluice.
    assert_eq!(
        metric("sluice_broker_receive_errors_total", &[]),
        0.0,
        "no broker connection failed or was closed by a broker"
    );
    assert_eq!(
        metric("sluice_client_connections_closed_on_error_total", &[]),
        0.0,
        "Sluice closed no client connection"
    );
    let sluice_warnings = warnings(&log);
    assert!(
        sluice_warnings.is_empty(),
        "Sluice logs no WARN or ERROR:\n{}",
        sluice_warnings.join("\n")
    );
    assert_brokers_saw_no_expired_session(&cluster, &marks);
}

/// No broker closed a connection for an expired SASL session since
/// `marks`; and the DEBUG logger was on (the brokers logged the
/// connections they accepted), so that silence means something.
fn assert_brokers_saw_no_expired_session(cluster: &Cluster, marks: &[usize]) {
    let mut accepted = 0;
    let mut expired = Vec::new();
    let mut failed = Vec::new();
    for (i, mark) in marks.iter().enumerate() {
        let id = i + 1;
        for line in scram::log_lines_since(cluster, id, *mark) {
            if line.contains(NEW_CONNECTION) {
                accepted += 1;
            }
            if expired_session(&line) {
                expired.push(format!("node {id}: {line}"));
            } else if failed_authentication(&line) {
                failed.push(format!("node {id}: {line}"));
            }
        }
    }
    eprintln!(
        "brokers during the soak: {accepted} connections accepted, {} expired sessions, \
         {} failed authentications (any client of the cluster){}",
        expired.len(),
        failed.len(),
        failed
            .iter()
            .take(5)
            .fold(String::new(), |acc, l| acc + "\n  " + l)
    );
    assert!(
        accepted > 0,
        "the brokers log accepted connections at DEBUG during the soak (the check below \
         relies on that logger)"
    );
    assert!(
        expired.is_empty(),
        "no broker closed a connection for an expired SASL session:\n{}",
        expired.join("\n")
    );
}

/// `acks=0` through token rotations: 6,000 records at
/// 200/s, tokens of 10 s replaced every 5 s, each rotation replacing the
/// producer's broker connections while sends are queued on them. Every
/// record reaches the log: the topic's offsets add up to what was sent.
#[test]
fn acks_zero_sends_through_token_rotations_are_all_written() {
    const RECORDS: u64 = 6_000;
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = scram::start(sluice_bin(), &cluster, 10, 60);
    let topic = unique("token-acks-zero");
    cluster.create_topic(&topic, PARTITIONS, 3);
    let mut run = ProducerRun::fire_and_forget(RECORDS, 200);
    run.config
        .extend(scram::client_properties(&cluster, CLIENT_CONFIG));
    let out = run
        .start(&cluster, &listen, &topic)
        .wait_exit(Duration::from_secs(180));
    out.assert_success("VerifiableProducer (acks=0)");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    let replaced = sluice.metric(
        "sluice_broker_connections_recreated_total",
        &["reason=\"token_at_risk\""],
    );
    let written: u64 = fronted::offsets(&cluster, &cluster.bootstrap("PLAINTEXT"), &topic, "-1")
        .values()
        .sum();
    eprintln!("acks=0: {RECORDS} sent, {written} written, {replaced} connections replaced");
    assert_eq!(produced.sent, Some(RECORDS));
    assert!(
        produced.errors.is_empty(),
        "no failed send: {:?}",
        produced.errors
    );
    assert!(
        replaced >= 3.0,
        "token connections were replaced under the producer ({replaced})"
    );
    assert_eq!(written, RECORDS, "every acks=0 record reached the log");
}

/// A consumer whose fetches all go to one broker and are all served by
/// parts read ahead (`AheadCheck.java`: one partition, one record batch per
/// fetch, a short pause per poll), for 25 s through tokens of 10 s: the
/// parts read ahead go out on connections replaced before their token
/// expires, as every other request's do.
#[test]
fn a_consumer_served_by_read_ahead_moves_to_each_new_token_in_time() {
    const LIFETIME_SECS: u64 = 10;
    const SECONDS: u64 = 25;
    let cluster = Cluster::get(TRIO);
    let _debug = DebugLogger::enable(&cluster, PROCESSOR_LOGGER);
    let marks = broker_log_marks(&cluster);
    let (sluice, listen) = scram::start(sluice_bin(), &cluster, LIFETIME_SECS, 60);
    let topic = unique("token-ahead");
    cluster.create_topic(&topic, 1, 3);
    let secs = SECONDS.to_string();
    let plaintext = cluster.bootstrap("PLAINTEXT");
    let settings: Vec<String> = scram::client_properties(&cluster, CLIENT_CONFIG);
    let mut args = vec![
        "--bootstrap",
        listen.as_str(),
        "--produce-bootstrap",
        plaintext.as_str(),
        "--topic",
        topic.as_str(),
        "--records",
        "6000",
        "--seconds",
        secs.as_str(),
        "--pause-ms",
        "10",
    ];
    for setting in &settings {
        args.extend(["-X", setting.as_str()]);
    }
    let out = clients::run(
        clients::java_program(&cluster, "AheadCheck.java", &args),
        None,
        Duration::from_secs(SECONDS + 120),
        "AheadCheck.java",
    );
    let report: serde_json::Value = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report from AheadCheck.java:\n{}", out.text()));
    let metric = |name: &str, labels: &[&str]| sluice.metric(name, labels);
    let ahead = metric("sluice_fetches_read_ahead_total", &[]);
    let replaced = metric(
        "sluice_broker_connections_recreated_total",
        &["reason=\"token_at_risk\""],
    );
    let receive_errors = metric("sluice_broker_receive_errors_total", &[]);
    eprintln!(
        "read-ahead consumer: {report}; {ahead} parts read ahead, {replaced} token \
         connections replaced, {receive_errors} receive errors"
    );
    out.assert_success("AheadCheck.java");
    let records = report["records"].as_u64().unwrap_or(0);
    let polls = report["polls"].as_u64().unwrap_or(0);
    assert!(
        records >= 1000,
        "the consumer kept reading for the whole run: {report}"
    );
    assert!(
        ahead as u64 >= polls * 8 / 10,
        "most fetches were served by a part read ahead: {ahead} parts for {polls} polls \
         ({records} records)"
    );
    assert!(
        replaced >= 2.0,
        "the broker connection moved to each new token ({replaced} replacements in {SECONDS} s \
         of {LIFETIME_SECS} s tokens)"
    );
    assert_eq!(
        receive_errors, 0.0,
        "no broker connection failed or was closed by a broker"
    );
    let log = sluice.log();
    let sluice_warnings = warnings(&log);
    assert!(
        sluice_warnings.is_empty(),
        "Sluice logs no WARN or ERROR:\n{}",
        sluice_warnings.join("\n")
    );
    assert_brokers_saw_no_expired_session(&cluster, &marks);
}
