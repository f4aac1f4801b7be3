//! Produce: split by leader, merge with synthesized errors, all versions.

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, BrokerId, ProduceRequest, ProduceResponse, TransactionalId,
};
use sluice_codec::kafka_protocol::protocol::{Message, StrBytes};

use super::super::order::TopicEntry;
use super::super::{SplitApi, SplitError};
use super::*;
use crate::error_codes::NOT_LEADER_OR_FOLLOWER;

const API: ApiKey = ApiKey::Produce;
/// An error a broker reports for beta/1, to check that errors survive the merge.
const BETA_1_ERROR: i16 = 47;

fn batch(topic: &str, partition: i32) -> Bytes {
    Bytes::from(format!("record batch for {topic}/{partition}"))
}

pub(super) fn produce_request(version: i16) -> ProduceRequest {
    let by_id = version >= 13;
    let topic_data = TOPICS.iter().map(|(text, id, _, partitions)| {
        let partition_data = partitions.iter().map(|p| {
            PartitionProduceData::default()
                .with_index(*p)
                .with_records(Some(batch(text, *p)))
        });
        let topic = TopicProduceData::default().with_partition_data(partition_data.collect());
        if by_id {
            topic.with_topic_id(uuid!(id))
        } else {
            topic.with_name(name(text))
        }
    });
    ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx-1"))))
        .with_acks(-1)
        .with_timeout_ms(1500)
        .with_topic_data(topic_data.collect())
}

/// What broker `to` answers to a part: base offset [`mark`]ed.
fn answer(to: BrokerId, part: &ProduceRequest, version: i16) -> ProduceResponse {
    let beta = topic_ref(1, version >= 13);
    let responses = part.topic_data.iter().map(|topic| {
        let is_beta = topic.topic_ref(version) == beta;
        let partitions = topic.partition_data.iter().map(|p| {
            let error = if is_beta && p.index == 1 {
                BETA_1_ERROR
            } else {
                0
            };
            PartitionProduceResponse::default()
                .with_index(p.index)
                .with_error_code(error)
                .with_base_offset(mark(to, p.index))
        });
        TopicProduceResponse::default()
            .with_name(topic.name.clone())
            .with_topic_id(topic.topic_id)
            .with_partition_responses(partitions.collect())
    });
    let mut response = ProduceResponse::default()
        .with_throttle_time_ms(to.0 * 10)
        .with_responses(responses.collect());
    if version >= 10 {
        let endpoint = |id: i32| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(format!("broker-{id}")))
                .with_port(9092)
        };
        response.node_endpoints = vec![endpoint(to.0), endpoint(1)];
    }
    response
}

/// Splits the standard request at `version`, answers, merges and checks.
fn split_and_merge(version: i16) {
    let by_id = version >= 13;
    let request = produce_request(version);
    let (request, split) = leader_split(request, version, by_id, |r| &r.topic_data);
    assert_eq!(split.passthrough(), None);
    let merged = merge_answers(version, split, |to, part| {
        assert_eq!(part.transactional_id, request.transactional_id);
        assert_eq!((part.acks, part.timeout_ms), (-1, 1500));
        for topic in &part.topic_data {
            for p in &topic.partition_data {
                let key = topic.topic_ref(version);
                let t = (0..TOPICS.len())
                    .find(|t| key == topic_ref(*t, by_id))
                    .unwrap();
                assert_eq!(
                    p.records,
                    Some(batch(TOPICS[t].0, p.index)),
                    "records untouched"
                );
            }
        }
        answer(to, part, version)
    });
    check_merged(&merged.responses, version, by_id, |key, p, leader| {
        let beta_1 = *key == topic_ref(1, by_id) && p.index == 1;
        let expected = match leader {
            Some(leader) => (if beta_1 { BETA_1_ERROR } else { 0 }, mark(leader, p.index)),
            None => (NOT_LEADER_OR_FOLLOWER.code(), -1),
        };
        assert_eq!((p.error_code, p.base_offset), expected);
    });
    assert_eq!(merged.throttle_time_ms, 30);
    let nodes: Vec<i32> = merged.node_endpoints.iter().map(|n| n.node_id.0).collect();
    let expected_nodes: &[i32] = if version >= 10 { &[1, 2, 3] } else { &[] };
    assert_eq!(nodes, expected_nodes);
    ProduceRequest::assert_merged_encodes(version, &merged);
}

#[test]
fn produce_v3_splits_by_leader_and_merges_in_client_order() {
    split_and_merge(3);
}

#[test]
fn produce_v9_flexible_splits_and_merges() {
    split_and_merge(9);
}

#[test]
fn produce_v13_splits_by_topic_id() {
    split_and_merge(13);
}

#[test]
fn produce_every_version_splits_and_merges() {
    let versions = <ProduceRequest as Message>::VERSIONS;
    for version in versions.min..=versions.max {
        split_and_merge(version);
    }
}

#[test]
fn failed_part_answers_its_partitions_with_the_given_error() {
    let version = 9;
    let cluster = FakeCluster::three_brokers();
    let request = produce_request(version).through_client(version);
    let split = request.split(version, &cluster);
    let failed = Some((2, NOT_LEADER_OR_FOLLOWER));
    let merged = merge_with_failure(version, split, failed, |to, part| answer(to, part, version));
    assert_eq!(flatten(&merged.responses, version), request_order(false));
    let failed: Vec<(TopicRef, i32)> = merged
        .responses
        .iter()
        .flat_map(|t| {
            let key = t.topic_ref(version);
            t.partition_responses
                .iter()
                .filter(|p| p.error_code == NOT_LEADER_OR_FOLLOWER)
                .map(move |p| (key.clone(), p.index))
        })
        .collect();
    // Broker 2 leads alpha/1 and beta/0; gamma/0 has no leader.
    let expected = vec![
        (topic_ref(0, false), 1),
        (topic_ref(1, false), 0),
        (topic_ref(2, false), 0),
    ];
    assert_eq!(failed, expected);
}

#[test]
fn single_broker_produce_is_forwarded_unchanged() {
    let version = 12;
    let cluster = FakeCluster::single_broker();
    let mut request = produce_request(version);
    request.topic_data.truncate(2); // alpha and beta, both on broker 1
    let request = request.through_client(version);
    let split = request.split(version, &cluster);
    assert_eq!(split.passthrough(), Some(BrokerId(1)));
    assert_eq!(split.parts, vec![(BrokerId(1), request)]);
}

#[test]
fn merge_refuses_a_wrong_number_of_results() {
    let cluster = FakeCluster::three_brokers();
    let split = produce_request(3).split(3, &cluster);
    let err = ProduceRequest::merge(split.plan, vec![]).unwrap_err();
    assert!(
        matches!(
            err,
            SplitError::PartCount {
                expected: 3,
                got: 0,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "merging Produce v3: 3 parts were sent but 0 results came back"
    );
}

#[test]
fn error_response_names_every_partition() {
    for version in [3, 13] {
        let request = produce_request(version);
        let response = request.error_response_for(version, NOT_LEADER_OR_FOLLOWER);
        assert_eq!(
            flatten(&response.responses, version),
            request_order(version >= 13)
        );
        assert!(
            response
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .all(|p| p.error_code == NOT_LEADER_OR_FOLLOWER && p.base_offset == -1)
        );
        broker_roundtrip(API, version, response);
    }
}

#[test]
fn acks_zero_parts_keep_acks_zero() {
    let cluster = FakeCluster::three_brokers();
    let request = produce_request(9).with_acks(0);
    let split = request.split(9, &cluster);
    assert!(split.parts.iter().all(|(_, part)| part.acks == 0));
    // The unroutable partition is still reported, for the driver to log.
    assert_eq!(split.unroutable.len(), 1);
}

/// The standard request at `version` as a client sends it: the frame (no
/// length prefix) and the request read back from it, its body decoded.
fn from_the_wire(version: i16, request: ProduceRequest) -> (Bytes, sluice_codec::Request) {
    let client_id = Some(Bytes::from_static(b"split-test"));
    let mut wire = bytes::BytesMut::new();
    let body = sluice_codec::RequestKind::Produce(request);
    sluice_codec::Request::from_body(API, version, 41, client_id, body)
        .encode(&mut wire)
        .unwrap();
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    let mut parsed = sluice_codec::Request::parse(frame).unwrap();
    parsed.body().unwrap();
    (parsed.raw_frame().unwrap().clone(), parsed)
}

#[test]
fn split_parts_carry_the_client_frames_own_record_bytes() {
    let cluster = FakeCluster::three_brokers();
    for version in [3, 9, 13] {
        let (frame, mut request) = from_the_wire(version, produce_request(version));
        let inside = frame.as_ptr_range();
        let body = kind!(RequestKind::Produce, request.body().unwrap().clone());
        let split = body.split(version, &cluster);
        assert_eq!(split.parts.len(), 3);
        for (to, part) in &split.parts {
            for p in part.topic_data.iter().flat_map(|t| &t.partition_data) {
                let records = p.records.as_ref().unwrap();
                let range = records.as_ptr_range();
                assert!(
                    inside.contains(&range.start) && range.end <= inside.end,
                    "v{version}: part for {to:?}, partition {}: its records are not a slice of the client's frame",
                    p.index
                );
            }
        }
    }
}

#[test]
fn a_produce_led_by_one_broker_passes_through_byte_for_byte() {
    let cluster = FakeCluster::single_broker();
    for version in [3, 9, 12, 13] {
        let mut request = produce_request(version);
        request.topic_data.truncate(2); // alpha and beta, both on broker 1
        let (frame, mut request) = from_the_wire(version, request);
        let body = kind!(RequestKind::Produce, request.body().unwrap().clone());
        let split = body.split(version, &cluster);
        assert_eq!(split.passthrough(), Some(BrokerId(1)), "v{version}");
        assert!(!request.is_dirty(), "v{version}: routing did not mark it");
        let mut out = bytes::BytesMut::new();
        request.encode(&mut out).unwrap();
        assert_eq!(&out[4..], &frame[..], "v{version}: the client's own bytes");
        // A failed broker's part is answered for every partition, in order.
        let merged = ProduceRequest::merge(
            split.plan,
            vec![PartResult::Failed {
                error_code: NOT_LEADER_OR_FOLLOWER,
            }],
        )
        .unwrap();
        let answered = flatten(&merged.responses, version);
        assert_eq!(answered, flatten(&body.topic_data, version), "v{version}");
    }
}

#[test]
fn one_partition_elsewhere_or_unknown_cuts_the_request() {
    let version = 9;
    let mut request = produce_request(version);
    request.topic_data.truncate(2);
    // All on broker 1 but alpha/1 (broker 2).
    let mut cluster = FakeCluster::single_broker();
    cluster.set_leader(topic_ref(0, false), 1, broker(2));
    let split = request.split(version, &cluster);
    assert_eq!(split.passthrough(), None);
    assert_eq!(split.parts.len(), 2);
    // All on broker 1 but gamma/0, whose leader is unknown.
    let request = produce_request(version);
    let split = request.split(version, &FakeCluster::single_broker());
    assert_eq!(split.passthrough(), None);
    assert_eq!(split.unroutable.len(), 1);
}
