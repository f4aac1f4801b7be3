//! [`Shared`]: what every client connection of one sink shares (the Sluice
//! nodes, the cluster view, the connect options, each broker's ApiVersions
//! and health), with the shared steps of an answer's post-processing: the
//! rewrites that need the view and the Sluice nodes, and the cluster-wide
//! ApiVersions answer. The pool dials with it and the driver routes with it;
//! it sits below both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_auth::token::TokenTaskHandle;
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerError};
use sluice_cluster::rewrite::{RewriteError, Rewriter};
use sluice_cluster::split::PartResult;
use sluice_cluster::topology::{BrokerId, ClusterView, SluiceNodes};
use sluice_codec::kafka_protocol::messages::ApiVersionsResponse;
use sluice_codec::{Response, ResponseKind};
use sluice_tls::SharedConnector;

use crate::health::Health;
use crate::shared_view::SharedClusterView;

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
    /// Each broker's ApiVersions, and when Sluice last tried to learn them.
    pub(crate) api_versions: ApiVersionsCache,
    /// How long an internal request may wait for its answer.
    pub(crate) request_timeout: Duration,
    /// The token task, with `authorize_scram_over_mtls`: one per sink,
    /// shared by all of its client connections.
    pub(crate) tokens: Option<TokenTaskHandle>,
    /// Each broker's health: down after failed connects, suspect after
    /// failed requests, and when any connection of the process last heard
    /// from it (see `health.rs`).
    pub(crate) health: Health,
    /// How long after it starts leaving the node answers requests for its
    /// leaders and coordinators with errors (see `sink/leave.rs`).
    pub(crate) leave_errors_after: Duration,
    /// The brokers require SASL: from the configuration
    /// (`require_authentication`, `authorize_scram_over_mtls`), or learned
    /// from the first SaslHandshake a broker accepted. Clients connected
    /// from then on must authenticate (see `sluice_cluster::client_auth`).
    pub(crate) sasl_required: SaslRequired,
}

/// Each broker's ApiVersions, by `host:port`, and when it was heard; and
/// when Sluice last tried to reach a broker only to learn its versions.
#[derive(Debug, Default)]
pub(crate) struct ApiVersionsCache {
    heard: Mutex<HashMap<String, (Arc<ApiVersionsResponse>, tokio::time::Instant)>>,
    attempts: Mutex<HashMap<BrokerId, tokio::time::Instant>>,
}

/// Whether the brokers require SASL: set from the config, and once learned
/// never unset.
#[derive(Debug)]
pub(crate) struct SaslRequired(AtomicBool);

impl SaslRequired {
    pub(crate) fn new(required: bool) -> Self {
        Self(AtomicBool::new(required))
    }
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
        self.sasl_required.0.load(Ordering::Relaxed)
    }

    /// A broker accepted a client's SaslHandshake: its listener requires
    /// SASL, and every client connected from now on must authenticate.
    pub(crate) fn learn_sasl_required(&self) {
        if !self.sasl_required.0.swap(true, Ordering::Relaxed) {
            tracing::info!(
                sink = %self.name,
                "the brokers require SASL (a broker accepted a SaslHandshake): clients that \
                 connect from now on must authenticate, under the before-authentication limits \
                 (set require_authentication: true to apply them from startup)"
            );
        }
    }

    /// Whether a request to `broker` failed recently (see `health.rs`).
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
            .heard
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
            .heard
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
        let cache = self
            .api_versions
            .heard
            .lock()
            .unwrap_or_else(|p| p.into_inner());
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
        let cache = self
            .api_versions
            .heard
            .lock()
            .unwrap_or_else(|p| p.into_inner());
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
            .api_versions
            .attempts
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
        let cache = self
            .api_versions
            .heard
            .lock()
            .unwrap_or_else(|p| p.into_inner());
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
