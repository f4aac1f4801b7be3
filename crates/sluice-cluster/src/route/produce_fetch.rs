//! The partition-leader APIs: Produce, Fetch, ListOffsets,
//! OffsetForLeaderEpoch, DeleteRecords and DescribeProducers.
//!
//! The split module cuts each request by leader and merges the answers; this
//! module holds what the driver decides around that:
//!
//! - **Fetch's `rack_id`** (v11+) is cleared in every part. Sluice chooses
//!   the replica itself (the leader, or an in-rack follower: see
//!   `topology/view/replica.rs`); a leader with a `replica.selector` would
//!   otherwise answer "read from follower N" (a real broker id) with no
//!   records.
//! - **Follower answers**: a partition error from a follower fences the
//!   partition's fetches onto its leader for a while, and a follower's
//!   OFFSET_OUT_OF_RANGE reaches the client as NOT_LEADER_OR_FOLLOWER
//!   ([`follower_errors`], [`soften_follower_errors`]).
//! - **Leader hints** (KIP-951 `current_leader`/`node_endpoints`, KIP-392
//!   `preferred_read_replica`) name real brokers and must be rewritten, but
//!   brokers only fill them in for partitions with an error. Rewriting means
//!   decoding and re-encoding, records included, so the driver does it only
//!   when the answer carries a partition error ([`produce_needs_rewrite`],
//!   [`fetch_needs_rewrite`]).
//! - **The raw pass-through check.** A Fetch or Produce answer forwarded
//!   unmerged is never decoded when [`fetch_may_need_rewrite`] or
//!   [`produce_may_need_rewrite`] can rule errors and hints out: each walks
//!   the partition headers (fixed offsets, records skipped by their length)
//!   and allocates nothing. The trade-off: the walk reads every partition
//!   header of every answer (cheap, linear in partitions) to spare the
//!   common case a decode (and, for a fetch, a re-encode that would copy
//!   every record byte).
//! - **Staleness**: per-partition error codes that say the view is out of
//!   date ([`stale_partitions`]).
//! - **Produce goes only where it is shown** ([`ShownHere`]). A Sluice node
//!   forwards a Produce partition only if it shows itself as that
//!   partition's leader; any other is answered NOT_LEADER_OR_FOLLOWER, as a
//!   broker answers a Produce for a partition it does not lead. Two nodes
//!   see a leader move a moment apart; a producer that followed one of them
//!   while the other still forwarded would have one partition's batches in
//!   flight to one real leader over two connections, where they can arrive
//!   out of order. A node that is leaving still forwards what it is sent:
//!   its peers may show it until their health checks see it gone. So is an
//!   `acks=0` Produce: it has no answer to carry the error, so a refused
//!   partition's records would be dropped unseen, and no order to keep. An
//!   idempotent batch refused holds back the batches behind it on the same
//!   client connection (`route::produce_order`).

use sluice_codec::RequestKind;
use sluice_codec::kafka_protocol::messages::{FetchResponse, ProduceResponse, ResponseKind};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::{Stale, partition_staleness};
use crate::error_codes::OFFSET_OUT_OF_RANGE;
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};
use crate::rewrite::Rewriter;
use crate::split::order::TopicEntry;
use crate::split::{Coordinators, PartitionLeaders, Routing};
use crate::topology::{BrokerId, CoordinatorKeyType, TopicRef};

/// Whether a Fetch request asks for a rack-aware replica (v11+ `rack_id`).
pub fn fetch_has_rack_id(rack_id: &StrBytes) -> bool {
    !rack_id.is_empty()
}

/// Whether a Produce answer carries any partition error or leader hint.
pub fn produce_needs_rewrite(resp: &ProduceResponse) -> bool {
    !resp.node_endpoints.is_empty()
        || resp
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .any(|p| p.error_code != 0 || p.current_leader.leader_id.0 >= 0)
}

/// Whether a Fetch answer carries any partition error or leader hint.
pub fn fetch_needs_rewrite(resp: &FetchResponse) -> bool {
    !resp.node_endpoints.is_empty()
        || resp.responses.iter().flat_map(|t| &t.partitions).any(|p| {
            p.error_code != 0
                || p.preferred_read_replica.0 >= 0
                || p.current_leader.leader_id.0 >= 0
        })
}

/// Whether `body` is split by where its partitions are shown
/// ([`ShownHere`]): a Produce that expects an answer, on a node that is not
/// leaving (`leaving`). A leaving node forwards everything (its clients are
/// moving elsewhere), and so does acks=0, which has no answer to carry the
/// error (a refused partition's records would be dropped unseen) and no
/// order to keep.
pub fn goes_where_shown(body: &RequestKind, leaving: bool) -> bool {
    matches!(body, RequestKind::Produce(p) if p.acks != 0) && !leaving
}

/// The routing of a Produce on the local Sluice node (see the module doc):
/// a partition's real leader when `local` is the node shown as its leader,
/// none otherwise, so that the split answers it NOT_LEADER_OR_FOLLOWER
/// (after one Metadata refresh, in case the local view is the stale one).
pub struct ShownHere<'r, R: ?Sized> {
    /// How the view routes.
    pub routing: &'r R,
    /// What clients are shown, from the same view.
    pub shown: &'r Rewriter<'r>,
    /// The local Sluice node's id.
    pub local: BrokerId,
}

impl<R: Routing + ?Sized> PartitionLeaders for ShownHere<'_, R> {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        let leader = self.routing.leader(topic, partition)?;
        (self.shown.shown_leader(topic, partition, leader) == self.local).then_some(leader)
    }
}

impl<R: Routing + ?Sized> Coordinators for ShownHere<'_, R> {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        self.routing.coordinator(key_type, key)
    }
}

impl<R: Routing + ?Sized> Routing for ShownHere<'_, R> {
    fn brokers(&self) -> Vec<BrokerId> {
        self.routing.brokers()
    }
}

/// A partition of a consumer fetch that a follower answered with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerError {
    /// The topic, as the answer names it.
    pub topic: TopicRef,
    /// The partition index.
    pub partition: i32,
    /// The follower's error code.
    pub error_code: i16,
}

/// The partitions of a Fetch answer from `answered_by` that carry an error
/// while `leader` says another broker leads them: answers from an in-rack
/// follower (see `topology/view/replica.rs`). Their fetches go back to the
/// leader for a while, and their OFFSET_OUT_OF_RANGE is softened
/// ([`soften_follower_errors`]).
pub fn follower_errors(
    resp: &FetchResponse,
    version: i16,
    answered_by: BrokerId,
    leader: impl Fn(&TopicRef, i32) -> Option<BrokerId>,
) -> Vec<FollowerError> {
    let mut out = Vec::new();
    for topic in &resp.responses {
        let key = topic.topic_ref(version);
        for p in topic.partitions.iter().filter(|p| p.error_code != 0) {
            let led_elsewhere = leader(&key, p.partition_index).is_some_and(|l| l != answered_by);
            if led_elsewhere {
                out.push(FollowerError {
                    topic: key.clone(),
                    partition: p.partition_index,
                    error_code: p.error_code,
                });
            }
        }
    }
    out
}

/// Turns a follower's OFFSET_OUT_OF_RANGE into NOT_LEADER_OR_FOLLOWER, for
/// the partitions in `errors`; returns whether anything changed.
///
/// A client resets its position on OFFSET_OUT_OF_RANGE (and may skip or
/// replay records). From a follower that lags it may be untrue, and a
/// client fetching from a follower itself (KIP-392) would ask the leader
/// before believing it. Behind Sluice the client cannot tell, so Sluice
/// answers "retry after a metadata refresh", and the next fetch goes to the
/// leader (the partition is fenced), whose answer is authoritative.
pub fn soften_follower_errors(
    resp: &mut FetchResponse,
    version: i16,
    errors: &[FollowerError],
) -> bool {
    let mut changed = false;
    for topic in &mut resp.responses {
        let key = topic.topic_ref(version);
        for p in &mut topic.partitions {
            let listed = errors
                .iter()
                .any(|e| e.topic == key && e.partition == p.partition_index);
            if listed && p.error_code == OFFSET_OUT_OF_RANGE.code() {
                p.error_code = NOT_LEADER_OR_FOLLOWER.code();
                changed = true;
            }
        }
    }
    changed
}

/// The partitions a leader-API answer says Sluice routed by a stale view.
pub fn stale_partitions(resp: &ResponseKind, version: i16) -> Vec<Stale> {
    fn collect<T: TopicEntry>(
        topics: &[T],
        version: i16,
        error: impl Fn(&T::Partition) -> i16,
        out: &mut Vec<Stale>,
    ) {
        for topic in topics {
            let key = topic.topic_ref(version);
            for p in topic.partitions() {
                if let Some(s) =
                    partition_staleness(ErrorCode::from_wire(error(p)), &key, T::partition_index(p))
                {
                    out.push(s);
                }
            }
        }
    }
    let mut out = Vec::new();
    match resp {
        ResponseKind::Produce(r) => collect(&r.responses, version, |p| p.error_code, &mut out),
        ResponseKind::Fetch(r) => {
            collect(&r.responses, version, |p| p.error_code, &mut out);
        }
        ResponseKind::ListOffsets(r) => collect(&r.topics, version, |p| p.error_code, &mut out),
        ResponseKind::OffsetForLeaderEpoch(r) => {
            collect(&r.topics, version, |p| p.error_code, &mut out);
        }
        ResponseKind::DeleteRecords(r) => collect(&r.topics, version, |p| p.error_code, &mut out),
        ResponseKind::DescribeProducers(r) => {
            collect(&r.topics, version, |p| p.error_code, &mut out);
        }
        _ => {}
    }
    out
}

/// Whether the body of a Fetch answer (`body`: the bytes after the response
/// header, at `version`) may carry something to rewrite or record: a
/// partition error, a preferred read replica, or a top-level tagged field
/// (`node_endpoints`). Walks the partition headers without decoding or
/// allocating; a body it cannot walk answers `true`, so the full decode
/// reports the problem.
pub fn fetch_may_need_rewrite(body: &[u8], version: i16) -> bool {
    scan_fetch(body, version).unwrap_or(true)
}

/// Whether the body of a Produce answer (`body`: the bytes after the
/// response header, at `version`) may carry something to rewrite or record:
/// a partition error (which also says whether the view is stale), a
/// partition tagged field (`current_leader`) or a top-level one
/// (`node_endpoints`). The answer a producer gets for nearly every request
/// has none, and is then forwarded without being decoded at all. Walks the
/// partitions without allocating; a body it cannot walk answers `true`, so
/// the full decode reports the problem.
pub fn produce_may_need_rewrite(body: &[u8], version: i16) -> bool {
    scan_produce(body, version).unwrap_or(true)
}

/// A bounds-checked reader over the body; `None` once anything is out of bounds.
struct Scan<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Scan<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn varint(&mut self) -> Option<u32> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = *self.take(1)?.first()?;
            value |= u32::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// An array or string length: compact (varint, plus one) or classic
    /// (`i32` for arrays and bytes, `i16` for strings). `None` inside the
    /// `Some` means null.
    fn len(&mut self, compact: bool, wide: bool) -> Option<Option<usize>> {
        if compact {
            let n = self.varint()?;
            return Some(n.checked_sub(1).map(|n| n as usize));
        }
        let n = if wide {
            self.i32()?
        } else {
            i32::from(self.i16()?)
        };
        Some(usize::try_from(n).ok())
    }

    /// Skips tagged fields and returns how many there were.
    fn tagged(&mut self) -> Option<u32> {
        let count = self.varint()?;
        for _ in 0..count {
            self.varint()?;
            let size = self.varint()? as usize;
            self.take(size)?;
        }
        Some(count)
    }
}

/// The walk behind [`fetch_may_need_rewrite`] (Fetch v4–v18 layout).
fn scan_fetch(body: &[u8], version: i16) -> Option<bool> {
    let flexible = version >= 12;
    let mut s = Scan { buf: body, pos: 0 };
    s.take(4)?; // throttle_time_ms
    if version >= 7 {
        s.take(2 + 4)?; // error_code, session_id
    }
    let topics = s.len(flexible, true)?.unwrap_or(0);
    for _ in 0..topics {
        if version >= 13 {
            s.take(16)?; // topic_id
        } else {
            let name = s.len(flexible, false)?.unwrap_or(0);
            s.take(name)?;
        }
        let partitions = s.len(flexible, true)?.unwrap_or(0);
        for _ in 0..partitions {
            if scan_partition(&mut s, version)? {
                return Some(true);
            }
        }
        if flexible {
            s.tagged()?;
        }
    }
    if flexible && s.tagged()? > 0 {
        return Some(true);
    }
    Some(false)
}

/// The walk behind [`produce_may_need_rewrite`] (Produce v3–v13 layout).
fn scan_produce(body: &[u8], version: i16) -> Option<bool> {
    let flexible = version >= 9;
    let mut s = Scan { buf: body, pos: 0 };
    let topics = s.len(flexible, true)?.unwrap_or(0);
    for _ in 0..topics {
        if version >= 13 {
            s.take(16)?; // topic_id
        } else {
            let name = s.len(flexible, false)?.unwrap_or(0);
            s.take(name)?;
        }
        let partitions = s.len(flexible, true)?.unwrap_or(0);
        for _ in 0..partitions {
            s.take(4)?; // index
            if s.i16()? != 0 {
                return Some(true);
            }
            s.take(8 + 8)?; // base_offset, log_append_time_ms
            if version >= 5 {
                s.take(8)?; // log_start_offset
            }
            if version >= 8 {
                let errors = s.len(flexible, true)?.unwrap_or(0);
                for _ in 0..errors {
                    s.take(4)?; // batch_index
                    let message = s.len(flexible, false)?.unwrap_or(0);
                    s.take(message)?;
                    if flexible {
                        s.tagged()?;
                    }
                }
                let message = s.len(flexible, false)?.unwrap_or(0);
                s.take(message)?;
            }
            if flexible && s.tagged()? > 0 {
                return Some(true);
            }
        }
        if flexible {
            s.tagged()?;
        }
    }
    s.take(4)?; // throttle_time_ms
    if flexible && s.tagged()? > 0 {
        return Some(true);
    }
    Some(s.pos != body.len())
}

/// One partition of a Fetch answer; `Some(true)` when it has an error or a
/// preferred read replica.
fn scan_partition(s: &mut Scan<'_>, version: i16) -> Option<bool> {
    let flexible = version >= 12;
    s.take(4)?; // partition_index
    let error_code = s.i16()?;
    s.take(8 + 8 + 8)?; // high watermark, last stable offset, log start offset (v5+; v4 below)
    if version < 5 {
        // v4 has no log_start_offset: give its 8 bytes back.
        s.pos = s.pos.checked_sub(8)?;
    }
    let aborted = s.len(flexible, true)?.unwrap_or(0);
    for _ in 0..aborted {
        s.take(16)?; // producer_id, first_offset
        if flexible {
            s.tagged()?;
        }
    }
    let preferred = if version >= 11 { s.i32()? } else { -1 };
    let records = s.len(flexible, true)?.unwrap_or(0);
    s.take(records)?;
    if flexible {
        s.tagged()?;
    }
    Some(error_code != 0 || preferred >= 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use sluice_codec::kafka_protocol::messages::TopicName;
    use sluice_codec::kafka_protocol::messages::fetch_response::{
        FetchableTopicResponse, PartitionData,
    };
    use sluice_codec::kafka_protocol::protocol::StrBytes;
    use sluice_codec::{ApiKey, Response};

    use super::*;
    use crate::topology::fixtures::through_wire;
    use sluice_codec::kafka_protocol::ResponseError;

    fn answer(errors: &[(i32, i16)]) -> FetchResponse {
        let partitions = errors
            .iter()
            .map(|(p, code)| {
                PartitionData::default()
                    .with_partition_index(*p)
                    .with_error_code(*code)
            })
            .collect();
        FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(partitions),
        ])
    }

    fn topic() -> TopicRef {
        TopicRef::Name(TopicName(StrBytes::from_static_str("t")))
    }

    #[test]
    fn only_errors_from_a_broker_that_does_not_lead_are_follower_errors() {
        // Broker 2 answered; it leads partition 1 only.
        let resp = answer(&[(0, OFFSET_OUT_OF_RANGE.code()), (1, 6), (2, 0), (3, 74)]);
        let leader = |_: &TopicRef, p: i32| match p {
            1 => Some(BrokerId(2)),
            3 => None,
            _ => Some(BrokerId(1)),
        };
        let errors = follower_errors(&resp, 12, BrokerId(2), leader);
        assert_eq!(
            errors,
            vec![FollowerError {
                topic: topic(),
                partition: 0,
                error_code: OFFSET_OUT_OF_RANGE.code()
            }]
        );
    }

    #[test]
    fn a_follower_out_of_range_becomes_not_leader_and_others_stay() {
        let mut resp = answer(&[
            (0, OFFSET_OUT_OF_RANGE.code()),
            (1, OFFSET_OUT_OF_RANGE.code()),
            (2, 74),
        ]);
        let errors = vec![
            FollowerError {
                topic: topic(),
                partition: 0,
                error_code: OFFSET_OUT_OF_RANGE.code(),
            },
            FollowerError {
                topic: topic(),
                partition: 2,
                error_code: ResponseError::FencedLeaderEpoch.code(),
            },
        ];
        assert!(soften_follower_errors(&mut resp, 12, &errors));
        let codes: Vec<i16> = resp.responses[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        // Partition 1 came from its leader: its OFFSET_OUT_OF_RANGE is true.
        assert_eq!(
            codes,
            vec![
                NOT_LEADER_OR_FOLLOWER.code(),
                OFFSET_OUT_OF_RANGE.code(),
                74
            ]
        );
        assert!(!soften_follower_errors(&mut resp, 12, &errors[1..]));
    }

    /// A Produce answer at `version` for topics `a` (partitions 0, 1) and
    /// `b` (partition 2), as a broker writes it; `edit` changes it first.
    fn produce_body(version: i16, edit: impl FnOnce(&mut ProduceResponse)) -> Vec<u8> {
        use sluice_codec::kafka_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        use sluice_codec::kafka_protocol::protocol::Encodable;
        let partition = |index: i32| {
            PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(1000 + i64::from(index))
                .with_log_start_offset(if version >= 5 { 7 } else { -1 })
        };
        let topic = |name: &'static str, id: u128, partitions: Vec<PartitionProduceResponse>| {
            let topic = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                topic.with_topic_id(uuid::Uuid::from_u128(id))
            } else {
                topic.with_name(TopicName(StrBytes::from_static_str(name)))
            }
        };
        let mut answer = ProduceResponse::default()
            .with_throttle_time_ms(5)
            .with_responses(vec![
                topic("a", 1, vec![partition(0), partition(1)]),
                topic("b", 2, vec![partition(2)]),
            ]);
        edit(&mut answer);
        let mut buf = bytes::BytesMut::new();
        answer.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    #[test]
    fn a_clean_produce_answer_is_seen_clean_without_decoding_at_every_version() {
        use sluice_codec::kafka_protocol::messages::produce_response::{
            BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint,
        };
        for version in 3..=13 {
            let clean = produce_body(version, |_| {});
            assert!(!produce_may_need_rewrite(&clean, version), "v{version}");
            let error = produce_body(version, |r| {
                r.responses[1].partition_responses[0].error_code = NOT_LEADER_OR_FOLLOWER.code();
            });
            assert!(produce_may_need_rewrite(&error, version), "v{version}");
            for cut in [1, 4, clean.len() / 2, clean.len() - 1] {
                assert!(
                    produce_may_need_rewrite(&clean[..cut], version),
                    "v{version}: truncated at {cut}"
                );
            }
            let mut longer = clean.clone();
            longer.push(0);
            assert!(produce_may_need_rewrite(&longer, version), "v{version}");
            if version >= 8 {
                let record_errors = produce_body(version, |r| {
                    let p = &mut r.responses[0].partition_responses[1];
                    p.record_errors =
                        vec![BatchIndexAndErrorMessage::default().with_batch_index(3)];
                    p.error_message = Some(StrBytes::from_static_str("bad record"));
                });
                // Walked past, and the partition itself is clean.
                assert!(
                    !produce_may_need_rewrite(&record_errors, version),
                    "v{version}"
                );
            }
            if version >= 10 {
                let hint = produce_body(version, |r| {
                    r.responses[0].partition_responses[0].current_leader =
                        LeaderIdAndEpoch::default().with_leader_id(BrokerId(2).0.into());
                });
                assert!(produce_may_need_rewrite(&hint, version), "v{version}");
                let endpoints = produce_body(version, |r| {
                    r.node_endpoints = vec![NodeEndpoint::default().with_node_id(2.into())];
                });
                assert!(produce_may_need_rewrite(&endpoints, version), "v{version}");
            }
        }
    }

    #[test]
    fn the_softened_answer_survives_the_wire() {
        let mut resp = answer(&[(0, OFFSET_OUT_OF_RANGE.code())]);
        let errors = follower_errors(&resp, 12, BrokerId(3), |_, _| Some(BrokerId(1)));
        soften_follower_errors(&mut resp, 12, &errors);
        let mut wire: Response = through_wire(ApiKey::Fetch, 12, ResponseKind::Fetch(resp));
        let ResponseKind::Fetch(back) = wire.body().unwrap() else {
            panic!("not a fetch answer");
        };
        assert_eq!(
            back.responses[0].partitions[0].error_code,
            NOT_LEADER_OR_FOLLOWER
        );
    }
}
