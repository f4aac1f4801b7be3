//! Log setup: the filter comes from `RUST_LOG` when set, else from the config
//! file's `main_log_level`; lines are human-readable or JSON, on stdout.
//!
//! The filter sits behind a reload layer, so that SIGHUP can put the config
//! file's new `main_log_level` in force without a restart ([`LogFilter`]);
//! a filter that `RUST_LOG` chose stays, as it did at startup.

use std::io::IsTerminal;
use std::sync::Mutex;

use anyhow::Context;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

use crate::cli::LogFormat;

/// Parses a filter directive string such as `info,sluice=debug`.
pub(crate) fn parse_filter(directives: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(directives).map_err(|e| format!("invalid log filter `{directives}`: {e}"))
}

/// The filter in force, and the handle that replaces it.
pub(crate) struct LogFilter {
    handle: reload::Handle<EnvFilter, Registry>,
    /// The directives in force.
    current: Mutex<String>,
    /// `RUST_LOG` chose them: the config file's do not apply.
    from_env: bool,
}

/// What [`LogFilter::set`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The directives were those in force already.
    Unchanged,
    /// The new directives are in force; these were before.
    Replaced(String),
    /// `RUST_LOG` set the filter, which stays.
    KeptFromEnv,
}

impl LogFilter {
    /// Puts `directives` in force, unless `RUST_LOG` chose the filter.
    /// Invalid directives are refused and the filter in force stays.
    pub(crate) fn set(&self, directives: &str) -> anyhow::Result<Change> {
        if self.from_env {
            return Ok(Change::KeptFromEnv);
        }
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if *current == directives {
            return Ok(Change::Unchanged);
        }
        let filter = parse_filter(directives).map_err(anyhow::Error::msg)?;
        self.handle
            .reload(filter)
            .context("cannot replace the log filter")?;
        Ok(Change::Replaced(std::mem::replace(
            &mut *current,
            directives.to_owned(),
        )))
    }

    /// The directives in force.
    pub(crate) fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Installs the global subscriber. `main_log_level` was checked at load time.
pub(crate) fn init(main_log_level: &str, format: LogFormat) -> anyhow::Result<LogFilter> {
    let (directives, from_env) = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => (env, true),
        _ => (main_log_level.to_owned(), false),
    };
    let filter = parse_filter(&directives).map_err(anyhow::Error::msg);
    let filter = if from_env {
        filter.context("RUST_LOG")?
    } else {
        filter?
    };
    let (filter, handle) = reload::Layer::new(filter);
    let lines = tracing_subscriber::fmt::layer().with_ansi(std::io::stdout().is_terminal());
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Human => registry.with(lines).try_init(),
        LogFormat::Json => registry.with(lines.json()).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))?;
    Ok(LogFilter {
        handle,
        current: Mutex::new(directives),
        from_env,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn filters() {
        assert!(parse_filter("info,sluice=info").is_ok());
        assert!(parse_filter("debug").is_ok());
        assert!(parse_filter("info,sluice=loud").is_err());
    }

    /// A filter replaced through the handle decides what a subscriber
    /// built on it logs; a refused one leaves the one in force.
    #[test]
    fn set_replaces_the_filter_and_refuses_a_bad_one() {
        let (layer, handle) = reload::Layer::new(parse_filter("info").unwrap());
        let subscriber = tracing_subscriber::registry().with(layer);
        let filter = LogFilter {
            handle,
            current: Mutex::new("info".to_owned()),
            from_env: false,
        };
        tracing::subscriber::with_default(subscriber, || {
            assert!(!tracing::enabled!(tracing::Level::DEBUG));
            assert_eq!(filter.set("info").unwrap(), Change::Unchanged);
            assert_eq!(
                filter.set("debug").unwrap(),
                Change::Replaced("info".to_owned())
            );
            assert!(tracing::enabled!(tracing::Level::DEBUG));
            let refused = filter.set("info,sluice=loud").unwrap_err();
            assert!(refused.to_string().contains("sluice=loud"), "{refused}");
            assert_eq!(filter.current(), "debug");
            assert!(tracing::enabled!(tracing::Level::DEBUG));
        });
    }

    #[test]
    fn a_filter_from_rust_log_stays() {
        let (_layer, handle) = reload::Layer::new(parse_filter("warn").unwrap());
        let filter = LogFilter {
            handle,
            current: Mutex::new("warn".to_owned()),
            from_env: true,
        };
        assert_eq!(filter.set("debug").unwrap(), Change::KeptFromEnv);
        assert_eq!(filter.current(), "warn");
    }
}
