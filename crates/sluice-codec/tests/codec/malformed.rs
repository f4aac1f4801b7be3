//! Malformed input yields errors, never panics or unbounded allocations.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_codec::{CodecError, FrameCodec, MAX_UPFRONT_RESERVE, Request, Response};
use tokio_util::codec::Decoder;

use super::messages::{request, response};
use super::roundtrip::one_frame;

fn request_frame(api: ApiKey, v: i16) -> BytesMut {
    let mut wire = BytesMut::new();
    Request::from_body(api, v, 1, Some("client".into()), request(api, v))
        .encode(&mut wire)
        .unwrap();
    one_frame(wire)
}

fn response_frame(api: ApiKey, v: i16) -> BytesMut {
    let mut wire = BytesMut::new();
    Response::from_body(api, v, 1, response(api, v))
        .encode(&mut wire)
        .unwrap();
    one_frame(wire)
}

const SAMPLES: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 3),
    (ApiKey::Produce, 13),
    (ApiKey::Fetch, 4),
    (ApiKey::Fetch, 18),
    (ApiKey::Metadata, 0),
    (ApiKey::Metadata, 12),
    (ApiKey::JoinGroup, 5),
    (ApiKey::ConsumerGroupHeartbeat, 1),
    (ApiKey::DescribeConfigs, 4),
    (ApiKey::ApiVersions, 3),
];

#[test]
fn truncated_requests_fail_at_every_offset() {
    for &(api, v) in SAMPLES {
        let frame = request_frame(api, v);
        for cut in 0..frame.len() {
            let part = BytesMut::from(&frame[..cut]);
            if let Ok(mut req) = Request::parse(part) {
                assert!(req.body().is_err(), "{api:?} v{v} cut at {cut} decoded");
                assert!(req.body_mut().is_err());
                assert!(!req.is_dirty(), "a failed body_mut must not mark dirty");
                // Forwarding the raw bytes still works.
                let mut out = BytesMut::new();
                req.encode(&mut out).unwrap();
                assert_eq!(&out[4..], &frame[..cut]);
            }
        }
    }
}

#[test]
fn truncated_responses_fail_at_every_offset() {
    for &(api, v) in SAMPLES {
        let frame = response_frame(api, v);
        for cut in 0..frame.len() {
            let part = BytesMut::from(&frame[..cut]);
            if let Ok(mut resp) = Response::parse(part, api, v) {
                assert!(resp.body().is_err(), "{api:?} v{v} cut at {cut} decoded");
            } else {
                assert!(cut < 5, "{api:?} v{v}: header failed at {cut}");
            }
        }
    }
}

#[test]
fn truncated_frames_wait_for_more_bytes() {
    let mut wire = BytesMut::new();
    wire.put_i32(12);
    wire.put_slice(&[0; 12]);
    for cut in 0..wire.len() {
        let mut part = BytesMut::from(&wire[..cut]);
        assert!(
            FrameCodec::default().decode(&mut part).unwrap().is_none(),
            "cut {cut}"
        );
        assert_eq!(
            part.len(),
            cut,
            "nothing consumed before the frame is whole"
        );
    }
}

#[test]
fn unknown_api_keys_are_rejected() {
    for key in [i16::MAX, -1, 9999] {
        let mut frame = BytesMut::new();
        frame.put_i16(key);
        frame.put_i16(0);
        frame.put_i32(1);
        frame.put_i16(-1);
        assert!(matches!(Request::parse(frame), Err(CodecError::UnknownApiKey(k)) if k == key));
    }
}

fn header_with_client_id_len(len: i16, rest: &[u8]) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(4);
    frame.put_i32(1);
    frame.put_i16(len);
    frame.put_slice(rest);
    frame
}

#[test]
fn bad_client_id_lengths_are_rejected() {
    let err = Request::parse(header_with_client_id_len(-2, b"")).unwrap_err();
    assert!(matches!(err, CodecError::Malformed { .. }), "{err}");
    let err = Request::parse(header_with_client_id_len(i16::MIN, b"abc")).unwrap_err();
    assert!(matches!(err, CodecError::Malformed { .. }), "{err}");
    let err = Request::parse(header_with_client_id_len(i16::MAX, b"short")).unwrap_err();
    assert!(
        matches!(
            err,
            CodecError::Truncated {
                needed: 32767,
                available: 5,
                ..
            }
        ),
        "{err}"
    );
    // -1 is a null client id, and fine.
    let req = Request::parse(header_with_client_id_len(-1, &[0, 0, 0, 0, 1])).unwrap();
    assert_eq!(req.header().client_id, None);
}

#[test]
fn varint_overflow_in_header_tagged_fields_is_rejected() {
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(12);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    let err = Request::parse(frame).unwrap_err();
    assert!(matches!(err, CodecError::Malformed { .. }), "{err}");

    // A tag whose size runs past the frame.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(12);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_slice(&[1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(matches!(
        Request::parse(frame),
        Err(CodecError::Truncated { .. })
    ));

    // Response header v1 with an overlong varint.
    let mut frame = BytesMut::new();
    frame.put_i32(1);
    frame.put_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80]);
    assert!(Response::parse(frame, ApiKey::Metadata, 12).is_err());
}

#[test]
fn varint_overflow_in_body_tagged_fields_is_rejected() {
    // Heartbeat v4: group "g", generation 1, member "m", null instance id,
    // then a tagged-field count that never ends.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Heartbeat as i16);
    frame.put_i16(4);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_u8(0);
    frame.put_slice(&[2, b'g', 0, 0, 0, 1, 2, b'm', 0]);
    frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    let mut req = Request::parse(frame).unwrap();
    assert!(matches!(req.body(), Err(CodecError::Decode { .. })));
}

#[test]
fn huge_array_counts_are_errors_not_aborts() {
    // Metadata v0 whose topic count is i32::MAX: kafka-protocol alone would
    // try to reserve ~150 GB and abort the process.
    let mut frame = header_with_client_id_len(-1, &[]);
    frame[2..4].copy_from_slice(&0i16.to_be_bytes());
    frame.put_i32(i32::MAX);
    let mut req = Request::parse(frame).unwrap();
    let err = req.body().unwrap_err();
    assert!(err.to_string().contains("cannot fit"), "{err}");

    // Fetch v16 response whose responses compact array claims u32::MAX - 1.
    let mut frame = BytesMut::new();
    frame.put_i32(1);
    frame.put_u8(0);
    frame.put_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // throttle, error, session
    frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let mut resp = Response::parse(frame, ApiKey::Fetch, 16).unwrap();
    assert!(resp.body().is_err());
}

#[test]
fn negative_and_oversized_length_prefixes_are_rejected() {
    let mut codec = FrameCodec::new(1024);
    for len in [-1i32, -5, i32::MIN] {
        let mut buf = BytesMut::from(&len.to_be_bytes()[..]);
        assert!(matches!(codec.decode(&mut buf), Err(CodecError::NegativeLength(l)) if l == len));
    }
    let mut buf = BytesMut::from(&1025i32.to_be_bytes()[..]);
    assert!(matches!(
        codec.decode(&mut buf),
        Err(CodecError::FrameTooLarge {
            size: 1025,
            max: 1024
        })
    ));
    // Exactly at the limit is fine.
    let mut buf = BytesMut::from(&1024i32.to_be_bytes()[..]);
    buf.put_bytes(0, 1024);
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap().len(), 1024);
}

#[test]
fn a_200_mib_length_prefix_is_rejected_without_allocating() {
    let mut buf = BytesMut::with_capacity(16);
    buf.put_i32(200 * 1024 * 1024);
    let before = buf.capacity();
    let err = FrameCodec::default().decode(&mut buf).unwrap_err();
    assert!(matches!(err, CodecError::FrameTooLarge { size, .. } if size == 200 * 1024 * 1024));
    assert_eq!(
        buf.capacity(),
        before,
        "rejected frame must not grow the buffer"
    );
}

#[test]
fn a_large_allowed_prefix_reserves_only_a_bounded_amount() {
    let mut buf = BytesMut::with_capacity(16);
    buf.put_i32(90 * 1024 * 1024);
    assert!(FrameCodec::default().decode(&mut buf).unwrap().is_none());
    assert!(
        buf.capacity() <= 4 + MAX_UPFRONT_RESERVE + 64,
        "reserved {}",
        buf.capacity()
    );
}

#[test]
fn responses_with_unsupported_versions_fail_cleanly() {
    let frame = response_frame(ApiKey::Metadata, 12);
    let mut resp = Response::parse(frame, ApiKey::Metadata, 99).unwrap();
    assert!(resp.body().is_err());
    let mut req = Request::parse(request_frame(ApiKey::Produce, 3)).unwrap();
    assert!(req.body().is_ok());
}
