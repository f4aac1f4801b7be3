//! [`TlsError`]: why TLS settings cannot be used. Every variant about a file
//! names the file and its role (certificate, private key, certificate
//! authority), so an operator knows which setting to fix.

use std::path::PathBuf;

use sluice_error::{ErrorClass, ErrorSide};

/// TLS settings that cannot be used: a listener's or a broker connector's.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} file {}: {source}", path.display())]
    Read {
        /// The file's role: certificate, private key or certificate authority.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A file is not valid PEM.
    #[error("{what} file {}: invalid pem: {reason}", path.display())]
    Pem {
        /// The file's role.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        reason: String,
    },
    /// A certificate file holds no certificate.
    #[error("{what} file {}: no certificate found", path.display())]
    NoCertificates {
        /// The file's role: certificate or certificate authority.
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// A key file holds no private key.
    #[error("private key file {}: no private key found", path.display())]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// A CA certificate could not be used as a trust anchor, or to verify
    /// clients.
    #[error("certificate authority file {}: {reason}", path.display())]
    CertificateAuthority {
        /// The CA file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// A certificate and its key do not work together.
    #[error("certificate {} with key {}: {reason}", cert.display(), key.display())]
    CertificateAndKey {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// Only one of a connector's `certificate_path` and `private_key_path`
    /// was set.
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
