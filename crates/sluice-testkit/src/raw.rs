//! A minimal, blocking Kafka protocol client for tests that need exact control
//! over the bytes: pipelining, garbage, oversized frames, in-flight requests at
//! shutdown. Real-client behaviour is tested with real clients (see [`crate::clients`]).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use sluice_codec::kafka_protocol::messages::MetadataRequest;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use uuid::Uuid;

/// A blocking connection speaking raw Kafka frames.
pub struct RawClient {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl RawClient {
    /// Connects to `addr` with a 30 s read timeout.
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Connects to `addr` (an IPv4 `host:port`) like [`RawClient::connect`],
    /// with the socket's receive buffer set to `bytes` before connecting
    /// (the kernel doubles it): the window it offers stays that small, so
    /// that a client that stops reading stalls Sluice's writes soon.
    pub fn connect_with_receive_buffer(addr: &str, bytes: usize) -> Self {
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, SockaddrIn, connect, setsockopt, socket, sockopt,
        };
        use std::os::fd::AsRawFd;
        let target: std::net::SocketAddrV4 = addr
            .parse()
            .unwrap_or_else(|e| panic!("{addr} is not an IPv4 address: {e}"));
        let fd = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .expect("socket");
        setsockopt(&fd, sockopt::RcvBuf, &bytes).expect("set SO_RCVBUF");
        connect(fd.as_raw_fd(), &SockaddrIn::from(target))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let stream = TcpStream::from(fd);
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Connects to `addr` (an IPv4 `host:port`) from the local address
    /// `from` (any of 127.0.0.0/8 reaches a listener on 127.0.0.1): a
    /// client at another address, for per-address limits.
    pub fn connect_from(addr: &str, from: std::net::Ipv4Addr) -> Self {
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket,
        };
        use std::os::fd::AsRawFd;
        let target: std::net::SocketAddrV4 = addr
            .parse()
            .unwrap_or_else(|e| panic!("{addr} is not an IPv4 address: {e}"));
        let fd = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .expect("socket");
        let local = SockaddrIn::from(std::net::SocketAddrV4::new(from, 0));
        bind(fd.as_raw_fd(), &local).unwrap_or_else(|e| panic!("bind {from}: {e}"));
        connect(fd.as_raw_fd(), &SockaddrIn::from(target))
            .unwrap_or_else(|e| panic!("connect {addr} from {from}: {e}"));
        let stream = TcpStream::from(fd);
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Sends a request and returns its correlation id.
    pub fn send(&mut self, api: ApiKey, version: i16, body: RequestKind) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let buf = encode(api, version, id, body);
        self.stream.write_all(&buf).expect("write request");
        id
    }

    /// Sets how long a write may block (`None`: forever, the default).
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.stream
            .set_write_timeout(timeout)
            .expect("set write timeout");
    }

    /// Reads one response frame to a request of `api`/`version`.
    pub fn recv(&mut self, api: ApiKey, version: i16) -> Response {
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .expect("read response length");
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream
            .read_exact(&mut frame)
            .expect("read response frame");
        Response::parse(BytesMut::from(&frame[..]), api, version).expect("parse response")
    }

    /// Sends a request and waits for its response body.
    pub fn request(&mut self, api: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
        let id = self.send(api, version, body);
        let response = self.recv(api, version);
        assert_eq!(response.correlation_id(), id, "correlation id of {api:?}");
        response.into_body().expect("decode response")
    }

    /// Sends a request and reads its response body like
    /// [`RawClient::request`], but returns the I/O error when the peer has
    /// closed the connection (or does not answer within 30 s) instead of
    /// panicking: for tests that expect to be cut off.
    pub fn try_request(
        &mut self,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> std::io::Result<ResponseKind> {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        self.stream.write_all(&encode(api, version, id, body))?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = usize::try_from(i32::from_be_bytes(len))
            .map_err(|_| std::io::Error::new(ErrorKind::InvalidData, "negative frame length"))?;
        let mut frame = vec![0u8; len];
        self.stream.read_exact(&mut frame)?;
        let response = Response::parse(BytesMut::from(&frame[..]), api, version)
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string()))?;
        assert_eq!(response.correlation_id(), id, "correlation id of {api:?}");
        response
            .into_body()
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string()))
    }

    /// The id of `topic`, from a Metadata (v12) answer on this connection.
    pub fn topic_id(&mut self, topic: &str) -> Uuid {
        let body = RequestKind::Metadata(MetadataRequest::default().with_topics(None));
        let ResponseKind::Metadata(metadata) = self.request(ApiKey::Metadata, 12, body) else {
            panic!("not a Metadata response")
        };
        metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
            .map(|t| t.topic_id)
            .unwrap_or_else(|| panic!("topic {topic} not in the metadata"))
    }

    /// Writes arbitrary bytes.
    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// This end's address (`host:port`): the client address Sluice logs.
    pub fn local_addr(&self) -> String {
        self.stream.local_addr().expect("local address").to_string()
    }

    /// Closes the sending side (a FIN); the connection can still be read.
    pub fn shutdown_write(&mut self) -> std::io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Write)
    }

    /// Reads up to `buf.len()` bytes, waiting at most `timeout` for the
    /// first: `Ok(0)` at the end of the stream, `Err` (`WouldBlock` or
    /// `TimedOut`) when nothing came.
    pub fn read_within(&mut self, buf: &mut [u8], timeout: Duration) -> std::io::Result<usize> {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("set read timeout");
        let read = self.stream.read(buf);
        self.stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        read
    }

    /// Whether the peer sends anything (or closes) within `timeout`, without
    /// consuming it: a request the broker holds (a Fetch waiting for data)
    /// is still unanswered when this returns false.
    pub fn readable_within(&mut self, timeout: Duration) -> bool {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("set read timeout");
        let mut byte = [0u8; 1];
        let readable = match self.stream.peek(&mut byte) {
            Ok(_) => true,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        readable
    }

    /// Whether the peer closes the connection within `timeout` (reads until EOF or reset).
    pub fn closed_by_peer_within(&mut self, timeout: Duration) -> bool {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("set read timeout");
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }
}

/// A request frame (length prefix included) as [`RawClient::send`] writes it.
pub fn encode(api: ApiKey, version: i16, correlation_id: i32, body: RequestKind) -> Vec<u8> {
    let request = Request::from_body(api, version, correlation_id, Some("raw-test".into()), body);
    let mut buf = BytesMut::new();
    request.encode(&mut buf).expect("encode request");
    buf.to_vec()
}

/// A request frame built by hand (length prefix included): request header
/// v1 (`api_key`, `api_version`, `correlation_id`, client id `raw-test`),
/// then, when `flexible`, an empty tagged-field section (header v2), then
/// `body` as it is. For requests no codec would write: unknown api keys,
/// unsupported versions, garbage bodies.
pub fn frame(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    flexible: bool,
    body: &[u8],
) -> Vec<u8> {
    let client_id = b"raw-test";
    let mut frame = Vec::with_capacity(body.len() + 24);
    frame.extend_from_slice(&[0; 4]);
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&api_version.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    frame.extend_from_slice(client_id);
    if flexible {
        frame.push(0);
    }
    frame.extend_from_slice(body);
    let len = i32::try_from(frame.len() - 4).expect("frame length");
    frame[..4].copy_from_slice(&len.to_be_bytes());
    frame
}
