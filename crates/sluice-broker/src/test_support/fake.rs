//! The fake broker: a local listener that plays a broker, by hand (the test
//! accepts each connection and reads and answers its requests) or by a
//! [`Script`] (every connection served in the background).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::conn::{FakeConn, Stall};
use super::script::{self, Script, Seen, Shared};
use super::within;
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
