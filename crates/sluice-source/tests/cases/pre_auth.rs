//! Before authentication: the unauthenticated cap and the frame limit, over
//! real sockets, with a sink that authenticates clients.

use std::time::Duration;

use crate::support::client::{Read, TestClient, api_versions};
use crate::support::harness::{WAIT, source_config, start_authenticating};
use crate::support::metrics;
use crate::support::sink::AUTH_CLIENT_ID;

#[tokio::test]
async fn connections_over_the_unauthenticated_cap_are_closed_at_once() {
    let mut cfg = source_config();
    cfg.unauthenticated_connection_limit = Some(2);
    let name = cfg.name.clone();
    let source = start_authenticating(cfg).await;
    let mut idle = Vec::new();
    for id in 0..2 {
        let mut client = TestClient::connect(source.addr).await;
        client.round_trip(id).await;
        idle.push(client);
    }
    let mut excess = TestClient::connect(source.addr).await;
    excess.send(9).await;
    excess.expect_closed().await;
    let labels = [
        ("source", name.as_str()),
        ("reason", "unauthenticated_limit"),
    ];
    metrics::wait_for("sluice_client_connections_rejected_total", &labels, 1.0).await;

    // Authenticating frees a slot at once: a new client is served.
    let mut first = idle.remove(0);
    first.send_raw(&api_versions(10, AUTH_CLIENT_ID)).await;
    assert_eq!(first.recv().await, 10);
    let mut next = TestClient::connect(source.addr).await;
    next.round_trip(11).await;
    // The authenticated one keeps working.
    first.round_trip(12).await;
    source.stop().await;
}

#[tokio::test]
async fn one_address_holds_only_its_share_of_the_unauthenticated_cap() {
    let mut cfg = source_config();
    cfg.unauthenticated_connection_limit = Some(8);
    cfg.unauthenticated_connection_limit_per_address = Some(3);
    let name = cfg.name.clone();
    let source = start_authenticating(cfg).await;
    let flooder: std::net::IpAddr = [127, 0, 0, 2].into();
    // One address keeps re-opening sockets that never authenticate.
    let mut held = Vec::new();
    for id in 0..3 {
        let mut client = TestClient::connect_from(source.addr, flooder).await;
        client.round_trip(id).await;
        held.push(client);
    }
    for id in 0..3 {
        let mut excess = TestClient::connect_from(source.addr, flooder).await;
        excess.send(10 + id).await;
        excess.expect_closed().await;
    }
    let labels = [
        ("source", name.as_str()),
        ("reason", "unauthenticated_address_limit"),
    ];
    metrics::wait_for("sluice_client_connections_rejected_total", &labels, 3.0).await;

    // Other addresses still get in, each up to its share.
    let mut others = Vec::new();
    for id in 0..3 {
        let mut client = TestClient::connect(source.addr).await;
        client.round_trip(20 + id).await;
        others.push(client);
    }
    // A slot the flooder gives back is its own again.
    drop(held.pop());
    // (The slot returns once the server has seen the close: a bounded poll.)
    let mut again = None;
    for attempt in 0..100 {
        let mut client = TestClient::connect_from(source.addr, flooder).await;
        client.send(30 + attempt).await;
        match client.read().await {
            Read::Frame(id) => {
                assert_eq!(id, 30 + attempt);
                again = Some(client);
                break;
            }
            Read::Closed => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(
        again.is_some(),
        "the freed slot of the address is usable again"
    );
    for client in &mut held {
        client.round_trip(40).await;
    }
    source.stop().await;
}

#[tokio::test]
async fn a_large_frame_before_authentication_is_refused_and_after_it_accepted() {
    let cfg = source_config();
    let source = start_authenticating(cfg).await;
    // 1 MiB announced before authentication: closed without sending it all.
    let mut early = TestClient::connect(source.addr).await;
    early.send_raw(&(1024 * 1024i32).to_be_bytes()).await;
    early.expect_closed().await;

    let mut client = TestClient::connect(source.addr).await;
    client.send_raw(&api_versions(1, AUTH_CLIENT_ID)).await;
    assert_eq!(client.recv().await, 1);
    let mut big = api_versions(2, b"test");
    big.resize(1024 * 1024 + 4, 0);
    big[..4].copy_from_slice(&(1024 * 1024i32).to_be_bytes());
    client.send_raw(&big).await;
    assert_eq!(client.recv().await, 2);
    source.stop().await;
}

#[tokio::test]
async fn a_client_that_never_authenticates_is_closed_at_the_deadline() {
    let mut cfg = source_config();
    cfg.authentication_timeout_secs = Some(1);
    let source = start_authenticating(cfg).await;
    let mut client = TestClient::connect(source.addr).await;
    client.round_trip(1).await;
    let start = tokio::time::Instant::now();
    client.expect_closed().await;
    assert!(
        start.elapsed() < WAIT && start.elapsed() >= Duration::from_millis(500),
        "closed after {:?}",
        start.elapsed()
    );
    source.stop().await;
}
