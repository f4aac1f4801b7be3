//! Graceful shutdown: stop accepting, drain what is owed, then close.

use std::sync::Arc;
use std::time::Duration;

use sluice_source::SourceOptions;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::support::client::TestClient;
use crate::support::harness::{WAIT, source_config, start, start_with};

#[tokio::test]
async fn responses_in_flight_are_written_before_close() {
    let gate = Arc::new(Semaphore::new(0));
    let source = start(source_config(), Some(Arc::clone(&gate))).await;
    let mut client = TestClient::connect(source.addr).await;
    let mut idle = TestClient::connect(source.addr).await;
    for id in 1..=5 {
        client.send(id).await;
    }
    source.probe.wait_sent(5).await;

    source.shutdown.cancel();
    // The idle connection owes nothing and closes at once.
    idle.expect_closed().await;
    // The listening socket closes: new connections are refused.
    let deadline = tokio::time::Instant::now() + WAIT;
    while TcpStream::connect(source.addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still accepting after shutdown"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A request sent after shutdown began is not forwarded.
    client.send(6).await;

    gate.add_permits(5);
    for id in 1..=5 {
        assert_eq!(client.recv().await, id);
    }
    client.expect_closed().await;
    source.join().await;
}

#[tokio::test]
async fn the_drain_timeout_bounds_shutdown() {
    let gate = Arc::new(Semaphore::new(0));
    let opts = SourceOptions {
        drain_timeout: Duration::from_millis(200),
        ..SourceOptions::default()
    };
    let source = start_with(source_config(), Some(Arc::clone(&gate)), opts).await;
    let mut client = TestClient::connect(source.addr).await;
    client.send(1).await;
    client.send(2).await;
    source.probe.wait_sent(2).await;
    let started = tokio::time::Instant::now();
    source.shutdown.cancel();
    client.expect_closed().await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    source.join().await;
}

/// How a node leaves: accepting stops first, the connections already open
/// go on being served until the shutdown token.
#[tokio::test]
async fn stop_accepting_closes_the_listener_and_keeps_serving_open_connections() {
    let stop_accepting = tokio_util::sync::CancellationToken::new();
    let opts = SourceOptions {
        stop_accepting: Some(stop_accepting.clone()),
        ..SourceOptions::default()
    };
    let source = start_with(source_config(), None, opts).await;
    let mut client = TestClient::connect(source.addr).await;
    client.send(1).await;
    assert_eq!(client.recv().await, 1);

    stop_accepting.cancel();
    let deadline = tokio::time::Instant::now() + WAIT;
    while TcpStream::connect(source.addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still accepting after accepting stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for id in 2..=4 {
        client.send(id).await;
        assert_eq!(client.recv().await, id, "the open connection is served");
    }
    assert_eq!(source.connections.open(), 1);

    let connections = source.connections.clone();
    source.shutdown.cancel();
    client.expect_closed().await;
    tokio::time::timeout(WAIT, connections.all_closed())
        .await
        .expect("every connection closed after shutdown");
    source.join().await;
}

#[tokio::test]
async fn run_returns_at_once_without_connections() {
    let source = start(source_config(), None).await;
    source.stop().await;
}

#[tokio::test]
async fn bind_errors_name_the_address() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut cfg = source_config();
    cfg.listen_addr = taken.local_addr().unwrap().to_string();
    let chain = Arc::new(sluice_chain::ChainBuilder::new(
        Vec::new(),
        Box::new(crate::support::sink::TestSinkBuilder::new(None)),
    ));
    let err = sluice_source::KafkaSource::bind(
        &cfg,
        chain,
        SourceOptions::default(),
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .expect_err("bound an address in use");
    let msg = err.to_string();
    assert!(msg.contains(&cfg.listen_addr), "{msg}");
    let prefix = format!("source {}: cannot listen on", cfg.name);
    assert!(msg.starts_with(&prefix), "{msg}");
}
