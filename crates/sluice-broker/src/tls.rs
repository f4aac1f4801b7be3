//! TLS to brokers: a [`TlsConnector`] built from a [`TlsConnectorConfig`].
//!
//! rustls with the `ring` provider. The broker's chain is checked against the
//! configured CA bundle; a client certificate and key, when configured, make
//! it mTLS. `verify_hostname: false` keeps the chain check but skips matching
//! the certificate's names against the broker address, for deployments where
//! brokers advertise addresses their certificates do not carry. Every error
//! names the file it is about.
//!
//! Rebuilding the connector when its files change is `sluice-chain`'s
//! (`tls::reload`, shared with the listeners' acceptors); each build calls
//! [`connector`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sluice_config::TlsConnectorConfig;
use tokio_rustls::TlsConnector;

use sluice_error::{ErrorClass, ErrorSide};

/// A TLS configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A file is not valid PEM.
    #[error("{}: invalid pem: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        reason: String,
    },
    /// A certificate file holds no certificate.
    #[error("{}: no certificate found", path.display())]
    NoCertificates {
        /// The file.
        path: PathBuf,
    },
    /// A key file holds no private key.
    #[error("{}: no private key found", path.display())]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// A CA certificate could not be used as a trust anchor.
    #[error("{}: invalid certificate authority: {reason}", path.display())]
    CertificateAuthority {
        /// The CA file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// The client certificate and key do not work together.
    #[error("{} and {}: invalid client certificate or key: {reason}", cert.display(), key.display())]
    ClientAuth {
        /// The client certificate file.
        cert: PathBuf,
        /// The client key file.
        key: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// Only one of `certificate_path` and `private_key_path` was set.
    #[error("tls: `certificate_path` and `private_key_path` must be set together")]
    IncompleteClientAuth,
    /// A broker host is not a valid TLS server name.
    #[error("tls: invalid server name `{name}`")]
    ServerName {
        /// The host.
        name: String,
    },
    /// rustls refused the configuration.
    #[error("tls: {reason}")]
    Config {
        /// What rustls said.
        reason: String,
    },
}

impl ErrorClass for TlsError {
    fn side(&self) -> ErrorSide {
        ErrorSide::Internal
    }

    fn retriable(&self) -> bool {
        false
    }
}

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
            let chain = load_certs(cert)?;
            let private_key = load_key(key)?;
            builder
                .with_client_auth_cert(chain, private_key)
                .map_err(|e| TlsError::ClientAuth {
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

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in a PEM file, in order.
pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificates {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoPrivateKey {
            path: path.to_owned(),
        },
        other => TlsError::Pem {
            path: path.to_owned(),
            reason: other.to_string(),
        },
    })
}

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::CertificateAuthority {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
    }
    Ok(roots)
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
