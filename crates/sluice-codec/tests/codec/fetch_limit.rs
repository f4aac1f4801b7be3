//! `Request::parse_with_fetch_limit`: a Fetch's `max_bytes` is lowered in
//! the frame itself, at every version, and nothing else changes.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use sluice_codec::{FetchMaxBytes, Request};

use super::messages::{fetch_request, request};
use super::roundtrip::one_frame;

fn wire(api: ApiKey, v: i16, body: RequestKind) -> BytesMut {
    let mut wire = BytesMut::new();
    Request::from_body(api, v, 9, Some(Bytes::from_static(b"c")), body)
        .encode(&mut wire)
        .unwrap();
    one_frame(wire)
}

#[test]
fn fetch_max_bytes_is_lowered_in_place_at_every_version() {
    for v in 4..=17 {
        let asked = fetch_request(v).max_bytes;
        let frame = wire(ApiKey::Fetch, v, fetch_request(v).into());
        let (mut req, clamp) = Request::parse_with_fetch_limit(frame.clone(), 1 << 20).unwrap();
        let want = FetchMaxBytes {
            asked,
            carried: 1 << 20,
        };
        assert_eq!(clamp, Some(want), "v{v}");
        assert!(req.raw_frame().is_some(), "v{v}: still the client's bytes");
        let changed: Vec<usize> = (0..frame.len())
            .filter(|&i| frame[i] != req.raw_frame().unwrap()[i])
            .collect();
        assert!(changed.len() <= 4, "v{v}: bytes {changed:?} changed");
        let Ok(RequestKind::Fetch(body)) = req.body() else {
            panic!("v{v}: not a fetch")
        };
        let expected = fetch_request(v).with_max_bytes(1 << 20);
        assert_eq!(body, &expected, "v{v}: only max_bytes changed");
    }
}

#[test]
fn a_limit_above_max_bytes_changes_nothing() {
    for v in [4, 12, 15, 17] {
        let frame = wire(ApiKey::Fetch, v, fetch_request(v).into());
        let (req, clamp) = Request::parse_with_fetch_limit(frame.clone(), i32::MAX).unwrap();
        let asked = fetch_request(v).max_bytes;
        let want = FetchMaxBytes {
            asked,
            carried: asked,
        };
        assert_eq!(clamp, Some(want), "v{v}");
        assert_eq!(req.raw_frame().unwrap()[..], frame[..], "v{v}");
    }
}

#[test]
fn other_requests_are_left_alone() {
    let frame = wire(ApiKey::Metadata, 12, request(ApiKey::Metadata, 12));
    let (req, clamp) = Request::parse_with_fetch_limit(frame.clone(), 1).unwrap();
    assert_eq!(clamp, None);
    assert_eq!(req.raw_frame().unwrap()[..], frame[..]);
}

#[test]
fn a_truncated_fetch_is_an_error() {
    let frame = wire(ApiKey::Fetch, 12, fetch_request(12).into());
    let header_and_a_bit = BytesMut::from(&frame[..frame.len().min(20)]);
    assert!(Request::parse_with_fetch_limit(header_and_a_bit, 1).is_err());
}
