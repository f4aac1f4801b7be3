//! Driver tests against a scripted fake broker (`sluice-broker`'s
//! [`FakeBroker::scripted`]: a one-broker cluster, broker id 1, leading
//! partitions 0 and 1 of topic `t`): a broker that fails mid-way is
//! answered with a retriable Kafka error, the client connection stays
//! usable, responses keep request order, and acks=0 owes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use sluice_broker::test_support::{FETCH_SESSION, FakeBroker, Script, TOPIC, within};
use sluice_chain::{ConnectionContext, Sink, SinkBuilder};
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Request, Response, ResponseKind};

use super::KafkaSinkClusterBuilder;

mod auth;
mod leave;
mod shown;
mod stalled;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// The scripted one-broker cluster of these tests, without authentication.
async fn fake_broker() -> FakeBroker {
    FakeBroker::scripted(Script::default()).await
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
    let broker = fake_broker().await;
    let (_builder, mut sink, ctx) = client(broker.addr());
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
    let broker = fake_broker().await;
    let (_builder, mut sink, ctx) = client(broker.addr());
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;

    broker.fail_produce(true);
    let answer = exchange(&mut *sink, &ctx, produce(2, -1), "synthesized produce").await;
    assert_eq!(answer.correlation_id(), 2);
    assert_eq!(
        produce_codes(answer),
        [(0, 6), (1, 6)],
        "NOT_LEADER_OR_FOLLOWER for every partition of the failed part"
    );

    // The client connection is still usable: the next request reconnects.
    broker.fail_produce(false);
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
    let broker = fake_broker().await;
    let builder = builder(broker.addr());
    let mut sink = builder.build_cluster(&ctx());
    let ctx = ctx();
    exchange(&mut sink, &ctx, metadata(1), "metadata").await;
    let target = crate::target::Target::Broker(sluice_cluster::topology::BrokerId(1));
    let address = sink
        .io
        .pool
        .address(target)
        .expect("the bootstrap connection serves broker 1");
    assert_eq!(address.id, Some(1), "{address}");
    assert_eq!(address.metric_label(), "1");
}

#[tokio::test]
async fn a_request_its_failed_connection_never_wrote_is_sent_again_in_order() {
    let broker = fake_broker().await;
    let (_builder, mut sink, ctx) = client(broker.addr());
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;

    // A produce larger than the socket buffers: the connection is still
    // writing it when the broker resets the connection, and the next
    // produce waits in the connection's queue, never written.
    broker.stall().next.store(true, Ordering::SeqCst);
    let big = bytes::Bytes::from(vec![0u8; 16 * 1024 * 1024]);
    send(&mut *sink, &ctx, produce_records(2, -1, big)).await;
    within(
        "the broker to stop reading",
        broker.stall().stalled.notified(),
    )
    .await;
    send(&mut *sink, &ctx, produce(3, -1)).await;
    broker.stall().release.notify_one();

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
    let broker = fake_broker().await;
    let (_builder, mut sink, ctx) = client(broker.addr());
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
    let broker = fake_broker().await;
    let (builder, mut sink, ctx) = client(broker.addr());
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    exchange(&mut *sink, &ctx, session_fetch(2), "fetch").await;
    assert_eq!(
        broker.seen(|s| s.fetches.first().copied()),
        Some((0, 0)),
        "Sluice opened a session with the broker"
    );
    drop(sink);
    within("the session's close", async {
        while !broker.seen(|s| s.fetches.contains(&(FETCH_SESSION, -1))) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    drop(builder);
}
