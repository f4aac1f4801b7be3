//! TLS for a listener: the rustls server configuration and the handshake.
//!
//! The certificate chain and key come from PEM files. When the source sets
//! `certificate_authority_path`, every client must present a certificate that
//! CA signed (mTLS), and the certificate's subject CN becomes the connection's
//! `tls_principal`. The handshake runs inside the client's connection task,
//! bounded by `HANDSHAKE_TIMEOUT`, so a slow or silent client never holds up
//! the accept loop.
//!
//! `reloadable_acceptor` wraps the acceptor so that the files can be
//! reloaded while the listener runs (SIGHUP, or a file changed; see
//! [`sluice_chain::tls::reload`]): each new client's handshake uses the
//! acceptor current when it connected; open connections keep theirs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_chain::tls::reload::{Reloadable, TlsSide};
use sluice_config::TlsAcceptorConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::SourceError;
use crate::principal::subject_common_name;

/// How long a client has to complete the TLS handshake after connecting.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the acceptor for a listener's TLS settings.
pub fn acceptor(cfg: &TlsAcceptorConfig) -> Result<TlsAcceptor, SourceError> {
    server_config(cfg).map(|config| TlsAcceptor::from(Arc::new(config)))
}

/// A listener's acceptor that can be reloaded from its files.
pub(crate) type SharedAcceptor = Arc<Reloadable<TlsAcceptor>>;

/// Builds the acceptor of source `source_name` so that it can be reloaded
/// from the certificate, key and CA files of `cfg`.
pub(crate) fn reloadable_acceptor(
    source_name: &str,
    cfg: &TlsAcceptorConfig,
) -> Result<SharedAcceptor, SourceError> {
    let mut files = vec![
        PathBuf::from(&cfg.certificate_path),
        PathBuf::from(&cfg.private_key_path),
    ];
    files.extend(cfg.certificate_authority_path.iter().map(PathBuf::from));
    let certificate = Some(PathBuf::from(&cfg.certificate_path));
    let cfg = cfg.clone();
    Reloadable::new(
        TlsSide::Client,
        source_name,
        files,
        certificate,
        move || acceptor(&cfg),
    )
}

/// Builds the rustls server configuration, using the `ring` provider.
pub(crate) fn server_config(cfg: &TlsAcceptorConfig) -> Result<ServerConfig, SourceError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = load_certs("certificate", &cfg.certificate_path)?;
    let key = load_key(&cfg.private_key_path)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| SourceError::TlsConfig {
            context: "protocol versions".to_owned(),
            reason: e.to_string(),
        })?;
    let builder = match &cfg.certificate_authority_path {
        Some(ca_path) => {
            let verifier = client_verifier(ca_path, provider)?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    builder
        .with_single_cert(chain, key)
        .map_err(|e| SourceError::TlsConfig {
            context: format!(
                "certificate {} with key {}",
                cfg.certificate_path, cfg.private_key_path
            ),
            reason: e.to_string(),
        })
}

/// A verifier that requires a client certificate signed by the CAs in `path`.
fn client_verifier(
    path: &str,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, SourceError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs("certificate authority", path)? {
        roots.add(cert).map_err(|e| SourceError::TlsPem {
            what: "certificate authority",
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| SourceError::TlsConfig {
            context: format!("client certificate authority {path}"),
            reason: e.to_string(),
        })
}

/// Reads every certificate in a PEM file; at least one is required.
fn load_certs(what: &'static str, path: &str) -> Result<Vec<CertificateDer<'static>>, SourceError> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SourceError::TlsPem {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(SourceError::TlsPem {
            what,
            path: path.to_owned(),
            reason: "no certificate found".to_owned(),
        });
    }
    Ok(certs)
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, SourceError> {
    let what = "private key";
    let pem = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| SourceError::TlsPem {
        what,
        path: path.to_owned(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => "no private key found".to_owned(),
            other => other.to_string(),
        },
    })
}

fn read(what: &'static str, path: &str) -> Result<Vec<u8>, SourceError> {
    std::fs::read(path).map_err(|error| SourceError::TlsFile {
        what,
        path: path.to_owned(),
        error,
    })
}

/// Why a client's TLS handshake failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The client did not finish within `HANDSHAKE_TIMEOUT`.
    #[error("tls handshake did not complete within {0:?}")]
    Timeout(Duration),
    /// The handshake failed (no certificate, unknown CA, not TLS, ...).
    #[error("tls handshake failed: {0}")]
    Failed(std::io::Error),
}

/// Runs the server side of the handshake within `timeout`; on success returns
/// the stream and the client certificate's CN, if it presented one.
pub(crate) async fn handshake<S>(
    acceptor: &TlsAcceptor,
    stream: S,
    timeout: Duration,
) -> Result<(TlsStream<S>, Option<String>), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let tls = tokio::time::timeout(timeout, acceptor.accept(stream))
        .await
        .map_err(|_| HandshakeError::Timeout(timeout))?
        .map_err(HandshakeError::Failed)?;
    let principal = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|leaf| subject_common_name(leaf));
    Ok((tls, principal))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    /// Removes the test's files when it ends.
    struct Cleanup(Vec<String>);

    impl Drop for Cleanup {
        fn drop(&mut self) {
            for path in &self.0 {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    fn write_temp(name: &str, contents: &str) -> String {
        let path =
            std::env::temp_dir().join(format!("sluice-source-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn self_signed_files(tag: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (
            write_temp(&format!("{tag}-cert.pem"), &cert.pem()),
            write_temp(&format!("{tag}-key.pem"), &key.serialize_pem()),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_times_out() {
        let (cert, key) = self_signed_files("silent");
        let cfg = TlsAcceptorConfig {
            certificate_path: cert,
            private_key_path: key,
            certificate_authority_path: None,
        };
        let acceptor = acceptor(&cfg).unwrap();
        let _cleanup = Cleanup(vec![
            cfg.certificate_path.clone(),
            cfg.private_key_path.clone(),
        ]);
        let (_client, server) = tokio::io::duplex(1024);
        let started = tokio::time::Instant::now();
        let err = handshake(&acceptor, server, HANDSHAKE_TIMEOUT)
            .await
            .expect_err("a client that sends nothing must not complete a handshake");
        assert!(matches!(err, HandshakeError::Timeout(_)), "{err}");
        assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);
    }

    #[test]
    fn errors_name_the_file() {
        let (cert, key) = self_signed_files("errors");
        let (other_cert, other_key) = self_signed_files("errors-other");
        let _cleanup = Cleanup(vec![
            cert.clone(),
            key.clone(),
            other_cert,
            other_key.clone(),
        ]);
        let missing = TlsAcceptorConfig {
            certificate_path: "/nonexistent/sluice-cert.pem".to_owned(),
            private_key_path: key.clone(),
            certificate_authority_path: None,
        };
        let msg = server_config(&missing).err().unwrap().to_string();
        assert!(msg.contains("/nonexistent/sluice-cert.pem"), "{msg}");
        assert!(msg.starts_with("cannot read certificate file"), "{msg}");

        let key_as_cert = TlsAcceptorConfig {
            certificate_path: key.clone(),
            private_key_path: key.clone(),
            certificate_authority_path: None,
        };
        let msg = server_config(&key_as_cert).err().unwrap().to_string();
        assert!(
            msg.contains("no certificate found") && msg.contains(&key),
            "{msg}"
        );

        let cert_as_key = TlsAcceptorConfig {
            certificate_path: cert.clone(),
            private_key_path: cert.clone(),
            certificate_authority_path: None,
        };
        let msg = server_config(&cert_as_key).err().unwrap().to_string();
        assert!(msg.contains("no private key found"), "{msg}");

        let mismatch = TlsAcceptorConfig {
            certificate_path: cert.clone(),
            private_key_path: other_key,
            certificate_authority_path: None,
        };
        let msg = server_config(&mismatch).err().unwrap().to_string();
        assert!(msg.contains(&cert), "{msg}");

        let bad_ca = TlsAcceptorConfig {
            certificate_path: cert.clone(),
            private_key_path: key,
            certificate_authority_path: Some("/nonexistent/ca.pem".to_owned()),
        };
        let msg = server_config(&bad_ca).err().unwrap().to_string();
        assert!(
            msg.contains("certificate authority file /nonexistent/ca.pem"),
            "{msg}"
        );
    }
}
