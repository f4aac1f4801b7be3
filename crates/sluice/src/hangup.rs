//! What SIGHUP reloads, and what it cannot.
//!
//! - `main_log_level`: the config file is read and validated again, as at
//!   startup, and its log filter put in force at once ([`LogFilter`]). A
//!   file that does not load, or a filter that does not parse, is refused
//!   with an ERROR line naming the file and the field; the filter in force
//!   stays. When `RUST_LOG` set the filter at startup, it stays.
//! - Every TLS certificate, key and CA file ([`crate::ops::Reloads`]).
//! - Nothing else: `observability_interface` and the whole topology (its
//!   listeners, sinks and their settings) are read at startup only. A
//!   SIGHUP that finds them changed says so in a WARN line and applies none
//!   of it, so that an operator who edited them learns that a restart is
//!   needed (see `docs/deployment.md`).

use std::path::PathBuf;
use std::sync::Arc;

use sluice_config::Topology;
use tracing::{error, info, warn};

use crate::logging::{Change, LogFilter};
use crate::ops::Reloads;
use crate::wiring::{self, Loaded};

/// Everything a SIGHUP needs.
pub(crate) struct Hangup {
    config_path: PathBuf,
    topology_path: PathBuf,
    /// The topology in force, as its `Debug` text: two parses of equal
    /// files print the same, whatever their comments, spacing or key order.
    topology: String,
    /// The `--local-shotover-broker-id` flag, applied to the file's
    /// topology before comparing, as at startup.
    local_broker_id: Option<i32>,
    /// The observability endpoint's address in force.
    observability: Option<String>,
    log: LogFilter,
    tls: Reloads,
}

impl Hangup {
    /// What SIGHUP compares with and reloads, from the files as loaded at
    /// startup.
    pub(crate) fn new(loaded: &Loaded, log: LogFilter, tls: Reloads) -> Self {
        Self {
            config_path: loaded.config_path.clone(),
            topology_path: loaded.topology_path.clone(),
            topology: format!("{:?}", loaded.topology),
            local_broker_id: loaded.local_broker_id,
            observability: loaded.config.observability_interface.clone(),
            log,
            tls,
        }
    }

    /// Handles one SIGHUP. Reads files: call it off the runtime's workers.
    pub(crate) fn reload_all(&self) {
        self.config();
        self.topology();
        // Last, so that its line tells that the SIGHUP was handled.
        self.tls();
    }

    /// The config file: the log filter, and whether the endpoint moved.
    fn config(&self) {
        let config = match wiring::load_config(&self.config_path) {
            Ok(config) => config,
            Err(e) => {
                error!(
                    "SIGHUP: {e}; refused, the log level in force stays: `{}`",
                    self.log.current()
                );
                return;
            }
        };
        let file = self.config_path.display();
        match self.log.set(&config.main_log_level) {
            Ok(Change::Replaced(before)) => info!(
                "SIGHUP: log level now `{}` (was `{before}`), from {file}",
                config.main_log_level
            ),
            Ok(Change::Unchanged) => info!(
                "SIGHUP: log level `{}` unchanged in {file}",
                config.main_log_level
            ),
            Ok(Change::KeptFromEnv) => info!(
                "SIGHUP: RUST_LOG is set and stays in force; main_log_level in {file} not applied"
            ),
            Err(e) => error!(
                "SIGHUP: {file}: field `main_log_level`: {e:#}; refused, the log level in force stays: `{}`",
                self.log.current()
            ),
        }
        if config.observability_interface != self.observability {
            let shown = |addr: &Option<String>| addr.clone().unwrap_or_else(|| "(unset)".into());
            warn!(
                "SIGHUP: {file}: field `observability_interface` changed to {}; it needs a restart, the endpoint stays as it was: {}",
                shown(&config.observability_interface),
                shown(&self.observability)
            );
        }
    }

    fn tls(&self) {
        let Some(reloader) = self.tls.get().map(Arc::clone) else {
            info!("SIGHUP before the listeners are bound: no TLS to reload yet");
            return;
        };
        if reloader.is_empty() {
            info!("SIGHUP: no TLS configured, nothing to reload");
            return;
        }
        let counts = reloader.reload_all("SIGHUP");
        info!(
            reloaded = counts.ok,
            refused = counts.failed,
            "SIGHUP: {} TLS setting(s) reloaded, {} refused",
            counts.ok,
            counts.failed
        );
    }

    /// Says when the topology file no longer holds the topology in force.
    fn topology(&self) {
        let file = self.topology_path.display();
        let loaded = Topology::load(&self.topology_path).and_then(|mut topology| {
            if let Some(id) = self.local_broker_id {
                topology.set_local_shotover_broker_id(id, &self.topology_path)?;
            }
            Ok(topology)
        });
        match loaded {
            Err(e) => {
                warn!("SIGHUP: {e}; the topology is read at startup only, the one in force stays")
            }
            Ok(now) if format!("{now:?}") != self.topology => warn!(
                "SIGHUP: {file} changed since startup; topology changes need a restart and were not applied (TLS files are reloaded)"
            ),
            Ok(_) => {}
        }
    }
}
