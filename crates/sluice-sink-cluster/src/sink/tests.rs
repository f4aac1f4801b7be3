//! Driver tests against a scripted fake broker: a broker that fails mid-way
//! is answered with a retriable Kafka error, the client connection stays
//! usable, responses keep request order, and acks=0 owes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use sluice_chain::{ConnectionContext, Sink, SinkBuilder};
use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{FrameCodec, Request, Response, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::codec::Decoder;

use super::KafkaSinkClusterBuilder;

mod auth;
mod leave;
mod shown;
mod stalled;

const WAIT: Duration = Duration::from_secs(10);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?} waiting for {what}"))
}

/// A one-broker cluster (id 1) leading partitions 0 and 1 of `t`. Produce
/// requests are answered, unless `fail_produce` is set: then the broker
/// closes the connection instead.
struct FakeBroker {
    addr: SocketAddr,
    fail_produce: Arc<AtomicBool>,
    stall: Arc<Stall>,
    /// The session id and epoch of every Fetch; one opening a session
    /// (epoch 0) is given session [`FAKE_SESSION`].
    fetches: Arc<std::sync::Mutex<Vec<(i32, i32)>>>,
}

/// The fetch session id the fake broker gives.
const FAKE_SESSION: i32 = 7;

/// Makes the broker stop reading a connection the next time bytes arrive
/// (`next`), say so (`stalled`), and drop it, unread bytes and all (a
/// reset), once `release`d.
#[derive(Default)]
struct Stall {
    next: AtomicBool,
    stalled: Notify,
    release: Notify,
}

impl FakeBroker {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fail_produce = Arc::new(AtomicBool::new(false));
        let stall = Arc::new(Stall::default());
        let fetches = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (fail, stall_too, seen) = (fail_produce.clone(), stall.clone(), fetches.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (fail, stall, seen) = (fail.clone(), stall_too.clone(), seen.clone());
                tokio::spawn(serve(stream, addr, fail, stall, seen));
            }
        });
        Self {
            addr,
            fail_produce,
            stall,
            fetches,
        }
    }
}

/// One fake broker connection's reading side: the next request, or `None`
/// once the client closed it (or, with a `stall` armed, once it is released).
struct Incoming {
    codec: FrameCodec,
    buf: BytesMut,
}

impl Incoming {
    fn new() -> Self {
        Self {
            codec: FrameCodec::new(64 * 1024 * 1024),
            buf: BytesMut::new(),
        }
    }

    async fn next(&mut self, stream: &mut TcpStream, stall: Option<&Stall>) -> Option<Request> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.buf).unwrap() {
                return Some(Request::parse(frame).unwrap());
            }
            if stream.read_buf(&mut self.buf).await.unwrap_or(0) == 0 {
                return None;
            }
            if let Some(stall) = stall.filter(|s| s.next.swap(false, Ordering::SeqCst)) {
                stall.stalled.notify_one();
                stall.release.notified().await;
                return None;
            }
        }
    }
}

/// Writes `body` as the answer to `request`; false if the client is gone.
async fn reply(stream: &mut TcpStream, request: &Request, body: ResponseKind) -> bool {
    let (api, version) = (request.api_key(), request.api_version());
    let mut out = BytesMut::new();
    Response::from_body(api, version, request.correlation_id(), body)
        .encode(&mut out)
        .unwrap();
    stream.write_all(&out).await.is_ok()
}

async fn serve(
    mut stream: TcpStream,
    addr: SocketAddr,
    fail_produce: Arc<AtomicBool>,
    stall: Arc<Stall>,
    fetches: Arc<std::sync::Mutex<Vec<(i32, i32)>>>,
) {
    let mut incoming = Incoming::new();
    while let Some(mut request) = incoming.next(&mut stream, Some(&stall)).await {
        let api = request.api_key();
        if api == ApiKey::Produce && fail_produce.load(Ordering::SeqCst) {
            return; // drops the connection with the request in flight
        }
        let mut body = answer(&mut request, addr);
        if let (Ok(RequestKind::Fetch(f)), ResponseKind::Fetch(a)) = (request.body(), &mut body) {
            fetches
                .lock()
                .unwrap()
                .push((f.session_id, f.session_epoch));
            if f.session_epoch == 0 {
                a.session_id = FAKE_SESSION;
            }
        }
        if api == ApiKey::Produce && !request.expects_response() {
            continue;
        }
        assert!(
            reply(&mut stream, &request, body).await,
            "the client is gone"
        );
    }
}

fn answer(request: &mut Request, addr: SocketAddr) -> ResponseKind {
    match request.body().unwrap() {
        RequestKind::ApiVersions(_) => {
            let keys = [
                (ApiKey::Produce, 3, 11),
                (ApiKey::Fetch, 4, 12),
                (ApiKey::Metadata, 0, 12),
                (ApiKey::ApiVersions, 0, 3),
            ];
            ResponseKind::ApiVersions(
                ApiVersionsResponse::default().with_api_keys(
                    keys.iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::Metadata(_) => {
            let partitions = (0..2)
                .map(|i| {
                    MetadataResponsePartition::default()
                        .with_partition_index(i)
                        .with_leader_id(BrokerId(1))
                        .with_replica_nodes(vec![BrokerId(1)])
                        .with_isr_nodes(vec![BrokerId(1)])
                })
                .collect();
            ResponseKind::Metadata(
                MetadataResponse::default()
                    .with_brokers(vec![
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_string(addr.ip().to_string()))
                            .with_port(i32::from(addr.port())),
                    ])
                    .with_controller_id(BrokerId(1))
                    .with_topics(vec![
                        MetadataResponseTopic::default()
                            .with_name(Some(topic()))
                            .with_partitions(partitions),
                    ]),
            )
        }
        RequestKind::Produce(p) => {
            let responses = p
                .topic_data
                .iter()
                .map(|t| {
                    TopicProduceResponse::default()
                        .with_name(t.name.clone())
                        .with_partition_responses(
                            t.partition_data
                                .iter()
                                .map(|d| {
                                    PartitionProduceResponse::default()
                                        .with_index(d.index)
                                        .with_base_offset(42)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
        }
        // Nothing to fetch, and no room for a fetch session.
        RequestKind::Fetch(f) => {
            let responses = f
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            fetch_response::PartitionData::default()
                                .with_partition_index(p.partition)
                                .with_high_watermark(0)
                        })
                        .collect();
                    fetch_response::FetchableTopicResponse::default()
                        .with_topic(t.topic.clone())
                        .with_topic_id(t.topic_id)
                        .with_partitions(partitions)
                })
                .collect();
            ResponseKind::Fetch(FetchResponse::default().with_responses(responses))
        }
        other => panic!("the fake broker does not serve {other:?}"),
    }
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

fn builder(broker: SocketAddr) -> KafkaSinkClusterBuilder {
    builder_reading_within(broker, 5)
}

/// [`builder`] with a read timeout of `read_timeout_secs`.
fn builder_reading_within(broker: SocketAddr, read_timeout_secs: u64) -> KafkaSinkClusterBuilder {
    let yaml = format!(
        r#"sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address_for_clients: "127.0.0.1:9192"
                address_for_peers: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 0
            local_shotover_broker_id: 0
            first_contact_points: ["{broker}"]
            connect_timeout_ms: 2000
            read_timeout: {read_timeout_secs}
"#
    );
    let topology = sluice_config::Topology::parse(&yaml, Path::new("t.yaml")).unwrap();
    let sluice_config::SourceConfig::Kafka(source) = &topology.sources[0];
    let Some(sluice_config::TransformConfig::KafkaSinkCluster(cfg)) = source.chain.first() else {
        panic!("no KafkaSinkCluster in the test topology");
    };
    KafkaSinkClusterBuilder::new(cfg).unwrap()
}

fn ctx() -> ConnectionContext {
    ConnectionContext {
        connection_id: 1,
        source_name: Arc::from("kafka"),
        client_addr: "127.0.0.1:50000".parse().unwrap(),
        local_addr: "127.0.0.1:9192".parse().unwrap(),
        tls_principal: None,
    }
}

/// A request as a client sends it: raw bytes, body not decoded.
fn client_request(api: ApiKey, version: i16, id: i32, body: RequestKind) -> Request {
    let mut buf = BytesMut::new();
    Request::from_body(api, version, id, Some("test".into()), body)
        .encode(&mut buf)
        .unwrap();
    Request::parse(buf.split_off(4)).unwrap()
}

fn produce(id: i32, acks: i16) -> Request {
    produce_records(id, acks, bytes::Bytes::from_static(b"not-really-records"))
}

fn produce_records(id: i32, acks: i16, records: bytes::Bytes) -> Request {
    let partitions = (0..2)
        .map(|i| {
            PartitionProduceData::default()
                .with_index(i)
                .with_records(Some(records.clone()))
        })
        .collect();
    let body = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(partitions),
        ]);
    client_request(ApiKey::Produce, 9, id, RequestKind::Produce(body))
}

fn metadata(id: i32) -> Request {
    let body = MetadataRequest::default().with_topics(None);
    client_request(ApiKey::Metadata, 12, id, RequestKind::Metadata(body))
}

fn produce_codes(response: Response) -> Vec<(i32, i16)> {
    let ResponseKind::Produce(p) = response.into_body().unwrap() else {
        panic!("not a Produce answer");
    };
    p.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| (p.index, p.error_code))
        .collect()
}

/// A sink built for one client, the client's context, and the builder (kept
/// alive with the sink: dropping it stops the peer checks).
type Client = (KafkaSinkClusterBuilder, Box<dyn Sink>, ConnectionContext);

/// A fresh sink for one client of `broker`.
fn client(broker: SocketAddr) -> Client {
    let builder = builder(broker);
    let sink = builder.build(&ctx());
    (builder, sink, ctx())
}

/// Hands `request` to `sink`, which must accept it.
async fn send<S: Sink + ?Sized>(sink: &mut S, ctx: &ConnectionContext, request: Request) {
    within("send", sink.send(request, ctx)).await.unwrap();
}

/// Sends `request` and returns the next answer (`what`, for the timeout message).
async fn exchange<S: Sink + ?Sized>(
    sink: &mut S,
    ctx: &ConnectionContext,
    request: Request,
    what: &str,
) -> Response {
    send(sink, ctx, request).await;
    within(what, sink.recv(ctx)).await.unwrap()
}

#[tokio::test]
async fn serves_in_order_and_hides_the_broker() {
    let broker = FakeBroker::start().await;
    let (_builder, mut sink, ctx) = client(broker.addr);
    send(&mut *sink, &ctx, metadata(7)).await;
    send(&mut *sink, &ctx, produce(8, -1)).await;
    send(&mut *sink, &ctx, produce(9, 0)).await;
    assert_eq!(sink.pending(), 2, "acks=0 owes no response");
    let first = within("metadata", sink.recv(&ctx)).await.unwrap();
    assert_eq!(first.correlation_id(), 7);
    let ResponseKind::Metadata(m) = first.into_body().unwrap() else {
        panic!("not a Metadata answer");
    };
    let brokers: Vec<(i32, i32)> = m.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
    assert_eq!(brokers, [(0, 9192)], "only the Sluice node is shown");
    let second = within("produce", sink.recv(&ctx)).await.unwrap();
    assert_eq!(second.correlation_id(), 8);
    assert!(
        !second.is_dirty(),
        "a one-broker produce answer passes through raw"
    );
    assert_eq!(produce_codes(second), [(0, 0), (1, 0)]);
    assert_eq!(sink.pending(), 0);
}

#[tokio::test]
async fn a_failed_broker_is_answered_with_a_retriable_error() {
    let broker = FakeBroker::start().await;
    let (_builder, mut sink, ctx) = client(broker.addr);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;

    broker.fail_produce.store(true, Ordering::SeqCst);
    let answer = exchange(&mut *sink, &ctx, produce(2, -1), "synthesized produce").await;
    assert_eq!(answer.correlation_id(), 2);
    assert_eq!(
        produce_codes(answer),
        [(0, 6), (1, 6)],
        "NOT_LEADER_OR_FOLLOWER for every partition of the failed part"
    );

    // The client connection is still usable: the next request reconnects.
    broker.fail_produce.store(false, Ordering::SeqCst);
    let answer = exchange(&mut *sink, &ctx, produce(3, -1), "produce after reconnect").await;
    assert_eq!(answer.correlation_id(), 3);
    assert_eq!(produce_codes(answer), [(0, 0), (1, 0)]);
}

#[tokio::test]
async fn an_unreachable_cluster_answers_metadata_by_closing() {
    // Nothing listens: the Metadata request (no place for an error before
    // v13) is retried elsewhere, then closes the client with the reason.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (_builder, mut sink, ctx) = client(port);
    send(&mut *sink, &ctx, metadata(1)).await;
    let error = within("failure", sink.recv(&ctx)).await.unwrap_err();
    assert!(error.to_string().contains("cannot connect"), "{error}");
    assert_eq!(sink.pending(), 0);
}

#[tokio::test]
async fn the_adopted_bootstrap_connection_is_named_with_its_broker_id() {
    let broker = FakeBroker::start().await;
    let builder = builder(broker.addr);
    let mut sink = builder.build_cluster(&ctx());
    let ctx = ctx();
    exchange(&mut sink, &ctx, metadata(1), "metadata").await;
    let target = crate::pool::Target::Broker(sluice_cluster::topology::BrokerId(1));
    let address = sink
        .connections
        .address(target)
        .expect("the bootstrap connection serves broker 1");
    assert_eq!(address.id, Some(1), "{address}");
    assert_eq!(address.metric_label(), "1");
}

#[tokio::test]
async fn a_request_its_failed_connection_never_wrote_is_sent_again_in_order() {
    let broker = FakeBroker::start().await;
    let (_builder, mut sink, ctx) = client(broker.addr);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;

    // A produce larger than the socket buffers: the connection is still
    // writing it when the broker resets the connection, and the next
    // produce waits in the connection's queue, never written.
    broker.stall.next.store(true, Ordering::SeqCst);
    let big = bytes::Bytes::from(vec![0u8; 16 * 1024 * 1024]);
    send(&mut *sink, &ctx, produce_records(2, -1, big)).await;
    within(
        "the broker to stop reading",
        broker.stall.stalled.notified(),
    )
    .await;
    send(&mut *sink, &ctx, produce(3, -1)).await;
    broker.stall.release.notify_one();

    let first = within("the big produce", sink.recv(&ctx)).await.unwrap();
    assert_eq!(first.correlation_id(), 2);
    assert_eq!(
        produce_codes(first),
        [(0, 6), (1, 6)],
        "the broker may have seen part of it: a retriable error"
    );
    let second = within("the queued produce", sink.recv(&ctx)).await.unwrap();
    assert_eq!(second.correlation_id(), 3);
    assert_eq!(
        produce_codes(second),
        [(0, 0), (1, 0)],
        "never written: sent again on a new connection and answered by the broker"
    );
    assert_eq!(sink.pending(), 0);
}

/// A ShareFetch (KIP-932) in a share session the client never opened is
/// answered by Sluice itself with SHARE_SESSION_NOT_FOUND, as a broker
/// answers it (the client then opens one at epoch 0); a version Sluice does
/// not offer closes the client, as Kafka closes a client using a version it
/// does not offer.
#[tokio::test]
async fn a_share_fetch_outside_its_session_is_answered_and_an_unoffered_version_closes() {
    let broker = FakeBroker::start().await;
    let (_builder, mut sink, ctx) = client(broker.addr);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    let version = ApiKey::ShareFetch.valid_versions().max;
    let body = RequestKind::ShareFetch(ShareFetchRequest::default().with_share_session_epoch(1));
    let share_fetch = client_request(ApiKey::ShareFetch, version, 2, body);
    let answer = exchange(&mut *sink, &ctx, share_fetch, "share fetch").await;
    let ResponseKind::ShareFetch(answer) = answer.into_body().unwrap() else {
        panic!("not a ShareFetch answer")
    };
    assert_eq!(
        answer.error_code,
        sluice_cluster::error_codes::SHARE_SESSION_NOT_FOUND
    );
    // The same request, its header naming the next version.
    let body = RequestKind::ShareFetch(ShareFetchRequest::default());
    let mut buf = BytesMut::new();
    Request::from_body(ApiKey::ShareFetch, version, 3, Some("test".into()), body)
        .encode(&mut buf)
        .unwrap();
    let mut frame = buf.split_off(4);
    frame[2..4].copy_from_slice(&(version + 1).to_be_bytes());
    let too_new = Request::parse(frame).unwrap();
    let refused = within("share fetch", sink.send(too_new, &ctx)).await;
    assert!(
        matches!(
            refused,
            Err(sluice_chain::ChainError::UnsupportedVersion {
                api: ApiKey::ShareFetch,
                ..
            })
        ),
        "the client is closed: {refused:?}"
    );
}

/// A Fetch (v12) of both partitions of `t` opening a client session.
fn session_fetch(id: i32) -> Request {
    let partitions = (0..2)
        .map(|p| {
            fetch_request::FetchPartition::default()
                .with_partition(p)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let body = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_session_epoch(0)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic())
                .with_partitions(partitions),
        ]);
    client_request(ApiKey::Fetch, 12, id, RequestKind::Fetch(body))
}

/// A client that goes leaves no fetch session behind at its broker: its
/// session slot is given back (a final (S, -1) fetch), not held until the
/// broker evicts it.
#[tokio::test]
async fn a_client_that_goes_closes_its_broker_fetch_sessions() {
    let broker = FakeBroker::start().await;
    let (builder, mut sink, ctx) = client(broker.addr);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    exchange(&mut *sink, &ctx, session_fetch(2), "fetch").await;
    assert_eq!(
        broker.fetches.lock().unwrap().first(),
        Some(&(0, 0)),
        "Sluice opened a session with the broker"
    );
    drop(sink);
    within("the session's close", async {
        while !broker.fetches.lock().unwrap().contains(&(FAKE_SESSION, -1)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    drop(builder);
}
