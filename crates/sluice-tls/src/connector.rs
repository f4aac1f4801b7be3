//! TLS to brokers: a [`TlsConnector`] built from a [`TlsConnectorConfig`].
//!
//! rustls with the `ring` provider. The broker's chain is checked against the
//! configured CA bundle; a client certificate and key, when configured, make
//! it mTLS. `verify_hostname: false` keeps the chain check but skips matching
//! the certificate's names against the broker address, for deployments where
//! brokers advertise addresses their certificates do not carry. Every error
//! names the file it is about.
//!
//! Rebuilding the connector when its files change is [`crate::reload`]'s
//! (shared with the listeners' acceptors); each build calls [`connector`].

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sluice_config::TlsConnectorConfig;
use tokio_rustls::TlsConnector;

use crate::TlsError;
use crate::files::{CERTIFICATE, load_certs, load_key, load_roots};

/// Builds a connector for broker connections from `cfg`.
pub fn connector(cfg: &TlsConnectorConfig) -> Result<TlsConnector, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(load_roots(Path::new(&cfg.certificate_authority_path))?);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config {
            reason: e.to_string(),
        })?;
    let builder = if cfg.verify_hostname {
        builder.with_root_certificates(roots)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier::new(roots, &provider)))
    };
    let config = match (&cfg.certificate_path, &cfg.private_key_path) {
        (Some(cert), Some(key)) => {
            let (cert, key) = (Path::new(cert), Path::new(key));
            let chain = load_certs(CERTIFICATE, cert)?;
            let private_key = load_key(key)?;
            builder
                .with_client_auth_cert(chain, private_key)
                .map_err(|e| TlsError::CertificateAndKey {
                    cert: cert.to_owned(),
                    key: key.to_owned(),
                    reason: e.to_string(),
                })?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err(TlsError::IncompleteClientAuth),
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The TLS server name for a broker host (a DNS name or an IP literal).
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(host.to_owned()).map_err(|_| TlsError::ServerName {
        name: host.to_owned(),
    })
}

/// Checks the broker's chain against the roots, but not its names.
#[derive(Debug)]
struct ChainOnlyVerifier {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ChainOnlyVerifier {
    fn new(roots: Arc<RootCertStore>, provider: &CryptoProvider) -> Self {
        Self {
            roots,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
