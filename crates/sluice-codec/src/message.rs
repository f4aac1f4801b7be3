//! [`Request`] and [`Response`]: raw frames with lazily decoded bodies.
//!
//! A message starts as the bytes read from the wire. Its header is parsed at
//! once (cheap, fixed offsets); its body is decoded only when [`Request::body`]
//! or [`Request::body_mut`] is called. Asking for `body_mut` marks the message
//! dirty, and only a dirty message is re-encoded on the way out; every other
//! message leaves as the bytes it came in as, with the correlation id patched in
//! place when a broker connection assigns its own.
//!
//! The frame is kept as [`Bytes`], so a decoded body (record batches above all)
//! borrows from it instead of copying; the correlation id is written from the
//! header when the frame is encoded, so patching it never touches the frame.
//! Before any body is decoded, [`crate::guard`] checks that `kafka-protocol`
//! can decode it without reserving memory on the peer's say-so.
//!
//! Requests and responses keep their frame and body alike (a private
//! `Message`); they differ only in their headers and in which guard, decoder
//! and encoder their bodies take (`BodyKind`).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::CodecError;
use crate::guard::{check_request_body, check_response_body};
use crate::out::OutFrames;

mod shared;
use crate::header::{
    Cursor, REQUEST_CORRELATION_ID_OFFSET, RequestHeaderInfo, response_body_offset,
};

/// A Kafka request: its parsed header, raw frame and (maybe) decoded body.
#[derive(Debug, Clone)]
pub struct Request {
    header: RequestHeaderInfo,
    message: Message<RequestKind>,
    /// A wait the broker may hold it for that its own fields do not say
    /// (see [`Request::set_broker_wait_at_least`]).
    pub(crate) wait_hint: std::time::Duration,
}

impl Request {
    /// Parses the header of a request frame; the body stays undecoded.
    pub fn parse(frame: BytesMut) -> Result<Self, CodecError> {
        let header = RequestHeaderInfo::parse(&frame)?;
        Ok(Self::received(header, frame))
    }

    /// Parses a request frame as [`Request::parse`] does, first lowering a
    /// Fetch request's `max_bytes` to at most `limit` in the frame itself:
    /// four bytes are patched and nothing is re-encoded, so the request
    /// still passes through as the client's bytes. Returns the request and,
    /// for a Fetch, the `max_bytes` it asked for and the one it now carries
    /// (`None` for other requests, and for Fetch versions below 3, which
    /// have no `max_bytes`).
    pub fn parse_with_fetch_limit(
        mut frame: BytesMut,
        limit: i32,
    ) -> Result<(Self, Option<FetchMaxBytes>), CodecError> {
        let header = RequestHeaderInfo::parse(&frame)?;
        let clamp = match header.api_key {
            ApiKey::Fetch if header.api_version >= 3 => {
                Some(clamp_fetch_max_bytes(&mut frame, &header, limit)?)
            }
            _ => None,
        };
        Ok((Self::received(header, frame), clamp))
    }

    fn received(header: RequestHeaderInfo, frame: BytesMut) -> Self {
        let (api, version) = (header.api_key, header.api_version);
        Self {
            message: Message::received(api, version, header.body_offset, frame),
            header,
            wait_hint: std::time::Duration::ZERO,
        }
    }

    /// Builds a request from a body, e.g. one part of a split request.
    pub fn from_body(
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        client_id: Option<Bytes>,
        body: RequestKind,
    ) -> Self {
        let header_version = api_key.request_header_version(api_version);
        Self {
            header: RequestHeaderInfo {
                api_key,
                api_version,
                correlation_id,
                client_id,
                header_version,
                body_offset: 0,
            },
            message: Message::built(api_key, api_version, body),
            wait_hint: std::time::Duration::ZERO,
        }
    }

    /// The parsed header.
    pub fn header(&self) -> &RequestHeaderInfo {
        &self.header
    }

    /// The api key.
    pub fn api_key(&self) -> ApiKey {
        self.header.api_key
    }

    /// The api version.
    pub fn api_version(&self) -> i16 {
        self.header.api_version
    }

    /// The correlation id currently in the header.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }

    /// Whether the body was decoded and may have been changed.
    pub fn is_dirty(&self) -> bool {
        self.message.dirty
    }

    /// Size of the frame as received, without the length prefix: exact for a
    /// raw request, the size before the edit for a dirty one, and 0 for a
    /// request built with [`Request::from_body`].
    pub fn wire_len(&self) -> usize {
        self.message.frame.len()
    }

    /// The frame as received (without its length prefix), or `None` once the
    /// body may have changed. Its correlation id is the client's even after
    /// [`Request::set_correlation_id`]; [`Request::encode`] writes the new one.
    pub fn raw_frame(&self) -> Option<&Bytes> {
        self.message.raw_frame()
    }

    /// Replaces the correlation id. A raw frame is written out with only
    /// these four bytes changed.
    pub fn set_correlation_id(&mut self, id: i32) {
        self.header.correlation_id = id;
    }

    /// Decodes the body if needed and returns it.
    pub fn body(&mut self) -> Result<&RequestKind, CodecError> {
        self.message.body()
    }

    /// Decodes the body if needed and returns it for modification; the request
    /// will be re-encoded when written.
    pub fn body_mut(&mut self) -> Result<&mut RequestKind, CodecError> {
        self.message.body_mut()
    }

    /// Consumes the request and returns its decoded body.
    pub fn into_body(self) -> Result<RequestKind, CodecError> {
        self.message.into_body()
    }

    /// The decoded body, if it was decoded.
    pub(crate) fn decoded_body(&self) -> Option<&RequestKind> {
        self.message.body.as_ref()
    }

    /// The raw body bytes, unless the request was built or edited.
    pub(crate) fn raw_body(&self) -> Option<&[u8]> {
        self.message.raw_body()
    }

    /// Whether the broker will answer this request. Only Produce with `acks=0`
    /// has no response.
    pub fn expects_response(&self) -> bool {
        if self.header.api_key != ApiKey::Produce {
            return true;
        }
        match &self.message.body {
            Some(RequestKind::Produce(p)) if self.message.dirty => p.acks != 0,
            _ => produce_acks(&self.message.frame, &self.header).map_or(true, |acks| acks != 0),
        }
    }

    /// Queues the length-prefixed frame on `out` as [`Request::encode`]
    /// writes it; a frame as received is shared, not copied (only its
    /// length, header start and correlation id are written anew), and so
    /// are the record batches of a re-encoded Produce (a part of a split
    /// one).
    ///
    /// On error `out` is left as it was.
    pub fn encode_into(&self, out: &mut OutFrames) -> Result<(), CodecError> {
        let id = self.header.correlation_id;
        if self
            .message
            .put_raw_shared(out, REQUEST_CORRELATION_ID_OFFSET, id)?
        {
            return Ok(());
        }
        let pieces = match &self.message.body {
            Some(RequestKind::Produce(produce)) if self.message.dirty => {
                shared::produce_body(produce, self.header.api_version)
            }
            _ => None,
        };
        let Some(pieces) = pieces else {
            return self.encode(out.buf_mut());
        };
        let body_len: usize = pieces.iter().map(Bytes::len).sum();
        let buf = out.buf_mut();
        let start = buf.len();
        let header = put_request_header(buf, &self.header)
            .and_then(|()| frame_len(buf.len() - start - 4 + body_len));
        let len = match header {
            Ok(len) => len,
            Err(e) => {
                buf.truncate(start);
                return Err(e);
            }
        };
        buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
        for piece in pieces {
            out.put_shared(piece);
        }
        Ok(())
    }

    /// Appends the length-prefixed frame to `dst`, re-encoding a dirty body.
    ///
    /// On error `dst` is left as it was.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), CodecError> {
        let id = self.header.correlation_id;
        self.message
            .encode(dst, REQUEST_CORRELATION_ID_OFFSET, id, |dst| {
                put_request_header(dst, &self.header)
            })
    }
}

/// A Kafka response: raw frame and (maybe) decoded body.
#[derive(Debug, Clone)]
pub struct Response {
    correlation_id: i32,
    message: Message<ResponseKind>,
}

impl Response {
    /// Parses the header of a response to a request of `api_key`/`api_version`.
    pub fn parse(frame: BytesMut, api_key: ApiKey, api_version: i16) -> Result<Self, CodecError> {
        let correlation_id = Cursor::new(&frame, "response header").i32()?;
        let body_offset = response_body_offset(&frame, api_key, api_version)?;
        Ok(Self {
            correlation_id,
            message: Message::received(api_key, api_version, body_offset, frame),
        })
    }

    /// Builds a response from a body, e.g. a merged or synthesized response.
    pub fn from_body(
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        body: ResponseKind,
    ) -> Self {
        Self {
            correlation_id,
            message: Message::built(api_key, api_version, body),
        }
    }

    /// The api key of the request this answers.
    pub fn api_key(&self) -> ApiKey {
        self.message.api
    }

    /// The api version of the request this answers.
    pub fn api_version(&self) -> i16 {
        self.message.version
    }

    /// The correlation id currently in the header.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }

    /// Whether the body was decoded for modification.
    pub fn is_dirty(&self) -> bool {
        self.message.dirty
    }

    /// Size of the raw frame, without the length prefix (0 when built from a body).
    pub fn wire_len(&self) -> usize {
        self.message.frame.len()
    }

    /// The frame as received (without its length prefix), or `None` once the
    /// body may have changed. Its correlation id is the broker's even after
    /// [`Response::set_correlation_id`]; [`Response::encode`] writes the new one.
    pub fn raw_frame(&self) -> Option<&Bytes> {
        self.message.raw_frame()
    }

    /// Replaces the correlation id. A raw frame is written out with only
    /// these four bytes changed.
    pub fn set_correlation_id(&mut self, id: i32) {
        self.correlation_id = id;
    }

    /// Decodes the body if needed and returns it.
    pub fn body(&mut self) -> Result<&ResponseKind, CodecError> {
        self.message.body()
    }

    /// Decodes the body if needed and returns it for modification.
    pub fn body_mut(&mut self) -> Result<&mut ResponseKind, CodecError> {
        self.message.body_mut()
    }

    /// Consumes the response and returns its decoded body.
    pub fn into_body(self) -> Result<ResponseKind, CodecError> {
        self.message.into_body()
    }

    /// Queues the length-prefixed frame on `out` as [`Response::encode`]
    /// writes it, sharing instead of copying what came from a broker: a raw
    /// frame's body, and the record batches of a re-encoded Fetch.
    ///
    /// On error `out` is left as it was.
    pub fn encode_into(&self, out: &mut OutFrames) -> Result<(), CodecError> {
        let (api, version, id) = (self.message.api, self.message.version, self.correlation_id);
        if self.message.put_raw_shared(out, 0, id)? {
            return Ok(());
        }
        let pieces = match &self.message.body {
            Some(ResponseKind::Fetch(fetch)) if self.message.dirty => {
                shared::fetch_body(fetch, version)
            }
            _ => None,
        };
        let Some(pieces) = pieces else {
            return self.encode(out.buf_mut());
        };
        let header_len = if api.response_header_version(version) >= 1 {
            5
        } else {
            4
        };
        let body_len: usize = pieces.iter().map(Bytes::len).sum();
        let len = frame_len(header_len + body_len)?;
        let buf = out.buf_mut();
        buf.put_i32(len);
        buf.put_i32(id);
        if header_len == 5 {
            buf.put_u8(0); // no tagged fields
        }
        for piece in pieces {
            out.put_shared(piece);
        }
        Ok(())
    }

    /// Appends the length-prefixed frame to `dst`, re-encoding a dirty body.
    ///
    /// On error `dst` is left as it was.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), CodecError> {
        let (api, version, id) = (self.message.api, self.message.version, self.correlation_id);
        self.message.encode(dst, 0, id, |dst| {
            dst.put_i32(0);
            dst.put_i32(id);
            if api.response_header_version(version) >= 1 {
                dst.put_u8(0); // no tagged fields
            }
            Ok(())
        })
    }
}

/// What differs between request and response bodies: the guard, decoder and
/// encoder they take, and how errors name them.
trait BodyKind: Sized {
    /// "request" or "response".
    const KIND: &'static str;
    /// What is malformed when the body is missing.
    const MISSING: &'static str;
    /// [`crate::guard`]'s check for this kind of body.
    fn check(api: ApiKey, version: i16, body: &[u8]) -> Result<usize, CodecError>;
    /// `kafka-protocol`'s decoder, its error as text.
    fn decode(api: ApiKey, bytes: &mut Bytes, version: i16) -> Result<Self, String>;
    /// `kafka-protocol`'s encoder, its error as text.
    fn encode(&self, dst: &mut BytesMut, version: i16) -> Result<(), String>;
}

/// Implements [`BodyKind`] for `kafka-protocol`'s request or response enum.
macro_rules! body_kind {
    ($kind:ident, $name:literal, $check:ident) => {
        impl BodyKind for $kind {
            const KIND: &'static str = $name;
            const MISSING: &'static str = concat!($name, " body");

            fn check(api: ApiKey, version: i16, body: &[u8]) -> Result<usize, CodecError> {
                $check(api, version, body)
            }

            fn decode(api: ApiKey, bytes: &mut Bytes, version: i16) -> Result<Self, String> {
                $kind::decode(api, bytes, version).map_err(|e| format!("{e:#}"))
            }

            fn encode(&self, dst: &mut BytesMut, version: i16) -> Result<(), String> {
                $kind::encode(self, dst, version).map_err(|e| format!("{e:#}"))
            }
        }
    };
}

body_kind!(RequestKind, "request", check_request_body);
body_kind!(ResponseKind, "response", check_response_body);

/// A message's frame and its lazily decoded body.
#[derive(Debug, Clone)]
struct Message<K> {
    /// The api the body belongs to.
    api: ApiKey,
    /// The version it is decoded and encoded at.
    version: i16,
    /// Where the body starts in `frame`.
    body_offset: usize,
    /// The frame without its length prefix, as received. Its correlation id
    /// is stale once patched, and all of it is stale while `dirty`.
    frame: Bytes,
    body: Option<K>,
    dirty: bool,
}

impl<K: BodyKind> Message<K> {
    /// A received frame whose body starts at `body_offset`, undecoded.
    fn received(api: ApiKey, version: i16, body_offset: usize, frame: BytesMut) -> Self {
        Self {
            api,
            version,
            body_offset,
            frame: frame.freeze(),
            body: None,
            dirty: false,
        }
    }

    /// A message built from a body, to be encoded.
    fn built(api: ApiKey, version: i16, body: K) -> Self {
        Self {
            api,
            version,
            body_offset: 0,
            frame: Bytes::new(),
            body: Some(body),
            dirty: true,
        }
    }

    /// The frame as received, unless the body may have changed.
    fn raw_frame(&self) -> Option<&Bytes> {
        (!self.dirty).then_some(&self.frame)
    }

    /// The body bytes as received, unless the body may have changed.
    fn raw_body(&self) -> Option<&[u8]> {
        self.raw_frame()?.get(self.body_offset..)
    }

    /// Decodes the body if needed and returns it.
    fn body(&mut self) -> Result<&K, CodecError> {
        self.decode()?;
        self.body.as_ref().ok_or(Self::missing())
    }

    /// Decodes the body if needed and returns it for modification, marking
    /// the message dirty.
    fn body_mut(&mut self) -> Result<&mut K, CodecError> {
        self.decode()?;
        self.dirty = true;
        self.body.as_mut().ok_or(Self::missing())
    }

    /// Decodes the body if needed and returns it.
    fn into_body(mut self) -> Result<K, CodecError> {
        self.decode()?;
        self.body.ok_or(Self::missing())
    }

    fn decode(&mut self) -> Result<(), CodecError> {
        if self.body.is_some() {
            return Ok(());
        }
        let (api, version) = (self.api, self.version);
        let mut bytes = body_slice(&self.frame, self.body_offset);
        K::check(api, version, &bytes)?;
        let body = K::decode(api, &mut bytes, version).map_err(|reason| CodecError::Decode {
            api,
            version,
            kind: K::KIND,
            reason,
        })?;
        self.body = Some(body);
        Ok(())
    }

    /// Queues the frame as received on `out` (false, and nothing queued,
    /// once dirty): its length and the bytes up to the correlation id (at
    /// `id_offset`) written anew with id `id`, the rest shared.
    fn put_raw_shared(
        &self,
        out: &mut OutFrames,
        id_offset: usize,
        id: i32,
    ) -> Result<bool, CodecError> {
        if self.dirty {
            return Ok(false);
        }
        let frame = &self.frame;
        let Some(head) = frame
            .get(..id_offset)
            .filter(|_| frame.len() >= id_offset + 4)
        else {
            return Err(CodecError::Truncated {
                what: "frame correlation id",
                needed: id_offset + 4,
                available: frame.len(),
            });
        };
        let len = frame_len(frame.len())?;
        let buf = out.buf_mut();
        buf.put_i32(len);
        buf.put_slice(head);
        buf.put_i32(id);
        out.put_shared(frame.slice(id_offset + 4..));
        Ok(true)
    }

    /// Appends the length-prefixed frame to `dst`: the raw frame with
    /// correlation id `id` at `id_offset`, or, once dirty, the header
    /// `put_header` writes (length placeholder first) and the re-encoded
    /// body. On error `dst` is left as it was.
    fn encode(
        &self,
        dst: &mut BytesMut,
        id_offset: usize,
        id: i32,
        put_header: impl FnOnce(&mut BytesMut) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        if !self.dirty {
            return put_raw_frame(dst, &self.frame, id_offset, id);
        }
        let body = self.body.as_ref().ok_or(Self::missing())?;
        let start = dst.len();
        let result = put_header(dst).and_then(|()| {
            body.encode(dst, self.version)
                .map_err(|reason| CodecError::Encode {
                    api: self.api,
                    version: self.version,
                    kind: K::KIND,
                    reason,
                })
        });
        finish_frame(dst, start, result)
    }

    fn missing() -> CodecError {
        CodecError::Malformed { what: K::MISSING }
    }
}

/// The body of `frame` from `offset` on, sharing its memory.
fn body_slice(frame: &Bytes, offset: usize) -> Bytes {
    frame.slice(offset.min(frame.len())..)
}

/// Writes a received frame with its correlation id (at `id_offset`) replaced.
fn put_raw_frame(
    dst: &mut BytesMut,
    frame: &[u8],
    id_offset: usize,
    id: i32,
) -> Result<(), CodecError> {
    let len = frame_len(frame.len())?;
    let (head, tail) = match (frame.get(..id_offset), frame.get(id_offset + 4..)) {
        (Some(head), Some(tail)) => (head, tail),
        _ => {
            return Err(CodecError::Truncated {
                what: "frame correlation id",
                needed: id_offset + 4,
                available: frame.len(),
            });
        }
    };
    dst.reserve(4 + frame.len());
    dst.put_i32(len);
    dst.put_slice(head);
    dst.put_i32(id);
    dst.put_slice(tail);
    Ok(())
}

/// Writes the length placeholder and a request header (v0, v1 or v2) by hand,
/// so that a client id is written back byte for byte, UTF-8 or not.
fn put_request_header(dst: &mut BytesMut, header: &RequestHeaderInfo) -> Result<(), CodecError> {
    dst.put_i32(0);
    dst.put_i16(header.api_key as i16);
    dst.put_i16(header.api_version);
    dst.put_i32(header.correlation_id);
    if header.header_version >= 1 {
        match &header.client_id {
            None => dst.put_i16(-1),
            Some(id) => {
                let len = i16::try_from(id.len()).map_err(|_| CodecError::Malformed {
                    what: "client id longer than 32767 bytes",
                })?;
                dst.put_i16(len);
                dst.put_slice(id);
            }
        }
    }
    if header.header_version >= 2 {
        dst.put_u8(0); // no tagged fields
    }
    Ok(())
}

/// Patches the length prefix at `start`, or rolls `dst` back on error.
fn finish_frame(
    dst: &mut BytesMut,
    start: usize,
    result: Result<(), CodecError>,
) -> Result<(), CodecError> {
    let len = dst.len().saturating_sub(start + 4);
    match result.and_then(|()| frame_len(len)) {
        Ok(len32) => {
            dst[start..start + 4].copy_from_slice(&len32.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

fn frame_len(len: usize) -> Result<i32, CodecError> {
    i32::try_from(len).map_err(|_| CodecError::FrameTooLarge {
        size: len,
        max: i32::MAX as usize,
    })
}

/// Reads `acks` from a Produce request body without decoding it.
///
/// Produce v0-v2 start with `acks: i16`; v3+ first carry `transactional_id`
/// (a nullable string, compact from v9, the first flexible version).
/// A Fetch request's `max_bytes` before and after
/// [`Request::parse_with_fetch_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchMaxBytes {
    /// What the client asked for.
    pub asked: i32,
    /// What the request carries now: `asked`, or the limit if lower.
    pub carried: i32,
}

/// Lowers the `max_bytes` of the Fetch request in `frame` to `limit`, in place.
///
/// The field sits at a fixed offset at the start of the body in every
/// version that has it (3 and up): after `replica_id` (versions 3 to 14;
/// 15 and up carry it as a tagged field), `max_wait_ms` and `min_bytes`.
fn clamp_fetch_max_bytes(
    frame: &mut BytesMut,
    header: &RequestHeaderInfo,
    limit: i32,
) -> Result<FetchMaxBytes, CodecError> {
    let replica_id = if header.api_version <= 14 { 4 } else { 0 };
    let at = header.body_offset + replica_id + 8;
    let field = frame.get_mut(at..at + 4).ok_or(CodecError::Malformed {
        what: "fetch request max_bytes",
    })?;
    let mut raw = [0; 4];
    raw.copy_from_slice(field);
    let asked = i32::from_be_bytes(raw);
    let carried = asked.min(limit);
    if carried != asked {
        field.copy_from_slice(&carried.to_be_bytes());
    }
    Ok(FetchMaxBytes { asked, carried })
}

fn produce_acks(frame: &[u8], header: &RequestHeaderInfo) -> Result<i16, CodecError> {
    let body = frame.get(header.body_offset..).unwrap_or_default();
    let mut cur = Cursor::new(body, "produce request");
    if header.api_version >= 9 {
        let n = cur.unsigned_varint()?;
        if n > 0 {
            cur.take(n as usize - 1)?;
        }
    } else if header.api_version >= 3 {
        let n = cur.i16()?;
        if n < -1 {
            return Err(CodecError::Malformed {
                what: "produce transactional id length",
            });
        }
        if n > 0 {
            cur.take(n.unsigned_abs().into())?;
        }
    }
    cur.i16()
}
