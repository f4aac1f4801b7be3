//! TLS and mTLS listeners.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use rustls_pki_types::pem::PemObject;
use sluice_tls::reload::ReloadError;
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

/// The leaf certificate the server presented on `client`'s connection.
fn server_certificate(client: &TestClient<TlsStream<TcpStream>>) -> Vec<u8> {
    let (_, session) = client.stream.get_ref();
    session.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn a_reload_serves_new_clients_the_new_certificate_and_keeps_open_connections() {
    let pki = Pki::new();
    let mut cfg = source_config();
    cfg.tls = Some(pki.acceptor_config(false));
    let source = start(cfg, None).await;
    let reload = source
        .tls_reload
        .clone()
        .expect("a TLS listener is reloadable");
    let mut open = tls_connect(source.addr, pki.client_config(None))
        .await
        .expect("handshake failed");
    open.round_trip(1).await;
    let first = server_certificate(&open);

    let next = pki.new_server();
    pki.replace_server(&next.cert, &next.key);
    reload.reload().expect("a good certificate reloads");
    let mut fresh = tls_connect(source.addr, pki.client_config(None))
        .await
        .expect("handshake with the new certificate");
    fresh.round_trip(1).await;
    let second = server_certificate(&fresh);
    assert_ne!(first, second, "a new client gets the new certificate");
    let expected = rustls_pki_types::CertificateDer::pem_slice_iter(next.cert.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(second, expected.to_vec());
    for id in 2..=5 {
        open.round_trip(id).await;
    }
    assert_eq!(
        server_certificate(&open),
        first,
        "the open connection is untouched"
    );

    // A key that does not match: refused, naming the files; the second
    // certificate stays in use, and both connections go on.
    let other = pki.new_server();
    pki.replace_server(&next.cert, &other.key);
    let e = reload.reload().expect_err("a mismatched key is refused");
    assert!(matches!(e, ReloadError::Build(_)), "{e}");
    assert!(e.to_string().contains("server.pem"), "{e}");
    let mut after = tls_connect(source.addr, pki.client_config(None))
        .await
        .expect("the certificate in use still serves");
    after.round_trip(1).await;
    assert_eq!(server_certificate(&after), second);
    open.round_trip(6).await;
    fresh.round_trip(2).await;
    source.stop().await;
}
