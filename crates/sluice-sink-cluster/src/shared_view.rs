//! [`SharedClusterView`]: one [`ClusterView`] shared by all client connections
//! of a cluster sink.
//!
//! Why a `std::sync::RwLock` and not `ArcSwap`:
//! - Reads (every routed request) vastly outnumber writes (a metadata refresh,
//!   a forgotten coordinator), and an uncontended read lock is one atomic
//!   operation; ArcSwap's load is not meaningfully cheaper.
//! - Writes are small in-place edits (one topic, one coordinator). With ArcSwap
//!   each would clone the whole view (thousands of partitions) and need an
//!   RCU loop against concurrent writers.
//! - The guards are `!Send`, so holding one across an `.await` in a spawned
//!   task fails to compile: the "no lock across await" rule is enforced.
//!
//! It also applies what a follower's answer to a fetch says to the view
//! ([`SharedClusterView::after_follower_fetch`]).
//!
//! A panic while writing poisons a std lock; the view is only a cache that the
//! next refresh repairs, so poisoning is ignored rather than propagated.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sluice_broker::BrokerAddress;
use sluice_cluster::error_codes::OFFSET_OUT_OF_RANGE;
use sluice_cluster::route::produce_fetch;
use sluice_cluster::topology::{BrokerId, ClusterView};
use sluice_codec::{CodecError, Response, ResponseKind};
use tracing::debug;

/// A [`ClusterView`] behind an `Arc<RwLock<_>>`. Clones share the view.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedClusterView(Arc<RwLock<ClusterView>>);

impl SharedClusterView {
    /// Locks the view for reading. Never hold the guard across an `.await`.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ClusterView> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks the view for writing. Never hold the guard across an `.await`.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, ClusterView> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// What Sluice does with a follower's answer to a consumer fetch
    /// (rack-aware routing, `topology/view/replica.rs`, may send one to an
    /// in-rack follower): the partitions it answered with an error are
    /// fenced (their fetches go back to the leader for a while), and its
    /// OFFSET_OUT_OF_RANGE, which the client would act on by resetting its
    /// position, reaches the client as the retriable NOT_LEADER_OR_FOLLOWER,
    /// so that the leader gets the last word (see `route/produce_fetch.rs`).
    /// `broker`: who answered (without a known id, nothing is done). Only
    /// a fenced partition takes the write lock.
    pub(crate) fn after_follower_fetch(
        &self,
        response: &mut Response,
        broker: Option<&BrokerAddress>,
    ) -> Result<(), CodecError> {
        let Some(answered_by) = broker.and_then(|b| b.id).map(BrokerId) else {
            return Ok(());
        };
        let version = response.api_version();
        let errors = {
            let ResponseKind::Fetch(fetch) = response.body()? else {
                return Ok(());
            };
            let view = self.read();
            produce_fetch::follower_errors(fetch, version, answered_by, |t, p| view.leader(t, p))
        };
        if errors.is_empty() {
            return Ok(());
        }
        {
            let now = tokio::time::Instant::now().into_std();
            let mut view = self.write();
            for e in &errors {
                view.fence_follower_fetch(&e.topic, e.partition, now);
            }
        }
        debug!(
            broker = answered_by.0,
            partitions = errors.len(),
            "a follower answered fetched partitions with errors; their fetches go to the leader for now"
        );
        if errors.iter().any(|e| e.error_code == OFFSET_OUT_OF_RANGE)
            && let ResponseKind::Fetch(fetch) = response.body_mut()?
        {
            produce_fetch::soften_follower_errors(fetch, version, &errors);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use sluice_cluster::topology::BrokerId;

    #[test]
    fn clones_share_one_view() {
        let shared = SharedClusterView::default();
        let other = shared.clone();
        assert_eq!(other.read().controller(), None);
        shared.write().set_controller(Some(BrokerId(3)));
        assert_eq!(other.read().controller(), Some(BrokerId(3)));
    }
}
