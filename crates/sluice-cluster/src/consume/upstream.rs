//! The fetch sessions Sluice keeps with brokers (KIP-227), one per broker
//! per client connection, as a broker's own client keeps one per broker.
//!
//! Every fetch part names the partitions the client wants from that broker
//! now, at their offsets. Within a session only what changed goes out: new
//! partitions and changed fetch fields in `topics`, dropped ones in
//! `forgotten_topics_data`; the broker remembers the rest, and its answer
//! lists only partitions with news (the others count as answered empty).
//!
//! ```text
//! no session ──part──▶ opening (epoch 0, full) ──answer with an id──▶ open (epoch 1, 2, …)
//!      ▲                    │ answer without an id                     │
//!      └────────────────────┴──── a failed part, an undecodable answer, ┘
//!                                 FETCH_SESSION_ID_NOT_FOUND or
//!                                 INVALID_FETCH_SESSION_EPOCH
//! ```
//!
//! A session keys its partitions by topic name (opened below v13) or by
//! topic id (from v13), and a broker refuses an incremental fetch of the
//! other kind (FETCH_SESSION_TOPIC_ID_ERROR). So a part at a version of the
//! other kind (the client switched versions) opens a new session in place
//! of the open one, naming it: (S, 0).
//!
//! While a session is opening, another part to that broker (only a client
//! pipelining fetches makes one) goes out sessionless. After an error the
//! next part is a full fetch opening a new session, as the Java client's
//! `FetchSessionHandler` does: it names the session the broker may still
//! hold, (S, 0), which makes the broker drop it (unless the broker said it
//! has none). When the client goes, every session a broker may hold is
//! closed with a final (S, -1) fetch of nothing, as the Java client's close
//! does (`sink/fetch.rs`). A broker's session cache has room for few
//! sessions (1000 by default), and a session left behind holds its slot
//! until it has been unused for two minutes: short-lived consumers would
//! otherwise fill it, and every consumer of the cluster would fall back to
//! full fetches.
//!
//! A part is rewritten ([`UpstreamSessions::prepare`]) before it is sent,
//! but the session moves on ([`UpstreamSessions::commit`]) only once it is:
//! sending may wait (for a connection to open or be replaced, for room in
//! its queue), and a part waiting there can be dropped unsent (a refetch
//! is cancelled when the client sends its next request). Moved on before,
//! the session would wait for an answer that never comes (stuck opening,
//! every later part sessionless) or expect an epoch the broker never saw.

use crate::hash::Map;

use sluice_codec::kafka_protocol::messages::FetchRequest;
use sluice_codec::kafka_protocol::messages::FetchResponse;
use sluice_codec::kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic,
};
use uuid::Uuid;

use sluice_codec::ResponseKind;

use super::kept::owned_name;
use super::session::{SESSION_VERSION, SessionEvent, SessionSide, TOPIC_ID_VERSION};
use super::{FetchPart, PartMeta, PartitionKey};
use crate::error_codes::{
    ErrorCode, FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR,
    INVALID_FETCH_SESSION_EPOCH,
};
use sluice_codec::kafka_protocol::messages::TopicName;

use crate::split::fetch::NO_SESSION_ID;
use crate::split::order::TopicEntry;
use crate::topology::BrokerId;

/// Which session a part went out in: `(session_id, epoch)`; epoch 0 opens one.
pub type SentIn = Option<(i32, i32)>;

/// One session with one broker.
#[derive(Debug, Default)]
enum Upstream {
    /// None: the next part opens one.
    #[default]
    Closed,
    /// A part opening one is out.
    Opening,
    /// Open, with what the broker holds for it.
    Open {
        id: i32,
        next_epoch: i32,
        partitions: Map<PartitionKey, SessionEntry>,
        /// Whether it was opened at v13+ (keyed by topic id).
        topic_ids: bool,
    },
}

/// A partition as the broker's session holds it.
#[derive(Debug, Clone)]
struct SessionEntry {
    topic: TopicName,
    topic_id: Uuid,
    request: FetchPartition,
}

/// A part rewritten into a broker session, not yet sent (see the module
/// doc): [`UpstreamSessions::commit`] it once it is.
#[derive(Debug)]
pub struct Prepared {
    broker: BrokerId,
    sent_in: SentIn,
    /// What the broker's session holds once the part is sent.
    update: Update,
    version: i16,
}

/// How a part changes what a broker's session holds.
#[derive(Debug)]
enum Update {
    /// All of it: the part opens a session with these partitions.
    Whole(Map<PartitionKey, SessionEntry>),
    /// The partitions added or changed, and those forgotten, in the open
    /// session.
    Delta {
        changed: Vec<(PartitionKey, SessionEntry)>,
        forgotten: Vec<PartitionKey>,
    },
}

impl Update {
    const NONE: Update = Update::Delta {
        changed: Vec::new(),
        forgotten: Vec::new(),
    };
}

/// A client connection's fetch sessions with the brokers.
#[derive(Debug, Default)]
pub struct UpstreamSessions {
    brokers: Map<BrokerId, Upstream>,
    /// What the opening part of each broker asked, to open the session
    /// with, and at which version.
    opening: Map<BrokerId, (Map<PartitionKey, SessionEntry>, i16)>,
    /// A session a broker may still hold though Sluice gave it up (after a
    /// wrong epoch or a failed part): the next opening part names it.
    stale: Map<BrokerId, i32>,
    /// The version parts were last sent at.
    version: i16,
    /// What happened to the sessions since the driver last took it.
    events: Vec<SessionEvent>,
}

impl UpstreamSessions {
    /// Takes what happened to the sessions since the last call.
    pub fn take_events(&mut self) -> Vec<SessionEvent> {
        std::mem::take(&mut self.events)
    }

    /// Rewrites a sessionless `part` for `broker` (at `version`) into the
    /// broker's session: opening one, or incremental. The session is left
    /// as it is until the part is sent and [`commit`](Self::commit)ted.
    pub fn prepare(&self, broker: BrokerId, part: &mut FetchRequest, version: i16) -> Prepared {
        let (sent_in, update) = match self.brokers.get(&broker) {
            _ if version < SESSION_VERSION => (None, Update::NONE),
            None | Some(Upstream::Closed) => {
                let id = self.stale.get(&broker).copied().unwrap_or(NO_SESSION_ID);
                part.session_id = id;
                part.session_epoch = 0;
                (Some((id, 0)), Update::Whole(entries(part, version)))
            }
            Some(Upstream::Opening) => (None, Update::NONE),
            // Keyed otherwise: a new session replaces it.
            Some(Upstream::Open { id, topic_ids, .. })
                if *topic_ids != (version >= TOPIC_ID_VERSION) =>
            {
                part.session_id = *id;
                part.session_epoch = 0;
                (Some((*id, 0)), Update::Whole(entries(part, version)))
            }
            Some(Upstream::Open {
                id,
                next_epoch,
                partitions,
                ..
            }) => {
                let update = delta(partitions, part, version);
                part.session_id = *id;
                part.session_epoch = *next_epoch;
                (Some((*id, *next_epoch)), update)
            }
        };
        Prepared {
            broker,
            sent_in,
            update,
            version,
        }
    }

    /// Moves the session on for a [`prepare`](Self::prepare)d part that
    /// was sent (or failed to be: its failure then closes the session).
    /// Returns the session it went out in.
    pub fn commit(&mut self, prepared: Prepared) -> SentIn {
        let Prepared {
            broker,
            sent_in,
            update,
            version,
        } = prepared;
        let (sent_id, sent_epoch) = sent_in?;
        self.version = version;
        let state = self.brokers.entry(broker).or_default();
        match (state, update) {
            (state @ (Upstream::Closed | Upstream::Open { .. }), Update::Whole(wanted))
                if sent_epoch == 0 =>
            {
                *state = Upstream::Opening;
                self.opening.insert(broker, (wanted, version));
                self.stale.remove(&broker);
            }
            (
                Upstream::Open {
                    id,
                    next_epoch,
                    partitions,
                    ..
                },
                Update::Delta { changed, forgotten },
            ) if *id == sent_id && *next_epoch == sent_epoch => {
                *next_epoch = sent_epoch.checked_add(1).unwrap_or(1);
                for key in &forgotten {
                    partitions.remove(key);
                }
                super::count_built(changed.len());
                partitions.extend(changed);
                self.events
                    .push(SessionEvent::Incremental(SessionSide::Broker));
            }
            // Prepared against another state (nothing sends between the
            // two, so this does not happen): the part's answer cannot be
            // trusted to the session; start over.
            (state, _) => {
                *state = Upstream::Closed;
                self.opening.remove(&broker);
            }
        }
        sent_in
    }

    /// Learns from the answer to a part sent in `sent`.
    pub fn answered(&mut self, broker: BrokerId, sent: SentIn, answer: &FetchResponse) {
        let Some((_, epoch)) = sent else {
            return;
        };
        let code = ErrorCode::from_wire(answer.error_code);
        let session_error = is_session_error(code);
        let state = self.brokers.entry(broker).or_default();
        if session_error {
            self.events
                .push(SessionEvent::Error(SessionSide::Broker, code));
            *state = Upstream::Closed;
            // A wrong epoch or topic keys: the broker still holds the session.
            if let Some((id, _)) = sent.filter(|_| code != FETCH_SESSION_ID_NOT_FOUND)
                && id != NO_SESSION_ID
            {
                self.stale.insert(broker, id);
            }
            return;
        }
        if epoch == 0 {
            let (partitions, version) = self.opening.remove(&broker).unwrap_or_default();
            *state = if answer.error_code == 0 && answer.session_id != NO_SESSION_ID {
                self.events.push(SessionEvent::Opened(SessionSide::Broker));
                Upstream::Open {
                    id: answer.session_id,
                    next_epoch: 1,
                    partitions,
                    topic_ids: version >= TOPIC_ID_VERSION,
                }
            } else {
                Upstream::Closed
            };
        }
    }

    /// Forgets the session with `broker` after a part sent in `sent` failed
    /// (the broker may or may not have applied it).
    pub fn failed(&mut self, broker: BrokerId, sent: SentIn) {
        let Some((sent_id, _)) = sent else {
            return;
        };
        let held = match self.brokers.insert(broker, Upstream::Closed) {
            Some(Upstream::Open { id, .. }) => id,
            _ => sent_id,
        };
        if held != NO_SESSION_ID {
            self.stale.insert(broker, held);
        }
        self.opening.remove(&broker);
    }

    /// The sessions the brokers may hold for this connection, by broker.
    pub fn held(&self) -> impl Iterator<Item = (BrokerId, i32)> + '_ {
        let open = self
            .brokers
            .iter()
            .filter_map(|(broker, state)| match state {
                Upstream::Open { id, .. } => Some((*broker, *id)),
                Upstream::Closed | Upstream::Opening => None,
            });
        open.chain(self.stale.iter().map(|(broker, id)| (*broker, *id)))
    }

    /// The topic names the sessions hold, in their entries and keys.
    #[cfg(test)]
    pub(super) fn held_names(&self) -> Vec<&[u8]> {
        let mut names = Vec::new();
        for state in self.brokers.values() {
            if let Upstream::Open { partitions, .. } = state {
                for (key, entry) in partitions {
                    names.push(entry.topic.as_bytes());
                    if let crate::topology::TopicRef::Name(name) = &key.0 {
                        names.push(name.as_bytes());
                    }
                }
            }
        }
        names
    }

    /// The version parts were last sent at (that of a session's close).
    pub fn version(&self) -> i16 {
        self.version
    }
}

/// Whether `code` is a session error, which is the session's business and
/// never the client's.
pub(super) fn is_session_error(code: ErrorCode) -> bool {
    matches!(
        code,
        FETCH_SESSION_ID_NOT_FOUND | INVALID_FETCH_SESSION_EPOCH | FETCH_SESSION_TOPIC_ID_ERROR
    )
}

/// A part's partitions by key. The session keeps them after the part is
/// gone, so their topic names are copied out of the client's request
/// frame (a decoded name is a slice of it, and would keep it all).
fn entries(part: &FetchRequest, version: i16) -> Map<PartitionKey, SessionEntry> {
    let mut wanted = Map::default();
    for topic in &part.topics {
        let name = owned_name(&topic.topic);
        let key = FetchTopic::default()
            .with_topic(name.clone())
            .with_topic_id(topic.topic_id)
            .topic_ref(version);
        for p in &topic.partitions {
            let entry = SessionEntry {
                topic: name.clone(),
                topic_id: topic.topic_id,
                request: p.clone(),
            };
            super::count_built(1);
            wanted.insert((key.clone(), p.partition), entry);
        }
    }
    wanted
}

/// `p` of `topic` as a session holds it, its topic name copied out of the
/// client's request frame (see [`entries`]).
fn entry_of(topic: &FetchTopic, p: &FetchPartition, version: i16) -> (PartitionKey, SessionEntry) {
    let name = owned_name(&topic.topic);
    let key = FetchTopic::default()
        .with_topic(name.clone())
        .with_topic_id(topic.topic_id)
        .topic_ref(version);
    let entry = SessionEntry {
        topic: name,
        topic_id: topic.topic_id,
        request: p.clone(),
    };
    ((key, p.partition), entry)
}

/// Rewrites `part` (naming each partition once: parts are cut from a
/// planned fetch) into what changed from `held`: the partitions new or
/// with other fields, and those to forget. Walks the part and looks each
/// partition up; only a part that leaves some of `held` out is gathered
/// into a set, to find which.
fn delta(held: &Map<PartitionKey, SessionEntry>, part: &mut FetchRequest, version: i16) -> Update {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut changed = Vec::new();
    let mut kept: usize = 0;
    for topic in &part.topics {
        let key = topic.topic_ref(version);
        let mut sent: Option<FetchTopic> = None;
        for p in &topic.partitions {
            let pkey = (key.clone(), p.partition);
            match held.get(&pkey) {
                Some(h) if h.request == *p => {
                    kept += 1;
                    continue;
                }
                Some(_) => kept += 1,
                None => {}
            }
            sent.get_or_insert_with(|| {
                FetchTopic::default()
                    .with_topic(topic.topic.clone())
                    .with_topic_id(topic.topic_id)
            })
            .partitions
            .push(p.clone());
            changed.push((topic, p));
        }
        topics.extend(sent);
    }
    let changed: Vec<(PartitionKey, SessionEntry)> = changed
        .into_iter()
        .map(|(topic, p)| entry_of(topic, p, version))
        .collect();
    let mut forgotten_topics: Vec<ForgottenTopic> = Vec::new();
    let mut forgotten = Vec::new();
    if kept < held.len() {
        let wanted: crate::hash::Set<PartitionKey> = part
            .topics
            .iter()
            .flat_map(|t| {
                let key = t.topic_ref(version);
                t.partitions.iter().map(move |p| (key.clone(), p.partition))
            })
            .collect();
        super::count_built(wanted.len());
        for (key, entry) in held {
            if wanted.contains(key) {
                continue;
            }
            forgotten.push(key.clone());
            let at = match forgotten_topics
                .iter()
                .position(|t| t.topic == entry.topic && t.topic_id == entry.topic_id)
            {
                Some(at) => at,
                None => {
                    let mut topic = ForgottenTopic::default().with_topic_id(entry.topic_id);
                    if version < TOPIC_ID_VERSION {
                        topic.topic = entry.topic.clone();
                    }
                    forgotten_topics.push(topic);
                    forgotten_topics.len() - 1
                }
            };
            if let Some(topic) = forgotten_topics.get_mut(at) {
                topic.partitions.push(key.1);
            }
        }
    }
    part.topics = topics;
    part.forgotten_topics_data = forgotten_topics;
    Update::Delta { changed, forgotten }
}

/// Learns the broker session from a part's answer or failure, once: a
/// session error is the session's business, so it is cleared from the
/// answer (the broker listed no partition with it; they count as answered
/// empty and are fetched again).
pub fn learn<P: FetchPart>(part: &mut P, meta: &mut PartMeta, upstream: &mut UpstreamSessions) {
    if meta.learned || part.is_waiting() {
        return;
    }
    meta.learned = true;
    let Some(response) = part.answer_mut() else {
        upstream.failed(meta.broker, meta.sent_in);
        return;
    };
    if meta.sent_in.is_none() {
        return;
    }
    match response.body_mut() {
        Ok(ResponseKind::Fetch(answer)) => {
            upstream.answered(meta.broker, meta.sent_in, answer);
            if is_session_error(ErrorCode::from_wire(answer.error_code)) {
                answer.error_code = 0;
            }
        }
        _ => upstream.failed(meta.broker, meta.sent_in),
    }
}
