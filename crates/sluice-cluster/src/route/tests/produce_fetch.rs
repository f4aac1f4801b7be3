//! Partition-leader APIs: stale partitions from Produce answers, answers that
//! need no rewrite, and the Fetch header walk that finds errors and leader
//! hints without decoding.

use bytes::Bytes;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};

use super::*;
use crate::route::produce_fetch;
use crate::topology::fixtures;

#[test]
fn stale_partitions_are_forgotten() {
    let mut view = crate::topology::ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(3));
    let orders = TopicRef::Name(name("orders"));
    assert!(view.leader(&orders, 1).is_some());
    let produce = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(name("orders"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default().with_index(0),
                PartitionProduceResponse::default()
                    .with_index(1)
                    .with_error_code(ResponseError::NotLeaderOrFollower.code()),
            ]),
        TopicProduceResponse::default()
            .with_name(name("events"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            ]),
    ]);
    assert!(produce_fetch::produce_needs_rewrite(&produce));
    let stale = produce_fetch::stale_partitions(&ResponseKind::Produce(produce), 12);
    assert_eq!(
        stale,
        [
            Stale::Leader(orders.clone(), 1),
            Stale::Topic(TopicRef::Name(name("events")))
        ]
    );
    let forgotten = forget(&mut view, &stale);
    assert_eq!(forgotten.entries, 2);
    assert!(!forgotten.rebootstrap_required);
    let cluster = forget(&mut view, &[Stale::Cluster]);
    assert_eq!((cluster.entries, cluster.rebootstrap_required), (0, true));
    assert_eq!(view.leader(&orders, 1), None);
    assert!(view.leader(&orders, 0).is_some(), "only the stale one");
    assert!(view.topic(&TopicRef::Name(name("events"))).is_none());
    assert_eq!(
        partition_staleness(ErrorCode::from_wire(0), &orders, 0),
        None
    );
    assert_eq!(
        partition_staleness(ErrorCode::from_wire(16), &orders, 0),
        None,
        "not about partitions"
    );
    assert_eq!(
        top_level_staleness(ErrorCode::from_wire(41)),
        Some(Stale::Controller)
    );
}

#[test]
fn clean_produce_answers_need_no_rewrite() {
    let produce = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(name("t"))
            .with_partition_responses(vec![PartitionProduceResponse::default().with_index(0)]),
    ]);
    assert!(!produce_fetch::produce_needs_rewrite(&produce));
    let fetch = FetchResponse::default();
    assert!(!produce_fetch::fetch_needs_rewrite(&fetch));
}

/// A Fetch answer with `partitions` in one topic.
fn fetch_answer(partitions: Vec<PartitionData>, endpoints: bool) -> FetchResponse {
    let topic = FetchableTopicResponse::default()
        .with_topic(name("orders"))
        .with_topic_id(uuid::Uuid::from_u128(9))
        .with_partitions(partitions);
    let mut resp = FetchResponse::default().with_responses(vec![topic.clone(), topic]);
    if endpoints {
        resp.node_endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("kafka-2"))
                .with_port(9092),
        ];
    }
    resp
}

fn fetch_body(version: i16, resp: FetchResponse) -> Bytes {
    let mut buf = BytesMut::new();
    Response::from_body(ApiKey::Fetch, version, 1, ResponseKind::Fetch(resp))
        .encode(&mut buf)
        .unwrap();
    let frame = buf.split_off(4).freeze();
    let offset =
        sluice_codec::header::response_body_offset(&frame, ApiKey::Fetch, version).unwrap();
    frame.slice(offset..)
}

#[test]
fn fetch_walk_finds_errors_without_decoding() {
    let records = Bytes::from(vec![7u8; 300]);
    let clean = || {
        PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(10)
            .with_records(Some(records.clone()))
    };
    let range = offered_versions(ApiKey::Fetch).unwrap();
    for version in range.min..=range.max {
        let body = fetch_body(version, fetch_answer(vec![clean(), clean()], false));
        assert!(
            !produce_fetch::fetch_may_need_rewrite(&body, version),
            "v{version}: clean answer"
        );
        let error = clean().with_error_code(ResponseError::NotLeaderOrFollower.code());
        let body = fetch_body(version, fetch_answer(vec![clean(), error], false));
        assert!(
            produce_fetch::fetch_may_need_rewrite(&body, version),
            "v{version}: partition error"
        );
        if version >= 11 {
            let follower = clean().with_preferred_read_replica(BrokerId(3));
            let body = fetch_body(version, fetch_answer(vec![follower], false));
            assert!(
                produce_fetch::fetch_may_need_rewrite(&body, version),
                "v{version}: preferred read replica"
            );
        }
        if version >= 16 {
            let body = fetch_body(version, fetch_answer(vec![clean()], true));
            assert!(
                produce_fetch::fetch_may_need_rewrite(&body, version),
                "v{version}: node endpoints"
            );
        }
        // A body cut short cannot be walked: decode it to find out.
        let body = fetch_body(version, fetch_answer(vec![clean()], false));
        let cut = &body[..body.len() - 10];
        assert!(
            produce_fetch::fetch_may_need_rewrite(cut, version),
            "v{version}: truncated"
        );
    }
}

#[test]
fn only_a_produce_with_an_answer_on_a_node_that_stays_goes_where_it_is_shown() {
    let produce = |acks| RequestKind::Produce(ProduceRequest::default().with_acks(acks));
    assert!(produce_fetch::goes_where_shown(&produce(-1), false));
    assert!(produce_fetch::goes_where_shown(&produce(1), false));
    assert!(
        !produce_fetch::goes_where_shown(&produce(0), false),
        "acks=0 has no answer to carry the error"
    );
    assert!(
        !produce_fetch::goes_where_shown(&produce(-1), true),
        "a leaving node forwards everything"
    );
    let fetch = RequestKind::Fetch(FetchRequest::default());
    assert!(!produce_fetch::goes_where_shown(&fetch, false));
}
