//! The reading half of a broker connection.
//!
//! Kafka answers requests in order on a connection, so the reader matches
//! each frame with the oldest registered request, checks that the broker's
//! correlation id is the one Sluice assigned, restores the client's id and
//! completes the request. Whatever ends the connection, the reader reports
//! it once (log and metric) and fails every request still owed a response.
//!
//! Each answer delivered is timed from when the writer registered its
//! request, just before writing it ([`names::BROKER_REQUEST_DURATION`],
//! by api and broker; not for the readiness probe's connections), through
//! histogram handles looked up once per api on the connection.
//!
//! The read buffer is sized by what is owed: while a response is owed it
//! keeps [`READ_CHUNK`] free for the next read, or, once a frame's length
//! is known, room for exactly that frame (one allocation, no copies as it
//! grows); once nothing is owed and
//! nothing is buffered, it is given back with the in-flight queue's slots,
//! and an idle connection waits for the broker (to see it close) with a
//! buffer of a few bytes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use metrics::Histogram;
use sluice_codec::header::response_correlation_id;
use sluice_codec::{ApiKey, CodecError, FrameCodec, Response};
use sluice_metrics::names;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Decoder;
use tracing::{debug, warn};

use super::{BoxRead, BrokerError, InFlight, MAX_IN_FLIGHT, Shared};

/// A deadline far enough away to mean "never" for the idle read timer.
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// Free space kept in the read buffer while a response is owed.
const READ_CHUNK: usize = 8 * 1024;
/// Below this much free space, a read while a response is owed first
/// reserves [`READ_CHUNK`].
const MIN_FREE: usize = 512;
/// Capacity an idle connection's empty read buffer may keep.
const IDLE_BUFFER: usize = 256;

pub(super) struct Reader {
    shared: Arc<Shared>,
    io: BoxRead,
    codec: FrameCodec,
    /// Bytes read and not yet split into frames.
    buf: BytesMut,
    /// Requests registered by the writer, not yet pulled.
    registered: mpsc::Receiver<Box<InFlight>>,
    /// Requests pulled from `registered`, oldest first.
    in_flight: VecDeque<InFlight>,
    read_timeout: Option<Duration>,
    /// Set once the owner dropped the connection and the writer wrote what
    /// was queued: the reader ends once nothing is owed.
    released: bool,
    latency: Latency,
}

/// The connection's latency histograms, one per api, looked up on first
/// use. Looked up again once the connection learns its broker's id (a
/// connection to a first contact point), as its `broker` label changes.
#[derive(Default)]
struct Latency {
    by_api: Vec<(ApiKey, Histogram)>,
    /// Whether `by_api` is labelled with the broker's id.
    with_id: bool,
}

impl Latency {
    fn record(&mut self, shared: &Shared, api: ApiKey, took: Duration) {
        if shared.probe {
            return;
        }
        let broker = shared.broker();
        if broker.id.is_some() != self.with_id {
            self.by_api.clear();
            self.with_id = broker.id.is_some();
        }
        let slot = match self.by_api.iter().position(|(key, _)| *key == api) {
            Some(slot) => slot,
            None => {
                let handle = metrics::histogram!(
                    names::BROKER_REQUEST_DURATION,
                    "api" => format!("{api:?}"),
                    "broker" => broker.metric_label(),
                );
                self.by_api.push((api, handle));
                self.by_api.len() - 1
            }
        };
        self.by_api[slot].1.record(took);
    }
}

impl Reader {
    pub(super) fn new(
        shared: Arc<Shared>,
        io: BoxRead,
        max_frame_bytes: usize,
        registered: mpsc::Receiver<Box<InFlight>>,
        read_timeout: Option<Duration>,
    ) -> Self {
        Self {
            shared,
            io,
            codec: FrameCodec::new(max_frame_bytes),
            buf: BytesMut::new(),
            registered,
            in_flight: VecDeque::new(),
            read_timeout,
            released: false,
            latency: Latency::default(),
        }
    }

    /// Delivers responses until the connection ends, then reports why and
    /// fails every request still owed a response.
    pub(super) async fn run(mut self) {
        let ended = self.serve().await;
        let error = self.shared.fail(ended);
        self.registered.close();
        while let Ok(entry) = self.registered.try_recv() {
            self.in_flight.push_back(*entry);
        }
        self.report(&error);
        for entry in self.in_flight.drain(..) {
            entry.reply.complete(Err(error.clone()));
        }
    }

    /// Logs and counts the end of the connection, once: a connection that
    /// owed responses failed them (`BROKER_RECEIVE_ERRORS`, WARN, or DEBUG
    /// when its owner ended it because the broker left the cluster); one
    /// that owed nothing ended idle, which is routine
    /// (`BROKER_CONNECTIONS_IDLE_CLOSED`, DEBUG).
    fn report(&self, error: &BrokerError) {
        let broker = self.shared.broker();
        if matches!(error, BrokerError::Shutdown { .. }) {
            debug!(
                in_flight = self.in_flight.len(),
                "broker connection closed by sluice"
            );
            return;
        }
        // Includes requests still queued in the writer.
        let outstanding = self
            .shared
            .outstanding
            .load(std::sync::atomic::Ordering::Acquire);
        if self.shared.probe {
            debug!(outstanding, "readiness probe connection ended: {error}");
            return;
        }
        let counter = if outstanding > 0 {
            names::BROKER_RECEIVE_ERRORS
        } else {
            names::BROKER_CONNECTIONS_IDLE_CLOSED
        };
        metrics::counter!(
            counter,
            "broker" => broker.metric_label(),
            "kind" => error.kind(),
        )
        .increment(1);
        if matches!(error, BrokerError::LeftCluster { .. }) {
            // Ended by its owner, whose own log says why (rate-limited per
            // broker): one line per client connection would repeat it.
            debug!(outstanding, "broker connection ended: {error}");
        } else if outstanding > 0 {
            warn!(
                in_flight = self.in_flight.len(),
                outstanding, "broker connection failed, failing its requests: {error}"
            );
        } else {
            debug!("idle broker connection ended: {error}");
        }
    }

    /// Reads until something ends the connection; returns what did.
    async fn serve(&mut self) -> BrokerError {
        let timer = tokio::time::sleep(FAR_FUTURE);
        tokio::pin!(timer);
        let mut armed_for: Option<Instant> = None;
        loop {
            if self.shared.cancel.is_cancelled() {
                return self.shared.failure_or_shutdown();
            }
            // Frames already buffered first, as they can be delivered now.
            match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    if let Err(e) = self.deliver(frame) {
                        return e;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => return self.codec_error(e),
            }
            if self.released && self.in_flight.is_empty() {
                return BrokerError::Shutdown {
                    broker: self.shared.broker().clone(),
                };
            }
            self.fit_buffer();
            let deadline = self.deadline();
            if deadline != armed_for {
                timer
                    .as_mut()
                    .reset(deadline.unwrap_or_else(|| Instant::now() + FAR_FUTURE));
                armed_for = deadline;
            }
            let room = self.in_flight.len() < MAX_IN_FLIGHT;
            tokio::select! {
                biased;
                () = self.shared.cancel.cancelled() => return self.shared.failure_or_shutdown(),
                // Cancel-safe: a read that loses the race has read nothing.
                read = self.io.read_buf(&mut self.buf) => match read {
                    Ok(0) => match self.codec.decode_eof(&mut self.buf) {
                        Ok(Some(frame)) => {
                            if let Err(e) = self.deliver(frame) {
                                return e;
                            }
                        }
                        Ok(None) => {
                            return BrokerError::ClosedByBroker {
                                broker: self.shared.broker().clone(),
                            };
                        }
                        Err(e) => return self.codec_error(e),
                    },
                    Ok(_) => {}
                    Err(e) => return self.codec_error(CodecError::Io(e)),
                },
                entry = self.registered.recv(), if room && !self.released => match entry {
                    Some(entry) => self.in_flight.push_back(*entry),
                    // The writer is done: the owner dropped the connection.
                    None => self.released = true,
                },
                () = &mut timer, if deadline.is_some() => {
                    return BrokerError::ReadTimeout {
                        broker: self.shared.broker().clone(),
                        timeout: self.read_timeout.unwrap_or_default(),
                    };
                }
            }
        }
    }

    /// Sizes the read buffer for the next read: room for a chunk while a
    /// response is owed; given back (with the in-flight queue's slots) when
    /// nothing is owed or buffered.
    fn fit_buffer(&mut self) {
        let owed = !self.in_flight.is_empty() || !self.registered.is_empty();
        if owed {
            match self.codec.check_prefix(&self.buf) {
                Ok(Some(size)) if self.buf.len() < 4 + size => self.fit_frame(4 + size),
                _ if self.buf.capacity() - self.buf.len() < MIN_FREE => {
                    self.buf.reserve(READ_CHUNK);
                }
                _ => {}
            }
        } else if self.buf.is_empty() {
            if self.buf.capacity() > IDLE_BUFFER {
                self.buf = BytesMut::new();
            }
            if self.in_flight.capacity() > 0 {
                self.in_flight = VecDeque::new();
            }
        }
    }

    /// Gives the frame being read a buffer of its whole size (`need`, with
    /// its length prefix) in one allocation. Grown as the bytes arrive, a
    /// large answer (a fetch of many MiB) would be copied at every doubling
    /// and could hold twice its size until delivered; the broker's length
    /// is trusted once the codec has checked it against `max_frame_bytes`.
    fn fit_frame(&mut self, need: usize) {
        if self.buf.capacity() >= need {
            return;
        }
        let mut exact = BytesMut::with_capacity(need);
        exact.extend_from_slice(&self.buf);
        self.buf = exact;
    }

    /// When the oldest request times out, if a read timeout is set: the read
    /// timeout on top of the time the broker may hold it by design. Later
    /// requests cannot be answered before the oldest, so its deadline is the
    /// one that matters.
    fn deadline(&self) -> Option<Instant> {
        let timeout = self.read_timeout?;
        let oldest = self.in_flight.front()?;
        Some(oldest.sent_at + oldest.broker_wait + timeout)
    }

    /// Matches a response frame with the oldest request and completes it.
    fn deliver(&mut self, frame: BytesMut) -> Result<(), BrokerError> {
        // The writer registers a request before writing it, so its entry is
        // in the channel if not yet pulled.
        let Some(entry) = self
            .in_flight
            .pop_front()
            .or_else(|| self.registered.try_recv().ok().map(|entry| *entry))
        else {
            return Err(self.protocol(format!(
                "response (correlation id {}) to no request in flight",
                response_correlation_id(&frame).map_or_else(|e| e.to_string(), |id| id.to_string())
            )));
        };
        let id = match response_correlation_id(&frame) {
            Ok(id) => id,
            Err(e) => {
                self.in_flight.push_front(entry);
                return Err(self.protocol(e.to_string()));
            }
        };
        if id != entry.broker_correlation_id {
            let reason = format!(
                "response correlation id {id} does not match {} expected for {:?} v{}",
                entry.broker_correlation_id, entry.api_key, entry.api_version
            );
            self.in_flight.push_front(entry);
            return Err(self.protocol(reason));
        }
        match Response::parse(frame, entry.api_key, entry.api_version) {
            Ok(mut response) => {
                let took = entry.sent_at.elapsed();
                self.latency.record(&self.shared, entry.api_key, took);
                response.set_correlation_id(entry.client_correlation_id);
                entry.reply.complete(Ok(response));
                self.shared.answered();
                Ok(())
            }
            Err(e) => {
                self.in_flight.push_front(entry);
                Err(self.protocol(e.to_string()))
            }
        }
    }

    fn codec_error(&self, e: CodecError) -> BrokerError {
        match e {
            CodecError::Io(io) => BrokerError::io(self.shared.broker(), "receive", &io),
            other => self.protocol(other.to_string()),
        }
    }

    fn protocol(&self, reason: String) -> BrokerError {
        BrokerError::Protocol {
            broker: self.shared.broker().clone(),
            reason,
        }
    }
}
