//! SIGINT and SIGTERM: the first cancels the shutdown token, so that sources
//! stop accepting and drain; the second exits at once.

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Exit status after a second signal: 128 + SIGINT, as shells report it.
const EXIT_ON_SECOND_SIGNAL: i32 = 130;

/// Starts listening for signals. Must be called inside the runtime.
pub(crate) fn spawn(shutdown: CancellationToken) -> anyhow::Result<()> {
    let mut sigint = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut sigterm = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::spawn(async move {
        let first = next(&mut sigint, &mut sigterm).await;
        info!(
            signal = first,
            "shutting down: draining connections (a second signal exits at once)"
        );
        shutdown.cancel();
        let second = next(&mut sigint, &mut sigterm).await;
        warn!(signal = second, "second signal: exiting without draining");
        std::process::exit(EXIT_ON_SECOND_SIGNAL);
    });
    Ok(())
}

/// The name of the next signal received.
async fn next(sigint: &mut Signal, sigterm: &mut Signal) -> &'static str {
    tokio::select! {
        _ = sigint.recv() => "SIGINT",
        _ = sigterm.recv() => "SIGTERM",
    }
}
