//! What a leaving node answers instead of serving: the retriable error of a
//! request that needs a leader or a coordinator, nothing for the others.

use bytes::{Bytes, BytesMut};
use sluice_codec::{FrameCodec, Request};

use super::*;

/// `body` as a client sends it: encoded, framed, parsed back undecoded.
fn sent(api: ApiKey, version: i16, body: RequestKind) -> Request {
    let mut wire = BytesMut::new();
    Request::from_body(api, version, 9, Some(Bytes::from_static(b"c")), body)
        .encode(&mut wire)
        .unwrap();
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    Request::parse(frame).unwrap()
}

#[test]
fn a_leaving_node_sends_leader_and_coordinator_requests_elsewhere() {
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(name("t"))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_index(0),
                ]),
        ]);
    let mut request = sent(ApiKey::Produce, 9, RequestKind::Produce(produce));
    let (answer, code) = crate::route::leaving_answer(&mut request).unwrap().unwrap();
    assert_eq!(code, NOT_LEADER_OR_FOLLOWER);
    let ResponseKind::Produce(answer) = answer else {
        panic!("a Produce answer");
    };
    assert_eq!(
        answer.responses[0].partition_responses[0].error_code,
        NOT_LEADER_OR_FOLLOWER.code()
    );

    let heartbeat = HeartbeatRequest::default().with_group_id(group("g"));
    let mut request = sent(ApiKey::Heartbeat, 4, RequestKind::Heartbeat(heartbeat));
    let (_, code) = crate::route::leaving_answer(&mut request).unwrap().unwrap();
    assert_eq!(code, NOT_COORDINATOR);
}

#[test]
fn a_leaving_node_still_serves_what_needs_no_leader_or_coordinator() {
    let no_transaction = InitProducerIdRequest::default().with_transaction_timeout_ms(-1);
    let mut request = sent(
        ApiKey::InitProducerId,
        4,
        RequestKind::InitProducerId(no_transaction),
    );
    assert!(
        crate::route::leaving_answer(&mut request)
            .unwrap()
            .is_none()
    );
    let metadata = MetadataRequest::default();
    let mut request = sent(ApiKey::Metadata, 12, RequestKind::Metadata(metadata));
    assert!(
        crate::route::leaving_answer(&mut request)
            .unwrap()
            .is_none()
    );
    let fetch = FetchRequest::default();
    let mut request = sent(ApiKey::Fetch, 12, RequestKind::Fetch(fetch.clone()));
    assert!(
        crate::route::leaving_answer(&mut request)
            .unwrap()
            .is_none(),
        "a Fetch is answered from its session"
    );
    let (_, code) = crate::route::leaving_fetch_answer(&RequestKind::Fetch(fetch), 12).unwrap();
    assert_eq!(code, NOT_LEADER_OR_FOLLOWER);
}
