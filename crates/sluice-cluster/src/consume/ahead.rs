//! Read-ahead: a broker that just served a client's fetch with records is
//! asked again at once, for where the client will read next.
//!
//! A client has one fetch in flight per node it sees: directly, one per
//! broker; through one Sluice node, one in all. And a Java consumer leaves
//! out of its fetch the partitions whose records it still buffers. So
//! while it works through one broker's records, directly the other brokers
//! are already fetching for it; through Sluice they would wait for its next
//! fetch. Read-ahead closes that gap. When Sluice answers a fetch, each
//! broker that
//! - served at least one partition of it with records, and
//! - has nothing else of the connection's out (no parked part, nothing
//!   owed on its connection), and
//! - its connection needs no replacing (its token or SASL session is not
//!   about to end; a part ahead is checked as every request is, and the
//!   client's next fetch, sent as a new part, replaces the connection),
//!
//! gets one new part, parked like any part still out (see the parent
//! module): its partitions of the fetch, each at the offset the client will
//! ask next. That is the offset after the last whole record batch served
//! (a client's position after it has read them: Kafka's consumers end a
//! fetch's records there, skipped and aborted batches included), or the
//! offset asked if it was answered empty. The client's next fetch adopts
//! the part; a partition asked again at another offset (a seek) is not
//! served from it, exactly as with any parked part.
//!
//! ```text
//! t=0   fetch p1..p6 answered: A (p1,p2), B (p3,p4), C (p5,p6) with records
//!       -> parts ahead to A, B, C, each at the offsets after those records
//! t=2   the parts ahead answer; their records wait in the broker connections
//! t=4   the client drained p1: fetch p1 at the offset asked ahead
//!       -> served at once from A's part; p2's records stashed for later
//!       -> A asked ahead for p1 again
//! ```
//!
//! A broker that answered empty is not asked ahead: Sluice never polls an
//! idle broker faster than the client's own fetches would. What a part
//! ahead may bring must fit the room the client's memory budgets have (its
//! `max_bytes` is lowered to it; with less than 64 KiB, nothing is read
//! ahead), and counts against them while it is parked, so reading ahead
//! never takes a client past its budget. A part ahead
//! that fails is dropped (the client never asked for it); one that answers
//! after the client stopped fetching is stashed and dropped with the stash.

use crate::hash::Map;

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::fetch_request::FetchPartition;
use sluice_codec::kafka_protocol::messages::fetch_response::PartitionData;
use sluice_codec::kafka_protocol::messages::{FetchRequest, TopicName};
use std::time::Instant;
use uuid::Uuid;

use super::asked::{Asked, asked_on};
use super::{PartMeta, kept, push_partition};
use crate::topology::BrokerId;

/// A part to send ahead, and what it asks, to park once sent.
#[derive(Debug)]
pub struct ReadAhead {
    /// Where to.
    pub broker: BrokerId,
    /// What (at the fetch's version, sessionless until the broker session
    /// is applied).
    pub request: FetchRequest,
    /// What it asks, for [`super::Parked`].
    pub meta: PartMeta,
    /// The client's id, for its header (quotas are the client's).
    pub client_id: Option<Bytes>,
}

/// The least room worth a part ahead: a clamped Fetch's least `max_bytes`
/// (see `sluice-source/src/budget.rs`).
const MIN_AHEAD_BYTES: usize = 64 * 1024;

impl ReadAhead {
    /// Fits the part into `room_bytes` of the client's budgets: its
    /// `max_bytes` lowered to the room, if need be. Returns what it may
    /// bring then, or `None` when there is too little room to read ahead.
    pub fn fit(&mut self, room_bytes: usize) -> Option<usize> {
        if room_bytes < MIN_AHEAD_BYTES {
            return None;
        }
        let room = i32::try_from(room_bytes).unwrap_or(i32::MAX);
        self.request.max_bytes = self.request.max_bytes.min(room);
        self.meta.may_bring_bytes = kept::may_bring_bytes(&self.request);
        Some(self.meta.may_bring_bytes)
    }
}

/// Gathers, while a fetch's answer is assembled, each broker's partitions
/// at the offsets the client reads next.
#[derive(Debug, Default)]
pub(super) struct Gather {
    brokers: Vec<Ahead>,
}

/// One broker's part ahead, being gathered.
#[derive(Debug)]
struct Ahead {
    broker: BrokerId,
    request: FetchRequest,
    /// Whether any of its partitions was served with records.
    had_records: bool,
}

impl Gather {
    /// Notes one partition of the answer (of topic `topic`, id
    /// `topic_id`): `asked` is the client's entry for it, `data` what the
    /// client is answered with, `broker` where it is routed (`None`:
    /// unroutable).
    pub(super) fn note(
        &mut self,
        (topic, topic_id): (&TopicName, Uuid),
        broker: Option<BrokerId>,
        asked: &FetchPartition,
        data: &PartitionData,
    ) {
        let Some(broker) = broker else {
            return;
        };
        let Some((next, had_records)) = next_position(asked, data) else {
            return;
        };
        let at = match self.brokers.iter().position(|a| a.broker == broker) {
            Some(at) => at,
            None => {
                self.brokers.push(Ahead {
                    broker,
                    request: FetchRequest::default(),
                    had_records: false,
                });
                self.brokers.len() - 1
            }
        };
        let Some(ahead) = self.brokers.get_mut(at) else {
            return;
        };
        ahead.had_records |= had_records;
        push_partition(&mut ahead.request, topic, topic_id, &next);
    }

    /// The parts ahead: one per broker that served records, built on
    /// `base` (the fetch's part request with no topics) at `version`, for
    /// the client `client_id`, at `now`. What each asks is built on what
    /// the last part to its broker asked, taken from `bases` (see
    /// [`asked`](super::asked)).
    pub(super) fn finish(
        self,
        base: &FetchRequest,
        (version, client_id, now): (i16, Option<&Bytes>, Instant),
        bases: &mut Map<BrokerId, Asked>,
    ) -> Vec<ReadAhead> {
        self.brokers
            .into_iter()
            .filter(|a| a.had_records)
            .map(|a| {
                let request = base.clone().with_topics(a.request.topics);
                let may_bring_bytes = kept::may_bring_bytes(&request);
                let asked = asked_on(bases.remove(&a.broker), &request, version);
                ReadAhead {
                    broker: a.broker,
                    request,
                    meta: PartMeta {
                        broker: a.broker,
                        version,
                        asked,
                        sent_in: None,
                        learned: false,
                        sent_at: now,
                        may_bring_bytes,
                        ahead: true,
                    },
                    client_id: client_id.cloned(),
                }
            })
            .collect()
    }
}

/// The client's entry for the partition once it has read `data`, and
/// whether `data` had records; `None` when where it reads next is not
/// known (an error, a hint that sends it elsewhere, records that do not
/// parse as whole v2 batches).
fn next_position(asked: &FetchPartition, data: &PartitionData) -> Option<(FetchPartition, bool)> {
    if data.error_code != 0
        || data.diverging_epoch.epoch >= 0
        || data.current_leader.leader_id.0 >= 0
        || data.preferred_read_replica.0 >= 0
        || data.snapshot_id.epoch >= 0
    {
        return None;
    }
    let records = data.records.as_deref().unwrap_or_default();
    if records.is_empty() {
        return Some((asked.clone(), false));
    }
    let end = batches_end(records)?;
    if end.next_offset <= asked.fetch_offset {
        return None;
    }
    let mut next = asked.clone().with_fetch_offset(end.next_offset);
    if asked.last_fetched_epoch >= 0 {
        next.last_fetched_epoch = end.leader_epoch;
    }
    Some((next, true))
}

/// Where the whole record batches of a fetch answer end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchesEnd {
    /// The offset after the last whole batch.
    next_offset: i64,
    /// That batch's partition leader epoch.
    leader_epoch: i32,
}

/// Reads the headers of the record batches in `records` (magic v2, the
/// only format Kafka 4 writes; the records themselves are not touched) to
/// find where the last whole one ends. A broker may cut the last batch
/// short at the fetch's size limit: a partial batch is not counted, as
/// clients do not count it. `None` without a whole batch, or at a batch of
/// another magic.
fn batches_end(records: &[u8]) -> Option<BatchesEnd> {
    // base offset (8), length (4), leader epoch (4), magic (1), crc (4),
    // attributes (2), last offset delta (4): the length counts from the
    // leader epoch on.
    const LENGTH_AT: usize = 8;
    const EPOCH_AT: usize = 12;
    const MAGIC_AT: usize = 16;
    const DELTA_AT: usize = 23;
    const HEADER_LEN: usize = DELTA_AT + 4;
    let mut at = 0;
    let mut end = None;
    while let Some(header) = records.get(at..at + HEADER_LEN) {
        let base = i64::from_be_bytes(header.get(..8)?.try_into().ok()?);
        let length = i32::from_be_bytes(header.get(LENGTH_AT..EPOCH_AT)?.try_into().ok()?);
        let epoch = i32::from_be_bytes(header.get(EPOCH_AT..MAGIC_AT)?.try_into().ok()?);
        let delta = i32::from_be_bytes(header.get(DELTA_AT..HEADER_LEN)?.try_into().ok()?);
        if *header.get(MAGIC_AT)? != 2 {
            return None;
        }
        let whole = usize::try_from(length).ok()?.checked_add(EPOCH_AT)?;
        if whole < HEADER_LEN || records.len() - at < whole {
            break;
        }
        end = Some(BatchesEnd {
            next_offset: base.checked_add(i64::from(delta))?.checked_add(1)?,
            leader_epoch: epoch,
        });
        at += whole;
    }
    end
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};

    use super::*;

    /// A v2 batch header at `base` with `count` offsets and `body` bytes of
    /// records after the header.
    fn batch(base: i64, count: i32, epoch: i32, body: usize) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i64(base);
        let length = 49 + body - 12;
        b.put_i32(i32::try_from(length).unwrap());
        b.put_i32(epoch);
        b.put_u8(2);
        b.put_u32(0);
        b.put_i16(0);
        b.put_i32(count - 1);
        b.put_bytes(0, 49 - 27 + body);
        b
    }

    #[test]
    fn the_end_is_after_the_last_whole_batch() {
        let mut records = batch(100, 5, 3, 40);
        records.extend_from_slice(&batch(105, 10, 4, 10));
        let end = batches_end(&records).unwrap();
        assert_eq!(
            end,
            BatchesEnd {
                next_offset: 115,
                leader_epoch: 4
            }
        );
    }

    #[test]
    fn a_batch_cut_short_is_not_counted() {
        let mut records = batch(100, 5, 3, 40);
        let second = batch(105, 10, 3, 100);
        records.extend_from_slice(&second[..60]);
        assert_eq!(batches_end(&records).unwrap().next_offset, 105);
        assert_eq!(batches_end(&second[..60]), None);
        assert_eq!(batches_end(&second[..10]), None);
    }

    #[test]
    fn another_magic_or_a_bad_length_is_not_guessed_at() {
        let mut old = batch(0, 1, 0, 0);
        old[16] = 1;
        assert_eq!(batches_end(&old), None);
        let mut short = batch(0, 1, 0, 0);
        short[8..12].copy_from_slice(&3_i32.to_be_bytes());
        assert_eq!(batches_end(&short), None);
        let mut negative = batch(0, 1, 0, 0);
        negative[8..12].copy_from_slice(&(-1_i32).to_be_bytes());
        assert_eq!(batches_end(&negative), None);
    }

    fn asked(offset: i64, last_fetched_epoch: i32) -> FetchPartition {
        FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(offset)
            .with_last_fetched_epoch(last_fetched_epoch)
            .with_partition_max_bytes(1 << 20)
    }

    fn answered(records: Option<Bytes>) -> PartitionData {
        PartitionData::default().with_records(records)
    }

    #[test]
    fn the_next_position_follows_records_and_keeps_an_empty_answer() {
        let records = batch(100, 5, 7, 10).freeze();
        let (next, had) = next_position(&asked(100, -1), &answered(Some(records.clone()))).unwrap();
        assert_eq!(
            (next.fetch_offset, next.last_fetched_epoch, had),
            (105, -1, true)
        );
        let (next, _) = next_position(&asked(100, 6), &answered(Some(records))).unwrap();
        assert_eq!((next.fetch_offset, next.last_fetched_epoch), (105, 7));
        let (next, had) = next_position(&asked(42, -1), &answered(None)).unwrap();
        assert_eq!((next.fetch_offset, had), (42, false));
    }

    #[test]
    fn errors_hints_and_records_behind_the_offset_stop_the_read_ahead() {
        let records = batch(100, 5, 7, 10).freeze();
        let error = answered(Some(records.clone())).with_error_code(6);
        assert!(next_position(&asked(100, -1), &error).is_none());
        let mut moved = answered(None);
        moved.current_leader.leader_id = 2.into();
        assert!(next_position(&asked(100, -1), &moved).is_none());
        let mut diverging = answered(None);
        diverging.diverging_epoch.epoch = 3;
        assert!(next_position(&asked(100, -1), &diverging).is_none());
        assert!(next_position(&asked(105, -1), &answered(Some(records))).is_none());
    }
}
