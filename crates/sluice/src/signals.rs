//! Signals. SIGINT and SIGTERM: the first cancels the stop token, so that
//! sources stop accepting, the node leaves and then drains (see
//! [`crate::stopping`]); the second exits at once. SIGHUP: the config
//! file's log level and every TLS certificate, key and CA file are read
//! again, and a topology that changed is reported as needing a restart (see
//! [`crate::hangup`]); a file that does not load is refused with a log line
//! naming it, and what is in force stays.

use std::sync::Arc;

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::hangup::Hangup;

/// Exit status after a second signal: 128 + SIGINT, as shells report it.
const EXIT_ON_SECOND_SIGNAL: i32 = 130;

/// Starts listening for signals. Must be called inside the runtime.
pub(crate) fn spawn(shutdown: CancellationToken, hangup: Arc<Hangup>) -> anyhow::Result<()> {
    let mut sigint = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut sigterm = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    tokio::spawn(async move {
        let first = next(&mut sigint, &mut sigterm).await;
        info!(
            signal = first,
            "shutting down: leaving, then draining connections (a second signal exits at once)"
        );
        shutdown.cancel();
        let second = next(&mut sigint, &mut sigterm).await;
        warn!(signal = second, "second signal: exiting without draining");
        std::process::exit(EXIT_ON_SECOND_SIGNAL);
    });
    tokio::spawn(async move {
        while sighup.recv().await.is_some() {
            let hangup = Arc::clone(&hangup);
            // Reading files: off the runtime's workers.
            if let Err(e) = tokio::task::spawn_blocking(move || hangup.reload_all()).await {
                error!("SIGHUP: the reload failed: {e}");
            }
        }
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
