//! Requests in, responses out, and bad clients closed without harming others.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::support::client::{TestClient, api_versions};
use crate::support::harness::{WAIT, source_config, start};
use crate::support::sink::FAILING_CLIENT_ID;

#[tokio::test]
async fn pipelined_requests_come_back_in_order() {
    let source = start(source_config(), None).await;
    let mut client = TestClient::connect(source.addr).await;
    let mut batch = Vec::new();
    for id in 0..200 {
        batch.extend_from_slice(&api_versions(1000 + id, b"test"));
    }
    client.send_raw(&batch).await;
    for id in 0..200 {
        assert_eq!(client.recv().await, 1000 + id);
    }
    // Negative and extreme ids are the client's business, passed through as is.
    for id in [i32::MIN, -1, 0, i32::MAX] {
        client.round_trip(id).await;
    }
    source.stop().await;
}

#[tokio::test]
async fn a_200_mib_length_prefix_closes_only_that_client() {
    let source = start(source_config(), None).await;
    let mut good = TestClient::connect(source.addr).await;
    good.round_trip(1).await;

    let mut bad = TestClient::connect(source.addr).await;
    bad.send_raw(&(200 * 1024 * 1024i32).to_be_bytes()).await;
    bad.expect_closed().await;

    good.round_trip(2).await;
    TestClient::connect(source.addr).await.round_trip(3).await;
    source.stop().await;
}

#[tokio::test]
async fn garbage_closes_only_that_client() {
    let source = start(source_config(), None).await;
    let mut good = TestClient::connect(source.addr).await;
    good.round_trip(1).await;
    let garbage: &[(&str, &[u8])] = &[
        ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("negative length", &[0xff, 0xff, 0xff, 0xfe]),
        (
            "unknown api key",
            &[0, 0, 0, 8, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1],
        ),
        ("truncated header", &[0, 0, 0, 3, 0, 18, 0]),
        (
            "bad client id length",
            &[0, 0, 0, 10, 0, 18, 0, 2, 0, 0, 0, 1, 0x80, 0],
        ),
    ];
    for (what, bytes) in garbage {
        let mut bad = TestClient::connect(source.addr).await;
        bad.send_raw(bytes).await;
        tokio::time::timeout(WAIT, bad.expect_closed())
            .await
            .unwrap_or_else(|_| panic!("{what}: not closed"));
        good.round_trip(2).await;
    }
    source.stop().await;
}

#[tokio::test]
async fn a_chain_error_closes_only_that_client() {
    let source = start(source_config(), None).await;
    let mut good = TestClient::connect(source.addr).await;
    good.round_trip(1).await;
    let mut bad = TestClient::connect(source.addr).await;
    bad.round_trip(10).await;
    bad.send_raw(&api_versions(11, FAILING_CLIENT_ID)).await;
    bad.expect_closed().await;
    good.round_trip(2).await;
    source.stop().await;
}

#[tokio::test]
async fn a_request_split_across_writes_is_reassembled() {
    let source = start(source_config(), None).await;
    let mut client = TestClient::connect(source.addr).await;
    let request = api_versions(7, b"test");
    for byte in request.iter() {
        client.stream.write_all(&[*byte]).await.unwrap();
        client.stream.flush().await.unwrap();
    }
    assert_eq!(client.recv().await, 7);
    source.stop().await;
}

#[tokio::test]
async fn max_frame_bytes_is_configurable() {
    let mut cfg = source_config();
    cfg.max_frame_bytes = Some(64);
    let source = start(cfg, None).await;
    let mut client = TestClient::connect(source.addr).await;
    client.round_trip(1).await;
    client.send_raw(&65i32.to_be_bytes()).await;
    client.expect_closed().await;
    source.stop().await;
}

#[tokio::test]
async fn an_idle_client_is_closed() {
    let mut cfg = source_config();
    cfg.idle_timeout_secs = Some(1);
    let source = start(cfg, None).await;
    let mut client = TestClient::connect(source.addr).await;
    client.round_trip(1).await;
    let answered = tokio::time::Instant::now();
    client.expect_closed().await;
    assert!(
        answered.elapsed() >= Duration::from_millis(900),
        "closed after {:?}, before the idle timeout",
        answered.elapsed()
    );
    source.stop().await;
}
