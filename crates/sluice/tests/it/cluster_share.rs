//! Share groups (KIP-932) through two Sluice nodes (KafkaSinkCluster) in
//! front of the shared 3-broker cluster `trio`, with Kafka's Java
//! `KafkaShareConsumer` (`tests/clients/java/ShareCheck.java`), on a topic
//! whose partitions are led by all three brokers, so that every share fetch
//! is split over brokers and Sluice keeps a share session with each:
//!
//! - three consumers, one leaving mid-run: every record is delivered and
//!   acknowledged, and the group's offsets (DescribeShareGroupOffsets through
//!   Sluice) show no lag;
//! - at-least-once redelivery: records released come back once (delivery
//!   count 2), rejected and accepted ones never;
//! - lease renewal (KIP-1222, AcknowledgeType.RENEW): records held past
//!   their acquisition lock while renewed are never given to another
//!   member.
//!
//! A broker killed under share consumers is in `tests/lifecycle/share.rs` (the
//! serial phase).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_testkit::clients::{self, ClientOutput};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{fronted, unique};

const PARTITIONS: u32 = 6;
const CLOSED_ON_ERROR: &str = "sluice_client_connections_closed_on_error_total";

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Runs `ShareCheck.java` with `args` (bounded by `timeout`) against
/// `bootstrap`, set up directly on the cluster.
fn share_check(
    cluster: &Cluster,
    bootstrap: &str,
    mode: &str,
    extra: &[&str],
    timeout: Duration,
) -> ClientOutput {
    let topic = unique(&format!("share-{mode}"));
    fronted::create_spread_topic(cluster, &topic, PARTITIONS);
    let group = unique(&format!("share-{mode}"));
    let setup = cluster.bootstrap("PLAINTEXT");
    let mut args = vec![
        "--mode",
        mode,
        "--bootstrap",
        bootstrap,
        "--setup-bootstrap",
        &setup,
        "--topic",
        &topic,
        "--group",
        &group,
    ];
    args.extend_from_slice(extra);
    let command = clients::java_program(cluster, "ShareCheck.java", &args);
    clients::run(command, None, timeout, "ShareCheck.java")
}

/// PASS printed and exit 0, else a failure with the program's output.
fn assert_passed(out: &ClientOutput, what: &str) {
    eprintln!("{what}:\n{}", out.stdout.trim());
    assert!(
        out.code == Some(0) && out.stdout.contains("RESULT PASS"),
        "{what}: ShareCheck failed (exit {:?})\nstdout:\n{}\nstderr (tail):\n{}",
        out.code,
        out.stdout,
        tail(&out.stderr, 60)
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// No client connection was closed for an error by any node.
fn assert_no_client_closed(sluices: &[SluiceProcess]) {
    for sluice in sluices {
        assert_eq!(
            sluice.metric(CLOSED_ON_ERROR, &[]),
            0.0,
            "no client connection closed on an error"
        );
    }
}

#[test]
fn share_consumers_through_two_nodes_acknowledge_every_record() {
    let cluster = Cluster::get(TRIO);
    let (sluices, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 2);
    let bootstrap = nodes.join(",");
    let out = share_check(
        &cluster,
        &bootstrap,
        "deliver",
        &[
            "--records",
            "3000",
            "--consumers",
            "3",
            "--leave-after",
            "500",
            "--timeout-ms",
            "150000",
        ],
        Duration::from_secs(240),
    );
    assert_passed(&out, "three share consumers, one leaving");
    assert_no_client_closed(&sluices);
}

#[test]
fn released_records_come_back_and_rejected_ones_do_not() {
    let cluster = Cluster::get(TRIO);
    let (sluices, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 2);
    let bootstrap = nodes.join(",");
    let out = share_check(
        &cluster,
        &bootstrap,
        "redeliver",
        &["--records", "300", "--timeout-ms", "120000"],
        Duration::from_secs(200),
    );
    assert_passed(&out, "RELEASE and REJECT");
    assert_no_client_closed(&sluices);
}

#[test]
fn renewed_acquisition_locks_keep_records_from_other_members() {
    let cluster = Cluster::get(TRIO);
    let (sluices, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 2);
    let bootstrap = nodes.join(",");
    let out = share_check(
        &cluster,
        &bootstrap,
        "renew",
        &["--records", "60"],
        Duration::from_secs(200),
    );
    assert_passed(&out, "RENEW (KIP-1222)");
    assert_no_client_closed(&sluices);
}
