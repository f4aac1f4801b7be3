//! KafkaSinkCluster against the real 3-node cluster (`trio`, PLAINTEXT): Java
//! and librdkafka clients produce and consume on topics led by all three
//! brokers, consumer groups (classic and KIP-848) resume from committed
//! offsets, admin tools work, and clients only ever learn Sluice addresses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::clients::{
    self, KEYED, java_consume, java_produce, keyed_records, sorted_values,
};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted;
use sluice_testkit::listings;
use sluice_testkit::raw::RawClient;
use sluice_testkit::scram::CONFIG_COMMAND;
use sluice_testkit::{unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

#[test]
fn java_round_trip_over_partitions_led_by_three_brokers() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("java-cluster");
    fronted::create_spread_topic(&cluster, &topic, 6);

    let sent = keyed_records("java", 300);
    java_produce(&cluster, &listen, &topic, &sent, &KEYED);
    let offsets = fronted::offsets(&cluster, &listen, &topic, "-1");
    assert_eq!(offsets.len(), 6, "every partition listed: {offsets:?}");
    assert_eq!(offsets.values().sum::<u64>(), 300);
    assert!(
        offsets.values().all(|o| *o > 0),
        "keys spread records over every partition, so every broker took writes: {offsets:?}"
    );
    let got = java_consume(&cluster, &listen, &topic, sent.len(), &[]);
    assert_eq!(
        sorted_values(&got),
        sorted_values(&sent),
        "records read back through Sluice"
    );
    assert_eq!(
        sluice.metric("sluice_synthesized_error_responses_total", &[]),
        0.0,
        "no broker failed"
    );
    assert!(sluice.metric("sluice_requests_total", &["api=\"Produce\""]) >= 1.0);
}

#[test]
fn librdkafka_round_trip() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("rdkafka-cluster");
    fronted::create_spread_topic(&cluster, &topic, 6);
    clients::librdkafka_round_trip(&listen, &topic, 500, &[], "librdkafka produce/consume");
}

#[test]
fn clients_only_learn_sluice_addresses() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("hidden");
    fronted::create_spread_topic(&cluster, &topic, 6);
    let port: i32 = listen.rsplit_once(':').unwrap().1.parse().unwrap();
    let real_ports: Vec<i32> = (1..=3)
        .map(|id| i32::from(cluster.port(id, "PLAINTEXT")))
        .collect();
    let mut client = RawClient::connect(&listen);

    let ResponseKind::Metadata(m) = client.request(
        ApiKey::Metadata,
        12,
        RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
    ) else {
        panic!("not a Metadata answer");
    };
    let brokers: Vec<(i32, String, i32)> = m
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    assert_eq!(brokers, [(0, "127.0.0.1".to_owned(), port)], "only Sluice");
    assert_eq!(m.controller_id, BrokerId(0));
    let ours = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .expect("the topic is listed");
    assert_eq!(ours.partitions.len(), 6);
    for p in &ours.partitions {
        assert_eq!(p.leader_id, BrokerId(0), "leaders are Sluice nodes");
        assert!(p.replica_nodes.iter().all(|r| r.0 == 0));
    }
    let ResponseKind::FindCoordinator(f) = client.request(
        ApiKey::FindCoordinator,
        4,
        RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![StrBytes::from_string(unique("group"))]),
        ),
    ) else {
        panic!("not a FindCoordinator answer");
    };
    let c = &f.coordinators[0];
    assert_eq!(
        (c.error_code, c.host.as_str(), c.port),
        (0, "127.0.0.1", port)
    );
    let ResponseKind::DescribeCluster(d) = client.request(
        ApiKey::DescribeCluster,
        0,
        RequestKind::DescribeCluster(DescribeClusterRequest::default()),
    ) else {
        panic!("not a DescribeCluster answer");
    };
    let described: Vec<i32> = d.brokers.iter().map(|b| b.port).collect();
    assert_eq!(described, [port]);
    for real in real_ports {
        assert!(!brokers.iter().any(|b| b.2 == real));
        assert_ne!(c.port, real);
        assert!(!described.contains(&real));
    }
}

/// Consumes up to `count` records of `topic` in `group` (earliest when the
/// group has no offsets), committing them on exit.
fn consume_in_group(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    group: &str,
    count: usize,
    extra: &[&str],
) -> Vec<String> {
    let count = count.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--command-property",
        "auto.offset.reset=earliest",
        "--max-messages",
        &count,
        "--timeout-ms",
        "60000",
    ];
    args.extend_from_slice(extra);
    let out = clients::run(
        clients::java(cluster, clients::CONSOLE_CONSUMER, &args),
        None,
        Duration::from_secs(120),
        "java console consumer in a group",
    );
    out.assert_success("java console consumer in a group");
    out.stdout.lines().map(str::to_string).collect()
}

/// A group consumes everything, more is produced, and a new consumer of the
/// same group reads exactly the new records: the committed offsets were
/// stored with the group coordinator and read back through Sluice.
fn group_resumes(cluster: &Cluster, listen: &str, protocol: &[&str]) {
    let topic = unique("group-resume");
    fronted::create_spread_topic(cluster, &topic, 6);
    let group = unique("group");
    let first = keyed_records("first", 120);
    java_produce(cluster, listen, &topic, &first, &KEYED);
    let got = consume_in_group(cluster, listen, &topic, &group, first.len(), protocol);
    assert_eq!(sorted_values(&got), sorted_values(&first));

    let second = keyed_records("second", 60);
    java_produce(cluster, listen, &topic, &second, &KEYED);
    let got = consume_in_group(cluster, listen, &topic, &group, second.len(), protocol);
    assert_eq!(
        sorted_values(&got),
        sorted_values(&second),
        "the group resumed from its committed offsets"
    );

    let described = clients::tool_ok(
        cluster,
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        listen,
        &["--describe", "--group", &group],
    );
    let committed: u64 = described
        .lines()
        .filter(|l| l.contains(&topic))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum();
    assert_eq!(committed, 180, "{described}");
}

#[test]
fn classic_consumer_group_resumes_from_committed_offsets() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    group_resumes(&cluster, &listen, &[]);
}

#[test]
fn kip848_consumer_group_resumes_from_committed_offsets() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    group_resumes(
        &cluster,
        &listen,
        &["--command-property", "group.protocol=consumer"],
    );
}

#[test]
fn two_sluice_nodes_share_the_cluster() {
    let cluster = Cluster::get(TRIO);
    // Returned once each node shows both: a node that checked the other
    // before it listened shows it after its next health check.
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 2);
    // Leaders and coordinators are spread over both nodes: the client talks
    // to both, and each routes by its own view of the cluster.
    group_resumes(&cluster, &nodes[0], &[]);
}

#[test]
fn admin_operations_through_sluice() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("admin");
    let topics = |args: &[&str]| clients::tool_ok(&cluster, clients::TOPIC_COMMAND, &listen, args);
    topics(&[
        "--create",
        "--topic",
        &topic,
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    ]);
    let described = topics(&["--describe", "--topic", &topic]);
    assert!(described.contains("PartitionCount: 3"), "{described}");

    let configs = |args: &[&str]| clients::tool_ok(&cluster, CONFIG_COMMAND, &listen, args);
    let entity = ["--entity-type", "topics", "--entity-name", &topic];
    let mut alter = entity.to_vec();
    alter.extend_from_slice(&["--alter", "--add-config", "retention.ms=1234567"]);
    configs(&alter);
    let mut describe = entity.to_vec();
    describe.push("--describe");
    let shown = configs(&describe);
    assert!(shown.contains("retention.ms=1234567"), "{shown}");

    topics(&["--alter", "--topic", &topic, "--partitions", "5"]);
    let described = topics(&["--describe", "--topic", &topic]);
    assert!(described.contains("PartitionCount: 5"), "{described}");
    // The new partitions are routable at once.
    let sent = keyed_records("admin", 50);
    java_produce(&cluster, &listen, &topic, &sent, &KEYED);
    let offsets = fronted::offsets(&cluster, &listen, &topic, "-1");
    assert_eq!(offsets.len(), 5, "{offsets:?}");
    assert_eq!(offsets.values().sum::<u64>(), 50);

    topics(&["--delete", "--topic", &topic]);
    wait::until(Duration::from_secs(30), "the topic to be gone", || {
        let listed = topics(&["--list"]);
        if listed.lines().any(|l| l.trim() == topic) {
            Err(listed)
        } else {
            Ok(())
        }
    });
}

/// Which of `nodes` (by index) listed each of `wanted`, from `listed(node)`;
/// checks that each was listed by exactly one node, the one FindCoordinator
/// (`key_type`: 0 group, 1 transaction) names for it.
fn listed_once_by_coordinator(
    nodes: &[String],
    wanted: &[String],
    key_type: i8,
    listed: impl Fn(&str) -> Vec<String>,
) -> BTreeMap<String, Vec<i32>> {
    let mut by: BTreeMap<String, Vec<i32>> =
        wanted.iter().map(|w| (w.clone(), Vec::new())).collect();
    for (i, node) in nodes.iter().enumerate() {
        for entry in listed(node) {
            if let Some(on) = by.get_mut(&entry) {
                on.push(i as i32);
            }
        }
    }
    for (key, on) in &by {
        assert_eq!(on.len(), 1, "{key} listed by nodes {on:?}: {by:?}");
        let found = listings::coordinator_of(&nodes[0], key_type, key);
        assert_eq!(found, on[0], "{key} is found on the node that listed it");
    }
    by
}

/// A Java admin client lists groups and transactions by asking every node it
/// knows, i.e. every Sluice node, and each Sluice node asks every broker:
/// each node must list only the entries it is shown to coordinate, so that
/// every group and transaction comes back exactly once, from the node that
/// FindCoordinator names for it.
#[test]
fn three_sluice_nodes_list_each_group_and_transaction_once() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 3);
    let topic = unique("fan-out-list");
    fronted::create_spread_topic(&cluster, &topic, 3);
    let groups: Vec<String> = (0..9).map(|i| format!("{topic}-g{i}")).collect();
    listings::create_groups_directly(&cluster, &topic, &groups);
    let transactions: Vec<String> = (0..3).map(|i| format!("{topic}-t{i}")).collect();
    for id in &transactions {
        listings::commit_transaction_directly(&cluster, &topic, id);
    }

    listed_once_by_coordinator(&nodes, &groups, 0, listings::raw_groups);
    let listed = listings::tool_groups(&cluster, &nodes[0]);
    for group in &groups {
        let times = listed.iter().filter(|l| *l == group).count();
        assert_eq!(
            times, 1,
            "kafka-consumer-groups --list: {group}: {listed:?}"
        );
    }

    let by_node = listed_once_by_coordinator(&nodes, &transactions, 1, listings::raw_transactions);
    let listed = listings::tool_transactions(&cluster, &nodes[0]);
    for id in &transactions {
        let on: Vec<i32> = listed
            .iter()
            .filter(|(t, _)| t == id)
            .map(|(_, c)| *c)
            .collect();
        assert_eq!(on, by_node[id], "kafka-transactions list: {id}: {listed:?}");
    }
}

/// Every replica reports its partitions in DescribeLogDirs, and the admin
/// client asks every Sluice node: each partition must come back exactly once,
/// from the Sluice node shown as its leader. `known` is in every node's view
/// (each answered a Metadata request for it); `unseen` is in none until the
/// tool asks, so its partitions are placed without a known leader.
/// With as many Sluice nodes as brokers, each node stands for one whole
/// broker: every partition a broker leads is shown led by the same node, and
/// no two brokers share a node, so a consumer's fetch to a node goes to one
/// broker, as its fetch to a broker does directly (see `rewrite/choose.rs`).
#[test]
fn three_sluice_nodes_each_stand_for_one_broker() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 3);
    let topic = unique("whole-brokers");
    fronted::create_spread_topic(&cluster, &topic, 12);
    // Read twice around the shown leaders, so that a leader moving between
    // the reads is retried rather than taken for a wrong placement.
    let node_of = wait::until(
        Duration::from_secs(30),
        &format!("one node per broker for {topic}"),
        || {
            let real = cluster.partition_leaders(&topic);
            let shown = fronted::topic_replicas(&nodes[0], &topic)
                .ok_or_else(|| "node 0 does not know the topic yet".to_owned())?;
            if cluster.partition_leaders(&topic) != real {
                return Err(format!("leaders moved while reading: {real:?}"));
            }
            let mut node_of: BTreeMap<i32, BTreeSet<i32>> = BTreeMap::new();
            for (partition, leader) in &real {
                let (node, _) = shown
                    .get(partition)
                    .ok_or_else(|| format!("partition {partition} not shown: {shown:?}"))?;
                node_of.entry(*leader).or_default().insert(*node);
            }
            Ok(node_of)
        },
    );
    assert_eq!(node_of.len(), 3, "leaders on every broker: {node_of:?}");
    assert!(
        node_of.values().all(|n| n.len() == 1),
        "each broker's partitions on one node: {node_of:?}"
    );
    let distinct: BTreeSet<&BTreeSet<i32>> = node_of.values().collect();
    assert_eq!(
        distinct.len(),
        3,
        "no two brokers share a node: {node_of:?}"
    );
}

#[test]
fn three_sluice_nodes_describe_each_partition_log_once() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 3);
    let known = unique("fan-out-dirs");
    let unseen = unique("fan-out-unseen");
    fronted::create_spread_topic(&cluster, &known, 6);
    fronted::create_spread_topic(&cluster, &unseen, 3);
    let shown = fronted::topic_replicas(&nodes[0], &known).expect("node 0 knows the topic");
    for node in &nodes[1..] {
        let theirs = fronted::topic_replicas(node, &known).expect("the node knows the topic");
        assert_eq!(theirs, shown, "every node shows the same leaders");
    }

    let logs = listings::tool_log_dirs(&cluster, &nodes[0], &[&known, &unseen]);
    let mut by_partition: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for log in logs.iter().filter(|l| !l.is_future) {
        by_partition
            .entry(log.partition.clone())
            .or_default()
            .push(log.broker);
    }
    let expected: Vec<String> = (0..6)
        .map(|p| format!("{known}-{p}"))
        .chain((0..3).map(|p| format!("{unseen}-{p}")))
        .collect();
    let mut got: Vec<String> = by_partition.keys().cloned().collect();
    got.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(got, want, "every partition is described: {logs:?}");
    for (partition, on) in &by_partition {
        assert_eq!(
            on.len(),
            1,
            "{partition} described by nodes {on:?}: {logs:?}"
        );
    }
    for (p, (leader, _)) in &shown {
        let on = &by_partition[&format!("{known}-{p}")];
        assert_eq!(
            on,
            &vec![*leader],
            "{known}-{p} comes from its shown leader"
        );
    }
}

/// SIGTERM to a node serving clients (a producer and a consumer) drains and
/// exits 0, each time: a node with no other node to send its clients to
/// drains at once, and its source stops once the last connection closes.
#[test]
fn sigterm_to_a_node_with_clients_exits_zero() {
    use sluice_testkit::delivery::{self, ProducerRun};
    const WAIT: Duration = Duration::from_secs(60);
    let cluster = Cluster::get(TRIO);
    let topic = unique("sigterm");
    fronted::create_spread_topic(&cluster, &topic, 3);
    for round in 1..=3 {
        let (mut sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
        let mut producer = ProducerRun::idempotent(1_000_000, 100).start(&cluster, &listen, &topic);
        let mut consumer = delivery::start_consumer(&cluster, &listen, &topic, &unique("sigterm"));
        delivery::wait_assigned(&mut consumer, 3, WAIT);
        delivery::wait_acked(&mut producer, 50, WAIT);
        let status = sluice.terminate(WAIT);
        let log = sluice.log();
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: sluice exited {status}; log:\n{log}"
        );
        assert!(!log.contains("unexpectedly"), "round {round}; log:\n{log}");
    }
}
