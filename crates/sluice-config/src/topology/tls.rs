//! TLS settings: for a listener (`TlsAcceptorConfig`) and for connections to
//! brokers (`TlsConnectorConfig`), in shotover's format.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::FieldError;
use crate::validate::{self, Checks};

/// TLS for a listener.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsAcceptorConfig {
    /// PEM certificate chain.
    pub certificate_path: String,
    /// PEM private key.
    pub private_key_path: String,
    /// PEM CA bundle; when set, clients must present a certificate it signed.
    #[serde(default)]
    pub certificate_authority_path: Option<String>,
}

impl TlsAcceptorConfig {
    /// Checks that every file exists.
    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        validate::file("certificate_path", &self.certificate_path, checks)?;
        validate::file("private_key_path", &self.private_key_path, checks)?;
        if let Some(ca) = &self.certificate_authority_path {
            validate::file("certificate_authority_path", ca, checks)?;
        }
        Ok(())
    }
}

/// TLS for connections to brokers.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConnectorConfig {
    /// PEM CA bundle that signed the brokers' certificates.
    pub certificate_authority_path: String,
    /// PEM client certificate, for mTLS.
    #[serde(default)]
    pub certificate_path: Option<String>,
    /// PEM client key, for mTLS.
    #[serde(default)]
    pub private_key_path: Option<String>,
    /// Check that the broker certificate matches its address. shotover
    /// requires the field; Sluice defaults it to true.
    #[serde(default = "default_true")]
    pub verify_hostname: bool,
}

fn default_true() -> bool {
    true
}

impl TlsConnectorConfig {
    /// True when a client certificate is configured (mTLS).
    pub(crate) fn has_client_cert(&self) -> bool {
        self.certificate_path.is_some() && self.private_key_path.is_some()
    }

    /// Checks that every file exists and that the client certificate and key
    /// come together.
    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        validate::file(
            "certificate_authority_path",
            &self.certificate_authority_path,
            checks,
        )?;
        match (&self.certificate_path, &self.private_key_path) {
            (Some(cert), Some(key)) => {
                validate::file("certificate_path", cert, checks)?;
                validate::file("private_key_path", key, checks)
            }
            (None, None) => Ok(()),
            (Some(_), None) => Err(FieldError::new(
                "private_key_path",
                "must be set when `certificate_path` is set",
            )),
            (None, Some(_)) => Err(FieldError::new(
                "certificate_path",
                "must be set when `private_key_path` is set",
            )),
        }
    }
}
