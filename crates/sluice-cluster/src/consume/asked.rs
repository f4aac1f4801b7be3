//! What a part asks, by partition ([`PartMeta::asked`](super::PartMeta)),
//! built on what an earlier part of the connection asked of its broker.
//!
//! A part names every partition the client fetches from its broker, and
//! from one fetch to the next few of them move: a consumer of a thousand
//! partitions moves those it got records of. So the map of a part's
//! positions starts from the last one built for that broker (shared, not
//! copied: the part it belonged to is done with it) and takes in only the
//! partitions asked elsewhere. Only a part that leaves out some partition
//! of that map gets a map built afresh. The maps outlive the fetch that
//! made them, so their topic names are copied out of the client's request
//! frame (see `kept.rs`).

use std::sync::Arc;

use sluice_codec::kafka_protocol::messages::FetchRequest;

use super::kept::owned_key;
use super::{PartitionKey, Position, count_built};
use crate::hash::Map;
use crate::split::order::TopicEntry;

/// Each partition a part asks for, and where.
pub type Asked = Arc<Map<PartitionKey, Position>>;

/// What a part's `request` (at `version`) asks, built on `base`, the map
/// an earlier part to its broker asked, if there is one: the partitions at
/// other positions or new are put into it. When the base holds partitions
/// the part does not ask for (or there is none), the map is built afresh.
pub(super) fn asked_on(base: Option<Asked>, request: &FetchRequest, version: i16) -> Asked {
    let Some(mut base) = base else {
        return Arc::new(of_request(request, version));
    };
    let mut found: usize = 0;
    let mut changed = Vec::new();
    for topic in &request.topics {
        let key = topic.topic_ref(version);
        for p in &topic.partitions {
            let at = Position::of(p, request.isolation_level);
            let pkey = (key.clone(), p.partition);
            match base.get(&pkey) {
                Some(held) if *held == at => found += 1,
                Some(_) => {
                    found += 1;
                    changed.push((pkey, at));
                }
                None => changed.push((pkey, at)),
            }
        }
    }

    // Each partition is named once: the base holds no other.
    if found != base.len() {
        return Arc::new(of_request(request, version));
    }
    if !changed.is_empty() {
        count_built(changed.len());
        // Kept beyond the fetch: names in their own allocations.
        let changed = changed.into_iter().map(|(key, at)| (owned_key(&key), at));
        Arc::make_mut(&mut base).extend(changed);
    }
    base
}

/// Each partition of a part's `request` (at `version`) and where it asks.
fn of_request(request: &FetchRequest, version: i16) -> Map<PartitionKey, Position> {
    let partitions = request.topics.iter().map(|t| t.partitions.len()).sum();
    let mut asked = Map::with_capacity_and_hasher(partitions, Default::default());
    count_built(partitions);
    for topic in &request.topics {
        let key = owned_key(&(topic.topic_ref(version), 0)).0;
        for p in &topic.partitions {
            let at = Position::of(p, request.isolation_level);
            asked.insert((key.clone(), p.partition), at);
        }
    }
    asked
}
