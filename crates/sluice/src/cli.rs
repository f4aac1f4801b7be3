//! The command line: which files to read, how to log, how long to leave and
//! to drain.
//!
//! Flags are global, so they may come before or after `validate-config`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// The version and the commit the binary was built from (see `build.rs`).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLUICE_COMMIT"),
    ")"
);

/// Sluice: a Kafka-protocol proxy, configured like shotover-proxy.
#[derive(Debug, Parser)]
#[command(name = "sluice", version = VERSION)]
pub(crate) struct Cli {
    /// The topology file: sources and their chains.
    #[arg(long, global = true, default_value = "config/topology.yaml")]
    pub topology_file: PathBuf,

    /// The config file: log level and metrics endpoint.
    #[arg(long, global = true, default_value = "config/config.yaml")]
    pub config_file: PathBuf,

    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// At shutdown, how long connections may keep answering requests they
    /// already forwarded, in seconds.
    #[arg(long, global = true, default_value_t = 30)]
    pub drain_timeout_secs: u64,

    /// At shutdown, before draining, how long a node that is no longer shown
    /// to clients keeps serving its open connections so that they move to
    /// the other Sluice nodes, in seconds (ends early once every connection
    /// closed; skipped when no other node is up; 0: drain at once).
    #[arg(long, global = true, default_value_t = 10)]
    pub leave_timeout_secs: u64,

    /// Which node of the topology's `shotover_nodes` this process is, in
    /// place of the file's `local_shotover_broker_id`: every node of a
    /// deployment can then run the same topology file (it must have exactly
    /// one KafkaSinkCluster).
    #[arg(long, global = true, value_name = "BROKER_ID")]
    pub local_shotover_broker_id: Option<i32>,

    /// What to do; without a subcommand, run the proxy.
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// `--leave-timeout-secs` as a duration.
    pub(crate) fn leave_timeout(&self) -> Duration {
        Duration::from_secs(self.leave_timeout_secs)
    }

    /// `--drain-timeout-secs` as a duration.
    pub(crate) fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.drain_timeout_secs)
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Load and validate both files, print "configuration OK" and exit.
    ValidateConfig,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per event.
    Json,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["sluice"]).unwrap();
        assert_eq!(cli.topology_file, PathBuf::from("config/topology.yaml"));
        assert_eq!(cli.config_file, PathBuf::from("config/config.yaml"));
        assert_eq!(cli.log_format, LogFormat::Human);
        assert_eq!(cli.drain_timeout(), Duration::from_secs(30));
        assert_eq!(cli.leave_timeout(), Duration::from_secs(10));
        assert_eq!(cli.local_shotover_broker_id, None);
        assert!(cli.command.is_none());
    }

    #[test]
    fn flags_work_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "sluice",
            "validate-config",
            "--topology-file",
            "t.yaml",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert!(matches!(cli.command, Some(Command::ValidateConfig)));
        assert_eq!(cli.topology_file, PathBuf::from("t.yaml"));
        assert_eq!(cli.log_format, LogFormat::Json);
    }

    #[test]
    fn rejects_unknown_log_format() {
        assert!(Cli::try_parse_from(["sluice", "--log-format", "xml"]).is_err());
    }
}
