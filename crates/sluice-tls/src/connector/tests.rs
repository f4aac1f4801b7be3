//! TLS connector tests: a throwaway PKI (rcgen) and a rustls server that
//! plays a broker on a local port.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::server::WebPkiClientVerifier;
use sluice_codec::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::*;
use sluice_broker::test_support::{request, response_frame, within};
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerConnection, BrokerError};

/// A directory of PEM files for one test, removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    fn write(&self, name: &str, contents: &str) {
        std::fs::write(self.dir.join(name), contents).unwrap();
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca(cn: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

fn leaf(
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> (String, String) {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "test");
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// CA, other CA, a broker cert for 127.0.0.1, one for another name, and a client cert.
fn pki() -> Pki {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sluice-broker-tls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = Pki { dir };
    let (ca_pem, issuer) = ca("Test CA");
    pki.write("ca.pem", &ca_pem);
    let (other_pem, _) = ca("Other CA");
    pki.write("other-ca.pem", &other_pem);
    let files = [
        (
            "broker",
            leaf(
                &["127.0.0.1", "localhost"],
                ExtendedKeyUsagePurpose::ServerAuth,
                &issuer,
            ),
        ),
        (
            "misnamed",
            leaf(
                &["other.example"],
                ExtendedKeyUsagePurpose::ServerAuth,
                &issuer,
            ),
        ),
        (
            "client",
            leaf(&[], ExtendedKeyUsagePurpose::ClientAuth, &issuer),
        ),
    ];
    for (stem, (cert, key)) in files {
        pki.write(&format!("{stem}.pem"), &cert);
        pki.write(&format!("{stem}-key.pem"), &key);
    }
    pki
}

fn config(pki: &Pki, ca: &str, verify_hostname: bool, client: bool) -> TlsConnectorConfig {
    TlsConnectorConfig {
        certificate_authority_path: pki.path(ca),
        certificate_path: client.then(|| pki.path("client.pem")),
        private_key_path: client.then(|| pki.path("client-key.pem")),
        verify_hostname,
    }
}

/// A TLS broker that answers one ApiVersions request, using `stem`'s cert
/// and, with `require_client`, requiring a client cert signed by the CA.
async fn tls_broker(pki: &Pki, stem: &str, require_client: bool) -> BrokerAddress {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client {
        let roots = Arc::new(load_roots(Path::new(&pki.path("ca.pem"))).unwrap());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let server = builder
        .with_single_cert(
            load_certs(CERTIFICATE, Path::new(&pki.path(&format!("{stem}.pem")))).unwrap(),
            load_key(Path::new(&pki.path(&format!("{stem}-key.pem")))).unwrap(),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let Ok(mut tls) = acceptor.accept(tcp).await else {
            return;
        };
        let Ok(len) = tls.read_i32().await else {
            return;
        };
        let mut frame = vec![0u8; usize::try_from(len).unwrap()];
        tls.read_exact(&mut frame).await.unwrap();
        let correlation_id = i32::from_be_bytes(frame[4..8].try_into().unwrap());
        let body =
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_throttle_time_ms(5));
        let response = response_frame(ApiKey::ApiVersions, 3, correlation_id, &body);
        tls.write_all(&response).await.unwrap();
        tls.flush().await.unwrap();
        // Keep the connection open until the client is done.
        let _ = tls.read_i32().await;
    });
    BrokerAddress::new("127.0.0.1", addr.port())
}

fn options(cfg: &TlsConnectorConfig, name: &str) -> BrokerConnectOptions {
    let mut opts = BrokerConnectOptions::new(Duration::from_secs(5));
    opts.tls = Some((connector(cfg).unwrap(), server_name(name).unwrap()));
    opts
}

/// Connects and sends one ApiVersions request.
async fn exchange(addr: BrokerAddress, opts: &BrokerConnectOptions) -> Result<i32, BrokerError> {
    let conn = within("the tls connection", BrokerConnection::connect(addr, opts)).await?;
    let req = request(
        ApiKey::ApiVersions,
        3,
        77,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    let rx = conn.send(req).await?.unwrap();
    let response = within("the tls response", rx).await.unwrap()?;
    Ok(response.correlation_id())
}

#[tokio::test]
async fn talks_to_a_broker_over_tls() {
    let pki = pki();
    let addr = tls_broker(&pki, "broker", false).await;
    let opts = options(&config(&pki, "ca.pem", true, false), "127.0.0.1");
    assert_eq!(exchange(addr, &opts).await.unwrap(), 77);
}

#[tokio::test]
async fn presents_the_client_certificate_for_mtls() {
    let pki = pki();
    let addr = tls_broker(&pki, "broker", true).await;
    let opts = options(&config(&pki, "ca.pem", true, true), "127.0.0.1");
    assert_eq!(exchange(addr, &opts).await.unwrap(), 77);

    // Without a client certificate the broker refuses; with TLS 1.3 the
    // client may learn only when it reads, so accept either way of failing.
    let addr = tls_broker(&pki, "broker", true).await;
    let opts = options(&config(&pki, "ca.pem", true, false), "127.0.0.1");
    let err = exchange(addr, &opts).await.unwrap_err();
    assert!(
        matches!(err, BrokerError::TlsHandshake { .. }) || err.kind() == "tls",
        "{err}"
    );
}

#[tokio::test]
async fn verify_hostname_false_skips_the_name_but_not_the_chain() {
    let pki = pki();
    let addr = tls_broker(&pki, "misnamed", false).await;
    let opts = options(&config(&pki, "ca.pem", true, false), "127.0.0.1");
    let err = exchange(addr, &opts).await.unwrap_err();
    assert!(matches!(err, BrokerError::TlsHandshake { .. }), "{err}");
    assert!(!sluice_error::ErrorClass::retriable(&err));

    let addr = tls_broker(&pki, "misnamed", false).await;
    let opts = options(&config(&pki, "ca.pem", false, false), "127.0.0.1");
    assert_eq!(exchange(addr, &opts).await.unwrap(), 77);

    let addr = tls_broker(&pki, "misnamed", false).await;
    let opts = options(&config(&pki, "other-ca.pem", false, false), "127.0.0.1");
    let err = exchange(addr, &opts).await.unwrap_err();
    assert!(matches!(err, BrokerError::TlsHandshake { .. }), "{err}");
}

#[tokio::test]
async fn a_handshake_that_never_completes_hits_the_connect_timeout() {
    let pki = pki();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = BrokerAddress::new("127.0.0.1", listener.local_addr().unwrap().port());
    let mut opts = options(&config(&pki, "ca.pem", true, false), "127.0.0.1");
    opts.connect_timeout = Duration::from_millis(200);
    // The listener accepts (in the kernel) but never speaks TLS.
    let err = within(
        "the connect timeout",
        BrokerConnection::connect(addr, &opts),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BrokerError::ConnectTimeout { .. }), "{err}");
    assert!(
        err.to_string().ends_with("connect timed out after 200ms"),
        "{err}"
    );
    drop(listener);
}

#[test]
fn errors_name_the_file() {
    let pki = pki();
    let missing = config(&pki, "missing.pem", true, false);
    let err = connector(&missing).err().unwrap();
    assert!(matches!(err, TlsError::Read { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot read certificate authority file {}",
            pki.path("missing.pem")
        )),
        "{err}"
    );

    // A key file holds no certificate.
    let err = connector(&config(&pki, "client-key.pem", true, false))
        .err()
        .unwrap();
    assert!(matches!(err, TlsError::NoCertificates { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("client-key.pem: no certificate found"),
        "{err}"
    );

    let mut half = config(&pki, "ca.pem", true, true);
    half.private_key_path = None;
    assert!(matches!(
        connector(&half),
        Err(TlsError::IncompleteClientAuth)
    ));

    let mut no_key = config(&pki, "ca.pem", true, true);
    no_key.private_key_path = Some(pki.path("client.pem"));
    let err = connector(&no_key).err().unwrap();
    assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err}");

    assert!(server_name("kafka-1.example").is_ok());
    assert!(server_name("::1").is_ok());
    assert!(matches!(
        server_name("not a host"),
        Err(TlsError::ServerName { .. })
    ));
}
