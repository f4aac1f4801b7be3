//! The reading half of a broker connection.
//!
//! Kafka answers requests in order on a connection, so the reader matches
//! each frame with the oldest registered request, checks that the broker's
//! correlation id is the one Sluice assigned, restores the client's id and
//! completes the request. Whatever ends the connection, the reader reports
//! it once (log and metric) and fails every request still owed a response.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use sluice_codec::header::response_correlation_id;
use sluice_codec::{CodecError, FrameCodec, Response};
use sluice_metrics::names;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tracing::{debug, warn};

use super::{BoxRead, BrokerError, InFlight, MAX_IN_FLIGHT, Shared};

/// A deadline far enough away to mean "never" for the idle read timer.
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) struct Reader {
    shared: Arc<Shared>,
    frames: FramedRead<BoxRead, FrameCodec>,
    /// Requests registered by the writer, not yet pulled.
    registered: mpsc::Receiver<InFlight>,
    /// Requests pulled from `registered`, oldest first.
    in_flight: VecDeque<InFlight>,
    read_timeout: Option<Duration>,
}

impl Reader {
    pub(super) fn new(
        shared: Arc<Shared>,
        io: BoxRead,
        max_frame_bytes: usize,
        registered: mpsc::Receiver<InFlight>,
        read_timeout: Option<Duration>,
    ) -> Self {
        Self {
            shared,
            frames: FramedRead::new(io, FrameCodec::new(max_frame_bytes)),
            registered,
            in_flight: VecDeque::new(),
            read_timeout,
        }
    }

    /// Delivers responses until the connection ends, then reports why and
    /// fails every request still owed a response.
    pub(super) async fn run(mut self) {
        let ended = self.serve().await;
        let error = self.shared.fail(ended);
        self.registered.close();
        while let Ok(entry) = self.registered.try_recv() {
            self.in_flight.push_back(entry);
        }
        self.report(&error);
        for entry in self.in_flight.drain(..) {
            entry.reply.complete(Err(error.clone()));
        }
    }

    /// Logs and counts the end of the connection, once: a connection that
    /// owed responses failed them (`BROKER_RECEIVE_ERRORS`, WARN); one that
    /// owed nothing ended idle, which is routine
    /// (`BROKER_CONNECTIONS_IDLE_CLOSED`, DEBUG).
    fn report(&self, error: &BrokerError) {
        let broker = self.shared.broker();
        if matches!(error, BrokerError::Shutdown { .. }) {
            debug!(broker = %broker, in_flight = self.in_flight.len(), "broker connection closed by sluice");
            return;
        }
        // Includes requests still queued in the writer.
        let outstanding = self
            .shared
            .outstanding
            .load(std::sync::atomic::Ordering::Acquire);
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
        if outstanding > 0 {
            warn!(
                broker = %broker,
                in_flight = self.in_flight.len(),
                outstanding,
                "broker connection failed, failing its requests: {error}"
            );
        } else {
            debug!(broker = %broker, "idle broker connection ended: {error}");
        }
    }

    /// Reads until something ends the connection; returns what did.
    async fn serve(&mut self) -> BrokerError {
        let timer = tokio::time::sleep(FAR_FUTURE);
        tokio::pin!(timer);
        let mut armed_for: Option<Instant> = None;
        loop {
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
                frame = self.frames.next() => {
                    let delivered = match frame {
                        Some(Ok(frame)) => self.deliver(frame),
                        Some(Err(e)) => Err(self.codec_error(e)),
                        None => Err(BrokerError::ClosedByBroker {
                            broker: self.shared.broker().clone(),
                        }),
                    };
                    if let Err(e) = delivered {
                        return e;
                    }
                }
                entry = self.registered.recv(), if room => match entry {
                    Some(entry) => self.in_flight.push_back(entry),
                    None => return self.shared.failure_or_shutdown(),
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
            .or_else(|| self.registered.try_recv().ok())
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
                response.set_correlation_id(entry.client_correlation_id);
                entry.reply.complete(Ok(response));
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
