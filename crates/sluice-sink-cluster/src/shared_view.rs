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
//! A panic while writing poisons a std lock; the view is only a cache that the
//! next refresh repairs, so poisoning is ignored rather than propagated.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sluice_cluster::topology::ClusterView;

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
