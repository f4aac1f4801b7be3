//! Test fixtures: a small rack-aware cluster and a set of Sluice nodes, as
//! real `kafka-protocol` messages, and helpers that push a message through the
//! real wire path (encode, frame, parse) so tests see what a broker would send.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::BytesMut;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId, ResponseKind, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{FrameCodec, Response};

use super::{Address, ShotoverNode, SluiceNodes};

/// Real brokers: (id, host, port, rack).
pub const REAL_BROKERS: [(i32, &str, i32, &str); 3] = [
    (1, "kafka-1.internal.corp", 19092, "rack-a"),
    (2, "kafka-2.internal.corp", 19093, "rack-b"),
    (3, "kafka-3.internal.corp", 19094, "rack-c"),
];

/// The real controller.
pub const REAL_CONTROLLER: i32 = 2;

/// Topic id of `orders`, as text.
pub const ORDERS_ID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
/// Topic id of `events`, as text.
pub const EVENTS_ID: &str = "0b2f4a1c-9d7e-4c33-8f00-5a6b7c8d9e0f";

/// Sluice nodes: (id, host, port, rack). Node 105 is marked down by
/// [`sluice_nodes`]; rack-c has no other node, so rack-c falls back to all.
pub const SLUICE: [(i32, &str, i32, &str); 6] = [
    (100, "sluice-0.example.com", 9192, "rack-a"),
    (101, "sluice-1.example.com", 9192, "rack-a"),
    (102, "sluice-2.example.com", 9192, "rack-b"),
    (103, "sluice-3.example.com", 9192, "rack-b"),
    (104, "sluice-4.example.com", 9192, "rack-d"),
    (105, "sluice-5.example.com", 9192, "rack-c"),
];

/// The Sluice nodes, local 100, with 105 down.
pub fn sluice_nodes() -> SluiceNodes {
    let nodes = SLUICE
        .iter()
        .map(|&(id, host, port, rack)| ShotoverNode {
            broker_id: BrokerId(id),
            rack: StrBytes::from_static_str(rack),
            address_for_clients: Address::new(StrBytes::from_static_str(host), port),
            address_for_peers: Address::new(StrBytes::from_static_str(host), 9999),
            up: id != 105,
        })
        .collect();
    SluiceNodes::new(nodes, BrokerId(100)).unwrap()
}

/// A topic name.
pub fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

/// Partition `index` led by real broker `leader` at `epoch`: replicas
/// `leader, +1, +2` (broker ids 1..=3 in turn), the first two in sync, the
/// third offline.
pub fn partition(index: i32, leader: i32, epoch: i32) -> MetadataResponsePartition {
    let others: Vec<BrokerId> = (0..3).map(|k| BrokerId((leader - 1 + k) % 3 + 1)).collect();
    MetadataResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(epoch)
        .with_replica_nodes(others.clone())
        .with_isr_nodes(others[..2].to_vec())
        .with_offline_replicas(others[2..].to_vec())
}

/// A Metadata response from the real cluster: `orders` (12 partitions, leaders
/// 1, 2, 3 in turn), `events` (3 partitions, partition 1 without a leader) and
/// `missing` (UNKNOWN_TOPIC_OR_PARTITION).
pub fn metadata_response(epoch: i32) -> MetadataResponse {
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
    let orders = MetadataResponseTopic::default()
        .with_name(Some(name("orders")))
        .with_topic_id(ORDERS_ID.parse().unwrap())
        .with_partitions((0..12).map(|i| partition(i, i % 3 + 1, epoch)).collect());
    let mut events_partitions: Vec<_> = (0..3).map(|i| partition(i, 3, epoch)).collect();
    events_partitions[1] = events_partitions[1]
        .clone()
        .with_error_code(ResponseError::LeaderNotAvailable.code())
        .with_leader_id(BrokerId(-1));
    let events = MetadataResponseTopic::default()
        .with_name(Some(name("events")))
        .with_topic_id(EVENTS_ID.parse().unwrap())
        .with_partitions(events_partitions);
    let missing = MetadataResponseTopic::default()
        .with_name(Some(name("missing")))
        .with_error_code(ResponseError::UnknownTopicOrPartition.code());
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_static_str("real-cluster-id")))
        .with_controller_id(BrokerId(REAL_CONTROLLER))
        .with_topics(vec![orders, events, missing])
}

/// Encodes `body` as a broker would, frames it, and parses it back as a
/// [`Response`] whose body is still undecoded.
pub fn through_wire(api: ApiKey, version: i16, body: ResponseKind) -> Response {
    let mut buf = BytesMut::new();
    Response::from_body(api, version, 42, body)
        .encode(&mut buf)
        .unwrap();
    reparse(&buf, api, version)
}

/// Parses one length-prefixed response frame from `buf`.
pub fn reparse(buf: &[u8], api: ApiKey, version: i16) -> Response {
    let mut src = BytesMut::from(buf);
    let frame = FrameCodec::default()
        .decode_frame(&mut src)
        .unwrap()
        .unwrap();
    assert!(src.is_empty(), "one frame expected");
    let resp = Response::parse(frame, api, version).unwrap();
    assert_eq!(resp.correlation_id(), 42);
    resp
}

/// Encodes a response to its length-prefixed wire bytes.
pub fn wire_bytes(resp: &Response) -> BytesMut {
    let mut buf = BytesMut::new();
    resp.encode(&mut buf).unwrap();
    buf
}

/// Panics if any real broker host name appears in `bytes`.
pub fn assert_no_real_hosts(bytes: &[u8]) {
    for (_, host, _, _) in REAL_BROKERS {
        let found = bytes.windows(host.len()).any(|w| w == host.as_bytes());
        assert!(!found, "real broker host {host} leaked to the client");
    }
}
