//! What the clients that hold connections open share: a file-descriptor
//! limit big enough for them, and the wait until they are told to let go.

use std::fmt;
use std::io::Read;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

/// Descriptors kept for everything but the held sockets (stdio, the
/// runtime's own).
const SPARE_DESCRIPTORS: u64 = 64;

/// Raises the soft RLIMIT_NOFILE so that `sockets` more descriptors fit,
/// up to the hard limit; fails when even the hard limit is too low.
pub(crate) fn raise_nofile(sockets: usize) -> Result<()> {
    let want = u64::try_from(sockets)
        .unwrap_or(u64::MAX)
        .saturating_add(SPARE_DESCRIPTORS);
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading RLIMIT_NOFILE")?;
    if soft >= want {
        return Ok(());
    }
    if hard < want {
        bail!(
            "{sockets} sockets need {want} file descriptors, but the hard RLIMIT_NOFILE is {hard} (raise it with `ulimit -Hn` as root)"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
        .with_context(|| format!("raising the soft RLIMIT_NOFILE from {soft} to {hard}"))
}

/// Why a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// Standard input reached its end.
    StdinClosed,
    /// SIGTERM or SIGINT.
    Signal,
    /// The longest hold passed.
    TimedOut(Duration),
}

impl fmt::Display for Released {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Released::StdinClosed => f.write_str("stdin closed"),
            Released::Signal => f.write_str("signalled"),
            Released::TimedOut(d) => write!(f, "held for the longest hold, {}s", d.as_secs()),
        }
    }
}

/// Waits until standard input closes (when `watch_stdin`), SIGTERM or
/// SIGINT arrives, or `longest` passes.
pub(crate) async fn until_released(watch_stdin: bool, longest: Duration) -> Result<Released> {
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let stdin_closed = async {
        if watch_stdin {
            // A thread of its own: a blocking read would keep tokio's
            // runtime from shutting down, a plain thread does not keep the
            // process alive.
            let (tx, rx) = oneshot::channel();
            std::thread::spawn(move || {
                let mut sink = [0_u8; 256];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
                let _ = tx.send(());
            });
            let _ = rx.await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    Ok(tokio::select! {
        () = stdin_closed => Released::StdinClosed,
        _ = term.recv() => Released::Signal,
        _ = int.recv() => Released::Signal,
        () = tokio::time::sleep(longest) => Released::TimedOut(longest),
    })
}
