//! The observability endpoint: `/metrics`, `/health` and `/ready` over HTTP/1.1.
//!
//! One listener on `observability_interface` serves all three, so that a
//! Prometheus scrape and a Kubernetes probe need one port:
//!
//! - `/metrics`: the Prometheus text format, rendered by the recorder,
//!   followed by the process metrics (`crate::process`);
//! - `/health`: whether the process is serving (the binary says what that
//!   means through [`Probes`]);
//! - `/ready`: whether it can serve clients now.
//!
//! Each check answers 200 with a short body, or 503 with a one-line reason.
//! Anything else is a 404. Connections are handled by hyper, each in its own
//! task, with a bound on how long a client may take to send its request
//! headers and on how many connections may be open at once, so that a
//! scraper that hangs cannot pile up tasks.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

/// How long a client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed at accept.
const MAX_CONNECTIONS: usize = 64;
/// How often the recorder's histograms are maintained. The recorder keeps
/// every value recorded since the last upkeep (8 bytes each, in blocks of
/// 64) and only then counts them into buckets; the latency histograms take
/// two values per request, so this bounds what they hold to one second of
/// traffic (about 1.6 MB at 100,000 requests a second) rather than the
/// exporter's default five.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);
/// How long the accept loop pauses after `accept()` fails.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// The content type of the Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// The answer of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// 200 when true, 503 when false.
    pub ok: bool,
    /// One line: what holds, or why not.
    pub(crate) body: String,
}

impl Check {
    /// A check that passed.
    pub fn pass(body: impl Into<String>) -> Self {
        Self {
            ok: true,
            body: body.into(),
        }
    }

    /// A check that failed.
    pub fn fail(body: impl Into<String>) -> Self {
        Self {
            ok: false,
            body: body.into(),
        }
    }
}

/// What `/health` and `/ready` report; the binary decides.
pub trait Probes: Send + Sync {
    /// Whether the process is serving.
    fn health(&self) -> Check;
    /// Whether it can serve clients now.
    fn ready(&self) -> Check;
}

/// Serves the endpoint on `listener` until the runtime stops, and runs the
/// recorder's upkeep.
pub(crate) fn spawn(listener: TcpListener, handle: PrometheusHandle, probes: Arc<dyn Probes>) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(accept_loop(listener, handle, probes));
}

async fn accept_loop(listener: TcpListener, handle: PrometheusHandle, probes: Arc<dyn Probes>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!("observability endpoint: accept failed: {e}");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            debug!(%peer, "observability endpoint: {MAX_CONNECTIONS} connections open, closing this one");
            continue;
        };
        let (handle, probes) = (handle.clone(), Arc::clone(&probes));
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = answer(&request, &handle, probes.as_ref());
                async move { Ok::<_, Infallible>(response) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                debug!(%peer, "observability endpoint: connection ended: {e}");
            }
            drop(slot);
        });
    }
}

/// The response to one request.
fn answer(
    request: &Request<Incoming>,
    handle: &PrometheusHandle,
    probes: &dyn Probes,
) -> Response<Full<Bytes>> {
    match request.uri().path() {
        "/metrics" => {
            let mut text = handle.render();
            crate::process::render(&mut text);
            respond(StatusCode::OK, PROMETHEUS_TEXT, text)
        }
        "/health" => check(probes.health()),
        "/ready" => check(probes.ready()),
        other => respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("not found: {other} (try /metrics, /health or /ready)\n"),
        ),
    }
}

fn check(check: Check) -> Response<Full<Bytes>> {
    let status = if check.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    respond(status, "text/plain", format!("{}\n", check.body))
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Binds `addr` for the endpoint (a std listener turned into tokio's, so
/// that binding needs no `.await`).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Fixed {
        ready: AtomicBool,
    }

    impl Probes for Fixed {
        fn health(&self) -> Check {
            Check::pass("ok")
        }

        fn ready(&self) -> Check {
            if self.ready.load(Ordering::Relaxed) {
                Check::pass("ready")
            } else {
                Check::fail("not ready: no broker reachable")
            }
        }
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut text = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut text))
            .await
            .expect("the endpoint answers and closes within 10 s")
            .unwrap();
        text
    }

    #[tokio::test]
    async fn serves_metrics_health_and_ready() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let probes = Arc::new(Fixed {
            ready: AtomicBool::new(false),
        });
        spawn(listener, handle, probes.clone());

        let health = get(addr, "/health").await;
        assert!(health.starts_with("HTTP/1.0 200"), "{health}");
        assert!(health.ends_with("\r\n\r\nok\n"), "{health}");

        let ready = get(addr, "/ready").await;
        assert!(ready.starts_with("HTTP/1.0 503"), "{ready}");
        assert!(
            ready.ends_with("not ready: no broker reachable\n"),
            "{ready}"
        );
        probes.ready.store(true, Ordering::Relaxed);
        let ready = get(addr, "/ready").await;
        assert!(ready.starts_with("HTTP/1.0 200"), "{ready}");

        let metrics = get(addr, "/metrics").await;
        assert!(metrics.starts_with("HTTP/1.0 200"), "{metrics}");
        assert!(
            metrics.contains("content-type: text/plain; version=0.0.4"),
            "{metrics}"
        );
        assert!(
            metrics.contains("\n# TYPE process_open_fds gauge\nprocess_open_fds "),
            "{metrics}"
        );
        let missing = get(addr, "/nope").await;
        assert!(missing.starts_with("HTTP/1.0 404"), "{missing}");
    }
}
