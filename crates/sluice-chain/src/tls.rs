//! Reloadable TLS settings: a listener's acceptor and a sink's connector
//! towards brokers, rebuilt from their files while Sluice runs.
//!
//! - [`reload`]: [`Reloadable`](reload::Reloadable) TLS settings and the
//!   [`TlsReloader`](reload::TlsReloader) that rebuilds them on SIGHUP or
//!   when their files change; [`reloadable_connector`] is a sink's (built by
//!   [`sluice_broker::tls::connector`]), `sluice-source` builds a listener's;
//! - [`der`]: the DER walk over certificates (a client's subject CN, a
//!   certificate's expiry);
//! - `validity`: a certificate's expiry, read from its DER.

pub mod der;
pub mod reload;
mod validity;

use std::path::PathBuf;
use std::sync::Arc;

use sluice_broker::tls::{TlsError, connector};
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
