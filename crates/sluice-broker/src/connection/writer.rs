//! The writing half of a broker connection.
//!
//! It assigns correlation ids, registers each request with the reader before
//! writing its bytes (so that a response can never arrive for a request the
//! reader does not know), and batches writes: requests are encoded into one
//! buffer, which is written and flushed once the queue runs empty or the
//! buffer grows large. A request as the client sent it is shared, not
//! copied ([`OutFrames`]): only its length, header start and correlation id
//! are written anew. When the connection is dropped, everything queued is
//! written first; when it fails, every request still queued is completed
//! with [`BrokerError::NotSent`].

use std::sync::Arc;

use sluice_codec::{OutFrames, Request};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{BoxWrite, BrokerError, InFlight, Outgoing, Shared};

/// Write out the buffer once it holds this much, even if more requests wait.
const FLUSH_BYTES: usize = 256 * 1024;
/// Give back buffer memory above this after a large request.
const KEEP_BUFFER_BYTES: usize = 1024 * 1024;

/// Why [`Writer::serve`] stopped without an error.
enum Ended {
    /// The owner dropped the connection and everything queued is written.
    Released,
    /// The connection was ended (by the reader, or a failure it recorded).
    Cancelled,
}

pub(super) struct Writer {
    shared: Arc<Shared>,
    io: BoxWrite,
    requests: mpsc::Receiver<Box<Outgoing>>,
    in_flight: mpsc::Sender<Box<InFlight>>,
    /// Requests encoded and not yet written.
    out: OutFrames,
    next_correlation_id: i32,
}

impl Writer {
    pub(super) fn new(
        shared: Arc<Shared>,
        io: BoxWrite,
        requests: mpsc::Receiver<Box<Outgoing>>,
        in_flight: mpsc::Sender<Box<InFlight>>,
    ) -> Self {
        Self {
            shared,
            io,
            requests,
            in_flight,
            out: OutFrames::default(),
            next_correlation_id: 0,
        }
    }

    /// Runs until the connection fails or is dropped. Dropped, it has written
    /// everything queued and keeps the socket's write half open until the
    /// reader has read what is owed (a FIN now could make the broker drop
    /// its answers). Failed, it fails what is still queued.
    pub(super) async fn run(mut self) {
        let ended = match self.serve().await {
            Ok(Ended::Released) => {
                let Self {
                    shared,
                    io,
                    in_flight,
                    ..
                } = self;
                // The reader sees the owner let go once this is closed.
                drop(in_flight);
                shared.cancel.cancelled().await;
                drop(io);
                return;
            }
            Ok(Ended::Cancelled) => BrokerError::Shutdown {
                broker: self.shared.broker().clone(),
            },
            Err(e) => e,
        };
        let cause = self.shared.fail(ended);
        self.requests.close();
        let mut unanswerable = 0usize;
        while let Ok(out) = self.requests.try_recv() {
            match out.reply {
                Some(reply) => {
                    let error = BrokerError::not_sent_returning(&cause, out.request);
                    reply.complete(Err(error));
                }
                None => unanswerable += 1,
            }
        }
        if unanswerable > 0 {
            // acks=0 requests have no response to carry the error; the
            // failure itself is logged once, by the reader.
            debug!(
                count = unanswerable,
                "dropped queued acks=0 produce requests: {cause}"
            );
        }
    }

    async fn serve(&mut self) -> Result<Ended, BrokerError> {
        loop {
            let out = tokio::select! {
                biased;
                () = self.shared.cancel.cancelled() => return Ok(Ended::Cancelled),
                out = self.requests.recv() => match out {
                    Some(out) => out,
                    // Every request queued before the drop has been written.
                    None => return Ok(Ended::Released),
                },
            };
            self.queue(out).await?;
            while self.out.len() < FLUSH_BYTES {
                match self.requests.try_recv() {
                    Ok(out) => self.queue(out).await?,
                    Err(_) => break,
                }
            }
            self.write_buffered(self.out.len()).await?;
            self.out.shrink(KEEP_BUFFER_BYTES);
        }
    }

    /// Encodes one request into the buffer and registers it with the reader.
    async fn queue(&mut self, out: Box<Outgoing>) -> Result<(), BrokerError> {
        let Outgoing { mut request, reply } = *out;
        let client_correlation_id = request.correlation_id();
        let broker_wait = request.broker_wait();
        let broker_correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        request.set_correlation_id(broker_correlation_id);

        let mark = self.out.len();
        let rewind_to = self.out.mark();
        if let Err(e) = request.encode_into(&mut self.out) {
            self.out.rewind(rewind_to);
            let error = BrokerError::Encode {
                broker: self.shared.broker().clone(),
                reason: e.to_string(),
            };
            match reply {
                Some(reply) => reply.complete(Err(error)),
                None => {
                    warn!("dropped an acks=0 produce request: {error}")
                }
            }
            return Ok(());
        }
        let Some(reply) = reply else {
            return Ok(());
        };
        let entry = Box::new(InFlight {
            api_key: request.api_key(),
            api_version: request.api_version(),
            client_correlation_id,
            broker_correlation_id,
            sent_at: tokio::time::Instant::now(),
            broker_wait,
            reply,
        });
        // Kept until registered: a request that cannot be registered was
        // never written, and goes back to its owner.
        request.set_correlation_id(client_correlation_id);
        self.register(entry, request, mark).await
    }

    /// Hands `entry` to the reader. When the reader is full, first writes the
    /// buffer up to `mark` (the requests registered before this one) so that
    /// the broker can answer them and make room. On failure, `request` (its
    /// bytes never written) is handed back in the [`BrokerError::NotSent`].
    async fn register(
        &mut self,
        entry: Box<InFlight>,
        request: Request,
        mark: usize,
    ) -> Result<(), BrokerError> {
        let entry = match self.in_flight.try_send(entry) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Full(entry)) => entry,
            Err(mpsc::error::TrySendError::Closed(entry)) => {
                let cause = self.shared.failure_or_shutdown();
                let error = BrokerError::not_sent_returning(&cause, request);
                entry.reply.complete(Err(error));
                return Err(cause);
            }
        };
        let written = self.write_buffered(mark).await;
        let permit = match written {
            Ok(()) => tokio::select! {
                biased;
                () = self.shared.cancel.cancelled() => None,
                permit = self.in_flight.reserve() => permit.ok(),
            },
            Err(_) => None,
        };
        match permit {
            Some(permit) => {
                permit.send(entry);
                Ok(())
            }
            None => {
                let cause = match written {
                    Err(e) => self.shared.fail(e),
                    Ok(()) => self.shared.failure_or_shutdown(),
                };
                let error = BrokerError::not_sent_returning(&cause, request);
                entry.reply.complete(Err(error));
                Err(cause)
            }
        }
    }

    /// Writes and flushes the first `len` bytes queued, giving up when the
    /// connection is cancelled.
    async fn write_buffered(&mut self, len: usize) -> Result<(), BrokerError> {
        if len == 0 {
            return Ok(());
        }
        let (io, shared, out) = (&mut self.io, &self.shared, &mut self.out);
        let write = out.write_prefix_to(io, len);
        let result = tokio::select! {
            biased;
            () = shared.cancel.cancelled() => return Err(shared.failure_or_shutdown()),
            result = write => result,
        };
        result.map_err(|e| BrokerError::io(self.shared.broker(), "send", &e))
    }
}
