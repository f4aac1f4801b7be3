//! Raw forwarding: untouched frames leave as they came, with only the
//! correlation id patched; edited frames are re-encoded.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, TopicName};
use sluice_codec::{Request, Response};

use super::messages::{request, response, s};
use super::roundtrip::one_frame;

fn encoded_request(api: ApiKey, v: i16, corr: i32) -> BytesMut {
    let req = Request::from_body(
        api,
        v,
        corr,
        Some(Bytes::from_static(b"cid")),
        request(api, v),
    );
    let mut wire = BytesMut::new();
    req.encode(&mut wire).unwrap();
    one_frame(wire)
}

fn encoded_response(api: ApiKey, v: i16, corr: i32) -> BytesMut {
    let mut wire = BytesMut::new();
    Response::from_body(api, v, corr, response(api, v))
        .encode(&mut wire)
        .unwrap();
    one_frame(wire)
}

/// Indexes where two equally long byte strings differ.
fn diff(a: &[u8], b: &[u8]) -> Vec<usize> {
    assert_eq!(a.len(), b.len());
    (0..a.len()).filter(|i| a[*i] != b[*i]).collect()
}

#[test]
fn set_correlation_id_on_a_raw_request_changes_only_those_four_bytes() {
    for (api, v) in [
        (ApiKey::Produce, 3),
        (ApiKey::Produce, 13),
        (ApiKey::Fetch, 12),
        (ApiKey::Metadata, 4),
    ] {
        let frame = encoded_request(api, v, 0x0000_0001);
        let original = frame.clone();
        let mut req = Request::parse(frame).unwrap();
        req.set_correlation_id(-0x0102_0304);
        assert_eq!(req.correlation_id(), -0x0102_0304);
        assert_eq!(req.header().correlation_id, -0x0102_0304);
        let mut out = BytesMut::new();
        req.encode(&mut out).unwrap();
        assert_eq!(&out[..4], &(original.len() as i32).to_be_bytes());
        assert_eq!(diff(&out[4..], &original), vec![4, 5, 6, 7], "{api:?} v{v}");
        assert_eq!(&out[8..12], &(-0x0102_0304i32).to_be_bytes());
        // Decoding afterwards still sees the same body, and the raw frame
        // is still what was received.
        assert_eq!(req.body().unwrap(), &request(api, v));
        assert_eq!(req.raw_frame().unwrap(), &original.freeze());
    }
}

#[test]
fn set_correlation_id_on_a_raw_response_changes_only_those_four_bytes() {
    for (api, v) in [
        (ApiKey::Produce, 8),
        (ApiKey::Fetch, 16),
        (ApiKey::ApiVersions, 3),
    ] {
        let frame = encoded_response(api, v, 41);
        let original = frame.clone();
        let mut resp = Response::parse(frame, api, v).unwrap();
        resp.set_correlation_id(0x7eed_beef);
        let mut out = BytesMut::new();
        resp.encode(&mut out).unwrap();
        assert_eq!(diff(&out[4..], &original), vec![0, 1, 2, 3], "{api:?} v{v}");
        assert_eq!(resp.correlation_id(), 0x7eed_beef);
        assert_eq!(resp.body().unwrap(), &response(api, v));
    }
}

#[test]
fn body_mut_edits_are_encoded_with_the_new_correlation_id() {
    for v in [4, 12] {
        let frame = encoded_request(ApiKey::Metadata, v, 5);
        let mut req = Request::parse(frame).unwrap();
        assert!(req.raw_frame().is_some());
        let RequestKind::Metadata(body) = req.body_mut().unwrap() else {
            panic!("not a metadata request");
        };
        body.topics
            .get_or_insert_with(Vec::new)
            .push(MetadataRequestTopic::default().with_name(Some(TopicName(s("added")))));
        assert!(req.is_dirty());
        assert!(req.raw_frame().is_none());
        req.set_correlation_id(77);
        let mut out = BytesMut::new();
        req.encode(&mut out).unwrap();
        let mut again = Request::parse(one_frame(out)).unwrap();
        assert_eq!(again.correlation_id(), 77);
        assert_eq!(again.header().client_id.as_deref(), Some(&b"cid"[..]));
        let RequestKind::Metadata(body) = again.body().unwrap() else {
            panic!("not a metadata request");
        };
        let names: Vec<_> = body
            .topics
            .iter()
            .flatten()
            .map(|t| t.name.as_ref().unwrap().0.to_string())
            .collect();
        assert_eq!(names, ["orders", "added"], "v{v}");
    }
}

#[test]
fn response_body_mut_edits_are_encoded() {
    let frame = encoded_response(ApiKey::FindCoordinator, 6, 9);
    let mut resp = Response::parse(frame, ApiKey::FindCoordinator, 6).unwrap();
    let ResponseKind::FindCoordinator(body) = resp.body_mut().unwrap() else {
        panic!("not a find coordinator response");
    };
    body.coordinators[0].host = s("sluice.example");
    body.coordinators[0].port = 9192;
    resp.set_correlation_id(10);
    let mut out = BytesMut::new();
    resp.encode(&mut out).unwrap();
    let mut again = Response::parse(one_frame(out), ApiKey::FindCoordinator, 6).unwrap();
    assert_eq!(again.correlation_id(), 10);
    let ResponseKind::FindCoordinator(body) = again.body().unwrap() else {
        panic!("not a find coordinator response");
    };
    assert_eq!(body.coordinators[0].host.as_str(), "sluice.example");
    assert_eq!(body.coordinators[0].port, 9192);
}

#[test]
fn request_header_tagged_fields_are_skipped_and_forwarded() {
    // Metadata v12 (header v2) with one header tagged field.
    let body = request(ApiKey::Metadata, 12);
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(12);
    frame.put_i32(3);
    frame.put_i16(3);
    frame.put_slice(b"cid");
    frame.put_slice(&[1, 7, 2, 0xaa, 0xbb]); // one tag (7) of two bytes
    let body_at = frame.len();
    body.encode(&mut frame, 12).unwrap();
    let original = frame.clone();
    let mut req = Request::parse(frame).unwrap();
    assert_eq!(req.header().body_offset, body_at);
    assert_eq!(req.body().unwrap(), &body);
    let mut out = BytesMut::new();
    req.encode(&mut out).unwrap();
    assert_eq!(&out[4..], &original[..]);
}

#[test]
fn a_non_utf8_client_id_survives_a_re_encode() {
    let id = Bytes::from_static(b"\xff\xfe-client");
    let mut wire = BytesMut::new();
    Request::from_body(
        ApiKey::Heartbeat,
        4,
        1,
        Some(id.clone()),
        request(ApiKey::Heartbeat, 4),
    )
    .encode(&mut wire)
    .unwrap();
    let mut req = Request::parse(one_frame(wire)).unwrap();
    assert_eq!(req.header().client_id, Some(id.clone()));
    req.body_mut().unwrap();
    let mut out = BytesMut::new();
    req.encode(&mut out).unwrap();
    let again = Request::parse(one_frame(out)).unwrap();
    assert_eq!(again.header().client_id, Some(id));
}

#[test]
fn a_failed_encode_leaves_the_buffer_untouched() {
    // Produce v2 is below what kafka-protocol can encode.
    let body = request(ApiKey::Produce, 3);
    let req = Request::from_body(ApiKey::Produce, 2, 1, None, body);
    let mut dst = BytesMut::from(&b"keep"[..]);
    assert!(req.encode(&mut dst).is_err());
    assert_eq!(&dst[..], b"keep");
    let resp = Response::from_body(ApiKey::Metadata, 99, 1, response(ApiKey::Metadata, 12));
    assert!(resp.encode(&mut dst).is_err());
    assert_eq!(&dst[..], b"keep");
}
