//! Rate-limited warnings for failed broker requests.
//!
//! While a broker is down, every request routed to it fails (its connect is
//! refused, or its connection dies), and each is answered with a retriable
//! error. One WARN per request would flood the log with the same news, so
//! the sink warns per broker at most once per [`WARN_EVERY`]: the first
//! failure is logged at WARN with everything an operator needs (broker id,
//! address, api, reason); later ones within the window are logged at DEBUG
//! and counted, and the next WARN for that broker says how many were
//! quieted. Every failed request is still counted in
//! `sluice_synthesized_error_responses_total`. The window is shared by all
//! client connections of the sink.
//!
//! The same record marks a broker *suspect* for [`SUSPECT_FOR`] after each
//! failure: requests that any broker can serve (Metadata, ApiVersions,
//! admin) then go to another broker while one is reachable, instead of
//! paying a failed connect first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sluice_broker::BrokerAddress;
use tokio::time::Instant;

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

/// The warning windows of the sink's brokers, by `host:port`.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    brokers: Mutex<HashMap<String, Window>>,
}

#[derive(Debug)]
struct Window {
    warned_at: Instant,
    failed_at: Instant,
    quieted: u64,
}

impl FailureLog {
    /// Records a failed request to `broker` at `now` and says how to log it.
    pub(crate) fn record(&self, broker: &BrokerAddress, now: Instant) -> Verdict {
        self.record_key(broker.host_port().to_string(), now)
    }

    /// Records a failed request that reached no broker (Sluice had no
    /// address for it), under what it looked for (`target`: `broker 3`,
    /// `any broker`, ...): rate-limited the same way, never suspect.
    pub(crate) fn record_unaddressed(&self, target: String, now: Instant) -> Verdict {
        self.record_key(target, now)
    }

    fn record_key(&self, key: String, now: Instant) -> Verdict {
        let mut brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        match brokers.get_mut(&key) {
            Some(window) if now.duration_since(window.warned_at) < WARN_EVERY => {
                window.failed_at = now;
                window.quieted += 1;
                Verdict::Quiet
            }
            Some(window) => {
                let quieted = std::mem::take(&mut window.quieted);
                window.warned_at = now;
                window.failed_at = now;
                Verdict::Warn { quieted }
            }
            None => {
                brokers.insert(
                    key,
                    Window {
                        warned_at: now,
                        failed_at: now,
                        quieted: 0,
                    },
                );
                Verdict::Warn { quieted: 0 }
            }
        }
    }

    /// Whether a request to `broker` failed less than [`SUSPECT_FOR`] before `now`.
    pub(crate) fn is_suspect(&self, broker: &BrokerAddress, now: Instant) -> bool {
        let key = broker.host_port().to_string();
        let brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        brokers
            .get(&key)
            .is_some_and(|w| now.saturating_duration_since(w.failed_at) < SUSPECT_FOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_per_broker_per_window_and_counts_the_rest() {
        let log = FailureLog::default();
        let one = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
        let two = BrokerAddress::new("127.0.0.1", 9093).with_id(2);
        let t0 = Instant::now();
        assert_eq!(log.record(&one, t0), Verdict::Warn { quieted: 0 });
        for k in 1..=5 {
            let at = t0 + Duration::from_secs(k);
            assert_eq!(log.record(&one, at), Verdict::Quiet, "{k}s");
        }
        // Another broker has its own window.
        let at = t0 + Duration::from_secs(5);
        assert_eq!(log.record(&two, at), Verdict::Warn { quieted: 0 });
        // The same broker before it had an id is the same broker.
        let unnamed = BrokerAddress::new("127.0.0.1", 9092);
        assert_eq!(log.record(&unnamed, at), Verdict::Quiet);
        let after = t0 + WARN_EVERY;
        assert_eq!(log.record(&one, after), Verdict::Warn { quieted: 6 });
        assert_eq!(log.record(&one, after), Verdict::Quiet);
        let later = after + WARN_EVERY * 3;
        assert_eq!(log.record(&one, later), Verdict::Warn { quieted: 1 });
    }

    #[test]
    fn a_broker_is_suspect_for_a_while_after_each_failure() {
        let log = FailureLog::default();
        let one = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
        let two = BrokerAddress::new("127.0.0.1", 9093).with_id(2);
        let t0 = Instant::now();
        assert!(!log.is_suspect(&one, t0), "no failure yet");
        log.record(&one, t0);
        assert!(log.is_suspect(&one, t0 + SUSPECT_FOR - Duration::from_millis(1)));
        assert!(!log.is_suspect(&two, t0), "only the failed broker");
        // A quieted failure extends the suspicion.
        log.record(&one, t0 + Duration::from_secs(5));
        assert!(log.is_suspect(&one, t0 + SUSPECT_FOR + Duration::from_secs(1)));
        assert!(!log.is_suspect(&one, t0 + Duration::from_secs(5) + SUSPECT_FOR));
    }
}
