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

/// Polls `check` like [`until`], but gives up after `timeout` with the last
/// observation (`Err`) instead of panicking: for checks whose failure is a
/// finding to report, not the end of the test.
pub fn within<T>(
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check() {
            Ok(value) => return Ok(value),
            Err(observed) => observed,
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
