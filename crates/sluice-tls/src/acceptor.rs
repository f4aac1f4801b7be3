//! TLS for a listener: the rustls server configuration built from a
//! [`TlsAcceptorConfig`].
//!
//! The certificate chain and key come from PEM files. When the listener sets
//! `certificate_authority_path`, every client must present a certificate that
//! CA signed (mTLS). [`reloadable_acceptor`] wraps the acceptor so that its
//! files can be reloaded while the listener runs (SIGHUP, or a file changed;
//! see [`crate::reload`]). The handshake itself is the listener's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use sluice_config::TlsAcceptorConfig;
use tokio_rustls::TlsAcceptor;

use crate::TlsError;
use crate::files::{CERTIFICATE, load_certs, load_key, load_roots};
use crate::reload::{Reloadable, TlsSide};

/// A listener's acceptor that can be reloaded from its files.
pub type SharedAcceptor = Arc<Reloadable<TlsAcceptor>>;

/// Builds the acceptor for a listener's TLS settings.
pub fn acceptor(cfg: &TlsAcceptorConfig) -> Result<TlsAcceptor, TlsError> {
    server_config(cfg).map(|config| TlsAcceptor::from(Arc::new(config)))
}

/// Builds the acceptor of listener `name` so that it can be reloaded from
/// the certificate, key and CA files of `cfg`.
pub fn reloadable_acceptor(
    name: &str,
    cfg: &TlsAcceptorConfig,
) -> Result<SharedAcceptor, TlsError> {
    let mut files = vec![
        PathBuf::from(&cfg.certificate_path),
        PathBuf::from(&cfg.private_key_path),
    ];
    files.extend(cfg.certificate_authority_path.iter().map(PathBuf::from));
    let certificate = Some(PathBuf::from(&cfg.certificate_path));
    let cfg = cfg.clone();
    Reloadable::new(TlsSide::Client, name, files, certificate, move || {
        acceptor(&cfg)
    })
}

/// The rustls server configuration, with the `ring` provider.
fn server_config(cfg: &TlsAcceptorConfig) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (cert, key) = (
        Path::new(&cfg.certificate_path),
        Path::new(&cfg.private_key_path),
    );
    let chain = load_certs(CERTIFICATE, cert)?;
    let private_key = load_key(key)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config {
            reason: e.to_string(),
        })?;
    let builder = match &cfg.certificate_authority_path {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(Path::new(ca), provider)?),
        None => builder.with_no_client_auth(),
    };
    builder
        .with_single_cert(chain, private_key)
        .map_err(|e| TlsError::CertificateAndKey {
            cert: cert.to_owned(),
            key: key.to_owned(),
            reason: e.to_string(),
        })
}

/// A verifier that requires a client certificate signed by the CAs in `path`.
fn client_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let roots = load_roots(path)?;
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::CertificateAuthority {
            path: path.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests;
