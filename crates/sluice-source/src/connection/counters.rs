//! What a connection counts: that it is open, and its requests, responses
//! and bytes, with every handle looked up once instead of per request.

use metrics::{Counter, counter, gauge};
use sluice_codec::ApiKey;
use sluice_metrics::names;

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
pub(super) struct ConnectionCounters {
    requests: Vec<(ApiKey, Counter)>,
    responses: Vec<(ApiKey, Counter)>,
    pub(super) bytes_in: Counter,
    pub(super) bytes_out: Counter,
}

impl Default for ConnectionCounters {
    fn default() -> Self {
        Self {
            requests: Vec::new(),
            responses: Vec::new(),
            bytes_in: counter!(names::BYTES_IN),
            bytes_out: counter!(names::BYTES_OUT),
        }
    }
}

impl ConnectionCounters {
    pub(super) fn request(&mut self, api: ApiKey) {
        Self::slot(&mut self.requests, names::REQUESTS, api).increment(1);
    }

    pub(super) fn response(&mut self, api: ApiKey) {
        Self::slot(&mut self.responses, names::RESPONSES, api).increment(1);
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
