//! The other partition-leader apis: ListOffsets (v1–v10), OffsetForLeaderEpoch
//! (v2–v4), DeleteRecords (v0–v2) and DescribeProducers (v0).
//!
//! All four name topics by name and must reach each partition's leader. Each
//! is split by leader with every other field copied into every part, and
//! merged by concatenating topics (one entry per topic, partitions in request
//! order) with the largest throttle time. Partitions without a known leader,
//! or of failed parts, get NOT_LEADER_OR_FOLLOWER with the "unknown" values a
//! broker uses (offsets, epochs and watermarks of -1).

use sluice_codec::kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use sluice_codec::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use sluice_codec::kafka_protocol::messages::describe_producers_request::TopicRequest;
use sluice_codec::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, TopicResponse,
};
use sluice_codec::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use sluice_codec::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use sluice_codec::kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use sluice_codec::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersRequest,
    DescribeProducersResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use super::order::{TopicEntry, map_topics, topic_entry};
use super::{PartResult, Plan, Routing, Split, SplitApi, SplitError, TopicRef, route};
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};

topic_entry!(
    ListOffsetsTopic,
    partitions,
    ListOffsetsPartition,
    partition_index,
    name(name)
);
topic_entry!(
    ListOffsetsTopicResponse,
    partitions,
    ListOffsetsPartitionResponse,
    partition_index,
    name(name)
);
topic_entry!(
    OffsetForLeaderTopic,
    partitions,
    OffsetForLeaderPartition,
    partition,
    name(topic)
);
topic_entry!(
    OffsetForLeaderTopicResult,
    partitions,
    EpochEndOffset,
    partition,
    name(topic)
);
topic_entry!(
    DeleteRecordsTopic,
    partitions,
    DeleteRecordsPartition,
    partition_index,
    name(name)
);
topic_entry!(
    DeleteRecordsTopicResult,
    partitions,
    DeleteRecordsPartitionResult,
    partition_index,
    name(name)
);
topic_entry!(
    TopicResponse,
    partitions,
    PartitionResponse,
    partition_index,
    name(name)
);

/// DescribeProducers lists bare partition indexes.
impl TopicEntry for TopicRequest {
    type Partition = i32;

    fn topic_ref(&self, _version: i16) -> TopicRef {
        TopicRef::Name(self.name.clone())
    }
    fn partitions(&self) -> &[i32] {
        &self.partition_indexes
    }
    fn partitions_mut(&mut self) -> &mut Vec<i32> {
        &mut self.partition_indexes
    }
    fn partition_index(partition: &i32) -> i32 {
        *partition
    }
    fn empty_like(&self) -> Self {
        TopicRequest::default()
            .with_name(self.name.clone())
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone())
    }
}

impl SplitApi for ListOffsetsRequest {
    type Response = ListOffsetsResponse;
    const API_KEY: ApiKey = ApiKey::ListOffsets;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = ListOffsetsRequest::default()
            .with_replica_id(self.replica_id)
            .with_isolation_level(self.isolation_level)
            .with_timeout_ms(self.timeout_ms)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_leader(&self.topics, version, routing, false, |topics| {
            base.clone().with_topics(topics)
        })
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<ListOffsetsResponse>>,
    ) -> Result<ListOffsetsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(ListOffsetsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_topics(resolved.into_topics(|r| r.topics)))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> ListOffsetsResponse {
        let topics = map_topics(
            &self.topics,
            |topic| ListOffsetsTopicResponse::default().with_name(topic.name.clone()),
            |p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error_code.code())
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_leader_epoch(-1)
            },
        );
        ListOffsetsResponse::default().with_topics(topics)
    }
}

impl SplitApi for OffsetForLeaderEpochRequest {
    type Response = OffsetForLeaderEpochResponse;
    const API_KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = OffsetForLeaderEpochRequest::default()
            .with_replica_id(self.replica_id)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_leader(&self.topics, version, routing, false, |topics| {
            base.clone().with_topics(topics)
        })
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<OffsetForLeaderEpochResponse>>,
    ) -> Result<OffsetForLeaderEpochResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(OffsetForLeaderEpochResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_topics(resolved.into_topics(|r| r.topics)))
    }

    fn error_response_for(
        &self,
        _version: i16,
        error_code: ErrorCode,
    ) -> OffsetForLeaderEpochResponse {
        let topics = map_topics(
            &self.topics,
            |topic| OffsetForLeaderTopicResult::default().with_topic(topic.topic.clone()),
            |p| {
                EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_error_code(error_code.code())
                    .with_leader_epoch(-1)
                    .with_end_offset(-1)
            },
        );
        OffsetForLeaderEpochResponse::default().with_topics(topics)
    }
}

impl SplitApi for DeleteRecordsRequest {
    type Response = DeleteRecordsResponse;
    const API_KEY: ApiKey = ApiKey::DeleteRecords;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = DeleteRecordsRequest::default()
            .with_timeout_ms(self.timeout_ms)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_leader(&self.topics, version, routing, false, |topics| {
            base.clone().with_topics(topics)
        })
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<DeleteRecordsResponse>>,
    ) -> Result<DeleteRecordsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(DeleteRecordsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_topics(resolved.into_topics(|r| r.topics)))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> DeleteRecordsResponse {
        let topics = map_topics(
            &self.topics,
            |topic| DeleteRecordsTopicResult::default().with_name(topic.name.clone()),
            |p| {
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error_code.code())
                    .with_low_watermark(-1)
            },
        );
        DeleteRecordsResponse::default().with_topics(topics)
    }
}

impl SplitApi for DescribeProducersRequest {
    type Response = DescribeProducersResponse;
    const API_KEY: ApiKey = ApiKey::DescribeProducers;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = DescribeProducersRequest::default()
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_leader(&self.topics, version, routing, false, |topics| {
            base.clone().with_topics(topics)
        })
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<DescribeProducersResponse>>,
    ) -> Result<DescribeProducersResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        Ok(DescribeProducersResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_topics(resolved.into_topics(|r| r.topics)))
    }

    fn error_response_for(
        &self,
        _version: i16,
        error_code: ErrorCode,
    ) -> DescribeProducersResponse {
        let topics = map_topics(
            &self.topics,
            |topic| TopicResponse::default().with_name(topic.name.clone()),
            |index| {
                PartitionResponse::default()
                    .with_partition_index(*index)
                    .with_error_code(error_code.code())
            },
        );
        DescribeProducersResponse::default().with_topics(topics)
    }
}
