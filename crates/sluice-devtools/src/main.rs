//! `sluice-devtools`: small helpers for developing and testing Sluice
//! against a real local Kafka cluster.
//!
//! - `gen-certs --out DIR` writes a test PKI (CAs, broker, proxy and client
//!   certificates) as PEM files.
//! - `wait-kafka --bootstrap HOST:PORT --brokers N --timeout-secs S` waits
//!   until a cluster's metadata lists `N` brokers and a controller.
//! - `idle-connections --bootstrap HOST:PORT --count N` opens `N`
//!   connections, asks ApiVersions on each, prints `ready N` and holds them
//!   until standard input closes, SIGTERM or `--hold-secs`.
//! - `pipeline-fetch --bootstrap HOST:PORT --topic T` writes pipelined
//!   Fetch requests on one connection and never reads it, until released
//!   the same way.

mod certs;
mod client;
mod hold;
mod idle;
mod pipeline;
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
    /// Open N connections that each ask ApiVersions, then sit idle.
    ///
    /// Prints `ready N` once every connection has its answer, then holds them
    /// until standard input closes (unless --ignore-stdin), SIGTERM or SIGINT,
    /// or --hold-secs. Fails if the peer closes any of them meanwhile. Raises
    /// its own soft RLIMIT_NOFILE to the hard limit when N needs it.
    IdleConnections {
        /// The address to connect to, HOST:PORT (plain TCP).
        #[arg(long)]
        bootstrap: String,
        /// How many connections.
        #[arg(long)]
        count: usize,
        /// How many connections may be being set up at once.
        #[arg(long, default_value_t = 200)]
        concurrency: usize,
        /// Opening all of them must finish within this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
        #[command(flatten)]
        hold: HoldArgs,
    },
    /// Pipeline Fetch requests on one connection and never read it.
    ///
    /// Sends ApiVersions and Metadata for the topic, then writes --requests
    /// Fetch requests for all of its partitions from offset 0 (max_wait_ms
    /// 0; --max-bytes for the request and for each partition) and holds the
    /// connection, unread, until released like idle-connections. The
    /// bootstrap must lead every partition: a Sluice node fronting the
    /// cluster does.
    PipelineFetch {
        /// A Sluice node, HOST:PORT (plain TCP).
        #[arg(long)]
        bootstrap: String,
        /// The topic to fetch.
        #[arg(long)]
        topic: String,
        /// How many Fetch requests.
        #[arg(long, default_value_t = 40)]
        requests: usize,
        /// max_bytes of each request and of each partition in it.
        #[arg(long, default_value_t = 52_428_800)]
        max_bytes: i32,
        /// Connecting and writing must finish within this many seconds.
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
        #[command(flatten)]
        hold: HoldArgs,
    },
}

/// How long a holding client holds.
#[derive(Debug, clap::Args)]
struct HoldArgs {
    /// Let go after this many seconds at most.
    #[arg(long, default_value_t = 3600)]
    hold_secs: u64,
    /// Do not let go when standard input closes (for a caller whose stdin
    /// is /dev/null): only a signal or --hold-secs end the hold.
    #[arg(long)]
    ignore_stdin: bool,
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
        Command::IdleConnections {
            bootstrap,
            count,
            concurrency,
            timeout_secs,
            hold,
        } => idle::run(&idle::Options {
            bootstrap,
            count,
            concurrency,
            open_timeout: Duration::from_secs(timeout_secs),
            longest_hold: Duration::from_secs(hold.hold_secs),
            watch_stdin: !hold.ignore_stdin,
        })
        .await
        .map(|done| println!("{done}")),
        Command::PipelineFetch {
            bootstrap,
            topic,
            requests,
            max_bytes,
            timeout_secs,
            hold,
        } => pipeline::run(&pipeline::Options {
            bootstrap,
            topic,
            requests,
            max_bytes,
            setup_timeout: Duration::from_secs(timeout_secs),
            longest_hold: Duration::from_secs(hold.hold_secs),
            watch_stdin: !hold.ignore_stdin,
        })
        .await
        .map(|done| println!("{done}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice-devtools: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
