//! The `KafkaSinkCluster` sink: routes every request of a client connection
//! to the broker (or brokers) that must serve it.
//!
//! [`KafkaSinkClusterBuilder`] owns what all client connections of a source
//! share ([`Shared`]): the config, the Sluice nodes and their health checks,
//! the [`ClusterView`](sluice_cluster::topology::ClusterView) Sluice routes by, the
//! connect options (TLS), and each broker's ApiVersions. Each client
//! connection gets a [`KafkaSinkCluster`]: its own broker connections
//! ([`crate::pool`]) and its queue of owed responses
//! ([`crate::pending`]).
//!
//! `send` routes a request ([`sluice_cluster::route`] decides, `send.rs` does it):
//! internal requests that fill the view (a Metadata refresh when a partition
//! has no known leader, FindCoordinator when a coordinator is unknown) are
//! sent and awaited there, before the client's request goes out. `recv` waits
//! for the oldest entry's parts, combines them and post-processes the answer
//! (`finish.rs`); a part its connection never wrote (the connection failed
//! first) is sent once more, in place, on a reopened connection first.
//!
//! Every client request ends in exactly one of three ways: a broker answer, a
//! synthesized Kafka error (a failed broker's part is answered with a
//! retriable error, counted in `sluice_synthesized_error_responses_total`), or
//! a closed client connection with a logged reason (when the API has no place
//! for an error, e.g. Metadata before v13 after its retry failed too).
//!
//! Authentication ([`sluice_cluster::client_auth`]): until the client is authenticated (or
//! has shown it uses no authentication) only ApiVersions, SaslHandshake and
//! SaslAuthenticate leave Sluice, on the client's auth connection to a first
//! contact point. Every SASL answer is settled before the next request is
//! admitted: `send` waits for SASL answers in flight first (the source awaits
//! `send` to completion, so a request pipelined behind SaslAuthenticate
//! cannot overtake the broker's verdict). Then every broker connection opened
//! for the client authenticates like it: PLAIN credentials are replayed, and
//! a SCRAM user's connections use the user's delegation token from the
//! sink's one token task (`authorize_scram_over_mtls`). A failed
//! authentication answers the client with the broker's error, then closes
//! it: [`Sink::pending`] counts the close as owed, and `recv` returns it as
//! an error once every earlier answer has gone out.

mod auth;
mod error;
mod fetch;
mod finish;
mod follower;
mod internal;
mod leave;
mod ready;
mod send;
mod share;
mod stalled;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use async_trait::async_trait;
use sluice_auth::token::{TokenTask, TokenTaskHandle};
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerError};
use sluice_chain::readiness::{self, ProbeTargets, Readiness};
use sluice_chain::{ChainError, ConnectionContext, Sink, SinkBuilder};
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_codec::kafka_protocol::messages::ApiVersionsResponse;
use sluice_codec::{Request, Response};
use sluice_config::KafkaSinkClusterConfig;
use sluice_tls::reload::Reload;
use sluice_tls::{self as tls, SharedConnector};
use tokio_util::sync::{CancellationToken, DropGuard};

pub(crate) use error::InternalRequestError;
pub use error::SinkClusterError;
use fetch::LazyFetchState;
pub use leave::Leave;
pub(crate) use share::ShareCombine;

use crate::close::CloseError;
use crate::pending::PendingResponse;
use crate::pool::Pool;
use crate::pool::health::Health;
use crate::shared_view::SharedClusterView;
use sluice_cluster::client_auth::ClientAuth;
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::topology::{BrokerId, ClusterView, SluiceNodes};

/// How long an internal request may wait for its answer when the config sets
/// no read timeout.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How often Sluice retries reaching a broker only to learn its ApiVersions.
const API_VERSIONS_RETRY: Duration = Duration::from_secs(30);

/// How long a broker's cached ApiVersions may answer clients without the
/// broker being asked again. Versions change only when a broker is upgraded
/// or its features are finalized; once this passes, the next client's
/// ApiVersions goes to a broker and refreshes its entry.
const API_VERSIONS_FRESH: Duration = Duration::from_secs(60);

/// What every client connection of one sink shares.
pub(crate) struct Shared {
    /// The sink's name, for logs.
    pub(crate) name: Arc<str>,
    /// The Sluice nodes clients are shown.
    pub(crate) nodes: SluiceNodes,
    /// The real cluster, as Sluice routes by it.
    pub(crate) view: SharedClusterView,
    /// How to connect (TLS server name set per broker by [`Shared::options_for`]).
    pub(crate) options: BrokerConnectOptions,
    /// TLS to the brokers, when configured (reloadable: each connection
    /// takes the connector current when it opens).
    pub(crate) tls: Option<SharedConnector>,
    /// Where to bootstrap from.
    pub(crate) contact_points: Vec<BrokerAddress>,
    /// The contact point the next bootstrap starts at.
    pub(crate) next_contact: AtomicUsize,
    /// Each broker's ApiVersions, by `host:port`, and when it was heard.
    api_versions: Mutex<HashMap<String, (Arc<ApiVersionsResponse>, tokio::time::Instant)>>,
    /// When Sluice last tried to reach a broker only to learn its versions.
    api_versions_attempts: Mutex<HashMap<BrokerId, tokio::time::Instant>>,
    /// How long an internal request may wait for its answer.
    pub(crate) request_timeout: Duration,
    /// The token task, with `authorize_scram_over_mtls`: one per sink,
    /// shared by all of its client connections.
    pub(crate) tokens: Option<TokenTaskHandle>,
    /// Each broker's health: down after failed connects, suspect after
    /// failed requests, and when any connection of the process last heard
    /// from it (see `pool/health.rs`).
    pub(crate) health: Health,
    /// How long after it starts leaving the node answers requests for its
    /// leaders and coordinators with errors (see `sink/leave.rs`).
    pub(crate) leave_errors_after: Duration,
    /// The brokers require SASL: from the configuration
    /// (`require_authentication`, `authorize_scram_over_mtls`), or learned
    /// from the first SaslHandshake a broker accepted. Clients connected
    /// from then on must authenticate (see `sluice_cluster::client_auth`).
    sasl_required: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("name", &self.name)
            .field("contact_points", &self.contact_points)
            .field("tls", &self.tls.is_some())
            .field("scram_over_mtls", &self.tokens.is_some())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Whether the brokers require SASL (see [`Shared::sasl_required`]'s field).
    pub(crate) fn sasl_required(&self) -> bool {
        self.sasl_required.load(Ordering::Relaxed)
    }

    /// A broker accepted a client's SaslHandshake: its listener requires
    /// SASL, and every client connected from now on must authenticate.
    pub(crate) fn learn_sasl_required(&self) {
        if !self.sasl_required.swap(true, Ordering::Relaxed) {
            tracing::info!(
                sink = %self.name,
                "the brokers require SASL (a broker accepted a SaslHandshake): clients that \
                 connect from now on must authenticate, under the before-authentication limits \
                 (set require_authentication: true to apply them from startup)"
            );
        }
    }

    /// Whether a request to `broker` failed recently (see `pool/health.rs`).
    pub(crate) fn is_suspect(&self, broker: &BrokerAddress) -> bool {
        self.health.is_suspect(broker, tokio::time::Instant::now())
    }

    /// Whether a request to broker `id` (at its address in `view`) failed
    /// recently; false for a broker the view does not know.
    pub(crate) fn is_suspect_id(&self, view: &ClusterView, id: BrokerId) -> bool {
        view.broker_address(id).is_some_and(|a| {
            u16::try_from(a.port)
                .is_ok_and(|port| self.is_suspect(&BrokerAddress::new(a.host.as_str(), port)))
        })
    }

    /// Whether broker `id` is known to sit outside the local Sluice node's
    /// rack (false when either rack is unknown).
    pub(crate) fn out_of_rack(&self, view: &ClusterView, id: BrokerId) -> bool {
        let local = self.nodes.local_rack();
        !local.is_empty() && view.broker_rack(id).is_some_and(|rack| &**rack != local)
    }

    /// The connect options for `addr` (TLS verifies the broker's own name).
    pub(crate) fn options_for(
        &self,
        addr: &BrokerAddress,
    ) -> Result<BrokerConnectOptions, BrokerError> {
        let mut options = self.options.clone();
        if let Some(connector) = &self.tls {
            let name =
                sluice_tls::server_name(&addr.host).map_err(|e| BrokerError::TlsHandshake {
                    broker: addr.clone(),
                    reason: e.to_string(),
                })?;
            options.tls = Some((connector.current(), name));
        }
        Ok(options)
    }

    /// The cached ApiVersions of the broker at `addr`.
    pub(crate) fn api_versions_of(&self, addr: &BrokerAddress) -> Option<Arc<ApiVersionsResponse>> {
        let key = addr.host_port().to_string();
        self.api_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .map(|(versions, _)| Arc::clone(versions))
    }

    /// Caches the ApiVersions of the broker at `addr`.
    pub(crate) fn remember_api_versions(
        &self,
        addr: &BrokerAddress,
        versions: ApiVersionsResponse,
    ) {
        let key = addr.host_port().to_string();
        self.api_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, (Arc::new(versions), tokio::time::Instant::now()));
    }

    /// The answer to a client's ApiVersions from the cache alone, when every
    /// known broker's versions (before any Metadata: every broker's heard so
    /// far) were heard within [`API_VERSIONS_FRESH`]: the
    /// latest heard first (its features are the ones kept), intersected with
    /// the others and with what Sluice offers. A client that connects, asks
    /// its versions and idles then costs no broker connection. `None` sends
    /// the request to a broker, whose answer refreshes the cache.
    pub(crate) fn cached_client_api_versions(&self) -> Option<ApiVersionsResponse> {
        let addresses: Vec<String> = self
            .view
            .read()
            .brokers()
            .map(|b| b.address.to_string())
            .collect();
        let now = tokio::time::Instant::now();
        let cache = self.api_versions.lock().unwrap_or_else(|p| p.into_inner());
        // Before any Metadata (a client that only asked its versions) the
        // brokers heard are all Sluice knows, as when a broker answers.
        let mut heard: Vec<&(Arc<ApiVersionsResponse>, tokio::time::Instant)> =
            if addresses.is_empty() {
                cache.values().collect()
            } else {
                addresses
                    .iter()
                    .map(|a| cache.get(a))
                    .collect::<Option<_>>()?
            };
        if heard
            .iter()
            .any(|(_, at)| now.duration_since(*at) > API_VERSIONS_FRESH)
        {
            return None;
        }
        heard.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
        let (latest, rest) = heard.split_first()?;
        let others: Vec<Arc<ApiVersionsResponse>> =
            rest.iter().map(|(v, _)| Arc::clone(v)).collect();
        Some(sluice_cluster::route::meta::client_api_versions(
            &latest.0, &others,
        ))
    }

    /// The cached ApiVersions of every known broker but the one at `except`.
    pub(crate) fn api_versions_of_others(
        &self,
        except: &BrokerAddress,
    ) -> Vec<Arc<ApiVersionsResponse>> {
        let except = except.host_port().to_string();
        let addresses: Vec<String> = self
            .view
            .read()
            .brokers()
            .map(|b| b.address.to_string())
            .filter(|a| *a != except)
            .collect();
        let cache = self.api_versions.lock().unwrap_or_else(|p| p.into_inner());
        addresses
            .iter()
            .filter_map(|a| cache.get(a).map(|(versions, _)| Arc::clone(versions)))
            .collect()
    }

    /// The known brokers whose ApiVersions Sluice has not heard yet and has
    /// not tried to reach for them lately (a broker that is down is tried at
    /// most once per [`API_VERSIONS_RETRY`], so that new clients do not each
    /// wait for its connect timeout). Records the attempt.
    pub(crate) fn brokers_to_ask_api_versions(&self) -> Vec<BrokerId> {
        let now = tokio::time::Instant::now();
        let missing = self.brokers_missing_api_versions();
        let mut attempts = self
            .api_versions_attempts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        missing
            .into_iter()
            .filter(|id| {
                let due = attempts
                    .get(id)
                    .is_none_or(|at| now.duration_since(*at) >= API_VERSIONS_RETRY);
                if due {
                    attempts.insert(*id, now);
                }
                due
            })
            .collect()
    }

    /// The known brokers whose ApiVersions Sluice has not heard yet.
    pub(crate) fn brokers_missing_api_versions(&self) -> Vec<BrokerId> {
        let brokers: Vec<(BrokerId, String)> = self
            .view
            .read()
            .brokers()
            .map(|b| (b.id, b.address.to_string()))
            .collect();
        let cache = self.api_versions.lock().unwrap_or_else(|p| p.into_inner());
        brokers
            .into_iter()
            .filter(|(_, a)| !cache.contains_key(a))
            .map(|(id, _)| id)
            .collect()
    }
}

/// Builds a [`KafkaSinkCluster`] for each client connection, and runs the
/// peer health checks while it lives.
pub struct KafkaSinkClusterBuilder {
    shared: Arc<Shared>,
    /// Its TLS to brokers and, with SCRAM over mTLS, the token task's.
    tls_reloads: Vec<Arc<dyn Reload>>,
    peers_every: Option<Duration>,
    peers_started: Once,
    shutdown: CancellationToken,
    _stop_peers: DropGuard,
}

impl std::fmt::Debug for KafkaSinkClusterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkClusterBuilder")
            .field("shared", &self.shared)
            .field("peers_every", &self.peers_every)
            .finish_non_exhaustive()
    }
}

impl KafkaSinkClusterBuilder {
    /// Validates `cfg`, prepares TLS and, with `authorize_scram_over_mtls`,
    /// the token task (which contacts brokers only once a client needs a
    /// token). The peer health checks start now when
    /// called inside a tokio runtime, else with the first client connection.
    pub fn new(cfg: &KafkaSinkClusterConfig) -> Result<Self, SinkClusterError> {
        let nodes = SluiceNodes::from_config(cfg)?;
        if cfg.first_contact_points.is_empty() {
            return Err(SinkClusterError::NoContactPoints);
        }
        let contact_points = cfg
            .first_contact_points
            .iter()
            .map(|p| BrokerAddress::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut options = BrokerConnectOptions::new(cfg.connect_timeout());
        options.read_timeout = cfg.read_timeout();
        let name = cfg.name.as_deref().unwrap_or("KafkaSinkCluster");
        let tls = cfg
            .tls
            .as_ref()
            .map(|t| tls::reloadable_connector(name, t))
            .transpose()?;
        let mut tls_reloads: Vec<Arc<dyn Reload>> = Vec::new();
        tls_reloads.extend(tls.iter().map(|t| Arc::clone(t) as Arc<dyn Reload>));
        let shutdown = CancellationToken::new();
        let tokens = match &cfg.authorize_scram_over_mtls {
            Some(scram) => {
                let mtls_name = format!("{name}/authorize_scram_over_mtls");
                let connector = tls::reloadable_connector(&mtls_name, &scram.tls)
                    .map_err(|e| SinkClusterError::ScramOverMtls(e.into()))?;
                tls_reloads.push(Arc::clone(&connector) as Arc<dyn Reload>);
                Some(TokenTask::spawn_over(
                    scram,
                    connector,
                    shutdown.child_token(),
                )?)
            }
            None => None,
        };
        let builder = Self {
            tls_reloads,
            shared: Arc::new(Shared {
                name: Arc::from(name),
                nodes,
                view: SharedClusterView::default(),
                options,
                tls,
                contact_points,
                next_contact: AtomicUsize::new(0),
                api_versions: Mutex::new(HashMap::new()),
                api_versions_attempts: Mutex::new(HashMap::new()),
                request_timeout: cfg.read_timeout().unwrap_or(DEFAULT_REQUEST_TIMEOUT),
                tokens,
                health: Health::process_wide(),
                leave_errors_after: leave::errors_after(
                    cfg.check_shotover_peers_delay_ms.map(Duration::from_millis),
                ),
                sasl_required: AtomicBool::new(cfg.requires_authentication()),
            }),
            peers_every: cfg.check_shotover_peers_delay_ms.map(Duration::from_millis),
            peers_started: Once::new(),
            _stop_peers: shutdown.clone().drop_guard(),
            shutdown,
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            builder.start_peers();
        }
        Ok(builder)
    }

    /// The handle that makes this sink's node leave what clients are shown
    /// at shutdown (see [`Leave`]).
    pub fn leave_handle(&self) -> Leave {
        Leave::new(self.shared.nodes.clone())
    }

    /// Starts the peer health checks once (needs a tokio runtime).
    fn start_peers(&self) {
        let Some(every) = self.peers_every else {
            return;
        };
        self.peers_started.call_once(|| {
            crate::peers::spawn(
                self.shared.nodes.clone(),
                every,
                self.shared.options.connect_timeout,
                self.shutdown.clone(),
            );
        });
    }
}

impl SinkBuilder for KafkaSinkClusterBuilder {
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn Sink> {
        Box::new(self.build_cluster(ctx))
    }

    /// Authentication is required once the brokers are known to require
    /// SASL (configured, or learned from a SaslHandshake they accepted).
    /// Before that a client that never sends SASL cannot be told from one
    /// of a cluster without SASL (whose clients may sit idle after
    /// ApiVersions), so no before-authentication limit applies.
    fn authenticates_clients(&self) -> bool {
        self.shared.sasl_required()
    }

    fn tls_reloads(&self) -> Vec<Arc<dyn Reload>> {
        self.tls_reloads.clone()
    }

    fn start_readiness(&self, cancel: &CancellationToken) -> Option<Arc<Readiness>> {
        Some(readiness::spawn(
            &self.shared.name,
            Arc::clone(&self.shared) as Arc<dyn ProbeTargets>,
            readiness::PROBE_INTERVAL,
            cancel.clone(),
        ))
    }
}

impl KafkaSinkClusterBuilder {
    /// The sink for one client connection, unboxed.
    fn build_cluster(&self, ctx: &ConnectionContext) -> KafkaSinkCluster {
        self.start_peers();
        KafkaSinkCluster {
            shared: self.shared.clone(),
            connection_id: ctx.connection_id,
            connections: Pool::new(self.shared.clone()),
            pending: VecDeque::new(),
            auth: ClientAuth::new(self.shared.tokens.is_some())
                .requiring(self.shared.sasl_required()),
            sasl_in_flight: 0,
            head_resent: Vec::new(),
            fetch: LazyFetchState::default(),
            share: ShareSessions::default(),
            room_bytes: 0,
            rebalance_wait: None,
            produce_gaps: ProduceGaps::default(),
        }
    }
}

/// One client connection's sink: its broker connections, the responses it
/// is owed, in request order, and where its authentication stands.
pub struct KafkaSinkCluster {
    shared: Arc<Shared>,
    connection_id: u64,
    /// Its broker connections: the only way a request reaches a broker.
    connections: Pool,
    /// Boxed, so that the queue of an idle connection is a few pointers.
    pending: VecDeque<Box<PendingResponse>>,
    auth: ClientAuth<CloseError>,
    /// SASL requests whose answers are not settled yet.
    sasl_in_flight: usize,
    /// The parts (by index) of the oldest pending entry already sent again
    /// after failing unsent; each is sent again at most once.
    head_resent: Vec<usize>,
    /// Fetch parts still out after their fetch was answered, and their
    /// answers, for the client's next fetch (see [`sluice_cluster::consume`]);
    /// made on the first fetch.
    fetch: LazyFetchState,
    /// The client's share sessions with Sluice and Sluice's with the
    /// brokers (see [`sluice_cluster::route::share`]).
    share: ShareSessions,
    /// The room the client's memory budgets have, as the source last told
    /// (see `Sink::set_room_bytes`): what is read ahead must fit in it.
    room_bytes: usize,
    /// The longest rebalance timeout of the client's JoinGroups: how long a
    /// SyncGroup may wait at the coordinator for the group's leader, which
    /// its own body does not say (see `sluice_codec::wait`).
    rebalance_wait: Option<Duration>,
    /// The partitions whose idempotent batches were failed unsent, whose
    /// later batches are held back until the client resends from the gap
    /// (see [`sluice_cluster::route::produce_order`]).
    produce_gaps: ProduceGaps,
}

impl Drop for KafkaSinkCluster {
    fn drop(&mut self) {
        self.close_fetch_sessions();
    }
}

impl std::fmt::Debug for KafkaSinkCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkCluster")
            .field("name", &self.shared.name)
            .field("connection_id", &self.connection_id)
            .field("connections", &self.connections)
            .field("pending", &self.pending.len())
            .field("auth", &self.auth)
            .finish()
    }
}

#[async_trait]
impl Sink for KafkaSinkCluster {
    fn name(&self) -> &str {
        &self.shared.name
    }

    async fn send(&mut self, request: Request, _ctx: &ConnectionContext) -> Result<(), ChainError> {
        self.settle_sasl().await?;
        if let Some(entry) = self.admit(request).await? {
            self.pending.push_back(Box::new(entry));
        }
        Ok(())
    }

    async fn recv(&mut self, _ctx: &ConnectionContext) -> Result<Response, ChainError> {
        loop {
            let stall_check = self.next_stall_check();
            let Some(head) = self.pending.front_mut() else {
                if let Some(reason) = self.auth.closing() {
                    return Err(reason.clone().into());
                }
                return std::future::pending().await;
            };
            // Cancel-safe: each part keeps its receiver until its result is
            // stored. Meanwhile, a broker owing anything past its wait is
            // checked on (see `sink/stalled.rs`).
            if let Some(at) = stall_check {
                let stalled = tokio::select! {
                    () = head.wait_parts() => false,
                    () = tokio::time::sleep_until(at) => true,
                };
                if stalled {
                    self.check_stalled().await;
                    continue;
                }
            } else {
                head.wait_parts().await;
            }
            if self.resend_unsent_parts().await?
                || self.retry_head_elsewhere().await?
                || self.fetch_head_waits().await?
            {
                continue;
            }
            let Some(entry) = self.pending.pop_front() else {
                continue;
            };
            self.head_resent.clear();
            return self.finish(*entry);
        }
    }

    fn pending(&self) -> usize {
        // A client being closed is owed the close, after its answers.
        self.pending.len() + usize::from(self.auth.closing().is_some())
    }

    /// The consume path's parked parts and stashed answers
    /// (`consume/kept.rs`), and the client's share sessions.
    fn kept_bytes(&self) -> usize {
        self.fetch.kept_bytes() + self.share.kept_bytes()
    }

    fn set_room_bytes(&mut self, bytes: usize) {
        self.room_bytes = bytes;
    }

    /// Where authentication is required: authenticated (the gate closes a
    /// client that tries anything else). Otherwise: at once (see
    /// `authenticates_clients`).
    fn authenticated(&self) -> bool {
        !self.auth.required() || self.auth.decided()
    }
}

/// The time the core's decisions are taken at: tokio's clock (paused in the
/// timer tests) as a `std` instant, which is what the core takes.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
