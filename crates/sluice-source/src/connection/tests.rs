//! Time-dependent behaviour, on paused tokio time over in-memory streams.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use sluice_chain::{Sink, SinkBuilder};
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, FetchRequest, SaslAuthenticateRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use tokio::io::DuplexStream;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::*;

/// Answers every request at once, unless `hold` is set, or as `gate` lets
/// it (one permit a response). With `auth`, the client counts as
/// authenticated once it sent a SaslAuthenticate.
struct Echo {
    owed: VecDeque<i32>,
    hold: bool,
    auth: Option<bool>,
    gate: Option<Arc<Semaphore>>,
    seen: Arc<Seen>,
}

/// What the sink was sent, for tests to look at.
#[derive(Default)]
struct Seen {
    /// The `max_bytes` of each Fetch, in order, and how many requests came.
    fetch_max_bytes: Mutex<Vec<i32>>,
    requests: Mutex<usize>,
}

impl Seen {
    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    fn fetch_max_bytes(&self) -> Vec<i32> {
        self.fetch_max_bytes.lock().unwrap().clone()
    }
}

#[async_trait]
impl Sink for Echo {
    fn name(&self) -> &str {
        "Echo"
    }
    async fn send(&mut self, mut req: Request, _: &ConnectionContext) -> Result<(), ChainError> {
        *self.seen.requests.lock().unwrap() += 1;
        if let Ok(RequestKind::Fetch(fetch)) = req.body() {
            let max_bytes = fetch.max_bytes;
            self.seen.fetch_max_bytes.lock().unwrap().push(max_bytes);
        }
        if req.api_key() == ApiKey::SaslAuthenticate {
            self.auth = self.auth.map(|_| true);
        }
        self.owed.push_back(req.correlation_id());
        Ok(())
    }
    fn authenticated(&self) -> bool {
        self.auth.unwrap_or(true)
    }
    async fn recv(&mut self, _: &ConnectionContext) -> Result<Response, ChainError> {
        if self.hold || self.owed.is_empty() {
            std::future::pending::<()>().await;
        }
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        let id = self.owed.pop_front().unwrap();
        let body = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        Ok(Response::from_body(ApiKey::ApiVersions, 3, id, body))
    }
    fn pending(&self) -> usize {
        self.owed.len()
    }
}

struct EchoBuilder {
    hold: bool,
    auth: bool,
    gate: Option<Arc<Semaphore>>,
    seen: Arc<Seen>,
}

impl SinkBuilder for EchoBuilder {
    fn build(&self, _: &ConnectionContext) -> Box<dyn Sink> {
        Box::new(Echo {
            owed: VecDeque::new(),
            hold: self.hold,
            auth: self.auth.then_some(false),
            gate: self.gate.clone(),
            seen: Arc::clone(&self.seen),
        })
    }
}

fn fetch(id: i32, max_bytes: i32) -> BytesMut {
    let body = RequestKind::Fetch(FetchRequest::default().with_max_bytes(max_bytes));
    let req = Request::from_body(ApiKey::Fetch, 12, id, Some(Bytes::new()), body);
    let mut buf = BytesMut::new();
    req.encode(&mut buf).unwrap();
    buf
}

fn request(id: i32) -> BytesMut {
    let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
    let req = Request::from_body(ApiKey::ApiVersions, 3, id, Some(Bytes::new()), body);
    let mut buf = BytesMut::new();
    req.encode(&mut buf).unwrap();
    buf
}

fn sasl_authenticate(id: i32) -> BytesMut {
    let body = RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default());
    let req = Request::from_body(ApiKey::SaslAuthenticate, 2, id, Some(Bytes::new()), body);
    let mut buf = BytesMut::new();
    req.encode(&mut buf).unwrap();
    buf
}

/// The 4-byte length prefix of a frame of `len` bytes, and a first chunk.
fn big_frame_start(len: i32) -> Vec<u8> {
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0u8; 64]);
    frame
}

/// What a connection under test is set up with.
struct Setup {
    hold: bool,
    buffer: usize,
    idle: Option<Duration>,
    /// The sink authenticates clients: the connection starts before authentication.
    auth: bool,
    /// Responses wait for a permit each.
    gate: Option<Arc<Semaphore>>,
    seen: Arc<Seen>,
    /// The connection's budget (default 64 MiB).
    budget: Option<usize>,
    /// The process budget (default a fresh 1 GiB one).
    memory: Option<Arc<MemoryBudget>>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            hold: false,
            buffer: 4096,
            idle: None,
            auth: false,
            gate: None,
            seen: Arc::default(),
            budget: None,
            memory: None,
        }
    }
}

/// Runs a connection over an in-memory stream of `buffer` bytes.
fn spawn(
    hold: bool,
    buffer: usize,
    idle: Option<Duration>,
    shutdown: CancellationToken,
) -> (DuplexStream, JoinHandle<Close>) {
    let setup = Setup {
        hold,
        buffer,
        idle,
        ..Setup::default()
    };
    spawn_with(setup, shutdown).0
}

/// Runs a connection as `setup` says; also returns the unauthenticated
/// cap (of one slot) the connection holds while unauthenticated.
fn spawn_with(
    setup: Setup,
    shutdown: CancellationToken,
) -> ((DuplexStream, JoinHandle<Close>), Arc<Semaphore>) {
    let Setup {
        hold,
        buffer,
        idle,
        auth,
        gate,
        seen,
        budget,
        memory,
    } = setup;
    let (client, server) = tokio::io::duplex(buffer);
    let ctx = ConnectionContext {
        connection_id: 1,
        source_name: Arc::from("unit"),
        client_addr: "127.0.0.1:1".parse().unwrap(),
        local_addr: "127.0.0.1:2".parse().unwrap(),
        tls_principal: None,
    };
    let sink = EchoBuilder {
        hold,
        auth,
        gate,
        seen,
    };
    let chain = ChainBuilder::new(Vec::new(), Box::new(sink)).build(&ctx);
    let settings = Arc::new(ConnectionSettings {
        source_name: Arc::from("unit"),
        max_frame_bytes: 1024 * 1024,
        idle_timeout: idle,
        drain_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(30),
        max_unauthenticated_frame_bytes: 1024,
        authentication_timeout: Duration::from_secs(10),
        connection_budget_bytes: budget.unwrap_or(64 << 20),
        memory: memory.unwrap_or_else(|| MemoryBudget::new(1 << 30)),
    });
    let cap = Arc::new(Semaphore::new(1));
    let pre_auth = auth.then(|| PreAuth {
        _slot: Arc::clone(&cap).try_acquire_owned().unwrap(),
        _address: None,
        since: Instant::now(),
    });
    let handle = tokio::spawn(async move {
        let mut conn = Connection::new(server, ctx, chain, settings, shutdown);
        if let Some(pre_auth) = pre_auth {
            conn.before_authentication(pre_auth);
        }
        conn.run().await
    });
    ((client, handle), cap)
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_counts_from_the_last_activity() {
    let idle = Duration::from_secs(30);
    let (mut client, handle) = spawn(false, 4096, Some(idle), CancellationToken::new());
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(20)).await;
    client.write_all(&request(1)).await.unwrap();
    let mut buf = [0u8; 256];
    assert!(client.read(&mut buf).await.unwrap() > 0);
    let close = handle.await.unwrap();
    assert!(matches!(close, Close::Idle(d) if d == idle), "{close:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(50));
}

#[tokio::test(start_paused = true)]
async fn owed_responses_keep_an_idle_connection_open() {
    let idle = Duration::from_secs(30);
    let shutdown = CancellationToken::new();
    let (mut client, handle) = spawn(true, 4096, Some(idle), shutdown.clone());
    client.write_all(&request(1)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!handle.is_finished(), "closed while a response was owed");
    let start = Instant::now();
    shutdown.cancel();
    let close = handle.await.unwrap();
    assert!(matches!(close, Close::DrainTimedOut), "{close:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_cannot_block_shutdown() {
    let shutdown = CancellationToken::new();
    // A 64-byte pipe: the responses to many requests cannot all fit.
    let (mut client, handle) = spawn(false, 64, None, shutdown.clone());
    let mut many = BytesMut::new();
    for id in 0..50 {
        many.extend_from_slice(&request(id));
    }
    let writer = tokio::spawn(async move {
        let _ = client.write_all(&many).await;
        client
    });
    // Within the write timeout (30 s): shutdown, not the deadline, ends it.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(!handle.is_finished());
    let start = Instant::now();
    shutdown.cancel();
    let close = handle.await.unwrap();
    assert!(matches!(close, Close::DrainTimedOut), "{close:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    drop(writer);
}

/// Pipelines 200 requests into a 64-byte pipe and never reads.
fn pipeline_and_never_read(client: DuplexStream) -> JoinHandle<DuplexStream> {
    let mut many = BytesMut::new();
    for id in 0..200 {
        many.extend_from_slice(&request(id));
    }
    tokio::spawn(async move {
        let mut client = client;
        let _ = client.write_all(&many).await;
        client
    })
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
    let setup = Setup {
        buffer: 64,
        ..Setup::default()
    };
    let ((client, handle), _) = spawn_with(setup, CancellationToken::new());
    let start = Instant::now();
    let writer = pipeline_and_never_read(client);
    let close = handle.await.unwrap();
    assert!(
        matches!(close, Close::Error(ConnectionError::WriteTimeout(d)) if d == Duration::from_secs(30)),
        "{close:?}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    drop(writer);
}

#[tokio::test(start_paused = true)]
async fn a_frame_over_the_unauthenticated_limit_is_refused_at_once() {
    let setup = Setup {
        auth: true,
        ..Setup::default()
    };
    let ((mut client, handle), _) = spawn_with(setup, CancellationToken::new());
    let start = Instant::now();
    client.write_all(&big_frame_start(2048)).await.unwrap();
    let close = handle.await.unwrap();
    assert!(
        matches!(
            close,
            Close::Error(ConnectionError::FrameBeforeAuthentication(
                CodecError::FrameTooLarge {
                    size: 2048,
                    max: 1024
                }
            ))
        ),
        "{close:?}"
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn once_authenticated_large_frames_pass_and_the_slot_is_released() {
    let setup = Setup {
        auth: true,
        ..Setup::default()
    };
    let ((mut client, handle), cap) = spawn_with(setup, CancellationToken::new());
    assert_eq!(cap.available_permits(), 0);
    client.write_all(&sasl_authenticate(1)).await.unwrap();
    let mut buf = [0u8; 256];
    assert!(client.read(&mut buf).await.unwrap() > 0);
    // The same frame the unauthenticated limit refuses, padded to 2 KiB.
    let mut big = request(2);
    big.resize(2048 + 4, 0);
    big[..4].copy_from_slice(&2048i32.to_be_bytes());
    client.write_all(&big).await.unwrap();
    assert!(client.read(&mut buf).await.unwrap() > 0);
    assert_eq!(cap.available_permits(), 1, "the slot was not released");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!handle.is_finished(), "closed after authenticating");
    drop(client);
    let close = handle.await.unwrap();
    assert!(matches!(close, Close::ClientClosed), "{close:?}");
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_authenticates_is_closed_at_the_deadline() {
    let setup = Setup {
        auth: true,
        ..Setup::default()
    };
    let ((mut client, handle), cap) = spawn_with(setup, CancellationToken::new());
    let start = Instant::now();
    // ApiVersions is answered, but is not authentication.
    client.write_all(&request(1)).await.unwrap();
    let mut buf = [0u8; 256];
    assert!(client.read(&mut buf).await.unwrap() > 0);
    let close = handle.await.unwrap();
    assert!(
        matches!(close, Close::Error(ConnectionError::AuthenticationTimeout(d)) if d == Duration::from_secs(10)),
        "{close:?}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(cap.available_permits(), 1, "the slot was not released");
}

#[tokio::test(start_paused = true)]
async fn without_authentication_there_is_no_deadline_and_no_small_limit() {
    let ((mut client, handle), _) = spawn_with(Setup::default(), CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!handle.is_finished());
    let mut big = request(2);
    big.resize(2048 + 4, 0);
    big[..4].copy_from_slice(&2048i32.to_be_bytes());
    client.write_all(&big).await.unwrap();
    let mut buf = [0u8; 256];
    assert!(client.read(&mut buf).await.unwrap() > 0);
}

/// Waits (on paused time) until `cond` holds; panics after 10 s of it.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_fetch_is_clamped_and_reading_pauses_at_the_connection_budget() {
    let gate = Arc::new(Semaphore::new(0));
    let seen = Arc::<Seen>::default();
    let memory = MemoryBudget::new(1 << 30);
    let setup = Setup {
        gate: Some(Arc::clone(&gate)),
        seen: Arc::clone(&seen),
        budget: Some(1 << 20),
        memory: Some(Arc::clone(&memory)),
        ..Setup::default()
    };
    let ((mut client, handle), _) = spawn_with(setup, CancellationToken::new());
    client.write_all(&fetch(1, 50 << 20)).await.unwrap();
    eventually("the first fetch", || seen.requests() == 1).await;
    assert_eq!(
        seen.fetch_max_bytes(),
        vec![1 << 20],
        "clamped to the budget"
    );
    assert!(memory.used_bytes() > 1 << 20, "{}", memory.used_bytes());
    client.write_all(&fetch(2, 50 << 20)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen.requests(), 1, "the budget is full: the second waits");
    gate.add_permits(1);
    eventually("the second fetch, once the first was answered", || {
        seen.requests() == 2
    })
    .await;
    assert_eq!(seen.fetch_max_bytes(), vec![1 << 20, 1 << 20]);
    gate.add_permits(1);
    let mut buf = vec![0u8; 4096];
    let mut answers = 0;
    while answers < 2 {
        let n = client.read(&mut buf).await.unwrap();
        assert!(n > 0);
        answers += count_frames(&buf[..n]);
    }
    drop(client);
    assert!(matches!(handle.await.unwrap(), Close::ClientClosed));
    assert_eq!(memory.used_bytes(), 0, "everything released at the end");
}

/// Frames in `bytes`, which must hold whole small frames.
fn count_frames(mut bytes: &[u8]) -> usize {
    let mut n = 0;
    while bytes.len() >= 4 {
        let len = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        bytes = &bytes[(4 + len).min(bytes.len())..];
        n += 1;
    }
    n
}

#[tokio::test(start_paused = true)]
async fn a_full_process_budget_pauses_other_connections_until_it_frees() {
    let memory = MemoryBudget::new(1 << 20);
    let gate = Arc::new(Semaphore::new(0));
    let hog = Setup {
        gate: Some(Arc::clone(&gate)),
        memory: Some(Arc::clone(&memory)),
        ..Setup::default()
    };
    let ((mut hog, _hog_task), _) = spawn_with(hog, CancellationToken::new());
    hog.write_all(&fetch(1, 50 << 20)).await.unwrap();
    eventually("the process budget full", || memory.used_bytes() >= 1 << 20).await;
    let seen = Arc::<Seen>::default();
    let other = Setup {
        seen: Arc::clone(&seen),
        memory: Some(Arc::clone(&memory)),
        ..Setup::default()
    };
    let ((mut other, _other_task), _) = spawn_with(other, CancellationToken::new());
    other.write_all(&request(7)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        seen.requests(),
        0,
        "nothing is read while the process is full"
    );
    gate.add_permits(1);
    eventually("the other request, once memory was freed", || {
        seen.requests() == 1
    })
    .await;
    let mut buf = [0u8; 256];
    assert!(
        other.read(&mut buf).await.unwrap() > 0,
        "and it is answered"
    );
}

#[tokio::test(start_paused = true)]
async fn a_quiet_connection_still_reads_frames_larger_than_its_small_buffer() {
    let (mut client, handle) = spawn(false, 1 << 16, None, CancellationToken::new());
    client.write_all(&request(1)).await.unwrap();
    let mut buf = vec![0u8; 8192];
    assert!(client.read(&mut buf).await.unwrap() > 0);
    tokio::time::sleep(QUIET_AFTER * 3).await;
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_string("x".repeat(4000)));
    let req = Request::from_body(ApiKey::ApiVersions, 3, 2, None, body.into());
    let mut frame = BytesMut::new();
    req.encode(&mut frame).unwrap();
    client.write_all(&frame).await.unwrap();
    let n = client.read(&mut buf).await.unwrap();
    assert_eq!(count_frames(&buf[..n]), 1, "answered after going quiet");
    drop(client);
    assert!(matches!(handle.await.unwrap(), Close::ClientClosed));
}

/// An ApiVersions request whose client software name is `len` bytes long.
fn request_of(id: i32, len: usize) -> BytesMut {
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_string("x".repeat(len)));
    let req = Request::from_body(ApiKey::ApiVersions, 3, id, None, body.into());
    let mut frame = BytesMut::new();
    req.encode(&mut frame).unwrap();
    frame
}

#[tokio::test(start_paused = true)]
async fn long_and_short_requests_in_turn_are_each_read_whole_and_answered_in_order() {
    // Long ones are read in place, the read after each taking only the next
    // prefix; short ones a chunk at a time, several in one read.
    let (client, handle) = spawn(false, 1 << 16, None, CancellationToken::new());
    let (mut from_sluice, mut to_sluice) = tokio::io::split(client);
    let lens = [
        200_000, 10, 10, 300_000, 100_000, READ_CHUNK, 20_000, 10, 16_000, 100,
    ];
    let mut pipelined = BytesMut::new();
    for (id, &len) in (1..).zip(&lens) {
        pipelined.extend_from_slice(&request_of(id, len));
    }
    let writer = tokio::spawn(async move {
        to_sluice.write_all(&pipelined).await.unwrap();
        to_sluice
    });
    // The correlation ids of the whole answers in `bytes`.
    let ids = |mut bytes: &[u8]| {
        let mut ids = Vec::new();
        while bytes.len() >= 8 {
            let len = usize::try_from(i32::from_be_bytes(bytes[..4].try_into().unwrap())).unwrap();
            if bytes.len() < 4 + len {
                break;
            }
            ids.push(i32::from_be_bytes(bytes[4..8].try_into().unwrap()));
            bytes = &bytes[4 + len..];
        }
        ids
    };
    let mut answers = Vec::new();
    let mut buf = vec![0u8; 8192];
    while ids(&answers).len() < lens.len() {
        let n = from_sluice.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed after the answers to {:?}", ids(&answers));
        answers.extend_from_slice(&buf[..n]);
    }
    assert_eq!(ids(&answers), (1..=10).collect::<Vec<i32>>());
    drop(writer.await.unwrap());
    drop(from_sluice);
    assert!(matches!(handle.await.unwrap(), Close::ClientClosed));
}

#[tokio::test(start_paused = true)]
async fn requests_read_together_wait_in_the_buffer_while_the_budget_is_full() {
    let gate = Arc::new(Semaphore::new(0));
    let seen = Arc::<Seen>::default();
    let setup = Setup {
        gate: Some(Arc::clone(&gate)),
        seen: Arc::clone(&seen),
        budget: Some(1 << 20),
        buffer: 1 << 16,
        ..Setup::default()
    };
    let ((mut client, _task), _) = spawn_with(setup, CancellationToken::new());
    let mut pipelined = BytesMut::new();
    for id in 1..=10 {
        pipelined.extend_from_slice(&fetch(id, 50 << 20));
    }
    client.write_all(&pipelined).await.unwrap();
    eventually("the first fetch", || seen.requests() == 1).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen.requests(), 1, "the other nine wait, already read");
    gate.add_permits(10);
    eventually("every fetch, one after the other", || seen.requests() == 10).await;
}

/// Every open connection's task holds `Client::run`'s future for the
/// connection's life, so its size is paid per idle connection (the target
/// of 1,000 idle connections in 24 MiB, `docs/performance.md`). The TLS
/// path and the states of a request in flight are boxed; inline they make
/// the future 7.8 KiB in a release build.
#[tokio::test]
async fn an_idle_plaintext_connection_future_stays_small() {
    // Unoptimized builds lay futures out larger than release builds; the
    // bound catches a large state made inline again, not a few fields more.
    const LIMIT_BYTES: usize = 6 * 1024;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let ctx = ConnectionContext {
        connection_id: 1,
        source_name: Arc::from("unit"),
        client_addr: "127.0.0.1:1".parse().unwrap(),
        local_addr: "127.0.0.1:2".parse().unwrap(),
        tls_principal: None,
    };
    let sink = EchoBuilder {
        hold: false,
        auth: false,
        gate: None,
        seen: Arc::default(),
    };
    let client = Client {
        ctx,
        tls: None,
        chain: Arc::new(ChainBuilder::new(Vec::new(), Box::new(sink))),
        settings: Arc::new(ConnectionSettings {
            source_name: Arc::from("unit"),
            max_frame_bytes: 1024 * 1024,
            idle_timeout: None,
            drain_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            max_unauthenticated_frame_bytes: 1024,
            authentication_timeout: Duration::from_secs(10),
            connection_budget_bytes: 64 << 20,
            memory: MemoryBudget::new(1 << 30),
        }),
        shutdown: CancellationToken::new(),
        pre_auth: None,
    };
    let size = std::mem::size_of_val(&client.run(tcp));
    assert!(
        size <= LIMIT_BYTES,
        "Client::run's future is {size} bytes, over {LIMIT_BYTES}: box the large state it holds inline"
    );
}
