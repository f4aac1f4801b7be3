//! Operability: what `/health` and `/ready` report, and which TLS settings
//! a reload (SIGHUP, or a file that changed) rebuilds.
//!
//! - `/health`: 200 `ok` once every listener is bound, for as long as the
//!   process runs (also while it drains: it still serves what it owes);
//!   503 `starting` before.
//! - `/ready`: 200 when every sink is ready (a broker reachable and
//!   metadata loaded, see [`sluice_chain::readiness`]), with each sink's
//!   state on one line; 503 with the sinks that are not and why, or
//!   `starting`, or `shutting down` once the first SIGINT/SIGTERM arrived
//!   (so that a load balancer stops sending new clients while Sluice
//!   drains).
//!
//! [`Reloads`] gathers every listener's and every sink's reloadable TLS
//! into one [`TlsReloader`], reloaded by the SIGHUP handler and polled every
//! [`POLL_INTERVAL`](sluice_tls::reload::POLL_INTERVAL).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use sluice_chain::readiness::Readiness;
use sluice_metrics::{Check, Probes};
use sluice_tls::reload::{Reload, TlsReloader};
use tokio_util::sync::CancellationToken;

/// The state `/health` and `/ready` read.
pub(crate) struct Status {
    serving: AtomicBool,
    shutdown: CancellationToken,
    sinks: OnceLock<Vec<Arc<Readiness>>>,
}

impl Status {
    /// Starting: nothing bound yet.
    pub(crate) fn new(shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            serving: AtomicBool::new(false),
            shutdown,
            sinks: OnceLock::new(),
        })
    }

    /// The sinks' readiness, once their probes run.
    pub(crate) fn set_sinks(&self, sinks: Vec<Arc<Readiness>>) {
        let _ = self.sinks.set(sinks);
    }

    /// Every listener is bound.
    pub(crate) fn set_serving(&self) {
        self.serving.store(true, Ordering::Release);
    }

    fn serving(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }
}

impl Probes for Status {
    fn health(&self) -> Check {
        if self.serving() {
            Check::pass("ok")
        } else {
            Check::fail("starting: the listeners are not bound yet")
        }
    }

    fn ready(&self) -> Check {
        if self.shutdown.is_cancelled() {
            return Check::fail("not ready: shutting down");
        }
        if !self.serving() {
            return Check::fail("not ready: starting");
        }
        let sinks = self.sinks.get().map(Vec::as_slice).unwrap_or_default();
        ready_of(sinks.iter().map(|s| (s.sink(), s.verdict())))
    }
}

/// `/ready` from each sink's name and verdict.
fn ready_of<'a>(sinks: impl Iterator<Item = (&'a str, sluice_chain::readiness::Verdict)>) -> Check {
    let mut ready = Vec::new();
    let mut not_ready = Vec::new();
    for (name, verdict) in sinks {
        let line = format!("sink {name}: {}", verdict.reason);
        if verdict.ready {
            ready.push(line);
        } else {
            not_ready.push(line);
        }
    }
    if !not_ready.is_empty() {
        return Check::fail(format!("not ready: {}", not_ready.join("; ")));
    }
    if ready.is_empty() {
        return Check::pass("ready");
    }
    Check::pass(format!("ready: {}", ready.join("; ")))
}

/// The TLS reloader, set once the listeners are bound; a SIGHUP before
/// then has nothing to reload.
pub(crate) type Reloads = Arc<OnceLock<Arc<TlsReloader>>>;

/// One reloader over `targets`, polling their files until `cancel` fires.
pub(crate) fn start_reloads(
    reloads: &Reloads,
    targets: Vec<Arc<dyn Reload>>,
    cancel: CancellationToken,
) {
    let reloader = Arc::new(TlsReloader::new(targets));
    if !reloader.is_empty() {
        Arc::clone(&reloader).spawn_polling(sluice_tls::reload::POLL_INTERVAL, cancel);
    }
    let _ = reloads.set(reloader);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use sluice_chain::readiness::Verdict;

    fn verdict(ready: bool, reason: &str) -> Verdict {
        Verdict {
            ready,
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn starting_and_shutting_down_are_not_ready() {
        let shutdown = CancellationToken::new();
        let status = Status::new(shutdown.clone());
        assert!(!status.health().ok);
        assert_eq!(status.ready(), Check::fail("not ready: starting"));
        status.set_sinks(Vec::new());
        status.set_serving();
        assert_eq!(status.health(), Check::pass("ok"));
        assert_eq!(status.ready(), Check::pass("ready"));
        shutdown.cancel();
        assert_eq!(status.ready(), Check::fail("not ready: shutting down"));
        assert!(status.health().ok, "draining is still serving");
    }

    #[test]
    fn ready_only_when_every_sink_is() {
        let both = [
            ("a", verdict(true, "1 of 1 broker(s) reachable")),
            ("b", verdict(true, "3 of 3 broker(s) reachable")),
        ];
        assert_eq!(
            ready_of(both.into_iter()),
            Check::pass(
                "ready: sink a: 1 of 1 broker(s) reachable; sink b: 3 of 3 broker(s) reachable"
            )
        );
        let one_down = [
            ("a", verdict(true, "1 of 1 broker(s) reachable")),
            ("b", verdict(false, "no broker reachable (x: refused)")),
        ];
        assert_eq!(
            ready_of(one_down.into_iter()),
            Check::fail("not ready: sink b: no broker reachable (x: refused)")
        );
    }
}
