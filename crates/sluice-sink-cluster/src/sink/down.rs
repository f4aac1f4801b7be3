//! Brokers that cannot be connected to, marked down for a backoff window.
//!
//! A connect that is refused costs nothing, but one that times out (a host
//! gone from the network, a full accept queue) costs `connect_timeout_ms`,
//! and without a memory of it every request routed to that broker, from
//! every client connection, would pay it again in turn. So a failed connect
//! marks the broker down, shared by all client connections of the sink:
//! until the window ends, connecting to it fails at once with
//! [`BrokerError::Down`] (retriable: the client gets NOT_LEADER_OR_FOLLOWER
//! or the like and refreshes its metadata) while everything else flows. The
//! window doubles with each failure in a row, from [`FIRST_WINDOW`] to
//! [`MAX_WINDOW`], like Kafka clients' `reconnect.backoff.ms`; the first
//! connect after it is a real attempt, and its success clears the record.
//!
//! ```text
//! t=0     connect to broker 2 times out (3 s)  -> down until t=3.25 s
//! t=1 s   a request for broker 2: fails at once (down, retry in 2.25 s)
//! t=3.25s a request: a real connect attempt; fails -> down for 0.5 s more
//! ...     doubling up to 4 s; the first success clears it
//! ```
//!
//! A broker that accepts connections but stops answering is caught by the
//! stall check instead (`sink/stalled.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sluice_broker::{BrokerAddress, BrokerError};
use tokio::time::Instant;

/// The first backoff window after a failed connect.
pub(crate) const FIRST_WINDOW: Duration = Duration::from_millis(250);
/// The longest backoff window.
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(4);

/// The brokers marked down, by `host:port`.
#[derive(Debug, Default)]
pub(crate) struct DownBrokers {
    brokers: Mutex<HashMap<String, Down>>,
}

#[derive(Debug)]
struct Down {
    until: Instant,
    /// Failed connects in a row.
    failures: u32,
}

impl DownBrokers {
    /// Fails at once with [`BrokerError::Down`] while `broker` is marked down.
    pub(crate) fn check(&self, broker: &BrokerAddress, now: Instant) -> Result<(), BrokerError> {
        let brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        match brokers.get(&key(broker)) {
            Some(down) if now < down.until => Err(BrokerError::Down {
                broker: broker.clone(),
                retry_in: down.until - now,
            }),
            _ => Ok(()),
        }
    }

    /// Records the outcome of a connect to `broker` at `now`: a failure
    /// (refused, timed out, TLS) marks it down, a success clears it.
    pub(crate) fn record(&self, broker: &BrokerAddress, connected: bool, now: Instant) {
        let mut brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        if connected {
            brokers.remove(&key(broker));
            return;
        }
        let down = brokers.entry(key(broker)).or_insert(Down {
            until: now,
            failures: 0,
        });
        down.failures = down.failures.saturating_add(1);
        down.until = now + window(down.failures);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerAddress {
        BrokerAddress::new("127.0.0.1", 9092).with_id(2)
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_connect_marks_the_broker_down_for_a_doubling_window() {
        let down = DownBrokers::default();
        let b = broker();
        assert!(down.check(&b, Instant::now()).is_ok(), "nothing known yet");

        down.record(&b, false, Instant::now());
        let err = down.check(&b, Instant::now()).unwrap_err();
        assert!(matches!(err, BrokerError::Down { retry_in, .. } if retry_in == FIRST_WINDOW));
        assert!(sluice_error::ErrorClass::retriable(&err));
        assert!(!err.request_may_have_been_sent());

        tokio::time::advance(FIRST_WINDOW).await;
        assert!(
            down.check(&b, Instant::now()).is_ok(),
            "the window is over: one real attempt"
        );
        down.record(&b, false, Instant::now());
        tokio::time::advance(FIRST_WINDOW).await;
        assert!(
            down.check(&b, Instant::now()).is_err(),
            "the second window is twice as long"
        );
        tokio::time::advance(FIRST_WINDOW).await;
        assert!(down.check(&b, Instant::now()).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_window_stops_growing_and_a_success_clears_it() {
        let down = DownBrokers::default();
        let b = broker();
        for _ in 0..40 {
            down.record(&b, false, Instant::now());
        }
        let Err(BrokerError::Down { retry_in, .. }) = down.check(&b, Instant::now()) else {
            panic!("down");
        };
        assert_eq!(retry_in, MAX_WINDOW);
        // The same broker before it had an id is the same broker.
        assert!(
            down.check(&BrokerAddress::new("127.0.0.1", 9092), Instant::now())
                .is_err()
        );
        assert!(
            down.check(&BrokerAddress::new("127.0.0.1", 9093), Instant::now())
                .is_ok()
        );

        down.record(&b, true, Instant::now());
        assert!(down.check(&b, Instant::now()).is_ok());
        down.record(&b, false, Instant::now());
        let Err(BrokerError::Down { retry_in, .. }) = down.check(&b, Instant::now()) else {
            panic!("down");
        };
        assert_eq!(retry_in, FIRST_WINDOW, "a success starts the doubling over");
    }
}
