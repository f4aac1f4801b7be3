//! [`Request`] and [`Response`]: raw frames with lazily decoded bodies.
//!
//! A message starts as the bytes read from the wire. Its header is parsed at
//! once (cheap, fixed offsets); its body is decoded only when [`Request::body`]
//! or [`Request::body_mut`] is called. Asking for `body_mut` marks the message
//! dirty, and only a dirty message is re-encoded on the way out; every other
//! message leaves as the bytes it came in as, with the correlation id patched in
//! place when a broker connection assigns its own.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::CodecError;
use crate::header::{
    Cursor, REQUEST_CORRELATION_ID_OFFSET, RequestHeaderInfo, response_body_offset,
};

/// A Kafka request: its parsed header, raw frame and (maybe) decoded body.
#[derive(Debug, Clone)]
pub struct Request {
    header: RequestHeaderInfo,
    /// The frame without its length prefix. Stale while `dirty`.
    frame: BytesMut,
    body: Option<RequestKind>,
    dirty: bool,
}

impl Request {
    /// Parses the header of a request frame; the body stays undecoded.
    pub fn parse(frame: BytesMut) -> Result<Self, CodecError> {
        let header = RequestHeaderInfo::parse(&frame)?;
        Ok(Self {
            header,
            frame,
            body: None,
            dirty: false,
        })
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
            frame: BytesMut::new(),
            body: Some(body),
            dirty: true,
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
        self.dirty
    }

    /// Size of the frame on the wire, without the length prefix (an estimate when dirty).
    pub fn wire_len(&self) -> usize {
        self.frame.len()
    }

    /// Replaces the correlation id, patching the raw frame in place.
    pub fn set_correlation_id(&mut self, id: i32) {
        self.header.correlation_id = id;
        if !self.dirty {
            let at = REQUEST_CORRELATION_ID_OFFSET;
            if let Some(slot) = self.frame.get_mut(at..at + 4) {
                slot.copy_from_slice(&id.to_be_bytes());
            }
        }
    }

    /// Decodes the body if needed and returns it.
    pub fn body(&mut self) -> Result<&RequestKind, CodecError> {
        self.decode_body()?;
        self.body.as_ref().ok_or(CodecError::Malformed {
            what: "request body",
        })
    }

    /// Decodes the body if needed and returns it for modification; the request
    /// will be re-encoded when written.
    pub fn body_mut(&mut self) -> Result<&mut RequestKind, CodecError> {
        self.decode_body()?;
        self.dirty = true;
        self.body.as_mut().ok_or(CodecError::Malformed {
            what: "request body",
        })
    }

    /// Consumes the request and returns its decoded body.
    pub fn into_body(mut self) -> Result<RequestKind, CodecError> {
        self.decode_body()?;
        self.body.ok_or(CodecError::Malformed {
            what: "request body",
        })
    }

    fn decode_body(&mut self) -> Result<(), CodecError> {
        if self.body.is_some() {
            return Ok(());
        }
        let (api, version) = (self.header.api_key, self.header.api_version);
        let raw = self
            .frame
            .get(self.header.body_offset..)
            .unwrap_or_default();
        let mut bytes = Bytes::copy_from_slice(raw);
        let body =
            RequestKind::decode(api, &mut bytes, version).map_err(|e| CodecError::Decode {
                api,
                version,
                kind: "request",
                reason: format!("{e:#}"),
            })?;
        self.body = Some(body);
        Ok(())
    }

    /// Whether the broker will answer this request. Only Produce with `acks=0`
    /// has no response.
    pub fn expects_response(&self) -> bool {
        if self.header.api_key != ApiKey::Produce {
            return true;
        }
        match &self.body {
            Some(RequestKind::Produce(p)) if self.dirty => p.acks != 0,
            _ => produce_acks(&self.frame, &self.header).map_or(true, |acks| acks != 0),
        }
    }

    /// Appends the length-prefixed frame to `dst`, re-encoding a dirty body.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), CodecError> {
        if !self.dirty {
            put_frame(dst, &self.frame);
            return Ok(());
        }
        let (api, version) = (self.header.api_key, self.header.api_version);
        let err = |e: anyhow_like::Error| CodecError::Encode {
            api,
            version,
            kind: "request",
            reason: e.0,
        };
        let start = dst.len();
        dst.put_i32(0);
        let client_id = self
            .header
            .client_id
            .clone()
            .map(StrBytes::from_utf8)
            .transpose()
            .map_err(|_| CodecError::Malformed { what: "client id" })?;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.header.correlation_id)
            .with_client_id(client_id);
        header
            .encode(dst, self.header.header_version)
            .map_err(|e| err(e.into()))?;
        let body = self.body.as_ref().ok_or(CodecError::Malformed {
            what: "request body",
        })?;
        body.encode(dst, version).map_err(|e| err(e.into()))?;
        patch_length(dst, start)
    }
}

/// A Kafka response: raw frame and (maybe) decoded body.
#[derive(Debug, Clone)]
pub struct Response {
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    frame: BytesMut,
    body_offset: usize,
    body: Option<ResponseKind>,
    dirty: bool,
}

impl Response {
    /// Parses the header of a response to a request of `api_key`/`api_version`.
    pub fn parse(frame: BytesMut, api_key: ApiKey, api_version: i16) -> Result<Self, CodecError> {
        let correlation_id = Cursor::new(&frame, "response header").i32()?;
        let body_offset = response_body_offset(&frame, api_key, api_version)?;
        Ok(Self {
            api_key,
            api_version,
            correlation_id,
            frame,
            body_offset,
            body: None,
            dirty: false,
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
            api_key,
            api_version,
            correlation_id,
            frame: BytesMut::new(),
            body_offset: 0,
            body: Some(body),
            dirty: true,
        }
    }

    /// The api key of the request this answers.
    pub fn api_key(&self) -> ApiKey {
        self.api_key
    }

    /// The api version of the request this answers.
    pub fn api_version(&self) -> i16 {
        self.api_version
    }

    /// The correlation id currently in the header.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }

    /// Whether the body was decoded for modification.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Size of the raw frame, without the length prefix (0 when built from a body).
    pub fn wire_len(&self) -> usize {
        self.frame.len()
    }

    /// Replaces the correlation id, patching the raw frame in place.
    pub fn set_correlation_id(&mut self, id: i32) {
        self.correlation_id = id;
        if !self.dirty {
            if let Some(slot) = self.frame.get_mut(0..4) {
                slot.copy_from_slice(&id.to_be_bytes());
            }
        }
    }

    /// Decodes the body if needed and returns it.
    pub fn body(&mut self) -> Result<&ResponseKind, CodecError> {
        self.decode_body()?;
        self.body.as_ref().ok_or(CodecError::Malformed {
            what: "response body",
        })
    }

    /// Decodes the body if needed and returns it for modification.
    pub fn body_mut(&mut self) -> Result<&mut ResponseKind, CodecError> {
        self.decode_body()?;
        self.dirty = true;
        self.body.as_mut().ok_or(CodecError::Malformed {
            what: "response body",
        })
    }

    /// Consumes the response and returns its decoded body.
    pub fn into_body(mut self) -> Result<ResponseKind, CodecError> {
        self.decode_body()?;
        self.body.ok_or(CodecError::Malformed {
            what: "response body",
        })
    }

    fn decode_body(&mut self) -> Result<(), CodecError> {
        if self.body.is_some() {
            return Ok(());
        }
        let (api, version) = (self.api_key, self.api_version);
        let raw = self.frame.get(self.body_offset..).unwrap_or_default();
        let mut bytes = Bytes::copy_from_slice(raw);
        let body =
            ResponseKind::decode(api, &mut bytes, version).map_err(|e| CodecError::Decode {
                api,
                version,
                kind: "response",
                reason: format!("{e:#}"),
            })?;
        self.body = Some(body);
        Ok(())
    }

    /// Appends the length-prefixed frame to `dst`, re-encoding a dirty body.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), CodecError> {
        if !self.dirty {
            put_frame(dst, &self.frame);
            return Ok(());
        }
        let (api, version) = (self.api_key, self.api_version);
        let err = |e: anyhow_like::Error| CodecError::Encode {
            api,
            version,
            kind: "response",
            reason: e.0,
        };
        let start = dst.len();
        dst.put_i32(0);
        let header = ResponseHeader::default().with_correlation_id(self.correlation_id);
        header
            .encode(dst, api.response_header_version(version))
            .map_err(|e| err(e.into()))?;
        let body = self.body.as_ref().ok_or(CodecError::Malformed {
            what: "response body",
        })?;
        body.encode(dst, version).map_err(|e| err(e.into()))?;
        patch_length(dst, start)
    }
}

fn put_frame(dst: &mut BytesMut, frame: &[u8]) {
    dst.reserve(4 + frame.len());
    // A frame we read was at most the configured limit, far below i32::MAX.
    dst.put_i32(i32::try_from(frame.len()).unwrap_or(i32::MAX));
    dst.put_slice(frame);
}

fn patch_length(dst: &mut BytesMut, start: usize) -> Result<(), CodecError> {
    let len = dst.len() - start - 4;
    let len32 = i32::try_from(len).map_err(|_| CodecError::FrameTooLarge {
        size: len,
        max: i32::MAX as usize,
    })?;
    dst[start..start + 4].copy_from_slice(&len32.to_be_bytes());
    Ok(())
}

/// Reads `acks` from a Produce request body without decoding it.
///
/// Produce v3+ starts with `transactional_id` (nullable string; compact from
/// v9) followed by `acks: i16`.
fn produce_acks(frame: &[u8], header: &RequestHeaderInfo) -> Result<i16, CodecError> {
    let body = frame.get(header.body_offset..).unwrap_or_default();
    let mut cur = Cursor::new(body, "produce request");
    if header.api_version >= 9 {
        let n = cur.unsigned_varint()?;
        if n > 0 {
            cur.take(n as usize - 1)?;
        }
    } else {
        let n = cur.i16()?;
        if n > 0 {
            cur.take(n as usize)?;
        }
    }
    cur.i16()
}

/// `kafka-protocol` reports errors as `anyhow::Error`; carry only the text so
/// that this crate does not depend on `anyhow` itself.
mod anyhow_like {
    pub struct Error(pub String);
    impl<E: std::fmt::Display> From<E> for Error {
        fn from(e: E) -> Self {
            Self(format!("{e:#}"))
        }
    }
}
