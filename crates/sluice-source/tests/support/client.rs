//! A minimal Kafka client for tests: writes ApiVersions requests (or raw
//! bytes) and reads response frames, every wait bounded.

use bytes::{Buf, Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
use sluice_codec::{ApiKey, Request, RequestKind};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::harness::WAIT;

/// A length-prefixed ApiVersions v3 request.
pub(crate) fn api_versions(correlation_id: i32, client_id: &'static [u8]) -> BytesMut {
    let request = Request::from_body(
        ApiKey::ApiVersions,
        3,
        correlation_id,
        Some(Bytes::from_static(client_id)),
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    let mut buf = BytesMut::new();
    request.encode(&mut buf).unwrap();
    buf
}

/// How a read from the server ended.
#[derive(Debug)]
pub(crate) enum Read {
    /// A whole frame; the correlation id at its start.
    Frame(i32),
    /// The server closed the connection (EOF, reset or TLS alert).
    Closed,
}

pub(crate) struct TestClient<S> {
    pub stream: S,
    buf: BytesMut,
}

impl TestClient<TcpStream> {
    pub(crate) async fn connect(addr: std::net::SocketAddr) -> Self {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .expect("connect timed out")
            .expect("connect failed");
        Self::new(stream)
    }

    /// Connects to `addr` from the loopback address `from` (any of
    /// 127.0.0.0/8 reaches a listener on 127.0.0.1): another client address.
    pub(crate) async fn connect_from(addr: std::net::SocketAddr, from: std::net::IpAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::new(from, 0))
            .expect("bind the client address");
        let stream = tokio::time::timeout(WAIT, socket.connect(addr))
            .await
            .expect("connect timed out")
            .expect("connect failed");
        Self::new(stream)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TestClient<S> {
    pub(crate) fn new(stream: S) -> Self {
        Self {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Writes raw bytes. A write error is ignored: the server may already have
    /// closed the connection, which the next read reports.
    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) {
        let write = async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        };
        let _ = tokio::time::timeout(WAIT, write)
            .await
            .expect("write timed out");
    }

    pub(crate) async fn send(&mut self, correlation_id: i32) {
        self.send_raw(&api_versions(correlation_id, b"test")).await;
    }

    /// Reads the next frame or the close, within [`WAIT`].
    pub(crate) async fn read(&mut self) -> Read {
        tokio::time::timeout(WAIT, self.read_unbounded())
            .await
            .unwrap_or_else(|_| panic!("no response and no close within {WAIT:?}"))
    }

    /// Reads the next frame or the close, with no time limit.
    pub(crate) async fn read_unbounded(&mut self) -> Read {
        loop {
            if self.buf.len() >= 8 {
                let len = i32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let correlation_id = i32::from_be_bytes(self.buf[4..8].try_into().unwrap());
                    self.buf.advance(4 + len);
                    return Read::Frame(correlation_id);
                }
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return Read::Closed,
                Ok(_) => {}
            }
        }
    }

    /// Reads one response and returns its correlation id.
    pub(crate) async fn recv(&mut self) -> i32 {
        match self.read().await {
            Read::Frame(id) => id,
            Read::Closed => panic!("the server closed the connection instead of answering"),
        }
    }

    /// Sends one request and checks the answer.
    pub(crate) async fn round_trip(&mut self, correlation_id: i32) {
        self.send(correlation_id).await;
        assert_eq!(self.recv().await, correlation_id);
    }

    /// Asserts that the server closes the connection without sending a frame.
    pub(crate) async fn expect_closed(&mut self) {
        match self.read().await {
            Read::Closed => {}
            Read::Frame(id) => panic!("expected a close, got a response with correlation id {id}"),
        }
    }
}
