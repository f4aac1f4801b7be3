//! ShareAcknowledge: a client's acknowledgements in its share session with
//! Sluice, one part per broker the records were acquired from, in Sluice's
//! session with that broker (see [`super`]).
//!
//! A broker refuses a ShareAcknowledge at epoch 0 (it cannot open a session)
//! with INVALID_SHARE_SESSION_EPOCH, and so does Sluice. At the final epoch
//! the client closes its session: every broker session Sluice holds for it
//! gets a final ShareAcknowledge, with its acknowledgements or none.

use sluice_codec::kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
};
use sluice_codec::kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use sluice_codec::kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::fetch::answer;
use super::{
    AckRoute, FINAL_EPOCH, INITIAL_EPOCH, SessionKey, SharePartition, ShareSessions, ack_route,
    is_session_error, next_epoch, stale_of,
};
use crate::error_codes::ErrorCode;
use crate::route::Stale;
use crate::split::{PartResult, PartitionLeaders};
use crate::topology::BrokerId;

/// Acknowledgements by partition, in request order.
type Acks = Vec<(SharePartition, Vec<AcknowledgementBatch>)>;

/// A planned ShareAcknowledge.
#[derive(Debug)]
pub enum AckPlan {
    /// Answered at once: a top-level error, as a broker answers it.
    Refused(ShareAcknowledgeResponse),
    /// The parts to send, in order, and what their merge needs.
    Parts(Vec<(BrokerId, ShareAcknowledgeRequest)>, AckMerge),
}

/// What merging a ShareAcknowledge's parts needs.
#[derive(Debug, Clone)]
pub struct AckMerge {
    key: SessionKey,
    /// Each part's broker and the partitions it acknowledges.
    parts: Vec<(BrokerId, Vec<SharePartition>)>,
    /// Partitions Sluice answers itself (the fetch code is unused).
    answered: Vec<(SharePartition, i16, i16)>,
}

/// A top-level error answer.
pub fn refused(error_code: ErrorCode) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default().with_error_code(error_code.code())
}

fn ack_topics(acks: &[(SharePartition, Vec<AcknowledgementBatch>)]) -> Vec<AcknowledgeTopic> {
    let mut topics: Vec<AcknowledgeTopic> = Vec::new();
    for ((topic, partition), batches) in acks {
        let p = AcknowledgePartition::default()
            .with_partition_index(*partition)
            .with_acknowledgement_batches(batches.clone());
        match topics.iter_mut().find(|t| t.topic_id == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                AcknowledgeTopic::default()
                    .with_topic_id(*topic)
                    .with_partitions(vec![p]),
            ),
        }
    }
    topics
}

impl ShareSessions {
    /// Plans a client's ShareAcknowledge: checks its epoch, moves its session
    /// on, and gives one part per broker its acknowledgements go to.
    pub fn plan_acknowledge(
        &mut self,
        request: &ShareAcknowledgeRequest,
        leaders: &impl PartitionLeaders,
    ) -> AckPlan {
        let key = SessionKey::of(request.group_id.as_ref(), request.member_id.as_ref());
        let epoch = request.share_session_epoch;
        if let Err(refusal) = self.check_epoch(&key, epoch, false) {
            return AckPlan::Refused(refused(refusal.error_code));
        }
        let Some(session) = self.sessions.get_mut(&key) else {
            return AckPlan::Refused(refused(super::SHARE_SESSION_NOT_FOUND));
        };
        let closing = epoch == FINAL_EPOCH;
        if !closing {
            session.next_epoch = next_epoch(epoch);
        }
        let mut answered = Vec::new();
        let mut by_broker: Vec<(BrokerId, Acks)> = Vec::new();
        for t in &request.topics {
            for p in &t.partitions {
                let partition = (t.topic_id, p.partition_index);
                let batches = p.acknowledgement_batches.clone();
                match ack_route(session, partition, leaders) {
                    AckRoute::Broker(b) => match by_broker.iter_mut().find(|(x, _)| *x == b) {
                        Some((_, list)) => list.push((partition, batches)),
                        None => by_broker.push((b, vec![(partition, batches)])),
                    },
                    AckRoute::Refused(code) => answer(&mut answered, partition, 0, code.code()),
                }
            }
        }
        if closing {
            for b in &session.brokers {
                if b.epoch != INITIAL_EPOCH && !by_broker.iter().any(|(x, _)| *x == b.broker) {
                    by_broker.push((b.broker, Vec::new()));
                }
            }
        }
        let mut parts = Vec::new();
        let mut infos = Vec::new();
        for (b, acks) in by_broker {
            let broker = session.broker_mut(b);
            let sent_epoch = if closing { FINAL_EPOCH } else { broker.epoch };
            broker.epoch = next_epoch(broker.epoch);
            let part = request
                .clone()
                .with_share_session_epoch(sent_epoch)
                .with_topics(ack_topics(&acks));
            infos.push((b, acks.iter().map(|(p, _)| *p).collect()));
            parts.push((b, part));
        }
        if closing {
            self.sessions.remove(&key);
        }
        AckPlan::Parts(
            parts,
            AckMerge {
                key,
                parts: infos,
                answered,
            },
        )
    }

    /// Merges the parts' answers (`results[i]` is part `i`'s) into the
    /// client's answer; a failed part, or a broker that lost Sluice's
    /// session, answers its partitions with an error and has its session
    /// opened again on the next fetch. Also returns what is stale.
    pub fn merge_acknowledge(
        &mut self,
        merge: AckMerge,
        results: Vec<PartResult<ShareAcknowledgeResponse>>,
    ) -> (ShareAcknowledgeResponse, Vec<Stale>) {
        let AckMerge {
            key,
            parts,
            mut answered,
        } = merge;
        let mut session = self.sessions.get_mut(&key);
        let mut merged = ShareAcknowledgeResponse::default();
        let mut lock_timeout: Option<i32> = None;
        let mut stale = Vec::new();
        let mut out: Vec<(SharePartition, PartitionData)> = Vec::new();
        for ((broker, acked), result) in parts.iter().zip(results) {
            let code = match result {
                PartResult::Response(r) if r.error_code == 0 => {
                    merged.throttle_time_ms = merged.throttle_time_ms.max(r.throttle_time_ms);
                    if r.acquisition_lock_timeout_ms > 0 {
                        let t = r.acquisition_lock_timeout_ms;
                        lock_timeout = Some(lock_timeout.map_or(t, |l| l.min(t)));
                    }
                    merged.node_endpoints.extend(r.node_endpoints);
                    for topic in r.responses {
                        for p in topic.partitions {
                            let key = (topic.topic_id, p.partition_index);
                            stale.extend(stale_of(key, p.error_code));
                            out.push((key, p));
                        }
                    }
                    continue;
                }
                PartResult::Response(r) if !is_session_error(r.error_code) => {
                    if merged.error_code == 0 {
                        merged.error_code = r.error_code;
                        merged.error_message = r.error_message;
                    }
                    r.error_code
                }
                PartResult::Response(_) => super::LOST_SESSION_ACK.code(),
                PartResult::Failed { error_code } => error_code.code(),
            };
            if let Some(s) = session.as_deref_mut() {
                s.reset(*broker);
            }
            for p in acked {
                answer(&mut answered, *p, 0, code);
                stale.extend(stale_of(*p, code));
            }
        }
        if let Some(s) = session {
            if let Some(t) = lock_timeout {
                s.lock_timeout_ms = t;
            }
            merged.acquisition_lock_timeout_ms = s.lock_timeout_ms;
        } else {
            merged.acquisition_lock_timeout_ms = lock_timeout.unwrap_or_default();
        }
        for (p, _, ack) in answered {
            if out.iter().any(|(q, _)| *q == p) {
                continue;
            }
            out.push((
                p,
                PartitionData::default()
                    .with_partition_index(p.1)
                    .with_error_code(ack),
            ));
        }
        merged.node_endpoints.sort_by_key(|n| n.node_id);
        merged.node_endpoints.dedup_by_key(|n| n.node_id);
        for (p, data) in out {
            match merged.responses.iter_mut().find(|t| t.topic_id == p.0) {
                Some(t) => t.partitions.push(data),
                None => merged.responses.push(
                    ShareAcknowledgeTopicResponse::default()
                        .with_topic_id(p.0)
                        .with_partitions(vec![data]),
                ),
            }
        }
        (merged, stale)
    }
}
