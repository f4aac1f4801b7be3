//! The client's `max_bytes` over an assembled answer.
//!
//! Each part asks its broker for a share of the client's `max_bytes`, but
//! one answer can hold more than the parts of one fetch: stashed answers
//! and parked parts adopted from earlier fetches (each asked with the share
//! of the fetch that sent it) come with the new parts. A fetch of three
//! partitions after one of two, say, holds a stashed half, an adopted half
//! and a new third: 1.33 times `max_bytes`. A client may size its receive
//! buffer to what it asked for (librdkafka's `receive.message.max.bytes`
//! set close to `fetch.max.bytes` fails the receive), and the client's
//! memory budget counts on it.
//!
//! So the answer is filled as a broker fills one: partition by partition,
//! the first with records whatever its size (a broker, too, returns a
//! first batch larger than `max_bytes`), the others while they fit. The
//! stashed ones go first, being the oldest: a partition left over is not
//! lost but stashed at the position asked (and counted for the client's
//! budget: see [`super::kept`]), and the client, answered nothing for it,
//! asks there again next time. Records are never split: a partition is
//! served whole or later.

use crate::hash::{Map, Set};

use sluice_codec::kafka_protocol::messages::fetch_response::PartitionData;

use super::{Arrived, FetchState, PartitionKey, Position, Source, Stashed, TopicPlan, records_len};

/// The partitions (by topic and partition slot) whose records do not fit
/// `max_bytes` once the others are in: served later. `answered` holds the
/// parts' answers by part index and partition.
pub(super) fn left_over(
    topics: &[TopicPlan],
    answered: &Map<(usize, PartitionKey), PartitionData>,
    max_bytes: i32,
) -> Set<(usize, usize)> {
    let mut over = Set::default();
    let Some(limit) = usize::try_from(max_bytes).ok().filter(|m| *m > 0) else {
        return over;
    };
    let mut stashed = Vec::new();
    let mut fresh = Vec::new();
    for (t, topic) in topics.iter().enumerate() {
        for (p, plan) in topic.partitions.iter().enumerate() {
            let bytes = match &plan.source {
                Source::Stashed(data) => {
                    stashed.push(((t, p), records_len(data)));
                    continue;
                }
                Source::Part(part) => {
                    let key = (topic.key.clone(), plan.request.partition);
                    answered.get(&(*part, key)).map_or(0, records_len)
                }
                Source::Pending | Source::Error(_) => 0,
            };
            fresh.push(((t, p), bytes));
        }
    }
    let mut used: usize = 0;
    for (slot, bytes) in stashed.into_iter().chain(fresh) {
        if bytes == 0 {
            continue;
        }
        if used > 0 && used.saturating_add(bytes) > limit {
            super::count_built(1);
            over.insert(slot);
        } else {
            used = used.saturating_add(bytes);
        }
    }
    over
}

impl<P> FetchState<P> {
    /// Stashes a partition's answer (from `source`, asked at `at`) that
    /// does not fit the client's `max_bytes` (see [`bound`]).
    pub(super) fn leave_over(
        &mut self,
        key: PartitionKey,
        at: Position,
        source: Source,
        arrived: &mut Arrived,
        now: std::time::Instant,
    ) {
        let (data, frame) = match source {
            Source::Stashed(data) => (Some(*data), None),
            Source::Part(part) => (
                arrived.answered.remove(&(part, key.clone())),
                arrived.frames.get(&part).cloned(),
            ),
            Source::Pending | Source::Error(_) => (None, None),
        };
        if let Some(data) = data {
            let data = Box::new(data);
            let key = super::kept::owned_key(&key);
            super::count_built(1);
            self.stash.insert(key, Stashed::new(at, data, frame, now));
        }
    }
}
