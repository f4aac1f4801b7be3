//! DescribeTopicPartitions rewrite, on answers encoded as a broker sends them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use sluice_codec::kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use sluice_codec::kafka_protocol::messages::metadata_response::MetadataResponsePartition;
use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId, ResponseKind};

use super::{UP, assert_partition_ids, body, leaders, rewrite_metadata, rewritten, view};
use crate::topology::fixtures::{self, name};

fn ids(list: &[i32]) -> Vec<BrokerId> {
    list.iter().copied().map(BrokerId).collect()
}

/// A Metadata partition as DescribeTopicPartitions describes it, with `elr`
/// and `last_known` ELR of the given lengths (from the replicas outside the
/// ISR, as Kafka would).
fn described(
    p: &MetadataResponsePartition,
    elr: Option<usize>,
    last_known: Option<usize>,
) -> DescribeTopicPartitionsResponsePartition {
    let replicas = &p.replica_nodes;
    let tail = |n: usize| replicas[replicas.len() - n..].to_vec();
    DescribeTopicPartitionsResponsePartition::default()
        .with_error_code(p.error_code)
        .with_partition_index(p.partition_index)
        .with_leader_id(p.leader_id)
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(replicas.clone())
        .with_isr_nodes(p.isr_nodes.clone())
        .with_eligible_leader_replicas(elr.map(tail))
        .with_last_known_elr(last_known.map(tail))
        .with_offline_replicas(p.offline_replicas.clone())
}

/// A partition led by real broker `leader` at epoch 9 (replicas `leader, +1,
/// +2`, ISR the first two: [`fixtures::partition`]), [`described`].
fn partition(
    index: i32,
    leader: i32,
    elr: Option<usize>,
    last_known: Option<usize>,
) -> DescribeTopicPartitionsResponsePartition {
    described(&fixtures::partition(index, leader, 9), elr, last_known)
}

/// The fixture cluster's `orders` (12 partitions, real leaders 1, 2, 3 in
/// turn, each with one ELR and one last-known ELR) and `events` (partition 1
/// without a leader) at epoch 9, with a cursor to the next page.
fn answer() -> DescribeTopicPartitionsResponse {
    let metadata = fixtures::metadata_response(9);
    let topics = metadata.topics.iter().filter(|t| t.error_code == 0);
    let topics = topics.map(|t| {
        let elr = (t.name == Some(name("orders"))).then_some(1);
        let partitions = t.partitions.iter().map(|p| described(p, elr, elr));
        DescribeTopicPartitionsResponseTopic::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_topic_authorized_operations(0x0f)
            .with_partitions(partitions.collect())
    });
    DescribeTopicPartitionsResponse::default()
        .with_throttle_time_ms(3)
        .with_topics(topics.collect())
        .with_next_cursor(Some(
            Cursor::default()
                .with_topic_name(name("events"))
                .with_partition_index(3),
        ))
}

/// `resp` through [`rewritten`]: its bytes and its body.
fn rewrite_bytes(
    resp: DescribeTopicPartitionsResponse,
) -> (bytes::BytesMut, DescribeTopicPartitionsResponse) {
    let body = ResponseKind::DescribeTopicPartitions(resp);
    let (bytes, body) = rewritten(ApiKey::DescribeTopicPartitions, 0, body, None);
    (bytes, body!(DescribeTopicPartitions, body))
}

fn rewrite(resp: DescribeTopicPartitionsResponse) -> DescribeTopicPartitionsResponse {
    rewrite_bytes(resp).1
}

#[test]
fn no_real_broker_id_survives() {
    let d = rewrite(answer());
    for topic in &d.topics {
        for p in &topic.partitions {
            let ids = (p.isr_nodes.iter().chain(&p.offline_replicas))
                .chain(p.eligible_leader_replicas.iter().flatten())
                .chain(p.last_known_elr.iter().flatten());
            let what = format!("partition {}", p.partition_index);
            assert_partition_ids(p.error_code, p.leader_id, &p.replica_nodes, ids, &what);
            assert_eq!(p.leader_epoch, 9, "epochs stay real");
            assert_eq!(p.isr_nodes, p.replica_nodes[..2], "isr: a prefix");
            assert_eq!(
                p.offline_replicas,
                p.replica_nodes[2..],
                "offline: a suffix"
            );
        }
    }
}

#[test]
fn leaders_stay_in_the_real_leaders_rack_and_match_metadata() {
    let d = rewrite(answer());
    let orders: BTreeMap<i32, i32> = d.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    for (partition, leader) in &orders {
        match partition % 3 {
            0 => assert!([100, 101].contains(leader), "rack-a → rack-a node"),
            1 => assert!([102, 103].contains(leader), "rack-b → rack-b node"),
            _ => assert!(UP.contains(leader), "rack-c has no up node: any up node"),
        }
    }
    // The same partitions as Metadata shows them (same real leaders).
    let nodes = fixtures::sluice_nodes().snapshot();
    let (_, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
    assert_eq!(orders, leaders(&m, "orders"));
    let metadata_replicas: Vec<_> = m.topics[0]
        .partitions
        .iter()
        .map(|p| p.replica_nodes.clone())
        .collect();
    let replicas: Vec<_> = d.topics[0]
        .partitions
        .iter()
        .map(|p| p.replica_nodes.clone())
        .collect();
    assert_eq!(replicas, metadata_replicas);
}

#[test]
fn eligible_leader_replicas_keep_their_lengths_outside_the_isr() {
    let d = rewrite(answer());
    for p in &d.topics[0].partitions {
        let elr = p.eligible_leader_replicas.as_ref().unwrap();
        let last_known = p.last_known_elr.as_ref().unwrap();
        assert_eq!((elr.len(), last_known.len()), (1, 1));
        assert!(!p.isr_nodes.contains(&elr[0]), "ELR outside the ISR");
        assert!(!p.isr_nodes.contains(&last_known[0]));
        assert!(p.replica_nodes.contains(&elr[0]), "ELR among the replicas");
    }
    // Null stays null.
    for p in &d.topics[1].partitions {
        assert_eq!(p.eligible_leader_replicas, None);
        assert_eq!(p.last_known_elr, None);
    }
    // Longer than what is left outside the ISR: wraps into it, never longer
    // than the replicas shown.
    let mut long = answer();
    long.topics.truncate(1);
    long.topics[0].partitions = vec![
        partition(0, 1, Some(3), Some(2)).with_isr_nodes(ids(&[1])),
        partition(1, 2, Some(2), Some(1)).with_replica_nodes(ids(&[2, 3, 1, 4, 5, 6, 7])),
    ];
    let d = rewrite(long);
    let p = &d.topics[0].partitions[0];
    let elr = p.eligible_leader_replicas.clone().unwrap();
    assert_eq!(elr.len(), 3);
    assert_eq!(elr[..2], p.replica_nodes[1..], "outside the ISR first");
    assert_eq!(p.last_known_elr.as_deref(), Some(&p.replica_nodes[1..]));
    let p = &d.topics[0].partitions[1];
    assert_eq!(p.replica_nodes.len(), UP.len(), "at most the up nodes");
    assert_eq!(p.eligible_leader_replicas.as_ref().unwrap().len(), 2);
}

#[test]
fn topics_errors_and_cursor_are_kept() {
    let real = answer();
    let d = rewrite(real.clone());
    assert_eq!(d.throttle_time_ms, 3);
    assert_eq!(
        d.next_cursor, real.next_cursor,
        "the cursor names no broker"
    );
    for (t, r) in d.topics.iter().zip(&real.topics) {
        assert_eq!(
            (&t.name, t.topic_id, t.error_code),
            (&r.name, r.topic_id, r.error_code)
        );
        assert_eq!(t.topic_authorized_operations, r.topic_authorized_operations);
        let codes: Vec<i16> = t.partitions.iter().map(|p| p.error_code).collect();
        let real_codes: Vec<i16> = r.partitions.iter().map(|p| p.error_code).collect();
        assert_eq!(codes, real_codes);
    }
    // Deterministic: the same answer, byte for byte.
    assert_eq!(rewrite_bytes(answer()).0, rewrite_bytes(answer()).0);
}
