//! Reading the metrics the source records, through a minimal recorder
//! installed once for the whole test binary. Values are never reset, and each
//! test's source has its own name, so tests running at once do not interfere
//! on `source`-labelled metrics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use super::harness::WAIT;

#[derive(Default)]
struct TestRecorder {
    counters: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    /// f64 bits, as `metrics` stores gauges in an `AtomicU64`.
    gauges: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<Key, Arc<Samples>>>,
}

/// Every value a histogram recorded.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.counters.lock().unwrap();
        Counter::from_arc(Arc::clone(counters.entry(key.clone()).or_default()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut gauges = self.gauges.lock().unwrap();
        Gauge::from_arc(Arc::clone(gauges.entry(key.clone()).or_default()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.histograms.lock().unwrap();
        Histogram::from_arc(Arc::clone(histograms.entry(key.clone()).or_default()))
    }
}

static RECORDER: OnceLock<&'static TestRecorder> = OnceLock::new();

/// Installs the recorder (once); must run before any metric is recorded.
pub(crate) fn install() {
    RECORDER.get_or_init(|| {
        let recorder: &'static TestRecorder = Box::leak(Box::default());
        metrics::set_global_recorder(recorder).expect("another metrics recorder is installed");
        recorder
    });
}

fn matches(key: &Key, name: &str, labels: &[(&str, &str)]) -> bool {
    key.name() == name
        && labels
            .iter()
            .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

/// The metric `name` summed over every label set that includes `labels`.
pub(crate) fn value(name: &str, labels: &[(&str, &str)]) -> f64 {
    let recorder = RECORDER.get().expect("metrics::install was not called");
    let counters: u64 = (recorder.counters.lock().unwrap().iter())
        .filter(|(key, _)| matches(key, name, labels))
        .map(|(_, v)| v.load(Ordering::SeqCst))
        .sum();
    let gauges: f64 = (recorder.gauges.lock().unwrap().iter())
        .filter(|(key, _)| matches(key, name, labels))
        .map(|(_, v)| f64::from_bits(v.load(Ordering::SeqCst)))
        .sum();
    counters as f64 + gauges
}

/// Every value histogram `name` recorded with a label set that includes
/// `labels`.
pub(crate) fn samples(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    let recorder = RECORDER.get().expect("metrics::install was not called");
    (recorder.histograms.lock().unwrap().iter())
        .filter(|(key, _)| matches(key, name, labels))
        .flat_map(|(_, samples)| samples.0.lock().unwrap().clone())
        .collect()
}

/// Waits until the metric equals `expected` (metrics are recorded by the
/// connection tasks, a moment after the client sees the effect).
pub(crate) async fn wait_for(name: &str, labels: &[(&str, &str)], expected: f64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = value(name, labels);
        if now == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} {labels:?} is {now}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
