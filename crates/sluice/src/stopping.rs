//! The stop sequence: leave, then drain.
//!
//! Two tokens. `stop` is cancelled by the first SIGINT or SIGTERM: `/ready`
//! answers 503, every listener stops accepting and closes its socket (so
//! the other Sluice nodes' health check, a TCP connect to this node's
//! `address_for_peers`, fails and they stop showing it within one
//! `check_shotover_peers_delay_ms`), and every cluster sink leaves (see
//! `sluice_sink_cluster::Leave`: the node is no longer shown in its own
//! answers, and requests for its leaders and coordinators get retriable
//! errors that send clients to the other nodes). The open connections go
//! on being served for up to `--leave-timeout-secs`, which ends early when
//! every connection has closed, and is skipped when no sink has another
//! node up to take its clients (a single node, or every peer down). Then
//! `drain` is cancelled: connections stop reading, write what they owe
//! (bounded by `--drain-timeout-secs`) and close.
//!
//! ```text
//! SIGTERM ─ stop: not ready, not accepting, leaving ─ leave timeout ─ drain ─ exit
//!             (peers drop the node within one health-check period)
//! ```

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

/// Waits for `stop`, then leaves (`leave` returns whether clients have
/// somewhere to go), waits up to `leave_timeout` or until `all_closed`
/// resolves, and cancels `drain`. Returns at once, without leaving, if
/// `drain` is cancelled first (a source failed).
pub(crate) async fn leave_then_drain<C>(
    stop: CancellationToken,
    drain: CancellationToken,
    leave_timeout: Duration,
    leave: impl FnOnce() -> bool,
    all_closed: C,
) where
    C: Future<Output = ()>,
{
    tokio::select! {
        () = stop.cancelled() => {}
        () = drain.cancelled() => return,
    }
    let moving = leave();
    if moving && !leave_timeout.is_zero() {
        info!(
            "leaving: serving open connections for up to {}s so that clients move \
             to the other sluice nodes, then draining",
            leave_timeout.as_secs_f64()
        );
        tokio::select! {
            () = tokio::time::sleep(leave_timeout) => {
                info!("leave timeout passed: draining connections");
            }
            () = all_closed => info!("every client connection closed while leaving"),
            () = drain.cancelled() => {}
        }
    }
    drain.cancel();
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::time::Instant;

    const LEAVE: Duration = Duration::from_secs(10);

    struct Run {
        stop: CancellationToken,
        drain: CancellationToken,
        left: Arc<AtomicBool>,
        task: tokio::task::JoinHandle<()>,
    }

    /// Starts the sequence; `moving`: what leaving reports; `closed`:
    /// resolves when every connection has closed.
    fn run(moving: bool, closed: impl Future<Output = ()> + Send + 'static) -> Run {
        let (stop, drain) = (CancellationToken::new(), CancellationToken::new());
        let left = Arc::new(AtomicBool::new(false));
        let leave = {
            let left = Arc::clone(&left);
            move || {
                left.store(true, Ordering::Relaxed);
                moving
            }
        };
        let task = tokio::spawn(leave_then_drain(
            stop.clone(),
            drain.clone(),
            LEAVE,
            leave,
            closed,
        ));
        Run {
            stop,
            drain,
            left,
            task,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn drains_only_after_the_leave_timeout() {
        let r = run(true, std::future::pending());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!r.left.load(Ordering::Relaxed), "nothing before the signal");
        assert!(!r.drain.is_cancelled());

        let signalled = Instant::now();
        r.stop.cancel();
        tokio::time::sleep(LEAVE - Duration::from_millis(1)).await;
        assert!(r.left.load(Ordering::Relaxed), "left at once");
        assert!(!r.drain.is_cancelled(), "still serving while leaving");
        r.drain.cancelled().await;
        assert_eq!(
            signalled.elapsed(),
            LEAVE,
            "drains when the leave timeout ends"
        );
        r.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn drains_early_once_every_connection_closed() {
        let closed = tokio::time::sleep(Duration::from_secs(2));
        let r = run(true, closed);
        let signalled = Instant::now();
        r.stop.cancel();
        r.drain.cancelled().await;
        assert_eq!(signalled.elapsed(), Duration::from_secs(2));
        r.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn drains_at_once_when_there_is_nowhere_to_go() {
        let r = run(false, std::future::pending());
        let signalled = Instant::now();
        r.stop.cancel();
        r.drain.cancelled().await;
        assert!(r.left.load(Ordering::Relaxed));
        assert_eq!(signalled.elapsed(), Duration::ZERO);
        r.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_drains_without_leaving() {
        let r = run(true, std::future::pending());
        r.drain.cancel();
        r.task.await.unwrap();
        assert!(!r.left.load(Ordering::Relaxed));
        assert!(!r.stop.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_while_leaving_ends_the_wait() {
        let r = run(true, std::future::pending());
        r.stop.cancel();
        tokio::time::sleep(Duration::from_secs(1)).await;
        r.drain.cancel();
        tokio::time::timeout(Duration::from_millis(1), r.task)
            .await
            .expect("the sequence ends with the drain")
            .unwrap();
    }
}
