//! Property tests: random bytes and mutated valid frames never panic.

use bytes::BytesMut;
use kafka_protocol::messages::ApiKey;
use proptest::prelude::*;
use sluice_codec::{FrameCodec, Request, Response};
use tokio_util::codec::Decoder;

use super::messages::{KINDS, request, response};
use super::roundtrip::one_frame;

fn any_api_key() -> impl Strategy<Value = ApiKey> {
    let keys: Vec<ApiKey> = ApiKey::iter().collect();
    proptest::sample::select(keys)
}

/// Tries everything a connection task would do with a frame.
fn exercise_request(frame: BytesMut) {
    if let Ok(mut req) = Request::parse(frame) {
        let _ = req.expects_response();
        let _ = req.body();
        req.set_correlation_id(1);
        let mut out = BytesMut::new();
        let _ = req.encode(&mut out);
        if req.body_mut().is_ok() {
            let _ = req.encode(&mut out);
        }
    }
}

fn exercise_response(frame: BytesMut, api: ApiKey, version: i16) {
    if let Ok(mut resp) = Response::parse(frame, api, version) {
        let _ = resp.body();
        resp.set_correlation_id(1);
        let mut out = BytesMut::new();
        let _ = resp.encode(&mut out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn frame_codec_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), max in 0usize..4096) {
        let mut codec = FrameCodec::new(max);
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(_)) = codec.decode(&mut buf) {}
    }

    #[test]
    fn random_requests_never_panic(
        api in any_api_key(),
        version in -1i16..20,
        client_id_len in -3i16..8,
        body in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&(api as i16).to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&client_id_len.to_be_bytes());
        frame.extend_from_slice(&body);
        exercise_request(frame);
    }

    #[test]
    fn random_responses_never_panic(
        api in any_api_key(),
        version in -1i16..20,
        body in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        exercise_response(BytesMut::from(&body[..]), api, version);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        kind in 0usize..KINDS.len(),
        pick in 0usize..3,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let api = KINDS[kind];
        let versions = super::messages::versions(api);
        let v = versions[pick % versions.len()];
        let mut wire = BytesMut::new();
        Request::from_body(api, v, 1, Some("c".into()), request(api, v)).encode(&mut wire).unwrap();
        let mut frame = one_frame(wire);
        for (at, byte) in &edits {
            let i = at.index(frame.len());
            frame[i] = *byte;
        }
        let keep = frame.len() - cut.index(frame.len() / 4 + 1);
        frame.truncate(keep);
        exercise_request(frame);

        let mut wire = BytesMut::new();
        Response::from_body(api, v, 1, response(api, v)).encode(&mut wire).unwrap();
        let mut frame = one_frame(wire);
        for (at, byte) in &edits {
            let i = at.index(frame.len());
            frame[i] = *byte;
        }
        exercise_response(frame, api, v);
    }
}
