//! Shutdown of one connection: it stops reading, and what it still owes must
//! be written before the drain deadline.

use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use tokio::time::{Instant, timeout_at};
use tokio_util::sync::WaitForCancellationFutureOwned;

/// The shutdown state of one connection.
pub(super) struct Drain {
    /// Resolves when shutdown begins; polled only until then.
    pub(super) cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    pub(super) timeout: Duration,
    /// Set when shutdown began: the time by which owed responses must be out.
    pub(super) deadline: Option<Instant>,
}

impl Drain {
    pub(super) fn start(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.timeout);
        }
    }

    /// Runs `fut` to completion, unless shutdown begins meanwhile and the
    /// drain deadline passes first (`None`).
    pub(super) async fn bounded<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        if self.deadline.is_none() {
            tokio::select! {
                biased;
                out = &mut fut => return Some(out),
                () = &mut self.cancelled => self.start(),
            }
        }
        let deadline = self.deadline?;
        timeout_at(deadline, fut).await.ok()
    }
}
