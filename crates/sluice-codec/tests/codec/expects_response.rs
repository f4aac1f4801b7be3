//! `expects_response`: only Produce with acks=0 goes unanswered, whether the
//! acks are read from raw bytes or from an edited body.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use sluice_codec::Request;

use super::messages::{produce_request, request};
use super::roundtrip::one_frame;

fn raw_produce(v: i16, acks: i16, txn: Option<&'static str>) -> Request {
    let body = produce_request(v, acks, txn);
    let mut wire = BytesMut::new();
    Request::from_body(
        ApiKey::Produce,
        v,
        1,
        Some(Bytes::from_static(b"p")),
        body.into(),
    )
    .encode(&mut wire)
    .unwrap();
    Request::parse(one_frame(wire)).unwrap()
}

#[test]
fn produce_acks_decide_across_versions_and_transactional_ids() {
    for v in [3, 8, 9, 13] {
        for txn in [None, Some("sluice-txn"), Some("")] {
            for acks in [0, 1, -1] {
                let want = acks != 0;
                let ctx = format!("v{v} acks={acks} txn={txn:?}");
                // Raw: read from the bytes without decoding.
                let mut raw = raw_produce(v, acks, txn);
                assert_eq!(raw.expects_response(), want, "raw {ctx}");
                // Decoded but clean: still the raw path.
                raw.body().unwrap();
                assert_eq!(raw.expects_response(), want, "decoded {ctx}");
                // Built from a body: dirty.
                let built = Request::from_body(
                    ApiKey::Produce,
                    v,
                    1,
                    None,
                    produce_request(v, acks, txn).into(),
                );
                assert_eq!(built.expects_response(), want, "from_body {ctx}");
                // Dirty with acks edited either way.
                let mut edited = raw_produce(v, acks, txn);
                let RequestKind::Produce(p) = edited.body_mut().unwrap() else {
                    panic!("not produce");
                };
                p.acks = if acks == 0 { -1 } else { 0 };
                assert_eq!(edited.expects_response(), !want, "edited {ctx}");
            }
        }
    }
}

#[test]
fn other_requests_always_expect_a_response() {
    for api in [ApiKey::Fetch, ApiKey::Metadata, ApiKey::ApiVersions] {
        let v = api.valid_versions().max;
        let req = Request::from_body(api, v, 1, None, request(api, v));
        assert!(req.expects_response(), "{api:?}");
    }
}

#[test]
fn truncated_produce_bodies_expect_a_response() {
    // Unreadable acks err on the side of waiting for an answer.
    for v in [3, 9] {
        let mut frame = one_frame({
            let mut wire = BytesMut::new();
            Request::from_body(
                ApiKey::Produce,
                v,
                1,
                None,
                produce_request(v, 0, Some("t")).into(),
            )
            .encode(&mut wire)
            .unwrap();
            wire
        });
        let body_at = Request::parse(frame.clone()).unwrap().header().body_offset;
        frame.truncate(body_at + 2);
        assert!(Request::parse(frame).unwrap().expects_response(), "v{v}");
    }
}
