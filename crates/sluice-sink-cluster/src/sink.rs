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
//! has no known leader or before any broker is known, FindCoordinator,
//! batched where the broker supports it, when a coordinator is unknown) are
//! sent to any broker and awaited there, bounded by the request timeout,
//! before the client's request goes out; a failed one is logged, and the
//! request is routed with what is known, so the client gets a retriable
//! Kafka error rather than a closed connection. `recv` waits
//! for the oldest entry's parts and does what [`sluice_cluster::exchange`]
//! decides (`finish.rs`): a part its connection never wrote (the connection
//! failed first) is sent once more, in place, on a reopened connection; the
//! parts' answers are combined by the core and the answer post-processed.
//! While it waits, a broker owing anything past its wait is checked on
//! (`stalled.rs`).
//!
//! Every client request ends in exactly one of three ways: a broker answer, a
//! synthesized Kafka error (a failed broker's part is answered with a
//! retriable error, counted in `sluice_synthesized_error_responses_total`), or
//! a closed client connection with a logged reason (when the API has no place
//! for an error, e.g. Metadata before v13 after its retry failed too).
//!
//! Authentication: see `auth.rs`.

mod auth;
mod builder;
mod error;
mod fetch;
mod finish;
mod leave;
mod ready;
mod send;
mod share;
mod stalled;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_broker::{BrokerAddress, BrokerError, Call};
use sluice_chain::{ChainError, ConnectionContext, Sink};
use sluice_cluster::exchange::Tries;
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Request, Response};
use tokio::time::Instant;
use tracing::{debug, warn};

pub(crate) use crate::shared::Shared;
pub use builder::KafkaSinkClusterBuilder;
pub(crate) use error::InternalRequestError;
pub use error::SinkClusterError;
use fetch::LazyFetchState;
pub use leave::Leave;

use crate::close::CloseError;
use crate::health::Verdict;
use crate::pending::PendingResponse;
use crate::pool::{ConnError, Pool};
use sluice_cluster::client_auth::ClientAuth;
use sluice_cluster::route::meta::{find_coordinator_requests, metadata_request};
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::route::{BATCHED_FIND_COORDINATOR_VERSION, InternalVersions};
use sluice_cluster::topology::{BrokerId, CoordinatorKeyType, MetadataApplied, TopicRef};
use stalled::{RECHECK_EVERY, STALL_AFTER};

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
    /// What was already tried for the oldest pending entry (see
    /// [`sluice_cluster::exchange`]).
    tries: Tries,
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

impl KafkaSinkCluster {
    /// Sends an internal request, built from the chosen broker's versions, to
    /// any broker and waits, within the request timeout, for its answer.
    /// Returns the version used and the answer.
    async fn internal_request<C: Call>(
        &mut self,
        build: impl FnOnce(InternalVersions) -> (i16, C),
    ) -> Result<(i16, C::Response), InternalRequestError> {
        let api = C::API;
        let (_, conn) = self.connections.any(None).await.map_err(|e| match e {
            ConnError::Broker(source) => InternalRequestError::Broker { api, source },
            ConnError::Fatal(source) => InternalRequestError::Fatal { api, source },
        })?;
        let versions =
            InternalVersions::choose(self.shared.api_versions_of(conn.address()).as_deref());
        let (version, body) = build(versions);
        let answer = conn
            .call(version, body, self.shared.request_timeout)
            .await?;
        Ok((version, answer))
    }

    /// Refreshes `topics` (or only the broker list, for `None`) from any
    /// broker into the view.
    pub(super) async fn refresh_metadata(
        &mut self,
        topics: Option<&[TopicRef]>,
    ) -> Result<(), InternalRequestError> {
        let view = self.shared.view.clone();
        let result = self
            .internal_request(|versions| {
                let request = metadata_request(topics, versions.metadata, &view.read());
                (versions.metadata, request)
            })
            .await;
        let (version, metadata) = match result {
            Ok(answer) => answer,
            Err(e) => {
                warn!("metadata refresh failed: {e}");
                return Err(e);
            }
        };
        let applied = self.shared.view.write().apply_metadata(version, &metadata);
        log_applied(&applied);
        self.connections.on_metadata(&applied);
        debug!(
            topics = metadata.topics.len(),
            brokers = metadata.brokers.len(),
            "metadata refreshed"
        );
        Ok(())
    }

    /// Looks up the coordinators of `keys` into the view: one batched
    /// request where the broker supports it (v4+), else one per key.
    pub(super) async fn find_coordinators(
        &mut self,
        key_type: CoordinatorKeyType,
        keys: &[String],
    ) -> Result<(), InternalRequestError> {
        let mut remaining: VecDeque<String> = keys.iter().cloned().collect();
        while !remaining.is_empty() {
            let mut asked: Vec<String> = Vec::new();
            let result = self
                .internal_request(|versions| {
                    let v = versions.find_coordinator;
                    asked = if v >= BATCHED_FIND_COORDINATOR_VERSION {
                        remaining.drain(..).collect()
                    } else {
                        remaining.pop_front().into_iter().collect()
                    };
                    let request = find_coordinator_requests(key_type, &asked, v)
                        .pop()
                        .unwrap_or_default();
                    (v, request)
                })
                .await;
            let (version, found) = match result {
                Ok(answer) => answer,
                Err(e) => {
                    warn!("coordinator lookup failed: {e}");
                    return Err(e);
                }
            };
            // v0-3 answer for the one key asked, which they do not repeat.
            let key = (version < BATCHED_FIND_COORDINATOR_VERSION)
                .then(|| asked.first().map(|k| StrBytes::from_string(k.clone())))
                .flatten();
            self.shared.view.write().apply_find_coordinator(
                version,
                key_type,
                key.as_ref(),
                &found,
            );
        }
        Ok(())
    }

    /// Checks on the brokers whose parts have stalled (see `sink/stalled.rs`);
    /// parts owed by a broker that left the cluster metadata are failed.
    pub(super) async fn check_stalled(&mut self) {
        let now = Instant::now();
        let mut quiet_brokers: BTreeSet<(i32, String)> = BTreeSet::new();
        // Each with the API of the request found waiting there, for the log.
        let mut suspects: Vec<(BrokerAddress, ApiKey)> = Vec::new();
        let connections = &self.connections;
        let parts = self.pending.iter_mut().flat_map(|e| {
            let api = e.api_key;
            e.parts.iter_mut().map(move |part| (api, part))
        });
        for (api, part) in parts {
            // Answered, but behind an answer the client has not taken yet.
            part.settle_if_answered();
            if part.stall_check_at().is_none_or(|at| at > now) {
                continue;
            }
            let Some(clock) = part.stall.as_mut() else {
                continue;
            };
            clock.check_at = now + RECHECK_EVERY;
            // A broker working through a long queue answers as it goes,
            // and one whose answers to other connections of the sink flow
            // is alive: only one that nobody has heard from lately is
            // stalled.
            let quiet = connections.quiet_for(part.target, now) >= STALL_AFTER;
            if quiet && let Some(broker) = &part.broker {
                let key = (broker.id.unwrap_or(-1), broker.to_string());
                let first = quiet_brokers.insert(key);
                let again = std::mem::replace(&mut clock.checked, true);
                let suspect = again && now >= clock.suspect_from;
                if suspect && !suspects.iter().any(|(b, _)| b == broker) {
                    suspects.push((broker.clone(), api));
                } else if first {
                    debug!(broker = %broker, api = ?api, "a broker has not answered a request within its wait; checking whether it left the cluster");
                }
            }
        }
        if quiet_brokers.is_empty() {
            return;
        }
        // Only a broker still quiet when checked again is suspect: a false
        // alarm costs the one Metadata request below.
        for (broker, api) in &suspects {
            if let Verdict::Warn { quieted } = self.shared.health.failed(broker, now) {
                warn!(
                    broker = %broker,
                    api = ?api,
                    quieted,
                    "a broker has not answered a request within its wait, nor since; checking whether it left the cluster"
                );
            }
        }
        // The Metadata request may queue behind a long wait on the
        // connection it goes out on: the client's answers do not wait for it
        // longer than until the next check. A failure is logged inside; the
        // parts keep waiting and are checked again at their next stall time.
        match tokio::time::timeout(RECHECK_EVERY, self.refresh_metadata(None)).await {
            // Parts of brokers no longer listed fail; their connections end
            // (nothing unread reaches a resumed broker, nothing queues behind).
            Ok(Ok(())) => {
                let listed: BTreeSet<BrokerId> =
                    self.shared.view.read().brokers().map(|b| b.id).collect();
                let mut departed = Vec::new();
                for entry in &mut self.pending {
                    entry.abandon_departed(&listed, &mut departed);
                }
                for (target, broker) in departed {
                    let error = BrokerError::LeftCluster { broker };
                    self.connections.abort(target, error);
                }
            }
            Ok(Err(_)) => {}
            Err(_) => {
                debug!("no metadata within {RECHECK_EVERY:?}; the stalled parts are checked again")
            }
        }
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
            let stall_check = self.pending.iter().filter_map(|e| e.stall_check_at()).min();
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
            if self.try_head_again().await? || self.fetch_head_waits().await? {
                continue;
            }
            let Some(entry) = self.pending.pop_front() else {
                continue;
            };
            self.tries = Tries::default();
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

/// Logs what applying a Metadata response left out of the view.
fn log_applied(applied: &MetadataApplied) {
    for older in &applied.older_epochs_ignored {
        debug!(
            topic = %older.topic.0,
            partition = older.partition,
            old_epoch = older.kept,
            new_epoch = older.ignored,
            "ignoring partition metadata older than the view"
        );
    }
}
