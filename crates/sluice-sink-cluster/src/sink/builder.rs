//! [`KafkaSinkClusterBuilder`]: validates the sink's config once, makes the
//! [`Shared`] state every client connection of a source uses, starts the
//! peer health checks, and builds each connection's [`KafkaSinkCluster`].

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Once};
use std::time::Duration;

use sluice_auth::token::TokenTask;
use sluice_broker::{BrokerAddress, BrokerConnectOptions};
use sluice_chain::readiness::{self, ProbeTargets, Readiness};
use sluice_chain::{ConnectionContext, Sink, SinkBuilder};
use sluice_cluster::exchange::Tries;
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_config::KafkaSinkClusterConfig;
use sluice_tls as tls;
use sluice_tls::reload::Reload;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::auth::Authn;
use super::fetch::Consume;
use super::io::Io;
use super::{KafkaSinkCluster, Leave, SinkClusterError};
use crate::health::Health;
use crate::pool::Pool;
use crate::shared::{ApiVersionsCache, SaslRequired, Shared};
use crate::shared_view::SharedClusterView;
use sluice_cluster::client_auth::ClientAuth;
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::topology::SluiceNodes;

/// How long an internal request may wait for its answer when the config sets
/// no read timeout.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

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
                api_versions: ApiVersionsCache::default(),
                request_timeout: cfg.read_timeout().unwrap_or(DEFAULT_REQUEST_TIMEOUT),
                tokens,
                health: Health::process_wide(),
                leave_errors_after: super::leave::errors_after(
                    cfg.check_shotover_peers_delay_ms.map(Duration::from_millis),
                ),
                sasl_required: SaslRequired::new(cfg.requires_authentication()),
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

    /// The sink for one client connection, unboxed.
    pub(super) fn build_cluster(&self, ctx: &ConnectionContext) -> KafkaSinkCluster {
        self.start_peers();
        KafkaSinkCluster {
            io: Io {
                shared: self.shared.clone(),
                pool: Pool::new(self.shared.clone()),
            },
            connection_id: ctx.connection_id,
            pending: VecDeque::new(),
            auth: Authn {
                gate: ClientAuth::new(self.shared.tokens.is_some())
                    .requiring(self.shared.sasl_required()),
                in_flight: 0,
            },
            tries: Tries::default(),
            fetch: Consume::default(),
            share: ShareSessions::default(),
            rebalance_wait: None,
            produce_gaps: ProduceGaps::default(),
        }
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
