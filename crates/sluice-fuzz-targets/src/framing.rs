//! Target `framing`: a client's byte stream through `FrameCodec` and the
//! request header parser.
//!
//! Input: the bytes a client sends, any number of length-prefixed frames.
//! The stream is split into frames twice, all at once and in small chunks
//! as a socket might deliver it, and both must give the same frames and
//! the same error. Each frame then goes through `Request::parse` (the
//! header, read by hand) and, when that succeeds, `expects_response`,
//! `encode` of the raw frame (which must give back the frame exactly),
//! `body()`, `body_mut()` and `encode` of the re-encoded body, whose header
//! must parse again to the same api, version and correlation id. Each frame
//! also goes through `Request::parse_with_fetch_limit`: a Fetch it clamps
//! differs from the frame in at most four bytes, and decodes (when it does)
//! to the `max_bytes` the clamp reports.

use bytes::BytesMut;
use sluice_codec::{CodecError, FrameCodec, Request, RequestKind};

/// The frame size limit: small, so that the limit is reached too.
const MAX_FRAME_BYTES: usize = 64 * 1024;

/// The target (see the module docs).
pub fn framing(data: &[u8]) {
    let whole = frames(data, data.len().max(1));
    let chunk = usize::from(data.first().copied().unwrap_or(0) % 16) + 1;
    let chunked = frames(data, chunk);
    assert_eq!(whole, chunked, "frames depend on how the stream arrives");
    for frame in whole.0 {
        fetch_limit(frame.clone());
        request(frame);
    }
}

/// The frames of `data` fed `chunk` bytes at a time, and how decoding ended
/// (as text: `CodecError` is not `PartialEq`).
fn frames(data: &[u8], chunk: usize) -> (Vec<BytesMut>, Option<String>) {
    let mut codec = FrameCodec::new(MAX_FRAME_BYTES);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match codec.decode_frame(&mut buf) {
                Ok(Some(frame)) => out.push(frame),
                Ok(None) => break,
                Err(e) => return (out, Some(error_text(&e))),
            }
        }
    }
    (out, None)
}

/// The fetch clamp on one frame (see the module docs).
fn fetch_limit(frame: BytesMut) {
    const LIMIT: i32 = 4096;
    let before = frame.clone();
    let Ok((mut request, Some(clamp))) = Request::parse_with_fetch_limit(frame, LIMIT) else {
        return;
    };
    assert!(
        clamp.carried <= LIMIT && clamp.carried <= clamp.asked,
        "{clamp:?}"
    );
    let after = request.raw_frame().cloned().unwrap_or_default();
    assert_eq!(
        before.len(),
        after.len(),
        "the clamp keeps the frame's size"
    );
    let changed = before
        .iter()
        .zip(after.iter())
        .filter(|(a, b)| a != b)
        .count();
    assert!(changed <= 4, "the clamp changed {changed} bytes");
    if let Ok(RequestKind::Fetch(body)) = request.body() {
        assert_eq!(body.max_bytes, clamp.carried, "the decoded max_bytes");
    }
}

fn error_text(e: &CodecError) -> String {
    e.to_string()
}

/// One frame through the request path.
fn request(frame: BytesMut) {
    let original = frame.clone();
    let Ok(request) = Request::parse(frame) else {
        return;
    };
    let _ = request.expects_response();
    let mut raw = BytesMut::new();
    if request.encode(&mut raw).is_ok() {
        assert_eq!(&raw[4..], &original[..], "a raw request leaves unchanged");
    }

    let mut read = request.clone();
    if read.body().is_err() {
        return;
    }
    let _ = read.expects_response();
    let mut edited = read;
    if edited.body_mut().is_err() {
        return;
    }
    let _ = edited.expects_response();
    let mut encoded = BytesMut::new();
    if edited.encode(&mut encoded).is_err() {
        assert!(encoded.is_empty(), "a failed encode leaves nothing behind");
        return;
    }
    let mut stream = encoded;
    let again = FrameCodec::default().decode_frame(&mut stream);
    let Ok(Some(again)) = again else {
        panic!("a re-encoded request does not frame: {again:?}");
    };
    assert!(stream.is_empty(), "one frame");
    let again = Request::parse(again);
    let Ok(again) = again else {
        panic!("a re-encoded request header does not parse: {again:?}");
    };
    assert_eq!(
        (again.api_key(), again.api_version(), again.correlation_id()),
        (
            edited.api_key(),
            edited.api_version(),
            edited.correlation_id()
        ),
        "the re-encoded header"
    );
}
