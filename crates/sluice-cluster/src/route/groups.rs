//! Group APIs: each goes to the coordinator of its group id.
//!
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetDelete,
//! TxnOffsetCommit (the *group* coordinator: offsets live with the group),
//! ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), and the
//! Streams group APIs (KIP-1071: StreamsGroupHeartbeat, StreamsGroupDescribe,
//! StreamsGroupTopologyDescriptionUpdate) go whole to one coordinator.
//! OffsetFetch, DescribeGroups and DeleteGroups may name groups of several
//! coordinators and are split by the split module.
//!
//! ConsumerGroupDescribe and StreamsGroupDescribe may name several groups
//! too: when they live on one coordinator they go there whole, else they are
//! split (see [`super::keyed`]).
//!
//! The share-group coordinator APIs (KIP-932) are in
//! [`super::share::coordinator`], reached from here.
//!
//! When the coordinator's broker fails, the client gets NOT_COORDINATOR in the
//! places the API has for errors ([`GroupAnswers`]), looks the coordinator
//! up again and retries.

use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use sluice_codec::kafka_protocol::messages::streams_group_describe_response::DescribedGroup as DescribedStreamsGroup;
use sluice_codec::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{
    ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, GroupId, HeartbeatResponse,
    JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse, OffsetDeleteResponse, RequestKind,
    ResponseKind, StreamsGroupDescribeResponse, StreamsGroupHeartbeatResponse,
    StreamsGroupTopologyDescriptionUpdateResponse, SyncGroupResponse, TxnOffsetCommitResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::Stale;
use crate::api::failure::FailureAnswer;
use crate::error_codes::ErrorCode;
use crate::topology::{CoordinatorKeyType, Staleness, staleness};

/// How long a SyncGroup may wait for the group's leader when the client's
/// JoinGroup was not seen on this connection: the Java consumer's default
/// `max.poll.interval.ms`, which it sends as its rebalance timeout.
pub const DEFAULT_REBALANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The group a group API is about; `None` for other APIs (and for a
/// ConsumerGroupDescribe or StreamsGroupDescribe naming no group).
pub fn group_key(request: &RequestKind) -> Option<String> {
    let id = match request {
        RequestKind::JoinGroup(r) => &r.group_id,
        RequestKind::SyncGroup(r) => &r.group_id,
        RequestKind::Heartbeat(r) => &r.group_id,
        RequestKind::LeaveGroup(r) => &r.group_id,
        RequestKind::OffsetCommit(r) => &r.group_id,
        RequestKind::OffsetDelete(r) => &r.group_id,
        RequestKind::TxnOffsetCommit(r) => &r.group_id,
        RequestKind::ConsumerGroupHeartbeat(r) => &r.group_id,
        RequestKind::ConsumerGroupDescribe(r) => r.group_ids.first()?,
        RequestKind::StreamsGroupHeartbeat(r) => &r.group_id,
        RequestKind::StreamsGroupDescribe(r) => r.group_ids.first()?,
        RequestKind::StreamsGroupTopologyDescriptionUpdate(r) => &r.group_id,
        // v0-7 name one group; v8+ are split by the split module.
        RequestKind::OffsetFetch(r) if r.groups.is_empty() => &r.group_id,
        other => super::share::coordinator::group_key(other)?,
    };
    Some(id.0.to_string())
}

/// The coordinator a coordinator-routed request must reach: its key type and
/// key. `None` when the request names no key and any broker serves it
/// (InitProducerId without a transactional id).
pub fn coordinator_key(request: &RequestKind) -> Option<(CoordinatorKeyType, String)> {
    if let Some(group) = group_key(request) {
        return Some((CoordinatorKeyType::Group, group));
    }
    super::transactions::transaction_key(request).map(|k| (CoordinatorKeyType::Transaction, k))
}

/// The failure answers of the group APIs (to the group coordinator).
#[derive(Debug, Clone, Copy)]
pub struct GroupAnswers;

impl FailureAnswer for GroupAnswers {
    fn failure_answer(
        &self,
        _api: ApiKey,
        request: &RequestKind,
        version: i16,
        code: ErrorCode,
    ) -> Option<ResponseKind> {
        error_response(request, version, code)
    }
}

/// A response to a group API where the group (or each of its partitions or
/// groups) carries `code`; `None` for other APIs.
fn error_response(request: &RequestKind, version: i16, code: ErrorCode) -> Option<ResponseKind> {
    let code = code.code();
    let none = || Some(StrBytes::default());
    Some(match request {
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_member_id(r.member_id.clone())
                // Nullable only from v7; an empty string reads the same.
                .with_protocol_name(if version < 7 { none() } else { None }),
        ),
        RequestKind::SyncGroup(_) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::Heartbeat(_) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::OffsetCommit(r) => {
            let topics = r.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                });
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions.collect())
            });
            ResponseKind::OffsetCommit(
                OffsetCommitResponse::default().with_topics(topics.collect()),
            )
        }
        RequestKind::TxnOffsetCommit(r) => {
            let topics = r.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                });
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions.collect())
            });
            ResponseKind::TxnOffsetCommit(
                TxnOffsetCommitResponse::default().with_topics(topics.collect()),
            )
        }
        RequestKind::OffsetDelete(_) => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code))
        }
        RequestKind::ConsumerGroupHeartbeat(_) => ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_member_epoch(-1),
        ),
        RequestKind::ConsumerGroupDescribe(r) => {
            let groups = r.group_ids.iter().map(|g| {
                DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(code)
            });
            ResponseKind::ConsumerGroupDescribe(
                ConsumerGroupDescribeResponse::default().with_groups(groups.collect()),
            )
        }
        // As the coordinator answers an error: the code, the rest defaults.
        RequestKind::StreamsGroupHeartbeat(_) => ResponseKind::StreamsGroupHeartbeat(
            StreamsGroupHeartbeatResponse::default().with_error_code(code),
        ),
        RequestKind::StreamsGroupDescribe(r) => {
            let groups = r.group_ids.iter().map(|g| {
                DescribedStreamsGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(code)
            });
            ResponseKind::StreamsGroupDescribe(
                StreamsGroupDescribeResponse::default().with_groups(groups.collect()),
            )
        }
        RequestKind::StreamsGroupTopologyDescriptionUpdate(_) => {
            ResponseKind::StreamsGroupTopologyDescriptionUpdate(
                StreamsGroupTopologyDescriptionUpdateResponse::default().with_error_code(code),
            )
        }
        other => return super::share::coordinator::error_response(other, code),
    })
}

/// Every error code in an answer of a coordinator-routed API, for the
/// staleness check (a coordinator that moved answers NOT_COORDINATOR).
pub fn response_error_codes(response: &ResponseKind) -> Vec<i16> {
    match response {
        ResponseKind::JoinGroup(r) => vec![r.error_code],
        ResponseKind::SyncGroup(r) => vec![r.error_code],
        ResponseKind::Heartbeat(r) => vec![r.error_code],
        ResponseKind::LeaveGroup(r) => vec![r.error_code],
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::OffsetDelete(r) => vec![r.error_code],
        ResponseKind::ConsumerGroupHeartbeat(r) => vec![r.error_code],
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::StreamsGroupHeartbeat(r) => vec![r.error_code],
        ResponseKind::StreamsGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::StreamsGroupTopologyDescriptionUpdate(r) => vec![r.error_code],
        ResponseKind::OffsetFetch(r) => {
            let mut codes = vec![r.error_code];
            codes.extend(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            codes
        }
        other => super::share::coordinator::response_error_codes(other)
            .unwrap_or_else(|| super::transactions::response_error_codes(other)),
    }
}

/// The groups whose coordinator moved, from an answer of a group API split by
/// coordinator (OffsetFetch v8+, DescribeGroups, DeleteGroups).
pub fn stale_groups(response: &ResponseKind) -> Vec<Stale> {
    let groups: Vec<(&GroupId, i16)> = match response {
        ResponseKind::OffsetFetch(r) => r
            .groups
            .iter()
            .map(|g| (&g.group_id, g.error_code))
            .collect(),
        ResponseKind::DescribeGroups(r) => r
            .groups
            .iter()
            .map(|g| (&g.group_id, g.error_code))
            .collect(),
        ResponseKind::DeleteGroups(r) => r
            .results
            .iter()
            .map(|g| (&g.group_id, g.error_code))
            .collect(),
        _ => Vec::new(),
    };
    groups
        .into_iter()
        .filter(|(_, code)| staleness(ErrorCode::from_wire(*code)) == Some(Staleness::Coordinator))
        .map(|(group, _)| Stale::Coordinator(CoordinatorKeyType::Group, group.0.to_string()))
        .collect()
}
