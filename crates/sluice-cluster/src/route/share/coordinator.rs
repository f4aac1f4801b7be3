//! The share-group APIs of the group coordinator: ShareGroupHeartbeat,
//! ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets and
//! DeleteShareGroupOffsets, routed like their consumer-group counterparts
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe, OffsetFetch, OffsetCommit,
//! OffsetDelete): whole to the coordinator of their group. ShareGroupDescribe
//! and DescribeShareGroupOffsets may name groups of several coordinators and
//! are then split by coordinator (`route::keyed`). None of their answers
//! names a broker: members, partitions and offsets only.
//!
//! When the coordinator's broker fails, the client gets NOT_COORDINATOR where
//! the API has a place for errors ([`error_response`]).

use sluice_codec::kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use sluice_codec::kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use sluice_codec::kafka_protocol::messages::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
use sluice_codec::kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::{
    AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse, GroupId, RequestKind, ResponseKind,
    ShareGroupDescribeResponse, ShareGroupHeartbeatResponse,
};

/// The group a share-group coordinator API is about (the first, for those
/// naming several); `None` for other APIs.
pub fn group_key(request: &RequestKind) -> Option<&GroupId> {
    match request {
        RequestKind::ShareGroupHeartbeat(r) => Some(&r.group_id),
        RequestKind::ShareGroupDescribe(r) => r.group_ids.first(),
        RequestKind::DescribeShareGroupOffsets(r) => r.groups.first().map(|g| &g.group_id),
        RequestKind::AlterShareGroupOffsets(r) => Some(&r.group_id),
        RequestKind::DeleteShareGroupOffsets(r) => Some(&r.group_id),
        _ => None,
    }
}

/// A response where the group (or each of its groups or partitions)
/// carries `code`, as the coordinator answers an error; `None` for other
/// APIs.
pub fn error_response(request: &RequestKind, code: i16) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::ShareGroupHeartbeat(_) => ResponseKind::ShareGroupHeartbeat(
            ShareGroupHeartbeatResponse::default().with_error_code(code),
        ),
        RequestKind::ShareGroupDescribe(r) => {
            let groups = r.group_ids.iter().map(|g| {
                DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(code)
            });
            ResponseKind::ShareGroupDescribe(
                ShareGroupDescribeResponse::default().with_groups(groups.collect()),
            )
        }
        RequestKind::DescribeShareGroupOffsets(r) => {
            let groups = r.groups.iter().map(|g| {
                DescribeShareGroupOffsetsResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(code)
            });
            ResponseKind::DescribeShareGroupOffsets(
                DescribeShareGroupOffsetsResponse::default().with_groups(groups.collect()),
            )
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            let topics = r.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    AlterShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                });
                AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(t.topic_name.clone())
                    .with_partitions(partitions.collect())
            });
            ResponseKind::AlterShareGroupOffsets(
                AlterShareGroupOffsetsResponse::default()
                    .with_error_code(code)
                    .with_responses(topics.collect()),
            )
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            let topics = r.topics.iter().map(|t| {
                DeleteShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(t.topic_name.clone())
                    .with_error_code(code)
            });
            ResponseKind::DeleteShareGroupOffsets(
                DeleteShareGroupOffsetsResponse::default()
                    .with_error_code(code)
                    .with_responses(topics.collect()),
            )
        }
        _ => return None,
    })
}

/// Every error code of a share-group coordinator answer, for the staleness
/// check; `None` for other APIs.
pub fn response_error_codes(response: &ResponseKind) -> Option<Vec<i16>> {
    Some(match response {
        ResponseKind::ShareGroupHeartbeat(r) => vec![r.error_code],
        ResponseKind::ShareGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::DescribeShareGroupOffsets(r) => {
            r.groups.iter().map(|g| g.error_code).collect()
        }
        ResponseKind::AlterShareGroupOffsets(r) => vec![r.error_code],
        ResponseKind::DeleteShareGroupOffsets(r) => vec![r.error_code],
        _ => return None,
    })
}
