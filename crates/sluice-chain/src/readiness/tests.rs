//! The readiness rule, and the probe against a fake broker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, MetadataResponse, SaslHandshakeResponse,
};
use sluice_codec::{ApiKey, ResponseKind};

use super::probe::Prober;
use super::*;
use crate::test_support::{FakeBroker, FakeConn};

fn round(states: &[BrokerState]) -> Round {
    Round {
        at: Instant::now(),
        brokers: states
            .iter()
            .enumerate()
            .map(|(i, state)| BrokerProbe {
                address: format!("127.0.0.1:{}", 9092 + i),
                state: state.clone(),
            })
            .collect(),
    }
}

fn down(why: &str) -> BrokerState {
    BrokerState::Unreachable(why.to_owned())
}

#[test]
fn ready_needs_a_reachable_broker_and_metadata() {
    let now = Instant::now();
    let v = assess(None, 0, now);
    assert!(!v.ready && v.reason.contains("no readiness probe"), "{v:?}");

    let all_down = round(&[down("connection refused"), down("connection refused")]);
    let v = assess(Some(&all_down), 3, now);
    assert!(!v.ready, "every broker down: not ready even with a view");
    assert!(
        v.reason
            .starts_with("no broker reachable (127.0.0.1:9092: connection refused; 127.0.0.1:9093"),
        "{v:?}"
    );

    let one_up = round(&[
        down("connection refused"),
        BrokerState::Metadata { brokers: 3 },
    ]);
    let v = assess(Some(&one_up), 0, now);
    assert!(v.ready, "{v:?}");
    assert_eq!(
        v.reason,
        "1 of 2 broker(s) reachable, metadata lists 3 broker(s)"
    );

    let no_metadata = round(&[BrokerState::NoMetadata("timed out".to_owned())]);
    let v = assess(Some(&no_metadata), 0, now);
    assert!(!v.ready, "reachable without metadata: not ready");
    assert!(
        v.reason
            .contains("metadata is not loaded (127.0.0.1:9092: timed out)"),
        "{v:?}"
    );
    let v = assess(Some(&no_metadata), 3, now);
    assert!(v.ready, "the sink's own view holds brokers: {v:?}");
    assert!(v.reason.contains("loaded by clients"), "{v:?}");

    let sasl = round(&[BrokerState::AuthenticationRequired]);
    let v = assess(Some(&sasl), 0, now);
    assert!(
        v.ready,
        "SASL listeners: reachable is all Sluice can prove: {v:?}"
    );
    assert!(v.reason.contains("require SASL"), "{v:?}");

    let empty = round(&[]);
    assert!(!assess(Some(&empty), 0, now).ready);
}

#[test]
fn a_stale_round_is_not_ready() {
    let fresh = round(&[BrokerState::Metadata { brokers: 1 }]);
    let later = fresh.at + STALE_AFTER + Duration::from_secs(1);
    let v = assess(Some(&fresh), 0, later);
    assert!(!v.ready && v.reason.contains("ended 61s ago"), "{v:?}");
}

#[test]
fn reasons_stay_on_one_line_and_short() {
    let many: Vec<BrokerState> = (0..5).map(|i| down(&format!("line {i}\nmore"))).collect();
    let v = assess(Some(&round(&many)), 0, Instant::now());
    assert!(!v.reason.contains('\n'), "{v:?}");
    assert!(v.reason.ends_with("; 2 more)"), "{v:?}");
}

/// Probe targets: one fake broker, no TLS.
struct One(BrokerAddress);

impl ProbeTargets for One {
    fn candidates(&self) -> Vec<BrokerAddress> {
        vec![self.0.clone(), self.0.clone()]
    }

    fn options_for(&self, _: &BrokerAddress) -> Result<BrokerConnectOptions, BrokerError> {
        Ok(BrokerConnectOptions::new(Duration::from_secs(5)))
    }
}

fn versions() -> ResponseKind {
    ResponseKind::ApiVersions(ApiVersionsResponse::default().with_api_keys(vec![
        ApiVersion::default()
            .with_api_key(ApiKey::Metadata as i16)
            .with_min_version(0)
            .with_max_version(9),
    ]))
}

fn metadata(brokers: i32) -> ResponseKind {
    ResponseKind::Metadata(
        MetadataResponse::default().with_brokers(
            (0..brokers)
                .map(|i| MetadataResponseBroker::default().with_node_id(BrokerId(i)))
                .collect(),
        ),
    )
}

/// Answers the probe's ApiVersions and SaslHandshake with `sasl_error`.
async fn handshake(conn: &mut FakeConn, sasl_error: i16) {
    let request = conn.read_request().await;
    assert_eq!(request.api_key(), ApiKey::ApiVersions);
    conn.respond(&request, &versions()).await;
    let request = conn.read_request().await;
    assert_eq!(request.api_key(), ApiKey::SaslHandshake);
    let answer = SaslHandshakeResponse::default().with_error_code(sasl_error);
    conn.respond(&request, &ResponseKind::SaslHandshake(answer))
        .await;
}

#[tokio::test]
async fn a_broker_without_sasl_answers_metadata_on_a_fresh_connection_each_round() {
    let broker = FakeBroker::start().await;
    let targets = One(broker.address());
    let mut prober = Prober::default();
    let serve = async {
        let mut first = broker.accept().await;
        handshake(&mut first, ILLEGAL_SASL_STATE_FOR_TESTS).await;
        let request = first.read_request().await;
        assert_eq!(request.api_key(), ApiKey::Metadata);
        assert_eq!(request.api_version(), 9, "the broker's newest, up to 12");
        first.respond(&request, &metadata(3)).await;
        // The next round: a new connection, no SaslHandshake (known now).
        let mut second = broker.accept().await;
        let request = second.read_request().await;
        assert_eq!(request.api_key(), ApiKey::ApiVersions);
        second.respond(&request, &versions()).await;
        let request = second.read_request().await;
        assert_eq!(request.api_key(), ApiKey::Metadata);
        second.respond(&request, &metadata(2)).await;
        (first, second)
    };
    let probes = async {
        let first = prober.round(&targets).await;
        let second = prober.round(&targets).await;
        (first, second)
    };
    let (mut conns, (first, second)) = tokio::join!(serve, probes);
    assert_eq!(first.brokers.len(), 1, "candidates are deduplicated");
    assert_eq!(first.brokers[0].state, BrokerState::Metadata { brokers: 3 });
    assert_eq!(
        second.brokers[0].state,
        BrokerState::Metadata { brokers: 2 }
    );
    // Each round closed its connection.
    for conn in [&mut conns.0, &mut conns.1] {
        let mut byte = [0u8; 1];
        let read = crate::test_support::within(
            "the probe to close its connection",
            tokio::io::AsyncReadExt::read(&mut conn.stream, &mut byte),
        )
        .await;
        assert!(matches!(read, Ok(0)), "{read:?}");
    }
}

#[tokio::test]
async fn a_sasl_listener_is_asked_nothing_but_api_versions_after_the_first_round() {
    let broker = FakeBroker::start().await;
    let targets = One(broker.address());
    let mut prober = Prober::default();
    let serve = async {
        let mut conn = broker.accept().await;
        handshake(&mut conn, 0).await;
        let mut again = broker.accept().await;
        let request = again.read_request().await;
        assert_eq!(request.api_key(), ApiKey::ApiVersions);
        again.respond(&request, &versions()).await;
        (conn, again)
    };
    let probes = async { (prober.round(&targets).await, prober.round(&targets).await) };
    let (_conns, (first, second)) = tokio::join!(serve, probes);
    assert_eq!(first.brokers[0].state, BrokerState::AuthenticationRequired);
    assert_eq!(second.brokers[0].state, BrokerState::AuthenticationRequired);
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    let address = {
        let broker = FakeBroker::start().await;
        broker.address()
    };
    let mut prober = Prober::default();
    let round = prober.round(&One(address)).await;
    assert!(
        matches!(&round.brokers[0].state, BrokerState::Unreachable(why) if why.contains("cannot connect")),
        "{round:?}"
    );
    assert!(!assess(Some(&round), 0, Instant::now()).ready);
}

/// Kafka's `ILLEGAL_SASL_STATE`, as a broker without SASL answers.
const ILLEGAL_SASL_STATE_FOR_TESTS: i16 =
    sluice_codec::kafka_protocol::error::ResponseError::IllegalSaslState.code();
