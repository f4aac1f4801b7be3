//! When a split fetch's entry has waited enough, and what it sends while
//! it waits: the answer-early rules of `consume`'s module doc, applied to
//! the parts in hand ([`FetchCombine::enough`], and
//! [`FetchCombine::next_look`] for the driver's wait),
//! and the parts a broker that has answered empty gets for the time left
//! ([`FetchCombine::refetches`]); [`FetchCombine::on_settled`] decides among
//! them each time some of its parts have answered. And what a partition no
//! broker serves is answered with ([`unknown_partitions`]), and which fetch
//! needs none of it ([`passes_through`]).

use crate::hash::{Map, Set};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_codec::ResponseKind;

use super::SessionReply;
use super::asked::{Asked, asked_on};
use super::{
    Claim, ERROR_WEIGHT, FetchCombine, FetchPart, NewPart, PartMeta, PartitionKey, Source,
    UpstreamSessions, kept, learn, push_partition, settled, weight,
};
use crate::error_codes::{ErrorCode, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};
use crate::split::Unroutable;
use crate::split::dispatch::SplitRequest;
use crate::split::order::TopicEntry;
use crate::topology::{BrokerId, ClusterView};

/// What the driver does next with a split fetch at the head of the queue.
#[derive(Debug)]
pub enum FetchStep {
    /// It has waited enough, or nothing is out: answer it with what is in
    /// hand (what is still out is parked).
    Answer,
    /// Wait for its parts.
    Wait,
    /// Send these parts (each [`commit`](FetchCombine::commit)ted once
    /// sent), then wait.
    Refetch(Vec<NewPart>),
}

/// Whether a client's fetch goes out as its own bytes, answered as the
/// broker answers it: no fetch session on either side (`whole`: the fetch a
/// client session stands for, `None` outside one), nothing parked or
/// stashed for the client (`idle`), and one broker serving all of it.
pub fn passes_through<W>(
    whole: Option<&W>,
    session: SessionReply,
    idle: bool,
    split: &SplitRequest,
) -> bool {
    whole.is_none()
        && session == SessionReply::None
        && idle
        && split.parts.len() == 1
        && split.unroutable.is_empty()
}

/// The error of each unroutable partition of a fetch that the cluster does
/// not have (its metadata was just refreshed), as Kafka answers it:
/// UNKNOWN_TOPIC_ID for a topic id (v13+), UNKNOWN_TOPIC_OR_PARTITION for a
/// topic name or a partition beyond its topic's. The others have no leader
/// now and are not listed (NOT_LEADER_OR_FOLLOWER).
pub fn unknown_partitions(
    view: &ClusterView,
    unroutable: &[Unroutable],
    version: i16,
) -> Map<PartitionKey, ErrorCode> {
    let mut unknown = Map::default();
    for u in unroutable {
        let Unroutable::Partition { topic, partition } = u else {
            continue;
        };
        let code = match view.topic(topic) {
            None if version >= 13 => UNKNOWN_TOPIC_ID,
            None => UNKNOWN_TOPIC_OR_PARTITION,
            Some(_) if view.partition(topic, *partition).is_none() => UNKNOWN_TOPIC_OR_PARTITION,
            Some(_) => continue,
        };
        unknown.insert((topic.clone(), *partition), code);
    }
    unknown
}

impl FetchCombine {
    /// Learns the broker sessions from the parts that have answered since
    /// last time (see [`learn`]).
    pub fn learn<P: FetchPart>(&mut self, parts: &mut [P], upstream: &mut UpstreamSessions) {
        for (part, meta) in parts.iter_mut().zip(self.metas.iter_mut()) {
            learn(part, meta, upstream);
        }
    }

    /// What to do once some of the parts have answered (or the entry's
    /// next look is due): learns the broker sessions from the answers, then
    /// answers once the entry has waited [`enough`](Self::enough), sends
    /// the [`refetches`](Self::refetches) the time left calls for, waits
    /// while a part is out, and answers when none is.
    pub fn on_settled<P: FetchPart>(
        &mut self,
        parts: &mut [P],
        upstream: &mut UpstreamSessions,
        now: Instant,
    ) -> FetchStep {
        self.learn(parts, upstream);
        if self.enough(parts, now) {
            return FetchStep::Answer;
        }
        let refetches = self.refetches(parts, now);
        if !refetches.is_empty() {
            return FetchStep::Refetch(refetches);
        }
        if parts.iter().any(P::is_waiting) {
            FetchStep::Wait
        } else {
            FetchStep::Answer
        }
    }

    /// The client's id, for the header of parts sent later.
    pub fn client_id(&self) -> Option<Bytes> {
        self.client_id.clone()
    }

    /// Whether the entry has waited enough: its deadline has passed, or the
    /// answers in hand carry `min_bytes` (and, catching up, the parts sent
    /// with them had their moment: see [`GATHER_BYTES`]). An entry without
    /// a deadline has waited enough once the parts sent for it have
    /// answered (see [`FetchCombine::own_parts`]).
    pub fn enough<P: FetchPart>(&self, parts: &mut [P], now: Instant) -> bool {
        self.next_look(parts, now).is_none()
    }

    /// `None` once the entry has waited [`enough`](Self::enough); else when
    /// to look again if no part answers first: the deadline, or the end of
    /// a gathering moment. An entry without a deadline waits for its own
    /// parts alone (the hour is never reached).
    pub fn next_look<P: FetchPart>(&self, parts: &mut [P], now: Instant) -> Option<Instant> {
        let Some(deadline) = self.deadline else {
            let waiting = self.own_parts(parts).iter().any(P::is_waiting);
            return waiting.then(|| now + Duration::from_secs(3600));
        };
        if now >= deadline {
            return None;
        }
        let bytes = self.ready_bytes(parts);
        if bytes < usize::try_from(self.min_bytes).unwrap_or(0) {
            return Some(deadline);
        }
        // Small answers (tailing) and errors go out at once.
        if !(GATHER_BYTES..ERROR_WEIGHT).contains(&bytes) {
            return None;
        }
        self.gathering(parts, now).map(|until| until.min(deadline))
    }

    /// The latest moment a part sent within [`GATHER_WINDOW`] of `now` is
    /// still waited for, if any.
    fn gathering<P: FetchPart>(&self, parts: &[P], now: Instant) -> Option<Instant> {
        parts
            .iter()
            .zip(&self.metas)
            .filter(|(part, _)| part.is_waiting())
            .map(|(_, meta)| meta.sent_at + GATHER_WINDOW)
            .filter(|until| *until > now)
            .max()
    }

    /// Whether the entry has a deadline; without one it waits for its own
    /// parts alone (see [`FetchCombine::own_parts`]).
    pub fn has_deadline(&self) -> bool {
        self.deadline.is_some()
    }

    /// The parts sent for this entry, not adopted: all that an entry
    /// without a deadline waits for. A fetch with `max_wait_ms` or
    /// `min_bytes` of 0 or less is answered at once by a broker; an adopted
    /// part still out waits at its broker with the `max_wait_ms` of the
    /// fetch that sent it (up to minutes), and is left parked.
    pub fn own_parts<'p, P>(&self, parts: &'p mut [P]) -> &'p mut [P] {
        let from = self.adopted.min(parts.len());
        parts.get_mut(from..).unwrap_or_default()
    }

    /// Record bytes the entry would answer with now.
    fn ready_bytes<P: FetchPart>(&self, parts: &mut [P]) -> usize {
        let mut answers: Map<usize, Option<Map<PartitionKey, Answered>>> = Map::default();
        let mut bytes: usize = 0;
        for topic in &self.topics {
            for plan in &topic.partitions {
                match &plan.source {
                    Source::Stashed(data) => bytes = bytes.saturating_add(weight(data)),
                    Source::Part(index) => {
                        // A failed part's partitions are answered with an error.
                        if parts.get(*index).is_some_and(|p| p.has_failed()) {
                            bytes = bytes.saturating_add(ERROR_WEIGHT);
                            continue;
                        }
                        let sizes = answers
                            .entry(*index)
                            .or_insert_with(|| answer_sizes(parts.get_mut(*index)));
                        let key = (topic.key.clone(), plan.request.partition);
                        let size = sizes.as_ref().and_then(|s| s.get(&key));
                        bytes = bytes.saturating_add(size.map_or(0, |a| a.weight));
                    }
                    Source::Pending | Source::Error(_) => {}
                }
            }
        }
        bytes
    }

    /// New parts for the brokers that have nothing out for this entry any
    /// more but owe it partitions (an adopted part asked other offsets, or a
    /// part answered them empty), with the time left as their `max_wait_ms`.
    /// A partition answered without records but with something that asking
    /// again would only repeat (a diverging epoch, a preferred read replica:
    /// brokers answer those at once) is not asked again: that would poll the
    /// broker in a loop until the deadline. Each is
    /// [`commit`](Self::commit)ted once sent.
    pub fn refetches<P: FetchPart>(&self, parts: &mut [P], now: Instant) -> Vec<NewPart> {
        let Some(deadline) = self.deadline else {
            return Vec::new();
        };
        let left = deadline.saturating_duration_since(now).as_millis();
        let left_ms = i32::try_from(left).unwrap_or(i32::MAX);
        if left_ms <= 0 {
            return Vec::new();
        }
        let busy: Set<BrokerId> = parts
            .iter()
            .zip(&self.metas)
            .filter(|(part, _)| part.is_waiting())
            .map(|(_, meta)| meta.broker)
            .collect();
        let mut answers: Map<usize, Option<Map<PartitionKey, Answered>>> = Map::default();
        let mut owed = Set::default();
        for (t, topic) in self.topics.iter().enumerate() {
            for (p, plan) in topic.partitions.iter().enumerate() {
                let empty = match plan.source {
                    Source::Pending => true,
                    Source::Part(index) => {
                        let sizes = answers
                            .entry(index)
                            .or_insert_with(|| answer_sizes(parts.get_mut(index)));
                        // Answered, without records and without an error
                        // or a hint (left out of an incremental answer: no news).
                        let key = (topic.key.clone(), plan.request.partition);
                        sizes
                            .as_ref()
                            .is_some_and(|s| s.get(&key).is_none_or(|a| !a.settled))
                    }
                    Source::Stashed(_) | Source::Error(_) => false,
                };
                if empty {
                    owed.insert((t, p));
                }
            }
        }
        self.new_parts(
            |slot| owed.contains(&slot),
            |b| !busy.contains(&b),
            (left_ms, now),
            &mut Map::default(),
        )
    }

    /// One part per free broker (`free`) for the partitions that need one
    /// (`needs`, by topic and partition slot), waiting up to `max_wait_ms`,
    /// sent at `now`. What each asks is built on what the last part to its
    /// broker asked, taken from `bases` (see [`asked`](super::asked)).
    pub(super) fn new_parts(
        &self,
        needs: impl Fn((usize, usize)) -> bool,
        free: impl Fn(BrokerId) -> bool,
        (max_wait_ms, now): (i32, Instant),
        bases: &mut Map<BrokerId, Asked>,
    ) -> Vec<NewPart> {
        let mut fresh: Vec<NewPart> = Vec::new();
        for (t, topic) in self.topics.iter().enumerate() {
            for (p, plan) in topic.partitions.iter().enumerate() {
                let Some(broker) = plan.broker.filter(|b| free(*b) && needs((t, p))) else {
                    continue;
                };
                let at = match fresh.iter().position(|n| n.broker == broker) {
                    Some(at) => at,
                    None => {
                        fresh.push(NewPart {
                            broker,
                            request: self.base.clone().with_max_wait_ms(max_wait_ms),
                            claim: Claim {
                                meta: PartMeta {
                                    broker,
                                    version: self.version,
                                    asked: Asked::default(),
                                    sent_in: None,
                                    learned: false,
                                    sent_at: now,
                                    may_bring_bytes: 0,
                                    ahead: false,
                                },
                                slots: Vec::new(),
                            },
                        });
                        fresh.len() - 1
                    }
                };
                let Some(new) = fresh.get_mut(at) else {
                    continue;
                };
                push_partition(
                    &mut new.request,
                    &topic.topic,
                    topic.topic_id,
                    &plan.request,
                );
                new.claim.slots.push((t, p));
            }
        }
        for new in &mut fresh {
            new.claim.meta.may_bring_bytes = kept::may_bring_bytes(&new.request);
            let base = bases.remove(&new.broker);
            new.claim.meta.asked = asked_on(base, &new.request, self.version);
        }
        fresh
    }

    /// Records a sent [`NewPart`] as the entry's next part: its partitions
    /// wait for it; it was sent at `now`.
    pub fn commit(&mut self, mut claim: Claim, now: Instant) {
        claim.meta.sent_at = now;
        let index = self.metas.len();
        for (t, p) in claim.slots {
            if let Some(plan) = self.topics.get_mut(t).and_then(|t| t.partitions.get_mut(p)) {
                plan.source = Source::Part(index);
            }
        }
        self.metas.push(claim.meta);
    }

    /// Answers each partition no broker serves with `error_of` its key
    /// (planned NOT_LEADER_OR_FOLLOWER): an unknown topic is not a leader
    /// move.
    pub fn answer_unroutable(&mut self, error_of: impl Fn(&PartitionKey) -> ErrorCode) {
        for topic in &mut self.topics {
            for plan in &mut topic.partitions {
                if let Source::Error(code) = &mut plan.source {
                    *code = error_of(&(topic.key.clone(), plan.request.partition));
                }
            }
        }
    }

    /// What part `index` asked for.
    pub fn meta(&self, index: usize) -> Option<&PartMeta> {
        self.metas.get(index)
    }
}

/// Answers in hand of at least this many bytes mean the client is catching
/// up rather than tailing: the brokers asked with the one that answered
/// most likely have data too, a moment away. Waiting for them then (up to
/// [`GATHER_WINDOW`] after each was sent) answers with all of it at once,
/// instead of one broker's share per client round trip.
pub(super) const GATHER_BYTES: usize = 64 * 1024;

/// How long after it was sent a part is waited for by an entry that has
/// [`GATHER_BYTES`] in hand. A broker with data answers well within it; a
/// part out longer is waiting for data at its broker.
const GATHER_WINDOW: Duration = Duration::from_millis(5);

/// One partition of a part's answer, as the entry weighs it.
#[derive(Debug, Clone, Copy)]
struct Answered {
    /// Its [`weight`] against `min_bytes`.
    weight: usize,
    /// Whether asking again at the same position could only repeat it:
    /// anything but an answer with nothing at all (see [`settled`]).
    settled: bool,
}

/// Per partition of a part's answer (if it has arrived and decodes): how
/// it weighs; `None` while it is out, or if it failed or is undecodable. A
/// partition an incremental answer leaves out has no news: not listed.
fn answer_sizes<P: FetchPart>(part: Option<&mut P>) -> Option<Map<PartitionKey, Answered>> {
    let mut sizes = Map::default();
    let response = part?.answer_mut()?;
    let version = response.api_version();
    if let Ok(ResponseKind::Fetch(answer)) = response.body() {
        for topic in &answer.responses {
            let key = topic.topic_ref(version);
            for p in &topic.partitions {
                let answered = Answered {
                    weight: weight(p),
                    settled: settled(p),
                };
                super::count_built(1);
                sizes.insert((key.clone(), p.partition_index), answered);
            }
        }
        return Some(sizes);
    }
    None
}
