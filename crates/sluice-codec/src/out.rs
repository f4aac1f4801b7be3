//! Frames on their way to a socket, without copying what they share.
//!
//! Most of what Sluice writes to a client is bytes it read from a broker: a
//! passthrough frame, or the record batches of a merged fetch. Copying them
//! into one write buffer would cost a memcpy per byte moved, the largest
//! cost Sluice adds to a consumer after the kernel's own copies. An
//! [`OutFrames`] instead gathers the small bytes Sluice writes itself
//! (length prefixes, headers, re-encoded structure) in a buffer and keeps
//! large shared [`Bytes`] as they are, in order, for one vectored write.

use std::collections::VecDeque;
#[cfg(feature = "tokio")]
use std::io::IoSlice;

#[cfg(feature = "tokio")]
use bytes::Buf;
use bytes::{Bytes, BytesMut};

/// Shared bytes shorter than this are copied: a copy this small costs less
/// than one more slice in the vectored write.
pub(crate) const SHARE_MIN_BYTES: usize = 1024;

/// The most slices one vectored write is given (Linux's `IOV_MAX` is 1024).
#[cfg(feature = "tokio")]
const MAX_SLICES: usize = 64;

/// Encoded frames waiting to be written, in order.
#[derive(Debug, Default)]
pub struct OutFrames {
    /// Finished chunks, oldest first.
    chunks: VecDeque<Bytes>,
    /// Small bytes written after the last chunk.
    buf: BytesMut,
    /// Total bytes queued.
    len: usize,
}

/// Where an [`OutFrames`] stood, to go back to if an encode fails.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    chunks: usize,
    buf: usize,
    len: usize,
}

impl OutFrames {
    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.len + self.buf.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer for small bytes; what is written to it is queued after
    /// everything before.
    pub fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Queues `bytes`: referenced when large, copied into the buffer when
    /// small.
    pub(crate) fn put_shared(&mut self, bytes: Bytes) {
        if bytes.len() < SHARE_MIN_BYTES {
            self.buf.extend_from_slice(&bytes);
            return;
        }
        self.seal();
        self.len += bytes.len();
        self.chunks.push_back(bytes);
    }

    /// The chunks queued so far (the buffer's bytes not yet among them),
    /// for tests that check what was shared rather than copied.
    #[cfg(test)]
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &Bytes> {
        self.chunks.iter()
    }

    /// Where the queue stands now.
    pub fn mark(&self) -> Mark {
        Mark {
            chunks: self.chunks.len(),
            buf: self.buf.len(),
            len: self.len,
        }
    }

    /// Drops what was queued since `mark` (taken with nothing written since).
    pub fn rewind(&mut self, mark: Mark) {
        if self.chunks.len() > mark.chunks {
            // The first chunk pushed after the mark starts with the bytes the
            // buffer held at the mark (none if it was empty then).
            let first = self.chunks.drain(mark.chunks..).next();
            self.buf = first.map(BytesMut::from).unwrap_or_default();
        }
        self.buf.truncate(mark.buf);
        self.len = mark.len;
    }

    /// Moves the buffer's bytes into a chunk of their own.
    fn seal(&mut self) {
        if !self.buf.is_empty() {
            let sealed = self.buf.split().freeze();
            self.len += sealed.len();
            self.chunks.push_back(sealed);
        }
    }

    /// Writes everything queued with vectored writes, then flushes.
    #[cfg(feature = "tokio")]
    pub async fn write_to<W: tokio::io::AsyncWrite + Unpin>(
        &mut self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let len = self.len();
        self.write_prefix_to(out, len).await
    }

    /// Writes the first `len` bytes queued (all of them if fewer) with
    /// vectored writes, then flushes; the rest stays queued.
    #[cfg(feature = "tokio")]
    pub async fn write_prefix_to<W: tokio::io::AsyncWrite + Unpin>(
        &mut self,
        out: &mut W,
        len: usize,
    ) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.seal();
        let mut left = len.min(self.len);
        while left > 0 {
            let mut budget = left;
            let slices: Vec<IoSlice<'_>> = self
                .chunks
                .iter()
                .take(MAX_SLICES)
                .map_while(|c| {
                    let take = c.len().min(budget);
                    budget -= take;
                    c.get(..take).filter(|s| !s.is_empty()).map(IoSlice::new)
                })
                .collect();
            let written = out.write_vectored(&slices).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.advance(written);
            left = left.saturating_sub(written);
        }
        out.flush().await
    }

    /// Everything queued, in order, as one byte string, leaving nothing
    /// queued: what writing it all would send, for a caller with no socket
    /// (a fuzz target, a test).
    pub fn take_bytes(&mut self) -> Vec<u8> {
        self.seal();
        let mut bytes = Vec::with_capacity(self.len);
        for chunk in self.chunks.drain(..) {
            bytes.extend_from_slice(&chunk);
        }
        self.len = 0;
        bytes
    }

    /// Gives back the buffer's memory above `keep_bytes` once nothing is
    /// queued (after a large frame).
    pub fn shrink(&mut self, keep_bytes: usize) {
        if self.is_empty() && self.buf.capacity() > keep_bytes {
            self.buf = BytesMut::new();
        }
    }

    /// Drops `n` written bytes from the front.
    #[cfg(feature = "tokio")]
    fn advance(&mut self, mut n: usize) {
        self.len = self.len.saturating_sub(n);
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            if front.len() > n {
                front.advance(n);
                return;
            }
            n -= front.len();
            self.chunks.pop_front();
        }
    }
}

#[cfg(all(test, feature = "tokio"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn collect(frames: &mut OutFrames) -> Vec<u8> {
        let mut out = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(frames.write_to(&mut out)).unwrap();
        out
    }

    #[test]
    fn small_and_shared_bytes_come_out_in_order() {
        let mut frames = OutFrames::default();
        frames.buf_mut().extend_from_slice(b"head");
        let big = Bytes::from(vec![7u8; SHARE_MIN_BYTES]);
        frames.put_shared(big.clone());
        frames.put_shared(Bytes::from_static(b"tiny"));
        frames.buf_mut().extend_from_slice(b"tail");
        assert_eq!(frames.len(), 4 + big.len() + 8);
        let mut want = b"head".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"tinytail");
        assert_eq!(collect(&mut frames), want);
        assert!(frames.is_empty());
    }

    #[test]
    fn take_bytes_gives_what_a_write_would_send() {
        let fill = |frames: &mut OutFrames| {
            frames.buf_mut().extend_from_slice(b"head");
            frames.put_shared(Bytes::from(vec![3u8; SHARE_MIN_BYTES * 3]));
            frames.buf_mut().extend_from_slice(b"tail");
        };
        let (mut written, mut taken) = (OutFrames::default(), OutFrames::default());
        fill(&mut written);
        fill(&mut taken);
        assert_eq!(taken.take_bytes(), collect(&mut written));
        assert!(taken.is_empty());
        assert!(taken.take_bytes().is_empty());
    }

    #[test]
    fn a_prefix_is_written_and_the_rest_stays_queued() {
        let mut frames = OutFrames::default();
        frames.buf_mut().extend_from_slice(b"first");
        let big = Bytes::from(vec![9u8; SHARE_MIN_BYTES * 2]);
        frames.put_shared(big.clone());
        frames.buf_mut().extend_from_slice(b"second");
        let mut written = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(frames.write_prefix_to(&mut written, 5 + 100))
            .unwrap();
        assert_eq!(written.len(), 105, "exactly the prefix");
        assert_eq!(frames.len(), big.len() - 100 + 6);
        let rest = collect(&mut frames);
        let mut all = written;
        all.extend_from_slice(&rest);
        let mut want = b"first".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"second");
        assert_eq!(all, want);
    }

    #[test]
    fn rewind_drops_what_came_after_the_mark() {
        let mut frames = OutFrames::default();
        frames.buf_mut().extend_from_slice(b"kept");
        let mark = frames.mark();
        frames.buf_mut().extend_from_slice(b"gone");
        frames.put_shared(Bytes::from(vec![1u8; SHARE_MIN_BYTES * 2]));
        frames.buf_mut().extend_from_slice(b"gone too");
        frames.rewind(mark);
        assert_eq!(frames.len(), 4);
        assert_eq!(collect(&mut frames), b"kept");
    }
}
