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

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use futures::FutureExt;
use metrics::counter;
use sluice_chain::{Chain, ChainBuilder, ChainError, ConnectionContext};
use sluice_codec::{CodecError, FetchMaxBytes, FrameCodec, OutFrames, Request, Response};
use sluice_metrics::names;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep, sleep_until};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::budget::{ConnectionBudget, Full, MemoryBudget, RESPONSE_ESTIMATE_BYTES};
use crate::tls::{self, HANDSHAKE_TIMEOUT};
use crate::write::{WriteFailure, write_within};

mod close;
mod counters;
mod drain;
mod read_buf;

pub(crate) use close::{Close, ConnectionError};
use counters::{ConnectionCounters, OpenGuard};
use drain::Drain;

/// At most this many requests may await a response; beyond it the connection
/// stops reading, which pushes back on the client through TCP.
pub(crate) const MAX_IN_FLIGHT: usize = 1024;

/// Responses are written once this many bytes are encoded, even if more are ready.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How long closing the write side (TLS `close_notify`, then FIN) may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a read between frames takes at most ([`read_buf::prepare_read`]).
const READ_CHUNK: usize = 16 * 1024;

/// Free space ensured before a read while the connection is quiet: enough
/// for most small requests, and an idle connection keeps no more than this.
const QUIET_READ_CHUNK: usize = 256;

/// A connection starts quiet, and becomes busy (reads of [`READ_CHUNK`])
/// once a read fills its small buffer or leaves a frame half read; so a
/// client that connects, sends ApiVersions and Metadata and then idles never
/// allocates a full chunk (memory given back later would mostly stay in the
/// allocator's heap). A busy connection with nothing owed and nothing
/// buffered for this long gives its buffers back and is quiet again.
/// Timeline of an idle consumer's coordinator connection: a heartbeat every
/// 3 s, answered within milliseconds; so it is quiet most of the time, and a
/// busy connection never is.
const QUIET_AFTER: Duration = Duration::from_secs(1);

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
    /// The bytes one connection may hold ([`crate::budget`]).
    pub(crate) connection_budget_bytes: usize,
    /// The budget all connections of the process share.
    pub(crate) memory: Arc<MemoryBudget>,
}

/// What a connection holds until its client has authenticated.
#[derive(Debug)]
pub(crate) struct PreAuth {
    /// Its slot in the source's unauthenticated cap.
    pub(crate) _slot: OwnedSemaphorePermit,
    /// Its slot in its address's share of that cap.
    pub(crate) _address: Option<crate::address_shares::AddressSlot>,
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
    ///
    /// A connection's task holds this future for the connection's life, and
    /// a future is as large as its largest state. The TLS states (the
    /// handshake, and `serve` over a TLS stream: about 7.5 KiB together) are
    /// therefore boxed, so that a plaintext connection does not carry them.
    pub(crate) async fn run(mut self, tcp: TcpStream) {
        let _open = OpenGuard::new(&self.settings.source_name);
        match self.tls.take() {
            Some(acceptor) => Box::pin(self.run_tls(acceptor, tcp)).await,
            None => self.serve(tcp).await,
        }
    }

    /// [`Client::run`] over TLS: the handshake, then the connection.
    async fn run_tls(mut self, acceptor: TlsAcceptor, tcp: TcpStream) {
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
                    "client {} (conn {}): {e}",
                    ctx.client_addr, ctx.connection_id
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
            principal = self.ctx.tls_principal.as_deref(),
            "client {} (conn {}): connected", self.ctx.client_addr, self.ctx.connection_id
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

/// The socket and its buffers.
struct Io<S> {
    stream: S,
    codec: FrameCodec,
    read_buf: BytesMut,
    /// Responses encoded and not yet written; shares what came from brokers.
    out: OutFrames,
    /// False once the client closed its side.
    open_for_reading: bool,
    /// Set while the connection is quiet (at first, and once it gave its
    /// buffers back): reads then start small ([`QUIET_READ_CHUNK`]).
    quiet: bool,
    /// The size of the last frame taken, with its prefix: after a long one
    /// the next read takes only the next prefix
    /// ([`read_buf::between_frames`]).
    last_frame_bytes: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io<S> {
    async fn write_out(&mut self, timeout: Duration) -> Result<(), WriteFailure> {
        write_within(&mut self.out, &mut self.stream, timeout).await
    }

    /// What the read buffer holds at its front.
    fn buffered(&self) -> Buffered {
        let buf = &self.read_buf;
        match buf.get(..4) {
            None if buf.is_empty() => Buffered::Nothing,
            None => Buffered::Part,
            Some(p) => match usize::try_from(i32::from_be_bytes([p[0], p[1], p[2], p[3]])) {
                Ok(len) if buf.len() >= 4 + len => Buffered::Frame,
                // A negative length is refused by the codec.
                Ok(_) | Err(_) => Buffered::Part,
            },
        }
    }
}

/// What the front of a connection's read buffer holds.
enum Buffered {
    Nothing,
    /// The start of a frame.
    Part,
    /// A whole frame.
    Frame,
}

/// What the select loop woke up for. It lives for one loop turn on the stack,
/// so the size of the response variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Event {
    Shutdown,
    Response(Result<Response, ChainError>),
    Read(std::io::Result<usize>),
    /// The process budget has room again.
    BudgetFreed,
    /// Nothing happened for [`QUIET_AFTER`]: time to give buffers back.
    Quiet,
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
    /// What the connection holds, against its budget and the process's.
    budget: ConnectionBudget,
    /// Which budget stopped reading, while one does (counted once a pause).
    paused: Option<Full>,
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
        let budget = ConnectionBudget::new(
            settings.connection_budget_bytes,
            Arc::clone(&settings.memory),
        );
        let idle_deadline = match settings.idle_timeout {
            Some(idle) => now + idle,
            None => now + Duration::from_secs(86_400 * 365),
        };
        Self {
            io: Io {
                stream,
                codec: FrameCodec::new(settings.max_frame_bytes),
                read_buf: BytesMut::new(),
                out: OutFrames::default(),
                open_for_reading: true,
                quiet: true,
                last_frame_bytes: 0,
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
            budget,
            paused: None,
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
                "client {} (conn {}): authenticated; before-authentication limits lifted",
                self.ctx.client_addr, self.ctx.connection_id
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
                let decoded = match self.budget.full_for_forwarding() {
                    None => self.io.codec.take_frame(&mut self.io.read_buf),
                    // Held back: a frame too large is still refused at once.
                    Some(_) => self.io.codec.check_prefix(&self.io.read_buf).map(|_| None),
                };
                match decoded {
                    Err(e) => return Close::Error(self.frame_error(e)),
                    // Boxed, as is `write_responses`: forwarding holds the
                    // chain's send for a moment, and inline its 2 KiB would
                    // be part of every idle connection's future.
                    Ok(Some(frame)) => match Box::pin(self.forward(frame)).await {
                        Ok(()) => continue,
                        Err(close) => return close,
                    },
                    Ok(None) => {
                        self.note_buffered();
                    }
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
                Event::Response(Ok(response)) => Box::pin(self.write_responses(response)).await,
                Event::Response(Err(e)) => Err(Close::Error(e.into())),
                Event::Read(read) => self.on_read(read),
                Event::BudgetFreed => Ok(()),
                Event::Quiet => {
                    self.go_quiet();
                    Ok(())
                }
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
        let accepting = self.accepting_requests();
        let (full, reading) = match self.io.buffered() {
            _ if !accepting => (None, false),
            Buffered::Nothing => {
                let full = self.budget.full_for_reading();
                (full, full.is_none())
            }
            // A frame already started is read to its end once admitted.
            Buffered::Part => {
                if self.note_buffered() {
                    (None, true)
                } else {
                    (Some(Full::Process), false)
                }
            }
            // Read whole: it waits for room to be forwarded.
            Buffered::Frame => match self.budget.full_for_forwarding() {
                None => return Event::BudgetFreed,
                full => (full, false),
            },
        };
        self.note_pause(full);
        let quiet_armed =
            !self.io.quiet && self.io.read_buf.is_empty() && self.drain.deadline.is_none();
        let read_limit = if reading {
            let chunk = if self.io.quiet {
                QUIET_READ_CHUNK
            } else {
                READ_CHUNK
            };
            let chunk = read_buf::between_frames(chunk, self.io.last_frame_bytes);
            read_buf::prepare_read(
                &mut self.io.read_buf,
                chunk,
                self.io.codec.max_frame_bytes(),
            )
        } else {
            0
        };
        let mut read_into = (&mut self.io.read_buf).limit(read_limit);
        let process_full = (full == Some(Full::Process)).then(|| Arc::clone(self.budget.process()));
        let quiet_at = self.last_activity + QUIET_AFTER;
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
            r = self.io.stream.read_buf(&mut read_into), if reading => Event::Read(r),
            () = ConnectionBudget::freed(process_full) => Event::BudgetFreed,
            () = sleep_until(quiet_at), if quiet_armed => Event::Quiet,
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

    /// Parses one request frame and hands it to the chain, a Fetch clamped
    /// to the room its budgets leave.
    async fn forward(&mut self, frame: BytesMut) -> Result<(), Close> {
        self.budget.frame_taken();
        self.note_buffered();
        let frame_bytes = frame.len() + 4;
        self.io.last_frame_bytes = frame_bytes;
        let taken_at = Instant::now();
        let (request, fetch) = Request::parse_with_fetch_limit(frame, self.budget.fetch_limit())
            .map_err(|e| Close::Error(ConnectionError::Frame(e)))?;
        let response_bytes = match fetch {
            Some(fetch) => {
                if fetch.carried < fetch.asked {
                    self.note_clamped(fetch);
                }
                usize::try_from(fetch.carried).unwrap_or(0)
            }
            None => RESPONSE_ESTIMATE_BYTES,
        };
        let api = request.api_key();
        self.counters.request(api);
        self.last_activity = taken_at;
        let owed_before = self.chain.pending();
        let sent = self
            .drain
            .bounded(self.chain.send(request, &self.ctx))
            .await;
        let owes = self.chain.pending() > owed_before;
        if owes {
            self.counters.owed(api, taken_at);
        }
        self.budget
            .forwarded(frame_bytes, owes.then_some(response_bytes));
        self.sync_kept();
        match sent {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(Close::Error(e.into())),
            None => Err(Close::DrainTimedOut),
        }
    }

    /// Counts what the read buffer holds, or has been promised by the length
    /// prefix of the frame it has started, against the budgets; returns
    /// whether that frame may be read on (it is admitted, see
    /// [`crate::budget`]).
    fn note_buffered(&mut self) -> bool {
        let buf = &self.io.read_buf;
        let declared = buf
            .get(..4)
            .map(|p| i32::from_be_bytes([p[0], p[1], p[2], p[3]]))
            .and_then(|len| usize::try_from(len).ok())
            .map_or(0, |len| 4 + len.min(self.io.codec.max_frame_bytes()));
        self.budget.reading_frame(buf.len(), declared)
    }

    /// Records a change of which budget, if any, keeps the connection from
    /// reading.
    fn note_pause(&mut self, full: Option<Full>) {
        if full == self.paused {
            return;
        }
        if let Some(budget) = full {
            let budget = budget.as_str();
            counter!(names::CLIENT_READS_PAUSED, "source" => self.settings.source_name.to_string(), "budget" => budget)
                .increment(1);
            debug!(
                "client {} (conn {}): holds {} bytes; reading paused until the {budget} memory budget has room",
                self.ctx.client_addr,
                self.ctx.connection_id,
                self.budget.held()
            );
        }
        self.paused = full;
    }

    fn note_clamped(&self, fetch: FetchMaxBytes) {
        counter!(names::FETCH_MAX_BYTES_CLAMPED, "source" => self.settings.source_name.to_string())
            .increment(1);
        debug!(
            "client {} (conn {}): fetch max_bytes {} lowered to {} to fit the memory budget",
            self.ctx.client_addr, self.ctx.connection_id, fetch.asked, fetch.carried
        );
    }

    /// Gives back the buffers of a connection that has gone quiet.
    fn go_quiet(&mut self) {
        if self.io.read_buf.is_empty() {
            self.io.read_buf = BytesMut::new();
            self.io.last_frame_bytes = 0;
            self.io.out.shrink(0);
            self.counters.release_idle();
            self.io.quiet = true;
        }
    }

    fn on_read(&mut self, read: std::io::Result<usize>) -> Result<(), Close> {
        match read {
            Ok(0) => {
                self.io.open_for_reading = false;
                if !self.io.read_buf.is_empty() {
                    debug!(
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
                if n >= QUIET_READ_CHUNK || matches!(self.io.buffered(), Buffered::Part) {
                    self.io.quiet = false;
                }
                self.note_buffered();
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
                Some(Ok(())) => {
                    self.counters.bytes_out.increment(len as u64);
                    self.counters.written(Instant::now());
                    self.budget.written(len);
                }
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

    /// Counts what the chain keeps for the client, and tells it the room
    /// left for what it may take on ahead.
    fn sync_kept(&mut self) {
        self.budget.set_kept(self.chain.kept_bytes());
        self.chain.set_room_bytes(self.budget.room_bytes());
    }

    /// Queues `response` for writing; what it holds replaces what was
    /// reserved for it.
    fn encode(&mut self, response: &Response) -> Result<(), ConnectionError> {
        let before = self.io.out.len();
        let encoded = response
            .encode_into(&mut self.io.out)
            .map_err(ConnectionError::Encode);
        self.budget.answered(self.io.out.len() - before);
        self.sync_kept();
        encoded?;
        self.counters.response(response.api_key());
        Ok(())
    }

    /// Tells the client we are done (TLS `close_notify`, then FIN), so that it
    /// sees an orderly close; bounded, since the client may not be reading.
    pub(crate) async fn close_write_side(&mut self) {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.io.stream.shutdown()).await;
    }
}

#[cfg(test)]
mod tests;
