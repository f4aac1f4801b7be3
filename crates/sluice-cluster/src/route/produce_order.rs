//! Keeping one partition's idempotent batches in order through one client
//! connection.
//!
//! An idempotent producer numbers each partition's batches (producer id,
//! epoch, base sequence), keeps several in flight, and a leader appends a
//! batch only if it follows the last one appended: a batch whose
//! predecessor is missing is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.
//! librdkafka answers that refusal, when the missing batch had itself failed
//! with a retriable error, by bumping the producer epoch: a transactional
//! producer must then abort its transaction.
//!
//! Talking to a broker directly, one partition's batches in flight all meet
//! the same broker in order, so a broker that refused a batch as "not the
//! leader" refuses the ones behind it too. A Sluice node decides each batch
//! on its own, by a view of the cluster that can change between two
//! requests of one connection: a Metadata refresh (its own, or another
//! client's) lands, a broker is marked down, a peer node comes up. Without a
//! rule, Sluice could answer a batch NOT_LEADER_OR_FOLLOWER unsent and
//! forward the next one a millisecond later, which its leader then refuses
//! as out of order:
//!
//! ```text
//! client ── Produce p2 seq 5701..5702 ──▶ Sluice: p2 not shown here (view A)
//!        ◀─ NOT_LEADER_OR_FOLLOWER ──────          (refused, never written)
//!                                         another refresh: view B shows p2 here
//! client ── Produce p2 seq 5703..5705 ──▶ Sluice ──▶ leader: 5701 missing
//!        ◀─ OUT_OF_ORDER_SEQUENCE_NUMBER ──────────  (epoch bump, txn aborted)
//! ```
//!
//! So when Sluice fails a batch without writing it (refused, or no
//! connection to its leader), it remembers that partition's gap on the
//! client connection ([`ProduceGaps`]), and fails the batches of the same
//! producer and epoch that come after it the same way, unsent, as a broker
//! that does not lead the partition would. The gap closes when a batch of
//! the partition is forwarded (the client resends from the gap, wherever the
//! view now routes it), when the producer's id or epoch changes, or after
//! [`GAP_WINDOW`]: batches the client had in flight behind the failed one
//! reach Sluice well within it, and a client that later, having resent the
//! gap through another node, comes back here with newer batches is held up
//! at most that long, with retriable errors.
//!
//! Batches without a producer id (not idempotent) carry no order to keep
//! and are never held.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::ProduceRequest;
use sluice_codec::{ApiKey, Request, RequestKind};

use crate::split::order::TopicEntry;
use crate::split::{Coordinators, PartitionLeaders, Routing, Unroutable};
use crate::topology::{BrokerId, CoordinatorKeyType, TopicRef};

/// The idempotent batches of a Produce that expects an answer (an
/// `acks=0` one is never refused: it has no answer to carry the error);
/// none for anything else.
pub fn idempotent_heads(body: &RequestKind, version: i16) -> Vec<(TopicRef, i32, BatchHead)> {
    match body {
        RequestKind::Produce(p) if p.acks != 0 => produce_heads(p, version),
        _ => Vec::new(),
    }
}

/// How long a partition's gap holds back the batches behind it.
pub const GAP_WINDOW: Duration = Duration::from_secs(10);

/// The most gaps one client connection keeps: one per partition it was
/// failed on within [`GAP_WINDOW`]; past it, the oldest are dropped.
const MAX_GAPS: usize = 4096;

/// What orders an idempotent batch: the head of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHead {
    /// The producer id (never negative here).
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The sequence number of the batch's first record.
    pub base_sequence: i32,
}

/// Byte offsets in a v2 record batch (KIP-98): baseOffset (8),
/// batchLength (4), partitionLeaderEpoch (4), magic (1), crc (4),
/// attributes (2), lastOffsetDelta (4), baseTimestamp (8), maxTimestamp (8),
/// then producerId (8), producerEpoch (2), baseSequence (4).
const MAGIC_AT: usize = 16;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;

/// The head of the first record batch in `records`, when it is a v2 batch
/// of an idempotent producer. Reads fixed offsets only: the records are
/// neither decoded nor copied.
pub fn batch_head(records: &[u8]) -> Option<BatchHead> {
    let magic = *records.get(MAGIC_AT)?;
    if magic != 2 {
        return None;
    }
    let id = records.get(PRODUCER_ID_AT..PRODUCER_ID_AT + 8)?;
    let epoch = records.get(PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2)?;
    let seq = records.get(BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4)?;
    let producer_id = i64::from_be_bytes(id.try_into().ok()?);
    let producer_epoch = i16::from_be_bytes(epoch.try_into().ok()?);
    let base_sequence = i32::from_be_bytes(seq.try_into().ok()?);
    (producer_id >= 0 && base_sequence >= 0).then_some(BatchHead {
        producer_id,
        producer_epoch,
        base_sequence,
    })
}

/// The idempotent batches of `request`: each partition with the head of its
/// first batch.
pub fn produce_heads(request: &ProduceRequest, version: i16) -> Vec<(TopicRef, i32, BatchHead)> {
    let mut out = Vec::new();
    for topic in &request.topic_data {
        let key = topic.topic_ref(version);
        for p in &topic.partition_data {
            if let Some(head) = p.records.as_deref().and_then(batch_head) {
                out.push((key.clone(), p.index, head));
            }
        }
    }
    out
}

/// A batch failed unsent, and when.
#[derive(Debug, Clone, Copy)]
struct Gap {
    head: BatchHead,
    at: Instant,
}

/// The partitions of one client connection whose idempotent batches Sluice
/// failed without writing them (see the module doc).
#[derive(Debug, Default)]
pub struct ProduceGaps {
    gaps: HashMap<(TopicRef, i32), Gap>,
}

impl ProduceGaps {
    /// Whether a batch headed `head` for `topic`/`partition` must be failed
    /// unsent: it comes after a batch of the same producer and epoch that
    /// was failed unsent less than [`GAP_WINDOW`] ago.
    pub fn holds(&self, topic: &TopicRef, partition: i32, head: &BatchHead, now: Instant) -> bool {
        self.gaps
            .get(&(topic.clone(), partition))
            .is_some_and(|gap| {
                gap.head.producer_id == head.producer_id
                    && gap.head.producer_epoch == head.producer_epoch
                    && head.base_sequence > gap.head.base_sequence
                    && now.saturating_duration_since(gap.at) < GAP_WINDOW
            })
    }

    /// The partitions of `heads` that [`holds`](Self::holds) holds back.
    pub fn held(&self, heads: &[(TopicRef, i32, BatchHead)], now: Instant) -> Vec<(TopicRef, i32)> {
        // The usual case, on every Produce: no gap, no lookup.
        if self.gaps.is_empty() {
            return Vec::new();
        }
        heads
            .iter()
            .filter(|(t, p, head)| self.holds(t, *p, head, now))
            .map(|(t, p, _)| (t.clone(), *p))
            .collect()
    }

    /// Records that the batch headed `head` was failed without being
    /// written. A gap already open for the same producer and epoch keeps
    /// its earlier batch and time: the later one is behind it.
    pub fn failed_unsent(
        &mut self,
        topic: &TopicRef,
        partition: i32,
        head: BatchHead,
        now: Instant,
    ) {
        if self.holds(topic, partition, &head, now) {
            return;
        }
        if self.gaps.len() >= MAX_GAPS {
            self.gaps
                .retain(|_, gap| now.saturating_duration_since(gap.at) < GAP_WINDOW);
        }
        if self.gaps.len() >= MAX_GAPS
            && let Some(oldest) = self
                .gaps
                .iter()
                .min_by_key(|(_, g)| g.at)
                .map(|(k, _)| k.clone())
        {
            self.gaps.remove(&oldest);
        }
        self.gaps
            .insert((topic.clone(), partition), Gap { head, at: now });
    }

    /// After a Produce with idempotent batches (`heads`) was split: the
    /// partitions no broker could take (`unroutable`: answered unsent) open
    /// a gap, the others close theirs. Returns the batches that opened one.
    pub fn after_split<'h>(
        &mut self,
        heads: &'h [(TopicRef, i32, BatchHead)],
        unroutable: &[Unroutable],
        now: Instant,
    ) -> Vec<&'h (TopicRef, i32, BatchHead)> {
        let mut opened = Vec::new();
        for entry in heads {
            let (topic, partition, head) = entry;
            let unsent = unroutable.iter().any(|u| {
                matches!(u, Unroutable::Partition { topic: t, partition: p } if t == topic && p == partition)
            });
            if unsent {
                self.failed_unsent(topic, *partition, *head, now);
                opened.push(entry);
            } else {
                self.forwarded(topic, *partition);
            }
        }
        opened
    }

    /// Records that a batch of `topic`/`partition` was forwarded: the
    /// client resent from the gap, which is closed.
    pub fn forwarded(&mut self, topic: &TopicRef, partition: i32) {
        if !self.gaps.is_empty() {
            self.gaps.remove(&(topic.clone(), partition));
        }
    }

    /// Records that `request`, which its failed connection never wrote, is
    /// sent again: for a Produce, its batches are the ones their
    /// partitions' gaps wait for.
    pub fn resending(&mut self, request: &mut Request) {
        let version = request.api_version();
        if request.api_key() == ApiKey::Produce
            && let Ok(RequestKind::Produce(p)) = request.body()
        {
            for (topic, partition, _) in produce_heads(p, version) {
                self.forwarded(&topic, partition);
            }
        }
    }

    /// How many gaps are open or expired but not yet dropped.
    pub fn len(&self) -> usize {
        self.gaps.len()
    }

    /// Whether no gap is kept.
    pub fn is_empty(&self) -> bool {
        self.gaps.is_empty()
    }
}

/// A routing that knows no leader for the partitions in `held`, so that the
/// split answers them NOT_LEADER_OR_FOLLOWER unsent, and routes the rest as
/// `routing` does.
pub struct Holding<'r, R: ?Sized> {
    /// How the rest is routed.
    pub routing: &'r R,
    /// The partitions held back.
    pub held: &'r [(TopicRef, i32)],
}

impl<R: Routing + ?Sized> Holding<'_, R> {
    fn holds(&self, topic: &TopicRef, partition: i32) -> bool {
        self.held.iter().any(|(t, p)| t == topic && *p == partition)
    }
}

/// Every method is `routing`'s, the held partitions aside: a routing that
/// picks another replica to fetch from (in the client's rack) keeps doing so.
impl<R: Routing + ?Sized> PartitionLeaders for Holding<'_, R> {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        if self.holds(topic, partition) {
            None
        } else {
            self.routing.leader(topic, partition)
        }
    }

    fn fetch_replica(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        if self.holds(topic, partition) {
            None
        } else {
            self.routing.fetch_replica(topic, partition)
        }
    }
}

impl<R: Routing + ?Sized> Coordinators for Holding<'_, R> {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        self.routing.coordinator(key_type, key)
    }
}

impl<R: Routing + ?Sized> Routing for Holding<'_, R> {
    fn brokers(&self) -> Vec<BrokerId> {
        self.routing.brokers()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn topic() -> TopicRef {
        TopicRef::Name(sluice_codec::kafka_protocol::messages::TopicName(
            sluice_codec::kafka_protocol::protocol::StrBytes::from_static_str("t"),
        ))
    }

    fn head(producer_id: i64, producer_epoch: i16, base_sequence: i32) -> BatchHead {
        BatchHead {
            producer_id,
            producer_epoch,
            base_sequence,
        }
    }

    /// A v2 batch header with the given producer fields, then `tail` bytes.
    fn batch(producer_id: i64, epoch: i16, seq: i32) -> Vec<u8> {
        let mut b = vec![0u8; 61];
        b[MAGIC_AT] = 2;
        b[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
        b[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&epoch.to_be_bytes());
        b[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&seq.to_be_bytes());
        b
    }

    #[test]
    fn the_head_is_read_from_fixed_offsets_of_a_v2_batch() {
        assert_eq!(batch_head(&batch(1000, 3, 5701)), Some(head(1000, 3, 5701)));
        // Not idempotent: no producer id.
        assert_eq!(batch_head(&batch(-1, -1, -1)), None);
        // Older magic, or too short to hold a head: nothing to order.
        let mut v1 = batch(1000, 3, 5701);
        v1[MAGIC_AT] = 1;
        assert_eq!(batch_head(&v1), None);
        assert_eq!(batch_head(&batch(1000, 3, 5701)[..56]), None);
        assert_eq!(batch_head(&[]), None);
    }

    #[test]
    fn batches_behind_a_failed_one_are_held_until_the_client_resends_from_it() {
        let (t, now) = (topic(), Instant::now());
        let mut gaps = ProduceGaps::default();
        gaps.failed_unsent(&t, 2, head(1000, 0, 5701), now);
        let soon = now + Duration::from_millis(20);
        assert!(
            gaps.holds(&t, 2, &head(1000, 0, 5703), soon),
            "in flight behind it"
        );
        assert!(
            !gaps.holds(&t, 1, &head(1000, 0, 5703), soon),
            "another partition"
        );
        assert!(
            !gaps.holds(&t, 2, &head(1000, 1, 5703), soon),
            "a new epoch"
        );
        assert!(
            !gaps.holds(&t, 2, &head(2000, 0, 5703), soon),
            "another producer"
        );
        assert!(
            !gaps.holds(&t, 2, &head(1000, 0, 5701), soon),
            "the resend itself"
        );
        // A later batch failed too keeps the gap where it began.
        gaps.failed_unsent(&t, 2, head(1000, 0, 5703), soon);
        assert!(gaps.holds(&t, 2, &head(1000, 0, 5703), soon));
        // The resend is forwarded: the gap closes, the rest follows it.
        gaps.forwarded(&t, 2);
        assert!(!gaps.holds(&t, 2, &head(1000, 0, 5703), soon));
        assert!(gaps.is_empty());
    }

    #[test]
    fn a_split_opens_gaps_for_partitions_answered_unsent_and_closes_the_others() {
        let mut gaps = ProduceGaps::default();
        let now = Instant::now();
        let heads = vec![(topic(), 0, head(7, 1, 10)), (topic(), 1, head(7, 1, 20))];
        gaps.failed_unsent(&topic(), 0, head(7, 1, 5), now);
        let unroutable = vec![Unroutable::Partition {
            topic: topic(),
            partition: 1,
        }];
        let opened = gaps.after_split(&heads, &unroutable, now);
        assert_eq!(opened, vec![&heads[1]]);
        assert!(
            !gaps.holds(&topic(), 0, &head(7, 1, 11), now),
            "partition 0 was forwarded: its gap closed"
        );
        assert!(
            gaps.holds(&topic(), 1, &head(7, 1, 21), now),
            "partition 1 holds the batches behind its unsent one"
        );
    }

    #[test]
    fn only_a_produce_that_expects_an_answer_has_batches_to_keep_in_order() {
        use sluice_codec::kafka_protocol::messages::produce_request::{
            PartitionProduceData, TopicProduceData,
        };
        let records = bytes::Bytes::from(batch(1000, 3, 5701));
        let data = |name: &'static str| {
            TopicProduceData::default()
                .with_name(sluice_codec::kafka_protocol::messages::TopicName(
                    sluice_codec::kafka_protocol::protocol::StrBytes::from_static_str(name),
                ))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records.clone())),
                ])
        };
        let produce = |acks| {
            RequestKind::Produce(
                ProduceRequest::default()
                    .with_acks(acks)
                    .with_topic_data(vec![data("t")]),
            )
        };
        assert_eq!(
            idempotent_heads(&produce(-1), 9),
            vec![(topic(), 0, head(1000, 3, 5701))]
        );
        assert!(idempotent_heads(&produce(0), 9).is_empty(), "acks=0");
        let fetch = RequestKind::Fetch(Default::default());
        assert!(idempotent_heads(&fetch, 12).is_empty());
    }

    #[test]
    fn a_gap_holds_for_its_window_only() {
        let (t, now) = (topic(), Instant::now());
        let mut gaps = ProduceGaps::default();
        gaps.failed_unsent(&t, 0, head(7, 0, 10), now);
        assert!(gaps.holds(
            &t,
            0,
            &head(7, 0, 20),
            now + GAP_WINDOW - Duration::from_millis(1)
        ));
        assert!(!gaps.holds(&t, 0, &head(7, 0, 20), now + GAP_WINDOW));
        // Once expired, a new failure opens a new gap at its own batch.
        gaps.failed_unsent(&t, 0, head(7, 0, 20), now + GAP_WINDOW);
        assert!(gaps.holds(&t, 0, &head(7, 0, 30), now + GAP_WINDOW));
        assert!(!gaps.holds(&t, 0, &head(7, 0, 20), now + GAP_WINDOW));
    }

    /// A routing whose fetch replica differs from the leader, as an in-rack
    /// follower does.
    struct Follower;

    impl PartitionLeaders for Follower {
        fn leader(&self, _: &TopicRef, _: i32) -> Option<BrokerId> {
            Some(BrokerId(1))
        }
        fn fetch_replica(&self, _: &TopicRef, _: i32) -> Option<BrokerId> {
            Some(BrokerId(2))
        }
    }
    impl Coordinators for Follower {
        fn coordinator(&self, _: CoordinatorKeyType, _: &str) -> Option<BrokerId> {
            None
        }
    }
    impl Routing for Follower {
        fn brokers(&self) -> Vec<BrokerId> {
            vec![BrokerId(1), BrokerId(2)]
        }
    }

    #[test]
    fn holding_keeps_every_choice_of_the_routing_it_wraps() {
        let t = topic();
        let held = [(t.clone(), 1)];
        let holding = Holding {
            routing: &Follower,
            held: &held,
        };
        assert_eq!(
            holding.fetch_replica(&t, 0),
            Some(BrokerId(2)),
            "the in-rack follower"
        );
        assert_eq!(holding.leader(&t, 0), Some(BrokerId(1)));
        assert_eq!(holding.leader(&t, 1), None, "held");
        assert_eq!(holding.fetch_replica(&t, 1), None, "held");
    }

    #[test]
    fn the_gaps_of_one_connection_are_bounded() {
        let (t, now) = (topic(), Instant::now());
        let mut gaps = ProduceGaps::default();
        for p in 0..(MAX_GAPS as i32 + 10) {
            gaps.failed_unsent(&t, p, head(7, 0, 1), now + Duration::from_micros(p as u64));
        }
        assert_eq!(gaps.len(), MAX_GAPS);
        // The newest are kept.
        let last = MAX_GAPS as i32 + 9;
        assert!(gaps.holds(&t, last, &head(7, 0, 2), now + Duration::from_millis(100)));
        assert!(!gaps.holds(&t, 0, &head(7, 0, 2), now + Duration::from_millis(100)));
    }
}
