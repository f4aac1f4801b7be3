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

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sluice_chain::broker::BrokerAddress;
use tokio::time::Instant;

/// At most one WARN per broker this often.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);

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
    quieted: u64,
}

impl FailureLog {
    /// Records a failed request to `broker` at `now` and says how to log it.
    pub(crate) fn record(&self, broker: &BrokerAddress, now: Instant) -> Verdict {
        let key = broker.host_port().to_string();
        let mut brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        match brokers.get_mut(&key) {
            Some(window) if now.duration_since(window.warned_at) < WARN_EVERY => {
                window.quieted += 1;
                Verdict::Quiet
            }
            Some(window) => {
                let quieted = std::mem::take(&mut window.quieted);
                window.warned_at = now;
                Verdict::Warn { quieted }
            }
            None => {
                brokers.insert(
                    key,
                    Window {
                        warned_at: now,
                        quieted: 0,
                    },
                );
                Verdict::Warn { quieted: 0 }
            }
        }
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
}
