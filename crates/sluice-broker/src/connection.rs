//! One connection to one broker, shared by the sinks.
//!
//! A [`BrokerConnection`] is two tasks: a writer and a reader. Two, so that a
//! large request being written can never deadlock against a large response
//! waiting to be read.
//!
//! - The writer takes requests from a bounded queue, gives each one a
//!   connection-local correlation id (patched into the raw bytes), registers
//!   it with the reader *before* writing a byte, then writes, flushing when
//!   the queue runs empty.
//! - The reader reads frames, pops the oldest registered request (Kafka
//!   answers in order on a connection), checks the correlation id, restores
//!   the client's id and completes the request's oneshot.
//!
//! The project's central rule lives here: **a failure to receive from a
//! broker is never silently ignored.** Whatever ends the connection (EOF,
//! reset, TLS error, undecodable bytes, a correlation mismatch, a read
//! timeout, a write error, or the owner dropping it), the reader logs it once
//! with the broker's id and address, counts it (in `BROKER_RECEIVE_ERRORS`
//! when requests were owed a response, in `BROKER_CONNECTIONS_IDLE_CLOSED`
//! when the connection ended idle), and completes every in-flight request
//! with the error; the writer completes
//! every queued one with [`BrokerError::NotSent`]. Each response sender is
//! also wrapped so that dropping it completes it with an error, so no code
//! path can lose a request without telling its owner.

mod heard;
mod reader;
mod writer;

pub use heard::Heard;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rustls_pki_types::ServerName;
use sluice_codec::{ApiKey, DEFAULT_MAX_FRAME_BYTES, Request, Response};
use sluice_metrics::names;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug};

use crate::error;
use crate::{BrokerAddress, BrokerError};

/// Receives the response to one request, or the error that prevented it.
pub type ResponseReceiver = oneshot::Receiver<Result<Response, BrokerError>>;

/// Requests queued for the writer before `send` waits (backpressure).
///
/// Both queues carry boxed entries: a tokio channel allocates its slots 32
/// at a time when it is created, and an idle connection should not pay for
/// 32 requests it never sends.
const REQUEST_QUEUE: usize = 64;
/// Requests registered with the reader but not yet pulled by it.
const IN_FLIGHT_QUEUE: usize = 64;
/// Requests the reader tracks at once; the writer waits beyond that.
const MAX_IN_FLIGHT: usize = 1024;

/// How to open a broker connection.
#[derive(Clone)]
pub struct BrokerConnectOptions {
    /// Limit for TCP connect plus TLS handshake.
    pub connect_timeout: Duration,
    /// Fail the connection when the oldest request waits longer than this.
    pub read_timeout: Option<Duration>,
    /// TLS, with the name to verify the broker's certificate against.
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Largest response frame accepted from the broker.
    pub(crate) max_frame_bytes: usize,
    /// A connection of Sluice's own checks (the readiness probe): not
    /// counted in the broker connection metrics, and its end is logged at
    /// DEBUG only (the probe reports what it found itself).
    pub probe: bool,
}

impl BrokerConnectOptions {
    /// Plaintext, no read timeout, Kafka's default frame limit.
    pub fn new(connect_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            read_timeout: None,
            tls: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            probe: false,
        }
    }
}

impl fmt::Debug for BrokerConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConnectOptions")
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("tls_server_name", &self.tls.as_ref().map(|(_, name)| name))
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("probe", &self.probe)
            .finish()
    }
}

/// A connection to one broker.
///
/// Dropping it lets the connection finish rather than cutting it: every
/// request already queued is written, in order (an `acks=0` Produce has no
/// answer to carry an error, so it must not be lost), every answer owed is
/// read and delivered (within the read timeout), and then the connection
/// closes. A connection that failed stops at once instead.
pub struct BrokerConnection {
    shared: Arc<Shared>,
    /// Dropped with the connection: the writer then writes what is queued
    /// and lets the reader finish.
    requests: mpsc::Sender<Box<Outgoing>>,
}

impl fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("broker", self.shared.broker())
            .field("closed", &self.is_closed())
            .field("outstanding", &self.outstanding())
            .finish()
    }
}

impl BrokerConnection {
    /// Connects (and completes the TLS handshake) within `opts.connect_timeout`.
    /// A failure is counted in `BROKER_CONNECT_FAILURES` by broker and kind
    /// (not for the readiness probe, which reports what it found itself).
    pub async fn connect(
        addr: BrokerAddress,
        opts: &BrokerConnectOptions,
    ) -> Result<BrokerConnection, BrokerError> {
        let opened = tokio::time::timeout(opts.connect_timeout, open(&addr, opts))
            .await
            .map_err(|_| BrokerError::ConnectTimeout {
                broker: addr.clone(),
                timeout: opts.connect_timeout,
            })
            .and_then(|opened| opened);
        let (read, write) = match opened {
            Ok(halves) => halves,
            Err(e) => {
                if !opts.probe {
                    metrics::counter!(
                        names::BROKER_CONNECT_FAILURES,
                        "broker" => addr.metric_label(),
                        "kind" => e.kind(),
                    )
                    .increment(1);
                }
                return Err(e);
            }
        };
        if !opts.probe {
            metrics::counter!(names::BROKER_CONNECTIONS_OPENED, "broker" => addr.metric_label())
                .increment(1);
        }
        // Everything its two tasks log carries this span (a child of the
        // client connection's, when a client opened it). ERROR-level so that
        // it is there whatever the log level; `broker_id` is filled in when a
        // bootstrap connection learns which broker it reached.
        let span = tracing::error_span!(
            "broker",
            broker = %addr,
            broker_id = tracing::field::Empty,
        );
        if let Some(id) = addr.id {
            span.record("broker_id", id);
        }
        span.in_scope(|| debug!("broker connection opened"));

        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared {
            span: span.clone(),
            opened_as: addr,
            probe: opts.probe,
            identified: OnceLock::new(),
            closed: AtomicBool::new(false),
            outstanding: AtomicUsize::new(0),
            heard: Heard::default(),
            busy_until: Mutex::new(None),
            failure: Mutex::new(None),
            cancel: cancel.clone(),
        });
        let (requests_tx, requests_rx) = mpsc::channel(REQUEST_QUEUE);
        let (in_flight_tx, in_flight_rx) = mpsc::channel(IN_FLIGHT_QUEUE);
        let writer = writer::Writer::new(shared.clone(), write, requests_rx, in_flight_tx);
        let reader = reader::Reader::new(
            shared.clone(),
            read,
            opts.max_frame_bytes,
            in_flight_rx,
            opts.read_timeout,
        );
        tokio::spawn(writer.run().instrument(span.clone()));
        tokio::spawn(reader.run().instrument(span));
        Ok(BrokerConnection {
            shared,
            requests: requests_tx,
        })
    }

    /// Queues a request. Assigns a connection-local correlation id (patched
    /// in place; the client's id is remembered and restored on the response).
    /// Returns a receiver for the response, or `None` when the request
    /// expects no response (Produce with `acks=0`). Waits only while the
    /// queue is full.
    ///
    /// Fails with [`BrokerError::NotSent`] when the connection is closed;
    /// the error hands the request back ([`BrokerError::unsent_request`]),
    /// as does the `NotSent` a request still queued when the connection
    /// fails is completed with. Dropping the returned future while it waits
    /// for queue space drops the request unsent (the caller, having
    /// cancelled, knows it was not sent).
    pub async fn send(&self, request: Request) -> Result<Option<ResponseReceiver>, BrokerError> {
        if self.is_closed() {
            let cause = self.shared.failure_or_shutdown();
            return Err(BrokerError::not_sent_returning(&cause, request));
        }
        let (reply, receiver) = if request.expects_response() {
            let (tx, rx) = oneshot::channel();
            (Some(Reply::new(tx, self.shared.clone())), Some(rx))
        } else {
            (None, None)
        };
        self.requests
            .send(Box::new(Outgoing { request, reply }))
            .await
            .map_err(|unsent| {
                let cause = self.shared.failure_or_shutdown();
                BrokerError::not_sent_returning(&cause, unsent.0.request)
            })?;
        Ok(receiver)
    }

    /// Queues a request that expects a response, only if the connection is
    /// open and its queue has room now: for work the caller may as well
    /// skip (a fetch read ahead). `None`, the request dropped unsent,
    /// otherwise.
    pub fn try_send(&self, request: Request) -> Option<ResponseReceiver> {
        if self.is_closed() || !request.expects_response() {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let reply = Some(Reply::new(tx, self.shared.clone()));
        // A refused request drops its reply unanswered: nobody holds `rx`.
        self.requests
            .try_send(Box::new(Outgoing { request, reply }))
            .ok()?;
        Some(rx)
    }

    /// Ends the connection now, with `error` as its failure: unlike a drop,
    /// nothing still queued is written and no answer still owed is awaited;
    /// the socket closes, and every request still owed is completed with
    /// `error` (those never written with [`BrokerError::NotSent`]). For a
    /// broker whose requests were given up on while it hangs: whatever it
    /// has not read yet must not reach it once it resumes, and nothing sent
    /// later may queue behind what it still holds. Does nothing to a
    /// connection already closed.
    pub fn abort(&self, error: BrokerError) {
        if !self.is_closed() {
            self.shared.fail(error);
        }
    }

    /// Whether the connection has failed or been shut down. A closed
    /// connection accepts no more requests.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Why the connection closed, once it has.
    pub fn failure(&self) -> Option<BrokerError> {
        self.shared.recorded_failure()
    }

    /// How long the broker has gone without answering anything (since the
    /// connection opened, if it never has), as of `now`.
    pub fn quiet_for(&self, now: tokio::time::Instant) -> Duration {
        self.shared.heard.quiet_for(now)
    }

    /// A handle on when this connection's broker last answered, for a
    /// watcher that weighs every connection to the broker (see [`Heard`]).
    pub fn heard(&self) -> Heard {
        self.shared.heard.clone()
    }

    /// When the broker may, by design, have answered a request queued now
    /// that it may itself hold for `wait` (a Fetch's `max_wait_ms`, a
    /// JoinGroup's rebalance timeout): a broker serves one request of a
    /// connection at a time, so a request queued behind others starts only
    /// once they are answered, and each of them may be held its own wait.
    /// Call it once per request, just before sending it.
    ///
    /// ```text
    /// t=0  JoinGroup (may be held 60 s) sent; due at 60 s
    /// t=1  Heartbeat queued behind it: due at 60 s, not at 1 s
    /// t=70 (nothing owed) Metadata: due at 70 s
    /// ```
    pub fn answer_due(&self, wait: Duration) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        let mut busy_until = self
            .shared
            .busy_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let start = match *busy_until {
            Some(busy) if self.outstanding() > 0 => busy.max(now),
            _ => now,
        };
        let due = start + wait;
        *busy_until = Some(due);
        due
    }

    /// Requests sent on this connection that are still owed a response.
    pub fn outstanding(&self) -> usize {
        self.shared.outstanding.load(Ordering::Acquire)
    }

    /// The broker this connection talks to (with its id once known: see
    /// [`BrokerConnection::set_broker_id`]).
    pub fn address(&self) -> &BrokerAddress {
        self.shared.broker()
    }

    /// Names the broker behind a connection opened without its id (to a
    /// first contact point) once a Metadata answer says which broker it is:
    /// from then on its logs, errors and metric labels (receive errors, idle
    /// closes) carry the id. Returns `false`, changing nothing, when the
    /// connection already names a different broker id.
    pub fn set_broker_id(&self, id: i32) -> bool {
        let shared = &self.shared;
        if let Some(known) = shared.broker().id {
            return known == id;
        }
        let named = shared.identified.get_or_init(|| {
            shared.span.record("broker_id", id);
            shared.opened_as.clone().with_id(id)
        });
        named.id == Some(id)
    }
}

type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// Opens TCP (and TLS), returning the two halves.
async fn open(
    addr: &BrokerAddress,
    opts: &BrokerConnectOptions,
) -> Result<(BoxRead, BoxWrite), BrokerError> {
    let connect_err = |e: std::io::Error| BrokerError::Connect {
        broker: addr.clone(),
        reason: error::describe_io(&e),
    };
    let tcp = TcpStream::connect((addr.host.as_str(), addr.port))
        .await
        .map_err(connect_err)?;
    tcp.set_nodelay(true).map_err(connect_err)?;
    let Some((connector, server_name)) = &opts.tls else {
        let (read, write) = tcp.into_split();
        return Ok((Box::new(read), Box::new(write)));
    };
    let tls = connector
        .connect(server_name.clone(), tcp)
        .await
        .map_err(|e| {
            if error::is_tls_error(&e) {
                BrokerError::TlsHandshake {
                    broker: addr.clone(),
                    reason: error::describe_io(&e),
                }
            } else {
                connect_err(e)
            }
        })?;
    let (read, write) = tokio::io::split(tls);
    Ok((Box::new(read), Box::new(write)))
}

/// State shared by the handle and both tasks.
struct Shared {
    /// The span of the connection's tasks.
    span: tracing::Span,
    /// The address the connection was opened to.
    opened_as: BrokerAddress,
    /// Opened by the readiness probe (see [`BrokerConnectOptions::probe`]).
    probe: bool,
    /// The same with the broker id, when it was learned after connecting.
    identified: OnceLock<BrokerAddress>,
    closed: AtomicBool,
    /// Requests whose [`Reply`] has not been completed yet.
    outstanding: AtomicUsize,
    /// When the broker last answered: a
    /// connection that owes answers and has not answered for a while is
    /// stalled, one whose answers flow is only busy.
    heard: Heard,
    /// When the broker may, by design, have answered everything queued on
    /// the connection so far (see [`BrokerConnection::answer_due`]).
    busy_until: Mutex<Option<tokio::time::Instant>>,
    /// The first error that ended the connection.
    failure: Mutex<Option<BrokerError>>,
    /// Ends both tasks.
    cancel: CancellationToken,
}

impl Shared {
    /// Records that the broker answered a request now.
    fn answered(&self) {
        self.heard.answered();
    }

    /// The broker, with its id when known: for logs, errors and metrics.
    fn broker(&self) -> &BrokerAddress {
        self.identified.get().unwrap_or(&self.opened_as)
    }

    /// Records `error` as the reason the connection ended (unless one was
    /// recorded already), closes the connection and stops both tasks.
    /// Returns the recorded reason.
    fn fail(&self, error: BrokerError) -> BrokerError {
        let recorded = {
            let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            failure.get_or_insert(error).clone()
        };
        self.closed.store(true, Ordering::Release);
        self.cancel.cancel();
        recorded
    }

    fn recorded_failure(&self) -> Option<BrokerError> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The recorded failure, or `Shutdown` when the owner closed it.
    fn failure_or_shutdown(&self) -> BrokerError {
        self.recorded_failure()
            .unwrap_or_else(|| BrokerError::Shutdown {
                broker: self.broker().clone(),
            })
    }
}

/// A request on its way to the writer.
struct Outgoing {
    request: Request,
    reply: Option<Reply>,
}

/// A request written (or about to be) and owed a response.
struct InFlight {
    api_key: ApiKey,
    api_version: i16,
    client_correlation_id: i32,
    broker_correlation_id: i32,
    sent_at: tokio::time::Instant,
    /// How long the broker may hold this request by design (Fetch
    /// `max_wait_ms`, JoinGroup rebalance timeout, Produce `timeout_ms`):
    /// added to the read timeout.
    broker_wait: std::time::Duration,
    reply: Reply,
}

/// The sender for one response. Completing it twice is impossible, and
/// dropping it uncompleted sends the connection's failure instead.
struct Reply {
    tx: Option<oneshot::Sender<Result<Response, BrokerError>>>,
    shared: Arc<Shared>,
}

impl Reply {
    fn new(tx: oneshot::Sender<Result<Response, BrokerError>>, shared: Arc<Shared>) -> Self {
        shared.outstanding.fetch_add(1, Ordering::AcqRel);
        Self {
            tx: Some(tx),
            shared,
        }
    }

    fn complete(mut self, result: Result<Response, BrokerError>) {
        self.finish(result);
    }

    fn finish(&mut self, result: Result<Response, BrokerError>) {
        if let Some(tx) = self.tx.take() {
            self.shared.outstanding.fetch_sub(1, Ordering::AcqRel);
            // The owner may have stopped waiting; that is its choice.
            let _ = tx.send(result);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if self.tx.is_some() {
            let error = self.shared.failure_or_shutdown();
            self.finish(Err(error));
        }
    }
}
