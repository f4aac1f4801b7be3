//! The fake broker: a local listener that plays a broker, by hand (the test
//! accepts each connection and reads and answers its requests) or by a
//! [`Script`] (every connection served in the background).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use sluice_codec::{Request, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use super::script::{self, Script, Seen};
use super::{response_frame, within};
use crate::BrokerAddress;

/// A listener that plays a broker.
///
/// [`FakeBroker::start`] gives one played by hand: [`FakeBroker::accept`]
/// hands the test each connection as a [`FakeConn`].
/// [`FakeBroker::scripted`] gives one that serves every connection itself
/// as its [`Script`] says; the test steers it with the switches below
/// ([`FakeBroker::fail_produce`], [`FakeBroker::stall`],
/// [`FakeBroker::auth_gate`], [`FakeBroker::hold_produce`]) and reads what
/// it saw ([`FakeBroker::seen`]).
pub struct FakeBroker {
    addr: SocketAddr,
    /// The listener of a broker played by hand; a scripted one's accept
    /// loop owns it.
    listener: Option<TcpListener>,
    shared: Arc<Shared>,
}

/// What the connections of a scripted broker share: the script, the
/// switches the test flips, and what the broker saw.
pub(super) struct Shared {
    pub(super) addr: SocketAddr,
    pub(super) script: Script,
    pub(super) fail_produce: AtomicBool,
    pub(super) stall: Stall,
    pub(super) auth_gate: Stall,
    pub(super) hold: watch::Sender<bool>,
    pub(super) seen: Mutex<Seen>,
}

impl FakeBroker {
    /// Listens on a free local port, played by hand.
    pub async fn start() -> Self {
        Self::listen(Script::default()).await
    }

    /// Listens on a free local port and serves every connection in the
    /// background as `script` says, until the test's runtime ends.
    pub async fn scripted(script: Script) -> Self {
        let mut broker = Self::listen(script).await;
        let listener = broker.listener.take().unwrap();
        let shared = broker.shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(script::serve(FakeConn::new(stream), shared.clone()));
            }
        });
        broker
    }

    async fn listen(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (hold, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            addr,
            script,
            fail_produce: AtomicBool::new(false),
            stall: Stall::default(),
            auth_gate: Stall::default(),
            hold,
            seen: Mutex::new(Seen::default()),
        });
        Self {
            addr,
            listener: Some(listener),
            shared,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where it listens, as a broker without an id.
    pub fn address(&self) -> BrokerAddress {
        BrokerAddress::new(self.addr.ip().to_string(), self.addr.port())
    }

    /// Accepts the next connection (within [`super::WAIT`]); only for a
    /// broker played by hand.
    pub async fn accept(&self) -> FakeConn {
        let listener = self
            .listener
            .as_ref()
            .expect("a scripted broker accepts its connections itself");
        let (stream, _) = within("the broker to accept", listener.accept())
            .await
            .unwrap();
        FakeConn::new(stream)
    }

    /// While set, a scripted broker closes a connection on which a Produce
    /// arrives instead of answering it, the request in flight.
    pub fn fail_produce(&self, fail: bool) {
        self.shared.fail_produce.store(fail, Ordering::SeqCst);
    }

    /// Armed, makes a scripted broker stop reading the connection on which
    /// bytes next arrive, say so, and drop it (unread bytes and all: a
    /// reset) once released.
    pub fn stall(&self) -> &Stall {
        &self.shared.stall
    }

    /// Armed, makes a scripted broker hold the next SaslAuthenticate until
    /// released, then answer it.
    pub fn auth_gate(&self) -> &Stall {
        &self.shared.auth_gate
    }

    /// While `true`, the first Produce of each connection of a scripted
    /// broker is answered only once this turns `false` again.
    pub fn hold_produce(&self, hold: bool) {
        self.shared.hold.send_replace(hold);
    }

    /// Reads what a scripted broker saw.
    pub fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.shared.seen.lock().unwrap())
    }
}

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
    fn new(stream: TcpStream) -> Self {
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
