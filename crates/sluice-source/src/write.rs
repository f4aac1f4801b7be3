//! The write deadline: responses owed to a client must keep leaving.
//!
//! A client that pipelines requests and never reads would otherwise hold its
//! connection task in a write forever, and with it every response queued for
//! it. [`write_within`] writes an [`OutFrames`] queue to the client and gives
//! up once the client's socket has accepted no byte for `timeout`: the clock
//! restarts with every byte accepted, so a slow reader that keeps reading is
//! never cut, only one that stopped.
//!
//! `OutFrames::write_to` keeps its queue consistent when its future is
//! dropped between writes, so the write is run under a timeout at the last
//! progress plus `timeout`, and started again from where it stopped when the
//! timeout finds that bytes left meanwhile.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use sluice_codec::OutFrames;
use tokio::io::AsyncWrite;
use tokio::time::{Instant, timeout_at};

/// Why [`write_within`] failed.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// The socket failed.
    Io(io::Error),
    /// The client accepted nothing for this long.
    Stalled(Duration),
}

/// Writes (and flushes) everything in `out` to `stream`, unless the stream
/// accepts no byte for `timeout`.
pub(crate) async fn write_within<S: AsyncWrite + Unpin>(
    out: &mut OutFrames,
    stream: &mut S,
    timeout: Duration,
) -> Result<(), WriteFailure> {
    let mut watched = Watched {
        inner: stream,
        progress: Instant::now(),
    };
    loop {
        let deadline = watched.progress + timeout;
        match timeout_at(deadline, out.write_to(&mut watched)).await {
            Ok(result) => return result.map_err(WriteFailure::Io),
            Err(_) if watched.progress + timeout > Instant::now() => continue,
            Err(_) => return Err(WriteFailure::Stalled(timeout)),
        }
    }
}

/// A stream that remembers when it last accepted bytes.
struct Watched<'a, S> {
    inner: &'a mut S,
    progress: Instant,
}

impl<S> Watched<'_, S> {
    fn note(&mut self, poll: &Poll<io::Result<usize>>) {
        if matches!(poll, Poll::Ready(Ok(n)) if *n > 0) {
            self.progress = Instant::now();
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut *self.inner).poll_write(cx, buf);
        self.note(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs);
        self.note(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    fn queue(bytes: usize) -> OutFrames {
        let mut out = OutFrames::default();
        out.buf_mut().extend_from_slice(&vec![7u8; bytes]);
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_nothing_stalls_the_write_after_the_timeout() {
        let (_client, mut server) = tokio::io::duplex(64);
        let mut out = queue(1024);
        let start = Instant::now();
        let result = write_within(&mut out, &mut server, Duration::from_secs(30)).await;
        assert!(
            matches!(result, Err(WriteFailure::Stalled(_))),
            "{result:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            let mut total = 0;
            let mut buf = [0u8; 64];
            while total < 1024 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                total += client.read(&mut buf).await.unwrap();
            }
            total
        });
        let mut out = queue(1024);
        let start = Instant::now();
        write_within(&mut out, &mut server, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(
            start.elapsed() > Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        assert!(out.is_empty());
        assert_eq!(reader.await.unwrap(), 1024);
    }
}
