//! A small fake cluster for the targets that need one: three real brokers
//! (ids 1–3) behind three Sluice nodes (ids 100–102), as a `ClusterView`
//! built from a real Metadata answer (for the rewrites) and as a
//! [`FakeRouting`] (for splits).
//!
//! The routing is a pure function of its input, so that every fuzz input
//! splits the same way every time: any topic name or id and partition, and
//! any group key, maps to one of the brokers by a hash, except one key in
//! seven, which has no leader or coordinator (to reach the unroutable paths).

use sluice_cluster::{
    Address, ClusterView, CoordinatorKeyType, Coordinators, PartitionLeaders, Routing,
    ShotoverNode, TopicRef,
};
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{BrokerId, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;

/// The real brokers: (id, host, port, rack).
pub(crate) const REAL_BROKERS: [(i32, &str, i32, &str); 3] = [
    (1, "kafka-1.internal", 19092, "rack-a"),
    (2, "kafka-2.internal", 19093, "rack-b"),
    (3, "kafka-3.internal", 19094, "rack-c"),
];

/// The Sluice nodes: (id, host, port, rack). Node 102 is down.
pub(crate) const SLUICE_NODES: [(i32, &str, i32, &str); 3] = [
    (100, "sluice-0.example", 9192, "rack-a"),
    (101, "sluice-1.example", 9192, "rack-b"),
    (102, "sluice-2.example", 9192, "rack-c"),
];

/// The topics of the fake cluster: name, id, partition count.
pub(crate) const TOPICS: [(&str, u128, i32); 2] = [("alpha", 0xa1, 3), ("beta", 0xb2, 2)];

/// A topic name.
pub(crate) fn topic_name(name: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(name))
}

/// The real cluster's Metadata answer (v12 shape): brokers, a controller,
/// `alpha` and `beta` with leaders spread over the brokers.
pub(crate) fn metadata_response() -> MetadataResponse {
    let brokers = REAL_BROKERS
        .iter()
        .map(|&(id, host, port, rack)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_static_str(host))
                .with_port(port)
                .with_rack(Some(StrBytes::from_static_str(rack)))
        })
        .collect();
    let topics = TOPICS
        .iter()
        .map(|&(name, id, partitions)| {
            MetadataResponseTopic::default()
                .with_name(Some(topic_name(name)))
                .with_topic_id(uuid::Uuid::from_u128(id))
                .with_partitions((0..partitions).map(partition).collect())
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_static_str("fuzz-cluster")))
        .with_controller_id(BrokerId(2))
        .with_topics(topics)
}

/// Partition `index`, led by broker `index % 3 + 1`, all three replicas in sync.
fn partition(index: i32) -> MetadataResponsePartition {
    let replicas: Vec<BrokerId> = (0..3).map(|k| BrokerId((index + k) % 3 + 1)).collect();
    MetadataResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(replicas[0])
        .with_leader_epoch(7)
        .with_replica_nodes(replicas.clone())
        .with_isr_nodes(replicas)
}

/// The view Sluice would hold after [`metadata_response`].
pub(crate) fn cluster_view() -> ClusterView {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &metadata_response());
    view
}

/// The Sluice nodes, as `SluiceNodes::snapshot` gives them.
pub(crate) fn sluice_nodes() -> Vec<ShotoverNode> {
    SLUICE_NODES
        .iter()
        .map(|&(id, host, port, rack)| ShotoverNode {
            broker_id: BrokerId(id),
            rack: StrBytes::from_static_str(rack),
            address_for_clients: Address::new(StrBytes::from_static_str(host), port),
            address_for_peers: Address::new(StrBytes::from_static_str(host), 9999),
            up: id != 102,
        })
        .collect()
}

/// Routing by hash over brokers 1–3 (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FakeRouting;

/// FNV-1a, so the routing is the same on every run and platform.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in *part {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash ^= 0xff;
    }
    hash
}

/// One broker of 1–3 for `hash`, or none for one hash in seven.
fn pick(hash: u64) -> Option<BrokerId> {
    let broker = i32::try_from(hash % 7).unwrap_or(0);
    (broker < 6).then_some(BrokerId(broker % 3 + 1))
}

impl PartitionLeaders for FakeRouting {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        let p = partition.to_be_bytes();
        match topic {
            TopicRef::Name(name) => pick(fnv(&[b"n", name.0.as_bytes(), &p])),
            TopicRef::Id(id) => pick(fnv(&[b"i", &id.0.to_be_bytes(), &p])),
        }
    }

    fn fetch_replica(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        // A rack-aware router sends some fetches to a follower.
        let leader = self.leader(topic, partition)?;
        Some(if partition % 2 == 0 {
            leader
        } else {
            BrokerId(leader.0 % 3 + 1)
        })
    }
}

impl Coordinators for FakeRouting {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        pick(fnv(&[&[key_type.as_i8().to_be_bytes()[0]], key.as_bytes()]))
    }
}

impl Routing for FakeRouting {
    fn brokers(&self) -> Vec<BrokerId> {
        vec![BrokerId(1), BrokerId(2), BrokerId(3)]
    }
}
