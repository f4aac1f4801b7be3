//! The config file: process-wide settings (log level, metrics endpoint), in
//! shotover's format.

use std::net::SocketAddr;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{ConfigError, FieldError, load, validate};

/// The whole config file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Log filter, e.g. `info` or `info,sluice=debug`. `RUST_LOG` overrides it.
    pub main_log_level: String,
    /// `host:port` of the Prometheus `/metrics` endpoint; an IP address, since
    /// the endpoint binds it directly.
    #[serde(default)]
    pub observability_interface: Option<String>,
}

impl Config {
    /// Reads, parses and validates the config file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(&load::read_file(path)?, path)
    }

    /// Parses and validates `yaml`; `path` names the origin in errors.
    pub fn parse(yaml: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Self = load::parse_yaml(yaml, path)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks every rule; `path` names the file in errors.
    pub(crate) fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        self.check().map_err(|e| e.in_file(path))
    }

    /// The metrics endpoint's address, if configured.
    pub fn observability_addr(&self) -> Result<Option<SocketAddr>, FieldError> {
        let Some(addr) = &self.observability_interface else {
            return Ok(None);
        };
        addr.parse::<SocketAddr>().map(Some).map_err(|_| {
            FieldError::new(
                "observability_interface",
                format!("invalid address `{addr}`: expected ip:port, e.g. 127.0.0.1:9001"),
            )
        })
    }

    fn check(&self) -> Result<(), FieldError> {
        if self.main_log_level.chars().any(char::is_whitespace) {
            return Err(FieldError::new(
                "main_log_level",
                "must not contain spaces: write directives like `info,sluice=debug`",
            ));
        }
        validate::log_filter("main_log_level", &self.main_log_level)?;
        self.observability_addr()?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Config, ConfigError> {
        Config::parse(yaml, Path::new("config.yaml"))
    }

    #[test]
    fn shotover_config_parses() {
        let c = parse(
            "main_log_level: \"info,sluice=info\"\nobservability_interface: \"127.0.0.1:9001\"\n",
        )
        .unwrap();
        assert_eq!(c.main_log_level, "info,sluice=info");
        assert_eq!(
            c.observability_addr().unwrap(),
            Some("127.0.0.1:9001".parse().unwrap())
        );
    }

    #[test]
    fn observability_is_optional() {
        let c = parse("main_log_level: info\n").unwrap();
        assert_eq!(c.observability_addr().unwrap(), None);
    }

    #[test]
    fn bad_observability_address_names_field_and_file() {
        let e = parse("main_log_level: info\nobservability_interface: localhost\n").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("config.yaml: field `observability_interface`"),
            "{msg}"
        );
    }

    #[test]
    fn empty_log_level_is_rejected() {
        let e = parse("main_log_level: \"\"\n").unwrap_err();
        assert_eq!(e.field(), Some("main_log_level"));
    }

    #[test]
    fn a_log_level_tracing_would_read_as_a_target_is_rejected() {
        for bad in [
            "warning",
            "inf0",
            "info,sluice=loud",
            "info,,debug",
            "sluice",
            "6",
            "info,sluice=",
        ] {
            let e = parse(&format!("main_log_level: \"{bad}\"\n")).unwrap_err();
            assert_eq!(e.field(), Some("main_log_level"), "{bad}: {e}");
            assert!(e.to_string().starts_with("config.yaml: "), "{e}");
        }
        for good in [
            "info",
            "WARN",
            "info,sluice=debug",
            "off,sluice_sink_cluster=trace",
            "3,sluice=4",
            "sluice[client]=debug,info",
        ] {
            parse(&format!("main_log_level: \"{good}\"\n")).unwrap();
        }
    }

    #[test]
    fn unknown_field_is_named() {
        let e = parse("main_log_level: info\nmain_log_levle: debug\n").unwrap_err();
        assert_eq!(e.field(), Some("main_log_levle"), "{e}");
    }

    #[test]
    fn missing_file_names_file() {
        let e = Config::load(Path::new("/nonexistent/sluice/config.yaml")).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }));
        assert!(
            e.to_string().contains("/nonexistent/sluice/config.yaml"),
            "{e}"
        );
    }
}
