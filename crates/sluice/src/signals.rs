//! Signals. SIGINT and SIGTERM: the first cancels the stop token, so that
//! sources stop accepting, the node leaves and then drains (see
//! [`crate::stopping`]); the second exits at once. SIGHUP:
//! every TLS certificate, key and CA file is read again (see
//! [`crate::ops`]); a file that does not load is refused with a log line
//! naming it, and the one in use stays.

use std::sync::Arc;

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::ops::Reloads;

/// Exit status after a second signal: 128 + SIGINT, as shells report it.
const EXIT_ON_SECOND_SIGNAL: i32 = 130;

/// Starts listening for signals. Must be called inside the runtime.
pub(crate) fn spawn(shutdown: CancellationToken, reloads: Reloads) -> anyhow::Result<()> {
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
            let Some(reloader) = reloads.get().map(Arc::clone) else {
                info!("SIGHUP before the listeners are bound: nothing to reload yet");
                continue;
            };
            if reloader.is_empty() {
                info!("SIGHUP: no TLS configured, nothing to reload");
                continue;
            }
            // Reading files: off the runtime's workers.
            match tokio::task::spawn_blocking(move || reloader.reload_all("SIGHUP")).await {
                Ok(counts) => info!(
                    reloaded = counts.ok,
                    refused = counts.failed,
                    "SIGHUP: {} TLS setting(s) reloaded, {} refused",
                    counts.ok,
                    counts.failed
                ),
                Err(e) => error!("SIGHUP: the TLS reload failed: {e}"),
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
