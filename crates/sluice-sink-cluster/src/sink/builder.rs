//! The half of the sink shared by every client connection of a source:
//! [`KafkaSinkClusterBuilder`] and what it hands each connection's
//! [`KafkaSinkCluster`], [`Shared`] (the config, the Sluice nodes and their
//! health checks, the cluster view, the connect options, each broker's
//! ApiVersions and health), with the shared steps of an answer's
//! post-processing: the rewrites that need the view and the Sluice nodes,
//! and the cluster-wide ApiVersions answer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use sluice_auth::token::{TokenTask, TokenTaskHandle};
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerError};
use sluice_chain::readiness::{self, ProbeTargets, Readiness};
use sluice_chain::{ConnectionContext, Sink, SinkBuilder};
use sluice_cluster::exchange::Tries;
use sluice_cluster::rewrite::{RewriteError, Rewriter};
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_cluster::split::PartResult;
use sluice_codec::kafka_protocol::messages::ApiVersionsResponse;
use sluice_codec::{Response, ResponseKind};
use sluice_config::KafkaSinkClusterConfig;
use sluice_tls::reload::Reload;
use sluice_tls::{self as tls, SharedConnector};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::fetch::LazyFetchState;
use super::{KafkaSinkCluster, Leave, SinkClusterError};
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

impl Shared {
    /// Replaces a broker's ApiVersions answer with the cluster-wide one
    /// (an error answer, or one Sluice cannot read, goes back as it came),
    /// and caches the broker's.
    pub(crate) fn answer_api_versions(&self, response: &mut Response, broker: &BrokerAddress) {
        let (api, version) = (response.api_key(), response.api_version());
        let fresh = match response.body() {
            Ok(ResponseKind::ApiVersions(v)) if v.error_code == 0 => v.clone(),
            _ => return,
        };
        let others = self.api_versions_of_others(broker);
        let answer = sluice_cluster::route::meta::client_api_versions(&fresh, &others);
        self.remember_api_versions(broker, fresh);
        *response = Response::from_body(
            api,
            version,
            response.correlation_id(),
            ResponseKind::ApiVersions(answer),
        );
    }

    /// Rewrites a Metadata, FindCoordinator or DescribeCluster answer
    /// (`key`: a v0–3 FindCoordinator's) so that only Sluice nodes appear.
    pub(crate) fn rewrite(
        &self,
        response: &mut Response,
        key: Option<&str>,
    ) -> Result<(), RewriteError> {
        let nodes = self.nodes.snapshot();
        let view = self.view.read();
        Rewriter::new(&view, &nodes)
            .and_then(|r| r.rewrite_response(response, key))
            .map(drop)
    }

    /// Rewrites the leader hints of a Produce or Fetch answer to Sluice nodes.
    pub(crate) fn rewrite_leader_hints(&self, response: &mut Response) -> Result<(), RewriteError> {
        let nodes = self.nodes.snapshot();
        let view = self.view.read();
        Rewriter::new(&view, &nodes)
            .and_then(|r| r.rewrite_leader_hints(response))
            .map(drop)
    }

    /// Cuts each broker's fan-out answer down to what the local node is
    /// shown to own (see `rewrite/fan_out.rs`): `results[i]` is `brokers[i]`'s.
    pub(crate) fn cut_fan_out(
        &self,
        brokers: &[BrokerId],
        results: &mut [PartResult<ResponseKind>],
    ) -> Result<(), RewriteError> {
        let nodes = self.nodes.snapshot();
        let view = self.view.read();
        let rewriter = Rewriter::new(&view, &nodes)?;
        rewriter.fan_out(self.nodes.local_id(), brokers, results);
        Ok(())
    }
}

/// Builds a [`KafkaSinkCluster`] for each client connection, and runs the
/// peer health checks while it lives.
pub struct KafkaSinkClusterBuilder {
    pub(super) shared: Arc<Shared>,
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
                leave_errors_after: super::leave::errors_after(
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
    pub(super) fn build_cluster(&self, ctx: &ConnectionContext) -> KafkaSinkCluster {
        self.start_peers();
        KafkaSinkCluster {
            shared: self.shared.clone(),
            connection_id: ctx.connection_id,
            connections: Pool::new(self.shared.clone()),
            pending: VecDeque::new(),
            auth: ClientAuth::new(self.shared.tokens.is_some())
                .requiring(self.shared.sasl_required()),
            sasl_in_flight: 0,
            tries: Tries::default(),
            fetch: LazyFetchState::default(),
            share: ShareSessions::default(),
            room_bytes: 0,
            rebalance_wait: None,
            produce_gaps: ProduceGaps::default(),
        }
    }
}
