//! Request and response headers, parsed by hand.
//!
//! Routing needs only the api key, version and correlation id, and those sit at
//! fixed offsets. Parsing them directly (instead of decoding a full
//! `RequestHeader`) keeps the hot path free of allocation, and tells us where
//! the body starts so that it can be decoded later, or never.
//!
//! Layout (all big-endian):
//! ```text
//! request header v0: api_key i16 | api_version i16 | correlation_id i32
//! request header v1: v0 | client_id nullable_string(i16 length)
//! request header v2: v1 | tagged_fields
//! response header v0: correlation_id i32
//! response header v1: v0 | tagged_fields
//! ```

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::CodecError;

/// Byte offset of the correlation id in a request frame.
pub(crate) const REQUEST_CORRELATION_ID_OFFSET: usize = 4;

/// The parts of a request header that Sluice needs, plus where the body starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderInfo {
    /// The api key, known to Sluice.
    pub api_key: ApiKey,
    /// The version the client chose.
    pub api_version: i16,
    /// The client's correlation id.
    pub correlation_id: i32,
    /// The client id, if the header version carries one and it is not null.
    pub client_id: Option<Bytes>,
    /// Request header version (0, 1 or 2).
    pub header_version: i16,
    /// Offset of the body in the frame.
    pub body_offset: usize,
}

impl RequestHeaderInfo {
    /// Parses the header at the start of `frame` (a frame without its length prefix).
    pub(crate) fn parse(frame: &[u8]) -> Result<Self, CodecError> {
        let mut cur = Cursor::new(frame, "request header");
        let raw_key = cur.i16()?;
        let api_key = ApiKey::try_from(raw_key).map_err(|()| CodecError::UnknownApiKey(raw_key))?;
        let api_version = cur.i16()?;
        let correlation_id = cur.i32()?;
        let header_version = api_key.request_header_version(api_version);
        let mut client_id = None;
        if header_version >= 1 {
            let len = cur.i16()?;
            if len >= 0 {
                let bytes = cur.take(len as usize)?;
                client_id = Some(Bytes::copy_from_slice(bytes));
            } else if len != -1 {
                return Err(CodecError::Malformed {
                    what: "client id length",
                });
            }
        }
        if header_version >= 2 {
            cur.skip_tagged_fields()?;
        }
        Ok(Self {
            api_key,
            api_version,
            correlation_id,
            client_id,
            header_version,
            body_offset: cur.pos,
        })
    }

    /// The client id as text, lossily, for logs.
    pub fn client_id_lossy(&self) -> std::borrow::Cow<'_, str> {
        match &self.client_id {
            Some(id) => String::from_utf8_lossy(id),
            None => std::borrow::Cow::Borrowed(""),
        }
    }
}

/// Returns the offset of the body of a response frame for `api_key`/`api_version`.
pub fn response_body_offset(
    frame: &[u8],
    api_key: ApiKey,
    api_version: i16,
) -> Result<usize, CodecError> {
    let mut cur = Cursor::new(frame, "response header");
    cur.i32()?;
    if api_key.response_header_version(api_version) >= 1 {
        cur.skip_tagged_fields()?;
    }
    Ok(cur.pos)
}

/// Reads the correlation id at the start of a response frame.
pub fn response_correlation_id(frame: &[u8]) -> Result<i32, CodecError> {
    Cursor::new(frame, "response header").i32()
}

/// A bounds-checked reader over a byte slice. Never panics.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pub(crate) pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        match end {
            Some(end) => {
                let out = &self.buf[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(CodecError::Truncated {
                what: self.what,
                needed: n,
                available: self.buf.len().saturating_sub(self.pos),
            }),
        }
    }

    pub(crate) fn i16(&mut self) -> Result<i16, CodecError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, CodecError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Reads an unsigned varint of at most 32 bits, as Kafka encodes them:
    /// at most five bytes, the fifth carrying only four bits.
    pub(crate) fn unsigned_varint(&mut self) -> Result<u32, CodecError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            if shift == 28 && byte > 0x0f {
                return Err(CodecError::Malformed {
                    what: "varint longer than 32 bits",
                });
            }
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CodecError::Malformed {
            what: "varint longer than 32 bits",
        })
    }

    pub(crate) fn skip_tagged_fields(&mut self) -> Result<(), CodecError> {
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }
}
