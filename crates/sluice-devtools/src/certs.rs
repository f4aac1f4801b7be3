//! `gen-certs`: the test PKI used by the local Kafka clusters and Sluice's
//! tests.
//!
//! Every key is ECDSA P-256, written as unencrypted PKCS#8 PEM (what Kafka's
//! `ssl.keystore.type=PEM` accepts with no key password). Leaf certificates
//! carry only a CN in their subject, so Kafka's principal mapping rule
//! `RULE:^CN=([^,]+).*$/$1/` turns `CN=broker` into `User:broker`.
//!
//! Files written into the output directory:
//!
//! | file | what |
//! | --- | --- |
//! | `ca.pem`, `ca-key.pem` | CA "Sluice Test CA" |
//! | `broker.pem`, `broker-key.pem` | CN=broker, SAN 127.0.0.1 + localhost, serverAuth + clientAuth |
//! | `sluice-server.pem`, `sluice-server-key.pem` | CN=sluice, SAN 127.0.0.1 + localhost, serverAuth |
//! | `sluice-admin.pem`, `sluice-admin-key.pem` | CN=sluice-admin, clientAuth (the mTLS super user) |
//! | `client.pem`, `client-key.pem` | CN=client, clientAuth |
//! | `other-ca.pem`, `other-ca-key.pem` | CA "Sluice Other Test CA", unrelated to the first |
//! | `other-client.pem`, `other-client-key.pem` | CN=client, clientAuth, signed by the other CA |
//! | `NAME-keystore.pem` | for each leaf: key, certificate, then its CA (a Kafka PEM keystore) |

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, date_time_ymd,
};

/// How a leaf certificate will be used.
#[derive(Clone, Copy, Debug)]
enum Usage {
    /// TLS server only.
    Server,
    /// TLS client only.
    Client,
    /// Both (Kafka brokers talk to each other).
    ServerAndClient,
}

/// One leaf certificate to issue.
struct LeafSpec {
    /// File stem: `{stem}.pem`, `{stem}-key.pem`, `{stem}-keystore.pem`.
    stem: &'static str,
    /// Subject common name.
    cn: &'static str,
    /// Extended key usages.
    usage: Usage,
    /// Whether to add SAN IP:127.0.0.1 and DNS:localhost.
    local_sans: bool,
}

/// The leaves signed by the main CA.
const MAIN_LEAVES: &[LeafSpec] = &[
    LeafSpec {
        stem: "broker",
        cn: "broker",
        usage: Usage::ServerAndClient,
        local_sans: true,
    },
    LeafSpec {
        stem: "sluice-server",
        cn: "sluice",
        usage: Usage::Server,
        local_sans: true,
    },
    LeafSpec {
        stem: "sluice-admin",
        cn: "sluice-admin",
        usage: Usage::Client,
        local_sans: false,
    },
    LeafSpec {
        stem: "client",
        cn: "client",
        usage: Usage::Client,
        local_sans: false,
    },
];

/// The leaf signed by the unrelated "other" CA (same CN as `client`, so a
/// test can tell "wrong CA" apart from "unknown user").
const OTHER_LEAF: LeafSpec = LeafSpec {
    stem: "other-client",
    cn: "client",
    usage: Usage::Client,
    local_sans: false,
};

/// Every file `generate` writes, relative to the output directory.
pub(crate) fn expected_files() -> Vec<String> {
    let mut files = vec![
        "ca.pem".to_owned(),
        "ca-key.pem".to_owned(),
        "other-ca.pem".to_owned(),
        "other-ca-key.pem".to_owned(),
    ];
    for leaf in MAIN_LEAVES.iter().chain(std::iter::once(&OTHER_LEAF)) {
        files.push(format!("{}.pem", leaf.stem));
        files.push(format!("{}-key.pem", leaf.stem));
        files.push(format!("{}-keystore.pem", leaf.stem));
    }
    files
}

/// What `generate` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// All files were already there; nothing was written.
    Existing,
    /// A fresh set was written.
    Generated,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Existing => f.write_str("kept existing"),
            Outcome::Generated => f.write_str("generated"),
        }
    }
}

/// Generates the whole PKI into `out`, unless every file already exists (and
/// `force` is false).
///
/// Holds an exclusive lock on `out/.gen-certs.lock` meanwhile, so that two
/// clusters starting at once never mix files of two different sets.
pub(crate) fn generate(out: &Path, force: bool) -> Result<Outcome> {
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let lock_path = out.join(".gen-certs.lock");
    let lock = File::create(&lock_path)
        .with_context(|| format!("creating lock file {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    let all_there = expected_files().iter().all(|f| out.join(f).is_file());
    if all_there && !force {
        return Ok(Outcome::Existing);
    }

    let (ca_cert, ca) = new_ca("Sluice Test CA")?;
    write_file(out, "ca.pem", &ca_cert.pem(), false)?;
    write_file(out, "ca-key.pem", &ca.key().serialize_pem(), true)?;
    for leaf in MAIN_LEAVES {
        write_leaf(out, leaf, &ca, &ca_cert)?;
    }

    let (other_cert, other) = new_ca("Sluice Other Test CA")?;
    write_file(out, "other-ca.pem", &other_cert.pem(), false)?;
    write_file(out, "other-ca-key.pem", &other.key().serialize_pem(), true)?;
    write_leaf(out, &OTHER_LEAF, &other, &other_cert)?;

    drop(lock);
    Ok(Outcome::Generated)
}

/// Parameters shared by every certificate: a fixed, long validity window.
fn base_params(sans: Vec<String>) -> Result<CertificateParams> {
    let mut params = CertificateParams::new(sans).context("certificate parameters")?;
    params.not_before = date_time_ymd(2025, 1, 1);
    params.not_after = date_time_ymd(2099, 12, 31);
    params.distinguished_name = rcgen::DistinguishedName::new();
    Ok(params)
}

/// A self-signed CA with subject `CN={cn}`.
fn new_ca(cn: &str) -> Result<(Certificate, Issuer<'static, KeyPair>)> {
    let mut params = base_params(Vec::new())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let key = KeyPair::generate().context("generating CA key")?;
    let cert = params.self_signed(&key).context("self-signing CA")?;
    Ok((cert, Issuer::new(params, key)))
}

/// Issues `leaf` from `ca` and writes its certificate, key and keystore.
fn write_leaf(
    out: &Path,
    leaf: &LeafSpec,
    ca: &Issuer<'static, KeyPair>,
    ca_cert: &Certificate,
) -> Result<()> {
    let sans = if leaf.local_sans {
        vec!["127.0.0.1".to_owned(), "localhost".to_owned()]
    } else {
        Vec::new()
    };
    let mut params = base_params(sans)?;
    params.distinguished_name.push(DnType::CommonName, leaf.cn);
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match leaf.usage {
        Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
        Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
        Usage::ServerAndClient => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    let key = KeyPair::generate().with_context(|| format!("generating key for {}", leaf.stem))?;
    let cert = params
        .signed_by(&key, ca)
        .with_context(|| format!("signing {}", leaf.stem))?;
    let key_pem = key.serialize_pem();
    write_file(out, &format!("{}.pem", leaf.stem), &cert.pem(), false)?;
    write_file(out, &format!("{}-key.pem", leaf.stem), &key_pem, true)?;
    let keystore = format!("{key_pem}{}{}", cert.pem(), ca_cert.pem());
    write_file(out, &format!("{}-keystore.pem", leaf.stem), &keystore, true)?;
    Ok(())
}

/// Writes `contents` to `out/name` through a temporary file and a rename;
/// `secret` files get mode 0600.
fn write_file(out: &Path, name: &str, contents: &str, secret: bool) -> Result<()> {
    let path = out.join(name);
    let tmp = out.join(format!(".{name}.tmp"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn scratch_dir() -> std::path::PathBuf {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        std::env::temp_dir().join(format!(
            "sluice-devtools-certs-{}-{nanos}",
            std::process::id()
        ))
    }

    #[test]
    fn generates_every_file_once() {
        let dir = scratch_dir();
        assert_eq!(generate(&dir, false).unwrap(), Outcome::Generated);
        for f in expected_files() {
            let text = fs::read_to_string(dir.join(&f)).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{f}");
            if f.ends_with("-key.pem") {
                assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"), "{f}");
            }
        }
        let keystore = fs::read_to_string(dir.join("broker-keystore.pem")).unwrap();
        assert_eq!(keystore.matches("BEGIN CERTIFICATE").count(), 2);
        assert_eq!(keystore.matches("BEGIN PRIVATE KEY").count(), 1);
        let before = fs::read(dir.join("ca.pem")).unwrap();
        assert_eq!(generate(&dir, false).unwrap(), Outcome::Existing);
        assert_eq!(fs::read(dir.join("ca.pem")).unwrap(), before);
        fs::remove_file(dir.join("client.pem")).unwrap();
        assert_eq!(generate(&dir, false).unwrap(), Outcome::Generated);
        assert_ne!(fs::read(dir.join("ca.pem")).unwrap(), before);
        fs::remove_dir_all(&dir).unwrap();
    }
}
