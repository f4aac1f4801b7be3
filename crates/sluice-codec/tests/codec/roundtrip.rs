//! Encode/decode round trips for every kind at its min, first flexible and
//! max version, through `from_body` → `encode` → `FrameCodec` → `parse`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use sluice_codec::guard::{check_request_body, check_response_body};
use sluice_codec::{FrameCodec, Request, Response};
use tokio_util::codec::Decoder;

use super::messages::{KINDS, request, response, versions};

/// Splits exactly one frame off `wire` and checks nothing is left over.
pub(super) fn one_frame(mut wire: BytesMut) -> BytesMut {
    let frame = FrameCodec::default().decode(&mut wire).unwrap().unwrap();
    assert!(wire.is_empty(), "{} bytes after the frame", wire.len());
    frame
}

#[test]
fn requests_round_trip_at_min_flexible_and_max_versions() {
    for &api in KINDS {
        for v in versions(api) {
            let body = request(api, v);
            let corr = 0x0102_0300 + i32::from(v);
            let client_id = Bytes::from_static(b"sluice-client");
            let req = Request::from_body(api, v, corr, Some(client_id.clone()), body.clone());
            assert!(req.is_dirty());
            let mut wire = BytesMut::new();
            req.encode(&mut wire)
                .unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));

            // The hand-written header must match kafka-protocol's own.
            let header_version = api.request_header_version(v);
            let mut expected = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(api as i16)
                .with_request_api_version(v)
                .with_correlation_id(corr)
                .with_client_id(Some(StrBytes::from_static_str("sluice-client")))
                .encode(&mut expected, header_version)
                .unwrap();
            body.encode(&mut expected, v).unwrap();
            assert_eq!(&wire[4..], &expected[..], "{api:?} v{v} bytes");

            let frame = one_frame(wire);
            let raw = frame.clone();
            let mut parsed = Request::parse(frame).unwrap();
            let h = parsed.header().clone();
            assert_eq!((h.api_key, h.api_version, h.correlation_id), (api, v, corr));
            assert_eq!(h.client_id, Some(client_id.clone()), "{api:?} v{v}");
            assert_eq!(h.header_version, header_version, "{api:?} v{v}");
            assert_eq!(parsed.correlation_id(), corr);
            assert!(!parsed.is_dirty());
            assert_eq!(parsed.wire_len(), raw.len());
            // The pre-decode walk reads exactly the body the encoder wrote.
            let walked = check_request_body(api, v, &raw[h.body_offset..]).unwrap();
            assert_eq!(walked, raw.len() - h.body_offset, "{api:?} v{v} walk");
            assert_eq!(parsed.body().unwrap(), &body, "{api:?} v{v} body");
            assert!(!parsed.is_dirty(), "body() must not mark dirty");

            // Decoded but untouched: re-encodes to exactly the input bytes.
            let mut again = BytesMut::new();
            parsed.encode(&mut again).unwrap();
            assert_eq!(&again[4..], &raw[..], "{api:?} v{v} re-encode");
            assert_eq!(parsed.clone().into_body().unwrap(), body);
        }
    }
}

#[test]
fn responses_round_trip_at_min_flexible_and_max_versions() {
    for &api in KINDS {
        for v in versions(api) {
            let body = response(api, v);
            let corr = -0x0102_0300 - i32::from(v);
            let resp = Response::from_body(api, v, corr, body.clone());
            assert!(resp.is_dirty());
            let mut wire = BytesMut::new();
            resp.encode(&mut wire)
                .unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));

            let mut expected = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(corr)
                .encode(&mut expected, api.response_header_version(v))
                .unwrap();
            body.encode(&mut expected, v).unwrap();
            assert_eq!(&wire[4..], &expected[..], "{api:?} v{v} bytes");

            let frame = one_frame(wire);
            let raw = frame.clone();
            let mut parsed = Response::parse(frame, api, v).unwrap();
            assert_eq!((parsed.api_key(), parsed.api_version()), (api, v));
            assert_eq!(parsed.correlation_id(), corr);
            assert!(!parsed.is_dirty());
            assert_eq!(parsed.wire_len(), raw.len());
            let offset = if api.response_header_version(v) >= 1 {
                5
            } else {
                4
            };
            let walked = check_response_body(api, v, &raw[offset..]).unwrap();
            assert_eq!(walked, raw.len() - offset, "{api:?} v{v} walk");
            assert_eq!(parsed.body().unwrap(), &body, "{api:?} v{v} body");

            let mut again = BytesMut::new();
            parsed.encode(&mut again).unwrap();
            assert_eq!(&again[4..], &raw[..], "{api:?} v{v} re-encode");
            assert_eq!(parsed.clone().into_body().unwrap(), body);
        }
    }
}

#[test]
fn null_client_id_and_header_v0_style_fields_round_trip() {
    for (api, v) in [(ApiKey::Metadata, 1), (ApiKey::Metadata, 12)] {
        let req = Request::from_body(api, v, 7, None, request(api, v));
        let mut wire = BytesMut::new();
        req.encode(&mut wire).unwrap();
        let mut parsed = Request::parse(one_frame(wire)).unwrap();
        assert_eq!(parsed.header().client_id, None);
        assert_eq!(parsed.header().client_id_lossy(), "");
        assert_eq!(parsed.body().unwrap(), &request(api, v));
    }
}

#[test]
fn api_versions_responses_keep_header_v0_even_when_flexible() {
    // ApiVersions v3+ bodies are flexible but the response header stays v0,
    // so clients that do not yet know the version can read it.
    let body = response(ApiKey::ApiVersions, 3);
    let mut wire = BytesMut::new();
    Response::from_body(ApiKey::ApiVersions, 3, 99, body.clone())
        .encode(&mut wire)
        .unwrap();
    let frame = one_frame(wire);
    assert_eq!(&frame[..4], &99i32.to_be_bytes());
    assert_eq!(frame[4..6], [0, 0], "error code follows the correlation id");
    let mut parsed = Response::parse(frame, ApiKey::ApiVersions, 3).unwrap();
    assert_eq!(parsed.body().unwrap(), &body);
}
