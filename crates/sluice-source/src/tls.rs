//! TLS for a listener's connections: the bounded handshake.
//!
//! The handshake runs inside the client's connection task, bounded by
//! `HANDSHAKE_TIMEOUT`, so a slow or silent client never holds up the accept
//! loop. The acceptor comes from `sluice_tls::acceptor`, reloadable while the
//! listener runs: each new client's handshake uses the acceptor current when
//! it connected; open connections keep theirs. When the listener requires
//! client certificates, the certificate's subject CN becomes the
//! connection's `tls_principal`.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::principal::subject_common_name;

/// How long a client has to complete the TLS handshake after connecting.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    use sluice_config::TlsAcceptorConfig;
    use sluice_tls::acceptor::acceptor;

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
}
