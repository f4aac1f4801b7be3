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
    use std::sync::Arc;

    use rcgen::{CertificateParams, KeyPair};
    use rustls::ServerConfig;
    use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

    use super::*;

    /// An acceptor with a self-signed certificate, built in memory (reading
    /// its files is `sluice_tls::acceptor`'s, tested there).
    fn self_signed_acceptor() -> TlsAcceptor {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert.der().clone()], key)
                .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_times_out() {
        let acceptor = self_signed_acceptor();
        let (_client, server) = tokio::io::duplex(1024);
        let started = tokio::time::Instant::now();
        let err = handshake(&acceptor, server, HANDSHAKE_TIMEOUT)
            .await
            .expect_err("a client that sends nothing must not complete a handshake");
        assert!(matches!(err, HandshakeError::Timeout(_)), "{err}");
        assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);
    }
}
