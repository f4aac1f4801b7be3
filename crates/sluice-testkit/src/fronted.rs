//! Sluice nodes running KafkaSinkCluster in front of a test cluster, and what
//! the tests ask of the real cluster behind them.
//!
//! Cluster-sink tests need the same pieces over and over: a topology for node
//! `i` of `n` Sluice nodes in front of a cluster's PLAINTEXT listeners (built
//! on [`sink_topology`], which [`crate::scram`] builds on too), Sluice nodes
//! started and waited for until each shows the others, topics whose
//! partition leaders sit on every broker, the broker list a Sluice node
//! shows, and partition offsets. (The real leaders of a topic, which clients
//! of Sluice never see, come from
//! [`Cluster::partition_leaders`](crate::cluster::Cluster::partition_leaders).)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::MetadataRequest;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::cluster::Cluster;
use crate::raw::RawClient;
use crate::sluice::SluiceProcess;
use crate::{free_port, wait};

/// The KafkaSinkCluster topology of Sluice node `local` of `nodes` (their
/// listen addresses, broker ids 0..n), in front of `cluster`'s PLAINTEXT
/// listeners, checking its peers every `peer_check_ms`.
pub fn topology(cluster: &Cluster, nodes: &[String], local: usize, peer_check_ms: u64) -> String {
    let racks = vec!["rack0"; nodes.len()];
    topology_in_racks(cluster, nodes, &racks, local, peer_check_ms)
}

/// Like [`topology`], with node `i` in `racks[i]` (the brokers of the test
/// clusters sit in racks `az-1`, `az-2`, ...; `rack0` matches none).
pub(crate) fn topology_in_racks(
    cluster: &Cluster,
    nodes: &[String],
    racks: &[&str],
    local: usize,
    peer_check_ms: u64,
) -> String {
    let contact_points = contact_points(cluster, "PLAINTEXT");
    let peer_check = format!("            check_shotover_peers_delay_ms: {peer_check_ms}\n");
    sink_topology(nodes, racks, local, &contact_points, 60, &peer_check)
}

/// The topology of Sluice node `local` of `nodes` (their listen addresses;
/// broker ids 0..n, node `i` in `racks[i]`): one source on its address with
/// a KafkaSinkCluster in front of `contact_points` (as [`contact_points`]
/// lists them) that waits `read_timeout_secs` for a broker's answer, and
/// the further KafkaSinkCluster `settings` lines (indented, or empty).
pub fn sink_topology(
    nodes: &[String],
    racks: &[&str],
    local: usize,
    contact_points: &str,
    read_timeout_secs: u64,
    settings: &str,
) -> String {
    assert_eq!(nodes.len(), racks.len(), "one rack per node");
    let shotover_nodes: String = nodes
        .iter()
        .zip(racks)
        .enumerate()
        .map(|(id, (addr, rack))| {
            format!(
                "              - address_for_clients: \"{addr}\"\n                address_for_peers: \"{addr}\"\n                rack: \"{rack}\"\n                broker_id: {id}\n"
            )
        })
        .collect();
    format!(
        r#"sources:
  - Kafka:
      name: "kafka"
      listen_addr: "{listen}"
      chain:
        - KafkaSinkCluster:
            name: "kafka-sink-cluster"
            shotover_nodes:
{shotover_nodes}            local_shotover_broker_id: {local}
            first_contact_points: [{contact_points}]
            connect_timeout_ms: 3000
            read_timeout: {read_timeout_secs}
{settings}"#,
        listen = nodes[local],
    )
}

/// Every node's `listener` address (`PLAINTEXT`, `SASL_PLAINTEXT`, `SSL`),
/// quoted and separated by commas, for a list in a topology.
pub fn contact_points(cluster: &Cluster, listener: &str) -> String {
    cluster
        .bootstrap(listener)
        .split(',')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `n` free listen addresses for Sluice nodes.
pub fn listen_addrs(n: usize) -> Vec<String> {
    (0..n)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect()
}

/// One Sluice node in front of `cluster`; returns it and its address.
pub fn start_one(binary: &Path, cluster: &Cluster) -> (SluiceProcess, String) {
    start_one_in_rack(binary, cluster, "rack0")
}

/// Like [`start_one`], the node in `rack`.
pub fn start_one_in_rack(binary: &Path, cluster: &Cluster, rack: &str) -> (SluiceProcess, String) {
    let nodes = listen_addrs(1);
    let topology = topology_in_racks(cluster, &nodes, &[rack], 0, 1000);
    let sluice = SluiceProcess::start(binary, &topology, &[&nodes[0]]);
    (sluice, nodes[0].clone())
}

/// `host:port` of every broker a Metadata request to `addr` lists, in order.
pub(crate) fn listed_brokers(addr: &str) -> Vec<String> {
    let m = metadata(
        addr,
        MetadataRequest::default().with_topics(Some(Vec::new())),
    );
    m.brokers
        .iter()
        .map(|b| format!("{}:{}", b.host.as_str(), b.port))
        .collect()
}

/// `topic`'s partitions as a Metadata request to `addr` shows them:
/// partition -> (leader, replicas); `None` when `addr` does not know the topic.
pub fn topic_replicas(addr: &str, topic: &str) -> Option<BTreeMap<i32, (i32, Vec<i32>)>> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(
                sluice_codec::kafka_protocol::protocol::StrBytes::from_string(topic.to_owned())
                    .into(),
            )),
    ]));
    let m = metadata(addr, request);
    let t = m.topics.first().filter(|t| t.error_code == 0)?;
    Some(
        t.partitions
            .iter()
            .map(|p| {
                let replicas = p.replica_nodes.iter().map(|r| r.0).collect();
                (p.partition_index, (p.leader_id.0, replicas))
            })
            .collect(),
    )
}

/// A Metadata v12 answer of `addr`.
pub(crate) fn metadata(
    addr: &str,
    request: MetadataRequest,
) -> sluice_codec::kafka_protocol::messages::MetadataResponse {
    let mut client = RawClient::connect(addr);
    match client.request(ApiKey::Metadata, 12, RequestKind::Metadata(request)) {
        ResponseKind::Metadata(m) => m,
        other => panic!("not a Metadata answer from {addr}: {other:?}"),
    }
}

/// Creates `topic` directly on `cluster` with `partitions` (at least one per
/// broker) and RF 3, and waits until its leaders are on every broker.
pub fn create_spread_topic(cluster: &Cluster, topic: &str, partitions: u32) {
    cluster.create_topic(topic, partitions, 3);
    let brokers = cluster.node_count();
    wait::until(
        Duration::from_secs(30),
        &format!("leaders of {topic} on {brokers} brokers"),
        || {
            let leaders = cluster.partition_leaders(topic);
            let distinct: BTreeSet<i32> = leaders.values().copied().collect();
            if leaders.len() == partitions as usize && distinct.len() == brokers {
                Ok(())
            } else {
                Err(format!("{leaders:?}"))
            }
        },
    );
}

/// Partition -> offset of `topic` through `bootstrap` with GetOffsetShell;
/// `time` is `-1` (latest) or `-2` (earliest).
pub fn offsets(cluster: &Cluster, bootstrap: &str, topic: &str, time: &str) -> BTreeMap<u32, u64> {
    let out = cluster.tool(
        "org.apache.kafka.tools.GetOffsetShell",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--time",
            time,
        ],
        Duration::from_secs(60),
    );
    out.assert_success("GetOffsetShell");
    out.stdout
        .lines()
        .filter_map(|l| {
            let mut parts = l.rsplitn(3, ':');
            let offset = parts.next()?.trim().parse().ok()?;
            let partition = parts.next()?.trim().parse().ok()?;
            Some((partition, offset))
        })
        .collect()
}

/// A file holding `contents` (a tool's JSON input or properties), removed
/// when dropped.
pub fn temp_file(contents: &str) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut file = tempfile::Builder::new()
        .prefix("sluice-it-")
        .tempfile()
        .expect("temp file");
    file.write_all(contents.as_bytes())
        .expect("write temp file");
    file.flush().expect("flush temp file");
    file
}

/// Partition reassignment JSON: partition `i` of `topic` gets `replicas[i]`
/// (real broker ids).
pub fn reassignment_json(topic: &str, replicas: &[Vec<i32>]) -> String {
    let partitions: Vec<String> = replicas
        .iter()
        .enumerate()
        .map(|(p, r)| {
            let ids: Vec<String> = r.iter().map(i32::to_string).collect();
            format!(
                "{{\"topic\":\"{topic}\",\"partition\":{p},\"replicas\":[{}]}}",
                ids.join(",")
            )
        })
        .collect();
    format!(
        "{{\"version\":1,\"partitions\":[{}]}}",
        partitions.join(",")
    )
}

/// Kafka's partition reassignment tool class.
pub const REASSIGN_PARTITIONS: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";

/// Reassigns `topic`'s partitions to `replicas` directly on `cluster` (real
/// broker ids, which clients of Sluice never see) and waits until the
/// reassignment is complete.
pub(crate) fn reassign_directly(cluster: &Cluster, topic: &str, replicas: &[Vec<i32>]) {
    let file = temp_file(&reassignment_json(topic, replicas));
    let path = file.path().display().to_string();
    let direct = cluster.bootstrap("PLAINTEXT");
    let run = |action: &str| {
        cluster.tool(
            REASSIGN_PARTITIONS,
            &[
                "--bootstrap-server",
                &direct,
                action,
                "--reassignment-json-file",
                &path,
            ],
            Duration::from_secs(60),
        )
    };
    run("--execute").assert_success("reassign partitions");
    wait::until(
        Duration::from_secs(60),
        &format!("the reassignment of {topic} to complete"),
        || {
            let out = run("--verify");
            let done = out.stdout.matches("is completed").count();
            if out.code == Some(0) && done == replicas.len() {
                Ok(())
            } else {
                Err(format!("{}{}", out.stdout, out.stderr))
            }
        },
    );
}

/// Replica lists for `partitions` partitions on the three brokers of
/// `trio`, rotated `by` places: partition `p` gets `[p+by, p+by+1, p+by+2]`
/// (mod 3, as broker ids 1..=3), so that its preferred leader is broker
/// `(p + by) % 3 + 1`.
pub fn rotated_replicas(partitions: usize, by: usize) -> Vec<Vec<i32>> {
    (0..partitions)
        .map(|p| (0..3).map(|i| ((p + by + i) % 3 + 1) as i32).collect())
        .collect()
}

/// Partition -> first replica of `replicas`: the preferred leaders.
fn preferred(replicas: &[Vec<i32>]) -> BTreeMap<i32, i32> {
    replicas
        .iter()
        .enumerate()
        .map(|(p, r)| (p as i32, r[0]))
        .collect()
}

/// Creates `topic` directly on `cluster` with partition `i` on
/// `replicas[i]` (real broker ids), and waits until each is led by its
/// first replica.
pub fn create_topic_with_replicas(cluster: &Cluster, topic: &str, replicas: &[Vec<i32>]) {
    let assignment = replicas
        .iter()
        .map(|r| r.iter().map(i32::to_string).collect::<Vec<_>>().join(":"))
        .collect::<Vec<_>>()
        .join(",");
    crate::clients::tool_ok(
        cluster,
        crate::clients::TOPIC_COMMAND,
        &cluster.bootstrap("PLAINTEXT"),
        &[
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            &assignment,
        ],
    );
    let wanted = preferred(replicas);
    wait::until(
        Duration::from_secs(30),
        &format!("the leaders of {topic} to be {wanted:?}"),
        || {
            let leaders = cluster.partition_leaders(topic);
            if leaders == wanted {
                Ok(())
            } else {
                Err(format!("{leaders:?}"))
            }
        },
    );
}

/// Moves `topic`'s partitions to `replicas` and their leaders to each
/// list's first broker: a reassignment done directly (it takes real broker
/// ids), then preferred leader elections sent through Sluice at `listen`
/// until every partition is led by its first replica.
pub fn move_leaders(cluster: &Cluster, listen: &str, topic: &str, replicas: &[Vec<i32>]) {
    reassign_directly(cluster, topic, replicas);
    let wanted = preferred(replicas);
    let partitions = u32::try_from(replicas.len()).expect("partition count");
    wait::until(
        Duration::from_secs(60),
        &format!("the leaders of {topic} to move to {wanted:?}"),
        || {
            let out = elect_preferred(cluster, listen, topic, partitions);
            let leaders = cluster.partition_leaders(topic);
            if leaders == wanted {
                Ok(())
            } else {
                Err(format!(
                    "leaders {leaders:?}; election: {}{}",
                    out.stdout.trim(),
                    out.stderr.trim()
                ))
            }
        },
    );
}

/// A preferred leader election of partitions `0..partitions` of `topic`
/// through `bootstrap` (ElectLeaders names no broker: Sluice forwards it).
pub(crate) fn elect_preferred(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    partitions: u32,
) -> crate::clients::ClientOutput {
    let list: Vec<String> = (0..partitions)
        .map(|p| format!("{{\"topic\":\"{topic}\",\"partition\":{p}}}"))
        .collect();
    let file = temp_file(&format!("{{\"partitions\":[{}]}}", list.join(",")));
    let path = file.path().display().to_string();
    cluster.tool(
        crate::clients::LEADER_ELECTION_COMMAND,
        &[
            "--bootstrap-server",
            bootstrap,
            "--election-type",
            "PREFERRED",
            "--path-to-json-file",
            &path,
        ],
        Duration::from_secs(60),
    )
}

/// `n` Sluice nodes in front of `cluster` (broker ids 0..n, one process
/// each, peers checked every second), returned once every node shows all `n`
/// (a node that checked a peer before it listened shows it after its next
/// check); and their addresses.
pub fn start_nodes(
    binary: &Path,
    cluster: &Cluster,
    n: usize,
) -> (Vec<SluiceProcess>, Vec<String>) {
    start_nodes_in_racks(binary, cluster, &vec!["rack0"; n])
}

/// Like [`start_nodes`], node `i` in `racks[i]`.
pub fn start_nodes_in_racks(
    binary: &Path,
    cluster: &Cluster,
    racks: &[&str],
) -> (Vec<SluiceProcess>, Vec<String>) {
    start_nodes_checking(binary, cluster, racks, 1000)
}

/// Like [`start_nodes_in_racks`], each node checking its peers every
/// `peer_check_ms`.
pub fn start_nodes_checking(
    binary: &Path,
    cluster: &Cluster,
    racks: &[&str],
    peer_check_ms: u64,
) -> (Vec<SluiceProcess>, Vec<String>) {
    let n = racks.len();
    let nodes = listen_addrs(n);
    let processes = (0..n)
        .map(|i| {
            let topology = topology_in_racks(cluster, &nodes, racks, i, peer_check_ms);
            SluiceProcess::start(binary, &topology, &[&nodes[i]])
        })
        .collect();
    for node in &nodes {
        wait_listed(
            node,
            &nodes,
            &format!("Sluice node {node} to show all {n} nodes"),
        );
    }
    (processes, nodes)
}

/// Waits (up to 30 s, for `what`) until a Metadata request to `node` lists
/// exactly the Sluice nodes `expected`, in order.
pub fn wait_listed(node: &str, expected: &[String], what: &str) {
    wait::until(Duration::from_secs(30), what, || {
        let shown = listed_brokers(node);
        if shown == expected {
            Ok(())
        } else {
            Err(format!("{shown:?}"))
        }
    });
}
