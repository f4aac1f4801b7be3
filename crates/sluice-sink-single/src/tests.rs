//! `KafkaSinkSingle` tests: the address rewrites on real encoded responses
//! of every version, and the sink against a fake broker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;

use bytes::BytesMut;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use sluice_codec::kafka_protocol::messages::find_coordinator_response::Coordinator;
use sluice_codec::kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, DescribeClusterResponse, FindCoordinatorResponse,
    MetadataRequest, MetadataResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, Response, ResponseKind};
use tokio::io::AsyncWriteExt;

use super::rewrite::{AdvertisedAddress, rewrite_response};
use super::*;
use crate::test_support::{FakeBroker, context, parsed_response, request, within};
use sluice_error::ErrorClass;

const SLUICE: &str = "127.0.0.1:9192";

fn sluice() -> AdvertisedAddress {
    AdvertisedAddress::from_socket_addr(SLUICE.parse().unwrap())
}

fn host(s: &'static str) -> StrBytes {
    StrBytes::from_static_str(s)
}

/// Rewrites a raw response, re-encodes it and decodes what a client would read.
fn rewritten(api: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
    let mut response = parsed_response(api, version, &body);
    assert!(rewrite_response(&mut response, &sluice()).unwrap());
    let mut wire = BytesMut::new();
    response.encode(&mut wire).unwrap();
    let frame = wire.split_off(4);
    assert_eq!(frame[..4], 42i32.to_be_bytes(), "correlation id kept");
    Response::parse(frame, api, version)
        .unwrap()
        .into_body()
        .unwrap()
}

#[test]
fn metadata_brokers_point_at_sluice_in_every_version() {
    for version in 0..=13 {
        let brokers = vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(host("kafka-1"))
                .with_port(9092),
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(2))
                .with_host(host("kafka-2"))
                .with_port(9093),
        ];
        let body = ResponseKind::Metadata(MetadataResponse::default().with_brokers(brokers));
        let ResponseKind::Metadata(out) = rewritten(ApiKey::Metadata, version, body) else {
            panic!("not metadata");
        };
        let seen: Vec<_> = out
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.host.as_str().to_owned(), b.port))
            .collect();
        assert_eq!(
            seen,
            [(1, "127.0.0.1".into(), 9192), (2, "127.0.0.1".into(), 9192)],
            "metadata v{version}"
        );
    }
}

#[test]
fn find_coordinator_points_at_sluice_in_every_version() {
    for version in 0..=3 {
        let body = ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default()
                .with_node_id(BrokerId(3))
                .with_host(host("kafka-3"))
                .with_port(9094),
        );
        let ResponseKind::FindCoordinator(out) = rewritten(ApiKey::FindCoordinator, version, body)
        else {
            panic!("not find coordinator");
        };
        assert_eq!(
            (out.node_id.0, out.host.as_str(), out.port),
            (3, "127.0.0.1", 9192)
        );

        // Not found: left as sent.
        let body = ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        );
        let ResponseKind::FindCoordinator(out) = rewritten(ApiKey::FindCoordinator, version, body)
        else {
            panic!("not find coordinator");
        };
        assert_eq!((out.node_id.0, out.host.as_str(), out.port), (-1, "", -1));
    }
    for version in 4..=6 {
        let coordinators = vec![
            Coordinator::default()
                .with_key(host("group-a"))
                .with_node_id(BrokerId(3))
                .with_host(host("kafka-3"))
                .with_port(9094),
            Coordinator::default()
                .with_key(host("group-b"))
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        ];
        let body = ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(coordinators),
        );
        let ResponseKind::FindCoordinator(out) = rewritten(ApiKey::FindCoordinator, version, body)
        else {
            panic!("not find coordinator");
        };
        let seen: Vec<_> = out
            .coordinators
            .iter()
            .map(|c| {
                (
                    c.key.as_str().to_owned(),
                    c.host.as_str().to_owned(),
                    c.port,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("group-a".into(), "127.0.0.1".into(), 9192),
                ("group-b".into(), String::new(), -1)
            ],
            "find coordinator v{version}"
        );
    }
}

#[test]
fn describe_cluster_brokers_point_at_sluice_in_every_version() {
    for version in 0..=2 {
        let brokers = vec![
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(1))
                .with_host(host("kafka-1"))
                .with_port(9092),
        ];
        let body = ResponseKind::DescribeCluster(
            DescribeClusterResponse::default()
                .with_cluster_id(host("cluster"))
                .with_brokers(brokers),
        );
        let ResponseKind::DescribeCluster(out) = rewritten(ApiKey::DescribeCluster, version, body)
        else {
            panic!("not describe cluster");
        };
        assert_eq!(out.cluster_id.as_str(), "cluster");
        let b = &out.brokers[0];
        assert_eq!(
            (b.broker_id.0, b.host.as_str(), b.port),
            (1, "127.0.0.1", 9192)
        );
    }
}

#[test]
fn other_responses_stay_raw() {
    let body = ResponseKind::ApiVersions(ApiVersionsResponse::default());
    let mut response = parsed_response(ApiKey::ApiVersions, 3, &body);
    assert!(!rewrite_response(&mut response, &sluice()).unwrap());
    assert!(!response.is_dirty());
}

#[test]
fn advertised_address_unmaps_ipv4_in_ipv6() {
    let a = AdvertisedAddress::from_socket_addr("[::ffff:10.0.0.1]:9192".parse().unwrap());
    assert_eq!((a.host.as_str(), a.port), ("10.0.0.1", 9192));
    let a = AdvertisedAddress::from_socket_addr("[::1]:9192".parse().unwrap());
    assert_eq!(a.host.as_str(), "::1");
}

fn sink_config(destination: &str) -> KafkaSinkSingleConfig {
    KafkaSinkSingleConfig {
        name: None,
        destination_port: None,
        destination_address: Some(destination.to_owned()),
        connect_timeout_ms: 3000,
        read_timeout_secs: None,
        tls: None,
    }
}

#[test]
fn the_builder_resolves_the_destination() {
    let mut cfg = sink_config("kafka-1:9092");
    let b = KafkaSinkSingleBuilder::new(&cfg, "0.0.0.0:9192").unwrap();
    assert_eq!(b.destination(), &BrokerAddress::new("kafka-1", 9092));

    cfg.destination_address = None;
    cfg.destination_port = Some(9092);
    let b = KafkaSinkSingleBuilder::new(&cfg, "127.0.0.1:9192").unwrap();
    assert_eq!(b.destination(), &BrokerAddress::new("127.0.0.1", 9092));
    assert!(matches!(
        KafkaSinkSingleBuilder::new(&cfg, "nonsense"),
        Err(SinkSingleError::ListenAddr(_))
    ));

    cfg.destination_address = Some("kafka-1:9092".into());
    assert!(matches!(
        KafkaSinkSingleBuilder::new(&cfg, "127.0.0.1:9192"),
        Err(SinkSingleError::BothDestinations)
    ));
    cfg.destination_address = None;
    cfg.destination_port = None;
    assert!(matches!(
        KafkaSinkSingleBuilder::new(&cfg, "127.0.0.1:9192"),
        Err(SinkSingleError::NoDestination)
    ));
}

fn metadata_request(correlation_id: i32) -> sluice_codec::Request {
    request(
        ApiKey::Metadata,
        12,
        correlation_id,
        RequestKind::Metadata(MetadataRequest::default()),
    )
}

fn metadata_response() -> ResponseKind {
    ResponseKind::Metadata(MetadataResponse::default().with_brokers(vec![
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(host("kafka-1"))
            .with_port(9092),
    ]))
}

fn sink_for(broker: &FakeBroker) -> (Box<dyn Sink>, ConnectionContext) {
    let ctx = context(SLUICE.parse::<SocketAddr>().unwrap());
    let cfg = sink_config(&broker.address().host_port().to_string());
    let sink = KafkaSinkSingleBuilder::new(&cfg, SLUICE)
        .unwrap()
        .build(&ctx);
    (sink, ctx)
}

#[tokio::test]
async fn forwards_requests_and_rewrites_metadata() {
    let broker = FakeBroker::start().await;
    let (mut sink, ctx) = sink_for(&broker);
    let (sent, mut fake) = tokio::join!(sink.send(metadata_request(11), &ctx), broker.accept());
    sent.unwrap();
    assert_eq!(sink.pending(), 1);
    let req = fake.read_request().await;
    assert!(!req.is_dirty());

    // Not answered yet: recv pends, and giving up on it loses nothing.
    let early = tokio::time::timeout(Duration::from_millis(50), sink.recv(&ctx)).await;
    assert!(early.is_err(), "recv returned before the broker answered");
    assert_eq!(sink.pending(), 1);

    fake.respond(&req, &metadata_response()).await;
    let mut response = within("the metadata response", sink.recv(&ctx))
        .await
        .unwrap();
    assert_eq!(response.correlation_id(), 11);
    assert_eq!(sink.pending(), 0);
    let ResponseKind::Metadata(body) = response.body().unwrap() else {
        panic!("not metadata");
    };
    assert_eq!(
        (body.brokers[0].host.as_str(), body.brokers[0].port),
        ("127.0.0.1", 9192)
    );
}

#[tokio::test]
async fn a_broker_failure_reaches_recv_as_a_broker_error() {
    let broker = FakeBroker::start().await;
    let (mut sink, ctx) = sink_for(&broker);
    let (sent, mut fake) = tokio::join!(sink.send(metadata_request(1), &ctx), broker.accept());
    sent.unwrap();
    fake.read_request().await;
    within("the broker to shut down", fake.stream.shutdown())
        .await
        .unwrap();
    let err = within("the failure", sink.recv(&ctx)).await.unwrap_err();
    assert!(
        matches!(&err, ChainError::Broker(BrokerError::ClosedByBroker { .. })),
        "{err}"
    );
    assert!(err.retriable());
    assert_eq!(sink.pending(), 0);
}

#[tokio::test]
async fn a_connect_failure_is_a_broker_error_from_send() {
    let address = FakeBroker::start().await.address(); // dropped: nothing listens
    let ctx = context(SLUICE.parse().unwrap());
    let cfg = sink_config(&address.host_port().to_string());
    let mut sink = KafkaSinkSingleBuilder::new(&cfg, SLUICE)
        .unwrap()
        .build(&ctx);
    let err = sink.send(metadata_request(1), &ctx).await.unwrap_err();
    assert!(
        matches!(&err, ChainError::Broker(BrokerError::Connect { .. })),
        "{err}"
    );
    assert_eq!(sink.pending(), 0);
}

#[tokio::test]
async fn an_idle_close_by_the_broker_is_followed_by_a_reconnect() {
    let broker = FakeBroker::start().await;
    let ctx = context(SLUICE.parse().unwrap());
    let cfg = sink_config(&broker.address().host_port().to_string());
    let builder = KafkaSinkSingleBuilder::new(&cfg, SLUICE).unwrap();
    let mut sink = KafkaSinkSingle {
        name: builder.name.clone(),
        target: builder.target.clone(),
        connection: None,
        pending: VecDeque::new(),
    };
    let (sent, mut fake) = tokio::join!(sink.send(metadata_request(1), &ctx), broker.accept());
    sent.unwrap();
    let req = fake.read_request().await;
    fake.respond(&req, &metadata_response()).await;
    within("the first response", sink.recv(&ctx)).await.unwrap();

    drop(fake); // the broker closes the idle connection
    within("the sink to see the close", async {
        while !sink.connection.as_ref().unwrap().is_closed() {
            tokio::task::yield_now().await;
        }
    })
    .await;

    let (sent, mut fake) = tokio::join!(sink.send(metadata_request(2), &ctx), broker.accept());
    sent.unwrap();
    let req = fake.read_request().await;
    assert_eq!(req.correlation_id(), 0, "a fresh connection numbers from 0");
    fake.respond(&req, &metadata_response()).await;
    let response = within("the second response", sink.recv(&ctx))
        .await
        .unwrap();
    assert_eq!(response.correlation_id(), 2);
}
