//! Sample response bodies; see the parent module for what they are for.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::messages::{
    add_partitions_to_txn_response::*, api_versions_response::*, create_topics_response::*,
    delete_topics_response::*, describe_cluster_response::*, describe_configs_response::*,
    describe_delegation_token_response::*, describe_groups_response::*, fetch_response::*,
    find_coordinator_response::*, join_group_response::*, leave_group_response::*,
    list_groups_response::*, list_offsets_response::*, metadata_response::*,
    offset_commit_response::*, offset_fetch_response::*, produce_response::*,
};

use super::{group, records, s, tags, topic, txn, uuid};

pub(crate) fn response(api: ApiKey, v: i16) -> ResponseKind {
    let t = tags(api, v);
    match api {
        ApiKey::ApiVersions => api_versions_response(v)
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::Metadata => metadata_response(v).with_unknown_tagged_fields(t).into(),
        ApiKey::Produce => produce_response(v).with_unknown_tagged_fields(t).into(),
        ApiKey::Fetch => fetch_response(v).with_unknown_tagged_fields(t).into(),
        ApiKey::ListOffsets => {
            let mut p = ListOffsetsPartitionResponse::default()
                .with_partition_index(2)
                .with_timestamp(-1)
                .with_offset(987);
            if v >= 4 {
                p = p.with_leader_epoch(5);
            }
            let tp = ListOffsetsTopicResponse::default()
                .with_name(topic("orders"))
                .with_partitions(vec![p]);
            let mut r = ListOffsetsResponse::default().with_topics(vec![tp]);
            if v >= 2 {
                r = r.with_throttle_time_ms(7);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::FindCoordinator => {
            let mut r = FindCoordinatorResponse::default();
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            r = if v >= 4 {
                r.with_coordinators(vec![
                    Coordinator::default()
                        .with_key(s("sluice-group"))
                        .with_node_id(BrokerId(2))
                        .with_host(s("broker-2.internal"))
                        .with_port(9092)
                        .with_error_message(Some(s("none"))),
                ])
            } else {
                r.with_node_id(BrokerId(2))
                    .with_host(s("broker-2.internal"))
                    .with_port(9092)
            };
            if (1..=3).contains(&v) {
                r = r.with_error_message(Some(s("none")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeCluster => {
            let mut b = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(1))
                .with_host(s("broker-1.internal"))
                .with_port(9093)
                .with_rack(Some(s("rack-a")));
            if v >= 2 {
                b = b.with_is_fenced(true);
            }
            let mut r = DescribeClusterResponse::default()
                .with_throttle_time_ms(3)
                .with_error_message(Some(s("fine")))
                .with_cluster_id(s("cluster-x"))
                .with_controller_id(BrokerId(1))
                .with_brokers(vec![b])
                .with_cluster_authorized_operations(0x0ff);
            if v >= 1 {
                r = r.with_endpoint_type(1);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::OffsetCommit => {
            let p = OffsetCommitResponsePartition::default()
                .with_partition_index(1)
                .with_error_code(27);
            let mut tp = OffsetCommitResponseTopic::default().with_partitions(vec![p]);
            tp = if v >= 10 {
                tp.with_topic_id(uuid(5))
            } else {
                tp.with_name(topic("orders"))
            };
            let mut r = OffsetCommitResponse::default().with_topics(vec![tp]);
            if v >= 3 {
                r = r.with_throttle_time_ms(7);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::OffsetFetch => offset_fetch_response(v)
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::JoinGroup => {
            let mut m = JoinGroupResponseMember::default()
                .with_member_id(s("member-1"))
                .with_metadata(Bytes::from_static(b"subscription"));
            if v >= 5 {
                m = m.with_group_instance_id(Some(s("instance-1")));
            }
            let mut r = JoinGroupResponse::default()
                .with_generation_id(4)
                .with_protocol_name(Some(s("range")))
                .with_leader(s("member-1"))
                .with_member_id(s("member-1"))
                .with_members(vec![m]);
            if v >= 2 {
                r = r.with_throttle_time_ms(7);
            }
            if v >= 7 {
                r = r.with_protocol_type(Some(s("consumer")));
            }
            if v >= 9 {
                r = r.with_skip_assignment(true);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::SyncGroup => {
            let mut r =
                SyncGroupResponse::default().with_assignment(Bytes::from_static(b"assignment"));
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            if v >= 5 {
                r = r
                    .with_protocol_type(Some(s("consumer")))
                    .with_protocol_name(Some(s("range")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::Heartbeat => {
            let mut r = HeartbeatResponse::default().with_error_code(27);
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::LeaveGroup => {
            let mut r = LeaveGroupResponse::default().with_error_code(0);
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            if v >= 3 {
                r = r.with_members(vec![
                    MemberResponse::default()
                        .with_member_id(s("member-1"))
                        .with_group_instance_id(Some(s("instance-1")))
                        .with_error_code(25),
                ]);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeGroups => {
            let mut m = DescribedGroupMember::default()
                .with_member_id(s("member-1"))
                .with_client_id(s("client-1"))
                .with_client_host(s("/10.0.0.1"))
                .with_member_metadata(Bytes::from_static(b"meta"))
                .with_member_assignment(Bytes::from_static(b"assign"));
            if v >= 4 {
                m = m.with_group_instance_id(Some(s("instance-1")));
            }
            let mut g = DescribedGroup::default()
                .with_group_id(group())
                .with_group_state(s("Stable"))
                .with_protocol_type(s("consumer"))
                .with_protocol_data(s("range"))
                .with_members(vec![m]);
            if v >= 3 {
                g = g.with_authorized_operations(0x0f);
            }
            if v >= 6 {
                g = g.with_error_message(Some(s("none")));
            }
            let mut r = DescribeGroupsResponse::default().with_groups(vec![g]);
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::ListGroups => {
            let mut g = ListedGroup::default()
                .with_group_id(group())
                .with_protocol_type(s("consumer"));
            if v >= 4 {
                g = g.with_group_state(s("Stable"));
            }
            if v >= 5 {
                g = g.with_group_type(s("classic"));
            }
            let mut r = ListGroupsResponse::default().with_groups(vec![g]);
            if v >= 1 {
                r = r.with_throttle_time_ms(7);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::SaslHandshake => SaslHandshakeResponse::default()
            .with_mechanisms(vec![s("SCRAM-SHA-256"), s("SCRAM-SHA-512")])
            .into(),
        ApiKey::SaslAuthenticate => {
            let mut r = SaslAuthenticateResponse::default()
                .with_error_message(Some(s("ok")))
                .with_auth_bytes(Bytes::from_static(b"r=nonce,s=salt,i=4096"));
            if v >= 1 {
                r = r.with_session_lifetime_ms(25_000);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::CreateTopics => {
            let mut res = CreatableTopicResult::default()
                .with_name(topic("orders"))
                .with_error_code(36)
                .with_error_message(Some(s("exists")));
            if v >= 5 {
                res = res
                    .with_topic_config_error_code(0)
                    .with_num_partitions(3)
                    .with_replication_factor(2)
                    .with_configs(Some(vec![
                        CreatableTopicConfigs::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("1000")))
                            .with_config_source(5),
                    ]));
            }
            if v >= 7 {
                res = res.with_topic_id(uuid(8));
            }
            CreateTopicsResponse::default()
                .with_throttle_time_ms(7)
                .with_topics(vec![res])
                .with_unknown_tagged_fields(t)
                .into()
        }
        ApiKey::DeleteTopics => {
            let mut res = DeletableTopicResult::default()
                .with_name(Some(topic("orders")))
                .with_error_code(3);
            if v >= 5 {
                res = res.with_error_message(Some(s("unknown")));
            }
            if v >= 6 {
                res = res.with_topic_id(uuid(3));
            }
            DeleteTopicsResponse::default()
                .with_throttle_time_ms(7)
                .with_responses(vec![res])
                .with_unknown_tagged_fields(t)
                .into()
        }
        ApiKey::InitProducerId => {
            let mut r = InitProducerIdResponse::default()
                .with_throttle_time_ms(7)
                .with_producer_id(ProducerId(77))
                .with_producer_epoch(4);
            if v >= 6 {
                r = r
                    .with_ongoing_txn_producer_id(ProducerId(76))
                    .with_ongoing_txn_producer_epoch(3);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::AddPartitionsToTxn => {
            let tr = AddPartitionsToTxnTopicResult::default()
                .with_name(topic("orders"))
                .with_results_by_partition(vec![
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(5)
                        .with_partition_error_code(48),
                ]);
            let mut r = AddPartitionsToTxnResponse::default().with_throttle_time_ms(7);
            r = if v >= 4 {
                r.with_error_code(0).with_results_by_transaction(vec![
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(txn())
                        .with_topic_results(vec![tr]),
                ])
            } else {
                r.with_results_by_topic_v3_and_below(vec![tr])
            };
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::EndTxn => {
            let mut r = EndTxnResponse::default()
                .with_throttle_time_ms(7)
                .with_error_code(48);
            if v >= 5 {
                r = r.with_producer_id(ProducerId(77)).with_producer_epoch(5);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::CreateDelegationToken => {
            let mut r = CreateDelegationTokenResponse::default()
                .with_principal_type(s("User"))
                .with_principal_name(s("alice"))
                .with_issue_timestamp_ms(1_000)
                .with_expiry_timestamp_ms(2_000)
                .with_max_timestamp_ms(3_000)
                .with_token_id(s("token-id"))
                .with_hmac(Bytes::from_static(b"hmac-bytes"))
                .with_throttle_time_ms(7);
            if v >= 3 {
                r = r
                    .with_token_requester_principal_type(s("User"))
                    .with_token_requester_principal_name(s("sluice-admin"));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeDelegationToken => {
            let mut tok = DescribedDelegationToken::default()
                .with_principal_type(s("User"))
                .with_principal_name(s("alice"))
                .with_issue_timestamp(1_000)
                .with_expiry_timestamp(2_000)
                .with_max_timestamp(3_000)
                .with_token_id(s("token-id"))
                .with_hmac(Bytes::from_static(b"hmac-bytes"))
                .with_renewers(vec![
                    DescribedDelegationTokenRenewer::default()
                        .with_principal_type(s("User"))
                        .with_principal_name(s("renewer")),
                ]);
            if v >= 3 {
                tok = tok
                    .with_token_requester_principal_type(s("User"))
                    .with_token_requester_principal_name(s("sluice-admin"));
            }
            DescribeDelegationTokenResponse::default()
                .with_tokens(vec![tok])
                .with_throttle_time_ms(7)
                .with_unknown_tagged_fields(t)
                .into()
        }
        ApiKey::ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse::default()
            .with_throttle_time_ms(7)
            .with_error_message(Some(s("none")))
            .with_member_id(Some(s("member-uuid")))
            .with_member_epoch(13)
            .with_heartbeat_interval_ms(5_000)
            .with_assignment(Some(
                consumer_group_heartbeat_response::Assignment::default().with_topic_partitions(
                    vec![
                        consumer_group_heartbeat_response::TopicPartitions::default()
                            .with_topic_id(uuid(9))
                            .with_partitions(vec![0, 3]),
                    ],
                ),
            ))
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::DescribeConfigs => {
            let mut c = DescribeConfigsResourceResult::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("1000")))
                .with_config_source(5)
                .with_synonyms(vec![
                    DescribeConfigsSynonym::default()
                        .with_name(s("log.retention.ms"))
                        .with_value(Some(s("1000")))
                        .with_source(4),
                ]);
            if v >= 3 {
                c = c.with_config_type(5).with_documentation(Some(s("docs")));
            }
            DescribeConfigsResponse::default()
                .with_throttle_time_ms(7)
                .with_results(vec![
                    DescribeConfigsResult::default()
                        .with_resource_type(2)
                        .with_resource_name(s("orders"))
                        .with_configs(vec![c]),
                ])
                .with_unknown_tagged_fields(t)
                .into()
        }
        other => panic!("no sample response for {other:?}"),
    }
}

fn api_versions_response(v: i16) -> ApiVersionsResponse {
    let keys = vec![
        ApiVersion::default()
            .with_api_key(ApiKey::Produce as i16)
            .with_min_version(3)
            .with_max_version(13),
        ApiVersion::default()
            .with_api_key(ApiKey::Fetch as i16)
            .with_min_version(4)
            .with_max_version(17),
    ];
    let mut r = ApiVersionsResponse::default().with_api_keys(keys);
    if v >= 1 {
        r = r.with_throttle_time_ms(7);
    }
    if v >= 3 {
        r = r
            .with_supported_features(vec![
                SupportedFeatureKey::default()
                    .with_name(s("metadata.version"))
                    .with_min_version(1)
                    .with_max_version(27),
            ])
            .with_finalized_features_epoch(12)
            .with_finalized_features(vec![
                FinalizedFeatureKey::default()
                    .with_name(s("metadata.version"))
                    .with_min_version_level(27)
                    .with_max_version_level(27),
            ])
            .with_zk_migration_ready(true);
    }
    r
}

fn metadata_response(v: i16) -> MetadataResponse {
    let mut broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(1))
        .with_host(s("broker-1.internal"))
        .with_port(9092);
    if v >= 1 {
        broker = broker.with_rack(Some(s("rack-a")));
    }
    let mut part = MetadataResponsePartition::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(1))
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
        .with_isr_nodes(vec![BrokerId(1)]);
    if v >= 5 {
        part = part.with_offline_replicas(vec![BrokerId(2)]);
    }
    if v >= 7 {
        part = part.with_leader_epoch(11);
    }
    let mut tp = MetadataResponseTopic::default()
        .with_name(Some(topic("orders")))
        .with_partitions(vec![part]);
    if v >= 1 {
        tp = tp.with_is_internal(false);
    }
    if v >= 8 {
        tp = tp.with_topic_authorized_operations(0x0ff);
    }
    if v >= 10 {
        tp = tp.with_topic_id(uuid(7));
    }
    let mut r = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_topics(vec![tp]);
    if v >= 1 {
        r = r.with_controller_id(BrokerId(1));
    }
    if v >= 2 {
        r = r.with_cluster_id(Some(s("cluster-x")));
    }
    if v >= 3 {
        r = r.with_throttle_time_ms(7);
    }
    if (8..=10).contains(&v) {
        r = r.with_cluster_authorized_operations(0x0ff);
    }
    r
}

fn produce_response(v: i16) -> ProduceResponse {
    let mut p = PartitionProduceResponse::default()
        .with_index(3)
        .with_error_code(0)
        .with_base_offset(1234)
        .with_log_append_time_ms(-1);
    if v >= 5 {
        p = p.with_log_start_offset(10);
    }
    if v >= 8 {
        p = p
            .with_record_errors(vec![
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(1)
                    .with_batch_index_error_message(Some(s("bad record"))),
            ])
            .with_error_message(Some(s("partial")));
    }
    if v >= 10 {
        p = p.with_current_leader(
            produce_response::LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(2))
                .with_leader_epoch(9),
        );
    }
    let mut tp = TopicProduceResponse::default().with_partition_responses(vec![p]);
    tp = if v >= 13 {
        tp.with_topic_id(uuid(1))
    } else {
        tp.with_name(topic("orders"))
    };
    let mut r = ProduceResponse::default()
        .with_responses(vec![tp])
        .with_throttle_time_ms(7);
    if v >= 10 {
        r = r.with_node_endpoints(vec![
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(s("broker-2.internal"))
                .with_port(9092)
                .with_rack(Some(s("rack-b"))),
        ]);
    }
    r
}

fn fetch_response(v: i16) -> FetchResponse {
    let mut p = PartitionData::default()
        .with_partition_index(4)
        .with_high_watermark(2000)
        .with_last_stable_offset(1990)
        .with_aborted_transactions(Some(vec![
            AbortedTransaction::default()
                .with_producer_id(ProducerId(77))
                .with_first_offset(1500),
        ]))
        .with_records(Some(records()));
    if v >= 5 {
        p = p.with_log_start_offset(10);
    }
    if v >= 11 {
        p = p.with_preferred_read_replica(BrokerId(3));
    }
    if v >= 12 {
        p = p
            .with_diverging_epoch(
                EpochEndOffset::default()
                    .with_epoch(2)
                    .with_end_offset(1800),
            )
            .with_current_leader(
                fetch_response::LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(2))
                    .with_leader_epoch(9),
            )
            .with_snapshot_id(SnapshotId::default().with_end_offset(100).with_epoch(1));
    }
    let mut tp = FetchableTopicResponse::default().with_partitions(vec![p]);
    tp = if v >= 13 {
        tp.with_topic_id(uuid(2))
    } else {
        tp.with_topic(topic("orders"))
    };
    let mut r = FetchResponse::default()
        .with_throttle_time_ms(7)
        .with_responses(vec![tp]);
    if v >= 7 {
        r = r.with_error_code(0).with_session_id(55);
    }
    if v >= 16 {
        r = r.with_node_endpoints(vec![
            fetch_response::NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(s("broker-2.internal"))
                .with_port(9092),
        ]);
    }
    r
}

fn offset_fetch_response(v: i16) -> OffsetFetchResponse {
    let mut r = OffsetFetchResponse::default();
    if v >= 3 {
        r = r.with_throttle_time_ms(7);
    }
    if v >= 8 {
        let mut tp = OffsetFetchResponseTopics::default().with_partitions(vec![
            OffsetFetchResponsePartitions::default()
                .with_partition_index(0)
                .with_committed_offset(4242)
                .with_committed_leader_epoch(3)
                .with_metadata(Some(s("meta"))),
        ]);
        tp = if v >= 10 {
            tp.with_topic_id(uuid(6))
        } else {
            tp.with_name(topic("orders"))
        };
        return r.with_groups(vec![
            OffsetFetchResponseGroup::default()
                .with_group_id(group())
                .with_topics(vec![tp]),
        ]);
    }
    let mut p = OffsetFetchResponsePartition::default()
        .with_partition_index(0)
        .with_committed_offset(4242)
        .with_metadata(Some(s("meta")));
    if v >= 5 {
        p = p.with_committed_leader_epoch(3);
    }
    r = r.with_topics(vec![
        OffsetFetchResponseTopic::default()
            .with_name(topic("orders"))
            .with_partitions(vec![p]),
    ]);
    if v >= 2 {
        r = r.with_error_code(0);
    }
    r
}
