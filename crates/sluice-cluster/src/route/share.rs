//! Share groups (KIP-932): the client's share sessions, which Sluice holds,
//! and the share sessions Sluice keeps with each broker for them.
//!
//! A share session is between a consumer and one broker: keyed by group and
//! member id, opened by a ShareFetch at epoch 0, continued at the next epoch
//! by each ShareFetch and ShareAcknowledge (incremental: the partitions added
//! and forgotten), closed at epoch -1. Records a ShareFetch acquires are
//! acquired from the broker that answered it, and only that broker can take
//! their acknowledgements. A Sluice node stands for several brokers, so:
//!
//! - the client's session is with Sluice ([`ShareSessions`], one set per
//!   client connection): its partitions and its next epoch, checked as a
//!   broker checks them (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH);
//! - for each client session, Sluice keeps one session with each broker
//!   leading some of its partitions, with epochs of its own ([`BrokerSession`]):
//!   a ShareFetch becomes one part per broker listing what that broker's
//!   session gains and forgets, a partition whose leader moved is forgotten
//!   by its old leader's session and added to its new one's, and a broker
//!   that leads none of the partitions any more has its session closed;
//! - each partition remembers the broker it last acquired records from;
//!   acknowledgements go back to that broker (piggybacked on its ShareFetch
//!   part, or in a ShareAcknowledge part). Acknowledgements for a broker
//!   that no longer leads their partition get NOT_LEADER_OR_FOLLOWER, as
//!   the old leader would answer them, and those for a broker whose session
//!   Sluice lost get INVALID_RECORD_STATE (the broker released the records
//!   it acquired in that session): never dropped unanswered, and never with
//!   a code the client would retry in vain (a ShareAcknowledge cannot open a
//!   session again). The records are delivered again;
//! - a broker that fails answers its part's partitions with
//!   NOT_LEADER_OR_FOLLOWER (fetch and acknowledgements), and its session is
//!   opened again on the next fetch; a broker's own session errors never
//!   reach the client, which keeps its session with Sluice.
//!
//! Everything here is data in, data out: the driver (`sink/share.rs`) sends
//! the parts and hands the answers back to [`ShareSessions::merge_fetch`] or
//! [`ShareSessions::merge_acknowledge`]. What a client's sessions hold counts
//! against its memory budget ([`ShareSessions::kept_bytes`]), and a client
//! connection holds at most [`MAX_SESSIONS`] of them.

pub mod ack;
pub mod coordinator;
pub mod fetch;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

use std::collections::HashMap;

use sluice_codec::kafka_protocol::messages::{GroupId, RequestKind};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{Stale, partition_staleness};
use crate::error_codes::{
    ErrorCode, INVALID_RECORD_STATE, INVALID_SHARE_SESSION_EPOCH, NOT_LEADER_OR_FOLLOWER,
    SHARE_SESSION_LIMIT_REACHED, SHARE_SESSION_NOT_FOUND,
};
use crate::split::PartitionLeaders;
use crate::topology::{BrokerId, TopicId, TopicRef};

/// The most share sessions one client connection may hold with Sluice (a
/// share consumer holds one per node it fetches from).
pub const MAX_SESSIONS: usize = 16;

/// The epoch that opens a share session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch that closes a share session.
pub const FINAL_EPOCH: i32 = -1;

/// The epoch after `epoch`, as Kafka counts (`ShareRequestMetadata.nextEpoch`):
/// 0 is followed by 1, the final epoch stays final, and the largest wraps to 1.
pub fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        FINAL_EPOCH => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

/// A share partition: topic id and partition index.
pub type SharePartition = (Uuid, i32);

/// Who owns a share session: its group and member.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The share group.
    pub group: StrBytes,
    /// The member, as the client names it.
    pub member: StrBytes,
}

impl SessionKey {
    /// The key of a request's session.
    fn of(group: Option<&GroupId>, member: Option<&StrBytes>) -> Self {
        Self {
            group: group.map(|g| g.0.clone()).unwrap_or_default(),
            member: member.cloned().unwrap_or_default(),
        }
    }

    fn bytes(&self) -> usize {
        self.group.len() + self.member.len()
    }
}

/// Sluice's share session with one broker for one client session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSession {
    /// The broker.
    pub broker: BrokerId,
    /// The epoch of the next request to it.
    pub epoch: i32,
    /// The partitions the broker holds in the session.
    pub partitions: Vec<SharePartition>,
}

/// A client's share session with Sluice.
#[derive(Debug, Clone, Default)]
struct ClientSession {
    /// The epoch the client's next request must carry.
    next_epoch: i32,
    /// The session's partitions, in the order the client added them.
    partitions: Vec<SharePartition>,
    /// Sluice's session with each broker (open: epoch above 0).
    brokers: Vec<BrokerSession>,
    /// The broker each partition last acquired records from.
    acquired_from: HashMap<SharePartition, BrokerId>,
    /// The brokers' acquisition lock timeout, as last answered.
    lock_timeout_ms: i32,
}

impl ClientSession {
    fn opened() -> Self {
        Self {
            next_epoch: next_epoch(INITIAL_EPOCH),
            ..Self::default()
        }
    }

    fn broker(&self, id: BrokerId) -> Option<&BrokerSession> {
        self.brokers.iter().find(|b| b.broker == id)
    }

    fn broker_mut(&mut self, id: BrokerId) -> &mut BrokerSession {
        if let Some(i) = self.brokers.iter().position(|b| b.broker == id) {
            return &mut self.brokers[i];
        }
        self.brokers.push(BrokerSession {
            broker: id,
            epoch: INITIAL_EPOCH,
            partitions: Vec::new(),
        });
        let last = self.brokers.len() - 1;
        &mut self.brokers[last]
    }

    /// Forgets Sluice's session with `broker`: the next part opens a new one.
    fn reset(&mut self, broker: BrokerId) {
        self.brokers.retain(|b| b.broker != broker);
    }

    fn bytes(&self) -> usize {
        let partition = std::mem::size_of::<SharePartition>();
        self.partitions.len() * partition
            + self
                .brokers
                .iter()
                .map(|b| std::mem::size_of::<BrokerSession>() + b.partitions.len() * partition)
                .sum::<usize>()
            + self.acquired_from.len() * (partition + std::mem::size_of::<BrokerId>() + 8)
    }
}

/// Where the acknowledgements of one partition go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckRoute {
    /// To this broker, in its open session.
    Broker(BrokerId),
    /// Answered by Sluice with this acknowledge error code.
    Refused(ErrorCode),
}

/// A client's share sessions with Sluice, for one client connection.
#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: HashMap<SessionKey, ClientSession>,
}

/// Why a client's request gets a top-level error instead of being routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The top-level error code.
    pub error_code: ErrorCode,
}

impl ShareSessions {
    /// What the sessions hold, for the client's memory budget.
    pub fn kept_bytes(&self) -> usize {
        self.sessions
            .iter()
            .map(|(k, s)| k.bytes() + std::mem::size_of::<ClientSession>() + s.bytes())
            .sum()
    }

    /// How many client sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no client session is open.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The brokers Sluice holds sessions with for `key` (for tests and logs).
    pub fn broker_sessions(&self, key: &SessionKey) -> Vec<BrokerSession> {
        self.sessions
            .get(key)
            .map(|s| s.brokers.clone())
            .unwrap_or_default()
    }

    /// The topics of the request and of its session whose leaders `leaders`
    /// does not know: the driver refreshes them before planning.
    pub fn unknown_leaders(
        &self,
        request: &RequestKind,
        leaders: &impl PartitionLeaders,
    ) -> Vec<TopicRef> {
        let (key, named) = match request {
            RequestKind::ShareFetch(r) => {
                let key = SessionKey::of(r.group_id.as_ref(), r.member_id.as_ref());
                let named: Vec<SharePartition> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
                    .collect();
                (key, named)
            }
            RequestKind::ShareAcknowledge(r) => {
                let key = SessionKey::of(r.group_id.as_ref(), r.member_id.as_ref());
                let named: Vec<SharePartition> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
                    .collect();
                (key, named)
            }
            _ => return Vec::new(),
        };
        let session = self.sessions.get(&key);
        let mut topics: Vec<TopicRef> = Vec::new();
        let all = named
            .iter()
            .chain(session.into_iter().flat_map(|s| s.partitions.iter()));
        for (topic, partition) in all {
            let topic = topic_ref(*topic);
            if leaders.leader(&topic, *partition).is_none() && !topics.contains(&topic) {
                topics.push(topic);
            }
        }
        topics
    }

    /// Checks a request's epoch against its session, as a broker does.
    /// `Ok(true)`: the request opens a new session.
    fn check_epoch(&self, key: &SessionKey, epoch: i32, opens: bool) -> Result<bool, Refusal> {
        let refuse = |error_code| Err(Refusal { error_code });
        match (epoch, self.sessions.get(key)) {
            (INITIAL_EPOCH, _) if !opens => refuse(INVALID_SHARE_SESSION_EPOCH),
            (INITIAL_EPOCH, existing) => {
                if existing.is_none() && self.sessions.len() >= MAX_SESSIONS {
                    return refuse(SHARE_SESSION_LIMIT_REACHED);
                }
                Ok(true)
            }
            (_, None) => refuse(SHARE_SESSION_NOT_FOUND),
            (FINAL_EPOCH, Some(_)) => Ok(false),
            (e, Some(s)) if e != s.next_epoch => refuse(INVALID_SHARE_SESSION_EPOCH),
            (_, Some(_)) => Ok(false),
        }
    }
}

/// Where the acknowledgements of `partition` go in `session` (`leaders`:
/// the view now).
fn ack_route(
    session: &ClientSession,
    partition: SharePartition,
    leaders: &impl PartitionLeaders,
) -> AckRoute {
    let leader = leaders.leader(&topic_ref(partition.0), partition.1);
    let from = session.acquired_from.get(&partition).copied().or(leader);
    match from {
        Some(from) if leader == Some(from) => match session.broker(from) {
            Some(b) if b.epoch != INITIAL_EPOCH => AckRoute::Broker(from),
            _ => AckRoute::Refused(LOST_SESSION_ACK),
        },
        _ => AckRoute::Refused(NOT_LEADER_OR_FOLLOWER),
    }
}

/// The view's name for a share partition's topic.
fn topic_ref(topic: Uuid) -> TopicRef {
    TopicRef::Id(TopicId(topic.as_u128()))
}

/// What a partition error in a share answer says is stale in the view.
fn stale_of(partition: SharePartition, error_code: i16) -> Option<Stale> {
    if error_code == 0 {
        return None;
    }
    let code = ErrorCode::from_wire(error_code);
    partition_staleness(code, &topic_ref(partition.0), partition.1)
}

/// The answer to acknowledgements of records acquired in a share session
/// the broker lost. The broker released those records when the session
/// ended (a broker closes a share session with its connection); no
/// ShareAcknowledge can open a session again, so a retriable code such as
/// SHARE_SESSION_NOT_FOUND would have the client retry until its deadline.
/// A broker answers INVALID_RECORD_STATE to acknowledgements of records its
/// member does not hold, and Kafka's clients do not retry it.
pub const LOST_SESSION_ACK: ErrorCode = INVALID_RECORD_STATE;

/// The session errors a broker answers for Sluice's own session with it:
/// Sluice opens a new one, and the client never sees them as such.
pub fn is_session_error(code: i16) -> bool {
    matches!(
        ErrorCode::from_wire(code),
        SHARE_SESSION_NOT_FOUND | INVALID_SHARE_SESSION_EPOCH | SHARE_SESSION_LIMIT_REACHED
    )
}

/// `partitions` grouped by their leader in `leaders` (`None`: unknown), in
/// first-use order.
fn by_leader(
    partitions: &[SharePartition],
    leaders: &impl PartitionLeaders,
) -> Vec<(Option<BrokerId>, Vec<SharePartition>)> {
    let mut groups: Vec<(Option<BrokerId>, Vec<SharePartition>)> = Vec::new();
    for p in partitions {
        let leader = leaders.leader(&topic_ref(p.0), p.1);
        match groups.iter_mut().find(|(l, _)| *l == leader) {
            Some((_, group)) => group.push(*p),
            None => groups.push((leader, vec![*p])),
        }
    }
    groups
}

/// The failure answers of ShareFetch and ShareAcknowledge: the whole
/// request refused with the code at the top level, as a broker refuses a
/// share request it cannot serve.
#[derive(Debug, Clone, Copy)]
pub struct ShareAnswers;

impl crate::api::failure::FailureAnswer for ShareAnswers {
    fn failure_answer(
        &self,
        _api: sluice_codec::ApiKey,
        request: &RequestKind,
        _version: i16,
        code: ErrorCode,
    ) -> Option<sluice_codec::ResponseKind> {
        match request {
            RequestKind::ShareFetch(_) => {
                Some(sluice_codec::ResponseKind::ShareFetch(fetch::refused(code)))
            }
            RequestKind::ShareAcknowledge(_) => Some(sluice_codec::ResponseKind::ShareAcknowledge(
                ack::refused(code),
            )),
            _ => None,
        }
    }
}
