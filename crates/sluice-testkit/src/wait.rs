//! Bounded polling: every wait in the tests goes through here.

use std::time::{Duration, Instant};

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout`
/// with `what` and the last observation from `check`'s `Err`.
pub fn until<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check() {
            Ok(value) => return value,
            Err(observed) => observed,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
