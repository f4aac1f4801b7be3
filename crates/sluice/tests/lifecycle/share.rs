//! Share consumers (KIP-932, Kafka's Java `KafkaShareConsumer`,
//! `tests/clients/java/ShareCheck.java`) through two Sluice nodes while a
//! broker is killed and a member leaves: Sluice holds each consumer's share
//! session and one with every broker; the killed broker's partitions get
//! NOT_LEADER_OR_FOLLOWER (fetch and acknowledgements), the consumers keep
//! their connections and sessions, and every record is still acknowledged
//! (the killed broker's acquired records are delivered again by the new
//! leader), with no lag left in the group's offsets.

use std::path::Path;
use std::time::Duration;

use sluice_testkit::clients;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::{fronted, unique, wait};

use super::support::*;

/// How many records the producer sends, and after how many acknowledged
/// ones the broker is killed.
const RECORDS: usize = 6000;
const KILL_AFTER: usize = 1500;

fn acknowledged(progress: &Path) -> usize {
    std::fs::read_to_string(progress)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Three share consumers behind two Sluice nodes; broker 2 killed once
/// 1,500 records were acknowledged, a member leaving after 1,000. Every
/// record is acknowledged, no Sluice node closes a client for an error, and
/// Sluice answered the killed broker's parts with retriable errors.
#[test]
#[ignore = "kills a broker; run in the serial phase of scripts/test"]
fn share_consumers_survive_a_killed_broker_and_a_leaving_member() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let (sluices, nodes) =
        fronted::start_nodes_checking(sluice_bin(), &cluster, &["rack0"; 2], 500);
    let bootstrap = nodes.join(",");
    let topic = unique("lifecycle-share");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let group = unique("lifecycle-share");
    let progress = tempfile::NamedTempFile::new().expect("a progress file");
    let progress_path = progress.path().to_path_buf();
    let setup = cluster.bootstrap("PLAINTEXT");
    let records = RECORDS.to_string();
    let args: Vec<String> = [
        "--mode",
        "deliver",
        "--bootstrap",
        &bootstrap,
        "--setup-bootstrap",
        &setup,
        "--topic",
        &topic,
        "--group",
        &group,
        "--records",
        &records,
        "--consumers",
        "3",
        "--leave-after",
        "1000",
        // Records wait a while acquired, so that the kill finds some.
        "--process-ms",
        "200",
        "--timeout-ms",
        "240000",
        "--progress-file",
        &progress_path.display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let run = {
        let cluster = Cluster::get(TRIO);
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let command = clients::java_program(&cluster, "ShareCheck.java", &args);
            clients::run(command, None, Duration::from_secs(330), "ShareCheck.java")
        })
    };
    wait::until(
        Duration::from_secs(120),
        &format!("{KILL_AFTER} records acknowledged through Sluice"),
        || {
            let n = acknowledged(&progress_path);
            if n >= KILL_AFTER {
                Ok(())
            } else if run.is_finished() {
                panic!("ShareCheck ended early with {n} acknowledged");
            } else {
                Err(format!("{n} acknowledged"))
            }
        },
    );
    let killed = cluster.kill_node(VICTIM);
    let out = run.join().expect("the ShareCheck thread");
    killed.restart();
    eprintln!("ShareCheck:\n{}", out.stdout.trim());
    assert!(
        out.code == Some(0) && out.stdout.contains("RESULT PASS"),
        "every record acknowledged through a killed broker and a leaving member (exit {:?})\nstdout:\n{}\nstderr:\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
    for sluice in &sluices {
        let text = sluice.metrics();
        let shown = |l: &&str| {
            l.contains("api=\"Share")
                && (l.starts_with("sluice_requests_total") || l.starts_with(SYNTHESIZED))
        };
        for line in text.lines().filter(shown) {
            eprintln!("{line}");
        }
    }
    let synthesized: f64 = sluices.iter().map(|s| s.metric(SYNTHESIZED, &[])).sum();
    assert!(
        synthesized > 0.0,
        "Sluice answered the killed broker's share parts with retriable errors"
    );
    for sluice in &sluices {
        assert_eq!(
            sluice.metric(CLOSED_ON_ERROR, &[]),
            0.0,
            "no client connection closed on an error"
        );
    }
}
