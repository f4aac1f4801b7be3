//! [`KafkaSource`]: the accept loop of one listener and its connection limit.
//!
//! The limit is a semaphore with `connection_limit` permits; each connection
//! task holds one for its whole life. With a soft limit (the default) the loop
//! takes a permit before calling `accept()`, so at the limit new clients wait in
//! the kernel's backlog until a slot frees. With a hard limit it accepts and, if
//! no permit is free, closes the socket at once.
//!
//! When the chain's sink authenticates clients (asked at each accept: a
//! sink may learn that its brokers require SASL while it runs),
//! connections not yet authenticated also hold a slot of a second, smaller cap,
//! `unauthenticated_connection_limit`, so that sockets that never
//! authenticate cannot take every slot of the first: over it, a new
//! connection is accepted and closed at once (`reason="unauthenticated_limit"`).
//! One client IP address may hold at most
//! `unauthenticated_connection_limit_per_address` of those slots, so that
//! one address re-opening sockets that never authenticate cannot lock every
//! other client out: over its share, a new connection from that address is
//! accepted and closed at once (`reason="unauthenticated_address_limit"`).
//! Both are taken at accept (a TLS handshake counts as unauthenticated) and
//! released when the client authenticates or the connection closes.
//!
//! Shutdown: when the token is cancelled the loop stops accepting and drops the
//! listening socket; each connection drains (see [`crate::connection`]), and
//! [`KafkaSource::run`] returns once every connection task has ended. With
//! [`SourceOptions::stop_accepting`] the loop stops accepting (and drops the
//! socket) earlier, when that token is cancelled, while the connections
//! already open go on being served until the shutdown token: how a Sluice
//! node leaves before it drains ([`KafkaSource::connections`] tells how many
//! are still open).

use std::any::Any;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use metrics::{counter, gauge};
use sluice_chain::{ChainBuilder, ConnectionContext};
use sluice_config::KafkaSourceConfig;
use sluice_metrics::names;
use sluice_tls::acceptor;
use sluice_tls::reload::Reload;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, error, info, warn};

use crate::address_shares::AddressShares;
use crate::connection::{self, ConnectionSettings, PreAuth};
use crate::{MemoryBudget, SourceError};

/// Default `connection_limit`.
pub(crate) const DEFAULT_CONNECTION_LIMIT: usize = 512;

/// How long the accept loop pauses after `accept()` fails (e.g. out of file
/// descriptors) before trying again.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Process-wide connection ids, so that logs of different sources never clash.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Settings that are not in the source's part of the topology file.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// At shutdown, how long a connection keeps writing responses to requests
    /// it already forwarded before it gives up on them and closes.
    pub drain_timeout: Duration,
    /// The memory budget every source of the process shares.
    pub memory: Arc<MemoryBudget>,
    /// When set, accepting stops when it is cancelled (before the shutdown
    /// token); open connections are served until shutdown.
    pub stop_accepting: Option<CancellationToken>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self {
            drain_timeout: Duration::from_secs(30),
            memory: MemoryBudget::new(sluice_config::topology::DEFAULT_MEMORY_BUDGET_BYTES),
            stop_accepting: None,
        }
    }
}

/// A bound Kafka listener, ready to [`run`](KafkaSource::run).
pub struct KafkaSource {
    listener: TcpListener,
    local_addr: SocketAddr,
    /// Reloadable: each client takes the acceptor current when it connects.
    tls: Option<acceptor::SharedAcceptor>,
    limit: Limit,
    /// The unauthenticated cap, for clients accepted while the sink
    /// authenticates clients.
    unauthenticated: Limit,
    /// Each client address's share of it.
    per_address: Arc<AddressShares>,
    chain: Arc<ChainBuilder>,
    settings: Arc<ConnectionSettings>,
    shutdown: CancellationToken,
    /// Stops accepting before shutdown ([`SourceOptions::stop_accepting`]).
    stop_accepting: Option<CancellationToken>,
    tracker: TaskTracker,
}

/// The connection tasks of a source, to wait for them from outside.
#[derive(Debug, Clone)]
pub struct Connections(TaskTracker);

impl Connections {
    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.0.len()
    }

    /// Resolves once the source has stopped accepting and every connection
    /// has closed.
    pub async fn all_closed(&self) {
        self.0.wait().await;
    }
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("name", &self.settings.source_name)
            .field("local_addr", &self.local_addr)
            .field("tls", &self.tls.is_some())
            .field("limit", &self.limit.max)
            .field("hard_limit", &self.limit.hard)
            .finish_non_exhaustive()
    }
}

/// The connection limit of a source.
struct Limit {
    permits: Arc<Semaphore>,
    max: usize,
    hard: bool,
}

impl KafkaSource {
    /// Loads the TLS files (if any) and binds `cfg.listen_addr`. Nothing is
    /// accepted until [`run`](KafkaSource::run) is called.
    pub async fn bind(
        cfg: &KafkaSourceConfig,
        chain: Arc<ChainBuilder>,
        opts: SourceOptions,
        shutdown: CancellationToken,
    ) -> Result<KafkaSource, SourceError> {
        check_config(cfg)?;
        let max = cfg.connection_limit.unwrap_or(DEFAULT_CONNECTION_LIMIT);
        let unauthenticated_max = cfg.unauthenticated_connection_limit_or_default();
        let per_address_max = cfg.unauthenticated_connection_limit_per_address_or_default();
        let tls = cfg
            .tls
            .as_ref()
            .map(|t| acceptor::reloadable_acceptor(&cfg.name, t))
            .transpose()
            .map_err(|error| SourceError::Tls {
                source_name: cfg.name.clone(),
                error,
            })?;
        let bind_err = |error| SourceError::Bind {
            source_name: cfg.name.clone(),
            addr: cfg.listen_addr.clone(),
            error,
        };
        let listener = TcpListener::bind(&cfg.listen_addr)
            .await
            .map_err(bind_err)?;
        let local_addr = listener.local_addr().map_err(bind_err)?;
        let settings = ConnectionSettings {
            source_name: Arc::from(cfg.name.as_str()),
            max_frame_bytes: cfg.max_frame_bytes_or_default(),
            idle_timeout: cfg.idle_timeout(),
            drain_timeout: opts.drain_timeout,
            write_timeout: cfg.write_timeout(),
            max_unauthenticated_frame_bytes: cfg.max_unauthenticated_frame_bytes_or_default(),
            authentication_timeout: cfg.authentication_timeout(),
            connection_budget_bytes: cfg.connection_memory_budget_bytes_or_default(),
            memory: opts.memory,
        };
        let stop_accepting = opts.stop_accepting;
        gauge!(names::MEMORY_BUDGET_BYTES, "scope" => "connection", "source" => cfg.name.clone())
            .set(settings.connection_budget_bytes as f64);
        let unauthenticated = Limit {
            permits: Arc::new(Semaphore::new(unauthenticated_max)),
            max: unauthenticated_max,
            hard: true,
        };
        info!(
            source = %cfg.name,
            addr = %local_addr,
            tls = tls.is_some(),
            mtls = cfg.tls.as_ref().is_some_and(|t| t.certificate_authority_path.is_some()),
            connection_limit = max,
            authenticates_clients = chain.authenticates_clients(),
            unauthenticated_connection_limit = unauthenticated.max,
            unauthenticated_connection_limit_per_address = per_address_max,
            "source {} listening on {local_addr}",
            cfg.name
        );
        Ok(KafkaSource {
            listener,
            local_addr,
            tls,
            limit: Limit {
                permits: Arc::new(Semaphore::new(max)),
                max,
                hard: cfg.hard_connection_limit.unwrap_or(false),
            },
            unauthenticated,
            per_address: AddressShares::new(per_address_max),
            chain,
            settings: Arc::new(settings),
            shutdown,
            stop_accepting,
            tracker: TaskTracker::new(),
        })
    }

    /// Its connection tasks, to count them or wait for them to close.
    pub fn connections(&self) -> Connections {
        Connections(self.tracker.clone())
    }

    /// The address the listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The listener's TLS, for reloading its files while it runs.
    pub fn tls_reload(&self) -> Option<Arc<dyn Reload>> {
        self.tls.as_ref().map(|t| Arc::clone(t) as Arc<dyn Reload>)
    }

    /// Accepts clients until the shutdown token (or
    /// [`SourceOptions::stop_accepting`]) is cancelled, then waits for every
    /// connection to drain and close.
    pub async fn run(self) -> Result<(), SourceError> {
        let tracker = self.tracker.clone();
        let source = Arc::clone(&self.settings.source_name);
        while let Some((tcp, client_addr, permit)) = self.next_client().await {
            if let Err(e) = tcp.set_nodelay(true) {
                debug!(source = %source, client = %client_addr, "cannot set TCP_NODELAY: {e}");
            }
            let pre_auth = if self.chain.authenticates_clients() {
                match self.pre_auth(client_addr) {
                    Ok(pre_auth) => Some(pre_auth),
                    Err(refusal) => {
                        self.reject_unauthenticated(tcp, client_addr, refusal);
                        continue;
                    }
                }
            } else {
                None
            };
            let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
            let ctx = ConnectionContext {
                connection_id: id,
                source_name: Arc::clone(&source),
                client_addr,
                local_addr: tcp.local_addr().unwrap_or(self.local_addr),
                tls_principal: None,
            };
            let client = connection::Client {
                ctx,
                tls: self.tls.as_ref().map(|t| t.current()),
                chain: Arc::clone(&self.chain),
                settings: Arc::clone(&self.settings),
                shutdown: self.shutdown.clone(),
                pre_auth,
            };
            // Everything logged for this client, by the source, the chain and
            // the broker connections it opens, carries this span's fields. An
            // ERROR-level span is enabled whatever the log level, so even a
            // WARN names its client.
            let span = tracing::error_span!(
                "client",
                source = %client.settings.source_name,
                conn = client.ctx.connection_id,
                client = %client.ctx.client_addr,
            );
            tracker.spawn(
                async move {
                    let (addr, id) = (client.ctx.client_addr, client.ctx.connection_id);
                    let source = Arc::clone(&client.settings.source_name);
                    if let Err(panic) = AssertUnwindSafe(client.run(tcp)).catch_unwind().await {
                        report_panic(&source, addr, id, panic.as_ref());
                    }
                    drop(permit);
                }
                .instrument(span),
            );
        }
        drop(self.listener);
        tracker.close();
        info!(
            source = %source,
            connections = tracker.len(),
            "source {source} stopped accepting; waiting for {} connection(s) to close",
            tracker.len()
        );
        tracker.wait().await;
        info!(source = %source, "source {source} stopped");
        Ok(())
    }

    /// The next client that may be served, with its connection permit; `None`
    /// once accepting stops.
    async fn next_client(&self) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
        loop {
            let early_permit = if self.limit.hard {
                None
            } else {
                tokio::select! {
                    biased;
                    () = self.accepting_stopped() => return None,
                    permit = Arc::clone(&self.limit.permits).acquire_owned() => Some(permit.ok()?),
                }
            };
            let (tcp, client_addr) = tokio::select! {
                biased;
                () = self.accepting_stopped() => return None,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        self.accept_failed(&e).await;
                        continue;
                    }
                },
            };
            let permit = match early_permit {
                Some(permit) => permit,
                None => match Arc::clone(&self.limit.permits).try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        self.reject_over_limit(tcp, client_addr);
                        continue;
                    }
                },
            };
            return Some((tcp, client_addr, permit));
        }
    }

    /// Resolves when accepting must stop: at shutdown, or earlier with
    /// [`SourceOptions::stop_accepting`].
    async fn accepting_stopped(&self) {
        match &self.stop_accepting {
            Some(early) => tokio::select! {
                () = early.cancelled() => {}
                () = self.shutdown.cancelled() => {}
            },
            None => self.shutdown.cancelled().await,
        }
    }

    /// Closes a connection over the hard limit.
    fn reject_over_limit(&self, tcp: TcpStream, client_addr: SocketAddr) {
        let source = &self.settings.source_name;
        counter!(names::CLIENT_CONNECTIONS_REJECTED, "source" => source.to_string(), "reason" => "limit")
            .increment(1);
        info!(
            source = %source,
            client = %client_addr,
            "client {client_addr}: refused, source {source} is at its hard limit of {} connections",
            self.limit.max
        );
        drop(tcp);
    }

    /// The slots a new unauthenticated client holds: its address's share
    /// first, then the source's cap.
    fn pre_auth(&self, client_addr: SocketAddr) -> Result<PreAuth, Refusal> {
        let address = self
            .per_address
            .take(client_addr.ip())
            .ok_or(Refusal::Address(self.per_address.max()))?;
        let slot = Arc::clone(&self.unauthenticated.permits)
            .try_acquire_owned()
            .map_err(|_| Refusal::Source(self.unauthenticated.max))?;
        Ok(PreAuth {
            _slot: slot,
            _address: Some(address),
            since: tokio::time::Instant::now(),
        })
    }

    /// Closes a connection over the unauthenticated cap or its address's
    /// share of it.
    fn reject_unauthenticated(&self, tcp: TcpStream, client_addr: SocketAddr, refusal: Refusal) {
        let source = &self.settings.source_name;
        let (reason, held) = match refusal {
            Refusal::Source(max) => (
                "unauthenticated_limit",
                format!(
                    "source {source} already holds {max} connections not yet authenticated (unauthenticated_connection_limit)"
                ),
            ),
            Refusal::Address(max) => (
                "unauthenticated_address_limit",
                format!(
                    "{} already holds {max} connections not yet authenticated (unauthenticated_connection_limit_per_address)",
                    client_addr.ip()
                ),
            ),
        };
        counter!(
            names::CLIENT_CONNECTIONS_REJECTED,
            "source" => source.to_string(),
            "reason" => reason
        )
        .increment(1);
        // At info, like the hard limit: a flood of sockets must not become a
        // flood of warnings; the counter tells operators.
        info!(
            source = %source,
            client = %client_addr,
            "client {client_addr}: refused, {held}"
        );
        drop(tcp);
    }

    /// Logs a failed `accept()` and pauses briefly, so that running out of file
    /// descriptors does not turn into a busy loop.
    async fn accept_failed(&self, e: &std::io::Error) {
        let source = &self.settings.source_name;
        warn!(source = %source, "source {source}: accept failed: {e}");
        tokio::select! {
            () = self.accepting_stopped() => {}
            () = tokio::time::sleep(ACCEPT_ERROR_BACKOFF) => {}
        }
    }
}

/// Why a new unauthenticated client was refused: the limit it hit.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// `unauthenticated_connection_limit`.
    Source(usize),
    /// `unauthenticated_connection_limit_per_address`.
    Address(usize),
}

/// Refuses values the source cannot use (the config's `validate()` refuses
/// them too; this keeps a hand-built config honest).
fn check_config(cfg: &KafkaSourceConfig) -> Result<(), SourceError> {
    let max = cfg.connection_limit.unwrap_or(DEFAULT_CONNECTION_LIMIT);
    let invalid = |field, reason: &str| SourceError::InvalidConfig {
        source_name: cfg.name.clone(),
        field,
        reason: reason.to_owned(),
    };
    if max == 0 {
        return Err(invalid("connection_limit", "must be at least 1"));
    }
    if max > Semaphore::MAX_PERMITS {
        return Err(invalid("connection_limit", "is too large"));
    }
    if cfg.max_frame_bytes == Some(0) {
        return Err(invalid("max_frame_bytes", "must be at least 1"));
    }
    if cfg.idle_timeout_secs == Some(0) {
        return Err(invalid("timeout", "must be at least 1 second"));
    }
    for (field, value) in [
        ("write_timeout_secs", cfg.write_timeout_secs),
        (
            "authentication_timeout_secs",
            cfg.authentication_timeout_secs,
        ),
    ] {
        if value == Some(0) {
            return Err(invalid(field, "must be at least 1 second"));
        }
    }
    if cfg.max_unauthenticated_frame_bytes == Some(0) {
        return Err(invalid(
            "max_unauthenticated_frame_bytes",
            "must be at least 1",
        ));
    }
    if cfg.unauthenticated_connection_limit_per_address_or_default() == 0 {
        return Err(invalid(
            "unauthenticated_connection_limit_per_address",
            "must be at least 1",
        ));
    }
    let unauthenticated_max = cfg.unauthenticated_connection_limit_or_default();
    if unauthenticated_max == 0 || unauthenticated_max > Semaphore::MAX_PERMITS {
        return Err(invalid(
            "unauthenticated_connection_limit",
            "must be from 1 to the semaphore's maximum",
        ));
    }
    Ok(())
}

/// Logs and counts a connection task that panicked. The panic ended that
/// task only: its socket, chain and budget were dropped as it unwound, and
/// every other connection goes on.
fn report_panic(source: &str, client: SocketAddr, id: u64, panic: &(dyn Any + Send)) {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    counter!(names::CLIENT_CONNECTION_PANICS, "source" => source.to_owned()).increment(1);
    counter!(names::ERRORS, "side" => "internal", "retriable" => "false").increment(1);
    error!(
        "client {client} (conn {id}): the connection task panicked ({what}); that connection is closed, the others are unaffected"
    );
}
