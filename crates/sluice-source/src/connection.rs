//! The client connection task: one per client, from handshake to close.
//!
//! The task reads length-prefixed frames, parses each into a
//! [`sluice_codec::Request`] and hands it to the connection's [`Chain`]; at
//! the same time it takes responses from the chain (which yields them in
//! request order, already carrying the client's correlation ids) and writes
//! them back. Responses that are ready together are written in one batch and
//! flushed once. One `select!` loop drives it all: the next frame, the next
//! response (only while some are owed), the idle timer, the authentication
//! deadline and shutdown.
//!
//! Memory bounds: a write to the client gives up once the client has
//! accepted no byte of it for `write_timeout_secs` ([`crate::write`]), and
//! the connection closes, releasing what it held. Before the client has
//! authenticated (when the sink authenticates clients, see
//! [`sluice_chain::Sink::authenticated`]) frames are limited to
//! `max_unauthenticated_frame_bytes`, checked on the length prefix before any
//! of the frame is buffered, authentication must finish within
//! `authentication_timeout_secs` of the connection, and the connection holds
//! a slot of the source's unauthenticated cap ([`PreAuth`]); all three are
//! dropped the moment the sink reports the client authenticated.
//!
//! Every way a connection ends is a [`Close`] and is logged once, with the
//! connection id and client address. A protocol or chain error closes this
//! client only: it is logged at warn and counted, and nothing panics.
//!
//! Shutdown: the connection stops reading, keeps writing the responses owed
//! for requests already in the chain until none is owed or the drain timeout
//! passes, then closes.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::FutureExt;
use metrics::{Counter, counter, gauge};
use sluice_chain::{Chain, ChainBuilder, ChainError, ConnectionContext, ErrorClass};
use sluice_codec::{ApiKey, CodecError, FrameCodec, OutFrames, Request, Response};
use sluice_metrics::names;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};
use tokio_rustls::TlsAcceptor;
use tokio_util::codec::Decoder;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::{debug, info, warn};

use crate::tls::{self, HANDSHAKE_TIMEOUT};

mod close;

use crate::write::{WriteFailure, write_within};
pub use close::{Close, ConnectionError};

/// At most this many requests may await a response; beyond it the connection
/// stops reading, which pushes back on the client through TCP.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Responses are written once this many bytes are encoded, even if more are ready.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How long closing the write side (TLS `close_notify`, then FIN) may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Free space ensured in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

/// Per-source settings shared by all of its connections.
#[derive(Debug)]
pub(crate) struct ConnectionSettings {
    pub(crate) source_name: Arc<str>,
    pub(crate) max_frame_bytes: usize,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) drain_timeout: Duration,
    /// How long owed responses may go without a byte accepted by the client.
    pub(crate) write_timeout: Duration,
    /// The frame limit until the client has authenticated.
    pub(crate) max_unauthenticated_frame_bytes: usize,
    /// How long after connecting the client must have authenticated.
    pub(crate) authentication_timeout: Duration,
}

/// What a connection holds until its client has authenticated.
#[derive(Debug)]
pub(crate) struct PreAuth {
    /// Its slot in the source's unauthenticated cap.
    pub(crate) _slot: OwnedSemaphorePermit,
    /// When the connection was accepted.
    pub(crate) since: Instant,
}

/// A freshly accepted client, before its TLS handshake.
pub(crate) struct Client {
    pub(crate) ctx: ConnectionContext,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) chain: Arc<ChainBuilder>,
    pub(crate) settings: Arc<ConnectionSettings>,
    pub(crate) shutdown: CancellationToken,
    /// `Some` when the sink authenticates clients.
    pub(crate) pre_auth: Option<PreAuth>,
}

impl Client {
    /// Runs the connection to its end: handshake, requests, close.
    pub(crate) async fn run(mut self, tcp: TcpStream) {
        let _open = OpenGuard::new(&self.settings.source_name);
        let Some(acceptor) = self.tls.take() else {
            self.serve(tcp).await;
            return;
        };
        let handshake = tokio::select! {
            () = self.shutdown.cancelled() => return,
            result = tls::handshake(&acceptor, tcp, HANDSHAKE_TIMEOUT) => result,
        };
        match handshake {
            Ok((stream, principal)) => {
                self.ctx.tls_principal = principal;
                self.serve(stream).await;
            }
            Err(e) => {
                let ctx = &self.ctx;
                counter!(
                    names::CLIENT_CONNECTIONS_REJECTED,
                    "source" => ctx.source_name.to_string(),
                    "reason" => "tls"
                )
                .increment(1);
                info!(
                    source = %ctx.source_name,
                    conn = ctx.connection_id,
                    client = %ctx.client_addr,
                    "client {} (conn {}): {e}",
                    ctx.client_addr,
                    ctx.connection_id
                );
            }
        }
    }

    async fn serve<S>(mut self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let chain = self.chain.build(&self.ctx);
        debug!(
            source = %self.ctx.source_name,
            conn = self.ctx.connection_id,
            client = %self.ctx.client_addr,
            principal = self.ctx.tls_principal.as_deref(),
            "client {} (conn {}): connected",
            self.ctx.client_addr,
            self.ctx.connection_id
        );
        let mut conn = Connection::new(stream, self.ctx, chain, self.settings, self.shutdown);
        if let Some(pre_auth) = self.pre_auth.take() {
            conn.before_authentication(pre_auth);
        }
        let close = conn.run().await;
        if !matches!(close, Close::ReadFailed(_) | Close::WriteFailed(_)) {
            conn.close_write_side().await;
        }
        conn.report(close);
    }
}

/// Counts a connection as open for as long as it lives.
struct OpenGuard {
    source: String,
}

impl OpenGuard {
    fn new(source: &str) -> Self {
        counter!(names::CLIENT_CONNECTIONS_TOTAL, "source" => source.to_owned()).increment(1);
        gauge!(names::CLIENT_CONNECTIONS_OPEN, "source" => source.to_owned()).increment(1.0);
        Self {
            source: source.to_owned(),
        }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        gauge!(names::CLIENT_CONNECTIONS_OPEN, "source" => self.source.clone()).decrement(1.0);
    }
}

/// The shutdown state of one connection.
struct Drain {
    /// Resolves when shutdown begins; polled only until then.
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    timeout: Duration,
    /// Set when shutdown began: the time by which owed responses must be out.
    deadline: Option<Instant>,
}

impl Drain {
    fn start(&mut self) {
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + self.timeout);
        }
    }

    /// Runs `fut` to completion, unless shutdown begins meanwhile and the
    /// drain deadline passes first (`None`).
    async fn bounded<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        if self.deadline.is_none() {
            tokio::select! {
                biased;
                out = &mut fut => return Some(out),
                () = &mut self.cancelled => self.start(),
            }
        }
        let deadline = self.deadline?;
        timeout_at(deadline, fut).await.ok()
    }
}

/// The socket and its buffers.
struct Io<S> {
    stream: S,
    codec: FrameCodec,
    read_buf: BytesMut,
    /// Responses encoded and not yet written; shares what came from brokers.
    out: OutFrames,
    /// False once the client closed its side.
    open_for_reading: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io<S> {
    async fn write_out(&mut self, timeout: Duration) -> Result<(), WriteFailure> {
        write_within(&mut self.out, &mut self.stream, timeout).await
    }
}

/// What the select loop woke up for. It lives for one loop turn on the stack,
/// so the size of the response variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Event {
    Shutdown,
    Response(Result<Response, ChainError>),
    Read(std::io::Result<usize>),
    IdleTimer,
    DrainDeadline,
    AuthenticationDeadline,
}

/// A client connection after its handshake.
pub(crate) struct Connection<S> {
    io: Io<S>,
    ctx: ConnectionContext,
    chain: Chain,
    settings: Arc<ConnectionSettings>,
    drain: Drain,
    counters: ConnectionCounters,
    /// When the last request arrived or the last response left.
    last_activity: Instant,
    idle_timer: Pin<Box<Sleep>>,
    /// Until the client has authenticated (when the sink authenticates).
    pre_auth: Option<PreAuth>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    pub(crate) fn new(
        stream: S,
        ctx: ConnectionContext,
        chain: Chain,
        settings: Arc<ConnectionSettings>,
        shutdown: CancellationToken,
    ) -> Self {
        let now = Instant::now();
        let idle_deadline = match settings.idle_timeout {
            Some(idle) => now + idle,
            None => now + Duration::from_secs(86_400 * 365),
        };
        Self {
            io: Io {
                stream,
                codec: FrameCodec::new(settings.max_frame_bytes),
                read_buf: BytesMut::with_capacity(READ_CHUNK),
                out: OutFrames::default(),
                open_for_reading: true,
            },
            ctx,
            chain,
            drain: Drain {
                cancelled: Box::pin(shutdown.cancelled_owned()),
                timeout: settings.drain_timeout,
                deadline: None,
            },
            settings,
            counters: ConnectionCounters::default(),
            last_activity: now,
            idle_timer: Box::pin(sleep_until(idle_deadline)),
            pre_auth: None,
        }
    }

    /// Holds the connection to the before-authentication limits until the
    /// sink reports the client authenticated.
    pub(crate) fn before_authentication(&mut self, pre_auth: PreAuth) {
        self.io
            .codec
            .set_max_frame_bytes(self.settings.max_unauthenticated_frame_bytes);
        self.pre_auth = Some(pre_auth);
    }

    /// Lifts the before-authentication limits once the client authenticated;
    /// its slot in the unauthenticated cap is released here.
    fn check_authenticated(&mut self) {
        if self.pre_auth.is_some() && self.chain.authenticated() {
            self.pre_auth = None;
            self.io
                .codec
                .set_max_frame_bytes(self.settings.max_frame_bytes);
            debug!(
                conn = self.ctx.connection_id,
                client = %self.ctx.client_addr,
                "client {} (conn {}): authenticated; before-authentication limits lifted",
                self.ctx.client_addr,
                self.ctx.connection_id
            );
        }
    }

    /// Whether the next request may be read and forwarded.
    fn accepting_requests(&self) -> bool {
        self.io.open_for_reading
            && self.drain.deadline.is_none()
            && self.chain.pending() < MAX_IN_FLIGHT
    }

    /// Serves the client until the connection ends, and says why it ended.
    pub(crate) async fn run(&mut self) -> Close {
        loop {
            self.check_authenticated();
            if self.accepting_requests() {
                match self.io.codec.decode(&mut self.io.read_buf) {
                    Err(e) => return Close::Error(self.frame_error(e)),
                    Ok(Some(frame)) => match self.forward(frame).await {
                        Ok(()) => continue,
                        Err(close) => return close,
                    },
                    Ok(None) => {}
                }
            }
            if self.chain.pending() == 0 {
                if self.drain.deadline.is_some() {
                    return Close::Drained;
                }
                if !self.io.open_for_reading {
                    return Close::ClientClosed;
                }
            }
            let step = match self.next_event().await {
                Event::Shutdown => {
                    self.drain.start();
                    Ok(())
                }
                Event::Response(Ok(response)) => self.write_responses(response).await,
                Event::Response(Err(e)) => Err(Close::Error(e.into())),
                Event::Read(read) => self.on_read(read),
                Event::IdleTimer => self.on_idle_timer(),
                Event::DrainDeadline => Err(Close::DrainTimedOut),
                Event::AuthenticationDeadline => self.on_authentication_deadline(),
            };
            if let Err(close) = step {
                return close;
            }
        }
    }

    async fn next_event(&mut self) -> Event {
        let pending = self.chain.pending();
        let reading = self.accepting_requests();
        if reading {
            self.io.read_buf.reserve(READ_CHUNK);
        }
        let idle_armed =
            self.settings.idle_timeout.is_some() && pending == 0 && self.drain.deadline.is_none();
        let drain_deadline = self.drain.deadline;
        let auth_deadline = self
            .pre_auth
            .as_ref()
            .map(|p| p.since + self.settings.authentication_timeout);
        tokio::select! {
            biased;
            () = &mut self.drain.cancelled, if drain_deadline.is_none() => Event::Shutdown,
            r = self.chain.recv(&self.ctx), if pending > 0 => Event::Response(r),
            r = self.io.stream.read_buf(&mut self.io.read_buf), if reading => Event::Read(r),
            () = &mut self.idle_timer, if idle_armed => Event::IdleTimer,
            () = sleep_until(drain_deadline.unwrap_or_else(Instant::now)),
                if drain_deadline.is_some() => Event::DrainDeadline,
            () = sleep_until(auth_deadline.unwrap_or_else(Instant::now)),
                if auth_deadline.is_some() => Event::AuthenticationDeadline,
        }
    }

    /// A framing error, named as a before-authentication one when it is.
    fn frame_error(&self, e: CodecError) -> ConnectionError {
        match e {
            CodecError::FrameTooLarge { .. } if self.pre_auth.is_some() => {
                ConnectionError::FrameBeforeAuthentication(e)
            }
            e => ConnectionError::Frame(e),
        }
    }

    fn on_authentication_deadline(&mut self) -> Result<(), Close> {
        self.check_authenticated();
        if self.pre_auth.is_none() {
            return Ok(());
        }
        Err(Close::Error(ConnectionError::AuthenticationTimeout(
            self.settings.authentication_timeout,
        )))
    }

    /// Parses one request frame and hands it to the chain.
    async fn forward(&mut self, frame: BytesMut) -> Result<(), Close> {
        let request = Request::parse(frame).map_err(|e| Close::Error(ConnectionError::Frame(e)))?;
        self.counters.request(request.api_key());
        self.last_activity = Instant::now();
        match self
            .drain
            .bounded(self.chain.send(request, &self.ctx))
            .await
        {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(Close::Error(e.into())),
            None => Err(Close::DrainTimedOut),
        }
    }

    fn on_read(&mut self, read: std::io::Result<usize>) -> Result<(), Close> {
        match read {
            Ok(0) => {
                self.io.open_for_reading = false;
                if !self.io.read_buf.is_empty() {
                    debug!(
                        conn = self.ctx.connection_id,
                        client = %self.ctx.client_addr,
                        "client {} (conn {}): closed in the middle of a frame ({} bytes unread)",
                        self.ctx.client_addr,
                        self.ctx.connection_id,
                        self.io.read_buf.len()
                    );
                }
                Ok(())
            }
            Ok(n) => {
                self.counters.bytes_in.increment(n as u64);
                self.last_activity = Instant::now();
                Ok(())
            }
            Err(e) => Err(Close::ReadFailed(e)),
        }
    }

    fn on_idle_timer(&mut self) -> Result<(), Close> {
        let Some(idle) = self.settings.idle_timeout else {
            return Ok(());
        };
        let deadline = self.last_activity + idle;
        if Instant::now() >= deadline {
            return Err(Close::Idle(idle));
        }
        self.idle_timer.as_mut().reset(deadline);
        Ok(())
    }

    /// Writes `first` and every response that is ready right after it, in one
    /// batch, then flushes.
    async fn write_responses(&mut self, first: Response) -> Result<(), Close> {
        let mut failure = self.encode(&first).err();
        while failure.is_none() && self.chain.pending() > 0 && self.io.out.len() < WRITE_BATCH_BYTES
        {
            match self.chain.recv(&self.ctx).now_or_never() {
                None => break,
                Some(Ok(response)) => failure = self.encode(&response).err(),
                Some(Err(e)) => failure = Some(e.into()),
            }
        }
        // Responses encoded before a failure are owed to the client: send them.
        if !self.io.out.is_empty() {
            let len = self.io.out.len();
            let timeout = self.settings.write_timeout;
            match self.drain.bounded(self.io.write_out(timeout)).await {
                Some(Ok(())) => self.counters.bytes_out.increment(len as u64),
                Some(Err(WriteFailure::Io(e))) => return Err(Close::WriteFailed(e)),
                Some(Err(WriteFailure::Stalled(d))) => {
                    return Err(Close::Error(ConnectionError::WriteTimeout(d)));
                }
                None => return Err(Close::DrainTimedOut),
            }
        }
        self.last_activity = Instant::now();
        match failure {
            Some(e) => Err(Close::Error(e)),
            None => Ok(()),
        }
    }

    fn encode(&mut self, response: &Response) -> Result<(), ConnectionError> {
        response
            .encode_into(&mut self.io.out)
            .map_err(ConnectionError::Encode)?;
        self.counters.response(response.api_key());
        Ok(())
    }

    /// Tells the client we are done (TLS `close_notify`, then FIN), so that it
    /// sees an orderly close; bounded, since the client may not be reading.
    pub(crate) async fn close_write_side(&mut self) {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.io.stream.shutdown()).await;
    }

    /// Logs (and counts) why the connection ended.
    pub(crate) fn report(&self, close: Close) {
        let ctx = &self.ctx;
        let (addr, id) = (ctx.client_addr, ctx.connection_id);
        let owed = self.chain.pending();
        let unanswered = if owed > 0 {
            format!("; {owed} request(s) left unanswered")
        } else {
            String::new()
        };
        let source = &*ctx.source_name;
        match close {
            Close::ClientClosed => {
                debug!(source, conn = id, client = %addr, "client {addr} (conn {id}): closed by the client");
            }
            Close::Idle(idle) => {
                debug!(source, conn = id, client = %addr, "client {addr} (conn {id}): idle for {idle:?}, closing");
            }
            Close::Drained => {
                debug!(source, conn = id, client = %addr, "client {addr} (conn {id}): closed for shutdown, every response written");
            }
            Close::DrainTimedOut => {
                warn!(
                    source, conn = id, client = %addr, abandoned = owed,
                    "client {addr} (conn {id}): shutdown drain timeout of {:?} passed with {owed} request(s) unanswered; closing",
                    self.settings.drain_timeout
                );
            }
            Close::Error(e) => {
                let side = e.side().as_str();
                let retriable = if e.retriable() { "true" } else { "false" };
                counter!(names::CLIENT_CONNECTIONS_CLOSED_ON_ERROR, "source" => source.to_owned(), "side" => side)
                    .increment(1);
                counter!(names::ERRORS, "side" => side, "retriable" => retriable).increment(1);
                warn!(source, conn = id, client = %addr, side, retriable = e.retriable(), "client {addr} (conn {id}): {e}{unanswered}");
            }
            Close::ReadFailed(e) | Close::WriteFailed(e) if owed > 0 => {
                info!(source, conn = id, client = %addr, "client {addr} (conn {id}): connection lost: {e}{unanswered}");
            }
            Close::ReadFailed(e) | Close::WriteFailed(e) => {
                debug!(source, conn = id, client = %addr, "client {addr} (conn {id}): connection lost: {e}");
            }
        }
    }
}

/// A connection's counters, registered once (by api, on first use) so that
/// the hot path neither formats labels nor looks metrics up.
struct ConnectionCounters {
    requests: Vec<Option<Counter>>,
    responses: Vec<Option<Counter>>,
    bytes_in: Counter,
    bytes_out: Counter,
}

impl Default for ConnectionCounters {
    fn default() -> Self {
        Self {
            requests: Vec::new(),
            responses: Vec::new(),
            bytes_in: counter!(names::BYTES_IN),
            bytes_out: counter!(names::BYTES_OUT),
        }
    }
}

impl ConnectionCounters {
    fn request(&mut self, api: ApiKey) {
        Self::slot(&mut self.requests, names::REQUESTS, api).increment(1);
    }

    fn response(&mut self, api: ApiKey) {
        Self::slot(&mut self.responses, names::RESPONSES, api).increment(1);
    }

    fn slot<'a>(
        slots: &'a mut Vec<Option<Counter>>,
        name: &'static str,
        api: ApiKey,
    ) -> &'a Counter {
        let index = usize::try_from(api as i16).unwrap_or(0);
        if slots.len() <= index {
            slots.resize_with(index + 1, || None);
        }
        slots[index].get_or_insert_with(|| counter!(name, "api" => format!("{api:?}")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! Time-dependent behaviour, on paused tokio time over in-memory streams.

    use std::collections::VecDeque;

    use async_trait::async_trait;
    use bytes::Bytes;
    use sluice_chain::{Sink, SinkBuilder};
    use sluice_codec::kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, SaslAuthenticateRequest,
    };
    use sluice_codec::{RequestKind, ResponseKind};
    use tokio::io::DuplexStream;
    use tokio::sync::Semaphore;
    use tokio::task::JoinHandle;

    use super::*;

    /// Answers every request at once, unless `hold` is set. With `auth`, the
    /// client counts as authenticated once it sent a SaslAuthenticate.
    struct Echo {
        owed: VecDeque<i32>,
        hold: bool,
        auth: Option<bool>,
    }

    #[async_trait]
    impl Sink for Echo {
        fn name(&self) -> &str {
            "Echo"
        }
        async fn send(&mut self, req: Request, _: &ConnectionContext) -> Result<(), ChainError> {
            if req.api_key() == ApiKey::SaslAuthenticate {
                self.auth = self.auth.map(|_| true);
            }
            self.owed.push_back(req.correlation_id());
            Ok(())
        }
        fn authenticated(&self) -> bool {
            self.auth.unwrap_or(true)
        }
        async fn recv(&mut self, _: &ConnectionContext) -> Result<Response, ChainError> {
            if self.hold || self.owed.is_empty() {
                std::future::pending::<()>().await;
            }
            let id = self.owed.pop_front().unwrap();
            let body = ResponseKind::ApiVersions(ApiVersionsResponse::default());
            Ok(Response::from_body(ApiKey::ApiVersions, 3, id, body))
        }
        fn pending(&self) -> usize {
            self.owed.len()
        }
    }

    struct EchoBuilder {
        hold: bool,
        auth: bool,
    }

    impl SinkBuilder for EchoBuilder {
        fn build(&self, _: &ConnectionContext) -> Box<dyn Sink> {
            Box::new(Echo {
                owed: VecDeque::new(),
                hold: self.hold,
                auth: self.auth.then_some(false),
            })
        }
    }

    fn request(id: i32) -> BytesMut {
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        let req = Request::from_body(ApiKey::ApiVersions, 3, id, Some(Bytes::new()), body);
        let mut buf = BytesMut::new();
        req.encode(&mut buf).unwrap();
        buf
    }

    fn sasl_authenticate(id: i32) -> BytesMut {
        let body = RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default());
        let req = Request::from_body(ApiKey::SaslAuthenticate, 2, id, Some(Bytes::new()), body);
        let mut buf = BytesMut::new();
        req.encode(&mut buf).unwrap();
        buf
    }

    /// The 4-byte length prefix of a frame of `len` bytes, and a first chunk.
    fn big_frame_start(len: i32) -> Vec<u8> {
        let mut frame = len.to_be_bytes().to_vec();
        frame.extend_from_slice(&[0u8; 64]);
        frame
    }

    /// What a connection under test is set up with.
    struct Setup {
        hold: bool,
        buffer: usize,
        idle: Option<Duration>,
        /// The sink authenticates clients: the connection starts before authentication.
        auth: bool,
    }

    impl Default for Setup {
        fn default() -> Self {
            Self {
                hold: false,
                buffer: 4096,
                idle: None,
                auth: false,
            }
        }
    }

    /// Runs a connection over an in-memory stream of `buffer` bytes.
    fn spawn(
        hold: bool,
        buffer: usize,
        idle: Option<Duration>,
        shutdown: CancellationToken,
    ) -> (DuplexStream, JoinHandle<Close>) {
        let setup = Setup {
            hold,
            buffer,
            idle,
            auth: false,
        };
        spawn_with(setup, shutdown).0
    }

    /// Runs a connection as `setup` says; also returns the unauthenticated
    /// cap (of one slot) the connection holds while unauthenticated.
    fn spawn_with(
        setup: Setup,
        shutdown: CancellationToken,
    ) -> ((DuplexStream, JoinHandle<Close>), Arc<Semaphore>) {
        let Setup {
            hold,
            buffer,
            idle,
            auth,
        } = setup;
        let (client, server) = tokio::io::duplex(buffer);
        let ctx = ConnectionContext {
            connection_id: 1,
            source_name: Arc::from("unit"),
            client_addr: "127.0.0.1:1".parse().unwrap(),
            local_addr: "127.0.0.1:2".parse().unwrap(),
            tls_principal: None,
        };
        let chain = ChainBuilder::new(Vec::new(), Box::new(EchoBuilder { hold, auth })).build(&ctx);
        let settings = Arc::new(ConnectionSettings {
            source_name: Arc::from("unit"),
            max_frame_bytes: 1024 * 1024,
            idle_timeout: idle,
            drain_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            max_unauthenticated_frame_bytes: 1024,
            authentication_timeout: Duration::from_secs(10),
        });
        let cap = Arc::new(Semaphore::new(1));
        let pre_auth = auth.then(|| PreAuth {
            _slot: Arc::clone(&cap).try_acquire_owned().unwrap(),
            since: Instant::now(),
        });
        let handle = tokio::spawn(async move {
            let mut conn = Connection::new(server, ctx, chain, settings, shutdown);
            if let Some(pre_auth) = pre_auth {
                conn.before_authentication(pre_auth);
            }
            conn.run().await
        });
        ((client, handle), cap)
    }

    #[tokio::test(start_paused = true)]
    async fn idle_timeout_counts_from_the_last_activity() {
        let idle = Duration::from_secs(30);
        let (mut client, handle) = spawn(false, 4096, Some(idle), CancellationToken::new());
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(20)).await;
        client.write_all(&request(1)).await.unwrap();
        let mut buf = [0u8; 256];
        assert!(client.read(&mut buf).await.unwrap() > 0);
        let close = handle.await.unwrap();
        assert!(matches!(close, Close::Idle(d) if d == idle), "{close:?}");
        assert_eq!(start.elapsed(), Duration::from_secs(50));
    }

    #[tokio::test(start_paused = true)]
    async fn owed_responses_keep_an_idle_connection_open() {
        let idle = Duration::from_secs(30);
        let shutdown = CancellationToken::new();
        let (mut client, handle) = spawn(true, 4096, Some(idle), shutdown.clone());
        client.write_all(&request(1)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!handle.is_finished(), "closed while a response was owed");
        let start = Instant::now();
        shutdown.cancel();
        let close = handle.await.unwrap();
        assert!(matches!(close, Close::DrainTimedOut), "{close:?}");
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_cannot_block_shutdown() {
        let shutdown = CancellationToken::new();
        // A 64-byte pipe: the responses to many requests cannot all fit.
        let (mut client, handle) = spawn(false, 64, None, shutdown.clone());
        let mut many = BytesMut::new();
        for id in 0..50 {
            many.extend_from_slice(&request(id));
        }
        let writer = tokio::spawn(async move {
            let _ = client.write_all(&many).await;
            client
        });
        // Within the write timeout (30 s): shutdown, not the deadline, ends it.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!handle.is_finished());
        let start = Instant::now();
        shutdown.cancel();
        let close = handle.await.unwrap();
        assert!(matches!(close, Close::DrainTimedOut), "{close:?}");
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        drop(writer);
    }

    /// Pipelines 200 requests into a 64-byte pipe and never reads.
    fn pipeline_and_never_read(client: DuplexStream) -> JoinHandle<DuplexStream> {
        let mut many = BytesMut::new();
        for id in 0..200 {
            many.extend_from_slice(&request(id));
        }
        tokio::spawn(async move {
            let mut client = client;
            let _ = client.write_all(&many).await;
            client
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
        let setup = Setup {
            buffer: 64,
            ..Setup::default()
        };
        let ((client, handle), _) = spawn_with(setup, CancellationToken::new());
        let start = Instant::now();
        let writer = pipeline_and_never_read(client);
        let close = handle.await.unwrap();
        assert!(
            matches!(close, Close::Error(ConnectionError::WriteTimeout(d)) if d == Duration::from_secs(30)),
            "{close:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        drop(writer);
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_over_the_unauthenticated_limit_is_refused_at_once() {
        let setup = Setup {
            auth: true,
            ..Setup::default()
        };
        let ((mut client, handle), _) = spawn_with(setup, CancellationToken::new());
        let start = Instant::now();
        client.write_all(&big_frame_start(2048)).await.unwrap();
        let close = handle.await.unwrap();
        assert!(
            matches!(
                close,
                Close::Error(ConnectionError::FrameBeforeAuthentication(
                    CodecError::FrameTooLarge {
                        size: 2048,
                        max: 1024
                    }
                ))
            ),
            "{close:?}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn once_authenticated_large_frames_pass_and_the_slot_is_released() {
        let setup = Setup {
            auth: true,
            ..Setup::default()
        };
        let ((mut client, handle), cap) = spawn_with(setup, CancellationToken::new());
        assert_eq!(cap.available_permits(), 0);
        client.write_all(&sasl_authenticate(1)).await.unwrap();
        let mut buf = [0u8; 256];
        assert!(client.read(&mut buf).await.unwrap() > 0);
        // The same frame the unauthenticated limit refuses, padded to 2 KiB.
        let mut big = request(2);
        big.resize(2048 + 4, 0);
        big[..4].copy_from_slice(&2048i32.to_be_bytes());
        client.write_all(&big).await.unwrap();
        assert!(client.read(&mut buf).await.unwrap() > 0);
        assert_eq!(cap.available_permits(), 1, "the slot was not released");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!handle.is_finished(), "closed after authenticating");
        drop(client);
        let close = handle.await.unwrap();
        assert!(matches!(close, Close::ClientClosed), "{close:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_never_authenticates_is_closed_at_the_deadline() {
        let setup = Setup {
            auth: true,
            ..Setup::default()
        };
        let ((mut client, handle), cap) = spawn_with(setup, CancellationToken::new());
        let start = Instant::now();
        // ApiVersions is answered, but is not authentication.
        client.write_all(&request(1)).await.unwrap();
        let mut buf = [0u8; 256];
        assert!(client.read(&mut buf).await.unwrap() > 0);
        let close = handle.await.unwrap();
        assert!(
            matches!(close, Close::Error(ConnectionError::AuthenticationTimeout(d)) if d == Duration::from_secs(10)),
            "{close:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(cap.available_permits(), 1, "the slot was not released");
    }

    #[tokio::test(start_paused = true)]
    async fn without_authentication_there_is_no_deadline_and_no_small_limit() {
        let ((mut client, handle), _) = spawn_with(Setup::default(), CancellationToken::new());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!handle.is_finished());
        let mut big = request(2);
        big.resize(2048 + 4, 0);
        big[..4].copy_from_slice(&2048i32.to_be_bytes());
        client.write_all(&big).await.unwrap();
        let mut buf = [0u8; 256];
        assert!(client.read(&mut buf).await.unwrap() > 0);
    }
}
