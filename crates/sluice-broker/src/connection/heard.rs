//! [`Heard`]: when a connection's broker last answered, readable by others.
//!
//! A connection that owes answers and has heard nothing for a while may be
//! stalled, or only slow behind its own queue; a broker is hung only if
//! *no* connection hears from it. The handle is a cheap clone that a
//! watcher (the sink's per-broker health record) keeps beside the
//! connection's owner, so that the verdict can take every connection to the
//! broker into account. It keeps none of the connection alive.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// When a connection's broker last answered (shared with the connection's
/// reader, which records each answer).
#[derive(Debug, Clone)]
pub struct Heard(Arc<Clock>);

#[derive(Debug)]
struct Clock {
    /// When the connection opened: the base of `last_answer_nanos`.
    opened_at: Instant,
    /// When the broker last answered, in nanoseconds after `opened_at`
    /// plus one; 0 while it never has.
    last_answer_nanos: AtomicU64,
}

impl Default for Heard {
    /// A clock for a connection opened now, that has heard nothing yet.
    fn default() -> Self {
        Self(Arc::new(Clock {
            opened_at: Instant::now(),
            last_answer_nanos: AtomicU64::new(0),
        }))
    }
}

impl Heard {
    /// Records that the broker answered a request now (the connection's
    /// reader does, for each answer it reads).
    pub fn answered(&self) {
        let nanos = self.0.opened_at.elapsed().as_nanos().saturating_add(1);
        self.0
            .last_answer_nanos
            .store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// When the broker last answered on this connection; `None` if it never
    /// has (an accepted TCP connection proves nothing: a hung broker's
    /// kernel still accepts them).
    pub fn last_answer(&self) -> Option<Instant> {
        match self.0.last_answer_nanos.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(self.0.opened_at + Duration::from_nanos(nanos - 1)),
        }
    }

    /// How long the broker has gone without answering on this connection
    /// (since it opened, if it never has), as of `now`.
    pub fn quiet_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_answer().unwrap_or(self.0.opened_at))
    }

    /// Whether this handle is the last one: the connection is gone, and
    /// nothing more will be heard on it.
    pub fn connection_gone(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}
