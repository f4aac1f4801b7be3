//! Small wire helpers shared by the targets: what an `OutFrames` would
//! write, without a socket or a runtime.

use sluice_codec::OutFrames;

/// Everything queued on `out`, as one byte string.
pub(crate) fn drain(out: &mut OutFrames) -> Vec<u8> {
    out.take_bytes()
}
