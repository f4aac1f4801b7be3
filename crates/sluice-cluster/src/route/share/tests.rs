//! The share-session state machine: epochs as a broker checks them, one
//! broker session per leader with epochs of its own, acknowledgements back
//! to the broker the records came from, failures answered, never dropped.

use std::collections::HashMap;

use sluice_codec::kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic,
};
use sluice_codec::kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use sluice_codec::kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use sluice_codec::kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::ack::AckPlan;
use super::fetch::FetchPlan;
use super::*;
use crate::split::PartResult;

const T: Uuid = Uuid::from_u128(7);

struct Leaders(HashMap<i32, i32>);

impl PartitionLeaders for Leaders {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        (*topic == TopicRef::Id(TopicId(7)))
            .then(|| self.0.get(&partition).map(|b| BrokerId(*b)))
            .flatten()
    }
}

fn leaders(pairs: &[(i32, i32)]) -> Leaders {
    Leaders(pairs.iter().copied().collect())
}

fn batch() -> AcknowledgementBatch {
    AcknowledgementBatch::default()
        .with_first_offset(0)
        .with_last_offset(4)
        .with_acknowledge_types(vec![1])
}

fn fetch(epoch: i32, add: &[i32], acks: &[i32]) -> ShareFetchRequest {
    let mut partitions: Vec<FetchPartition> = add
        .iter()
        .map(|p| FetchPartition::default().with_partition_index(*p))
        .collect();
    for p in acks {
        match partitions.iter_mut().find(|x| x.partition_index == *p) {
            Some(x) => x.acknowledgement_batches = vec![batch()],
            None => partitions.push(
                FetchPartition::default()
                    .with_partition_index(*p)
                    .with_acknowledgement_batches(vec![batch()]),
            ),
        }
    }
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![
            FetchTopic::default()
                .with_topic_id(T)
                .with_partitions(partitions),
        ]
    };
    ShareFetchRequest::default()
        .with_group_id(Some(StrBytes::from_static_str("g").into()))
        .with_member_id(Some(StrBytes::from_static_str("m")))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(500)
        .with_topics(topics)
}

fn parts(plan: FetchPlan) -> (Vec<(BrokerId, ShareFetchRequest)>, fetch::FetchMerge) {
    match plan {
        FetchPlan::Parts(parts, merge) => (parts, merge),
        FetchPlan::Refused(r) => panic!("refused with {}", r.error_code),
    }
}

fn listed(part: &ShareFetchRequest) -> Vec<(i32, bool)> {
    part.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, !p.acknowledgement_batches.is_empty()))
        })
        .collect()
}

fn acquired(partitions: &[i32]) -> ShareFetchResponse {
    let data = partitions
        .iter()
        .map(|p| {
            PartitionData::default()
                .with_partition_index(*p)
                .with_acquired_records(vec![AcquiredRecords::default().with_last_offset(4)])
        })
        .collect();
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(30_000)
        .with_responses(vec![
            ShareFetchableTopicResponse::default()
                .with_topic_id(T)
                .with_partitions(data),
        ])
}

fn key() -> SessionKey {
    SessionKey {
        group: StrBytes::from_static_str("g"),
        member: StrBytes::from_static_str("m"),
    }
}

fn codes(r: &ShareFetchResponse) -> Vec<(i32, i16, i16)> {
    let mut all: Vec<(i32, i16, i16)> = r
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code, p.acknowledge_error_code))
        })
        .collect();
    all.sort_unstable();
    all
}

#[test]
fn epochs_are_checked_as_a_broker_checks_them() {
    let view = leaders(&[(0, 1)]);
    let mut sessions = ShareSessions::default();
    let refused = |plan: FetchPlan| match plan {
        FetchPlan::Refused(r) => r.error_code,
        FetchPlan::Parts(..) => 0,
    };
    assert_eq!(
        refused(sessions.plan_fetch(&fetch(1, &[0], &[]), &view)),
        SHARE_SESSION_NOT_FOUND
    );
    assert_eq!(
        refused(sessions.plan_fetch(&fetch(0, &[0], &[0]), &view)),
        crate::error_codes::INVALID_REQUEST,
        "an opening fetch carries no acknowledgements"
    );
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0], &[]), &view));
    sessions.merge_fetch(merge, vec![PartResult::Response(acquired(&[]))]);
    assert_eq!(
        refused(sessions.plan_fetch(&fetch(2, &[], &[]), &view)),
        INVALID_SHARE_SESSION_EPOCH
    );
    let ack = ShareAcknowledgeRequest::default()
        .with_group_id(Some(StrBytes::from_static_str("g").into()))
        .with_member_id(Some(StrBytes::from_static_str("m")))
        .with_share_session_epoch(0);
    match sessions.plan_acknowledge(&ack, &view) {
        AckPlan::Refused(r) => assert_eq!(r.error_code, INVALID_SHARE_SESSION_EPOCH),
        AckPlan::Parts(..) => panic!("a ShareAcknowledge cannot open a session"),
    }
    let (parts, _) = parts(sessions.plan_fetch(&fetch(1, &[], &[]), &view));
    assert_eq!(parts[0].1.share_session_epoch, 1);
    assert!(sessions.kept_bytes() > 0);
}

#[test]
fn one_broker_session_per_leader_with_its_own_epochs() {
    let view = leaders(&[(0, 1), (1, 2), (2, 1)]);
    let mut sessions = ShareSessions::default();
    let (p, merge) = parts(sessions.plan_fetch(&fetch(0, &[0, 1, 2], &[]), &view));
    assert_eq!(p.len(), 2);
    assert_eq!((p[0].0, p[0].1.share_session_epoch), (BrokerId(1), 0));
    assert_eq!(listed(&p[0].1), [(0, false), (2, false)]);
    assert_eq!((p[1].0, p[1].1.share_session_epoch), (BrokerId(2), 0));
    let (merged, _) = sessions.merge_fetch(
        merge,
        vec![
            PartResult::Response(acquired(&[0])),
            PartResult::Response(acquired(&[1])),
        ],
    );
    assert_eq!(codes(&merged), [(0, 0, 0), (1, 0, 0)]);
    assert_eq!(merged.acquisition_lock_timeout_ms, 30_000);
    // The next fetch acknowledges both: each broker gets its own, at its
    // own epoch, and lists nothing else.
    let (p, _) = parts(sessions.plan_fetch(&fetch(1, &[], &[0, 1]), &view));
    assert_eq!(p[0].1.share_session_epoch, 1);
    assert_eq!(listed(&p[0].1), [(0, true)]);
    assert_eq!(listed(&p[1].1), [(1, true)]);
    assert!(p[0].1.forgotten_topics_data.is_empty());
}

#[test]
fn a_moved_leader_moves_the_partition_and_refuses_its_acknowledgements() {
    let mut sessions = ShareSessions::default();
    let before = leaders(&[(0, 1), (1, 2)]);
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0, 1], &[]), &before));
    sessions.merge_fetch(
        merge,
        vec![
            PartResult::Response(acquired(&[0])),
            PartResult::Response(acquired(&[1])),
        ],
    );
    // Partition 0 moves from broker 1 to broker 2: broker 1 leads nothing
    // and its session is closed; broker 2 adds it; its records, acquired
    // from broker 1, cannot be acknowledged any more.
    let after = leaders(&[(0, 2), (1, 2)]);
    let (p, merge) = parts(sessions.plan_fetch(&fetch(1, &[], &[0]), &after));
    let by: HashMap<i32, &ShareFetchRequest> = p.iter().map(|(b, r)| (b.0, r)).collect();
    assert_eq!(by[&2].share_session_epoch, 1);
    assert_eq!(listed(by[&2]), [(0, false)]);
    assert_eq!(by[&1].share_session_epoch, FINAL_EPOCH);
    assert!(by[&1].topics.is_empty());
    let order: Vec<i32> = p.iter().map(|(b, _)| b.0).collect();
    let results = order
        .iter()
        .map(|b| {
            PartResult::Response(if *b == 2 {
                acquired(&[])
            } else {
                ShareFetchResponse::default()
            })
        })
        .collect();
    let (merged, _) = sessions.merge_fetch(merge, results);
    assert_eq!(codes(&merged), [(0, 0, NOT_LEADER_OR_FOLLOWER.code())]);
    let left: Vec<i32> = sessions
        .broker_sessions(&key())
        .iter()
        .map(|b| b.broker.0)
        .collect();
    assert_eq!(left, [2]);
}

#[test]
fn a_failed_broker_answers_its_partitions_and_its_session_opens_again() {
    let view = leaders(&[(0, 1), (1, 2)]);
    let mut sessions = ShareSessions::default();
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0, 1], &[]), &view));
    sessions.merge_fetch(
        merge,
        vec![
            PartResult::Response(acquired(&[0])),
            PartResult::Response(acquired(&[1])),
        ],
    );
    let (_, merge) = parts(sessions.plan_fetch(&fetch(1, &[], &[0, 1]), &view));
    let (merged, stale) = sessions.merge_fetch(
        merge,
        vec![
            PartResult::Failed {
                error_code: NOT_LEADER_OR_FOLLOWER,
            },
            PartResult::Response(acquired(&[])),
        ],
    );
    assert_eq!(
        codes(&merged),
        [(
            0,
            NOT_LEADER_OR_FOLLOWER.code(),
            NOT_LEADER_OR_FOLLOWER.code()
        )]
    );
    assert!(
        !stale.is_empty(),
        "the failed broker's partitions are stale"
    );
    // The client's session goes on; broker 1's is opened again, without
    // acknowledgements for the records it acquired before.
    let (p, _) = parts(sessions.plan_fetch(&fetch(2, &[], &[0]), &view));
    assert_eq!((p[0].0, p[0].1.share_session_epoch), (BrokerId(1), 0));
    assert_eq!(listed(&p[0].1), [(0, false)]);
    assert_eq!(p[1].1.share_session_epoch, 2);
}

#[test]
fn a_session_error_from_a_broker_stays_with_sluice() {
    let view = leaders(&[(0, 1)]);
    let mut sessions = ShareSessions::default();
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0], &[]), &view));
    sessions.merge_fetch(merge, vec![PartResult::Response(acquired(&[0]))]);
    let (_, merge) = parts(sessions.plan_fetch(&fetch(1, &[], &[0]), &view));
    let lost = ShareFetchResponse::default().with_error_code(SHARE_SESSION_NOT_FOUND.code());
    let (merged, _) = sessions.merge_fetch(merge, vec![PartResult::Response(lost)]);
    assert_eq!(merged.error_code, 0);
    assert_eq!(codes(&merged), [(0, 0, INVALID_RECORD_STATE.code())]);
    let (p, _) = parts(sessions.plan_fetch(&fetch(2, &[], &[]), &view));
    assert_eq!(p[0].1.share_session_epoch, 0);
}

#[test]
fn acknowledge_and_close_reach_every_broker_session() {
    let view = leaders(&[(0, 1), (1, 2)]);
    let mut sessions = ShareSessions::default();
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0, 1], &[]), &view));
    sessions.merge_fetch(
        merge,
        vec![
            PartResult::Response(acquired(&[0])),
            PartResult::Response(acquired(&[1])),
        ],
    );
    let AckPlan::Parts(p, merge) = sessions.plan_acknowledge(&ack(1, &[1]), &view) else {
        panic!("refused")
    };
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].0, p[0].1.share_session_epoch), (BrokerId(2), 1));
    let (merged, _) = sessions.merge_acknowledge(
        merge,
        vec![PartResult::Response(ShareAcknowledgeResponse::default())],
    );
    assert_eq!(merged.error_code, 0);
    // Closing: both brokers get the final epoch, the session is gone.
    let AckPlan::Parts(p, _) = sessions.plan_acknowledge(&ack(FINAL_EPOCH, &[0]), &view) else {
        panic!("refused")
    };
    let mut epochs: Vec<(i32, i32)> = p
        .iter()
        .map(|(b, r)| (b.0, r.share_session_epoch))
        .collect();
    epochs.sort_unstable();
    assert_eq!(epochs, [(1, FINAL_EPOCH), (2, FINAL_EPOCH)]);
    assert!(sessions.is_empty());
    assert_eq!(sessions.kept_bytes(), 0);
}

use sluice_codec::kafka_protocol::messages::share_acknowledge_request;

/// A ShareAcknowledge of `partitions` (one ACCEPT batch each) at `epoch`.
fn ack(epoch: i32, partitions: &[i32]) -> ShareAcknowledgeRequest {
    let topics = vec![
        AcknowledgeTopic::default()
            .with_topic_id(T)
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        AcknowledgePartition::default()
                            .with_partition_index(*p)
                            .with_acknowledgement_batches(vec![
                                share_acknowledge_request::AcknowledgementBatch::default()
                                    .with_acknowledge_types(vec![1]),
                            ])
                    })
                    .collect(),
            ),
    ];
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(StrBytes::from_static_str("g").into()))
        .with_member_id(Some(StrBytes::from_static_str("m")))
        .with_share_session_epoch(epoch)
        .with_topics(topics)
}

/// (partition, error code) of an acknowledge answer.
fn ack_codes(r: &ShareAcknowledgeResponse) -> Vec<(i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

/// The records acquired in a session the broker lost went with it (a broker
/// closes a share session with its connection, and releases what it
/// acquired): their acknowledgements fail for good, at once and on every
/// try, with a code the client does not retry. SHARE_SESSION_NOT_FOUND
/// here had Kafka's Java client retry `commitSync` until its deadline,
/// since no ShareAcknowledge opens a session again.
#[test]
fn acknowledgements_of_a_session_the_broker_lost_fail_for_good() {
    let view = leaders(&[(0, 1)]);
    let mut sessions = ShareSessions::default();
    let (_, merge) = parts(sessions.plan_fetch(&fetch(0, &[0], &[]), &view));
    sessions.merge_fetch(merge, vec![PartResult::Response(acquired(&[0]))]);
    let AckPlan::Parts(p, merge) = sessions.plan_acknowledge(&ack(1, &[0]), &view) else {
        panic!("refused")
    };
    assert_eq!((p[0].0, p[0].1.share_session_epoch), (BrokerId(1), 1));
    let lost = ShareAcknowledgeResponse::default().with_error_code(SHARE_SESSION_NOT_FOUND.code());
    let (merged, _) = sessions.merge_acknowledge(merge, vec![PartResult::Response(lost)]);
    assert_eq!(
        merged.error_code, 0,
        "the client's session with Sluice goes on"
    );
    assert_eq!(ack_codes(&merged), [(0, INVALID_RECORD_STATE.code())]);
    // The client's retry gets the same answer, without a part.
    let AckPlan::Parts(p, merge) = sessions.plan_acknowledge(&ack(2, &[0]), &view) else {
        panic!("refused")
    };
    assert!(p.is_empty(), "no broker session to send it in");
    let (merged, _) = sessions.merge_acknowledge(merge, vec![]);
    assert_eq!(ack_codes(&merged), [(0, INVALID_RECORD_STATE.code())]);
    assert!(!INVALID_RECORD_STATE.retriable());
}
