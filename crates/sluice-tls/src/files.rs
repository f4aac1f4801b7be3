//! Reading certificates and keys from PEM files, for listeners and broker
//! connectors alike.

use std::path::Path;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

/// The role of a certificate file, in errors.
pub(crate) const CERTIFICATE: &str = "certificate";
/// The role of a CA file, in errors.
pub(crate) const CERTIFICATE_AUTHORITY: &str = "certificate authority";

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in a PEM file, in order; at least one.
pub(crate) fn load_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificates {
            what,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read("private key", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoPrivateKey {
            path: path.to_owned(),
        },
        other => TlsError::Pem {
            what: "private key",
            path: path.to_owned(),
            reason: other.to_string(),
        },
    })
}

/// The trust anchors in a CA file.
pub(crate) fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(CERTIFICATE_AUTHORITY, path)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::CertificateAuthority {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
    }
    Ok(roots)
}
