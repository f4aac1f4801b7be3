//! What a connection counts: that it is open, its requests, responses
//! and bytes, and how long each answer took, with every handle looked up
//! once instead of per request.

use std::collections::VecDeque;

use metrics::{Counter, Histogram, counter, gauge, histogram};
use sluice_codec::ApiKey;
use sluice_metrics::names;
use tokio::time::Instant;

/// Counts a connection as open for as long as it lives.
pub(super) struct OpenGuard {
    source: String,
}

impl OpenGuard {
    pub(super) fn new(source: &str) -> Self {
        counter!(names::CLIENT_CONNECTIONS_TOTAL, "source" => source.to_owned()).increment(1);
        gauge!(names::CLIENT_CONNECTIONS_OPEN, "source" => source.to_owned()).increment(1.0);
        Self {
            source: source.to_owned(),
        }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        gauge!(names::CLIENT_CONNECTIONS_OPEN, "source" => self.source.clone()).decrement(1.0);
    }
}

/// A connection's counters, registered once (by api, on first use) so that
/// the hot path neither formats labels nor looks metrics up.
///
/// Kept as short lists searched in order, not tables indexed by api key: a
/// client uses a handful of APIs, and an idle connection that asked only
/// ApiVersions (key 18) should not hold 19 empty slots twice over.
///
/// Latency ([`names::CLIENT_REQUEST_DURATION`]): the chain answers in
/// request order, so when each request owed an answer was taken is kept
/// in a queue, oldest first; once a batch of answers has been written, the
/// oldest entries, one per answer in it, are popped and recorded.
pub(super) struct ConnectionCounters {
    requests: Vec<(ApiKey, Counter)>,
    responses: Vec<(ApiKey, Counter)>,
    latency: Vec<(ApiKey, Histogram)>,
    /// When each request still owed an answer was taken, oldest first.
    owed_since: VecDeque<(Instant, ApiKey)>,
    /// Answers encoded and not yet written.
    unwritten: usize,
    pub(super) bytes_in: Counter,
    pub(super) bytes_out: Counter,
}

impl Default for ConnectionCounters {
    fn default() -> Self {
        Self {
            requests: Vec::new(),
            responses: Vec::new(),
            latency: Vec::new(),
            owed_since: VecDeque::new(),
            unwritten: 0,
            bytes_in: counter!(names::BYTES_IN),
            bytes_out: counter!(names::BYTES_OUT),
        }
    }
}

impl ConnectionCounters {
    pub(super) fn request(&mut self, api: ApiKey) {
        Self::slot(&mut self.requests, names::REQUESTS, api).increment(1);
    }

    /// A request taken at `at` is owed an answer (called in request order).
    pub(super) fn owed(&mut self, api: ApiKey, at: Instant) {
        self.owed_since.push_back((at, api));
    }

    /// An answer was encoded for the client (in request order).
    pub(super) fn response(&mut self, api: ApiKey) {
        Self::slot(&mut self.responses, names::RESPONSES, api).increment(1);
        self.unwritten += 1;
    }

    /// Every answer encoded so far has been written, at `now`: records how
    /// long each took since its request was taken.
    pub(super) fn written(&mut self, now: Instant) {
        for _ in 0..std::mem::take(&mut self.unwritten) {
            let Some((at, api)) = self.owed_since.pop_front() else {
                return;
            };
            let slot = match self.latency.iter().position(|(key, _)| *key == api) {
                Some(slot) => slot,
                None => {
                    let handle =
                        histogram!(names::CLIENT_REQUEST_DURATION, "api" => format!("{api:?}"));
                    self.latency.push((api, handle));
                    self.latency.len() - 1
                }
            };
            self.latency[slot]
                .1
                .record(now.saturating_duration_since(at));
        }
    }

    /// Gives back the latency queue's memory when nothing is owed (a quiet
    /// connection).
    pub(super) fn release_idle(&mut self) {
        if self.owed_since.is_empty() {
            self.owed_since = VecDeque::new();
        }
    }

    fn slot<'a>(
        slots: &'a mut Vec<(ApiKey, Counter)>,
        name: &'static str,
        api: ApiKey,
    ) -> &'a Counter {
        let at = match slots.iter().position(|(key, _)| *key == api) {
            Some(at) => at,
            None => {
                slots.push((api, counter!(name, "api" => format!("{api:?}"))));
                slots.len() - 1
            }
        };
        &slots[at].1
    }
}
