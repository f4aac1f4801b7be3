//! Internal requests: what Sluice asks the brokers for itself, to fill the
//! view before it routes a client's request.
//!
//! - a Metadata refresh, for partitions without a known leader, or for the
//!   broker list before any broker is known (Metadata v12 where the broker
//!   supports it: topic ids, lookup by id);
//! - FindCoordinator, for groups and transactional ids without a known
//!   coordinator (batched, v4+, where the broker supports it).
//!
//! Each is sent to any broker ([`BrokerConnection::call`](sluice_broker::BrokerConnection::call))
//! and awaited inside `send`, bounded by the request timeout. A failure is logged and returned; callers route with
//! what they know, so the client gets a retriable Kafka error rather than a
//! closed connection.
//!
//! Concurrent client connections that miss the same topic each refresh it;
//! coalescing refreshes in the shared state is a possible optimization.

use std::collections::VecDeque;

use sluice_broker::Call;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use tracing::{debug, warn};

use super::{InternalRequestError, KafkaSinkCluster};
use crate::pool::ConnError;
use sluice_cluster::route::meta::{find_coordinator_requests, metadata_request};
use sluice_cluster::route::{BATCHED_FIND_COORDINATOR_VERSION, InternalVersions};
use sluice_cluster::topology::{CoordinatorKeyType, MetadataApplied, TopicRef};

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
}

/// Logs what applying a Metadata response left out of the view.
pub(super) fn log_applied(applied: &MetadataApplied) {
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
