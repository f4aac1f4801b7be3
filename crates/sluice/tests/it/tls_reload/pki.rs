//! Certificates for the reload tests: a CA of the test's own for the
//! listener, and leaves issued by the test cluster's CA for Sluice's TLS to
//! brokers.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, date_time_ymd,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// A certificate and its key, as PEM.
#[derive(Clone)]
pub(crate) struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Leaf {
    /// The DER of the certificate, as a TLS handshake shows it.
    pub(crate) fn der(&self) -> Vec<u8> {
        CertificateDer::pem_slice_iter(self.cert.as_bytes())
            .next()
            .expect("a certificate")
            .expect("valid PEM")
            .to_vec()
    }
}

/// A CA that issues leaves.
pub(crate) struct Ca {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::new()).expect("params");
    params.not_before = date_time_ymd(2025, 1, 1);
    params.not_after = date_time_ymd(2099, 12, 31);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    params
}

impl Ca {
    /// A fresh CA.
    pub(crate) fn new(cn: &str) -> Self {
        let params = ca_params(cn);
        let key = KeyPair::generate().expect("CA key");
        let pem = params.self_signed(&key).expect("self-sign").pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// The test cluster's CA ("Sluice Test CA", as `sluice-devtools
    /// gen-certs` makes it), from its certificate and key in `certs_dir`:
    /// what it issues, the brokers trust.
    pub(crate) fn of_cluster(certs_dir: &Path) -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(certs_dir.join(name))
                .unwrap_or_else(|e| panic!("{}: {e}", certs_dir.join(name).display()))
        };
        let key = KeyPair::from_pem(&read("ca-key.pem")).expect("the cluster CA's key");
        Self {
            pem: read("ca.pem"),
            issuer: Issuer::new(ca_params("Sluice Test CA"), key),
        }
    }

    /// A server certificate for 127.0.0.1 and localhost.
    pub(crate) fn server(&self) -> Leaf {
        self.leaf(
            "sluice",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate with subject `CN={cn}`.
    pub(crate) fn client(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn leaf(&self, cn: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params.not_before = date_time_ymd(2025, 1, 1);
        params.not_after = date_time_ymd(2099, 12, 31);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// Where a test keeps the files Sluice reads, removed at the end.
pub(crate) struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("sluice-tls-reload-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// The path of `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The path of `name`, as a topology wants it.
    pub(crate) fn text(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// Writes `name` the way an operator replaces a file: a temporary file
    /// renamed over it, so that Sluice never reads it half-written.
    pub(crate) fn write(&self, name: &str, contents: &str) {
        let tmp = self.path(&format!(".{name}.tmp"));
        std::fs::write(&tmp, contents).expect("write file");
        std::fs::rename(&tmp, self.path(name)).expect("rename file");
    }

    /// Writes a certificate and its key as `{stem}.pem` and `{stem}-key.pem`.
    pub(crate) fn write_leaf(&self, stem: &str, leaf: &Leaf) {
        self.write(&format!("{stem}.pem"), &leaf.cert);
        self.write(&format!("{stem}-key.pem"), &leaf.key);
    }
}
