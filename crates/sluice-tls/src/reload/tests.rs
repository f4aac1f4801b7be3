//! Reload tests: files in a temporary directory, a `Reloadable` over a
//! connector built from them, and what a reload or a poll does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, date_time_ymd};
use sluice_config::TlsConnectorConfig;

use super::*;
use crate::reloadable_connector;

/// A directory of PEM files for one test, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("sluice-chain-reload-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }

    fn write(&self, name: &str, contents: &str) {
        std::fs::write(self.0.join(name), contents).unwrap();
    }

    /// Writes `name` and dates it `secs` after the epoch, so that a poll
    /// sees a new modification time however coarse the file system's clock.
    fn write_dated(&self, name: &str, contents: &str, secs: u64) {
        self.write(name, contents);
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(self.0.join(name))
            .unwrap()
            .set_modified(at)
            .unwrap();
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ca() -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "Reload Test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// A client certificate and key, valid until `not_after` (y, m, d).
fn client(issuer: &Issuer<'_, KeyPair>, not_after: (i32, u8, u8)) -> (String, String) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "client");
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(not_after.0, not_after.1, not_after.2);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A CA, a client certificate and its key, and a connector config over them.
fn setup(tag: &str) -> (Dir, Issuer<'static, KeyPair>, TlsConnectorConfig) {
    let dir = Dir::new(tag);
    let (ca_pem, issuer) = ca();
    dir.write("ca.pem", &ca_pem);
    let (cert, key) = client(&issuer, (2090, 1, 1));
    dir.write("client.pem", &cert);
    dir.write("client-key.pem", &key);
    let cfg = TlsConnectorConfig {
        certificate_authority_path: dir.path("ca.pem"),
        certificate_path: Some(dir.path("client.pem")),
        private_key_path: Some(dir.path("client-key.pem")),
        verify_hostname: true,
    };
    (dir, issuer, cfg)
}

/// The connector in use, as a pointer: a reload replaces it.
fn identity(r: &SharedConnector) -> *const rustls::ClientConfig {
    Arc::as_ptr(r.current().config())
}

type SharedConnector = crate::SharedConnector;

#[test]
fn a_reload_replaces_the_connector_and_a_bad_one_keeps_it() {
    let (dir, issuer, cfg) = setup("replace");
    let reloadable = reloadable_connector("sink", &cfg).unwrap();
    let first = identity(&reloadable);

    let (cert, key) = client(&issuer, (2091, 1, 1));
    dir.write("client.pem", &cert);
    dir.write("client-key.pem", &key);
    reloadable.reload().unwrap();
    let second = identity(&reloadable);
    assert_ne!(first, second, "a good reload puts the new connector in use");

    // A key that does not match the certificate: refused, naming both files.
    let (_, other_key) = client(&issuer, (2091, 1, 1));
    dir.write("client-key.pem", &other_key);
    let e = reloadable.reload().unwrap_err().to_string();
    assert!(e.contains(&dir.path("client.pem")), "{e}");
    assert_eq!(identity(&reloadable), second, "the refused one is not used");

    // Garbage in the certificate file.
    dir.write("client-key.pem", &key);
    dir.write("client.pem", "not a certificate");
    let e = reloadable.reload().unwrap_err().to_string();
    assert!(
        e.contains(&dir.path("client.pem")) && e.contains("no certificate"),
        "{e}"
    );
    assert_eq!(identity(&reloadable), second);

    // A missing CA file.
    dir.write("client.pem", &cert);
    std::fs::remove_file(dir.path("ca.pem")).unwrap();
    let e = reloadable.reload().unwrap_err().to_string();
    assert!(
        e.contains(&dir.path("ca.pem")) && e.contains("cannot read"),
        "{e}"
    );
    assert_eq!(identity(&reloadable), second);
}

#[test]
fn an_expired_certificate_is_refused() {
    let (dir, issuer, cfg) = setup("expired");
    let reloadable = reloadable_connector("sink", &cfg).unwrap();
    let first = identity(&reloadable);
    let (cert, key) = client(&issuer, (2021, 1, 1));
    dir.write("client.pem", &cert);
    dir.write("client-key.pem", &key);
    let e = reloadable.reload().unwrap_err();
    assert!(matches!(e, ReloadError::Expired { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&dir.path("client.pem")) && text.contains("expired"),
        "{text}"
    );
    assert_eq!(identity(&reloadable), first);
}

#[test]
fn a_change_reloads_once_the_files_have_settled() {
    let (dir, issuer, cfg) = setup("poll");
    let reloadable = reloadable_connector("sink", &cfg).unwrap();
    let reloader = TlsReloader::new(vec![reloadable.clone() as Arc<dyn Reload>]);
    let first = identity(&reloadable);
    assert_eq!(
        reloader.reload_changed(),
        ReloadCounts::default(),
        "nothing changed"
    );

    let (cert, key) = client(&issuer, (2092, 1, 1));
    dir.write_dated("client.pem", &cert, 1_000);
    assert_eq!(
        reloader.reload_changed(),
        ReloadCounts::default(),
        "the first poll that sees a change waits for the files to settle"
    );
    dir.write_dated("client-key.pem", &key, 1_001);
    assert_eq!(
        reloader.reload_changed(),
        ReloadCounts::default(),
        "the key changed too: still settling"
    );
    assert_eq!(identity(&reloadable), first);
    assert_eq!(
        reloader.reload_changed(),
        ReloadCounts { ok: 1, failed: 0 },
        "unchanged since the last poll: reloaded"
    );
    assert_ne!(identity(&reloadable), first);
    assert_eq!(
        reloader.reload_changed(),
        ReloadCounts::default(),
        "reloaded once"
    );

    // A bad change is tried once, then left alone until the files change again.
    dir.write_dated("client-key.pem", "garbage", 1_002);
    reloader.reload_changed();
    assert_eq!(reloader.reload_changed(), ReloadCounts { ok: 0, failed: 1 });
    assert_eq!(reloader.reload_changed(), ReloadCounts::default());
    assert_eq!(
        reloader.reload_all("SIGHUP"),
        ReloadCounts { ok: 0, failed: 1 },
        "SIGHUP tries again, whatever the files look like"
    );
}
