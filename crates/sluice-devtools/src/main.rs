//! `sluice-devtools`: small helpers for developing and testing Sluice
//! against a real local Kafka cluster.
//!
//! - `gen-certs --out DIR` writes a test PKI (CAs, broker, proxy and client
//!   certificates) as PEM files.
//! - `wait-kafka --bootstrap HOST:PORT --brokers N --timeout-secs S` waits
//!   until a cluster's metadata lists `N` brokers and a controller.

mod certs;
mod wait_kafka;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Command-line interface of `sluice-devtools`.
#[derive(Debug, Parser)]
#[command(name = "sluice-devtools", version, about)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Generate the test PKI (PEM, unencrypted PKCS#8 keys) into a directory.
    ///
    /// Does nothing when every file is already there.
    GenCerts {
        /// Directory to write the files into (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Regenerate even when every file already exists.
        #[arg(long)]
        force: bool,
    },
    /// Wait until a Kafka cluster lists N brokers and a controller.
    ///
    /// Connects over plain TCP and sends ApiVersions then Metadata, retrying
    /// until the metadata lists at least N brokers (each of which answers
    /// ApiVersions) and a controller id, or the timeout passes.
    WaitKafka {
        /// A bootstrap address, HOST:PORT (PLAINTEXT listener).
        #[arg(long)]
        bootstrap: String,
        /// How many brokers must be registered.
        #[arg(long, default_value_t = 1)]
        brokers: usize,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
        /// Print nothing but the final line.
        #[arg(long)]
        quiet: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::GenCerts { out, force } => certs::generate(&out, force).map(|outcome| {
            println!("{outcome}: certificates in {}", out.display());
        }),
        Command::WaitKafka {
            bootstrap,
            brokers,
            timeout_secs,
            quiet,
        } => wait_kafka::wait(&wait_kafka::Options {
            bootstrap,
            brokers,
            timeout: Duration::from_secs(timeout_secs),
            quiet,
        })
        .await
        .map(|ready| println!("{ready}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice-devtools: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
