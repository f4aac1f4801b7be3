//! [`Health`]: the one record of each broker's health, shared by every
//! client connection of the sink and keyed by `host:port` (a broker reached
//! through a first contact point, before its id is known, is the same
//! broker).
//!
//! It answers three questions, each from what any connection of the sink
//! (for *heard*: of the process) saw:
//!
//! - **Down**: a failed connect (refused, timed out, TLS) marks the broker
//!   down for a window that doubles with each failure in a row, from
//!   [`FIRST_WINDOW`] to [`MAX_WINDOW`] (like Kafka clients'
//!   `reconnect.backoff.ms`); until it ends, connecting fails at once with
//!   [`BrokerError::Down`] (retriable) instead of every request paying
//!   `connect_timeout_ms` again. The first success clears it.
//! - **Suspect**: a failed request (or a part its broker left unanswered
//!   past its wait) marks the broker suspect for [`SUSPECT_FOR`]: requests
//!   any broker can serve go elsewhere meanwhile. It also rate-limits the
//!   WARN for the failure to one per broker per [`WARN_EVERY`]; later ones
//!   are logged at DEBUG and counted in the next WARN.
//! - **Heard**: when any connection of the process last heard an answer
//!   from the broker. A part owed on one connection may wait behind a queue
//!   or a loaded machine's scheduler while the broker answers other
//!   connections: the broker is stalled only if none of them heard from it
//!   lately (see `sluice_cluster::plan::stall`). Process-wide, since an answer proves
//!   the broker alive whichever sink's connection heard it; the down and
//!   suspect marks stay per sink, whose TLS and credentials may differ.
//!
//! ```text
//! t=0     connect to broker 2 times out (3 s)  -> down until t=3.25 s
//! t=1 s   a request for broker 2: fails at once (down, retry in 2.25 s)
//! t=3.25s a request: a real connect attempt; fails -> down for 0.5 s more
//! ...     doubling up to 4 s; the first success clears it
//! ```

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use sluice_broker::{BrokerAddress, BrokerError, Heard};
use sluice_codec::ApiKey;
use tokio::time::Instant;
use tracing::{debug, warn};

/// The first backoff window after a failed connect.
pub(crate) const FIRST_WINDOW: Duration = Duration::from_millis(250);
/// The longest backoff window.
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(4);
/// At most one WARN per broker this often.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);
/// How long a broker stays suspect after a failed request.
pub(crate) const SUSPECT_FOR: Duration = Duration::from_secs(10);

/// How to log one failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// At WARN; `quieted` failures of this broker were logged at DEBUG
    /// since its last WARN.
    Warn { quieted: u64 },
    /// At DEBUG: this broker had a WARN less than [`WARN_EVERY`] ago.
    Quiet,
}

/// The health of the sink's brokers, by `host:port`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    brokers: Mutex<HashMap<String, BrokerHealth>>,
    /// When each broker was last heard from. The process's one record in
    /// production ([`Health::process_wide`]); a unit test's own otherwise.
    hearing: Arc<Hearing>,
}

/// One broker's record.
#[derive(Debug, Default)]
struct BrokerHealth {
    /// Marked down after failed connects.
    down: Option<Down>,
    /// The last failed request and its WARN window.
    failed: Option<Failed>,
}

/// The answer clocks of connections, by broker `host:port`.
#[derive(Debug, Default)]
struct Hearing {
    brokers: Mutex<HashMap<String, Heards>>,
}

/// One broker's answer clocks.
#[derive(Debug, Default)]
struct Heards {
    /// Those of the live connections to the broker.
    live: Vec<Heard>,
    /// The latest answer heard on a connection that is gone since.
    gone: Option<Instant>,
}

/// The process's one [`Hearing`].
static PROCESS_HEARING: OnceLock<Arc<Hearing>> = OnceLock::new();

#[derive(Debug)]
struct Down {
    until: Instant,
    /// Failed connects in a row.
    failures: u32,
}

#[derive(Debug)]
struct Failed {
    warned_at: Instant,
    failed_at: Instant,
    quieted: u64,
}

impl Health {
    /// A record whose *heard* part is the process's: answers heard by the
    /// connections of every sink of the process count.
    pub(crate) fn process_wide() -> Self {
        Self {
            brokers: Mutex::default(),
            hearing: Arc::clone(PROCESS_HEARING.get_or_init(Arc::default)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, BrokerHealth>> {
        self.brokers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails at once with [`BrokerError::Down`] while `broker` is marked down.
    pub(crate) fn check_down(
        &self,
        broker: &BrokerAddress,
        now: Instant,
    ) -> Result<(), BrokerError> {
        match self.lock().get(&key(broker)).and_then(|b| b.down.as_ref()) {
            Some(down) if now < down.until => Err(BrokerError::Down {
                broker: broker.clone(),
                retry_in: down.until - now,
            }),
            _ => Ok(()),
        }
    }

    /// Records the outcome of a connect to `broker` at `now`: a failure
    /// marks it down, a success clears that and starts watching when the
    /// new connection hears from the broker.
    pub(crate) fn connected(&self, broker: &BrokerAddress, heard: Option<Heard>, now: Instant) {
        let mut brokers = self.lock();
        let record = brokers.entry(key(broker)).or_default();
        let Some(heard) = heard else {
            let down = record.down.get_or_insert(Down {
                until: now,
                failures: 0,
            });
            down.failures = down.failures.saturating_add(1);
            down.until = now + window(down.failures);
            return;
        };
        record.down = None;
        drop(brokers);
        let mut hearing = self.hearing.lock();
        let heards = hearing.entry(key(broker)).or_default();
        heards.prune();
        heards.live.push(heard);
    }

    /// Records a failed request to `broker` at `now` (it is suspect from
    /// now) and says how to log it.
    pub(crate) fn failed(&self, broker: &BrokerAddress, now: Instant) -> Verdict {
        self.failed_key(key(broker), now)
    }

    /// Records a failed request that reached no broker (Sluice had no
    /// address for it), under what it looked for (`target`: `broker 3`,
    /// `any broker`, ...): rate-limited the same way, never suspect.
    pub(crate) fn failed_unaddressed(&self, target: String, now: Instant) -> Verdict {
        self.failed_key(target, now)
    }

    /// Records a failed request (`broker`: `None` when it found no broker
    /// address; the error says what it looked for) and logs it: at WARN at
    /// most once per broker per [`WARN_EVERY`] (saying how many were logged
    /// at DEBUG in between), else at DEBUG. `what`: what Sluice does about it.
    pub(crate) fn log_failure(
        &self,
        broker: Option<&BrokerAddress>,
        api: ApiKey,
        what: &str,
        e: &BrokerError,
    ) {
        let now = Instant::now();
        let (verdict, shown, broker_id) = match broker {
            Some(broker) => (self.failed(broker, now), broker.to_string(), broker.id),
            None => {
                let target = e.target().to_string();
                let id = e.unaddressed().and_then(|u| u.broker_id());
                (self.failed_unaddressed(target.clone(), now), target, id)
            }
        };
        match verdict {
            Verdict::Warn { quieted: 0 } => {
                warn!(broker = %shown, broker_id, api = ?api, "{what}: {e}");
            }
            Verdict::Warn { quieted } => warn!(
                broker = %shown,
                broker_id,
                api = ?api,
                quieted,
                "{what}: {e} ({quieted} more failed request(s) to this broker since its last warning, logged at debug)"
            ),
            Verdict::Quiet => {
                debug!(broker = %shown, broker_id, api = ?api, "{what}: {e}");
            }
        }
    }

    fn failed_key(&self, key: String, now: Instant) -> Verdict {
        let mut brokers = self.lock();
        let record = brokers.entry(key).or_default();
        match &mut record.failed {
            Some(failed) if now.duration_since(failed.warned_at) < WARN_EVERY => {
                failed.failed_at = now;
                failed.quieted += 1;
                Verdict::Quiet
            }
            Some(failed) => {
                let quieted = std::mem::take(&mut failed.quieted);
                failed.warned_at = now;
                failed.failed_at = now;
                Verdict::Warn { quieted }
            }
            None => {
                record.failed = Some(Failed {
                    warned_at: now,
                    failed_at: now,
                    quieted: 0,
                });
                Verdict::Warn { quieted: 0 }
            }
        }
    }

    /// Whether a request to `broker` failed less than [`SUSPECT_FOR`] before `now`.
    pub(crate) fn is_suspect(&self, broker: &BrokerAddress, now: Instant) -> bool {
        self.lock()
            .get(&key(broker))
            .and_then(|b| b.failed.as_ref())
            .is_some_and(|f| now.saturating_duration_since(f.failed_at) < SUSPECT_FOR)
    }

    /// How long no connection of the process has heard an answer from
    /// `broker`, as of `now`; `None` if none ever has.
    pub(crate) fn quiet_for(&self, broker: &BrokerAddress, now: Instant) -> Option<Duration> {
        let mut hearing = self.hearing.lock();
        let heards = hearing.get_mut(&key(broker))?;
        heards.prune();
        let latest = heards
            .live
            .iter()
            .filter_map(Heard::last_answer)
            .chain(heards.gone)
            .max()?;
        Some(now.saturating_duration_since(latest))
    }
}

impl Hearing {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Heards>> {
        self.brokers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Heards {
    /// Forgets the clocks of connections that are gone, keeping the latest
    /// answer they heard.
    fn prune(&mut self) {
        let gone_latest = self
            .live
            .iter()
            .filter(|h| h.connection_gone())
            .filter_map(Heard::last_answer)
            .max();
        self.gone = self.gone.max(gone_latest);
        self.live.retain(|h| !h.connection_gone());
    }
}

/// The window after `failures` failed connects in a row.
fn window(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_WINDOW.saturating_mul(1 << doublings).min(MAX_WINDOW)
}

fn key(broker: &BrokerAddress) -> String {
    broker.host_port().to_string()
}
