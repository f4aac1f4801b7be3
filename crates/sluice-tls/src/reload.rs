//! Reloading TLS files while Sluice runs: certificate rotation without a
//! restart.
//!
//! A [`Reloadable`] holds the TLS acceptor (a listener's) or connector (a
//! sink's, towards brokers) in use, and how to build it again from its
//! files. A new connection takes the one current when it starts; a
//! connection already open keeps the session it negotiated, so a reload
//! drops nothing. A reload that fails (a missing or unreadable file, bad
//! PEM, a key that does not match its certificate, a certificate already
//! expired) changes nothing: it is logged at ERROR with the file it is
//! about, and the files in use stay in use.
//!
//! [`TlsReloader`] holds every reloadable of the process: on SIGHUP the
//! binary calls [`TlsReloader::reload_all`]; [`TlsReloader::spawn_polling`]
//! also looks at the files' modification times and sizes every
//! [`POLL_INTERVAL`] and reloads those that changed, once they have stayed
//! unchanged for one more poll (so that a certificate written before its key
//! is not tried half-done). Each attempt is counted in
//! `sluice_tls_reloads_total{side,name,result}`; the expiry of each
//! certificate in use is the gauge
//! `sluice_tls_certificate_expiry_timestamp_seconds{side,name}`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use metrics::{counter, gauge};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sluice_metrics::names;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::validity::not_after_unix_secs;

/// How often [`TlsReloader::spawn_polling`] looks at the files.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Which end of Sluice a TLS setting is for (the metric label `side`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsSide {
    /// A listener's: clients connect to it.
    Client,
    /// A sink's: Sluice connects to brokers with it.
    Broker,
}

impl TlsSide {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            TlsSide::Client => "client",
            TlsSide::Broker => "broker",
        }
    }
}

/// Why a reload was refused. The message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new files do not build a TLS configuration.
    #[error("{0}")]
    Build(Box<dyn std::error::Error + Send + Sync>),
    /// The new certificate has already expired.
    #[error("{}: the certificate expired {secs_ago} s ago (notAfter {not_after} s since the epoch)", path.display())]
    Expired {
        /// The certificate file.
        path: PathBuf,
        /// Its `notAfter`, in seconds since the epoch.
        not_after: i64,
        /// How long ago that was.
        secs_ago: i64,
    },
}

/// Something [`TlsReloader`] can reload.
pub trait Reload: Send + Sync {
    /// The side, for logs and metrics.
    fn side(&self) -> TlsSide;
    /// The source or sink it belongs to, for logs and metrics.
    fn name(&self) -> &str;
    /// Builds it again from its files; on success new connections use it.
    fn reload(&self) -> Result<(), ReloadError>;
    /// Whether its files changed since the last reload attempt and have
    /// stayed unchanged since the previous call: time to reload.
    fn settled_change(&self) -> bool;
}

type Build<T> = Box<dyn Fn() -> Result<T, Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// Modification time and size of a file, `None` when it cannot be read.
type Stamp = Option<(SystemTime, u64)>;

/// A TLS acceptor or connector that can be rebuilt from its files.
pub struct Reloadable<T> {
    side: TlsSide,
    name: String,
    files: Vec<PathBuf>,
    /// The certificate whose expiry is checked and exported, if any.
    certificate: Option<PathBuf>,
    build: Build<T>,
    current: RwLock<T>,
    stamps: Mutex<Stamps>,
}

impl<T> std::fmt::Debug for Reloadable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloadable")
            .field("side", &self.side)
            .field("name", &self.name)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// What the files looked like.
#[derive(Debug, Default)]
struct Stamps {
    /// At the last build attempt.
    built: Vec<Stamp>,
    /// At the previous poll, when different from `built`.
    seen: Option<Vec<Stamp>>,
}

impl<T: Clone + Send + Sync + 'static> Reloadable<T> {
    /// Builds it for the first time with `build`, which reads `files`
    /// (`certificate`, when set, is the certificate whose expiry is
    /// exported); the same `build` serves every reload.
    pub fn new<E, F>(
        side: TlsSide,
        name: &str,
        files: Vec<PathBuf>,
        certificate: Option<PathBuf>,
        build: F,
    ) -> Result<Arc<Self>, E>
    where
        E: std::error::Error + Send + Sync + 'static,
        F: Fn() -> Result<T, E> + Send + Sync + 'static,
    {
        let built = stamps(&files);
        let first = build()?;
        let reloadable = Self {
            side,
            name: name.to_owned(),
            files,
            certificate,
            build: Box::new(move || build().map_err(|e| Box::new(e) as _)),
            current: RwLock::new(first),
            stamps: Mutex::new(Stamps { built, seen: None }),
        };
        if let Some(path) = &reloadable.certificate {
            match certificate_expiry(path) {
                Some(not_after) => {
                    if not_after < unix_now() {
                        warn!(
                            side = side.label(),
                            name,
                            "{}: the {} TLS certificate of {name} has expired",
                            path.display(),
                            side.label()
                        );
                    }
                    reloadable.export_expiry(not_after);
                }
                None => warn!("{}: cannot read the certificate's expiry", path.display()),
            }
        }
        Ok(Arc::new(reloadable))
    }

    /// The acceptor or connector for a new connection.
    pub fn current(&self) -> T {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn export_expiry(&self, not_after: i64) {
        gauge!(
            names::TLS_CERTIFICATE_EXPIRY,
            "side" => self.side.label(),
            "name" => self.name.clone()
        )
        .set(not_after as f64);
    }
}

impl<T: Clone + Send + Sync + 'static> Reload for Reloadable<T> {
    fn side(&self) -> TlsSide {
        self.side
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn reload(&self) -> Result<(), ReloadError> {
        // Stamps first: a file that changes during the build is seen as
        // changed at the next poll and tried again.
        let now_stamps = stamps(&self.files);
        {
            let mut s = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
            s.built = now_stamps;
            s.seen = None;
        }
        let not_after = match &self.certificate {
            Some(path) => {
                let not_after = certificate_expiry(path);
                if let Some(not_after) = not_after {
                    let now = unix_now();
                    if not_after < now {
                        return Err(ReloadError::Expired {
                            path: path.clone(),
                            not_after,
                            secs_ago: now - not_after,
                        });
                    }
                }
                not_after
            }
            None => None,
        };
        let fresh = (self.build)().map_err(ReloadError::Build)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        if let Some(not_after) = not_after {
            self.export_expiry(not_after);
        }
        Ok(())
    }

    fn settled_change(&self) -> bool {
        let now = stamps(&self.files);
        let mut s = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        if now == s.built {
            s.seen = None;
            return false;
        }
        if s.seen.as_ref() == Some(&now) {
            return true;
        }
        s.seen = Some(now);
        false
    }
}

fn stamps(files: &[PathBuf]) -> Vec<Stamp> {
    files
        .iter()
        .map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// The `notAfter` of the first certificate in a PEM file.
fn certificate_expiry(path: &Path) -> Option<i64> {
    let pem = std::fs::read(path).ok()?;
    let first = CertificateDer::pem_slice_iter(&pem).next()?.ok()?;
    not_after_unix_secs(&first)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Every reloadable TLS setting of the process.
#[derive(Default)]
pub struct TlsReloader {
    targets: Vec<Arc<dyn Reload>>,
}

impl std::fmt::Debug for TlsReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsReloader")
            .field("targets", &self.targets.len())
            .finish()
    }
}

/// How many reloads of a round succeeded and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloaded: new connections use the new files.
    pub ok: usize,
    /// Refused: the files in use stay.
    pub failed: usize,
}

impl TlsReloader {
    /// A reloader of `targets`.
    pub fn new(targets: Vec<Arc<dyn Reload>>) -> Self {
        Self { targets }
    }

    /// Whether there is nothing to reload.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Reloads every target (on SIGHUP); `why` goes into the log lines.
    pub fn reload_all(&self, why: &str) -> ReloadCounts {
        let mut counts = ReloadCounts::default();
        for target in &self.targets {
            reload_one(target.as_ref(), why, &mut counts);
        }
        counts
    }

    /// Reloads the targets whose files changed and have settled.
    pub(crate) fn reload_changed(&self) -> ReloadCounts {
        let mut counts = ReloadCounts::default();
        for target in &self.targets {
            if target.settled_change() {
                reload_one(target.as_ref(), "its files changed", &mut counts);
            }
        }
        counts
    }

    /// Polls the files every `every` until `cancel` fires.
    pub fn spawn_polling(
        self: Arc<Self>,
        every: Duration,
        cancel: CancellationToken,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = tick.tick() => {
                        // File reads are small and local; a blocking pool
                        // thread keeps them off the runtime's workers.
                        let me = Arc::clone(&self);
                        if let Err(e) = tokio::task::spawn_blocking(move || me.reload_changed()).await {
                            error!("tls reload poll failed: {e}");
                        }
                    }
                }
            }
        })
    }
}

fn reload_one(target: &dyn Reload, why: &str, counts: &mut ReloadCounts) {
    let (side, name) = (target.side().label(), target.name());
    match target.reload() {
        Ok(()) => {
            counts.ok += 1;
            counter!(names::TLS_RELOADS, "side" => side, "name" => name.to_owned(), "result" => "ok")
                .increment(1);
            info!(
                side,
                name,
                "tls reloaded: the {side} TLS of {name} ({why}); new connections use the new files, open ones keep theirs"
            );
        }
        Err(e) => {
            counts.failed += 1;
            counter!(names::TLS_RELOADS, "side" => side, "name" => name.to_owned(), "result" => "error")
                .increment(1);
            error!(
                side,
                name,
                "tls reload refused: the {side} TLS of {name} ({why}): {e}; the certificate in use stays"
            );
        }
    }
}

#[cfg(test)]
mod tests;
