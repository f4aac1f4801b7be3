//! A rolling restart of three Sluice nodes (each leaves, then drains) against the
//! real 3-node cluster (`trio`), under Kafka's `VerifiableProducer`
//! (idempotent, acks=all), a `VerifiableConsumer` in a group (classic
//! protocol, committing after each poll) and a librdkafka consumer in a
//! group of its own, all bootstrapped at the three nodes.
//!
//! Each node in turn gets SIGTERM: it stops accepting (its peers' health
//! check fails, and they stop showing it), stops showing itself, answers
//! requests for its leaders and coordinators with retriable errors for up
//! to `--leave-timeout-secs` so that the clients move, drains and exits;
//! it is started again on the same address and the test waits until every
//! node shows all three again. The clients see no error: no failed send,
//! no failed commit, no librdkafka error, every acknowledged record
//! consumed by both consumers.
//!
//! No broker is stopped here, so it runs in the workspace phase.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{self, Produced, ProducerRun, disconnects};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::unique;

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

const CLOSED_ON_ERROR: &str = "sluice_client_connections_closed_on_error_total";
/// Each node checks its peers this often.
const PEER_CHECK_MS: u64 = 500;
/// The leave: several health-check periods, and time for the clients'
/// retries after them.
const LEAVE_SECS: u64 = 4;
const WAIT: Duration = Duration::from_secs(90);

/// Starts Sluice node `i` of `nodes` (broker id `i`, on `nodes[i]`).
fn start_node(cluster: &Cluster, nodes: &[String], i: usize) -> SluiceProcess {
    let topology = fronted::topology(cluster, nodes, i, PEER_CHECK_MS);
    let leave = LEAVE_SECS.to_string();
    SluiceProcess::start_with_flags(
        sluice_bin(),
        &topology,
        &[&nodes[i]],
        &["--leave-timeout-secs", &leave],
    )
}

fn wait_all_listed(nodes: &[String], what: &str) {
    for node in nodes {
        fronted::wait_listed(
            node,
            nodes,
            &format!("{node} to show all three nodes {what}"),
        );
    }
}

/// The librdkafka consumer's error events.
fn librdkafka_errors(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| matches!(e["name"].as_str(), Some("consume_error" | "client_error")))
        .collect()
}

#[test]
fn rolling_restart_of_three_sluice_nodes_without_client_errors() {
    let cluster = Cluster::get(TRIO);
    let nodes = fronted::listen_addrs(3);
    let mut processes: Vec<SluiceProcess> =
        (0..3).map(|i| start_node(&cluster, &nodes, i)).collect();
    wait_all_listed(&nodes, "at start");
    let topic = unique("rolling");
    create_spread_topic(&cluster, &topic, 6);
    let bootstrap = nodes.join(",");

    let mut consumer = delivery::start_consumer(&cluster, &bootstrap, &topic, &unique("rolling"));
    let mut rdkafka =
        delivery::start_librdkafka_consumer(&bootstrap, &topic, &unique("rolling-rd"), &[], &[]);
    delivery::wait_assigned(&mut consumer, 6, WAIT);
    delivery::wait_assigned(&mut rdkafka, 6, WAIT);
    let mut producer = ProducerRun::idempotent(1_000_000, 200).start(&cluster, &bootstrap, &topic);
    delivery::wait_acked(&mut producer, 400, WAIT);

    for (i, process) in processes.iter_mut().enumerate() {
        let requests = process.metric("sluice_requests_total", &[]);
        assert!(requests > 0.0, "the clients use sluice node {i}");
        let began = Instant::now();
        let status = process.terminate(Duration::from_secs(60));
        let took = began.elapsed();
        assert!(
            status.success(),
            "sluice node {i} left, drained and exited: {status}"
        );
        let log = process.log();
        assert!(
            log.contains("this sluice node is no longer shown to clients"),
            "sluice node {i} left before draining; log:\n{log}"
        );
        assert!(
            !log.contains("request(s) unanswered"),
            "sluice node {i} answered everything it owed; log:\n{log}"
        );
        eprintln!("sluice node {i} exited {took:?} after SIGTERM");
        *process = start_node(&cluster, &nodes, i);
        wait_all_listed(&nodes, &format!("after node {i} restarted"));
        let at = delivery::wait_acked(&mut producer, 0, WAIT);
        delivery::wait_acked(&mut producer, at + 200, WAIT);
    }

    let out = producer.terminate(Duration::from_secs(60));
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    let retried = |code: &str| out.stderr.matches(code).count();
    eprintln!(
        "producer: {} acked; retried NOT_LEADER_OR_FOLLOWER {}; {} disconnects",
        produced.acked.len(),
        retried("NOT_LEADER_OR_FOLLOWER"),
        disconnects(&out.stderr).len()
    );
    assert!(
        produced.errors.is_empty(),
        "no failed send: {:?}",
        produced.errors
    );
    produced.assert_all_acked();

    let consumed = delivery::wait_consumed(&mut consumer, &topic, &produced.acked, WAIT);
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    let out = consumer.terminate(Duration::from_secs(60));
    let events = delivery::events(&out.stdout);
    assert_eq!(
        delivery::failed_commits(&events),
        Vec::<String>::new(),
        "no failed commit"
    );
    eprintln!(
        "java consumer: {} disconnects",
        disconnects(&out.stderr).len()
    );

    let consumed = delivery::wait_consumed(&mut rdkafka, &topic, &produced.acked, WAIT);
    assert!(
        consumed.holes.is_empty(),
        "librdkafka gaps: {:?}",
        consumed.holes
    );
    let events = delivery::events(&rdkafka.terminate(Duration::from_secs(60)).stdout);
    assert_eq!(
        librdkafka_errors(&events),
        Vec::<&Value>::new(),
        "the librdkafka consumer reported no error"
    );
    for (i, sluice) in processes.iter().enumerate() {
        assert_eq!(
            sluice.metric(CLOSED_ON_ERROR, &[]),
            0.0,
            "restarted sluice node {i} closed no client connection on an error"
        );
    }
}
