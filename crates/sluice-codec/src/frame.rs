//! Kafka's length-prefixed framing.
//!
//! Every Kafka message on the wire is a big-endian `i32` size followed by that
//! many bytes. [`FrameCodec`] splits a byte stream into such frames (without the
//! prefix) and refuses frames over a limit before buffering them, so a peer
//! announcing a 2 GiB frame costs us nothing but an error. Below the limit it
//! reserves at most [`MAX_UPFRONT_RESERVE`] ahead of the bytes that arrive, so
//! four bytes announcing 100 MiB cannot make us allocate 100 MiB either.

use bytes::{Buf, BufMut, BytesMut};
#[cfg(feature = "tokio")]
use tokio_util::codec::{Decoder, Encoder};

use crate::CodecError;

/// Kafka's own default for `socket.request.max.bytes`: 100 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// The most buffer space reserved for a frame before its bytes arrive.
pub const MAX_UPFRONT_RESERVE: usize = 1024 * 1024;

/// Splits a stream into length-prefixed frames and writes them back.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    max_frame_bytes: usize,
}

impl FrameCodec {
    /// A codec that rejects frames larger than `max_frame_bytes`.
    pub fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes }
    }

    /// Changes the limit for the frames decoded from now on (e.g. when a
    /// client authenticates). A frame whose prefix was already checked is
    /// checked again against the new limit.
    pub fn set_max_frame_bytes(&mut self, max_frame_bytes: usize) {
        self.max_frame_bytes = max_frame_bytes;
    }

    /// The current limit.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Takes the next whole frame (without its prefix) off the front of
    /// `src`; `None` until all of it is there.
    pub fn decode_frame(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, CodecError> {
        if let Some(frame) = self.take_frame(src)? {
            return Ok(Some(frame));
        }
        if let Some(size) = self.check_prefix(src)? {
            src.reserve((4 + size - src.len()).min(MAX_UPFRONT_RESERVE));
        }
        Ok(None)
    }

    /// Takes the next whole frame (without its prefix) off the front of
    /// `src`, as [`FrameCodec::decode_frame`] does, but reserves nothing: for
    /// a caller that sizes its buffer itself (a client connection sizes it
    /// only once its memory budget has admitted the frame).
    pub fn take_frame(&self, src: &mut BytesMut) -> Result<Option<BytesMut>, CodecError> {
        match self.check_prefix(src)? {
            Some(size) if src.len() >= 4 + size => {
                src.advance(4);
                Ok(Some(src.split_to(size)))
            }
            _ => Ok(None),
        }
    }

    /// Appends `frame` to `dst` behind its length prefix.
    pub fn encode_frame(&mut self, frame: &[u8], dst: &mut BytesMut) -> Result<(), CodecError> {
        let len = i32::try_from(frame.len()).map_err(|_| CodecError::FrameTooLarge {
            size: frame.len(),
            max: i32::MAX as usize,
        })?;
        dst.reserve(4 + frame.len());
        dst.put_i32(len);
        dst.put_slice(frame);
        Ok(())
    }

    /// Checks the length prefix at the start of `src`, if it is there, as
    /// [`FrameCodec::decode_frame`] does, without taking anything: a caller that holds
    /// a frame back can still refuse one that is too large before reading it.
    pub fn check_prefix(&self, src: &[u8]) -> Result<Option<usize>, CodecError> {
        let Some(prefix) = src.get(..4) else {
            return Ok(None);
        };
        let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let size = usize::try_from(len).map_err(|_| CodecError::NegativeLength(len))?;
        if size > self.max_frame_bytes {
            return Err(CodecError::FrameTooLarge {
                size,
                max: self.max_frame_bytes,
            });
        }
        Ok(Some(size))
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

#[cfg(feature = "tokio")]
impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, CodecError> {
        self.decode_frame(src)
    }
}

#[cfg(feature = "tokio")]
impl Encoder<&[u8]> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &[u8], dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode_frame(frame, dst)
    }
}

#[cfg(all(test, feature = "tokio"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_frames_and_waits_for_more() {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        codec.encode(b"hello".as_slice(), &mut buf).unwrap();
        codec.encode(b"".as_slice(), &mut buf).unwrap();
        buf.extend_from_slice(&[0, 0, 0, 9, 1, 2]);
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"hello");
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"");
        assert!(codec.decode(&mut buf).unwrap().is_none());
    }

    #[test]
    fn a_raised_limit_admits_a_frame_the_old_one_refused() {
        let mut codec = FrameCodec::new(8);
        let mut buf = BytesMut::new();
        codec.encode(b"0123456789".as_slice(), &mut buf).unwrap();
        assert!(matches!(
            codec.decode(&mut buf.clone()),
            Err(CodecError::FrameTooLarge { size: 10, max: 8 })
        ));
        codec.set_max_frame_bytes(16);
        assert_eq!(codec.max_frame_bytes(), 16);
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"0123456789");
    }

    #[test]
    fn take_frame_splits_whole_frames_and_reserves_nothing() {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::new();
        codec.encode(b"hello".as_slice(), &mut buf).unwrap();
        buf.extend_from_slice(&[0, 0, 3, 232, 1, 2]);
        assert_eq!(&codec.take_frame(&mut buf).unwrap().unwrap()[..], b"hello");
        let capacity = buf.capacity();
        assert!(codec.take_frame(&mut buf).unwrap().is_none());
        assert_eq!(buf.capacity(), capacity, "a partial frame reserves nothing");
        assert_eq!(&buf[..], &[0, 0, 3, 232, 1, 2]);
        let mut too_large = BytesMut::from(&2048i32.to_be_bytes()[..]);
        assert!(matches!(
            codec.take_frame(&mut too_large),
            Err(CodecError::FrameTooLarge {
                size: 2048,
                max: 1024
            })
        ));
    }

    #[test]
    fn rejects_oversized_and_negative_lengths_without_buffering() {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::from(&(200 * 1024 * 1024i32).to_be_bytes()[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(CodecError::FrameTooLarge { size, max: 1024 }) if size == 200 * 1024 * 1024
        ));
        let mut buf = BytesMut::from(&(-5i32).to_be_bytes()[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(CodecError::NegativeLength(-5))
        ));
    }
}
