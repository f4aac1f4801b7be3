//! Request bodies for the raw client ([`crate::raw::RawClient`]) and the
//! error codes of their answers: the few requests tests send by hand, at
//! versions every Kafka 4 broker and Sluice accept (topic names, not ids),
//! and the config resource types and error codes tests check in answers.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeTopicPartitionsRequest, FetchRequest,
    IncrementalAlterConfigsRequest, MetadataRequest, ProduceRequest, describe_configs_request,
    describe_topic_partitions_request, incremental_alter_configs_request,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::raw::RawClient;

/// The Produce version sent (v9: flexible, topic names).
pub const PRODUCE_VERSION: i16 = 9;
/// The Fetch version sent (v12: flexible, topic names).
pub const FETCH_VERSION: i16 = 12;
/// The Metadata version sent.
pub const METADATA_VERSION: i16 = 12;

/// The DescribeTopicPartitions version sent (the only one).
pub const DESCRIBE_TOPIC_PARTITIONS_VERSION: i16 = 0;
/// The DescribeConfigs version sent.
pub const DESCRIBE_CONFIGS_VERSION: i16 = 4;
/// The IncrementalAlterConfigs version sent.
pub const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 1;

/// The TOPIC config resource type.
pub const TOPIC_RESOURCE: i8 = 2;
/// The BROKER config resource type.
pub const BROKER_RESOURCE: i8 = 4;
/// The BROKER_LOGGER config resource type.
pub const BROKER_LOGGER_RESOURCE: i8 = 8;

/// INVALID_REQUEST.
pub const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();

/// NOT_LEADER_OR_FOLLOWER.
pub const NOT_LEADER_OR_FOLLOWER: i16 = ResponseError::NotLeaderOrFollower.code();

/// The Kafka error codes a client retries after a broker failure (refresh
/// metadata or find the coordinator again, then retry).
pub(crate) const RETRIABLE_BROKER_LOSS_CODES: &[i16] = &[
    3,  // UNKNOWN_TOPIC_OR_PARTITION
    5,  // LEADER_NOT_AVAILABLE
    6,  // NOT_LEADER_OR_FOLLOWER
    7,  // REQUEST_TIMED_OUT
    13, // NETWORK_EXCEPTION
    14, // COORDINATOR_LOAD_IN_PROGRESS
    15, // COORDINATOR_NOT_AVAILABLE
    16, // NOT_COORDINATOR
    19, // NOT_ENOUGH_REPLICAS
    20, // NOT_ENOUGH_REPLICAS_AFTER_APPEND
    74, // FENCED_LEADER_EPOCH
    75, // UNKNOWN_LEADER_EPOCH
];

/// A Metadata request for `topics`.
pub fn metadata(topics: &[&str]) -> RequestKind {
    RequestKind::Metadata(
        MetadataRequest::default().with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(StrBytes::from_string((*t).to_owned()).into()))
                })
                .collect(),
        )),
    )
}

/// One uncompressed record batch holding `value` once.
pub fn record_batch(value: &str) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode record batch");
    buf.freeze()
}

/// An `acks=all` Produce of one record holding `value` to each of `partitions`.
pub fn produce(topic: &str, partitions: &[i32], value: &str) -> RequestKind {
    let batch = record_batch(value);
    let data = partitions
        .iter()
        .map(|p| {
            PartitionProduceData::default()
                .with_index(*p)
                .with_records(Some(batch.clone()))
        })
        .collect();
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(StrBytes::from_string(topic.to_owned()).into())
                    .with_partition_data(data),
            ]),
    )
}

/// A sessionless Fetch of `partition` from `offset` that the broker may hold
/// up to `max_wait_ms` waiting for one byte.
pub fn fetch(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> RequestKind {
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(StrBytes::from_string(topic.to_owned()).into())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]),
    )
}

/// `(partition, error_code)` of every partition in a Produce or Fetch answer,
/// sorted by partition.
pub fn partition_errors(response: &ResponseKind) -> Vec<(i32, i16)> {
    let mut errors: Vec<(i32, i16)> = match response {
        ResponseKind::Produce(p) => p
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .map(|p| (p.index, p.error_code))
            .collect(),
        ResponseKind::Fetch(f) => f
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition_index, p.error_code))
            .collect(),
        other => panic!("not a Produce or Fetch answer: {other:?}"),
    };
    errors.sort_unstable();
    errors
}

/// `(partition, base offset)` of every partition in a Produce answer,
/// sorted by partition.
pub(crate) fn base_offsets(response: &ResponseKind) -> Vec<(i32, i64)> {
    let ResponseKind::Produce(p) = response else {
        panic!("not a Produce answer: {response:?}");
    };
    let mut offsets: Vec<(i32, i64)> = p
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| (p.index, p.base_offset))
        .collect();
    offsets.sort_unstable();
    offsets
}

/// Produces one record holding `value` to each of `partitions` through
/// `client` until every partition accepts it (right after a topic is
/// created, or a leader moves, a broker may not know yet that it leads, and
/// answers with a retriable error); panics on a non-retriable answer.
/// Returns `(partition, offset)` of the records the accepted answer wrote.
pub fn produce_until_accepted(
    client: &mut RawClient,
    topic: &str,
    partitions: &[i32],
    value: &str,
) -> Vec<(i32, i64)> {
    crate::wait::until(
        Duration::from_secs(60),
        &format!("partitions {partitions:?} of {topic} to accept a record"),
        || {
            let answer = client.request(
                ApiKey::Produce,
                PRODUCE_VERSION,
                produce(topic, partitions, value),
            );
            let errors = partition_errors(&answer);
            if errors.iter().all(|(_, code)| *code == 0) {
                return Ok(base_offsets(&answer));
            }
            if let Some(bad) = errors
                .iter()
                .find(|(_, code)| *code != 0 && !RETRIABLE_BROKER_LOSS_CODES.contains(code))
            {
                panic!("a non-retriable answer: {bad:?}");
            }
            Err(format!("{errors:?}"))
        },
    )
}

/// A DescribeTopicPartitions request for `topics` (Kafka's default page size).
pub fn describe_topic_partitions(topics: &[&str]) -> RequestKind {
    RequestKind::DescribeTopicPartitions(
        DescribeTopicPartitionsRequest::default()
            .with_response_partition_limit(2000)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        describe_topic_partitions_request::TopicRequest::default()
                            .with_name(StrBytes::from_string((*t).to_owned()).into())
                    })
                    .collect(),
            ),
    )
}

/// One config resource per `(resource type, name)` pair, built by `resource`.
fn config_resources<T>(pairs: &[(i8, &str)], resource: impl Fn(i8, StrBytes) -> T) -> Vec<T> {
    pairs
        .iter()
        .map(|(t, n)| resource(*t, StrBytes::from_string((*n).to_owned())))
        .collect()
}

/// A DescribeConfigs request for `(resource type, name)` pairs.
pub fn describe_configs(resources: &[(i8, &str)]) -> RequestKind {
    let resources = config_resources(resources, |t, n| {
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(n)
    });
    RequestKind::DescribeConfigs(DescribeConfigsRequest::default().with_resources(resources))
}

/// An IncrementalAlterConfigs request setting `name=value` on each of the
/// `(resource type, name)` pairs; `validate_only` asks brokers to check
/// without applying.
pub fn incremental_alter_configs(
    resources: &[(i8, &str)],
    (name, value): (&str, &str),
    validate_only: bool,
) -> RequestKind {
    let config = incremental_alter_configs_request::AlterableConfig::default()
        .with_name(StrBytes::from_string(name.to_owned()))
        .with_value(Some(StrBytes::from_string(value.to_owned())));
    let resources = config_resources(resources, |t, n| {
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(n)
            .with_configs(vec![config.clone()])
    });
    RequestKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(resources),
    )
}

/// `(resource type, resource name, error code)` of each result of a
/// DescribeConfigs or IncrementalAlterConfigs answer, in order.
pub fn config_outcomes(answer: &ResponseKind) -> Vec<(i8, String, i16)> {
    match answer {
        ResponseKind::DescribeConfigs(d) => d
            .results
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string(), r.error_code))
            .collect(),
        ResponseKind::IncrementalAlterConfigs(a) => a
            .responses
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string(), r.error_code))
            .collect(),
        other => panic!("not a config answer: {other:?}"),
    }
}
