//! How a client connection's read buffer is sized before each read.
//!
//! A request is read in place: once its length prefix is known (and the
//! memory budgets admitted it, which the caller checks), the buffer gets
//! room for the whole frame in one allocation of that size, and the reads
//! fill it. Grown as bytes arrive instead, a produce request of a few
//! hundred KiB would be copied at each growth, nearly all of it, and held up
//! to twice its size. What is copied is only what arrived before the length
//! was known, which is little: the read that brings a prefix takes at most
//! one chunk, and after a frame longer than a chunk (a producer's, whose
//! next one is likely as long) only the next prefix, so that the frame
//! after it is read whole into its own buffer and nothing is copied. That
//! costs no extra read while frames stay long: a frame longer than a chunk
//! takes two reads or more either way.

use bytes::BytesMut;
use sluice_codec::MAX_UPFRONT_RESERVE;

/// What a read between frames takes at most after a frame of `last_frame`
/// bytes (with its prefix): `chunk`, or only the next length prefix after a
/// frame longer than that.
pub(super) fn between_frames(chunk: usize, last_frame: usize) -> usize {
    if last_frame > chunk { PREFIX } else { chunk }
}

/// The length prefix of a frame.
const PREFIX: usize = 4;

/// Makes room in `buf` for the next read, and says how many bytes that read
/// may take. The caller reads on only while the frame it has started, if
/// any, is admitted by the memory budgets.
///
/// Between frames (fewer than 4 bytes of the next one buffered) the read
/// takes at most `chunk` ([`between_frames`]), into free space of at least
/// that (what completes the prefix, if `chunk` is the prefix's size). Once a frame's
/// length is known, the buffer is given room for the rest of it in one
/// allocation, and the read may take the rest of the frame (or `chunk`, if
/// more), so what follows the frame in the buffer is never more than one
/// chunk either. Room is made at most [`MAX_UPFRONT_RESERVE`] or what has
/// arrived, whichever is more, past what has arrived: four bytes announcing a
/// large frame allocate no more than that, and a frame larger than it grows
/// by doubling once the buffer is nearly full (each byte copied about once).
/// `max_frame_bytes` caps the length trusted (the codec has refused a longer
/// prefix already).
pub(super) fn prepare_read(buf: &mut BytesMut, chunk: usize, max_frame_bytes: usize) -> usize {
    let declared = buf
        .get(..PREFIX)
        .map(|p| i32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .and_then(|len| usize::try_from(len).ok())
        .map(|len| PREFIX + len.min(max_frame_bytes));
    match declared {
        Some(frame) if buf.len() < frame => {
            let rest = frame - buf.len();
            // A rest within the upfront reserve gets all its room at once;
            // a longer one more room once little is left.
            let enough = if rest <= MAX_UPFRONT_RESERVE {
                rest
            } else {
                chunk
            };
            if buf.capacity() - buf.len() < enough {
                let room = rest.min(MAX_UPFRONT_RESERVE.max(buf.len()));
                make_room(buf, room.max(chunk));
            }
            rest.max(chunk)
        }
        _ => {
            let limit = if chunk <= PREFIX {
                PREFIX.saturating_sub(buf.len()).max(1)
            } else {
                chunk
            };
            make_room(buf, limit);
            limit
        }
    }
}

/// Ensures `room` bytes of free space after what `buf` holds. Space the
/// buffer already owns is reused when that is cheap
/// ([`BytesMut::try_reclaim`]); otherwise the buffer is replaced by one of
/// exactly what it holds plus `room`, what it holds copied once (`reserve`
/// would also round up to twice the old size).
fn make_room(buf: &mut BytesMut, room: usize) {
    if buf.capacity() - buf.len() >= room || buf.try_reclaim(room) {
        return;
    }
    let mut sized = BytesMut::with_capacity(buf.len() + room);
    sized.extend_from_slice(buf);
    *buf = sized;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use bytes::BufMut;
    use sluice_codec::FrameCodec;

    use super::*;

    const CHUNK: usize = 16 * 1024;
    const MAX_FRAME: usize = 100 * 1024 * 1024;

    /// What reading a stream through [`prepare_read`] did.
    #[derive(Default)]
    struct Reads {
        frames: Vec<BytesMut>,
        /// Bytes moved to another place in memory by making room.
        copied: usize,
        /// The most the buffer was given room for, past what it held.
        most_room: usize,
    }

    /// Reads `stream` as a connection does: frames taken off the front,
    /// then room made and a read of at most what [`prepare_read`] allows
    /// and `arrival` bytes (what the socket has). Frames are held until the
    /// end when `hold` (as requests in flight hold theirs), so the buffer is
    /// shared; else dropped at once.
    fn read(stream: &[u8], arrival: usize, hold: bool) -> Reads {
        let codec = FrameCodec::new(MAX_FRAME);
        let mut buf = BytesMut::new();
        let mut reads = Reads::default();
        let mut at = 0;
        let mut last_frame = 0;
        loop {
            while let Some(frame) = codec.take_frame(&mut buf).unwrap() {
                last_frame = 4 + frame.len();
                if hold {
                    reads.frames.push(frame);
                } else {
                    reads.frames.push(BytesMut::from(&frame[..]));
                }
            }
            if at == stream.len() {
                assert!(buf.is_empty(), "{} bytes left unframed", buf.len());
                return reads;
            }
            let (before, held) = (buf.as_ptr(), buf.len());
            let chunk = between_frames(CHUNK, last_frame);
            let limit = prepare_read(&mut buf, chunk, MAX_FRAME);
            if held > 0 && buf.as_ptr() != before {
                reads.copied += held;
            }
            let spare = buf.capacity() - buf.len();
            reads.most_room = reads.most_room.max(spare);
            let n = limit.min(spare).min(arrival).min(stream.len() - at);
            assert!(n > 0, "no room to read into");
            buf.put_slice(&stream[at..at + n]);
            at += n;
        }
    }

    /// Frames of `sizes` bytes, each byte telling its frame.
    fn frames(sizes: &[usize]) -> Vec<u8> {
        let mut stream = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            stream.extend_from_slice(&i32::try_from(size).unwrap().to_be_bytes());
            stream.extend(std::iter::repeat_n(u8::try_from(i % 251).unwrap(), size));
        }
        stream
    }

    fn check_frames(reads: &Reads, sizes: &[usize]) {
        assert_eq!(reads.frames.len(), sizes.len());
        for (i, (frame, &size)) in reads.frames.iter().zip(sizes).enumerate() {
            assert_eq!(frame.len(), size);
            let byte = u8::try_from(i % 251).unwrap();
            assert!(frame.iter().all(|&b| b == byte), "frame {i} corrupted");
        }
    }

    #[test]
    fn a_large_frame_is_read_in_place_once_its_length_is_known() {
        // Produce requests of 256 KiB, arriving 64 KiB at a time.
        let sizes = [256 * 1024; 8];
        for hold in [true, false] {
            let reads = read(&frames(&sizes), 64 * 1024, hold);
            check_frames(&reads, &sizes);
            // The first frame's prefix came with a chunk, copied once into
            // the frame's own buffer; every later frame's prefix came alone.
            assert!(
                reads.copied <= CHUNK + 4 * sizes.len(),
                "copied {} bytes for {} frames (hold: {hold})",
                reads.copied,
                sizes.len()
            );
            assert!(
                reads.most_room <= 256 * 1024 + 4,
                "room for {} bytes",
                reads.most_room
            );
        }
    }

    #[test]
    fn small_frames_are_read_a_chunk_at_a_time() {
        let sizes = [300; 2000];
        let reads = read(&frames(&sizes), usize::MAX, true);
        check_frames(&reads, &sizes);
        // A frame cut by a chunk's end is copied, a few hundred bytes.
        assert!(reads.copied <= (2000 * 300 / CHUNK + 2) * 304);
        assert!(reads.most_room <= CHUNK);
    }

    #[test]
    fn frames_of_every_size_in_turn_come_out_whole() {
        let sizes = [
            256 * 1024,
            100,
            0,
            300,
            256 * 1024,
            20 * 1024,
            CHUNK - 4,
            CHUNK - 3,
            50,
            MAX_UPFRONT_RESERVE + 5,
            256 * 1024,
        ];
        for arrival in [3, 4096, 64 * 1024, usize::MAX] {
            let reads = read(&frames(&sizes), arrival, arrival % 2 == 0);
            check_frames(&reads, &sizes);
        }
    }

    #[test]
    fn a_frame_larger_than_the_upfront_reserve_grows_by_doubling() {
        let sizes = [5 * MAX_UPFRONT_RESERVE + 1000; 2];
        let reads = read(&frames(&sizes), 256 * 1024, true);
        check_frames(&reads, &sizes);
        // Each doubling copies what arrived: at most twice the frame, summed.
        assert!(
            reads.copied < 2 * 2 * sizes[0],
            "copied {} bytes",
            reads.copied
        );
        assert!(
            reads.most_room <= sizes[0],
            "room for {} bytes",
            reads.most_room
        );
    }

    #[test]
    fn a_prefix_announcing_a_huge_frame_allocates_only_the_upfront_reserve() {
        let mut buf = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
        let limit = prepare_read(&mut buf, CHUNK, MAX_FRAME);
        assert!(limit >= MAX_UPFRONT_RESERVE);
        assert_eq!(buf.capacity(), 4 + MAX_UPFRONT_RESERVE);
        // A negative length (the codec refuses it) is read as no frame.
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(prepare_read(&mut buf, CHUNK, MAX_FRAME), CHUNK);
        assert!(buf.capacity() <= 4 + CHUNK);
    }

    #[test]
    fn between_frames_a_read_takes_a_chunk_or_after_a_long_frame_a_prefix() {
        assert_eq!(between_frames(CHUNK, 0), CHUNK);
        assert_eq!(between_frames(CHUNK, CHUNK), CHUNK);
        assert_eq!(between_frames(CHUNK, CHUNK + 1), 4);
        let mut buf = BytesMut::new();
        assert_eq!(prepare_read(&mut buf, 256, MAX_FRAME), 256);
        assert_eq!(buf.capacity(), 256);
        buf.put_slice(&[0, 1]);
        assert_eq!(prepare_read(&mut buf, CHUNK, MAX_FRAME), CHUNK);
        assert!(buf.capacity() - buf.len() >= CHUNK);
        assert_eq!(&buf[..], &[0, 1]);
        // Only what completes the prefix.
        assert_eq!(prepare_read(&mut buf, 4, MAX_FRAME), 2);
    }
}
