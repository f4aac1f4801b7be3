//! The config file: process-wide settings.

use serde::Deserialize;

/// The whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Log filter, e.g. `info` or `info,sluice=debug`. `RUST_LOG` overrides it.
    pub main_log_level: String,
    /// `host:port` of the Prometheus `/metrics` endpoint.
    pub observability_interface: Option<String>,
}
