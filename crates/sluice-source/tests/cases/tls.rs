//! TLS and mTLS listeners.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::support::certs::{CLIENT_CN, Pki};
use crate::support::client::TestClient;
use crate::support::harness::{WAIT, source_config, start};

/// Connects over TLS; `None` if the handshake itself failed.
async fn tls_connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Option<TestClient<TlsStream<TcpStream>>> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let handshake = TlsConnector::from(config).connect(name, tcp);
    match tokio::time::timeout(WAIT, handshake)
        .await
        .expect("handshake timed out")
    {
        Ok(stream) => Some(TestClient::new(stream)),
        Err(_) => None,
    }
}

/// Asserts that a client is refused: the handshake fails, or (TLS 1.3, where
/// the client finishes before the server checked its certificate) the first
/// read fails.
async fn assert_refused(addr: SocketAddr, config: Arc<ClientConfig>) {
    if let Some(mut client) = tls_connect(addr, config).await {
        client.send(1).await;
        client.expect_closed().await;
    }
}

#[tokio::test]
async fn tls_listener_serves_a_tls_client() {
    let pki = Pki::new();
    let mut cfg = source_config();
    cfg.tls = Some(pki.acceptor_config(false));
    let source = start(cfg, None).await;
    let mut client = tls_connect(source.addr, pki.client_config(None))
        .await
        .expect("handshake failed");
    for id in 1..=20 {
        client.round_trip(id).await;
    }
    assert_eq!(source.probe.contexts()[0].tls_principal, None);

    // A plaintext Kafka client is closed, and the listener carries on.
    let mut plain = TestClient::connect(source.addr).await;
    plain.send(1).await;
    plain.expect_closed().await;
    client.round_trip(21).await;
    source.stop().await;
}

#[tokio::test]
async fn mtls_requires_a_certificate_from_the_ca() {
    let pki = Pki::new();
    let mut cfg = source_config();
    cfg.tls = Some(pki.acceptor_config(true));
    let source = start(cfg, None).await;

    assert_refused(source.addr, pki.client_config(None)).await;
    assert_refused(source.addr, pki.client_config(Some(&pki.other_client))).await;
    assert!(
        source.probe.contexts().is_empty(),
        "a chain was built for a refused client"
    );

    let mut good = tls_connect(source.addr, pki.client_config(Some(&pki.client)))
        .await
        .expect("handshake failed");
    good.round_trip(1).await;
    let contexts = source.probe.contexts();
    assert_eq!(contexts.len(), 1);
    assert_eq!(contexts[0].tls_principal.as_deref(), Some(CLIENT_CN));

    // A refused client does not disturb an established one.
    assert_refused(source.addr, pki.client_config(None)).await;
    good.round_trip(2).await;
    source.stop().await;
}
