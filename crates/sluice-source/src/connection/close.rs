//! How a client connection ends: the errors that make Sluice close it, and
//! every reason a connection ends, each logged once by the connection.

use std::time::Duration;

use metrics::counter;
use sluice_chain::ChainError;
use sluice_codec::CodecError;
use sluice_error::{ErrorClass, ErrorSide};
use sluice_metrics::names;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, info, warn};

use super::Connection;

/// An error that makes Sluice close a client connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    /// The client sent bytes that are not a Kafka request Sluice can handle.
    #[error("{0}")]
    Frame(CodecError),
    /// The chain failed.
    #[error("{0}")]
    Chain(#[from] ChainError),
    /// A response could not be encoded.
    #[error("cannot encode a response: {0}")]
    Encode(CodecError),
    /// A frame over `max_unauthenticated_frame_bytes` before authentication.
    #[error("{0} before authentication (max_unauthenticated_frame_bytes)")]
    FrameBeforeAuthentication(CodecError),
    /// The client did not authenticate in time.
    #[error("not authenticated within {0:?} of connecting (authentication_timeout_secs)")]
    AuthenticationTimeout(Duration),
    /// The client read none of the responses owed to it for this long.
    #[error(
        "read none of the responses owed to it for {0:?} (write_timeout_secs); closing to release them"
    )]
    WriteTimeout(Duration),
}

impl ErrorClass for ConnectionError {
    fn side(&self) -> ErrorSide {
        match self {
            ConnectionError::Frame(_)
            | ConnectionError::FrameBeforeAuthentication(_)
            | ConnectionError::AuthenticationTimeout(_)
            | ConnectionError::WriteTimeout(_) => ErrorSide::Client,
            ConnectionError::Chain(e) => e.side(),
            ConnectionError::Encode(_) => ErrorSide::Internal,
        }
    }

    fn retriable(&self) -> bool {
        match self {
            ConnectionError::Chain(e) => e.retriable(),
            ConnectionError::Frame(_)
            | ConnectionError::Encode(_)
            | ConnectionError::FrameBeforeAuthentication(_)
            | ConnectionError::AuthenticationTimeout(_)
            | ConnectionError::WriteTimeout(_) => false,
        }
    }
}

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum Close {
    /// The client closed its side and nothing was owed.
    ClientClosed,
    /// Nothing happened for the idle timeout.
    Idle(Duration),
    /// Shutdown, after every owed response was written.
    Drained,
    /// Shutdown, and the drain timeout passed with responses still owed.
    DrainTimedOut,
    /// Sluice closed the connection because of an error.
    Error(ConnectionError),
    /// Reading from the client failed.
    ReadFailed(std::io::Error),
    /// Writing to the client failed.
    WriteFailed(std::io::Error),
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
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
                debug!("client {addr} (conn {id}): closed by the client");
            }
            Close::Idle(idle) => {
                debug!("client {addr} (conn {id}): idle for {idle:?}, closing");
            }
            Close::Drained => {
                debug!("client {addr} (conn {id}): closed for shutdown, every response written");
            }
            Close::DrainTimedOut => {
                warn!(
                    abandoned = owed,
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
                if e.routine_close() {
                    info!(
                        side,
                        retriable = e.retriable(),
                        "client {addr} (conn {id}): {e}{unanswered}"
                    );
                } else {
                    warn!(
                        side,
                        retriable = e.retriable(),
                        "client {addr} (conn {id}): {e}{unanswered}"
                    );
                }
            }
            Close::ReadFailed(e) | Close::WriteFailed(e) if owed > 0 => {
                info!("client {addr} (conn {id}): connection lost: {e}{unanswered}");
            }
            Close::ReadFailed(e) | Close::WriteFailed(e) => {
                debug!("client {addr} (conn {id}): connection lost: {e}");
            }
        }
    }
}
