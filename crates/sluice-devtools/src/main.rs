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
//! - `metadata-latency --bootstrap HOST:PORT --requests N` times full
//!   Metadata requests one at a time and checks each answer's partitions.
//! - `produce-load --bootstrap HOST:PORT --topic T --total N --active A`
//!   holds N connections, A of them producing at a low rate, and times
//!   their requests.

mod certs;
mod client;
mod hold;
mod idle;
mod metadata_latency;
mod pipeline;
mod procstat;
mod produce_load;
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
    /// Time full Metadata requests (every topic), one at a time.
    ///
    /// Sends ApiVersions, then --warmup uncounted and --requests counted
    /// Metadata requests on one connection; each is timed from writing it to
    /// having read its whole answer. Fails unless every answer lists exactly
    /// --expect-partitions partitions, all with a leader and no error, in the
    /// topics named --topic-prefix*. Prints one line: `metadata`, requests,
    /// p50 ms, p99 ms, max ms, answer bytes, partitions, and the CPU ticks of
    /// the --cpu-pid processes over the counted requests.
    MetadataLatency {
        /// Where to connect, HOST:PORT (plain TCP).
        #[arg(long)]
        bootstrap: String,
        /// Counted requests.
        #[arg(long, default_value_t = 200)]
        requests: usize,
        /// Uncounted requests before them.
        #[arg(long, default_value_t = 10)]
        warmup: usize,
        /// Partitions every answer must list in the measured topics.
        #[arg(long)]
        expect_partitions: usize,
        /// The measured topics' common name prefix.
        #[arg(long)]
        topic_prefix: String,
        /// A process whose CPU ticks to read around the counted requests (repeatable).
        #[arg(long = "cpu-pid")]
        cpu_pids: Vec<u32>,
        /// The whole run must finish within this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
    },
    /// Hold many connections, a few of them producing at a low rate.
    ///
    /// Opens --total connections (ApiVersions on each): the first --active to
    /// the leaders of the topic's partitions in turn, the rest to the listed
    /// nodes in turn; prints `ready N`; then each active one sends a Produce
    /// of one record (acks=1) --rate times a second for --warmup-secs, then
    /// --seconds counted. Fails on any error code, closed connection or
    /// unanswered request. Prints one line: `clients`, total, active, counted
    /// requests, p50 ms, p99 ms, max ms, the --cpu-pid CPU ticks over the
    /// counted window, the --rss-pid RSS (KiB) once all are open and at the
    /// window's end, and the counted seconds. Raises its own soft
    /// RLIMIT_NOFILE to the hard limit when --total needs it.
    ProduceLoad {
        /// Bootstrap address, HOST:PORT (plain TCP).
        #[arg(long)]
        bootstrap: String,
        /// The topic to produce to.
        #[arg(long)]
        topic: String,
        /// Connections in all.
        #[arg(long)]
        total: usize,
        /// Connections that produce.
        #[arg(long)]
        active: usize,
        /// Produce requests per second per active connection.
        #[arg(long, default_value_t = 2.0)]
        rate: f64,
        /// Bytes per record.
        #[arg(long, default_value_t = 1024)]
        record_size: usize,
        /// Uncounted seconds of load first.
        #[arg(long, default_value_t = 5)]
        warmup_secs: u64,
        /// Counted seconds.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Connections being set up at once at most.
        #[arg(long, default_value_t = 200)]
        concurrency: usize,
        /// Opening every connection must finish within this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
        /// A process whose CPU ticks to read at the window's edges (repeatable).
        #[arg(long = "cpu-pid")]
        cpu_pids: Vec<u32>,
        /// A process whose RSS to read (repeatable).
        #[arg(long = "rss-pid")]
        rss_pids: Vec<u32>,
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
        Command::MetadataLatency {
            bootstrap,
            requests,
            warmup,
            expect_partitions,
            topic_prefix,
            cpu_pids,
            timeout_secs,
        } => metadata_latency::run(&metadata_latency::Options {
            bootstrap,
            requests,
            warmup,
            expect_partitions,
            topic_prefix,
            cpu_pids,
            run_timeout: Duration::from_secs(timeout_secs),
        })
        .await
        .map(|line| println!("{line}")),
        Command::ProduceLoad {
            bootstrap,
            topic,
            total,
            active,
            rate,
            record_size,
            warmup_secs,
            seconds,
            concurrency,
            timeout_secs,
            cpu_pids,
            rss_pids,
        } => produce_load::run(&produce_load::Options {
            bootstrap,
            topic,
            total,
            active,
            rate,
            record_size,
            warmup: Duration::from_secs(warmup_secs),
            window: Duration::from_secs(seconds),
            concurrency,
            open_timeout: Duration::from_secs(timeout_secs),
            cpu_pids,
            rss_pids,
        })
        .await
        .map(|line| println!("{line}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice-devtools: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
