//! Produce (v3–v13): split by partition leader, merge per topic.
//!
//! Topics are named by `name` up to v12 and by `topic_id` from v13. A
//! request whose partitions all have one leader is not cut at all: it is
//! forwarded as the client's bytes (see `route::whole_to_one_leader`).
//! Otherwise every part keeps the request's `transactional_id`, `acks` and
//! `timeout_ms`, and record batches move into the parts as the same `Bytes`,
//! slices of the client's frame, never decoded or copied (the codec writes
//! a part's batches from those slices too).
//!
//! The merge concatenates the parts' topics (one entry per topic, partitions
//! in request order), takes the largest throttle time, and collects the
//! parts' `node_endpoints` (v10+) once per node id. Partitions without a known
//! leader, and partitions of failed parts, are answered with
//! NOT_LEADER_OR_FOLLOWER and `base_offset = -1`, so the client refreshes
//! metadata and retries; idempotent producers keep their sequence numbers.
//!
//! `acks = 0` has no response: send the parts, do not merge.

use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};

use super::order::{map_topics, topic_entry};
use super::{PartResult, Plan, Routing, Split, SplitApi, SplitError, route};
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};

topic_entry!(
    TopicProduceData,
    partition_data,
    PartitionProduceData,
    index,
    name_or_id(name, topic_id, 13)
);
topic_entry!(
    TopicProduceResponse,
    partition_responses,
    PartitionProduceResponse,
    index,
    name_or_id(name, topic_id, 13)
);

impl SplitApi for ProduceRequest {
    type Response = ProduceResponse;
    const API_KEY: ApiKey = ApiKey::Produce;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        if let Some(whole) = route::whole_to_one_leader(self, &self.topic_data, version, routing) {
            return whole;
        }
        let base = ProduceRequest::default()
            .with_transactional_id(self.transactional_id.clone())
            .with_acks(self.acks)
            .with_timeout_ms(self.timeout_ms)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone());
        route::split_by_leader(&self.topic_data, version, routing, false, |topic_data| {
            base.clone().with_topic_data(topic_data)
        })
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<ProduceResponse>>,
    ) -> Result<ProduceResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        let throttle_time_ms = resolved.throttle(|r| r.throttle_time_ms);
        let (responses, node_endpoints) =
            resolved.into_topics_and_nodes(|r| (r.responses, r.node_endpoints), |n| &n.node_id);
        Ok(ProduceResponse::default()
            .with_throttle_time_ms(throttle_time_ms)
            .with_responses(responses)
            .with_node_endpoints(node_endpoints))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> ProduceResponse {
        let responses = map_topics(
            &self.topic_data,
            |topic| {
                TopicProduceResponse::default()
                    .with_name(topic.name.clone())
                    .with_topic_id(topic.topic_id)
            },
            |p| error_partition(p.index, error_code),
        );
        ProduceResponse::default().with_responses(responses)
    }

    fn skeleton(&self) -> Self {
        let topic_data = map_topics(
            &self.topic_data,
            |topic| {
                TopicProduceData::default()
                    .with_name(topic.name.clone())
                    .with_topic_id(topic.topic_id)
            },
            |p| PartitionProduceData::default().with_index(p.index),
        );
        ProduceRequest::default()
            .with_transactional_id(self.transactional_id.clone())
            .with_acks(self.acks)
            .with_timeout_ms(self.timeout_ms)
            .with_topic_data(topic_data)
    }
}

/// A partition response carrying `error_code`, as a broker writes one.
fn error_partition(index: i32, error_code: ErrorCode) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}
