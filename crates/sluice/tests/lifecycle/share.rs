//! Share consumers (KIP-932, Kafka's Java `KafkaShareConsumer`,
//! `tests/clients/java/ShareCheck.java`) through two Sluice nodes while a
//! broker is killed and a member leaves: Sluice holds each consumer's share
//! session and one with every broker; the killed broker's partitions get
//! NOT_LEADER_OR_FOLLOWER (fetch and acknowledgements), the consumers keep
//! their connections and sessions, and every record is still acknowledged
//! (the killed broker's acquired records are delivered again by the new
//! leader), with no lag left in the group's offsets. And one consumer's
//! `commitSync` after the leader of its records was killed, or its
//! connections to that leader reset, against the same run directly: both
//! end at once, with an error the client does not retry.

use std::path::Path;
use std::time::Duration;

use sluice_testkit::clients;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::{fronted, nodes, unique, wait};

use super::support::*;

/// How many records the producer sends, and after how many acknowledged
/// ones the broker is killed.
const RECORDS: usize = 6000;
const KILL_AFTER: usize = 1500;

/// Runs `ShareCheck.java` with `args` on a thread of its own, against
/// trio's jars, bounded by `timeout`.
fn share_check(
    args: Vec<String>,
    timeout: Duration,
) -> std::thread::JoinHandle<sluice_testkit::clients::ClientOutput> {
    let cluster = Cluster::get(TRIO);
    std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let command = clients::java_program(&cluster, "ShareCheck.java", &args);
        clients::run(command, None, timeout, "ShareCheck.java")
    })
}

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
    let run = share_check(args, Duration::from_secs(330));
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

/// What happens to a share partition's leader while a consumer holds
/// records acquired from it, not yet acknowledged.
#[derive(Clone, Copy)]
enum Fault {
    /// The leader is killed (SIGKILL) and another broker takes the partition.
    KillLeader,
    /// The TCP connections to the leader from the process the consumer's
    /// acknowledgements go through (the consumer directly, else Sluice) are
    /// reset with `ss -K`: the broker closes their share session and releases
    /// the records they acquired; it stays the leader.
    ResetConnections,
}

/// The process whose connections [`Fault::ResetConnections`] resets.
enum Through<'a> {
    Direct,
    Sluice(&'a sluice_testkit::sluice::SluiceProcess, &'a str),
}

/// How long a share consumer's `commitSync` of records acquired from
/// `VICTIM` takes after `fault`; also checks that every record is
/// acknowledged in the end.
fn commit_after(cluster: &Cluster, through: &Through<'_>, fault: Fault) -> u64 {
    let name = match through {
        Through::Direct => "direct",
        Through::Sluice(..) => "sluice",
    };
    let bootstrap = match through {
        Through::Direct => cluster.bootstrap("PLAINTEXT"),
        Through::Sluice(_, listen) => (*listen).to_owned(),
    };
    let topic = unique(&format!("share-move-{name}"));
    let leaders = spread_topic(cluster, &topic, &["min.insync.replicas=2"]);
    let victim = i32::try_from(VICTIM).expect("a broker id");
    let partition = leaders
        .iter()
        .find(|(_, l)| **l == victim)
        .map(|(p, _)| *p)
        .expect("spread_topic puts a leader on every broker");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let progress = dir.path().join("progress");
    let go = dir.path().join("go");
    let setup = cluster.bootstrap("PLAINTEXT");
    let group = unique("share-move");
    let args: Vec<String> = [
        "--mode",
        "ack-after-move",
        "--bootstrap",
        &bootstrap,
        "--setup-bootstrap",
        &setup,
        "--topic",
        &topic,
        "--group",
        &group,
        "--partition",
        &partition.to_string(),
        "--progress-file",
        &progress.display().to_string(),
        "--go-file",
        &go.display().to_string(),
        "--timeout-ms",
        "150000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let run = share_check(args, Duration::from_secs(200));
    wait::until(
        Duration::from_secs(90),
        &format!("the {name} share consumer to hold records of partition {partition}"),
        || match std::fs::read_to_string(&progress) {
            Ok(s) if s.trim() == "held" => Ok(()),
            _ if run.is_finished() => panic!("ShareCheck ({name}) ended before it held records"),
            _ => Err("not yet".to_owned()),
        },
    );
    let killed = match fault {
        Fault::KillLeader => {
            let killed = cluster.kill_node(VICTIM);
            wait::until(
                Duration::from_secs(60),
                &format!("a new leader for partition {partition} of {topic}"),
                || match cluster.partition_leaders(&topic).get(&partition) {
                    Some(l) if *l != victim => Ok(()),
                    other => Err(format!("leader {other:?}")),
                },
            );
            Some(killed)
        }
        Fault::ResetConnections => {
            let pid = match through {
                Through::Direct => java_pid(&group),
                Through::Sluice(sluice, _) => sluice.pid().expect("sluice runs"),
            };
            nodes::reset_connections(cluster.port(VICTIM, "PLAINTEXT"), pid)
                .unwrap_or_else(|e| panic!("reset the connections of {name} to the leader: {e}"));
            None
        }
    };
    std::fs::write(&go, "go").expect("the go file");
    let out = run.join().expect("the ShareCheck thread");
    if let Some(killed) = killed {
        killed.restart();
    }
    eprintln!("ShareCheck ({name}):\n{}", out.stdout.trim());
    assert!(
        out.code == Some(0) && out.stdout.contains("RESULT PASS"),
        "every record acknowledged in the end ({name}, exit {:?})\nstdout:\n{}\nstderr:\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("COMMIT_AFTER_MOVE_MS "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no COMMIT_AFTER_MOVE_MS line ({name}):\n{}", out.stdout))
}

/// The pid of the ShareCheck run of `group` (its command line names it).
fn java_pid(group: &str) -> u32 {
    let out = std::process::Command::new("pgrep")
        .args(["-f", &format!("ShareCheck.java.*{group}")])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ShareCheck process of group {group}"))
}

/// `commitSync` after `fault`, directly and through one Sluice node: both
/// must end well within the client's 30 s deadline (10 s), and Sluice
/// closes no client.
fn commit_ends_at_once_as_directly(fault: Fault, what: &str) {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    if let Fault::ResetConnections = fault {
        let supported = match std::env::var_os("SLUICE_TEST_NO_SOCKET_DESTROY") {
            Some(_) => Err("SLUICE_TEST_NO_SOCKET_DESTROY is set".to_owned()),
            None => nodes::socket_destroy_supported(),
        };
        if let Err(why) = supported {
            eprintln!("SKIPPED: ss -K cannot reset sockets here ({why})");
            return;
        }
    }
    let direct = commit_after(&cluster, &Through::Direct, fault);
    let (sluice, listen) = start(&cluster);
    let through = commit_after(&cluster, &Through::Sluice(&sluice, &listen), fault);
    eprintln!("commitSync after {what}: direct {direct} ms, through Sluice {through} ms");
    assert!(
        direct < 10_000,
        "directly, commitSync after {what} took {direct} ms: this test's premise (Kafka ends such acknowledgements at once) does not hold"
    );
    assert!(
        through < 10_000,
        "through Sluice, commitSync after {what} took {through} ms (directly {direct} ms): the client retried the acknowledgements until its deadline"
    );
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "no client connection closed on an error"
    );
}

/// Acknowledgements of records acquired from a leader that was then killed
/// end at once, through Sluice as directly: Sluice answers them
/// NOT_LEADER_OR_FOLLOWER, which Kafka's Java client does not retry (the
/// acquisition ended with the old leader). The records are delivered again
/// by the new leader and acknowledged.
#[test]
#[ignore = "kills a broker; run in the serial phase of scripts/test"]
fn acknowledgements_to_a_killed_leader_end_at_once_as_directly() {
    commit_ends_at_once_as_directly(Fault::KillLeader, "the leader was killed");
}

/// Acknowledgements of records acquired in a share session the broker then
/// lost (its connection was reset: the broker closes the session and
/// releases the records) end at once, through Sluice as directly: Sluice
/// answers them INVALID_RECORD_STATE, which the client does not retry, not
/// SHARE_SESSION_NOT_FOUND, which it would retry until its deadline, since
/// no ShareAcknowledge can open a session again.
#[test]
#[ignore = "resets connections to a broker; run in the serial phase of scripts/test"]
fn acknowledgements_after_a_lost_broker_session_end_at_once_as_directly() {
    commit_ends_at_once_as_directly(
        Fault::ResetConnections,
        "the leader's connections were reset",
    );
}
