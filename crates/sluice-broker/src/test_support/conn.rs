//! The broker's side of one fake-broker connection ([`FakeConn`]: read a
//! request, answer it, write raw bytes, reset) and the one-shot hold a test
//! arms on a scripted broker's connection ([`Stall`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use sluice_codec::{Request, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::{response_frame, within};

/// A one-shot hold on a scripted broker's connection: armed (`next`), the
/// connection announces that it is held (`stalled`) and waits to be let go
/// (`release`).
#[derive(Default)]
pub struct Stall {
    /// Armed: the next chance to hold takes it (and disarms).
    pub next: AtomicBool,
    /// Notified once a connection is held.
    pub stalled: Notify,
    /// Lets the held connection go on.
    pub release: Notify,
}

impl Stall {
    /// If armed: disarms, says so, and waits for the release. Whether it
    /// was armed.
    pub(super) async fn hold_if_armed(&self) -> bool {
        if !self.next.swap(false, Ordering::SeqCst) {
            return false;
        }
        self.stalled.notify_one();
        self.release.notified().await;
        true
    }
}

/// The broker's side of one connection.
pub struct FakeConn {
    /// The socket.
    pub stream: TcpStream,
}

impl FakeConn {
    pub(super) fn new(stream: TcpStream) -> Self {
        Self { stream }
    }

    /// Reads one request frame (within [`super::WAIT`]).
    pub async fn read_request(&mut self) -> Request {
        within("a request at the broker", async {
            let len = self.stream.read_i32().await.unwrap();
            let mut frame = BytesMut::zeroed(usize::try_from(len).unwrap());
            self.stream.read_exact(&mut frame).await.unwrap();
            Request::parse(frame).unwrap()
        })
        .await
    }

    /// The next request, however long it takes to come; `None` once the
    /// client closed the connection, or once `stall`, armed when the
    /// request's first bytes arrived, was released.
    pub async fn next_request(&mut self, stall: &Stall) -> Option<Request> {
        let len = self.stream.read_i32().await.ok()?;
        if stall.hold_if_armed().await {
            return None;
        }
        let mut frame = BytesMut::zeroed(usize::try_from(len).ok()?);
        self.stream.read_exact(&mut frame).await.ok()?;
        Some(Request::parse(frame).unwrap())
    }

    /// Answers `request` (using its correlation id) with `body`.
    pub async fn respond(&mut self, request: &Request, body: &ResponseKind) {
        let frame = response_frame(
            request.api_key(),
            request.api_version(),
            request.correlation_id(),
            body,
        );
        self.write(&frame).await;
    }

    /// Answers `request` with `body`, however long the write takes; `false`
    /// if the client is gone.
    pub async fn reply(&mut self, request: &Request, body: &ResponseKind) -> bool {
        let frame = response_frame(
            request.api_key(),
            request.api_version(),
            request.correlation_id(),
            body,
        );
        self.stream.write_all(&frame).await.is_ok()
    }

    /// Writes raw bytes.
    pub async fn write(&mut self, bytes: &[u8]) {
        within("the broker to write", self.stream.write_all(bytes))
            .await
            .unwrap();
    }

    /// Closes the connection with a TCP reset instead of a FIN.
    #[allow(deprecated)]
    pub fn reset(self) {
        self.stream.set_linger(Some(Duration::ZERO)).unwrap();
        drop(self.stream);
    }
}
