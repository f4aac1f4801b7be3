//! The listener's TLS settings: every error names its file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rcgen::{CertificateParams, KeyPair};

use super::*;

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
        std::env::temp_dir().join(format!("sluice-tls-acceptor-{}-{name}", std::process::id()));
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
