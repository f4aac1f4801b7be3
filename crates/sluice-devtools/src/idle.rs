//! `idle-connections`: many clients that connected, asked ApiVersions and
//! went idle, for measuring what an idle connection costs a proxy.
//!
//! Opens `count` TCP connections (at most `concurrency` being set up at
//! once), sends one ApiVersions request on each and reads its answer, then
//! prints `ready N` and holds them all until released (see
//! [`crate::hold`]). Each held socket is watched: a connection the peer
//! closes while held makes the run fail, so that a measurement never counts
//! connections that were not there.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};

use crate::client::Connection;
use crate::hold;

/// What to open and how long to hold it.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// The address to connect to, `HOST:PORT`.
    pub bootstrap: String,
    /// How many connections.
    pub count: usize,
    /// How many connections may be being set up at once.
    pub concurrency: usize,
    /// Opening all of them must finish within this.
    pub open_timeout: Duration,
    /// Let go after this long at most.
    pub longest_hold: Duration,
    /// Let go when standard input closes.
    pub watch_stdin: bool,
}

/// Opens the connections, holds them, and reports how many the peer closed.
pub(crate) async fn run(opts: &Options) -> Result<String> {
    hold::raise_nofile(opts.count)?;
    let started = Instant::now();
    let deadline = started + opts.open_timeout;
    let opened = Arc::new(AtomicUsize::new(0));
    let closed_by_peer = Arc::new(AtomicUsize::new(0));
    let permits = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let mut opening = JoinSet::new();
    for _ in 0..opts.count {
        let (addr, permits, opened) = (opts.bootstrap.clone(), permits.clone(), opened.clone());
        opening.spawn(async move {
            let _permit = permits.acquire_owned().await.context("opening stopped")?;
            let stream = open_one(&addr).await?;
            opened.fetch_add(1, Ordering::Relaxed);
            anyhow::Ok(stream)
        });
    }
    let mut held = JoinSet::new();
    while let Some(next) = timeout_at(deadline, opening.join_next())
        .await
        .unwrap_or_else(|_| {
            Some(Ok(Err(anyhow::anyhow!(
                "{} of {} connections opened within {}s",
                opened.load(Ordering::Relaxed),
                opts.count,
                opts.open_timeout.as_secs()
            ))))
        })
    {
        let stream = next.context("a connection task failed")??;
        held.spawn(watch(stream, closed_by_peer.clone()));
    }
    println!(
        "ready {} (opened in {:.1}s)",
        opts.count,
        started.elapsed().as_secs_f64()
    );
    let released = hold::until_released(opts.watch_stdin, opts.longest_hold).await?;
    let closed = closed_by_peer.load(Ordering::Relaxed);
    held.shutdown().await;
    if closed > 0 {
        bail!(
            "{closed} of {} connections were closed by the peer while held ({released})",
            opts.count
        );
    }
    Ok(format!(
        "released {} connections ({released}); none was closed by the peer",
        opts.count
    ))
}

/// One connection: connect, ApiVersions, answer read.
async fn open_one(addr: &str) -> Result<TcpStream> {
    let mut conn = Connection::connect(addr).await?;
    conn.api_versions().await?;
    Ok(conn.into_stream())
}

/// Holds `stream` until aborted; counts it once when the peer closes it.
async fn watch(mut stream: TcpStream, closed_by_peer: Arc<AtomicUsize>) {
    let mut buf = [0_u8; 64];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => {
                closed_by_peer.fetch_add(1, Ordering::Relaxed);
                return;
            }
            // Nothing is owed to an idle client; whatever comes is ignored.
            Ok(_) => {}
        }
    }
}
