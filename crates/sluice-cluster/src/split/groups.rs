//! Apis split by group coordinator: OffsetFetch (v1–v9), DescribeGroups
//! (v0–v6) and DeleteGroups (v0–v2).
//!
//! A client sends these to the node FindCoordinator named, which behind Sluice
//! stands for every coordinator; a request naming several groups (OffsetFetch
//! v8+ `groups`, DescribeGroups `groups`, DeleteGroups `groups_names`) is split
//! so that each group reaches its own coordinator ([`Coordinators`]).
//! OffsetFetch v1–v7 names one group and goes to its coordinator whole.
//!
//! The merge concatenates the per-group answers in the order of the client's
//! request, with the largest throttle time. Groups without a known
//! coordinator, or of failed parts, get NOT_COORDINATOR, which makes the
//! client look the coordinator up again and retry.
//!
//! FindCoordinator v4+ also batches keys (`coordinator_keys`) but is not split:
//! any broker answers it, and its answer is rewritten elsewhere.
//!
//! [`Coordinators`]: super::Coordinators

use sluice_codec::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use sluice_codec::kafka_protocol::messages::describe_groups_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::order::{group_entry, group_errors};
use super::{PartResult, Plan, Routing, Split, SplitApi, SplitError, route};
use crate::error_codes::{ErrorCode, NOT_COORDINATOR};

/// The first OffsetFetch version that batches groups.
pub const OFFSET_FETCH_GROUPS_VERSION: i16 = 8;
/// The first OffsetFetch version with a top-level error code (until v7).
const OFFSET_FETCH_ERROR_CODE_VERSION: i16 = 2;

group_entry!(
    OffsetFetchResponseGroup,
    DescribedGroup,
    DeletableGroupResult
);

impl SplitApi for OffsetFetchRequest {
    type Response = OffsetFetchResponse;
    const API_KEY: ApiKey = ApiKey::OffsetFetch;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_COORDINATOR;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        if version < OFFSET_FETCH_GROUPS_VERSION {
            let whole = std::slice::from_ref(self);
            return route::split_by_group(
                whole,
                |r| &r.group_id,
                version,
                routing,
                |mut one| one.pop().unwrap_or_else(|| self.clone()),
            );
        }
        let base = OffsetFetchRequest::default()
            .with_group_id(self.group_id.clone())
            .with_topics(self.topics.clone())
            .with_require_stable(self.require_stable)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_group(
            &self.groups,
            |g| &g.group_id,
            version,
            routing,
            |groups| base.clone().with_groups(groups),
        )
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<OffsetFetchResponse>>,
    ) -> Result<OffsetFetchResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        if resolved.version < OFFSET_FETCH_GROUPS_VERSION {
            // One group, one part (or its synthesized answer).
            return Ok(resolved.responses.into_iter().next().unwrap_or_default());
        }
        Ok(OffsetFetchResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_groups(resolved.into_groups(|r| r.groups)))
    }

    /// v8+: every group carries `error_code`. v2–v7: the top-level error code
    /// does (as a broker answers a group-level error). v1 has no group-level
    /// field, so every requested partition carries it.
    fn error_response_for(&self, version: i16, error_code: ErrorCode) -> OffsetFetchResponse {
        if version >= OFFSET_FETCH_GROUPS_VERSION {
            let groups = self.groups.iter().map(|group| &group.group_id);
            return OffsetFetchResponse::default().with_groups(group_errors(groups, error_code));
        }
        if version >= OFFSET_FETCH_ERROR_CODE_VERSION {
            return OffsetFetchResponse::default().with_error_code(error_code.code());
        }
        let topics = self.topics.iter().flatten().map(|topic| {
            let partitions = topic.partition_indexes.iter().map(|index| {
                OffsetFetchResponsePartition::default()
                    .with_partition_index(*index)
                    .with_committed_offset(-1)
                    .with_metadata(Some(StrBytes::default()))
                    .with_error_code(error_code.code())
            });
            OffsetFetchResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions.collect())
        });
        OffsetFetchResponse::default().with_topics(topics.collect())
    }
}

impl SplitApi for DescribeGroupsRequest {
    type Response = DescribeGroupsResponse;
    const API_KEY: ApiKey = ApiKey::DescribeGroups;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_COORDINATOR;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = DescribeGroupsRequest::default()
            .with_include_authorized_operations(self.include_authorized_operations)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_group(
            &self.groups,
            |g| g,
            version,
            routing,
            |groups| base.clone().with_groups(groups),
        )
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<DescribeGroupsResponse>>,
    ) -> Result<DescribeGroupsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(DescribeGroupsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_groups(resolved.into_groups(|r| r.groups)))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> DescribeGroupsResponse {
        DescribeGroupsResponse::default().with_groups(group_errors(&self.groups, error_code))
    }
}

impl SplitApi for DeleteGroupsRequest {
    type Response = DeleteGroupsResponse;
    const API_KEY: ApiKey = ApiKey::DeleteGroups;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_COORDINATOR;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = DeleteGroupsRequest::default()
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_group(
            &self.groups_names,
            |g| g,
            version,
            routing,
            |names| base.clone().with_groups_names(names),
        )
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<DeleteGroupsResponse>>,
    ) -> Result<DeleteGroupsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(DeleteGroupsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_results(resolved.into_groups(|r| r.results)))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> DeleteGroupsResponse {
        DeleteGroupsResponse::default().with_results(group_errors(&self.groups_names, error_code))
    }
}
