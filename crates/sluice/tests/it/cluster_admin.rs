//! Admin operations through KafkaSinkCluster against the real 3-node cluster
//! (`trio`, PLAINTEXT: the principal is ANONYMOUS, a super user), with Kafka's
//! own Java tools pointed at one Sluice node.
//!
//! What works as against Kafka: topics and topic configs, ACLs, partition
//! increases, log dirs (DescribeLogDirs sent to every broker and merged),
//! delete records, consumer groups (describe, reset, delete offsets, delete),
//! listing and cancelling partition reassignments. Broker configs and
//! loggers are in `cluster_broker_configs.rs`.
//!
//! What topology hiding changes, pinned here so that a change is noticed:
//! - Topic descriptions show Sluice node ids: with one Sluice node every
//!   leader is 0 and the replica list is `[0]` (replication factor 1).
//! - Tools that check broker ids against DescribeCluster refuse real ids:
//!   `kafka-reassign-partitions --execute` with a JSON of real broker ids
//!   fails client-side with "Unknown broker id". A reassignment started with
//!   real ids elsewhere is listed through Sluice (with those real ids: ids are
//!   not addresses) and can be cancelled through it, but `--verify` through
//!   Sluice compares real ids with Sluice ids and never reports it complete.
//! - Topic descriptions go through DescribeTopicPartitions (Java's Admin
//!   uses it when offered), rewritten like Metadata: only Sluice ids.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_codec::{ApiKey, ResponseKind};
use sluice_testkit::clients::{self, KEYED, java_produce, keyed_records, tool_at, tool_ok};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted::{self, REASSIGN_PARTITIONS, create_spread_topic, temp_file};
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests;
use sluice_testkit::scram::CONFIG_COMMAND;
use sluice_testkit::{unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

const ACLS: &str = "org.apache.kafka.tools.AclCommand";
const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

#[test]
fn topics_configs_and_partitions() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin-topic");
    let topics = |args: &[&str]| tool_ok(&cluster, clients::TOPIC_COMMAND, &listen, args);
    let create = [
        "--create",
        "--topic",
        &topic,
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "cleanup.policy=compact",
    ];
    topics(&create);
    let described = topics(&["--describe", "--topic", &topic]);
    assert!(described.contains("PartitionCount: 3"), "{described}");
    assert!(
        described.contains("ReplicationFactor: 1"),
        "one Sluice node stands for all three replicas\n{described}"
    );
    assert_eq!(
        described.matches("Leader: 0\tReplicas: 0\tIsr: 0").count(),
        3,
        "{described}"
    );
    assert_eq!(
        cluster.partition_leaders(&topic).len(),
        3,
        "the real topic exists"
    );

    let entity = ["--entity-type", "topics", "--entity-name", topic.as_str()];
    let configs = |extra: &[&str]| {
        let mut args = entity.to_vec();
        args.extend_from_slice(extra);
        tool_ok(&cluster, CONFIG_COMMAND, &listen, &args)
    };
    configs(&[
        "--alter",
        "--add-config",
        "retention.ms=1234567,max.message.bytes=65536",
    ]);
    configs(&["--alter", "--delete-config", "cleanup.policy"]);
    let shown = configs(&["--describe"]);
    assert!(shown.contains("retention.ms=1234567"), "{shown}");
    assert!(shown.contains("max.message.bytes=65536"), "{shown}");
    assert!(!shown.contains("cleanup.policy"), "{shown}");

    let defaults = tool_ok(
        &cluster,
        CONFIG_COMMAND,
        &listen,
        &["--entity-type", "brokers", "--entity-default", "--describe"],
    );
    assert!(
        defaults.contains("Default configs for brokers"),
        "{defaults}"
    );
    // (A broker named by its Sluice id: `cluster_broker_configs.rs`.)

    topics(&["--alter", "--topic", &topic, "--partitions", "6"]);
    // Sluice forgets the topic after CreatePartitions, and the broker the next
    // Metadata reaches may apply the new partitions a moment later (Kafka
    // promises no more across brokers).
    wait::until(
        Duration::from_secs(30),
        "6 partitions listed",
        || match fronted::topic_replicas(&listen, &topic) {
            Some(partitions) if partitions.len() == 6 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // (cluster_sink.rs produces to new partitions at once.)

    topics(&["--delete", "--topic", &topic]);
    wait::until(
        Duration::from_secs(30),
        "the topic to be gone",
        || match fronted::topic_replicas(&listen, &topic) {
            None => Ok(()),
            Some(partitions) => Err(format!("still listed: {partitions:?}")),
        },
    );
}

#[test]
fn acls_create_describe_delete() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin-acl");
    let principal = format!("User:{}", unique("alice"));
    let acl = [
        "--allow-principal",
        principal.as_str(),
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        topic.as_str(),
    ];
    let mut add = vec!["--add"];
    add.extend_from_slice(&acl);
    tool_ok(&cluster, ACLS, &listen, &add);
    let list = || tool_ok(&cluster, ACLS, &listen, &["--list", "--topic", &topic]);
    // Every broker applies ACLs from the metadata log on its own time, and
    // Sluice may ask any of them.
    wait::until(Duration::from_secs(30), "both ACLs to be listed", || {
        let listed = list();
        let ours = listed.lines().filter(|l| l.contains(&principal)).count();
        if ours == 2 && listed.contains("operation=READ") && listed.contains("operation=DESCRIBE") {
            Ok(())
        } else {
            Err(listed)
        }
    });
    let mut remove = vec!["--remove", "--force"];
    remove.extend_from_slice(&acl);
    tool_ok(&cluster, ACLS, &listen, &remove);
    wait::until(Duration::from_secs(30), "the ACLs to be gone", || {
        let listed = list();
        if listed.contains(&principal) {
            Err(listed)
        } else {
            Ok(())
        }
    });
}

#[test]
fn log_dirs_and_delete_records() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin-records");
    create_spread_topic(&cluster, &topic, 6);
    java_produce(
        &cluster,
        &listen,
        &topic,
        &keyed_records("rec", 300),
        &KEYED,
    );
    let ends = fronted::offsets(&cluster, &listen, &topic, "-1");
    assert_eq!(ends.values().sum::<u64>(), 300, "{ends:?}");

    // DescribeLogDirs goes to every broker; the client, which only knows
    // Sluice node 0, sees one broker holding every partition once (each is
    // kept from its real leader's answer only, see rewrite/fan_out.rs).
    let dirs = tool_ok(
        &cluster,
        "org.apache.kafka.tools.LogDirsCommand",
        &listen,
        &["--describe", "--topic-list", &topic],
    );
    let json = dirs
        .lines()
        .find(|l| l.starts_with("{\"brokers\""))
        .unwrap_or_else(|| panic!("no log dirs JSON\n{dirs}"));
    assert_eq!(json.matches("\"broker\":").count(), 1, "{json}");
    assert!(json.contains("\"broker\":0"), "{json}");
    for p in 0..6 {
        let replica = format!("\"partition\":\"{topic}-{p}\"");
        assert_eq!(json.matches(&replica).count(), 1, "{p} once: {json}");
    }
    assert!(
        json.matches("\"logDir\":").count() >= 3,
        "a log dir per real broker: {json}"
    );

    // Delete the first half of every partition.
    let cut: Vec<(u32, u64)> = ends.iter().map(|(p, end)| (*p, end / 2)).collect();
    let partitions: Vec<String> = cut
        .iter()
        .map(|(p, o)| format!("{{\"topic\":\"{topic}\",\"partition\":{p},\"offset\":{o}}}"))
        .collect();
    let file = temp_file(&format!(
        "{{\"version\":1,\"partitions\":[{}]}}",
        partitions.join(",")
    ));
    let deleted = tool_ok(
        &cluster,
        "org.apache.kafka.tools.DeleteRecordsCommand",
        &listen,
        &["--offset-json-file", &file.path().display().to_string()],
    );
    for (p, o) in &cut {
        let line = format!("partition: {topic}-{p}\tlow_watermark: {o}");
        assert!(deleted.contains(&line), "{line}\n{deleted}");
    }
    let starts = fronted::offsets(&cluster, &listen, &topic, "-2");
    assert_eq!(
        starts.into_iter().collect::<Vec<_>>(),
        cut,
        "low watermarks moved"
    );
}

/// `(partition, current offset)` rows of `topic` in a group description.
fn committed(described: &str, topic: &str) -> Vec<(u32, u64)> {
    let mut rows: Vec<(u32, u64)> = described
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.get(1) == Some(&topic)).then_some(())?;
            Some((cols.get(2)?.parse().ok()?, cols.get(3)?.parse().ok()?))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn consumer_groups_describe_reset_and_delete() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin-group");
    let group = unique("admin-group");
    create_spread_topic(&cluster, &topic, 6);
    java_produce(
        &cluster,
        &listen,
        &topic,
        &keyed_records("grp", 120),
        &KEYED,
    );
    let out = clients::run(
        clients::java(
            &cluster,
            clients::CONSOLE_CONSUMER,
            &[
                "--bootstrap-server",
                &listen,
                "--topic",
                &topic,
                "--group",
                &group,
                "--command-property",
                "auto.offset.reset=earliest",
                "--max-messages",
                "120",
                "--timeout-ms",
                "60000",
            ],
        ),
        None,
        Duration::from_secs(120),
        "java console consumer in a group",
    );
    out.assert_success("java console consumer in a group");

    let groups = |args: &[&str]| tool_ok(&cluster, GROUPS, &listen, args);
    let describe = || groups(&["--describe", "--group", &group]);
    let offsets = committed(&describe(), &topic);
    assert_eq!(offsets.len(), 6, "{offsets:?}");
    assert_eq!(
        offsets.iter().map(|(_, o)| o).sum::<u64>(),
        120,
        "the group committed every record it read"
    );

    let reset = groups(&[
        "--reset-offsets",
        "--group",
        &group,
        "--topic",
        &topic,
        "--to-earliest",
        "--execute",
    ]);
    assert!(reset.contains(&group), "{reset}");
    let zeros: Vec<(u32, u64)> = (0..6).map(|p| (p, 0)).collect();
    assert_eq!(committed(&describe(), &topic), zeros, "reset to earliest");

    let deleted = groups(&[
        "--delete-offsets",
        "--group",
        &group,
        "--topic",
        &format!("{topic}:0"),
    ]);
    assert!(deleted.contains("Successful"), "{deleted}");
    let left: Vec<u32> = committed(&describe(), &topic)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(left, [1, 2, 3, 4, 5], "partition 0's offset was deleted");

    let gone = groups(&["--delete", "--group", &group]);
    assert!(gone.contains("was successful"), "{gone}");
    assert!(
        !groups(&["--list"]).lines().any(|l| l.trim() == group),
        "the group is gone"
    );
}

#[test]
fn partition_reassignments_take_real_broker_ids() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let direct = cluster.bootstrap("PLAINTEXT");
    let topic = unique("admin-reassign");
    // One partition on brokers 1 and 2, with 2 MB to copy to a new replica.
    tool_ok(
        &cluster,
        clients::TOPIC_COMMAND,
        &direct,
        &["--create", "--topic", &topic, "--replica-assignment", "1:2"],
    );
    let perf = cluster.tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            &topic,
            "--num-records",
            "2000",
            "--record-size",
            "1000",
            "--throughput",
            "-1",
            "--command-property",
            &format!("bootstrap.servers={listen}"),
            "acks=all",
        ],
        Duration::from_secs(120),
    );
    perf.assert_success("ProducerPerformance through Sluice");
    let reassign =
        |bootstrap: &str, args: &[&str]| tool_at(&cluster, REASSIGN_PARTITIONS, bootstrap, args);
    let listed = || {
        let out = reassign(&listen, &["--list"]);
        out.assert_success("list reassignments through Sluice");
        out.stdout
    };

    let file = temp_file(&fronted::reassignment_json(&topic, &[vec![1, 2, 3]]));
    let json = file.path().display().to_string();
    let refused = reassign(&listen, &["--execute", "--reassignment-json-file", &json]);
    assert_ne!(refused.code, Some(0));
    assert!(
        refused.stdout.contains("Unknown broker id")
            || refused.stderr.contains("Unknown broker id"),
        "the tool checks real ids against the Sluice nodes it sees\n{refused:?}"
    );

    // Started with real ids, throttled to 1 B/s so that it stays in progress.
    let started = reassign(
        &direct,
        &[
            "--execute",
            "--reassignment-json-file",
            &json,
            "--throttle",
            "1",
        ],
    );
    started.assert_success("reassignment started directly");
    let ongoing = listed();
    assert!(
        ongoing.contains(&format!("{topic}-0: replicas: 1,2,3. adding: 3.")),
        "{ongoing}"
    );
    let cancelled = reassign(
        &listen,
        &[
            "--cancel",
            "--preserve-throttles",
            "--reassignment-json-file",
            &json,
        ],
    );
    cancelled.assert_success("cancel through Sluice");
    assert!(
        cancelled.stdout.contains(&format!(
            "Successfully cancelled partition reassignment for: {topic}-0"
        )),
        "{cancelled:?}"
    );
    assert!(
        cancelled
            .stdout
            .contains("None of the specified partition moves are active"),
        "the tool's own listing after the cancel\n{cancelled:?}"
    );
    // `--verify` compares the target (real ids) with the replicas it is shown
    // (Sluice ids), so through Sluice it never sees a finished move; then it
    // clears throttles on "brokers" 0..3 by id, and the client, which knows
    // only node 0, cannot reach the others (given 5 s here instead of 60 s).
    let short = temp_file("default.api.timeout.ms=5000\nrequest.timeout.ms=5000\n");
    let short = short.path().display().to_string();
    let misread = reassign(
        &listen,
        &[
            "--verify",
            "--reassignment-json-file",
            &json,
            "--command-config",
            &short,
        ],
    );
    assert_ne!(misread.code, Some(0), "{misread:?}");
    assert!(
        misread.stdout.contains(&format!(
            "partition {topic}-0, but replica set is 0 rather than 1,2,3"
        )),
        "{misread:?}"
    );
    // The direct `--verify` also clears the throttles `--execute` set.
    let verified = reassign(&direct, &["--verify", "--reassignment-json-file", &json]);
    assert!(
        verified.stdout.contains("Clearing topic-level throttles"),
        "{verified:?}"
    );
    let first = direct.split(',').next().unwrap();
    wait::until(
        Duration::from_secs(30),
        "the replicas to be 1,2 again",
        || match fronted::topic_replicas(first, &topic) {
            Some(p) if p.get(&0).is_some_and(|(_, r)| r == &[1, 2]) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}

#[test]
fn a_reassignment_executes_through_sluice() {
    use sluice_codec::RequestKind;
    use sluice_codec::kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use sluice_codec::kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, BrokerId, TopicName,
    };
    use sluice_codec::kafka_protocol::protocol::StrBytes;

    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let direct = cluster.bootstrap("PLAINTEXT");
    let first = direct.split(',').next().unwrap();
    let topic = unique("admin-move");
    tool_ok(
        &cluster,
        clients::TOPIC_COMMAND,
        &direct,
        &["--create", "--topic", &topic, "--replica-assignment", "1:2"],
    );
    // Kafka's Admin API takes the target replicas as real broker ids, which
    // an operator knows; the tool refuses them client-side (see
    // `partition_reassignments_take_real_broker_ids`), the API does not.
    let move_to_2_3 = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(vec![
                    ReassignablePartition::default()
                        .with_partition_index(0)
                        .with_replicas(Some(vec![BrokerId(2), BrokerId(3)])),
                ]),
        ]);
    let mut client = RawClient::connect(&listen);
    let answer = client.request(
        ApiKey::AlterPartitionReassignments,
        0,
        RequestKind::AlterPartitionReassignments(move_to_2_3),
    );
    let ResponseKind::AlterPartitionReassignments(answer) = answer else {
        panic!("not an AlterPartitionReassignments answer: {answer:?}");
    };
    assert_eq!(answer.error_code, 0, "{answer:?}");
    let codes: Vec<i16> = answer
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes, vec![0], "{answer:?}");
    wait::until(
        Duration::from_secs(60),
        "the reassignment to brokers 2,3 to complete",
        || match fronted::topic_replicas(first, &topic) {
            Some(p) if p.get(&0).is_some_and(|(_, r)| r == &[2, 3]) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let listed = tool_at(&cluster, REASSIGN_PARTITIONS, &listen, &["--list"]);
    listed.assert_success("list reassignments through Sluice");
    assert!(
        !listed.stdout.contains(&topic),
        "the move is finished\n{listed:?}"
    );
    let shown = fronted::topic_replicas(&listen, &topic).expect("topic through Sluice");
    assert_eq!(
        shown
            .get(&0)
            .map(|(leader, replicas)| (*leader, replicas.clone())),
        Some((0, vec![0])),
        "through Sluice the partition is on the one Sluice node"
    );
}

#[test]
fn describe_topics_shows_only_sluice_ids() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin-dtp");
    create_spread_topic(&cluster, &topic, 6);

    // Java's Admin describes topics with DescribeTopicPartitions when the
    // node offers it (the `Elr:` columns come from its answer).
    let described = tool_ok(
        &cluster,
        clients::TOPIC_COMMAND,
        &listen,
        &["--describe", "--topic", &topic],
    );
    let partitions: Vec<&str> = described
        .lines()
        .filter(|l| l.contains("Partition: "))
        .collect();
    assert_eq!(partitions.len(), 6, "{described}");
    for line in &partitions {
        assert!(
            line.contains("Leader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: "),
            "only Sluice node 0, no real id (1, 2, 3)\n{described}"
        );
    }

    // The raw answer: every id it holds is node 0's.
    let mut client = RawClient::connect(&listen);
    let answer = client.request(
        ApiKey::DescribeTopicPartitions,
        requests::DESCRIBE_TOPIC_PARTITIONS_VERSION,
        requests::describe_topic_partitions(&[&topic]),
    );
    let ResponseKind::DescribeTopicPartitions(answer) = answer else {
        panic!("not a DescribeTopicPartitions answer: {answer:?}");
    };
    let [found] = answer.topics.as_slice() else {
        panic!("one topic expected: {answer:?}");
    };
    assert_eq!(found.error_code, 0, "{found:?}");
    assert_eq!(
        found.name.as_ref().map(|n| n.as_str()),
        Some(topic.as_str())
    );
    assert_eq!(found.partitions.len(), 6, "{found:?}");
    for p in &found.partitions {
        let ids: Vec<i32> = std::iter::once(p.leader_id)
            .chain(p.replica_nodes.iter().copied())
            .chain(p.isr_nodes.iter().copied())
            .chain(p.offline_replicas.iter().copied())
            .chain(p.eligible_leader_replicas.iter().flatten().copied())
            .chain(p.last_known_elr.iter().flatten().copied())
            .map(|id| id.0)
            .collect();
        assert!(ids.iter().all(|id| *id == 0), "{p:?}");
        assert_eq!(p.replica_nodes.len(), 1, "one node stands for RF 3: {p:?}");
    }
    // Real leaders are on all three brokers behind it.
    let real: std::collections::BTreeSet<i32> =
        cluster.partition_leaders(&topic).into_values().collect();
    assert_eq!(real.len(), 3, "{real:?}");
}
