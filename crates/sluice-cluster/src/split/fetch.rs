//! Fetch (v4–v18): split by partition leader, every part sessionless.
//!
//! Topics are named by `topic` up to v12 and by `topic_id` from v13.
//!
//! **Fetch sessions.** The split itself is sessionless: every part it builds
//! is a full fetch with `session_id = 0`, `session_epoch = -1` (FINAL_EPOCH:
//! "no session, do not create one") and no `forgotten_topics_data`, and a
//! merge of such parts carries `session_id = 0`. Sessions live above it, in
//! the consume path: the session Sluice offers the client is turned into the
//! full fetch it stands for before the split (`consume/session.rs`), and
//! each part is then rewritten into Sluice's own session with its broker
//! (`consume/upstream.rs`). Only a sessionless fetch whose partitions all go
//! to one broker, with nothing parked or stashed, goes out as this split
//! builds it.
//!
//! **Which replica.** A consumer's fetch (`replica_id` -1) of v11+ goes, per
//! partition, to [`PartitionLeaders::fetch_replica`]: the leader, or an
//! in-rack follower when Sluice is rack-aware (see `topology/view/replica.rs`).
//! Older versions and fetches from replicas always go to the leader.
//!
//! Every part keeps the request's `replica_id` / `replica_state`,
//! `cluster_id`, `max_wait_ms`, `min_bytes`, `isolation_level` and `rack_id`
//! (the consume path clears `rack_id`: Sluice picks the replica), and an
//! even share of its `max_bytes` ([`part_max_bytes`]).
//!
//! A fetch that names no partition at all has no part: its merge answers at
//! once with an empty response, without waiting `max_wait_ms` (clients do not
//! send such fetches without a session).
//!
//! The merge concatenates the parts' topics in request order, takes the
//! largest throttle time and the first non-zero top-level error code, and
//! collects `node_endpoints` (v16+) once per node id. Partitions without a
//! known leader, or of failed parts, get NOT_LEADER_OR_FOLLOWER with empty
//! records and `high_watermark = -1`.

use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse};

use super::order::{map_topics, topic_entry};
use super::{
    BrokerId, PartResult, PartitionLeaders, Plan, Routing, Split, SplitApi, SplitError, TopicRef,
    route,
};
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};
use crate::topology::FOLLOWER_FETCH_VERSION;

/// `session_id` of a sessionless fetch.
pub const NO_SESSION_ID: i32 = 0;
/// `session_epoch` of a full fetch that neither uses nor creates a session.
pub const FINAL_EPOCH: i32 = -1;

topic_entry!(
    FetchTopic,
    partitions,
    FetchPartition,
    partition,
    name_or_id(topic, topic_id, 13)
);
topic_entry!(
    FetchableTopicResponse,
    partitions,
    PartitionData,
    partition_index,
    name_or_id(topic, topic_id, 13)
);

/// Whether `request` is already a sessionless full fetch, so that a part
/// equal to it can be forwarded unchanged.
fn is_sessionless(request: &FetchRequest) -> bool {
    request.session_id == NO_SESSION_ID
        && request.session_epoch == FINAL_EPOCH
        && request.forgotten_topics_data.is_empty()
}

/// Whether `request` is a consumer's fetch a follower may serve (KIP-392).
fn is_consumer_fetch(request: &FetchRequest, version: i16) -> bool {
    version >= FOLLOWER_FETCH_VERSION
        && request.replica_id.0 < 0
        && request.replica_state.replica_id.0 < 0
}

/// Routes each partition to its [`PartitionLeaders::fetch_replica`].
struct Replicas<'a, R: ?Sized>(&'a R);

impl<R: PartitionLeaders + ?Sized> PartitionLeaders for Replicas<'_, R> {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.0.fetch_replica(topic, partition)
    }
}

impl SplitApi for FetchRequest {
    type Response = FetchResponse;
    const API_KEY: ApiKey = ApiKey::Fetch;
    const UNAVAILABLE_ERROR: ErrorCode = NOT_LEADER_OR_FOLLOWER;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let base = part_base(self);
        let rebuild = |topics| base.clone().with_topics(topics);
        let modified = !is_sessionless(self);
        let mut split = if is_consumer_fetch(self, version) {
            route::split_by_leader(&self.topics, version, &Replicas(routing), modified, rebuild)
        } else {
            route::split_by_leader(&self.topics, version, routing, modified, rebuild)
        };
        let share = part_max_bytes(self.max_bytes, split.parts.len());
        for (_, part) in &mut split.parts {
            part.max_bytes = share;
        }
        split
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<FetchResponse>>,
    ) -> Result<FetchResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        let throttle_time_ms = resolved.throttle(|r| r.throttle_time_ms);
        let error_code = resolved.error(|r| r.error_code);
        let (responses, node_endpoints) =
            resolved.into_topics_and_nodes(|r| (r.responses, r.node_endpoints), |n| &n.node_id);
        Ok(FetchResponse::default()
            .with_throttle_time_ms(throttle_time_ms)
            .with_error_code(error_code)
            .with_session_id(NO_SESSION_ID)
            .with_responses(responses)
            .with_node_endpoints(node_endpoints))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> FetchResponse {
        let responses = map_topics(
            &self.topics,
            |topic| {
                FetchableTopicResponse::default()
                    .with_topic(topic.topic.clone())
                    .with_topic_id(topic.topic_id)
            },
            |p| error_partition(p.partition, error_code),
        );
        FetchResponse::default()
            .with_session_id(NO_SESSION_ID)
            .with_responses(responses)
    }
}

/// `request` with no topics, as a sessionless part: every field the parts
/// keep (see the module doc).
pub fn part_base(request: &FetchRequest) -> FetchRequest {
    FetchRequest::default()
        .with_cluster_id(request.cluster_id.clone())
        .with_replica_id(request.replica_id)
        .with_replica_state(request.replica_state.clone())
        .with_max_wait_ms(request.max_wait_ms)
        .with_min_bytes(request.min_bytes)
        .with_max_bytes(request.max_bytes)
        .with_isolation_level(request.isolation_level)
        .with_session_id(NO_SESSION_ID)
        .with_session_epoch(FINAL_EPOCH)
        .with_rack_id(request.rack_id.clone())
        .with_unknown_tagged_fields(request.unknown_tagged_fields.clone())
}

/// The `max_bytes` of each of `parts` parts of a fetch that asked for
/// `max_bytes`: an even share, so that the merged answer stays within what
/// the client asked for, as one broker's would (and within the memory
/// budget Sluice reserved for it). The consume path, whose answers also
/// carry stashed and adopted data, bounds the whole answer besides
/// (`consume/bound.rs`). Like `max_bytes` itself the share is a
/// soft limit: a broker still returns a first record batch larger than it.
pub fn part_max_bytes(max_bytes: i32, parts: usize) -> i32 {
    match i32::try_from(parts) {
        Ok(n) if n > 1 && max_bytes > 0 => (max_bytes / n).max(1),
        _ => max_bytes,
    }
}

/// A partition answer carrying `error_code` and no records, as a broker writes one.
pub fn error_partition(index: i32, error_code: ErrorCode) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error_code.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
}
