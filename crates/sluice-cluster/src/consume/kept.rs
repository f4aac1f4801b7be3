//! What the consume path keeps for a client between its fetches, in bytes,
//! for the client connection's memory budget.
//!
//! The source counts each request the chain owes a response for, and the
//! response once it is in hand (`sluice-source/src/budget.rs`). A parked
//! part is owed to no request: its fetch was answered early. What it brings
//! is held all the same, first in the broker connection's buffer and then
//! in the stash, until the client's next fetch takes or drops it. A client
//! that lets fetches be answered early and never sends the next would
//! otherwise make every broker it reads from hold one part's answer for it,
//! uncounted, for as long as the connection lives.
//!
//! So the sink reports [`FetchState::kept_bytes`] after each request and
//! response, and the source counts it against the connection's and the
//! process's budgets:
//! - a parked part counts what its answer may bring: its `max_bytes`, or
//!   less when its partitions' `partition_max_bytes` add up to less (a
//!   broker returns at least one record batch even above both, which the
//!   estimate, like Kafka's own fetch sizing, leaves out);
//! - a stashed partition counts what it keeps allocated. Its records are a
//!   slice of the broker's answer frame (nothing is copied on the way), and
//!   a slice keeps the whole frame: 1 KiB stashed from a 16 MiB answer
//!   whose other partitions were served holds 16 MiB. So a stashed
//!   partition left for a later fetch whose records are less than half
//!   their frame gets them copied out (at most the frame's size in all, and
//!   only for what outlives the fetch that stashed it); the others count
//!   their frame, once per frame. Their keys (topic names, below v13) are
//!   slices of a frame too, and are copied out as well;
//! - the client's fetch session counts its partitions: it lives as long as
//!   the connection, and every incremental fetch may add to it (a client
//!   can send one 100 MiB fetch of three million partitions).

use crate::hash::Set;
use std::sync::Arc;

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::FetchRequest;

use sluice_codec::kafka_protocol::messages::TopicName;
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::{FetchState, PartitionKey};
use crate::topology::TopicRef;

/// A broker answer frame that stashed records may be slices of.
#[derive(Debug)]
pub(super) struct Frame {
    /// Its size.
    bytes: usize,
}

impl Frame {
    /// A frame of `bytes` (`None` for 0: an answer not read from a broker).
    pub(super) fn of(bytes: usize) -> Option<Arc<Frame>> {
        (bytes > 0).then(|| Arc::new(Frame { bytes }))
    }
}

/// `name` in its own allocation: a decoded message's names are slices of
/// its frame, and one kept longer than the message keeps the whole frame.
pub(super) fn owned_name(name: &TopicName) -> TopicName {
    if name.is_empty() {
        return TopicName::default();
    }
    TopicName(StrBytes::from_string(name.to_string()))
}

/// `key` with its topic name (if it has one) in its own allocation.
pub(super) fn owned_key(key: &PartitionKey) -> PartitionKey {
    match &key.0 {
        TopicRef::Name(name) => (TopicRef::Name(owned_name(name)), key.1),
        TopicRef::Id(_) => key.clone(),
    }
}

/// What a stashed partition answer costs besides its records: the struct,
/// its box and its map entry, roughly.
const STASHED_OVERHEAD_BYTES: usize = 256;

/// What the answer to the part `request` may bring.
pub(super) fn may_bring_bytes(request: &FetchRequest) -> usize {
    let partitions: usize = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| usize::try_from(p.partition_max_bytes).unwrap_or(0))
        .fold(0, usize::saturating_add);
    usize::try_from(request.max_bytes)
        .unwrap_or(0)
        .min(partitions)
}

impl<P> FetchState<P> {
    /// The bytes kept for the client beyond the responses it is owed: the
    /// parked parts' possible answers, the stashed partitions and the
    /// client's fetch session.
    pub fn kept_bytes(&self) -> usize {
        let parked: usize = self.parked.iter().map(|p| p.meta.may_bring_bytes).sum();
        let mut frames = Set::default();
        let mut stashed = 0;
        for s in self.stash.values() {
            stashed += STASHED_OVERHEAD_BYTES;
            match &s.frame {
                Some(frame) if frames.insert(Arc::as_ptr(frame)) => stashed += frame.bytes,
                Some(_) => {}
                None => stashed += s.data.records.as_ref().map_or(0, Bytes::len),
            }
        }
        parked + stashed + self.sessions.held_bytes()
    }

    /// Copies out the records of stashed partitions that are less than half
    /// the frame they are a slice of, so that they stop holding it.
    pub(super) fn compact_stash(&mut self) {
        for s in self.stash.values_mut() {
            let Some(frame) = &s.frame else {
                continue;
            };
            let len = s.data.records.as_ref().map_or(0, Bytes::len);
            if len == 0 {
                s.frame = None;
            } else if len < frame.bytes / 2
                && let Some(records) = &mut s.data.records
            {
                *records = Bytes::copy_from_slice(records);
                s.frame = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

    use super::*;

    fn request(max_bytes: i32, partition_max: &[i32]) -> FetchRequest {
        let partitions = partition_max
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                FetchPartition::default()
                    .with_partition(i32::try_from(i).unwrap_or(0))
                    .with_partition_max_bytes(m)
            })
            .collect();
        FetchRequest::default()
            .with_max_bytes(max_bytes)
            .with_topics(vec![FetchTopic::default().with_partitions(partitions)])
    }

    #[test]
    fn a_part_may_bring_its_max_bytes_or_its_partitions_sum_if_less() {
        assert_eq!(
            may_bring_bytes(&request(50 << 20, &[1 << 20, 1 << 20])),
            2 << 20
        );
        assert_eq!(may_bring_bytes(&request(1000, &[1 << 20, 1 << 20])), 1000);
        assert_eq!(
            may_bring_bytes(&request(-1, &[1 << 20])),
            0,
            "nonsense counts 0"
        );
        assert_eq!(may_bring_bytes(&request(1 << 20, &[-5, 100])), 100);
    }
}
