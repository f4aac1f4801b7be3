//! Seed inputs for the fuzz targets, from real encoded messages.
//!
//! Every seed is a message built with `kafka-protocol` and encoded by
//! `sluice-codec` the way a client or broker would send it (record batches
//! by `kafka-protocol`'s own encoder), at several versions of its api, in
//! the input format of its target; the SASL seeds are real exchange
//! strings (the RFC 7677 test vector and Kafka's token extension). A
//! builder that cannot encode at some version (a field that version lacks)
//! simply gives no seed there. `cargo run -p sluice-fuzz-targets --bin seed`
//! writes them to `fuzz/corpus/<target>/`.

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, DeleteGroupsRequest,
    DeleteRecordsRequest, DescribeClusterResponse, DescribeConfigsResponse, DescribeGroupsRequest,
    DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeProducersRequest,
    DescribeTopicPartitionsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, ListGroupsRequest, ListGroupsResponse, ListOffsetsRequest,
    ListTransactionsRequest, ListTransactionsResponse, MetadataRequest, OffsetFetchRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, ProduceResponse, RequestKind, ResponseKind,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName, api_versions_response,
    delete_records_request, describe_cluster_response, describe_configs_response,
    describe_log_dirs_response, describe_producers_request, describe_topic_partitions_response,
    fetch_request, fetch_response, find_coordinator_response, list_groups_response,
    list_offsets_request, list_transactions_response, metadata_request, offset_fetch_request,
    offset_for_leader_epoch_request, produce_request, produce_response,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_codec::{Request, Response};

use crate::fixtures::{TOPICS, metadata_response, topic_name};
use crate::sasl::{RFC_CLIENT_FIRST, RFC_SERVER_FINAL, RFC_SERVER_FIRST};

/// One seed: its target, a file name, and its bytes.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The target it is for (a name of [`crate::TARGETS`]).
    pub target: &'static str,
    /// The file name under `fuzz/corpus/<target>/`.
    pub name: String,
    /// The input.
    pub data: Vec<u8>,
}

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let requests = requests();
    // framing: length-prefixed request frames, one per file, and one stream of several.
    let mut stream = Vec::new();
    for (name, frame) in &requests {
        let mut data = prefixed(frame);
        seeds.push(seed("framing", name, data.clone()));
        if stream.len() < 4096 {
            stream.append(&mut data);
        }
    }
    seeds.push(seed("framing", "stream", stream));
    // split: an error code byte, then a request frame of a split api.
    for (i, (name, frame)) in requests.iter().enumerate() {
        let api = i16::from_be_bytes([frame[0], frame[1]]);
        if SPLIT_APIS.iter().any(|a| *a as i16 == api) {
            let mut data = vec![u8::try_from(i % 8).unwrap_or(0)];
            data.extend_from_slice(frame);
            seeds.push(seed("split", name, data));
        }
    }
    // response: the api and version bytes, then a response frame.
    for (api, version, name, frame) in responses() {
        if let Some(prefix) = crate::response::prefix(api, version) {
            let mut data = prefix.to_vec();
            data.extend_from_slice(&frame);
            seeds.push(seed("response", &name, data));
        }
    }
    seeds.extend(sasl());
    seeds
}

fn seed(target: &'static str, name: &str, data: Vec<u8>) -> Seed {
    Seed {
        target,
        name: name.to_owned(),
        data,
    }
}

/// The apis `split_request` splits.
const SPLIT_APIS: [ApiKey; 12] = [
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DeleteRecords,
    ApiKey::DescribeProducers,
    ApiKey::ListGroups,
    ApiKey::ListTransactions,
    ApiKey::DescribeLogDirs,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::DeleteGroups,
];

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn group(text: &'static str) -> GroupId {
    GroupId(s(text))
}

/// The topics a request names: the fixture's two and one no broker leads.
fn topic_names() -> Vec<(TopicName, uuid::Uuid, i32)> {
    TOPICS
        .iter()
        .map(|&(name, id, partitions)| (topic_name(name), uuid::Uuid::from_u128(id), partitions))
        .chain([(topic_name("unknown"), uuid::Uuid::from_u128(0xdead), 1)])
        .collect()
}

/// Two record batches of three records each, as a producer writes them.
pub(crate) fn record_batches(value_len: usize) -> Bytes {
    let mut buf = BytesMut::new();
    for base in [0i64, 3] {
        let records: Vec<Record> = (base..base + 3)
            .map(|offset| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 7,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: -1,
                timestamp: 1_700_000_000_000 + offset,
                key: Some(Bytes::from(format!("key-{offset}"))),
                value: Some(Bytes::from(vec![b'v'; value_len])),
                headers: Default::default(),
            })
            .collect();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        if RecordBatchEncoder::encode(&mut buf, &records, &options).is_err() {
            return Bytes::new();
        }
    }
    buf.freeze()
}

/// A request frame (without length prefix), if `body` encodes at `version`.
fn request_frame(api: ApiKey, version: i16, body: RequestKind) -> Option<Vec<u8>> {
    let client = Some(Bytes::from_static(b"rdkafka"));
    let mut buf = BytesMut::new();
    Request::from_body(api, version, 17, client, body)
        .encode(&mut buf)
        .ok()?;
    Some(buf[4..].to_vec())
}

/// A response frame (without length prefix), if `body` encodes at `version`.
fn response_frame(api: ApiKey, version: i16, body: ResponseKind) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    Response::from_body(api, version, 17, body)
        .encode(&mut buf)
        .ok()?;
    Some(buf[4..].to_vec())
}

fn prefixed(frame: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(frame.len())
        .unwrap_or(0)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(frame);
    out
}

/// Builds `api` at each of `versions` with `build(version, by_id)`, by
/// topic name and by topic id, keeping what encodes (at most one per version).
fn at_versions<K>(
    api: ApiKey,
    versions: &[i16],
    build: impl Fn(i16, bool) -> K,
    frame: impl Fn(ApiKey, i16, K) -> Option<Vec<u8>>,
) -> Vec<(i16, Vec<u8>)> {
    versions
        .iter()
        .filter_map(|&v| {
            let by_id = frame(api, v, build(v, true));
            let by_name = || frame(api, v, build(v, false));
            by_id.or_else(by_name).map(|f| (v, f))
        })
        .collect()
}

/// Real client requests: (file name, frame without length prefix).
fn requests() -> Vec<(String, Vec<u8>)> {
    let topics = topic_names();
    let batches = record_batches(20);
    let mut out = Vec::new();
    let mut add = |api: ApiKey, versions: &[i16], build: &dyn Fn(i16, bool) -> RequestKind| {
        for (v, frame) in at_versions(api, versions, build, request_frame) {
            out.push((format!("{api:?}-v{v}").to_lowercase(), frame));
        }
    };
    add(ApiKey::ApiVersions, &[0, 3, 4], &|_, _| {
        ApiVersionsRequest::default()
            .with_client_software_name(s("librdkafka"))
            .with_client_software_version(s("2.6.0"))
            .into()
    });
    add(ApiKey::Metadata, &[0, 4, 9, 12, 13], &|_, by_id| {
        let list = topics
            .iter()
            .map(|(name, id, _)| {
                let t = metadata_request::MetadataRequestTopic::default();
                if by_id {
                    t.with_topic_id(*id)
                } else {
                    t.with_name(Some(name.clone()))
                }
            })
            .collect();
        MetadataRequest::default().with_topics(Some(list)).into()
    });
    add(ApiKey::Produce, &[3, 7, 9, 11, 13], &|_, by_id| {
        let data = topics
            .iter()
            .map(|(name, id, partitions)| {
                let t = produce_request::TopicProduceData::default().with_partition_data(
                    (0..*partitions)
                        .map(|p| {
                            produce_request::PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(batches.clone()))
                        })
                        .collect(),
                );
                if by_id {
                    t.with_topic_id(*id)
                } else {
                    t.with_name(name.clone())
                }
            })
            .collect();
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(data)
            .into()
    });
    add(ApiKey::Fetch, &[4, 11, 12, 13, 17], &|v, by_id| {
        let list = topics
            .iter()
            .map(|(name, id, partitions)| {
                let t = fetch_request::FetchTopic::default().with_partitions(
                    (0..*partitions)
                        .map(|p| {
                            fetch_request::FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(i64::from(p) * 10)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                );
                if by_id {
                    t.with_topic_id(*id)
                } else {
                    t.with_topic(name.clone())
                }
            })
            .collect();
        let fetch = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(50 << 20)
            .with_topics(list);
        if v >= 11 {
            fetch.with_rack_id(s("rack-a")).into()
        } else {
            fetch.into()
        }
    });
    add(ApiKey::ListOffsets, &[1, 5, 6, 9], &|_, _| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(name, _, partitions)| {
                        list_offsets_request::ListOffsetsTopic::default()
                            .with_name(name.clone())
                            .with_partitions(
                                (0..*partitions)
                                    .map(|p| {
                                        list_offsets_request::ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::OffsetForLeaderEpoch, &[2, 4], &|_, _| {
        OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(name, _, partitions)| {
                        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                            .with_topic(name.clone())
                            .with_partitions(
                                (0..*partitions)
                                    .map(|p| {
                                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                            .with_partition(p)
                                            .with_leader_epoch(7)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::DeleteRecords, &[0, 2], &|_, _| {
        DeleteRecordsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(
                topics
                    .iter()
                    .map(|(name, _, _)| {
                        delete_records_request::DeleteRecordsTopic::default()
                            .with_name(name.clone())
                            .with_partitions(vec![
                                delete_records_request::DeleteRecordsPartition::default()
                                    .with_partition_index(0)
                                    .with_offset(5),
                            ])
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::DescribeProducers, &[0], &|_, _| {
        DescribeProducersRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|(name, _, partitions)| {
                        describe_producers_request::TopicRequest::default()
                            .with_name(name.clone())
                            .with_partition_indexes((0..*partitions).collect())
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::ListGroups, &[0, 3, 5], &|_, _| {
        ListGroupsRequest::default().into()
    });
    add(ApiKey::ListTransactions, &[0, 1], &|_, _| {
        ListTransactionsRequest::default().into()
    });
    add(ApiKey::DescribeLogDirs, &[1, 2, 4], &|_, _| {
        DescribeLogDirsRequest::default().with_topics(None).into()
    });
    let groups = || vec![group("g-one"), group("g-two"), group("g-three")];
    add(ApiKey::OffsetFetch, &[1, 7, 8, 9], &|v, _| {
        let topics = |_: ()| {
            topics
                .iter()
                .map(|(name, _, partitions)| {
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name.clone())
                        .with_partition_indexes((0..*partitions).collect())
                })
                .collect()
        };
        if v >= 8 {
            OffsetFetchRequest::default()
                .with_groups(
                    groups()
                        .into_iter()
                        .map(|g| {
                            offset_fetch_request::OffsetFetchRequestGroup::default()
                                .with_group_id(g)
                        })
                        .collect(),
                )
                .into()
        } else {
            OffsetFetchRequest::default()
                .with_group_id(group("g-one"))
                .with_topics(Some(topics(())))
                .into()
        }
    });
    add(ApiKey::DescribeGroups, &[0, 5], &|_, _| {
        DescribeGroupsRequest::default()
            .with_groups(groups())
            .into()
    });
    add(ApiKey::DeleteGroups, &[0, 2], &|_, _| {
        DeleteGroupsRequest::default()
            .with_groups_names(groups())
            .into()
    });
    add(ApiKey::FindCoordinator, &[0, 3, 4, 6], &|v, _| {
        let req = FindCoordinatorRequest::default();
        if v >= 4 {
            req.with_coordinator_keys(vec![s("g-one"), s("g-two")])
                .into()
        } else {
            req.with_key(s("g-one")).into()
        }
    });
    add(ApiKey::SaslHandshake, &[0, 1], &|_, _| {
        SaslHandshakeRequest::default()
            .with_mechanism(s("SCRAM-SHA-256"))
            .into()
    });
    add(ApiKey::SaslAuthenticate, &[0, 2], &|_, _| {
        SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from_static(RFC_CLIENT_FIRST.as_bytes()))
            .into()
    });
    out
}

/// Real broker responses: (api, version, file name, frame without length prefix).
fn responses() -> Vec<(ApiKey, i16, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut add = |api: ApiKey, versions: &[i16], build: &dyn Fn(i16, bool) -> ResponseKind| {
        for (v, frame) in at_versions(api, versions, build, response_frame) {
            out.push((api, v, format!("{api:?}-v{v}").to_lowercase(), frame));
        }
    };
    let endpoints = || {
        vec![
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(3))
                .with_host(s("kafka-3.internal"))
                .with_port(19094)
                .with_rack(Some(s("rack-c"))),
        ]
    };
    add(ApiKey::Metadata, &[0, 1, 4, 9, 10, 12, 13], &|v, _| {
        let mut m = metadata_response();
        if v < 10 {
            for t in &mut m.topics {
                t.topic_id = uuid::Uuid::nil();
            }
        }
        if v < 1 {
            m.cluster_id = None;
            m.controller_id = BrokerId(-1);
            for b in &mut m.brokers {
                b.rack = None;
            }
        }
        m.into()
    });
    add(ApiKey::FindCoordinator, &[0, 1, 3, 4, 6], &|v, _| {
        let resp = FindCoordinatorResponse::default();
        if v >= 4 {
            resp.with_coordinators(
                ["g-one", "g-two"]
                    .iter()
                    .zip([1, 2])
                    .map(|(key, id)| {
                        find_coordinator_response::Coordinator::default()
                            .with_key(s(key))
                            .with_node_id(BrokerId(id))
                            .with_host(s("kafka-1.internal"))
                            .with_port(19092)
                    })
                    .collect(),
            )
            .into()
        } else {
            resp.with_node_id(BrokerId(2))
                .with_host(s("kafka-2.internal"))
                .with_port(19093)
                .into()
        }
    });
    add(ApiKey::DescribeCluster, &[0, 1, 2], &|v, _| {
        let resp = DescribeClusterResponse::default()
            .with_cluster_id(s("fuzz-cluster"))
            .with_controller_id(BrokerId(2))
            .with_brokers(
                (1..=3)
                    .map(|id| {
                        let b = describe_cluster_response::DescribeClusterBroker::default()
                            .with_broker_id(BrokerId(id))
                            .with_host(s("kafka-1.internal"))
                            .with_port(19091 + id)
                            .with_rack(Some(s("rack-a")));
                        if v >= 2 { b.with_is_fenced(id == 3) } else { b }
                    })
                    .collect(),
            );
        if v >= 1 {
            resp.with_endpoint_type(1).into()
        } else {
            resp.into()
        }
    });
    add(ApiKey::DescribeTopicPartitions, &[0], &|_, _| {
        DescribeTopicPartitionsResponse::default()
            .with_topics(
                TOPICS
                    .iter()
                    .map(|&(name, id, partitions)| {
                        describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                            .with_name(Some(topic_name(name)))
                            .with_topic_id(uuid::Uuid::from_u128(id))
                            .with_partitions(
                                (0..partitions)
                                    .map(|p| {
                                        describe_topic_partitions_response::DescribeTopicPartitionsResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_leader_id(BrokerId(p % 3 + 1))
                                            .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
                                            .with_isr_nodes(vec![BrokerId(1), BrokerId(2)])
                                            .with_eligible_leader_replicas(Some(vec![BrokerId(3)]))
                                            .with_last_known_elr(Some(vec![]))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::ApiVersions, &[0, 3, 4], &|v, _| {
        let keys = [
            (0, 3, 13),
            (1, 4, 18),
            (3, 0, 13),
            (10, 0, 6),
            (18, 0, 4),
            (60, 0, 2),
        ]
        .iter()
        .map(|&(api, min, max)| {
            api_versions_response::ApiVersion::default()
                .with_api_key(api)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
        let resp = ApiVersionsResponse::default().with_api_keys(keys);
        if v >= 3 {
            resp.with_supported_features(vec![
                api_versions_response::SupportedFeatureKey::default()
                    .with_name(s("metadata.version"))
                    .with_min_version(1)
                    .with_max_version(27),
            ])
            .with_finalized_features_epoch(9)
            .into()
        } else {
            resp.into()
        }
    });
    let small = record_batches(16);
    let large = record_batches(400);
    add(ApiKey::Fetch, &[4, 7, 11, 12, 13, 16, 17], &|v, by_id| {
        let responses = TOPICS
            .iter()
            .map(|&(name, id, partitions)| {
                let t = fetch_response::FetchableTopicResponse::default().with_partitions(
                    (0..partitions)
                        .map(|p| {
                            let part = fetch_response::PartitionData::default()
                                .with_partition_index(p)
                                .with_high_watermark(100)
                                .with_last_stable_offset(100)
                                .with_records(Some(if p == 0 {
                                    large.clone()
                                } else {
                                    small.clone()
                                }));
                            if v >= 12 && p == 1 {
                                part.with_error_code(ResponseError::NotLeaderOrFollower.code())
                                    .with_records(None)
                                    .with_current_leader(
                                        fetch_response::LeaderIdAndEpoch::default()
                                            .with_leader_id(BrokerId(3))
                                            .with_leader_epoch(8),
                                    )
                            } else if v >= 11 && p == 2 {
                                part.with_preferred_read_replica(BrokerId(2))
                            } else {
                                part
                            }
                        })
                        .collect(),
                );
                if by_id {
                    t.with_topic_id(uuid::Uuid::from_u128(id))
                } else {
                    t.with_topic(topic_name(name))
                }
            })
            .collect();
        let resp = FetchResponse::default().with_responses(responses);
        if v >= 16 {
            resp.with_node_endpoints(
                endpoints()
                    .into_iter()
                    .map(|e| {
                        fetch_response::NodeEndpoint::default()
                            .with_node_id(e.node_id)
                            .with_host(e.host)
                            .with_port(e.port)
                            .with_rack(e.rack)
                    })
                    .collect(),
            )
            .into()
        } else {
            resp.into()
        }
    });
    add(ApiKey::Produce, &[3, 8, 9, 10, 11, 13], &|v, by_id| {
        let responses = TOPICS
            .iter()
            .map(|&(name, id, partitions)| {
                let t = produce_response::TopicProduceResponse::default().with_partition_responses(
                    (0..partitions)
                        .map(|p| {
                            let part = produce_response::PartitionProduceResponse::default()
                                .with_index(p)
                                .with_base_offset(42);
                            if v >= 10 && p == 1 {
                                part.with_error_code(ResponseError::NotLeaderOrFollower.code())
                                    .with_current_leader(
                                        produce_response::LeaderIdAndEpoch::default()
                                            .with_leader_id(BrokerId(3))
                                            .with_leader_epoch(8),
                                    )
                            } else {
                                part
                            }
                        })
                        .collect(),
                );
                if by_id {
                    t.with_topic_id(uuid::Uuid::from_u128(id))
                } else {
                    t.with_name(topic_name(name))
                }
            })
            .collect();
        let resp = ProduceResponse::default().with_responses(responses);
        if v >= 10 {
            resp.with_node_endpoints(endpoints()).into()
        } else {
            resp.into()
        }
    });
    add(ApiKey::DescribeConfigs, &[1, 3, 4], &|_, _| {
        let result = |name: &'static str, kind: i8| {
            describe_configs_response::DescribeConfigsResult::default()
                .with_resource_type(kind)
                .with_resource_name(s(name))
                .with_configs(vec![
                    describe_configs_response::DescribeConfigsResourceResult::default()
                        .with_name(s("broker.rack"))
                        .with_value(Some(s("rack-a"))),
                ])
        };
        DescribeConfigsResponse::default()
            .with_results(vec![result("1", 4), result("alpha", 2)])
            .into()
    });
    add(ApiKey::ListGroups, &[0, 4, 5], &|_, _| {
        ListGroupsResponse::default()
            .with_groups(
                ["g-one", "g-two", "g-three"]
                    .iter()
                    .map(|g| {
                        list_groups_response::ListedGroup::default()
                            .with_group_id(group(g))
                            .with_protocol_type(s("consumer"))
                    })
                    .collect(),
            )
            .into()
    });
    add(ApiKey::ListTransactions, &[0, 1], &|_, _| {
        ListTransactionsResponse::default()
            .with_transaction_states(vec![
                list_transactions_response::TransactionState::default()
                    .with_transactional_id(s("tx-1").into())
                    .with_transaction_state(s("Ongoing")),
            ])
            .into()
    });
    add(ApiKey::DescribeLogDirs, &[1, 2, 4], &|_, _| {
        DescribeLogDirsResponse::default()
            .with_results(vec![
                describe_log_dirs_response::DescribeLogDirsResult::default()
                    .with_log_dir(s("/var/kafka"))
                    .with_topics(vec![
                        describe_log_dirs_response::DescribeLogDirsTopic::default()
                            .with_name(topic_name("alpha"))
                            .with_partitions(vec![
                                describe_log_dirs_response::DescribeLogDirsPartition::default()
                                    .with_partition_index(0)
                                    .with_partition_size(1024),
                            ]),
                    ]),
            ])
            .into()
    });
    out
}

/// SASL messages, with the parser byte of [`crate::sasl`] in front.
fn sasl() -> Vec<Seed> {
    let plain: [&[u8]; 3] = [
        b"\0alice\0alice-secret",
        b"alice\0alice\0pw",
        b"\0user\0pencil",
    ];
    let client_first: [&str; 4] = [
        RFC_CLIENT_FIRST,
        "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL,tokenauth=true",
        "n,a=us=2Cer,n=us=2Cer,r=abc",
        "y,,n=us=3Der,r=xyz",
    ];
    let server_first = [
        RFC_SERVER_FIRST,
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,ext=1",
        "e=invalid-proof",
    ];
    let server_final = [RFC_SERVER_FINAL, "e=other-error", "v=AAAA"];
    let mut out = Vec::new();
    let mut add = |parser: u8, name: String, message: &[u8]| {
        let mut data = vec![parser];
        data.extend_from_slice(message);
        out.push(seed("sasl", &name, data));
    };
    for (i, m) in plain.iter().enumerate() {
        add(0, format!("plain-{i}"), m);
    }
    for (i, m) in client_first.iter().enumerate() {
        add(1, format!("scram-client-first-{i}"), m.as_bytes());
    }
    for (i, m) in server_first.iter().enumerate() {
        add(2, format!("scram-server-first-{i}"), m.as_bytes());
    }
    for (i, m) in server_final.iter().enumerate() {
        add(3, format!("scram-server-final-{i}"), m.as_bytes());
    }
    out
}
