//! `sluice`: the proxy's command line.
//!
//! Startup order matters: both files are loaded and validated before anything
//! is bound, so a bad file fails fast with `error: <file>: field <path>: ...`
//! on stderr (a JSON log line on stdout with `--log-format json`) and exit
//! status 1. Then logging, chains (TLS files are read
//! here), the observability endpoint (`/metrics`, `/health`, `/ready`) and
//! the sinks' readiness probes, and finally the listeners. The first SIGINT
//! or SIGTERM stops accepting, leaves (the node is no longer shown to
//! clients, who move to the other Sluice nodes, for up to
//! `--leave-timeout-secs`), drains and exits 0; a second exits at once.
//! SIGHUP reloads the log level and every TLS file (a change of a TLS file
//! is also polled for); the rest of both files needs a restart.
//!
//! - [`cli`]: flags and the `validate-config` subcommand.
//! - [`logging`]: the tracing subscriber, its filter replaceable.
//! - [`hangup`]: what SIGHUP reloads.
//! - [`wiring`]: configuration to chains to bound listeners.
//! - [`signals`]: the shutdown and reload signals.
//! - [`ops`]: what `/health` and `/ready` report; the TLS reloader.
//! - [`stopping`]: the stop sequence, leave then drain.
//! - [`report`]: failures and verdicts outside the log, in the log's format.

#[cfg(test)]
#[path = "../build/commit.rs"]
mod build_commit;
mod cli;
mod hangup;
mod logging;
mod ops;
mod report;
mod signals;
mod stopping;
mod wiring;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use sluice_source::{KafkaSource, MemoryBudget, SourceOptions};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use cli::{Cli, Command};
use wiring::Loaded;

/// jemalloc rather than the system allocator, with its background threads
/// on (the `background_threads` feature).
///
/// Sluice's hot path allocates one buffer per broker response (a Fetch
/// answer is often megabytes) and frees it once the client has it. glibc
/// serves such sizes with `mmap` and returns them with `munmap`, so every
/// response paid for fresh zeroed pages: page faults, `clear_page` and
/// unmapping were a quarter of Sluice's CPU on the consume path. jemalloc
/// keeps freed pages for reuse and returns them to the OS after its decay
/// time (10 s).
///
/// Without background threads, jemalloc frees allocations of 8 MiB and
/// more (its `oversize_threshold`: a fetch answer of many partitions) back
/// to the OS at once, so each such answer faulted in fresh pages again: a
/// consumer of 1,000 partitions cost about 0.7 CPU-s per GB, against about
/// 0.55 with them. With background threads, those pages decay like the
/// others, on a jemalloc thread rather than on the request path.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Time allowed on top of the drain timeout for sources to close their
/// listeners and connection tasks to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let loaded = match Loaded::load(
        &cli.topology_file,
        &cli.config_file,
        cli.local_shotover_broker_id,
    ) {
        Ok(loaded) => loaded,
        Err(e) => {
            report::failure(cli.log_format, &e.to_string());
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::ValidateConfig) = cli.command {
        if let Err(e) = wiring::preflight(&loaded) {
            report::failure(cli.log_format, &format!("{e:#}"));
            return ExitCode::FAILURE;
        }
        report::success(cli.log_format, "configuration OK");
        return ExitCode::SUCCESS;
    }
    match run(&cli, &loaded) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            // Once the logger is installed, the line above is the report
            // (in JSON under --log-format json); a human reader also gets
            // it on stderr. Without a logger (it failed to start), the
            // line above went nowhere.
            let logged = tracing::dispatcher::has_been_set();
            if !logged || cli.log_format == cli::LogFormat::Human {
                report::failure(cli.log_format, &format!("{e:#}"));
            }
            ExitCode::FAILURE
        }
    }
}

/// Starts logging and the runtime, then serves until shutdown.
fn run(cli: &Cli, loaded: &Loaded) -> anyhow::Result<()> {
    let log = logging::init(&loaded.config.main_log_level, cli.log_format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    runtime.block_on(serve(cli, loaded, log))
}

async fn serve(cli: &Cli, loaded: &Loaded, log: logging::LogFilter) -> anyhow::Result<()> {
    let wired = wiring::build_chains(loaded)?;
    // The first signal: stop accepting and leave. Then, after the leave,
    // `shutdown`: drain (see `stopping`).
    let stop = CancellationToken::new();
    let shutdown = CancellationToken::new();
    let reloads = ops::Reloads::default();
    let hangup = hangup::Hangup::new(loaded, log, Arc::clone(&reloads));
    signals::spawn(stop.clone(), Arc::new(hangup))?;
    let metrics_addr = loaded
        .config
        .observability_addr()
        .map_err(|e| e.in_file(&loaded.config_path))?;
    let status = ops::Status::new(stop.clone());
    // Stops the probes and the file polling when serving ends.
    let background = CancellationToken::new();
    let _stop_background = background.clone().drop_guard();
    if let Some(addr) = metrics_addr {
        sluice_metrics::install_prometheus(addr, Arc::clone(&status) as _)?;
        sluice_metrics::record_build_info(env!("CARGO_PKG_VERSION"), env!("SLUICE_COMMIT"));
        info!(%addr, "observability endpoint listening: /metrics, /health, /ready");
        // Probes only where someone can read their verdict.
        let sinks = wired
            .iter()
            .filter_map(|w| w.chain.start_readiness(&background))
            .collect();
        status.set_sinks(sinks);
    }
    let mut tls_targets: Vec<_> = wired.iter().flat_map(|w| w.chain.tls_reloads()).collect();
    let opts = SourceOptions {
        drain_timeout: cli.drain_timeout(),
        // After the recorder is installed, so that its gauges are exported.
        memory: MemoryBudget::new(loaded.topology.memory_budget_bytes_or_default()),
        stop_accepting: Some(stop.clone()),
    };
    let leaves: Vec<_> = wired.iter().filter_map(|w| w.leave.clone()).collect();
    let sources = wiring::bind_all(wired, &opts, &shutdown).await?;
    let connections: Vec<_> = sources.iter().map(|(_, s)| s.connections()).collect();
    tokio::spawn(stopping::leave_then_drain(
        stop.clone(),
        shutdown.clone(),
        cli.leave_timeout(),
        // Every sink leaves; clients move if any has somewhere to go.
        move || leaves.iter().filter(|l| l.leave()).count() > 0,
        async move {
            for c in &connections {
                c.all_closed().await;
            }
        },
    ));
    tls_targets.extend(sources.iter().filter_map(|(_, s)| s.tls_reload()));
    ops::start_reloads(&reloads, tls_targets, background.clone());
    status.set_serving();
    info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = env!("SLUICE_COMMIT"),
        sources = sources.len(),
        "sluice started"
    );
    run_sources(sources, [&stop, &shutdown], cli.drain_timeout()).await
}

/// Runs every source until shutdown and waits, bounded, for them to drain
/// (`stop`: the first signal; `shutdown`: the drain, after the leave). A
/// source that fails, or stops on its own before any signal, shuts the
/// others down at once.
async fn run_sources(
    sources: Vec<(String, KafkaSource)>,
    [stop, shutdown]: [&CancellationToken; 2],
    drain: Duration,
) -> anyhow::Result<()> {
    let mut tasks = JoinSet::new();
    for (name, source) in sources {
        tasks.spawn(async move { (name, source.run().await) });
    }
    let mut first_error: Option<anyhow::Error> = None;
    let mut deadline: Option<Instant> = None;
    loop {
        let joined = match deadline {
            None => tokio::select! {
                joined = tasks.join_next() => joined,
                () = shutdown.cancelled() => {
                    deadline = Some(Instant::now() + drain + SHUTDOWN_GRACE);
                    continue;
                }
            },
            Some(at) => match tokio::time::timeout_at(at, tasks.join_next()).await {
                Ok(joined) => joined,
                Err(_) => {
                    let left = tasks.len();
                    tasks.abort_all();
                    anyhow::bail!(
                        "{left} source(s) still running {:?} after shutdown began",
                        drain + SHUTDOWN_GRACE
                    );
                }
            },
        };
        let Some(joined) = joined else { break };
        let failure = match joined {
            // A source returns once it stops accepting and its last
            // connection has closed: on an idle node that is right after
            // the first signal, before the leave is over and `shutdown` is
            // cancelled. Only a source that stops before any signal failed.
            Ok((name, Ok(()))) if stop.is_cancelled() || shutdown.is_cancelled() => {
                info!(source = %name, "source stopped");
                None
            }
            Ok((name, Ok(()))) => Some(anyhow::anyhow!("source {name} stopped unexpectedly")),
            Ok((name, Err(e))) => Some(anyhow::Error::new(e).context(format!("source {name}"))),
            Err(e) => Some(anyhow::anyhow!("a source task failed: {e}")),
        };
        if let Some(failure) = failure {
            error!("{failure:#}; shutting down");
            stop.cancel();
            shutdown.cancel();
            first_error.get_or_insert(failure);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            info!("sluice stopped");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    /// The allocator the binary runs with purges freed pages on jemalloc's
    /// background threads: without them, every fetch answer of 8 MiB or
    /// more faults in fresh pages (see [`ALLOCATOR`](super::ALLOCATOR)).
    #[test]
    fn the_allocator_runs_with_background_threads() {
        let configured = tikv_jemalloc_ctl::opt::background_thread::read();
        assert_eq!(
            configured.ok(),
            Some(true),
            "jemalloc's opt.background_thread is off: enable tikv-jemallocator's \
             `background_threads` feature"
        );
    }
}
