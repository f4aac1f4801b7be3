//! The metrics a source records for its connections.

use std::sync::Arc;

use sluice_metrics::names;
use tokio::sync::Semaphore;

use crate::support::certs::Pki;
use crate::support::client::{TestClient, api_versions};
use crate::support::harness::{source_config, start};
use crate::support::metrics::{value, wait_for};
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
