//! Fetch: split by leader, sessionless parts, merge, all versions.

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic,
};
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use sluice_codec::kafka_protocol::protocol::{Message, StrBytes};

use super::super::SplitApi;
use super::super::fetch::{FINAL_EPOCH, NO_SESSION_ID};
use super::*;
use crate::error_codes::NOT_LEADER_OR_FOLLOWER;

const API: ApiKey = ApiKey::Fetch;

fn records(to: BrokerId, partition: i32) -> Bytes {
    Bytes::from(format!(
        "records from broker {} partition {partition}",
        to.0
    ))
}

/// A consumer's fetch, with every field its version has set to a non-default
/// value, and a session (v7+) that the split must drop.
pub(super) fn fetch_request(version: i16) -> FetchRequest {
    let by_id = version >= 13;
    let topics = TOPICS.iter().map(|(text, id, _, partitions)| {
        let partitions = partitions.iter().map(|p| {
            let mut partition = FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(100 + i64::from(*p))
                .with_partition_max_bytes(1 << 20);
            if version >= 9 {
                partition.current_leader_epoch = 5;
            }
            if version >= 12 {
                partition.last_fetched_epoch = 4;
            }
            partition
        });
        let topic = FetchTopic::default().with_partitions(partitions.collect());
        if by_id {
            topic.with_topic_id(uuid!(id))
        } else {
            topic.with_topic(name(text))
        }
    });
    let mut request = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_isolation_level(1)
        .with_topics(topics.collect());
    if version >= 7 {
        request.session_id = 77;
        request.session_epoch = 3;
        let forgotten = ForgottenTopic::default().with_partitions(vec![4]);
        let forgotten = if by_id {
            forgotten.with_topic_id(uuid!("00000000-0000-0000-0000-0000000000d4"))
        } else {
            forgotten.with_topic(name("delta"))
        };
        request.forgotten_topics_data = vec![forgotten];
    }
    if version >= 11 {
        request.rack_id = StrBytes::from_static_str("rack-a");
    }
    if version >= 12 {
        request.cluster_id = Some(StrBytes::from_static_str("cluster-x"));
    }
    request
}

/// What broker `to` answers: high watermark [`mark`]ed.
fn answer(to: BrokerId, part: &FetchRequest, version: i16) -> FetchResponse {
    let responses = part.topics.iter().map(|topic| {
        let partitions = topic.partitions.iter().map(|p| {
            PartitionData::default()
                .with_partition_index(p.partition)
                .with_high_watermark(mark(to, p.partition))
                .with_records(Some(records(to, p.partition)))
        });
        FetchableTopicResponse::default()
            .with_topic(topic.topic.clone())
            .with_topic_id(topic.topic_id)
            .with_partitions(partitions.collect())
    });
    let mut response = FetchResponse::default()
        .with_throttle_time_ms(to.0 * 10)
        .with_responses(responses.collect());
    if version >= 16 {
        response.node_endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(to)
                .with_host(StrBytes::from_string(format!("broker-{}", to.0)))
                .with_port(9092),
        ];
    }
    response
}

#[test]
fn each_part_asks_for_a_share_of_max_bytes() {
    use super::super::fetch::part_max_bytes;
    assert_eq!(
        part_max_bytes(50 << 20, 1),
        50 << 20,
        "one broker: all of it"
    );
    assert_eq!(part_max_bytes(50 << 20, 0), 50 << 20);
    assert_eq!(part_max_bytes(60, 3), 20);
    assert_eq!(part_max_bytes(2, 3), 1, "never 0");
    assert_eq!(part_max_bytes(-1, 3), -1, "nonsense passes as it came");
}

fn split_and_merge(version: i16) {
    let by_id = version >= 13;
    let (request, split) = leader_split(fetch_request(version), version, by_id, |r| &r.topics);
    let parts = i32::try_from(split.parts.len()).unwrap();
    assert!(parts > 1, "the test fetch spans brokers");
    let sessionless = request
        .clone()
        .with_max_bytes(request.max_bytes / parts)
        .with_topics(Vec::new())
        .with_session_id(NO_SESSION_ID)
        .with_session_epoch(FINAL_EPOCH)
        .with_forgotten_topics_data(Vec::new());
    let merged = merge_answers(version, split, |to, part| {
        assert_eq!(
            part.clone().with_topics(Vec::new()),
            sessionless,
            "v{version} part fields"
        );
        answer(to, part, version)
    });
    check_merged(&merged.responses, version, by_id, |_, p, leader| {
        let index = p.partition_index;
        let expected = match leader {
            Some(leader) => (0, mark(leader, index), records(leader, index)),
            None => (NOT_LEADER_OR_FOLLOWER.code(), -1, Bytes::new()),
        };
        let records = p.records.clone().expect("records");
        assert_eq!((p.error_code, p.high_watermark, records), expected);
    });
    assert_eq!((merged.throttle_time_ms, merged.error_code), (30, 0));
    assert_eq!(merged.session_id, NO_SESSION_ID);
    let nodes: Vec<i32> = merged.node_endpoints.iter().map(|n| n.node_id.0).collect();
    let expected_nodes: &[i32] = if version >= 16 { &[1, 2, 3] } else { &[] };
    assert_eq!(nodes, expected_nodes);
    FetchRequest::assert_merged_encodes(version, &merged);
}

#[test]
fn fetch_v4_splits_and_merges() {
    split_and_merge(4);
}

#[test]
fn fetch_v12_drops_the_session_in_every_part() {
    split_and_merge(12);
}

#[test]
fn fetch_v13_splits_by_topic_id() {
    split_and_merge(13);
}

#[test]
fn fetch_every_version_splits_and_merges() {
    let versions = <FetchRequest as Message>::VERSIONS;
    for version in versions.min..=versions.max {
        split_and_merge(version);
    }
}

#[test]
fn single_broker_fetch_is_forwarded_only_when_sessionless() {
    let cluster = FakeCluster::single_broker();
    for version in [4, 7, 18] {
        let mut request = fetch_request(version);
        request.topics.truncate(2);
        request.forgotten_topics_data.clear();
        // With a session the part differs from the request: no passthrough.
        let split = request.split(version, &cluster);
        assert_eq!(split.parts.len(), 1);
        let expected = if version >= 7 {
            None
        } else {
            Some(BrokerId(1))
        };
        assert_eq!(split.passthrough(), expected, "v{version} with session");
        // A sessionless full fetch goes through untouched.
        request.session_id = NO_SESSION_ID;
        request.session_epoch = FINAL_EPOCH;
        let split = request.split(version, &cluster);
        assert_eq!(
            split.passthrough(),
            Some(BrokerId(1)),
            "v{version} sessionless"
        );
        assert_eq!(split.parts, vec![(BrokerId(1), request)]);
    }
}

#[test]
fn merge_keeps_the_first_top_level_error_and_a_failed_part() {
    let version = 12;
    let cluster = FakeCluster::three_brokers();
    let split = fetch_request(version).split(version, &cluster);
    let failed = Some((1, NOT_LEADER_OR_FOLLOWER));
    let merged = merge_with_failure(version, split, failed, |to, part| {
        answer(to, part, version).with_error_code(100 + to.0 as i16)
    });
    assert_eq!(merged.error_code, 102);
    assert_eq!(flatten(&merged.responses, version), request_order(false));
    let errors: Vec<i16> = merged
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    // alpha 0 (broker 1, failed), 1, 2; beta 0, 1 (broker 1, failed); gamma 0 (unroutable).
    let six = NOT_LEADER_OR_FOLLOWER.code();
    assert_eq!(errors, [six, 0, 0, 0, six, six]);
}

#[test]
fn fetch_with_nothing_routable_is_answered_without_parts() {
    let version = 13;
    let split = fetch_request(version).split(version, &FakeCluster::empty());
    assert!(split.parts.is_empty());
    assert_eq!(split.unroutable.len(), 6);
    let merged = FetchRequest::merge(split.plan, Vec::new()).unwrap();
    assert_eq!(flatten(&merged.responses, version), request_order(true));
    assert!(
        merged
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == NOT_LEADER_OR_FOLLOWER)
    );
    broker_roundtrip(API, version, merged);
}
