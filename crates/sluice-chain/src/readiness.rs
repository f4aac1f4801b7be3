//! Readiness: whether a sink can serve clients now, for `/ready`.
//!
//! Sluice loads the cluster's metadata when clients ask for it, so an idle
//! Sluice knows nothing of its brokers; a readiness probe cannot wait for
//! clients (a load balancer sends none until the probe passes). Each sink
//! therefore runs its own probe every [`PROBE_INTERVAL`]: every broker it
//! knows (its view of the cluster, else its contact points or destination)
//! at once, each bounded by the connect timeout and `PROBE_TIMEOUT` per
//! request (`probe.rs`):
//!
//! - connect (and the TLS handshake, with the sink's current TLS), then
//!   ApiVersions: the broker is *reachable*;
//! - SaslHandshake, in the first round, tells whether the listener requires
//!   SASL: a broker answers it with `ILLEGAL_SASL_STATE` on a listener
//!   without SASL;
//! - without SASL, Metadata (no topics): the broker list is *loaded*.
//!
//! Each round's connections are closed at its end and are not counted in
//! the broker connection metrics.
//!
//! The rule (`assess`): a sink is ready when its latest round (at most
//! `STALE_AFTER` old) reached at least one broker, and metadata is loaded:
//! a probe's Metadata listed brokers, or the sink's own view holds brokers
//! (loaded by clients), or the brokers require SASL, where Sluice has no
//! credentials of its own and reaching them is all it can prove (clients'
//! requests load the metadata with their credentials).
//!
//! Each round sets `sluice_sink_ready{sink}` and
//! `sluice_sink_brokers_reachable{sink}`; a change of verdict is logged
//! (WARN when the sink stops being ready, INFO when it is ready again).

mod probe;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::gauge;
use sluice_metrics::names;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerError};

/// How often each sink probes its brokers.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// How long each request of a probe may wait for its answer.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A round older than this makes the sink not ready: its probe is stuck.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(60);
/// Brokers named in a not-ready reason, at most.
const REASONS_SHOWN: usize = 3;

/// What a sink offers its probe.
pub trait ProbeTargets: Send + Sync {
    /// The brokers to probe: every broker the sink knows, else where it
    /// bootstraps from.
    fn candidates(&self) -> Vec<BrokerAddress>;
    /// How to connect to `addr` (with the TLS in use now).
    fn options_for(&self, addr: &BrokerAddress) -> Result<BrokerConnectOptions, BrokerError>;
    /// Brokers in the sink's own view of the cluster, loaded by clients'
    /// requests (0 when it keeps none).
    fn known_brokers(&self) -> usize {
        0
    }
}

/// What one broker showed in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BrokerState {
    /// It answered Metadata, listing this many brokers.
    Metadata {
        /// Brokers in the answer.
        brokers: usize,
    },
    /// It answered ApiVersions; its listener requires SASL.
    AuthenticationRequired,
    /// It answered ApiVersions but not Metadata.
    NoMetadata(String),
    /// No connection, or no answer to ApiVersions.
    Unreachable(String),
}

/// One broker's result in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerProbe {
    /// `host:port`.
    pub(crate) address: String,
    /// What it showed.
    pub(crate) state: BrokerState,
}

/// One probe round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Round {
    /// When it ended.
    pub(crate) at: Instant,
    /// Every broker probed.
    pub(crate) brokers: Vec<BrokerProbe>,
}

impl Round {
    /// Brokers that answered (whatever they answered).
    pub(crate) fn reachable(&self) -> usize {
        self.brokers
            .iter()
            .filter(|b| !matches!(b.state, BrokerState::Unreachable(_)))
            .count()
    }
}

/// Whether a sink is ready, and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Ready to serve clients.
    pub ready: bool,
    /// What holds, or why not.
    pub reason: String,
}

impl Verdict {
    fn ready(reason: String) -> Self {
        Self {
            ready: true,
            reason,
        }
    }

    fn not_ready(reason: String) -> Self {
        Self {
            ready: false,
            reason,
        }
    }
}

/// The readiness rule (see the module docs): the latest `round`, the
/// brokers in the sink's own view, and the time now.
pub(crate) fn assess(round: Option<&Round>, known_brokers: usize, now: Instant) -> Verdict {
    let Some(round) = round else {
        return Verdict::not_ready("no readiness probe has completed yet".to_owned());
    };
    let age = now.saturating_duration_since(round.at);
    if age > STALE_AFTER {
        return Verdict::not_ready(format!(
            "the last readiness probe ended {}s ago",
            age.as_secs()
        ));
    }
    if round.brokers.is_empty() {
        return Verdict::not_ready("no broker to probe".to_owned());
    }
    let reachable = round.reachable();
    let total = round.brokers.len();
    if reachable == 0 {
        return Verdict::not_ready(format!(
            "no broker reachable ({})",
            reasons(round, |s| match s {
                BrokerState::Unreachable(why) => Some(why),
                _ => None,
            })
        ));
    }
    let listed = round
        .brokers
        .iter()
        .filter_map(|b| match b.state {
            BrokerState::Metadata { brokers } => Some(brokers),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let head = format!("{reachable} of {total} broker(s) reachable");
    if listed > 0 {
        return Verdict::ready(format!("{head}, metadata lists {listed} broker(s)"));
    }
    if known_brokers > 0 {
        return Verdict::ready(format!(
            "{head}, metadata of {known_brokers} broker(s) loaded by clients"
        ));
    }
    if round
        .brokers
        .iter()
        .any(|b| b.state == BrokerState::AuthenticationRequired)
    {
        return Verdict::ready(format!(
            "{head}; they require SASL, so metadata is loaded with each client's credentials"
        ));
    }
    Verdict::not_ready(format!(
        "{head} but metadata is not loaded ({})",
        reasons(round, |s| match s {
            BrokerState::NoMetadata(why) => Some(why),
            _ => None,
        })
    ))
}

/// `addr: reason; ...` for the brokers `pick` gives a reason for.
fn reasons(round: &Round, pick: impl Fn(&BrokerState) -> Option<&String>) -> String {
    let all: Vec<String> = round
        .brokers
        .iter()
        .filter_map(|b| pick(&b.state).map(|why| format!("{}: {why}", b.address)))
        .collect();
    let mut text = all
        .iter()
        .take(REASONS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if all.len() > REASONS_SHOWN {
        text.push_str(&format!("; {} more", all.len() - REASONS_SHOWN));
    }
    text.replace('\n', " ")
}

/// A sink's readiness, updated by its probe task.
pub struct Readiness {
    sink: Arc<str>,
    targets: Arc<dyn ProbeTargets>,
    last: Mutex<Option<Round>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("sink", &self.sink)
            .finish_non_exhaustive()
    }
}

impl Readiness {
    /// The sink's name.
    pub fn sink(&self) -> &str {
        &self.sink
    }

    /// The verdict now.
    pub fn verdict(&self) -> Verdict {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        assess(last.as_ref(), self.targets.known_brokers(), Instant::now())
    }

    /// Records a round, exports it and logs a change of verdict.
    fn record(&self, round: Round) {
        let reachable = round.reachable();
        let (before, after) = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            let known = self.targets.known_brokers();
            let before = last.as_ref().map(|r| assess(Some(r), known, now).ready);
            *last = Some(round);
            (before, assess(last.as_ref(), known, now))
        };
        let sink = self.sink.to_string();
        gauge!(names::SINK_READY, "sink" => sink.clone()).set(f64::from(u8::from(after.ready)));
        gauge!(names::SINK_BROKERS_REACHABLE, "sink" => sink).set(reachable as f64);
        let sink = &self.sink;
        match (before, after.ready) {
            (Some(true), false) | (None, false) => {
                warn!(sink = %sink, "sink {sink} is not ready: {}", after.reason);
            }
            (Some(false), true) | (None, true) => {
                info!(sink = %sink, "sink {sink} is ready: {}", after.reason);
            }
            _ => {}
        }
    }
}

/// Starts the probe of the sink `sink` every `every` until `cancel` fires;
/// returns its readiness. Must be called inside a tokio runtime.
pub fn spawn(
    sink: &str,
    targets: Arc<dyn ProbeTargets>,
    every: Duration,
    cancel: CancellationToken,
) -> Arc<Readiness> {
    let readiness = Arc::new(Readiness {
        sink: Arc::from(sink),
        targets: Arc::clone(&targets),
        last: Mutex::new(None),
    });
    let state = Arc::clone(&readiness);
    tokio::spawn(async move {
        let mut prober = probe::Prober::default();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let round = tokio::select! {
                () = cancel.cancelled() => return,
                round = prober.round(targets.as_ref()) => round,
            };
            state.record(round);
        }
    });
    readiness
}
