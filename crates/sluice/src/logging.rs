//! Log setup: the filter comes from `RUST_LOG` when set, else from the config
//! file's `main_log_level`; lines are human-readable or JSON, on stdout.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Parses a filter directive string such as `info,sluice=debug`.
pub(crate) fn parse_filter(directives: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(directives).map_err(|e| format!("invalid log filter `{directives}`: {e}"))
}

/// Installs the global subscriber. `main_log_level` was checked at load time.
pub(crate) fn init(main_log_level: &str, format: LogFormat) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => parse_filter(&env)
            .map_err(anyhow::Error::msg)
            .context("RUST_LOG")?,
        _ => parse_filter(main_log_level).map_err(anyhow::Error::msg)?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    let installed = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters() {
        assert!(parse_filter("info,sluice=info").is_ok());
        assert!(parse_filter("debug").is_ok());
        assert!(parse_filter("info,sluice=loud").is_err());
    }
}
