//! A throwaway PKI for the TLS tests: a CA with a server and a client
//! certificate, and an unrelated CA with a client certificate of its own.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_config::TlsAcceptorConfig;

/// The CN of the good client certificate.
pub(crate) const CLIENT_CN: &str = "test-client";

/// A certificate and its key, as PEM.
pub(crate) struct Pem {
    pub cert: String,
    pub key: String,
}

pub(crate) struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    pub ca: String,
    pub server: Pem,
    pub client: Pem,
    pub other_client: Pem,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn new_ca(cn: &str) -> (Certificate, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert, Issuer::new(params, key))
}

fn leaf(cn: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose, ca: &Issuer<'_, KeyPair>) -> Pem {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

impl Pki {
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-source-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca_cert, ca) = new_ca("Test CA");
        let (_, other_ca) = new_ca("Other Test CA");
        let server = leaf(
            "sluice",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca,
        );
        Pki {
            dir,
            ca: ca_cert.pem(),
            client: leaf(CLIENT_CN, &[], ExtendedKeyUsagePurpose::ClientAuth, &ca),
            other_client: leaf(
                CLIENT_CN,
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
                &other_ca,
            ),
            server,
            issuer: ca,
        }
    }

    /// A new server certificate from the same CA, as the first one.
    pub(crate) fn new_server(&self) -> Pem {
        leaf(
            "sluice",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &self.issuer,
        )
    }

    /// Replaces the listener's certificate and key files.
    pub(crate) fn replace_server(&self, cert: &str, key: &str) {
        self.write("server.pem", cert);
        self.write("server-key.pem", key);
    }

    fn write(&self, name: &str, contents: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// The listener's TLS settings; with `mtls`, client certificates signed
    /// by the CA are required.
    pub(crate) fn acceptor_config(&self, mtls: bool) -> TlsAcceptorConfig {
        TlsAcceptorConfig {
            certificate_path: self.write("server.pem", &self.server.cert),
            private_key_path: self.write("server-key.pem", &self.server.key),
            certificate_authority_path: mtls.then(|| self.write("ca.pem", &self.ca)),
        }
    }

    /// A client config that trusts the CA and presents `identity`, if any.
    pub(crate) fn client_config(&self, identity: Option<&Pem>) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca.as_bytes()).unwrap())
            .unwrap();
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots);
        let config = match identity {
            Some(pem) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from_pem_slice(pem.cert.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        Arc::new(config)
    }
}
