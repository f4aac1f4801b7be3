//! The connection limit, soft and hard.

use std::time::Duration;

use crate::support::client::{Read, TestClient};
use crate::support::harness::{WAIT, source_config, start};

/// Long enough for a served connection to answer on loopback many times over.
const NOT_SERVED: Duration = Duration::from_millis(300);

#[tokio::test]
async fn soft_limit_holds_new_clients_until_a_slot_frees() {
    let mut cfg = source_config();
    cfg.connection_limit = Some(1);
    let source = start(cfg, None).await;
    let mut first = TestClient::connect(source.addr).await;
    first.round_trip(1).await;

    // The second client connects (the kernel's backlog takes it) but is not
    // served while the first holds the only slot.
    let mut second = TestClient::connect(source.addr).await;
    second.send(2).await;
    assert!(
        tokio::time::timeout(NOT_SERVED, second.read_unbounded())
            .await
            .is_err(),
        "a client over the soft limit was served or closed"
    );
    drop(first);
    assert_eq!(second.recv().await, 2);
    source.stop().await;
}

#[tokio::test]
async fn hard_limit_closes_new_clients_at_once() {
    let mut cfg = source_config();
    cfg.connection_limit = Some(1);
    cfg.hard_connection_limit = Some(true);
    let source = start(cfg, None).await;
    let mut first = TestClient::connect(source.addr).await;
    first.round_trip(1).await;

    let mut second = TestClient::connect(source.addr).await;
    second.send(2).await;
    second.expect_closed().await;
    first.round_trip(3).await;

    // Once the first client leaves, its slot is freed (asynchronously: retry
    // until a new client is served).
    drop(first);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut next = TestClient::connect(source.addr).await;
        next.send(4).await;
        match next.read().await {
            Read::Frame(4) => break,
            Read::Frame(other) => panic!("unexpected correlation id {other}"),
            Read::Closed => assert!(
                tokio::time::Instant::now() < deadline,
                "the slot of a closed connection was never freed"
            ),
        }
        // A short pause between attempts, not a synchronization.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    source.stop().await;
}
