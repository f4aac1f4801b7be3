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

use tracing::{error, info, warn};

use crate::logging::{Change, LogFilter};
use crate::ops::Reloads;
use crate::wiring::{self, Loaded};

/// Everything a SIGHUP needs.
pub(crate) struct Hangup {
    config_path: PathBuf,
    topology_path: PathBuf,
    /// `--local-shotover-broker-id`, applied to the file as at startup.
    local_broker_id: Option<i32>,
    /// The topology in force, as its `Debug` text: two parses of equal
    /// files print the same, whatever their comments, spacing or key order.
    topology: String,
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
            local_broker_id: loaded.local_broker_id,
            topology: format!("{:?}", loaded.topology),
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
        match differs(&self.topology, &self.topology_path, self.local_broker_id) {
            Err(e) => {
                warn!("SIGHUP: {e}; the topology is read at startup only, the one in force stays")
            }
            Ok(true) => warn!(
                "SIGHUP: {file} changed since startup; topology changes need a restart and were not applied (TLS files are reloaded)"
            ),
            Ok(false) => {}
        }
    }
}

/// Whether the topology file, read as at startup (with
/// `--local-shotover-broker-id` applied), no longer holds `in_force` (the
/// `Debug` text of the topology in force).
fn differs(
    in_force: &str,
    path: &std::path::Path,
    local_broker_id: Option<i32>,
) -> Result<bool, sluice_config::ConfigError> {
    let now = wiring::load_topology(path, local_broker_id)?;
    Ok(format!("{now:?}") != in_force)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const TWO_NODES: &str = r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address_for_clients: "127.0.0.1:9192"
                address_for_peers: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 0
              - address_for_clients: "127.0.0.1:9193"
                address_for_peers: "127.0.0.1:9193"
                rack: "rack0"
                broker_id: 1
            local_shotover_broker_id: 0
            first_contact_points: ["127.0.0.1:29092"]
            connect_timeout_ms: 3000
"#;

    #[test]
    fn the_local_node_given_on_the_command_line_is_no_change() {
        let dir = std::env::temp_dir().join(format!("sluice-hangup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("topology.yaml");
        std::fs::write(&path, TWO_NODES).unwrap();
        // Node 1 by --local-shotover-broker-id, the file saying node 0.
        let in_force = format!("{:?}", wiring::load_topology(&path, Some(1)).unwrap());
        assert!(!differs(&in_force, &path, Some(1)).unwrap());
        // Read without the flag, the file would be another node.
        assert!(differs(&in_force, &path, None).unwrap());
        // An edit is a change.
        std::fs::write(&path, TWO_NODES.replace("3000", "5000")).unwrap();
        assert!(differs(&in_force, &path, Some(1)).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
