//! When any connection of this process last heard from one broker.
//!
//! A request unanswered past its wait makes the cluster sink check on its
//! broker (`sluice-sink-cluster`'s `sink/stalled.rs`). One connection's
//! silence says little on its own on a loaded machine: a broker slow to get
//! to one connection's request (a busy coordinator, a long GC pause on the
//! Sluice side) is still alive if it answers the process's other
//! connections. So every connection to a broker shares one [`LastHeard`],
//! and the broker counts as quiet only when none of them has heard from it.
//!
//! ```text
//! t=0    heartbeat sent on client A's connection to broker 2
//! t=1s   broker 2 answers a fetch on client B's connection: heard
//! t=2s   A's heartbeat is past its stall time, A's connection quiet 2 s,
//!        but broker 2 was heard 1 s ago: alive, no check, no WARN
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Stored when nothing has been heard yet.
const NEVER: u64 = 0;

/// When one broker last answered any connection that shares it.
#[derive(Debug)]
pub struct LastHeard {
    /// The base of `nanos`: when this record was made.
    base: Instant,
    /// When the broker last answered, in nanoseconds after `base` plus one
    /// (so that [`NEVER`] is 0 and the latest answer wins with `fetch_max`,
    /// whichever connection's reader stores first).
    nanos: AtomicU64,
}

impl LastHeard {
    /// A record of a broker not heard from yet.
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            nanos: AtomicU64::new(NEVER),
        }
    }

    /// Records that the broker answered now.
    pub(crate) fn heard(&self) {
        let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.nanos.fetch_max(nanos + 1, Ordering::AcqRel);
    }

    /// How long no connection sharing this record has heard from the broker,
    /// as of `now`; [`Duration::MAX`] if none ever has.
    pub fn quiet_for(&self, now: Instant) -> Duration {
        match self.nanos.load(Ordering::Acquire) {
            NEVER => Duration::MAX,
            nanos => now.saturating_duration_since(self.base + Duration::from_nanos(nanos - 1)),
        }
    }
}

impl Default for LastHeard {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn quiet_counts_from_the_latest_answer_of_any_sharer() {
        let heard = LastHeard::new();
        assert_eq!(heard.quiet_for(Instant::now()), Duration::MAX);
        tokio::time::advance(Duration::from_secs(5)).await;
        heard.heard();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(heard.quiet_for(Instant::now()), Duration::from_secs(3));
        heard.heard();
        assert_eq!(heard.quiet_for(Instant::now()), Duration::ZERO);
    }
}
