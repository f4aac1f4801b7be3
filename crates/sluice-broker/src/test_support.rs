//! Test helpers: the one fake broker of the workspace's unit tests, and
//! builders for real encoded requests and responses.
//!
//! Broker-connection logic (ordering, correlation ids, failure handling) is
//! pure connection logic, so a local TCP listener that plays the broker is
//! enough to test it deterministically. [`FakeBroker`] is that listener,
//! played by hand (the test accepts each connection and reads and answers
//! its requests at the byte level) or by a [`Script`] (a one-broker cluster
//! served in the background, with switches to fail, stall or hold it and a
//! record of what it saw). Every wait is bounded by [`within`].
//! [`Logs`] and [`Counters`] capture what the code under test logs and
//! counts (thread-local, so they see the tasks of a current-thread runtime).
//!
//! Compiled for this crate's tests and, with the feature `test-support`,
//! for the unit tests of the crates above (`sluice-chain`'s sinks and
//! readiness probe, `sluice-sink-single`, `sluice-sink-cluster`'s driver,
//! `sluice-tls`); never in a build of Sluice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use sluice_codec::kafka_protocol::messages::ResponseHeader;
use sluice_codec::kafka_protocol::protocol::Encodable;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit,
};

mod conn;
mod fake;
mod script;

pub use conn::{FakeConn, Stall};
pub use fake::FakeBroker;
pub use script::{FETCH_SESSION, Plain, Script, Seen, TOPIC};

/// The bound on every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `f`, failing the test with `what` if it takes longer than [`WAIT`].
pub async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// A request as it arrives from a client: raw bytes, body not decoded.
pub fn request(api: ApiKey, version: i16, correlation_id: i32, body: RequestKind) -> Request {
    let built = Request::from_body(api, version, correlation_id, None, body);
    let mut bytes = BytesMut::new();
    built.encode(&mut bytes).unwrap();
    Request::parse(bytes.split_off(4)).unwrap()
}

/// A request frame with a valid header and `body_len` bytes of filler.
pub fn raw_request(api: ApiKey, version: i16, correlation_id: i32, body_len: usize) -> Request {
    let mut frame = BytesMut::with_capacity(10 + body_len);
    frame.put_i16(api as i16);
    frame.put_i16(version);
    frame.put_i32(correlation_id);
    frame.put_i16(-1); // null client id (header v1)
    frame.put_bytes(0, body_len);
    Request::parse(frame).unwrap()
}

/// A response frame (with its length prefix) as a broker would send it.
pub fn response_frame(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut frame, api.response_header_version(version))
        .unwrap();
    body.encode(&mut frame, version).unwrap();
    let len = i32::try_from(frame.len() - 4).unwrap();
    frame[..4].copy_from_slice(&len.to_be_bytes());
    frame
}

/// A response as Sluice receives it from a broker: raw bytes, not decoded.
pub fn parsed_response(api: ApiKey, version: i16, body: &ResponseKind) -> Response {
    let mut frame = response_frame(api, version, 42, body);
    Response::parse(frame.split_off(4), api, version).unwrap()
}

/// Captures the log output of the whole test binary.
///
/// One global subscriber, because per-thread ones miss events when tests on
/// other threads race to cache callsite interest. Tests pick their own lines
/// out by something unique to them (a port, a correlation id).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// The process-wide capture, installed on first use.
    pub fn global() -> &'static Logs {
        static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
        LOGS.get_or_init(|| {
            let logs = Logs::default();
            let buf = logs.0.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || LogWriter(buf.clone()))
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in unit tests");
            logs
        })
    }

    /// Captured lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A metrics recorder that keeps counter totals and how many samples each
/// histogram recorded; install with `metrics::set_default_local_recorder`.
#[derive(Clone, Default)]
pub struct Counters(Arc<Mutex<HashMap<String, u64>>>);

impl Counters {
    /// The total of counter `name` with exactly `labels`, or the number of
    /// samples histogram `name` recorded with them.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let key = render(
            name,
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        self.0.lock().unwrap().get(&key).copied().unwrap_or(0)
    }
}

fn render(name: &str, labels: impl Iterator<Item = (String, String)>) -> String {
    let mut labels: Vec<_> = labels.map(|(k, v)| format!("{k}={v}")).collect();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

struct CounterEntry {
    totals: Counters,
    key: String,
}

impl CounterFn for CounterEntry {
    fn increment(&self, value: u64) {
        *self
            .totals
            .0
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default() += value;
    }

    fn absolute(&self, value: u64) {
        self.totals
            .0
            .lock()
            .unwrap()
            .insert(self.key.clone(), value);
    }
}

impl HistogramFn for CounterEntry {
    fn record(&self, _: f64) {
        self.increment(1);
    }
}

impl metrics::Recorder for Counters {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()));
        Counter::from_arc(Arc::new(CounterEntry {
            totals: self.clone(),
            key: render(key.name(), labels),
        }))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()));
        Histogram::from_arc(Arc::new(CounterEntry {
            totals: self.clone(),
            key: render(key.name(), labels),
        }))
    }
}
