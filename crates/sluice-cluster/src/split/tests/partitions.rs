//! ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers: split
//! by leader and merged, at every version, through one harness.

use sluice_codec::kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use sluice_codec::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use sluice_codec::kafka_protocol::messages::describe_producers_request::TopicRequest;
use sluice_codec::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
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
    ApiKey, BrokerId, DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersRequest,
    DescribeProducersResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProducerId,
};
use sluice_codec::kafka_protocol::protocol::Message;

use super::super::SplitApi;
use super::super::order::TopicEntry;
use super::*;
use crate::error_codes::NOT_LEADER_OR_FOLLOWER;

/// One leader-routed api, described for the shared checks.
struct LeaderApi<Req: SplitApi, T, RT: TopicEntry> {
    request: fn(i16) -> Req,
    topics: fn(&Req) -> &[T],
    without_topics: fn(Req) -> Req,
    /// Broker `to`'s answer, each partition marked with [`mark`].
    answer: fn(BrokerId, &Req) -> Req::Response,
    response_topics: fn(&Req::Response) -> &[RT],
    /// (error code, marked value) of a partition answer.
    outcome: fn(&RT::Partition) -> (i16, i64),
    /// First version with a throttle time field.
    throttle_since: i16,
}

/// A [`LeaderApi`] whose request and response keep their topics in a
/// `topics` field: the given fields, and those that read that field.
macro_rules! leader_api {
    ($($field:ident: $value:expr),* $(,)?) => {
        LeaderApi {
            topics: |r| &r.topics,
            without_topics: |r| r.with_topics(Vec::new()),
            response_topics: |r| &r.topics,
            $($field: $value,)*
        }
    };
}

impl<Req, T, RT> LeaderApi<Req, T, RT>
where
    Req: Wire + PartialEq + std::fmt::Debug,
    T: TopicEntry,
    RT: TopicEntry,
{
    fn check(&self, version: i16) {
        let api = Req::API_KEY;
        let (request, split) = leader_split((self.request)(version), version, false, self.topics);
        let strip = self.without_topics;
        let merged = merge_answers(version, split, |to, part| {
            assert_eq!(
                strip(part.clone()),
                strip(request.clone()),
                "{api:?} v{version} fields"
            );
            (self.answer)(to, part)
        });
        let topics = (self.response_topics)(&merged);
        check_merged(topics, version, false, |key, p, leader| {
            let index = RT::partition_index(p);
            let expected = match leader {
                Some(leader) => (0, mark(leader, index)),
                None => (NOT_LEADER_OR_FOLLOWER.code(), -1),
            };
            assert_eq!(
                (self.outcome)(p),
                expected,
                "{api:?} v{version} {key:?}/{index}"
            );
        });
        Req::assert_merged_encodes(version, &merged);
    }

    fn check_every_version(&self, versions: std::ops::RangeInclusive<i16>) {
        for version in versions {
            self.check(version);
        }
    }
}

fn list_offsets() -> LeaderApi<ListOffsetsRequest, ListOffsetsTopic, ListOffsetsTopicResponse> {
    leader_api! {
        request: |version| {
            let topics = TOPICS.iter().map(|(text, _, _, partitions)| {
                let partitions = partitions.iter().map(|p| {
                    let partition = ListOffsetsPartition::default()
                        .with_partition_index(*p)
                        .with_timestamp(-1);
                    if version >= 4 {
                        partition.with_current_leader_epoch(5)
                    } else {
                        partition
                    }
                });
                ListOffsetsTopic::default()
                    .with_name(name(text))
                    .with_partitions(partitions.collect())
            });
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(topics.collect());
            let request = if version >= 2 {
                request.with_isolation_level(1)
            } else {
                request
            };
            if version >= 10 {
                request.with_timeout_ms(3000)
            } else {
                request
            }
        },
        answer: |to, part| {
            let topics = part.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_offset(mark(to, p.partition_index))
                });
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions.collect())
            });
            ListOffsetsResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_topics(topics.collect())
        },
        outcome: |p| (p.error_code, p.offset),
        throttle_since: 2,
    }
}

fn offset_for_leader_epoch()
-> LeaderApi<OffsetForLeaderEpochRequest, OffsetForLeaderTopic, OffsetForLeaderTopicResult> {
    leader_api! {
        request: |version| {
            let topics = TOPICS.iter().map(|(text, _, _, partitions)| {
                let partitions = partitions.iter().map(|p| {
                    OffsetForLeaderPartition::default()
                        .with_partition(*p)
                        .with_current_leader_epoch(7)
                        .with_leader_epoch(6)
                });
                OffsetForLeaderTopic::default()
                    .with_topic(name(text))
                    .with_partitions(partitions.collect())
            });
            let request = OffsetForLeaderEpochRequest::default().with_topics(topics.collect());
            if version >= 3 {
                request.with_replica_id(BrokerId(-1))
            } else {
                request
            }
        },
        answer: |to, part| {
            let topics = part.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(6)
                        .with_end_offset(mark(to, p.partition))
                });
                OffsetForLeaderTopicResult::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions.collect())
            });
            OffsetForLeaderEpochResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_topics(topics.collect())
        },
        outcome: |p| (p.error_code, p.end_offset),
        throttle_since: 2,
    }
}

fn delete_records() -> LeaderApi<DeleteRecordsRequest, DeleteRecordsTopic, DeleteRecordsTopicResult>
{
    leader_api! {
        request: |_| {
            let topics = TOPICS.iter().map(|(text, _, _, partitions)| {
                let partitions = partitions.iter().map(|p| {
                    DeleteRecordsPartition::default()
                        .with_partition_index(*p)
                        .with_offset(42)
                });
                DeleteRecordsTopic::default()
                    .with_name(name(text))
                    .with_partitions(partitions.collect())
            });
            DeleteRecordsRequest::default()
                .with_timeout_ms(2500)
                .with_topics(topics.collect())
        },
        answer: |to, part| {
            let topics = part.topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(mark(to, p.partition_index))
                });
                DeleteRecordsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions.collect())
            });
            DeleteRecordsResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_topics(topics.collect())
        },
        outcome: |p| (p.error_code, p.low_watermark),
        throttle_since: 0,
    }
}

fn describe_producers() -> LeaderApi<DescribeProducersRequest, TopicRequest, TopicResponse> {
    leader_api! {
        request: |_| {
            let topics = TOPICS.iter().map(|(text, _, _, partitions)| {
                TopicRequest::default()
                    .with_name(name(text))
                    .with_partition_indexes(partitions.to_vec())
            });
            DescribeProducersRequest::default().with_topics(topics.collect())
        },
        answer: |to, part| {
            let topics = part.topics.iter().map(|t| {
                let partitions = t.partition_indexes.iter().map(|p| {
                    let producer =
                        ProducerState::default().with_producer_id(ProducerId(mark(to, *p)));
                    PartitionResponse::default()
                        .with_partition_index(*p)
                        .with_active_producers(vec![producer])
                });
                TopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions.collect())
            });
            DescribeProducersResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_topics(topics.collect())
        },
        outcome: |p| {
            let producer = p.active_producers.first().map_or(-1, |s| s.producer_id.0);
            (p.error_code, producer)
        },
        throttle_since: 0,
    }
}

#[test]
fn list_offsets_v1_and_v10_split_and_merge() {
    list_offsets().check(1);
    list_offsets().check(10);
}

#[test]
fn list_offsets_every_version() {
    let v = <ListOffsetsRequest as Message>::VERSIONS;
    list_offsets().check_every_version(v.min..=v.max);
}

#[test]
fn offset_for_leader_epoch_every_version() {
    let v = <OffsetForLeaderEpochRequest as Message>::VERSIONS;
    assert_eq!((v.min, v.max), (2, 4));
    offset_for_leader_epoch().check_every_version(v.min..=v.max);
}

#[test]
fn delete_records_every_version() {
    let v = <DeleteRecordsRequest as Message>::VERSIONS;
    assert_eq!((v.min, v.max), (0, 2));
    delete_records().check_every_version(v.min..=v.max);
}

#[test]
fn describe_producers_every_version() {
    let v = <DescribeProducersRequest as Message>::VERSIONS;
    describe_producers().check_every_version(v.min..=v.max);
}

#[test]
fn merged_throttle_is_the_largest_where_the_version_has_one() {
    let cluster = FakeCluster::three_brokers();
    for version in [1, 2, 10] {
        let api = list_offsets();
        let request = (api.request)(version);
        let split = request.split(version, &cluster);
        let merged = merge_answers(version, split, api.answer);
        let expected = if version >= api.throttle_since { 30 } else { 0 };
        assert_eq!(merged.throttle_time_ms, expected, "v{version}");
    }
}

#[test]
fn error_responses_name_every_partition() {
    let list = list_offsets();
    for version in [1, 10] {
        let response = (list.request)(version).error_response_for(version, NOT_LEADER_OR_FOLLOWER);
        assert_eq!(flatten(&response.topics, version), request_order(false));
        assert!(
            response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.offset == -1)
        );
        broker_roundtrip(ApiKey::ListOffsets, version, response);
    }
    let epochs = offset_for_leader_epoch();
    let response = (epochs.request)(4).error_response_for(4, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(flatten(&response.topics, 4), request_order(false));
    broker_roundtrip(ApiKey::OffsetForLeaderEpoch, 4, response);
    let delete = delete_records();
    let response = (delete.request)(2).error_response_for(2, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(flatten(&response.topics, 2), request_order(false));
    broker_roundtrip(ApiKey::DeleteRecords, 2, response);
    let producers = describe_producers();
    let response = (producers.request)(0).error_response_for(0, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(flatten(&response.topics, 0), request_order(false));
    broker_roundtrip(ApiKey::DescribeProducers, 0, response);
}
