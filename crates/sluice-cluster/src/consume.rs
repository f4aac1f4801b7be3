//! The consume path: a Fetch split over several brokers is answered as soon
//! as its data is ready, not when its slowest part is.
//!
//! A consumer fetching partitions led by several brokers sends Sluice one
//! Fetch; Sluice sends one part per broker. A broker with nothing new holds
//! its part for the client's `max_wait_ms`, so waiting for every part would
//! make every record wait for the idlest broker. Instead a split fetch's
//! entry ([`FetchCombine`]) is answered as soon as one of these holds:
//! - the answers in hand carry at least the client's `min_bytes` of records;
//! - the client's `max_wait_ms` has passed since Sluice read the request;
//! - every part has answered.
//!
//! One exception keeps a consumer that is catching up from getting one
//! broker's share per round trip: once the answers in hand reach 64 KiB,
//! the parts sent in the last 5 ms (most likely with the one that answered)
//! are waited for until 5 ms after they were sent, and answered together.
//! A tailing consumer's small answers never wait.
//!
//! A full fetch answer must list every partition it was asked for, so the
//! partitions whose part is still out are listed with no records, no error
//! and the last watermarks Sluice saw for them ([`Marks`]; -1 before any:
//! the Java client ignores it, librdkafka keeps it as its cached watermark
//! until the partition's next answer. Leaving the partition out would make
//! a Java client drop the whole answer and sarama report an incomplete
//! one; a made-up watermark would make librdkafka report a false end of
//! partition).
//!
//! **Parked parts.** A part still owed when its fetch is answered is not
//! lost: it is *parked* in the connection's [`FetchState`]. A broker answers
//! one request per connection at a time, so a new part to that broker would
//! only queue behind the parked one; instead the client's next fetch that
//! needs the broker *adopts* the parked part, which serves every partition it
//! asked for at the offset the client asks again. A parked part whose answer
//! arrives between two fetches has its partitions' data *stashed*; a fetch
//! takes a stashed partition if it asks for it at the same offset, and drops
//! it if it asks at another. "The same offset" is the same [`Position`]:
//! offset, leader epoch and isolation level all match. A stashed partition the client leaves out (it
//! still buffers records of it) waits for a later fetch, for at most
//! [`STASH_KEEP`]. So each partition's records start exactly where the
//! client asked (none twice, none skipped), and a broker has at most one of
//! the connection's fetches at a time, as with a direct client.
//!
//! **Read-ahead** ([`ahead`]). A broker that has just served the client
//! records, and owes the connection nothing else, gets a part parked at once
//! for where the client reads next, as a direct client's own next fetch to
//! that broker would be.
//!
//! **Refetch.** While an entry waits, a broker whose parts have all answered
//! without records for some of its partitions (an adopted part asked at
//! other offsets, or timed out empty) gets one new part for them, with the
//! time left as its `max_wait_ms`, so data arriving there before the deadline
//! is seen. Sluice so never polls a broker faster than a direct client: a new
//! part goes to a broker only once its previous one has answered.
//!
//! ```text
//! t=0    fetch A+B+C arrives; parts to A, B, C (max_wait 500 ms)
//! t=3    A answers with records          -> client answered: A's data, B and C empty
//!                                           B and C parked
//! t=4    next fetch arrives              -> adopts B and C, new part to A
//! t=120  B answers with records          -> client answered: B's data, A and C empty
//! t=500  C's part times out, empty       -> C gets a new part (max_wait = time left)
//! ```
//!
//! A fetch with `max_wait_ms` or `min_bytes` of 0 or less waits for the
//! parts sent for it, which its brokers answer at once, but not for the
//! parked parts it adopted that are still out (they wait at their brokers
//! with the `max_wait_ms` of the fetch that sent them): those stay parked
//! for the next fetch, and their partitions are answered empty. A fetch whose partitions all
//! go to one broker, while nothing is parked or stashed, passes through
//! untouched (see `sink/fetch.rs`).

use crate::hash::{Map, Set};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use sluice_codec::Response;
use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::fetch_response::{NodeEndpoint, PartitionData};
use sluice_codec::kafka_protocol::messages::{FetchRequest, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use std::time::Instant;
use uuid::Uuid;

use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};
use crate::split::fetch::{part_base, part_max_bytes};
use crate::split::order::TopicEntry;
use crate::topology::{BrokerId, TopicRef};

mod ahead;
mod asked;
mod assemble;
mod bound;
mod combine;
mod kept;
mod outcome;
mod session;
mod upstream;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

#[cfg(test)]
use crate::error_codes::{FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH};
pub use ahead::ReadAhead;
pub use asked::Asked;
pub use combine::{FetchStep, passes_through, unknown_partitions};
use kept::Frame;
pub use outcome::Outcome;
pub use session::{ClientSessions, SessionReply};
pub use session::{SessionEvent, SessionSide, session_error_answer, session_error_name};
pub use upstream::{Prepared, SentIn, UpstreamSessions, learn};

thread_local! {
    /// Per-partition map entries built on this thread, in test builds (each
    /// test runs on a thread of its own).
    #[cfg(test)]
    static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts `n` entries put into maps and sets keyed by partition: what the
/// tests read to see that a fetch's work follows what it carries, not the
/// size of its session. Counts nothing outside tests.
#[inline]
pub(crate) fn count_built(n: usize) {
    #[cfg(test)]
    BUILT.with(|b| b.set(b.get().saturating_add(n)));
    #[cfg(not(test))]
    let _ = n;
}

/// The entries [`count_built`] counted on this thread since the last call.
#[cfg(test)]
pub(crate) fn take_built() -> usize {
    BUILT.with(|b| b.replace(0))
}

/// A part of a split fetch as the core sees it. The driver's part holds
/// what its answer arrives through; the core reads only where it stands.
pub trait FetchPart {
    /// Whether its answer has not arrived yet.
    fn is_waiting(&self) -> bool;
    /// Whether it failed (no answer will come).
    fn has_failed(&self) -> bool;
    /// The broker's answer, once it arrived.
    fn answer_mut(&mut self) -> Option<&mut Response>;
}

/// A partition, as the fetch names it (by topic name up to v12, by id from v13).
pub type PartitionKey = (TopicRef, i32);

/// The watermarks a broker last reported for a partition: what an empty
/// partition answer carries while its part is still out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Marks {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

impl Marks {
    /// Brokers write -1 where they know nothing; clients ignore it.
    const UNKNOWN: Marks = Marks {
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
    };
}

/// Where a part asked for a partition. Its answer serves a later fetch of
/// the partition only at the same position: the same offset, and also the
/// same leader epoch (an answer at an older one may carry a stale
/// FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER) and isolation level (a
/// read_uncommitted answer holds records past the last stable offset and no
/// aborted transactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    fetch_offset: i64,
    current_leader_epoch: i32,
    isolation_level: i8,
}

impl Position {
    /// Where `p`, of a fetch at `isolation_level`, asks.
    fn of(p: &FetchPartition, isolation_level: i8) -> Self {
        Self {
            fetch_offset: p.fetch_offset,
            current_leader_epoch: p.current_leader_epoch,
            isolation_level,
        }
    }
}

/// A partition answer that came after its fetch was answered.
#[derive(Debug)]
struct Stashed {
    /// Where the part asked: the answer serves only a fetch there.
    at: Position,
    data: Box<PartitionData>,
    /// When it was stashed: it is dropped [`STASH_KEEP`] later.
    since: Instant,
    /// The broker frame its records are a slice of, if they are (see
    /// [`kept`]).
    frame: Option<Arc<Frame>>,
}

impl Stashed {
    fn new(
        at: Position,
        data: Box<PartitionData>,
        frame: Option<Arc<Frame>>,
        now: Instant,
    ) -> Self {
        Self {
            at,
            data,
            since: now,
            frame,
        }
    }
}

/// How long a stashed answer waits for the client to ask for its partition
/// at its offset. A client leaves a partition out of its fetches while it
/// buffers records of it (often for several fetches); one it stops
/// fetching altogether must not keep the answer for the connection's life.
const STASH_KEEP: Duration = Duration::from_secs(10);

/// A part owed by its broker after its fetch was answered.
#[derive(Debug)]
pub struct Parked<P> {
    /// The part, with its receiver (or its result, once it arrived).
    pub part: P,
    /// What it asked for.
    pub meta: PartMeta,
}

/// What a fetch part asked its broker for.
#[derive(Debug, Clone)]
pub struct PartMeta {
    /// The broker it went to.
    pub broker: BrokerId,
    /// The version it was sent at (its answer's topics are keyed by it).
    pub version: i16,
    /// Each partition it asked for, and where.
    pub asked: Asked,
    /// The broker session it went out in.
    pub sent_in: SentIn,
    /// Whether its answer (or failure) was learned from (see [`learn`]).
    learned: bool,
    /// When it was sent.
    sent_at: Instant,
    /// What its answer may bring (see [`kept`]): counted against the
    /// client's memory budget while it is parked.
    may_bring_bytes: usize,
    /// Whether it was sent ahead of the client's fetch (see [`ahead`]):
    /// if it fails, nobody asked for it.
    pub ahead: bool,
}

/// One client connection's fetch state between fetches: parked parts, their
/// stashed answers, and the last watermarks seen per partition. `P`: the
/// driver's part.
#[derive(Debug)]
pub struct FetchState<P> {
    /// The client's fetch session with Sluice.
    pub sessions: ClientSessions,
    /// Sluice's fetch sessions with the brokers.
    pub upstream: UpstreamSessions,
    parked: Vec<Parked<P>>,
    stash: Map<PartitionKey, Stashed>,
    marks: Map<PartitionKey, Marks>,
    /// What the last fetch's part to each broker asked: the next one's is
    /// built on it (see [`asked`]).
    asked: Map<BrokerId, Asked>,
    /// Until when a broker throttles the client, by an answer stashed
    /// between fetches: the next answer tells the client what is left.
    throttled_until: Option<Instant>,
}

impl<P> Default for FetchState<P> {
    fn default() -> Self {
        Self {
            sessions: ClientSessions::default(),
            upstream: UpstreamSessions::default(),
            parked: Vec::new(),
            stash: Map::default(),
            marks: Map::default(),
            asked: Map::default(),
            throttled_until: None,
        }
    }
}

/// Where one partition's answer comes from.
#[derive(Debug)]
enum Source {
    /// A stashed answer at the asked offset.
    Stashed(Box<PartitionData>),
    /// The answer of the entry's part at this index.
    Part(usize),
    /// Nothing asked yet: its broker is busy with a part that asked other
    /// offsets (or other partitions).
    Pending,
    /// No broker serves it: answered with this error.
    Error(ErrorCode),
}

/// One partition of the client's fetch.
#[derive(Debug)]
struct PartitionPlan {
    request: FetchPartition,
    /// The broker it is routed to (`None`: unroutable).
    broker: Option<BrokerId>,
    source: Source,
}

/// One topic entry of the client's fetch.
#[derive(Debug)]
struct TopicPlan {
    topic: TopicName,
    topic_id: Uuid,
    key: TopicRef,
    partitions: Vec<PartitionPlan>,
}

/// A split fetch's answer-to-be: where each partition's answer comes from,
/// and when to answer (see the module doc).
#[derive(Debug)]
pub struct FetchCombine {
    version: i16,
    /// How the client's session shapes the answer.
    session: SessionReply,
    /// The client's id, for the header of parts sent later.
    client_id: Option<Bytes>,
    min_bytes: i32,
    /// When to answer with what is in hand; `None`: when every part has.
    deadline: Option<Instant>,
    /// A part request with no topics: the client's fields, sessionless, and
    /// its share of the client's `max_bytes`.
    base: FetchRequest,
    topics: Vec<TopicPlan>,
    /// Per part of the entry, in order.
    metas: Vec<PartMeta>,
    /// How many of the first parts were adopted (parked by earlier fetches).
    adopted: usize,
    /// The client's `max_bytes`, which the whole answer keeps to (see
    /// [`bound`]).
    max_bytes: i32,
}

/// What the parts of an entry brought (see [`FetchState::assemble`]).
#[derive(Debug, Default)]
struct Arrived {
    /// Partition answers, by part index and partition.
    answered: Map<(usize, PartitionKey), PartitionData>,
    /// The parts that failed, with the error their partitions get.
    failed: Map<usize, ErrorCode>,
    throttle_time_ms: i32,
    /// The first top-level error.
    error_code: i16,
    /// The frame each part's answer came in, by part index.
    frames: Map<usize, Arc<Frame>>,
    node_endpoints: Vec<NodeEndpoint>,
}

/// A part to send for an entry.
#[derive(Debug)]
pub struct NewPart {
    /// Where to.
    pub broker: BrokerId,
    /// What (at the entry's version).
    pub request: FetchRequest,
    /// What the entry records once it is sent ([`FetchCombine::commit`]).
    pub claim: Claim,
}

/// The partitions a [`NewPart`] serves, and what it asks.
#[derive(Debug)]
pub struct Claim {
    meta: PartMeta,
    slots: Vec<(usize, usize)>,
}

impl Claim {
    /// Records the broker session the part went out in.
    pub fn sent_in(&mut self, sent_in: SentIn) {
        self.meta.sent_in = sent_in;
    }
}

/// A fetch planned against the connection's [`FetchState`].
#[derive(Debug)]
pub struct Planned<P> {
    /// The entry's combine.
    pub combine: FetchCombine,
    /// Parked parts the fetch adopted: the entry's first parts, in order.
    pub adopted: Vec<P>,
    /// New parts to send, after the adopted ones, in order; each is
    /// committed to `combine` once sent.
    pub fresh: Vec<NewPart>,
}

impl<P> FetchState<P> {
    /// Takes what happened to the fetch sessions since the last call, for
    /// the driver to count.
    pub fn take_session_events(&mut self) -> Vec<SessionEvent> {
        let mut events = self.sessions.take_events();
        events.extend(self.upstream.take_events());
        events
    }

    /// Whether nothing is parked or stashed (a sessionless fetch to one
    /// broker may then pass through untouched).
    pub fn is_idle(&self) -> bool {
        self.parked.is_empty() && self.stash.is_empty()
    }

    /// Takes the parked parts out (to see which have answered).
    pub fn take_parked(&mut self) -> Vec<Parked<P>> {
        std::mem::take(&mut self.parked)
    }

    /// Parks a part still out.
    pub fn park(&mut self, parked: Parked<P>) {
        self.parked.push(parked);
    }

    /// Plans the client's `request` (decoded at `version`), given its split
    /// into parts per broker (`routed`); `now` is when Sluice read it, from
    /// which `max_wait_ms` counts. Every stashed answer is used or dropped
    /// here.
    pub fn plan(
        &mut self,
        request: &FetchRequest,
        version: i16,
        (client_id, session): (Option<Bytes>, SessionReply),
        routed: &[(BrokerId, FetchRequest)],
        now: Instant,
    ) -> Planned<P> {
        let mut stash = std::mem::take(&mut self.stash);
        // Too old to serve: the client may have fetched elsewhere since,
        // and its watermarks (or error) are stale.
        stash.retain(|_, s| now.saturating_duration_since(s.since) < STASH_KEEP);
        let mut route = Routes::new(routed, version);
        let mut adopted = Vec::new();
        let mut metas = Vec::new();
        let mut busy: Set<BrokerId> = Set::default();
        for broker in routed.iter().map(|(b, _)| *b) {
            while let Some(at) = self.parked.iter().position(|p| p.meta.broker == broker) {
                let parked = self.parked.swap_remove(at);
                busy.insert(broker);
                adopted.push(parked.part);
                metas.push(parked.meta);
            }
        }
        let mut topics = Vec::with_capacity(request.topics.len());
        // A partition asked twice is planned once, where it first appears,
        // with its last fields (Kafka reads a fetch into a map the same way).
        // The fetch a client session stands for names each partition once.
        let distinct = matches!(session, SessionReply::Incremental(_));
        let last = (!distinct).then(|| last_asked(request, version));
        let mut planned = Set::default();
        for topic in &request.topics {
            let key = topic.topic_ref(version);
            let partitions: Vec<PartitionPlan> = topic
                .partitions
                .iter()
                .filter_map(|p| {
                    let pkey = (key.clone(), p.partition);
                    // In step with the parts: every entry, twice named or not.
                    let broker = route.next(&pkey);
                    let p = match &last {
                        None => p,
                        Some(last) => {
                            count_built(1);
                            if !planned.insert(pkey.clone()) {
                                return None;
                            }
                            last.get(&pkey).copied().unwrap_or(p)
                        }
                    };
                    let at = Position::of(p, request.isolation_level);
                    let source = match stash.remove(&pkey) {
                        Some(s) if s.at == at => Source::Stashed(s.data),
                        _ => match broker {
                            None => Source::Error(NOT_LEADER_OR_FOLLOWER),
                            Some(_) => adopted_source(&metas, &pkey, at),
                        },
                    };
                    Some(PartitionPlan {
                        request: p.clone(),
                        broker,
                        source,
                    })
                })
                .collect();
            if partitions.is_empty() && !topic.partitions.is_empty() {
                continue;
            }
            topics.push(TopicPlan {
                topic: topic.topic.clone(),
                topic_id: topic.topic_id,
                key,
                partitions,
            });
        }
        // A stashed partition the fetch asked for is taken or dropped
        // above; the client may still ask for the others, until they are
        // too old (see [`STASH_KEEP`]).
        self.stash = stash;
        self.compact_stash();
        let deadline = (request.max_wait_ms > 0 && request.min_bytes > 0)
            .then(|| now + Duration::from_millis(u64::from(request.max_wait_ms.unsigned_abs())));
        let combine = FetchCombine {
            version,
            session,
            client_id,
            min_bytes: request.min_bytes,
            deadline,
            base: base_request(request)
                .with_max_bytes(part_max_bytes(request.max_bytes, routed.len())),
            topics,
            adopted: metas.len(),
            metas,
            max_bytes: request.max_bytes,
        };
        let pending = |(t, p): (usize, usize)| {
            combine
                .topics
                .get(t)
                .and_then(|topic| topic.partitions.get(p))
                .is_some_and(|plan| matches!(plan.source, Source::Pending))
        };
        let fresh = combine.new_parts(
            pending,
            |b| !busy.contains(&b),
            (request.max_wait_ms, now),
            &mut self.asked,
        );
        Planned {
            combine,
            adopted,
            fresh,
        }
    }
}

/// What an error answer weighs against `min_bytes`: an error is worth
/// answering at once.
const ERROR_WEIGHT: usize = usize::MAX / 4;

/// The last entry the fetch has for each partition it asks for.
fn last_asked(request: &FetchRequest, version: i16) -> Map<PartitionKey, &FetchPartition> {
    let mut last = Map::default();
    for topic in &request.topics {
        let key = topic.topic_ref(version);
        for p in &topic.partitions {
            count_built(1);
            last.insert((key.clone(), p.partition), p);
        }
    }
    last
}

/// The broker each partition of the split goes to, read off the parts: a
/// split keeps the request's order in each part, so each partition of the
/// request, taken in order, is next in the part of its broker (or in none:
/// unroutable). Should a partition not be where the order puts it, every
/// partition is looked up in a map of the parts from then on.
struct Routes<'a> {
    version: i16,
    /// Per part: its broker, its topics, and where its next partition is
    /// (topic, partition within it).
    cursors: Vec<(BrokerId, &'a [FetchTopic], usize, usize)>,
    /// Each partition's broker, once the order did not hold.
    map: Option<Map<PartitionKey, BrokerId>>,
    routed: &'a [(BrokerId, FetchRequest)],
}

impl<'a> Routes<'a> {
    fn new(routed: &'a [(BrokerId, FetchRequest)], version: i16) -> Self {
        let cursors = routed
            .iter()
            .map(|(broker, part)| (*broker, part.topics.as_slice(), 0, 0))
            .collect();
        Self {
            version,
            cursors,
            map: None,
            routed,
        }
    }

    /// The broker of the request's next partition, `key`.
    fn next(&mut self, key: &PartitionKey) -> Option<BrokerId> {
        if let Some(map) = &self.map {
            return map.get(key).copied();
        }
        let version = self.version;
        for (broker, topics, t, p) in &mut self.cursors {
            // Past a topic's last partition (or an empty topic entry).
            while topics
                .get(*t)
                .is_some_and(|topic| *p >= topic.partitions.len())
            {
                *t += 1;
                *p = 0;
            }
            let Some(topic) = topics.get(*t) else {
                continue;
            };
            let here = topic.partitions.get(*p).map(|at| at.partition);
            if here == Some(key.1) && topic.topic_ref(version) == key.0 {
                *p += 1;
                return Some(*broker);
            }
        }
        // Unroutable, or out of order: the map says which.
        let map = self.map.insert(routes(self.routed, version));
        map.get(key).copied()
    }
}

/// The broker each partition of the split goes to.
fn routes(routed: &[(BrokerId, FetchRequest)], version: i16) -> Map<PartitionKey, BrokerId> {
    let mut route = Map::default();
    for (broker, part) in routed {
        for topic in &part.topics {
            let key = topic.topic_ref(version);
            for p in &topic.partitions {
                count_built(1);
                route.insert((key.clone(), p.partition), *broker);
            }
        }
    }
    route
}

/// An adopted part asking for `key` at `at` serves it; else it waits for
/// its broker.
fn adopted_source(metas: &[PartMeta], key: &PartitionKey, at: Position) -> Source {
    match metas.iter().position(|m| m.asked.get(key) == Some(&at)) {
        Some(index) => Source::Part(index),
        None => Source::Pending,
    }
}

/// The client's request with no topics, as a sessionless part (see
/// `split/fetch.rs`); the rack id is cleared (Sluice picks replicas).
fn base_request(request: &FetchRequest) -> FetchRequest {
    part_base(request).with_rack_id(StrBytes::default())
}

/// Adds a partition to `request`, under its topic's entry.
fn push_partition(request: &mut FetchRequest, topic: &TopicName, id: Uuid, p: &FetchPartition) {
    let same = |t: &FetchTopic| t.topic_id == id && t.topic == *topic;
    // Partitions come topic by topic: the last entry is most often theirs.
    let last = request.topics.len().checked_sub(1);
    let entry = match last
        .filter(|at| request.topics.get(*at).is_some_and(same))
        .or_else(|| request.topics.iter().position(same))
    {
        Some(at) => at,
        None => {
            let entry = FetchTopic::default()
                .with_topic(topic.clone())
                .with_topic_id(id);
            request.topics.push(entry);
            request.topics.len() - 1
        }
    };
    if let Some(entry) = request.topics.get_mut(entry) {
        entry.partitions.push(p.clone());
    }
}

/// Whether a partition answer tells the client something beyond watermarks.
fn worth_serving(data: &PartitionData) -> bool {
    data.error_code != 0 || records_len(data) > 0
}

/// A partition answer's weight against `min_bytes`: its record bytes, or
/// [`ERROR_WEIGHT`] for an error or a diverging epoch (the client must act
/// on it: brokers answer both at once).
fn weight(data: &PartitionData) -> usize {
    if data.error_code != 0 || data.diverging_epoch.epoch >= 0 {
        ERROR_WEIGHT
    } else {
        records_len(data)
    }
}

/// Whether a partition answer says anything but "nothing yet": records, an
/// error, or a hint (a diverging epoch, a leader, a preferred read replica,
/// a snapshot). Asked again at the same position, a broker would repeat it
/// at once.
fn settled(data: &PartitionData) -> bool {
    data.error_code != 0
        || records_len(data) > 0
        || data.diverging_epoch.epoch >= 0
        || data.current_leader.leader_id.0 >= 0
        || data.preferred_read_replica.0 >= 0
        || data.snapshot_id.epoch >= 0
}

fn records_len(data: &PartitionData) -> usize {
    data.records.as_ref().map_or(0, |r| r.len())
}
