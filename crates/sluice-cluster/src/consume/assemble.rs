//! How a split fetch's answer is put together: the parts' outcomes are
//! read into partition answers, each partition of the client's fetch takes
//! its own (or an empty one, with the last watermarks seen), and what the
//! client did not ask for now is stashed for a later fetch. Answers of
//! parked parts that arrive between fetches are stashed the same way.
//!
//! Kept apart from the planning half (`consume.rs`) because the two share
//! only [`FetchState`]: planning decides where each partition's answer comes
//! from; this reads what came.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::FetchResponse;
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};

use super::kept::{self, Frame};
use super::{
    Arrived, FetchCombine, FetchState, Marks, Outcome, PartMeta, PartitionKey, Position, ReadAhead,
    SessionReply, Source, Stashed, TopicPlan, ahead, bound, count_built, worth_serving,
};
use crate::error_codes::ErrorCode;
use crate::hash::Set;
use crate::split::fetch::{NO_SESSION_ID, error_partition};
use crate::split::order::{TopicEntry, dedup_by_key};

impl<P> FetchState<P> {
    /// Stashes the answer of a parked part that arrived between fetches
    /// (in a frame of `frame_bytes`; 0 when not read from a broker) at `now`.
    pub fn absorb(
        &mut self,
        meta: &PartMeta,
        answer: FetchResponse,
        frame_bytes: usize,
        now: Instant,
    ) {
        let frame = Frame::of(frame_bytes);
        if answer.throttle_time_ms > 0 {
            let ms = u64::from(answer.throttle_time_ms.unsigned_abs());
            let until = now + Duration::from_millis(ms);
            self.throttled_until = Some(self.throttled_until.map_or(until, |u| u.max(until)));
        }
        for (key, data) in answer_partitions(answer, meta.version) {
            self.note_marks(&key, &data);
            self.stash_answer(meta, key, data, frame.as_ref(), now);
        }
    }

    /// Stashes `error_code` for every partition a failed parked part asked
    /// for, so that the client's next fetch of them learns it (at `now`).
    pub fn absorb_failure(&mut self, meta: &PartMeta, error_code: ErrorCode, now: Instant) {
        for (key, &at) in meta.asked.iter() {
            let data = Box::new(error_partition(key.1, error_code));
            self.stash
                .insert(kept::owned_key(key), Stashed::new(at, data, None, now));
        }
    }

    /// Builds the client's answer from one [`Outcome`] per part; parts still
    /// out have been parked by the caller. Answers of adopted parts for
    /// partitions the client did not ask for now are stashed. Also returns
    /// the parts to send ahead (see [`ahead`]), if their brokers are free.
    /// `now`: when the answer is assembled.
    pub fn assemble(
        &mut self,
        combine: FetchCombine,
        outcomes: Vec<Outcome>,
        now: Instant,
    ) -> (FetchResponse, Vec<ReadAhead>) {
        let FetchCombine {
            version,
            session,
            topics,
            metas,
            base,
            client_id,
            max_bytes,
            ..
        } = combine;
        let mut arrived = self.arrived(outcomes, &metas);
        let left_over = bound::left_over(&topics, &arrived.answered, max_bytes);
        let mut responses = Vec::with_capacity(topics.len());
        // What the client asks for now, among what the parts answered (the
        // rest of those answers may serve it later); and all of it only
        // when the marks are to be pruned to it.
        let answered_keys: Set<PartitionKey> =
            arrived.answered.keys().map(|(_, k)| k.clone()).collect();
        let mut requested_answered: Set<PartitionKey> = Set::default();
        let asked_now = topics.iter().map(|t| t.partitions.len()).sum::<usize>();
        let prune = self.marks.len() > 2 * asked_now + 64;
        let mut requested: Set<PartitionKey> = Set::default();
        let mut gather = ahead::Gather::default();
        // An incremental answer lists only partitions with news: one with
        // nothing in hand is not built when it has none (the session then
        // filters the rest).
        let quiet = match session {
            SessionReply::Incremental(id) if self.sessions.is_open(id) => Some(id),
            _ => None,
        };
        // What the part ahead notes for a partition left out: nothing, at
        // the offset asked.
        let nothing_yet = PartitionData::default();
        for (t, topic) in topics.into_iter().enumerate() {
            let TopicPlan {
                topic: name,
                topic_id,
                key: topic_key,
                partitions: plans,
            } = topic;
            let mut partitions = match quiet {
                None => Vec::with_capacity(plans.len()),
                Some(_) => Vec::new(),
            };
            for (p, plan) in plans.into_iter().enumerate() {
                let index = plan.request.partition;
                let key = (topic_key.clone(), index);
                if left_over.contains(&(t, p)) {
                    let at = Position::of(&plan.request, base.isolation_level);
                    self.leave_over(key.clone(), at, plan.source, &mut arrived, now);
                    partitions.extend(self.empty_answer(&key, quiet));
                    note_requested(
                        key,
                        &answered_keys,
                        &mut requested_answered,
                        prune.then_some(&mut requested),
                    );
                    continue;
                }
                let data = match plan.source {
                    Source::Stashed(data) => Some(*data),
                    Source::Error(code) => Some(error_partition(index, code)),
                    Source::Part(part) => match arrived.answered.remove(&(part, key.clone())) {
                        Some(data) => Some(data),
                        None => match arrived.failed.get(&part) {
                            Some(&code) => Some(error_partition(index, code)),
                            None => self.empty_answer(&key, quiet),
                        },
                    },
                    Source::Pending => self.empty_answer(&key, quiet),
                };
                let noted = data.as_ref().unwrap_or(&nothing_yet);
                gather.note((&name, topic_id), plan.broker, &plan.request, noted);
                partitions.extend(data);
                note_requested(
                    key,
                    &answered_keys,
                    &mut requested_answered,
                    prune.then_some(&mut requested),
                );
            }
            responses.push(
                FetchableTopicResponse::default()
                    .with_topic(name)
                    .with_topic_id(topic_id)
                    .with_partitions(partitions),
            );
        }
        // What the client asked for now at other offsets is of no use to it;
        // what it did not ask for (e.g. a paused partition) may be next time.
        for ((part, key), data) in arrived.answered {
            if let Some(meta) = metas
                .get(part)
                .filter(|_| !requested_answered.contains(&key))
            {
                self.stash_answer(meta, key, data, arrived.frames.get(&part), now);
            }
        }
        // The next parts build on this fetch's: only those are kept, so
        // what is kept is what this fetch asked.
        self.asked.clear();
        for meta in metas {
            self.asked.insert(meta.broker, meta.asked);
        }
        self.compact_stash();
        if prune {
            self.marks.retain(|key, _| requested.contains(key));
        }
        dedup_by_key(&mut arrived.node_endpoints, |n| &n.node_id);
        let mut response = FetchResponse::default()
            .with_throttle_time_ms(arrived.throttle_time_ms.max(self.throttle_left(now)))
            .with_error_code(arrived.error_code)
            .with_session_id(NO_SESSION_ID)
            .with_responses(responses)
            .with_node_endpoints(arrived.node_endpoints);
        self.sessions.answer(session, &mut response, version);
        let ahead = gather
            .finish(&base, (version, client_id.as_ref(), now), &mut self.asked)
            .into_iter()
            .filter(|a| !self.parked.iter().any(|p| p.meta.broker == a.broker))
            .collect();
        (response, ahead)
    }

    /// What the parts of an entry brought, by part and partition.
    fn arrived(&mut self, outcomes: Vec<Outcome>, metas: &[PartMeta]) -> Arrived {
        let mut arrived = Arrived::default();
        for (index, (outcome, meta)) in outcomes.into_iter().zip(metas).enumerate() {
            match outcome {
                Outcome::Answer(mut answer, frame_bytes) => {
                    if let Some(frame) = Frame::of(frame_bytes) {
                        arrived.frames.insert(index, frame);
                    }
                    arrived.throttle_time_ms =
                        arrived.throttle_time_ms.max(answer.throttle_time_ms);
                    if arrived.error_code == 0 {
                        arrived.error_code = answer.error_code;
                    }
                    arrived.node_endpoints.append(&mut answer.node_endpoints);
                    for (key, data) in answer_partitions(answer, meta.version) {
                        self.note_marks(&key, &data);
                        count_built(1);
                        arrived.answered.insert((index, key), data);
                    }
                }
                Outcome::Failed(code) => {
                    arrived.failed.insert(index, code);
                }
                Outcome::Parked => {}
            }
        }
        arrived
    }

    /// Stashes a partition's answer from a part that asked for it, if it
    /// tells the client something.
    fn stash_answer(
        &mut self,
        meta: &PartMeta,
        key: PartitionKey,
        data: PartitionData,
        frame: Option<&Arc<Frame>>,
        now: Instant,
    ) {
        if let Some(&at) = meta.asked.get(&key)
            && worth_serving(&data)
        {
            let data = Box::new(data);
            count_built(1);
            self.stash.insert(
                kept::owned_key(&key),
                Stashed::new(at, data, frame.cloned(), now),
            );
        }
    }

    /// What is left of a throttle learned between fetches, in ms; told once.
    fn throttle_left(&mut self, now: Instant) -> i32 {
        let left = self
            .throttled_until
            .take()
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        i32::try_from(left.as_millis()).unwrap_or(i32::MAX)
    }

    fn note_marks(&mut self, key: &PartitionKey, data: &PartitionData) {
        if data.error_code == 0 && data.high_watermark >= 0 {
            let marks = Marks {
                high_watermark: data.high_watermark,
                last_stable_offset: data.last_stable_offset,
                log_start_offset: data.log_start_offset,
            };
            match self.marks.get_mut(key) {
                Some(held) => *held = marks,
                None => {
                    count_built(1);
                    self.marks.insert(kept::owned_key(key), marks);
                }
            }
        }
    }

    /// A partition answer with nothing in hand, unless it is left out:
    /// in the incremental answer of session `quiet`, when it tells the
    /// client nothing new (see [`ClientSessions::answer`]).
    fn empty_answer(&self, key: &PartitionKey, quiet: Option<i32>) -> Option<PartitionData> {
        if let Some(id) = quiet {
            let marks = self.marks.get(key).copied();
            if !self.sessions.empty_is_news(id, key, marks) {
                return None;
            }
        }
        Some(self.empty_partition(key))
    }

    fn empty_partition(&self, key: &PartitionKey) -> PartitionData {
        let marks = self.marks.get(key).copied().unwrap_or(Marks::UNKNOWN);
        PartitionData::default()
            .with_partition_index(key.1)
            .with_high_watermark(marks.high_watermark)
            .with_last_stable_offset(marks.last_stable_offset)
            .with_log_start_offset(marks.log_start_offset)
            .with_aborted_transactions(None)
    }
}

/// Notes that the client asks for `key` now: in `answered` if a part
/// answered it (`answered_keys`), and in `all` if that is kept (the marks
/// of the partitions the client fetches now are kept, and the others
/// dropped, once there are many more than those: it stopped fetching them).
fn note_requested(
    key: PartitionKey,
    answered_keys: &Set<PartitionKey>,
    answered: &mut Set<PartitionKey>,
    all: Option<&mut Set<PartitionKey>>,
) {
    if !answered_keys.is_empty() && answered_keys.contains(&key) {
        count_built(1);
        answered.insert(key.clone());
    }
    if let Some(all) = all {
        count_built(1);
        all.insert(key);
    }
}

/// A part's answer as partitions by key.
fn answer_partitions(
    answer: FetchResponse,
    version: i16,
) -> impl Iterator<Item = (PartitionKey, PartitionData)> {
    answer.responses.into_iter().flat_map(move |topic| {
        let key = topic.topic_ref(version);
        topic
            .partitions
            .into_iter()
            .map(move |p| ((key.clone(), p.partition_index), p))
    })
}
