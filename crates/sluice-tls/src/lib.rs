//! TLS for Sluice, in one place: the rustls connector towards brokers, the
//! DER walk over certificates, and TLS settings reloaded from their files
//! while Sluice runs.
//!
//! - [`connector`]: the [`TlsConnector`] towards brokers built from a
//!   [`TlsConnectorConfig`] (CA, mTLS, `verify_hostname: false`);
//! - [`acceptor`]: a listener's acceptor (mTLS when it names a CA); the
//!   handshake is the listener's;
//! - `files`: certificates and keys read from PEM files;
//! - `error`: [`TlsError`], every error naming its file and its role;
//! - [`reload`]: [`Reloadable`](reload::Reloadable) TLS settings and the
//!   [`TlsReloader`](reload::TlsReloader) that rebuilds them on SIGHUP or
//!   when their files change; [`reloadable_connector`] is a sink's,
//!   [`acceptor::reloadable_acceptor`] a listener's;
//! - [`der`]: the DER walk over certificates (a client's subject CN, a
//!   certificate's expiry);
//! - `validity`: a certificate's expiry, read from its DER.
//!
//! Its own crate so that every crate that speaks TLS (the source, the sinks,
//! the token task) depends on TLS and nothing else of another's.

#![deny(missing_docs)]

pub mod acceptor;
pub mod connector;
pub mod der;
mod error;
mod files;
pub mod reload;
mod validity;

use std::path::PathBuf;
use std::sync::Arc;

pub use connector::{connector, server_name};
pub use error::TlsError;
use sluice_config::TlsConnectorConfig;
use tokio_rustls::TlsConnector;

/// A sink's connector that can be reloaded from its files.
pub type SharedConnector = Arc<reload::Reloadable<TlsConnector>>;

/// Builds a broker connector from `cfg` that [`reload::TlsReloader`] can
/// rebuild when its files change; `name` (the sink's) is for logs and
/// metrics.
pub fn reloadable_connector(
    name: &str,
    cfg: &TlsConnectorConfig,
) -> Result<SharedConnector, TlsError> {
    let mut files = vec![PathBuf::from(&cfg.certificate_authority_path)];
    files.extend(cfg.certificate_path.iter().map(PathBuf::from));
    files.extend(cfg.private_key_path.iter().map(PathBuf::from));
    let certificate = cfg.certificate_path.as_ref().map(PathBuf::from);
    let cfg = cfg.clone();
    reload::Reloadable::new(
        reload::TlsSide::Broker,
        name,
        files,
        certificate,
        move || connector(&cfg),
    )
}
