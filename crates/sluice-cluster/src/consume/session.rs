//! The fetch session Sluice offers a client (KIP-227).
//!
//! A client's fetch session lives on its connection to a Sluice node, so
//! one per connection: the client's partitions span brokers, and Sluice
//! keeps its own sessions with them (see `consume/upstream.rs`). A client
//! with thousands of partitions then sends only what changed.
//!
//! What the request's `session_id` and `session_epoch` mean, as brokers
//! read them:
//!
//! | session_id | epoch | meaning |
//! |---|---|---|
//! | 0 | -1 | a full fetch, no session (the open one stays open) |
//! | 0 | 0 | a full fetch opening a new session |
//! | S | 0 | close S if it is open, open a new session with this full fetch |
//! | S | -1 | close S if it is open, a full fetch with no session |
//! | S | E > 0 | an incremental fetch in S, which must expect epoch E |
//!
//! A full fetch (epoch 0 or -1) is served whatever session id it names, as
//! Kafka's `FetchManager` does: a client whose connection dropped names its
//! old session on the new one. Only one session is open per connection, so
//! opening one closes the other.
//!
//! An incremental fetch lists the partitions that are new or whose fetch
//! fields changed, and `forgotten_topics_data` the ones to drop; the
//! session remembers the rest. Its answer lists only the partitions with
//! news: records, an error, watermarks other than the client was last told,
//! or a diverging epoch, leader or preferred replica. An unknown session id
//! is answered FETCH_SESSION_ID_NOT_FOUND and a wrong epoch
//! INVALID_FETCH_SESSION_EPOCH, after which clients start over with a full
//! fetch. A session names its topics by name (opened below v13) or by id
//! (from v13) for its life: an incremental fetch at a version of the other
//! kind is answered FETCH_SESSION_TOPIC_ID_ERROR, as Kafka answers it (the
//! Java client switches versions within a session when a topic id goes
//! missing, and relies on that answer to start over).

use crate::hash::{Map, Set};

use bytes::Bytes;

use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::fetch_response::PartitionData;
use sluice_codec::kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use uuid::Uuid;

use super::kept::owned_name;
use super::{Marks, PartitionKey};
use crate::error_codes::{
    ErrorCode, FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR,
    INVALID_FETCH_SESSION_EPOCH,
};
use crate::split::fetch::{FINAL_EPOCH, NO_SESSION_ID};
use crate::split::order::TopicEntry;
use crate::topology::{TopicId, TopicRef};

/// The first version with fetch sessions.
pub(super) const SESSION_VERSION: i16 = 7;

/// The first version naming topics by id.
pub(super) const TOPIC_ID_VERSION: i16 = 13;

/// How a client's fetch relates to its session; decides how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionReply {
    /// No session: a full answer with `session_id` 0.
    None,
    /// A new session: a full answer carrying its id.
    Opened(i32),
    /// An incremental fetch in this session: only partitions with news.
    Incremental(i32),
}

/// One partition of a session, with the fetch fields last sent for it.
#[derive(Debug, Clone)]
struct SessionPartition {
    key: PartitionKey,
    topic: TopicName,
    topic_id: Uuid,
    request: FetchPartition,
    /// What the client was last told, to leave out answers with no news.
    told: Option<Marks>,
}

/// A client's fetch session with Sluice.
#[derive(Debug, Default)]
pub struct ClientSessions {
    /// The open session, if any.
    open: Option<Session>,
    /// The id the last session was given (ids are per connection).
    last_id: i32,
    /// What happened to the sessions since the driver last took it.
    events: Vec<SessionEvent>,
}

#[derive(Debug)]
struct Session {
    id: i32,
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    /// Whether its partitions are keyed by topic id (opened at v13+).
    uses_topic_ids: bool,
    /// In the order the client added them.
    partitions: Vec<SessionPartition>,
    /// Where each partition is in `partitions`.
    index: Map<PartitionKey, usize>,
    /// What `partitions` hold, by [`SessionPartition::held_bytes`].
    held_bytes: usize,
}

impl ClientSessions {
    /// Takes what happened to the session since the last call.
    pub fn take_events(&mut self) -> Vec<SessionEvent> {
        std::mem::take(&mut self.events)
    }

    /// Reads the session fields of `request` (decoded at `version`): the
    /// full fetch to serve (the session's partitions for an incremental
    /// one) and how to answer, or the session error to answer with.
    pub fn apply(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<(Option<FetchRequest>, SessionReply), ErrorCode> {
        let applied = self.apply_fields(request, version);
        match &applied {
            Ok((_, SessionReply::Opened(_))) => {
                self.events.push(SessionEvent::Opened(SessionSide::Client));
            }
            Ok((_, SessionReply::Incremental(_))) => {
                self.events
                    .push(SessionEvent::Incremental(SessionSide::Client));
            }
            Ok((_, SessionReply::None)) => {}
            Err(code) => self
                .events
                .push(SessionEvent::Error(SessionSide::Client, *code)),
        }
        applied
    }

    fn apply_fields(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<(Option<FetchRequest>, SessionReply), ErrorCode> {
        if version < SESSION_VERSION {
            return Ok((None, SessionReply::None));
        }
        let (id, epoch) = (request.session_id, request.session_epoch);
        match epoch {
            // A full fetch closes the session it names, if it is open, and
            // is served whatever that id is (a client reconnecting asks
            // (S, 0) with the S of its last connection).
            FINAL_EPOCH => {
                self.close(id);
                let full = (id != NO_SESSION_ID || !request.forgotten_topics_data.is_empty())
                    .then(|| sessionless(request, request.topics.clone()));
                Ok((full, SessionReply::None))
            }
            0 => {
                self.close(id);
                let id = self.open_new(request, version);
                Ok((
                    Some(sessionless(request, request.topics.clone())),
                    SessionReply::Opened(id),
                ))
            }
            _ => {
                let Some(session) = self
                    .open
                    .as_mut()
                    .filter(|s| id != NO_SESSION_ID && s.id == id)
                else {
                    return Err(FETCH_SESSION_ID_NOT_FOUND);
                };
                if epoch != session.next_epoch {
                    return Err(INVALID_FETCH_SESSION_EPOCH);
                }
                if session.uses_topic_ids != (version >= TOPIC_ID_VERSION) {
                    return Err(FETCH_SESSION_TOPIC_ID_ERROR);
                }
                session.next_epoch = next_epoch(epoch);
                session.update(request, version);
                Ok((
                    Some(sessionless(request, session.topics())),
                    SessionReply::Incremental(session.id),
                ))
            }
        }
    }

    /// Shapes the full answer to a fetch that `reply` describes: the
    /// session id, and for an incremental fetch only the partitions with
    /// news. Records what the client is told.
    pub fn answer(&mut self, reply: SessionReply, response: &mut FetchResponse, version: i16) {
        let (id, incremental) = match reply {
            SessionReply::None => return,
            SessionReply::Opened(id) => (id, false),
            SessionReply::Incremental(id) => (id, true),
        };
        let Some(session) = self.open.as_mut().filter(|s| s.id == id) else {
            // The session was closed meanwhile (a pipelined fetch): a full
            // answer without a session is still a valid answer.
            return;
        };
        response.session_id = id;
        for topic in &mut response.responses {
            let key = topic.topic_ref(version);
            topic.partitions.retain(|p| {
                let Some(at) = session.index.get(&(key.clone(), p.partition_index)) else {
                    return !incremental;
                };
                let Some(entry) = session.partitions.get_mut(*at) else {
                    return !incremental;
                };
                let news = has_news(p, entry.told);
                if news || !incremental {
                    entry.told = told(p).or(entry.told);
                }
                news || !incremental
            });
        }
        if incremental {
            response.responses.retain(|t| !t.partitions.is_empty());
        }
    }

    /// Whether session `id` is the open one.
    pub(super) fn is_open(&self, id: i32) -> bool {
        self.open.as_ref().is_some_and(|s| s.id == id)
    }

    /// Whether an answer for `key` with nothing but the watermarks `marks`
    /// (`None`: none known) is news to the client in the open session `id`,
    /// as [`answer`](Self::answer) judges it.
    pub(super) fn empty_is_news(&self, id: i32, key: &PartitionKey, marks: Option<Marks>) -> bool {
        let Some(session) = self.open.as_ref().filter(|s| s.id == id) else {
            return true;
        };
        let Some(entry) = session
            .index
            .get(key)
            .and_then(|at| session.partitions.get(*at))
        else {
            return false;
        };
        marks.is_some_and(|m| m.high_watermark >= 0 && Some(m) != entry.told)
    }

    /// What the open session holds, in bytes, roughly: it lives as long as
    /// the connection and grows with every partition an incremental fetch
    /// adds, so it counts against the client's memory budget (see
    /// `consume/kept.rs`).
    pub fn held_bytes(&self) -> usize {
        self.open.as_ref().map_or(0, |session| session.held_bytes)
    }

    /// The topic names the open session holds, in its entries and keys.
    #[cfg(test)]
    pub(super) fn held_names(&self) -> Vec<&[u8]> {
        let Some(session) = self.open.as_ref() else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for p in &session.partitions {
            names.push(p.topic.as_bytes());
            if let TopicRef::Name(name) = &p.key.0 {
                names.push(name.as_bytes());
            }
        }
        names
    }

    /// Closes session `id` if it is the open one.
    fn close(&mut self, id: i32) {
        if id != NO_SESSION_ID && self.open.as_ref().is_some_and(|s| s.id == id) {
            self.open = None;
        }
    }

    /// Opens a new session with the partitions of the full fetch `request`,
    /// in place of any other (one per connection).
    fn open_new(&mut self, request: &FetchRequest, version: i16) -> i32 {
        self.last_id = next_epoch(self.last_id.max(0));
        let mut session = Session {
            id: self.last_id,
            next_epoch: 1,
            uses_topic_ids: version >= TOPIC_ID_VERSION,
            partitions: Vec::new(),
            index: Map::default(),
            held_bytes: 0,
        };
        session.update(request, version);
        self.open = Some(session);
        self.last_id
    }
}

/// What one partition of a session holds besides its topic name: the
/// entry, its fetch fields and its index entry, roughly.
const SESSION_PARTITION_BYTES: usize = 2 * std::mem::size_of::<SessionPartition>();

impl SessionPartition {
    /// What it holds, roughly: the entry and its topic name (in the entry
    /// and in its key).
    fn held_bytes(&self) -> usize {
        SESSION_PARTITION_BYTES + 2 * self.topic.len()
    }
}

impl Session {
    /// Adds or updates the request's partitions, then drops the forgotten
    /// ones. What it keeps is copied out of the request: a decoded
    /// request's names are slices of its frame, and a slice kept for the
    /// session's life would keep the whole frame (up to 100 MiB) with it.
    fn update(&mut self, request: &FetchRequest, version: i16) {
        for topic in &request.topics {
            let name = owned_name(&topic.topic);
            let key = FetchTopic::default()
                .with_topic(name.clone())
                .with_topic_id(topic.topic_id)
                .topic_ref(version);
            for p in &topic.partitions {
                let pkey = (key.clone(), p.partition);
                match self
                    .index
                    .get(&pkey)
                    .and_then(|at| self.partitions.get_mut(*at))
                {
                    Some(entry) => entry.request = owned_partition(p),
                    None => {
                        super::count_built(1);
                        self.index.insert(pkey.clone(), self.partitions.len());
                        let entry = SessionPartition {
                            key: pkey,
                            topic: name.clone(),
                            topic_id: topic.topic_id,
                            request: owned_partition(p),
                            told: None,
                        };
                        self.held_bytes = self.held_bytes.saturating_add(entry.held_bytes());
                        self.partitions.push(entry);
                    }
                }
            }
        }
        if request.forgotten_topics_data.is_empty() {
            return;
        }
        let mut forgotten = Set::default();
        for topic in &request.forgotten_topics_data {
            let key = if version >= TOPIC_ID_VERSION {
                TopicRef::Id(TopicId(topic.topic_id.as_u128()))
            } else {
                TopicRef::Name(topic.topic.clone())
            };
            forgotten.extend(topic.partitions.iter().map(|p| (key.clone(), *p)));
        }
        self.partitions.retain(|p| !forgotten.contains(&p.key));
        super::count_built(self.partitions.len());
        self.held_bytes = self
            .partitions
            .iter()
            .map(SessionPartition::held_bytes)
            .fold(0, usize::saturating_add);
        self.index = self
            .partitions
            .iter()
            .enumerate()
            .map(|(at, p)| (p.key.clone(), at))
            .collect();
    }

    /// The session's partitions as topic entries, in the order added.
    fn topics(&self) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for p in &self.partitions {
            match topics.last_mut() {
                Some(last) if last.topic == p.topic && last.topic_id == p.topic_id => {
                    last.partitions.push(p.request.clone());
                }
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic(p.topic.clone())
                        .with_topic_id(p.topic_id)
                        .with_partitions(vec![p.request.clone()]),
                ),
            }
        }
        topics
    }
}

/// `p` with its tagged fields in their own allocations.
fn owned_partition(p: &FetchPartition) -> FetchPartition {
    let mut owned = p.clone();
    for value in owned.unknown_tagged_fields.values_mut() {
        *value = Bytes::copy_from_slice(value);
    }
    owned
}

/// `request` as a sessionless full fetch of `topics`.
fn sessionless(request: &FetchRequest, topics: Vec<FetchTopic>) -> FetchRequest {
    let mut full = request.clone();
    full.session_id = NO_SESSION_ID;
    full.session_epoch = FINAL_EPOCH;
    full.forgotten_topics_data = Vec::new();
    full.topics = topics;
    full
}

/// Which side of Sluice a fetch session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSide {
    /// A client's session with Sluice.
    Client,
    /// Sluice's session with a broker.
    Broker,
}

impl SessionSide {
    /// Its name, as a metric label.
    pub fn name(self) -> &'static str {
        match self {
            SessionSide::Client => "client",
            SessionSide::Broker => "broker",
        }
    }
}

/// Something that happened to a fetch session, for the driver to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// A session was opened.
    Opened(SessionSide),
    /// An incremental fetch went through a session.
    Incremental(SessionSide),
    /// A session failed with this error code.
    Error(SessionSide, ErrorCode),
}

/// The answer to a fetch in a session Sluice does not have (or at an epoch
/// it does not expect): the error, no session, no partitions.
pub fn session_error_answer(code: ErrorCode) -> FetchResponse {
    FetchResponse::default().with_error_code(code.code())
}

/// The name of a fetch session error code, as a metric label.
pub fn session_error_name(code: ErrorCode) -> &'static str {
    match code {
        FETCH_SESSION_ID_NOT_FOUND => "FETCH_SESSION_ID_NOT_FOUND",
        FETCH_SESSION_TOPIC_ID_ERROR => "FETCH_SESSION_TOPIC_ID_ERROR",
        _ => "INVALID_FETCH_SESSION_EPOCH",
    }
}

/// The epoch (or session id) after `n`: 1 after the largest.
fn next_epoch(n: i32) -> i32 {
    n.checked_add(1).unwrap_or(1)
}

/// The watermarks a partition answer tells (none when it knows none).
fn told(p: &PartitionData) -> Option<Marks> {
    (p.error_code == 0 && p.high_watermark >= 0).then_some(Marks {
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        log_start_offset: p.log_start_offset,
    })
}

/// Whether an incremental answer must list the partition.
fn has_news(p: &PartitionData, told_before: Option<Marks>) -> bool {
    p.error_code != 0
        || p.records.as_ref().is_some_and(|r| !r.is_empty())
        || (told(p).is_some() && told(p) != told_before)
        || p.diverging_epoch.epoch >= 0
        || p.current_leader.leader_id.0 >= 0
        || p.preferred_read_replica.0 >= 0
        || p.snapshot_id.epoch >= 0
}
