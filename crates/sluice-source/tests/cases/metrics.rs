//! The metrics a source records for its connections.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::{
    DescribeGroupsRequest, ListGroupsRequest, ProduceRequest,
};
use sluice_codec::{ApiKey, Request, RequestKind};
use sluice_metrics::names;
use tokio::sync::Semaphore;

use crate::support::certs::Pki;
use crate::support::client::{TestClient, api_versions};
use crate::support::harness::{WAIT, source_config, start};
use crate::support::metrics::{samples, value, wait_for};
use crate::support::sink::PANIC_CLIENT_ID;

#[tokio::test]
async fn connections_are_counted_open_total_and_closed_on_error() {
    let source = start(source_config(), None).await;
    let src: &[(&str, &str)] = &[("source", &source.name)];
    let mut a = TestClient::connect(source.addr).await;
    a.round_trip(1).await;
    let mut b = TestClient::connect(source.addr).await;
    b.round_trip(2).await;
    wait_for(names::CLIENT_CONNECTIONS_OPEN, src, 2.0).await;
    assert_eq!(value(names::CLIENT_CONNECTIONS_TOTAL, src), 2.0);
    assert!(value(names::REQUESTS, &[("api", "ApiVersions")]) >= 2.0);
    assert!(value(names::RESPONSES, &[("api", "ApiVersions")]) >= 2.0);
    assert!(value(names::BYTES_IN, &[]) > 0.0);
    assert!(value(names::BYTES_OUT, &[]) > 0.0);

    b.send_raw(&(200 * 1024 * 1024i32).to_be_bytes()).await;
    b.expect_closed().await;
    wait_for(
        names::CLIENT_CONNECTIONS_CLOSED_ON_ERROR,
        &[("source", &source.name), ("side", "client")],
        1.0,
    )
    .await;
    assert!(value(names::ERRORS, &[("side", "client"), ("retriable", "false")]) >= 1.0);
    drop(a);
    wait_for(names::CLIENT_CONNECTIONS_OPEN, src, 0.0).await;
    source.stop().await;
}

#[tokio::test]
async fn rejections_are_counted_by_reason() {
    let mut cfg = source_config();
    cfg.connection_limit = Some(1);
    cfg.hard_connection_limit = Some(true);
    let source = start(cfg, Some(Arc::new(Semaphore::new(0)))).await;
    let _first = TestClient::connect(source.addr).await;
    let mut second = TestClient::connect(source.addr).await;
    second.expect_closed().await;
    wait_for(
        names::CLIENT_CONNECTIONS_REJECTED,
        &[("source", &source.name), ("reason", "limit")],
        1.0,
    )
    .await;
    source.stop().await;

    let pki = Pki::new();
    let mut cfg = source_config();
    cfg.tls = Some(pki.acceptor_config(true));
    let source = start(cfg, None).await;
    let mut plain = TestClient::connect(source.addr).await;
    plain.send(1).await;
    plain.expect_closed().await;
    wait_for(
        names::CLIENT_CONNECTIONS_REJECTED,
        &[("source", &source.name), ("reason", "tls")],
        1.0,
    )
    .await;
    source.stop().await;
}

#[tokio::test]
async fn a_panicking_connection_task_closes_only_its_connection() {
    let source = start(source_config(), None).await;
    let src: &[(&str, &str)] = &[("source", &source.name)];
    let mut good = TestClient::connect(source.addr).await;
    good.round_trip(1).await;

    let mut bad = TestClient::connect(source.addr).await;
    bad.send_raw(&api_versions(2, PANIC_CLIENT_ID)).await;
    bad.expect_closed().await;
    wait_for(names::CLIENT_CONNECTION_PANICS, src, 1.0).await;
    wait_for(names::CLIENT_CONNECTIONS_OPEN, src, 1.0).await;

    good.round_trip(3).await;
    let mut after = TestClient::connect(source.addr).await;
    after.round_trip(4).await;
    source.stop().await;
}

/// A length-prefixed request of `api` (the test sink answers any, with an
/// ApiVersions body of the same version: so versions 0 to 4).
fn frame(api: ApiKey, version: i16, correlation_id: i32, body: RequestKind) -> BytesMut {
    let request = Request::from_body(
        api,
        version,
        correlation_id,
        Some(Bytes::from_static(b"test")),
        body,
    );
    let mut buf = BytesMut::new();
    request.encode(&mut buf).unwrap();
    buf
}

/// Each answer is timed from when its request was taken to when it was
/// written, under its request's api: answers are paired with requests in
/// order, and a request owed no answer (acks=0) takes no turn. (APIs no
/// other test here sends, as the histogram is labelled by api only.)
#[tokio::test]
async fn answers_are_timed_from_request_to_written_answer_by_api() {
    const HELD: Duration = Duration::from_millis(300);
    let gate = Arc::new(Semaphore::new(0));
    let source = start(source_config(), Some(Arc::clone(&gate))).await;
    let mut client = TestClient::connect(source.addr).await;
    let list = RequestKind::ListGroups(ListGroupsRequest::default());
    client
        .send_raw(&frame(ApiKey::ListGroups, 4, 1, list))
        .await;
    source.probe.wait_sent(1).await;
    // The time being measured: the first answer is held this long.
    tokio::time::sleep(HELD).await;
    let acks_zero = RequestKind::Produce(ProduceRequest::default().with_acks(0));
    client
        .send_raw(&frame(ApiKey::Produce, 9, 2, acks_zero))
        .await;
    let describe = RequestKind::DescribeGroups(DescribeGroupsRequest::default());
    client
        .send_raw(&frame(ApiKey::DescribeGroups, 3, 3, describe))
        .await;
    source.probe.wait_sent(3).await;
    gate.add_permits(2);
    assert_eq!(client.recv().await, 1);
    assert_eq!(client.recv().await, 3);

    let took = names::CLIENT_REQUEST_DURATION;
    let deadline = tokio::time::Instant::now() + WAIT;
    let (list, describe) = loop {
        let list = samples(took, &[("api", "ListGroups")]);
        let describe = samples(took, &[("api", "DescribeGroups")]);
        if list.len() == 1 && describe.len() == 1 {
            break (list[0], describe[0]);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "one sample each within {WAIT:?}: {list:?} {describe:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(list >= HELD.as_secs_f64(), "ListGroups took {list} s");
    assert!(
        describe < list,
        "DescribeGroups, asked {HELD:?} later, took less: {describe} s, {list} s"
    );
    assert!(
        samples(took, &[("api", "Produce")]).is_empty(),
        "an acks=0 produce is owed no answer and is not timed"
    );
    source.stop().await;
}
