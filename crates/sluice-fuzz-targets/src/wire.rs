//! Small wire helpers shared by the targets: draining an `OutFrames` into
//! bytes without a runtime.

use sluice_codec::OutFrames;

/// Everything queued on `out`, as one byte string. Writing into a `Vec`
/// never waits, so the future completes on its first poll.
pub(crate) fn drain(out: &mut OutFrames) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(out.len());
    let written = futures::executor::block_on(out.write_to(&mut bytes));
    assert!(written.is_ok(), "writing OutFrames into a Vec cannot fail");
    bytes
}
