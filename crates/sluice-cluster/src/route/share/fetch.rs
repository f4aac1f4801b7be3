//! ShareFetch: a client's fetch in its share session with Sluice, planned as
//! one part per broker in Sluice's session with that broker, and the parts'
//! answers merged into one (see [`super`] for the sessions).
//!
//! A part at epoch 0 opens the broker's session with every partition it
//! leads and carries no acknowledgements (a broker refuses those with
//! INVALID_REQUEST); a later part lists the partitions added since and the
//! acknowledgements for records acquired from that broker, and forgets the
//! partitions it no longer leads. A broker that leads none of the session's
//! partitions any more, and every broker when the client closes its
//! session, gets a part at the final epoch (its acknowledgements only). A
//! ShareFetch that only renews acquisition locks (KIP-1222, `is_renew_ack`)
//! goes only to the brokers its acknowledgements are for.

use sluice_codec::kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use sluice_codec::kafka_protocol::messages::share_fetch_response::{
    PartitionData, ShareFetchableTopicResponse,
};
use sluice_codec::kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};

use super::{
    AckRoute, ClientSession, FINAL_EPOCH, INITIAL_EPOCH, SessionKey, SharePartition, ShareSessions,
    ack_route, by_leader, is_session_error, next_epoch, stale_of,
};
use crate::error_codes::{ErrorCode, INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER};
use crate::route::Stale;
use crate::split::{PartResult, PartitionLeaders};
use crate::topology::BrokerId;

/// Acknowledgements by partition, in request order.
type Acks = Vec<(SharePartition, Vec<AcknowledgementBatch>)>;

/// A planned ShareFetch.
#[derive(Debug)]
pub enum FetchPlan {
    /// Answered at once: a top-level error, as a broker answers it.
    Refused(ShareFetchResponse),
    /// The parts to send, in order, and what their merge needs.
    Parts(Vec<(BrokerId, ShareFetchRequest)>, FetchMerge),
}

/// What merging a ShareFetch's parts needs.
#[derive(Debug, Clone)]
pub struct FetchMerge {
    key: SessionKey,
    parts: Vec<PartInfo>,
    /// Partitions Sluice answers itself: fetch and acknowledge error codes.
    answered: Vec<(SharePartition, i16, i16)>,
}

/// One part, for its merge.
#[derive(Debug, Clone)]
struct PartInfo {
    broker: BrokerId,
    /// The partitions it fetches.
    fetched: Vec<SharePartition>,
    /// The partitions whose acknowledgements it carries.
    acked: Vec<SharePartition>,
    /// It closes Sluice's session with the broker.
    closes: bool,
}

/// A top-level error answer.
pub fn refused(error_code: ErrorCode) -> ShareFetchResponse {
    ShareFetchResponse::default().with_error_code(error_code.code())
}

/// The acknowledgements a ShareFetch carries, by partition, in order.
fn acks_of(request: &ShareFetchRequest) -> Vec<(SharePartition, Vec<AcknowledgementBatch>)> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| !p.acknowledgement_batches.is_empty())
                .map(|p| {
                    (
                        (t.topic_id, p.partition_index),
                        p.acknowledgement_batches.clone(),
                    )
                })
        })
        .collect()
}

/// Records `fetch` and `ack` error codes for `partition` in `answered`
/// (0: none), keeping the codes already there.
pub(super) fn answer(
    answered: &mut Vec<(SharePartition, i16, i16)>,
    p: SharePartition,
    fetch: i16,
    ack: i16,
) {
    match answered.iter_mut().find(|(q, _, _)| *q == p) {
        Some((_, f, a)) => {
            if fetch != 0 {
                *f = fetch;
            }
            if ack != 0 {
                *a = ack;
            }
        }
        None => answered.push((p, fetch, ack)),
    }
}

/// The topics of a part: `partitions`, with their acknowledgements, grouped
/// by topic in first-use order.
fn fetch_topics(
    partitions: &[SharePartition],
    acks: &[(SharePartition, Vec<AcknowledgementBatch>)],
    max_bytes: i32,
) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in partitions {
        let batches = acks
            .iter()
            .find(|(q, _)| q == p)
            .map(|(_, b)| b.clone())
            .unwrap_or_default();
        let partition = FetchPartition::default()
            .with_partition_index(p.1)
            .with_partition_max_bytes(max_bytes)
            .with_acknowledgement_batches(batches);
        match topics.iter_mut().find(|t| t.topic_id == p.0) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic_id(p.0)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}

/// Forgotten topics for `partitions`, grouped by topic.
fn forgotten_topics(partitions: &[SharePartition]) -> Vec<ForgottenTopic> {
    let mut topics: Vec<ForgottenTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.topic_id == *topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                ForgottenTopic::default()
                    .with_topic_id(*topic)
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    topics
}

/// The brokers a plan may send to, in order: the leaders of the session's
/// partitions, those acknowledgements go to, then the session's others.
fn brokers_in_order(
    desired: &[(Option<BrokerId>, Vec<SharePartition>)],
    acks: &[(BrokerId, Acks)],
    session: &ClientSession,
) -> Vec<BrokerId> {
    let mut brokers: Vec<BrokerId> = Vec::new();
    let all = desired
        .iter()
        .filter_map(|(b, _)| *b)
        .chain(acks.iter().map(|(b, _)| *b))
        .chain(session.brokers.iter().map(|b| b.broker));
    for b in all {
        if !brokers.contains(&b) {
            brokers.push(b);
        }
    }
    brokers
}

impl ShareSessions {
    /// Plans a client's ShareFetch: checks its epoch, updates its session
    /// and Sluice's sessions with the brokers, and gives the parts to send.
    pub fn plan_fetch(
        &mut self,
        request: &ShareFetchRequest,
        leaders: &impl PartitionLeaders,
    ) -> FetchPlan {
        let key = SessionKey::of(request.group_id.as_ref(), request.member_id.as_ref());
        let epoch = request.share_session_epoch;
        let acks = acks_of(request);
        let opens = match self.check_epoch(&key, epoch, true) {
            Ok(opens) => opens,
            Err(refusal) => return FetchPlan::Refused(refused(refusal.error_code)),
        };
        if opens && !acks.is_empty() {
            return FetchPlan::Refused(refused(INVALID_REQUEST));
        }
        if opens {
            let lock_timeout_ms = self.sessions.get(&key).map_or(0, |s| s.lock_timeout_ms);
            let mut session = ClientSession::opened();
            session.lock_timeout_ms = lock_timeout_ms;
            self.sessions.insert(key.clone(), session);
        }
        let Some(session) = self.sessions.get_mut(&key) else {
            return FetchPlan::Refused(refused(super::SHARE_SESSION_NOT_FOUND));
        };
        let closing = epoch == FINAL_EPOCH;
        if !opens && !closing {
            session.next_epoch = next_epoch(epoch);
        }
        if !closing {
            for t in &request.topics {
                for p in &t.partitions {
                    let p = (t.topic_id, p.partition_index);
                    if !session.partitions.contains(&p) {
                        session.partitions.push(p);
                    }
                }
            }
            for t in &request.forgotten_topics_data {
                session
                    .partitions
                    .retain(|(topic, p)| *topic != t.topic_id || !t.partitions.contains(p));
            }
        }
        let mut answered = Vec::new();
        let mut acks_by_broker: Vec<(BrokerId, Acks)> = Vec::new();
        for (p, batches) in acks {
            match ack_route(session, p, leaders) {
                AckRoute::Broker(b) => match acks_by_broker.iter_mut().find(|(x, _)| *x == b) {
                    Some((_, list)) => list.push((p, batches)),
                    None => acks_by_broker.push((b, vec![(p, batches)])),
                },
                AckRoute::Refused(code) => answer(&mut answered, p, 0, code.code()),
            }
        }
        let desired = if closing {
            Vec::new()
        } else {
            by_leader(&session.partitions, leaders)
        };
        for (leader, partitions) in &desired {
            if leader.is_none() {
                for p in partitions {
                    answer(&mut answered, *p, NOT_LEADER_OR_FOLLOWER.code(), 0);
                }
            }
        }
        let mut parts = Vec::new();
        let mut infos = Vec::new();
        for b in brokers_in_order(&desired, &acks_by_broker, session) {
            let wanted: &[SharePartition] = desired
                .iter()
                .find(|(l, _)| *l == Some(b))
                .map_or(&[], |(_, ps)| ps.as_slice());
            let acked: &[(SharePartition, Vec<AcknowledgementBatch>)] = acks_by_broker
                .iter()
                .find(|(x, _)| *x == b)
                .map_or(&[], |(_, a)| a.as_slice());
            let Some((part, info)) = plan_part(session, request, b, wanted, acked, closing) else {
                continue;
            };
            parts.push((b, part));
            infos.push(info);
        }
        if closing {
            self.sessions.remove(&key);
        }
        FetchPlan::Parts(
            parts,
            FetchMerge {
                key,
                parts: infos,
                answered,
            },
        )
    }

    /// Merges the parts' answers (`results[i]` is the answer to part `i`)
    /// into the client's answer, and learns from them: which broker each
    /// partition acquired records from, which broker sessions must be opened
    /// again. Also returns what the answers say is stale in the view.
    pub fn merge_fetch(
        &mut self,
        merge: FetchMerge,
        results: Vec<PartResult<ShareFetchResponse>>,
    ) -> (ShareFetchResponse, Vec<Stale>) {
        let FetchMerge {
            key,
            parts,
            mut answered,
        } = merge;
        let mut session = self.sessions.get_mut(&key);
        let mut merged = ShareFetchResponse::default();
        let mut lock_timeout: Option<i32> = None;
        let mut stale = Vec::new();
        let mut out: Vec<(SharePartition, PartitionData)> = Vec::new();
        for (info, result) in parts.iter().zip(results) {
            let answer_of = match result {
                PartResult::Response(r) if r.error_code == 0 => r,
                PartResult::Response(r) if !is_session_error(r.error_code) => {
                    if merged.error_code == 0 {
                        merged.error_code = r.error_code;
                        merged.error_message = r.error_message;
                    }
                    if let Some(s) = session.as_deref_mut() {
                        s.reset(info.broker);
                    }
                    continue;
                }
                PartResult::Response(_) => {
                    // Sluice's own session with the broker is gone: open
                    // another on the next fetch. The records acquired in it
                    // went with it, and so do their acknowledgements.
                    if let Some(s) = session.as_deref_mut() {
                        s.reset(info.broker);
                    }
                    for p in &info.acked {
                        answer(&mut answered, *p, 0, super::LOST_SESSION_ACK.code());
                    }
                    continue;
                }
                PartResult::Failed { error_code } => {
                    if let Some(s) = session.as_deref_mut() {
                        s.reset(info.broker);
                    }
                    for p in &info.fetched {
                        answer(&mut answered, *p, error_code.code(), 0);
                        stale.extend(stale_of(*p, error_code.code()));
                    }
                    for p in &info.acked {
                        answer(&mut answered, *p, 0, error_code.code());
                    }
                    continue;
                }
            };
            merged.throttle_time_ms = merged.throttle_time_ms.max(answer_of.throttle_time_ms);
            if answer_of.acquisition_lock_timeout_ms > 0 {
                let t = answer_of.acquisition_lock_timeout_ms;
                lock_timeout = Some(lock_timeout.map_or(t, |l| l.min(t)));
            }
            merged.node_endpoints.extend(answer_of.node_endpoints);
            for topic in answer_of.responses {
                for p in topic.partitions {
                    let key = (topic.topic_id, p.partition_index);
                    stale.extend(stale_of(key, p.error_code));
                    if !p.acquired_records.is_empty()
                        && let Some(s) = session.as_deref_mut()
                    {
                        s.acquired_from.insert(key, info.broker);
                    }
                    out.push((key, p));
                }
            }
            if info.closes
                && let Some(s) = session.as_deref_mut()
            {
                s.reset(info.broker);
            }
        }
        if let Some(s) = session {
            if let Some(t) = lock_timeout {
                s.lock_timeout_ms = t;
            }
            merged.acquisition_lock_timeout_ms = s.lock_timeout_ms;
            // Forget where records came from for partitions the session
            // no longer has.
            let partitions = &s.partitions;
            s.acquired_from.retain(|p, _| partitions.contains(p));
        } else {
            merged.acquisition_lock_timeout_ms = lock_timeout.unwrap_or_default();
        }
        for (p, fetch, ack) in answered {
            match out.iter_mut().find(|(q, _)| *q == p) {
                Some((_, data)) => {
                    if fetch != 0 && data.error_code == 0 {
                        data.error_code = fetch;
                    }
                    if ack != 0 {
                        data.acknowledge_error_code = ack;
                    }
                }
                None => out.push((
                    p,
                    PartitionData::default()
                        .with_partition_index(p.1)
                        .with_error_code(fetch)
                        .with_acknowledge_error_code(ack),
                )),
            }
        }
        merged.node_endpoints.sort_by_key(|n| n.node_id);
        merged.node_endpoints.dedup_by_key(|n| n.node_id);
        for (p, data) in out {
            match merged.responses.iter_mut().find(|t| t.topic_id == p.0) {
                Some(t) => t.partitions.push(data),
                None => merged.responses.push(
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(p.0)
                        .with_partitions(vec![data]),
                ),
            }
        }
        (merged, stale)
    }
}

/// The part for broker `b` (`wanted`: the session's partitions it leads;
/// `acked`: the acknowledgements for it), and Sluice's session with it moved
/// on as if sent. `None` when `b` gets nothing.
fn plan_part(
    session: &mut ClientSession,
    request: &ShareFetchRequest,
    b: BrokerId,
    wanted: &[SharePartition],
    acked: &[(SharePartition, Vec<AcknowledgementBatch>)],
    closing: bool,
) -> Option<(ShareFetchRequest, PartInfo)> {
    let open = session.broker(b).is_some_and(|s| s.epoch != INITIAL_EPOCH);
    let acked_partitions: Vec<SharePartition> = acked.iter().map(|(p, _)| *p).collect();
    let info = |fetched: Vec<SharePartition>, closes| PartInfo {
        broker: b,
        fetched,
        acked: acked_partitions.clone(),
        closes,
    };
    if closing || (wanted.is_empty() && acked.is_empty()) {
        if !open {
            session.reset(b);
            return None;
        }
        let part = request
            .clone()
            .with_share_session_epoch(FINAL_EPOCH)
            .with_topics(fetch_topics(&acked_partitions, acked, request.max_bytes))
            .with_forgotten_topics_data(Vec::new());
        return Some((part, info(Vec::new(), true)));
    }
    if request.is_renew_ack && acked.is_empty() {
        return None;
    }
    let broker = session.broker_mut(b);
    let epoch = broker.epoch;
    let (listed, forgotten): (Vec<SharePartition>, Vec<SharePartition>) = if epoch == INITIAL_EPOCH
    {
        (wanted.to_vec(), Vec::new())
    } else {
        let mut listed: Vec<SharePartition> = wanted
            .iter()
            .filter(|p| !broker.partitions.contains(p))
            .copied()
            .collect();
        for p in &acked_partitions {
            if !listed.contains(p) {
                listed.push(*p);
            }
        }
        let forgotten = broker
            .partitions
            .iter()
            .filter(|p| !wanted.contains(p) && !acked_partitions.contains(p))
            .copied()
            .collect();
        (listed, forgotten)
    };
    broker.epoch = next_epoch(epoch);
    broker.partitions = wanted.to_vec();
    for p in &acked_partitions {
        if !broker.partitions.contains(p) {
            broker.partitions.push(*p);
        }
    }
    let part = request
        .clone()
        .with_share_session_epoch(epoch)
        .with_topics(fetch_topics(&listed, acked, request.max_bytes))
        .with_forgotten_topics_data(forgotten_topics(&forgotten));
    Some((part, info(wanted.to_vec(), false)))
}
