//! Sample bodies for every request and response kind Sluice decodes.
//!
//! Each builder takes the version it will be encoded at and sets only fields
//! that version carries, with non-default values (names, ids, nested arrays,
//! and an unknown tagged field on flexible versions), so that a round trip
//! that loses or shifts anything shows up as a difference.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use uuid::Uuid;

use kafka_protocol::messages::{
    add_partitions_to_txn_request::*, create_delegation_token_request::*, create_topics_request::*,
    delete_topics_request::*, describe_configs_request::*, describe_delegation_token_request::*,
    fetch_request::*, join_group_request::*, leave_group_request::*, list_offsets_request::*,
    metadata_request::*, offset_commit_request::*, offset_fetch_request::*, produce_request::*,
    sync_group_request::*,
};

mod responses;

pub(crate) use responses::response;

/// Every API the round-trip tests cover.
pub(crate) const KINDS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::FindCoordinator,
    ApiKey::DescribeCluster,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::EndTxn,
    ApiKey::CreateDelegationToken,
    ApiKey::DescribeDelegationToken,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::DescribeConfigs,
];

/// The versions each kind is tested at: min, first flexible, max (of what
/// Sluice decodes, which is `ApiKey::valid_versions()` except where
/// kafka-protocol overstates it; see `sluice_codec::versions`).
pub(crate) fn versions(api: ApiKey) -> Vec<i16> {
    let range = sluice_codec::versions::decoded(api).unwrap();
    let mut out = vec![range.min];
    if let Some(flex) = range.first_flexible {
        out.push(flex);
    }
    out.push(range.max);
    out.dedup();
    out
}

pub(crate) fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn topic(name: &'static str) -> TopicName {
    TopicName(s(name))
}

fn group() -> GroupId {
    GroupId(s("sluice-group"))
}

fn txn() -> TransactionalId {
    TransactionalId(s("sluice-txn"))
}

fn uuid(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn flexible(api: ApiKey, v: i16) -> bool {
    api.request_header_version(v) >= 2
}

/// An unknown tagged field on flexible versions, none otherwise.
fn tags(api: ApiKey, v: i16) -> BTreeMap<i32, Bytes> {
    let mut out = BTreeMap::new();
    if flexible(api, v) {
        out.insert(4242, Bytes::from_static(b"sluice-tag"));
    }
    out
}

/// A small uncompressed-looking record blob; the codec never looks inside.
pub(crate) fn records() -> Bytes {
    Bytes::from_static(b"\x00\x01record-batch-bytes\xff")
}

pub(crate) fn request(api: ApiKey, v: i16) -> RequestKind {
    let t = tags(api, v);
    match api {
        ApiKey::ApiVersions => {
            let mut r = ApiVersionsRequest::default();
            if v >= 3 {
                r = r
                    .with_client_software_name(s("sluice-test"))
                    .with_client_software_version(s("1.2.3"));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::Metadata => {
            let mut tp = MetadataRequestTopic::default().with_name(Some(topic("orders")));
            if v >= 10 {
                tp = tp.with_topic_id(uuid(7));
            }
            let mut r = MetadataRequest::default().with_topics(Some(vec![tp]));
            if v >= 4 {
                r = r.with_allow_auto_topic_creation(false);
            }
            if v >= 8 {
                r = r.with_include_topic_authorized_operations(true);
            }
            if (8..=10).contains(&v) {
                r = r.with_include_cluster_authorized_operations(true);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::Produce => produce_request(v, 1, Some("sluice-txn")).into(),
        ApiKey::Fetch => fetch_request(v).with_unknown_tagged_fields(t).into(),
        ApiKey::ListOffsets => {
            let mut p = ListOffsetsPartition::default()
                .with_partition_index(2)
                .with_timestamp(-1);
            if v >= 4 {
                p = p.with_current_leader_epoch(5);
            }
            let tp = ListOffsetsTopic::default()
                .with_name(topic("orders"))
                .with_partitions(vec![p]);
            let mut r = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![tp]);
            if v >= 2 {
                r = r.with_isolation_level(1);
            }
            if v >= 10 {
                r = r.with_timeout_ms(1500);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::FindCoordinator => {
            let mut r = FindCoordinatorRequest::default();
            r = if v >= 4 {
                r.with_coordinator_keys(vec![s("sluice-group"), s("other-group")])
            } else {
                r.with_key(s("sluice-group"))
            };
            if v >= 1 {
                r = r.with_key_type(0);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeCluster => {
            let mut r =
                DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
            if v >= 1 {
                r = r.with_endpoint_type(1);
            }
            if v >= 2 {
                r = r.with_include_fenced_brokers(true);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::OffsetCommit => offset_commit_request(v)
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::OffsetFetch => offset_fetch_request(v).with_unknown_tagged_fields(t).into(),
        ApiKey::JoinGroup => {
            let proto = JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"subscription"));
            let mut r = JoinGroupRequest::default()
                .with_group_id(group())
                .with_session_timeout_ms(45_000)
                .with_member_id(s("member-1"))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![proto]);
            if v >= 1 {
                r = r.with_rebalance_timeout_ms(300_000);
            }
            if v >= 5 {
                r = r.with_group_instance_id(Some(s("instance-1")));
            }
            if v >= 8 {
                r = r.with_reason(Some(s("rejoin")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::SyncGroup => {
            let a = SyncGroupRequestAssignment::default()
                .with_member_id(s("member-1"))
                .with_assignment(Bytes::from_static(b"assignment"));
            let mut r = SyncGroupRequest::default()
                .with_group_id(group())
                .with_generation_id(3)
                .with_member_id(s("member-1"))
                .with_assignments(vec![a]);
            if v >= 3 {
                r = r.with_group_instance_id(Some(s("instance-1")));
            }
            if v >= 5 {
                r = r
                    .with_protocol_type(Some(s("consumer")))
                    .with_protocol_name(Some(s("range")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::Heartbeat => {
            let mut r = HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(9)
                .with_member_id(s("member-1"));
            if v >= 3 {
                r = r.with_group_instance_id(Some(s("instance-1")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::LeaveGroup => {
            let mut r = LeaveGroupRequest::default().with_group_id(group());
            if v >= 3 {
                let mut m = MemberIdentity::default()
                    .with_member_id(s("member-1"))
                    .with_group_instance_id(Some(s("instance-1")));
                if v >= 5 {
                    m = m.with_reason(Some(s("shutdown")));
                }
                r = r.with_members(vec![m]);
            } else {
                r = r.with_member_id(s("member-1"));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeGroups => {
            let mut r =
                DescribeGroupsRequest::default().with_groups(vec![group(), GroupId(s("g2"))]);
            if v >= 3 {
                r = r.with_include_authorized_operations(true);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::ListGroups => {
            let mut r = ListGroupsRequest::default();
            if v >= 4 {
                r = r.with_states_filter(vec![s("Stable")]);
            }
            if v >= 5 {
                r = r.with_types_filter(vec![s("consumer")]);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::SaslHandshake => SaslHandshakeRequest::default()
            .with_mechanism(s("SCRAM-SHA-512"))
            .into(),
        ApiKey::SaslAuthenticate => SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from_static(b"n,,n=user,r=nonce"))
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::CreateTopics => {
            let topic = CreatableTopic::default()
                .with_name(topic("orders"))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![
                    CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![BrokerId(1), BrokerId(2)]),
                ])
                .with_configs(vec![
                    CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("1000"))),
                ]);
            CreateTopicsRequest::default()
                .with_topics(vec![topic])
                .with_timeout_ms(30_000)
                .with_validate_only(true)
                .with_unknown_tagged_fields(t)
                .into()
        }
        ApiKey::DeleteTopics => {
            let mut r = DeleteTopicsRequest::default().with_timeout_ms(30_000);
            r = if v >= 6 {
                r.with_topics(vec![
                    DeleteTopicState::default()
                        .with_name(Some(topic("orders")))
                        .with_topic_id(uuid(3)),
                ])
            } else {
                r.with_topic_names(vec![topic("orders"), topic("payments")])
            };
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::InitProducerId => {
            let mut r = InitProducerIdRequest::default()
                .with_transactional_id(Some(txn()))
                .with_transaction_timeout_ms(60_000);
            if v >= 3 {
                r = r.with_producer_id(ProducerId(77)).with_producer_epoch(4);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::AddPartitionsToTxn => {
            let tp = AddPartitionsToTxnTopic::default()
                .with_name(topic("orders"))
                .with_partitions(vec![0, 1, 5]);
            let r = if v >= 4 {
                AddPartitionsToTxnRequest::default().with_transactions(vec![
                    AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(txn())
                        .with_producer_id(ProducerId(77))
                        .with_producer_epoch(4)
                        .with_verify_only(true)
                        .with_topics(vec![tp]),
                ])
            } else {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn())
                    .with_v3_and_below_producer_id(ProducerId(77))
                    .with_v3_and_below_producer_epoch(4)
                    .with_v3_and_below_topics(vec![tp])
            };
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::EndTxn => EndTxnRequest::default()
            .with_transactional_id(txn())
            .with_producer_id(ProducerId(77))
            .with_producer_epoch(4)
            .with_committed(true)
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::CreateDelegationToken => {
            let mut r = CreateDelegationTokenRequest::default()
                .with_renewers(vec![
                    CreatableRenewers::default()
                        .with_principal_type(s("User"))
                        .with_principal_name(s("renewer")),
                ])
                .with_max_lifetime_ms(3_600_000);
            if v >= 3 {
                r = r
                    .with_owner_principal_type(Some(s("User")))
                    .with_owner_principal_name(Some(s("alice")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeDelegationToken => DescribeDelegationTokenRequest::default()
            .with_owners(Some(vec![
                DescribeDelegationTokenOwner::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("alice")),
            ]))
            .with_unknown_tagged_fields(t)
            .into(),
        ApiKey::ConsumerGroupHeartbeat => {
            let mut r = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group())
                .with_member_id(s("member-uuid"))
                .with_member_epoch(12)
                .with_instance_id(Some(s("instance-1")))
                .with_rack_id(Some(s("rack-a")))
                .with_rebalance_timeout_ms(60_000)
                .with_subscribed_topic_names(Some(vec![topic("orders")]))
                .with_server_assignor(Some(s("uniform")))
                .with_topic_partitions(Some(vec![
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_topic_id(uuid(9))
                        .with_partitions(vec![0, 3]),
                ]));
            if v >= 1 {
                r = r.with_subscribed_topic_regex(Some(s("ord.*")));
            }
            r.with_unknown_tagged_fields(t).into()
        }
        ApiKey::DescribeConfigs => {
            let mut r = DescribeConfigsRequest::default()
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("orders"))
                        .with_configuration_keys(Some(vec![s("retention.ms")])),
                ])
                .with_include_synonyms(true);
            if v >= 3 {
                r = r.with_include_documentation(true);
            }
            r.with_unknown_tagged_fields(t).into()
        }
        other => panic!("no sample request for {other:?}"),
    }
}

/// A Produce request with one topic, one partition and a record blob.
pub(crate) fn produce_request(v: i16, acks: i16, txn_id: Option<&'static str>) -> ProduceRequest {
    let part = PartitionProduceData::default()
        .with_index(3)
        .with_records(Some(records()));
    let mut tp = TopicProduceData::default().with_partition_data(vec![part]);
    tp = if v >= 13 {
        tp.with_topic_id(uuid(1))
    } else {
        tp.with_name(topic("orders"))
    };
    ProduceRequest::default()
        .with_transactional_id(txn_id.map(|id| TransactionalId(s(id))))
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![tp])
        .with_unknown_tagged_fields(tags(ApiKey::Produce, v))
}

pub(crate) fn fetch_request(v: i16) -> FetchRequest {
    let mut p = FetchPartition::default()
        .with_partition(4)
        .with_fetch_offset(1000)
        .with_partition_max_bytes(1 << 20);
    if v >= 5 {
        p = p.with_log_start_offset(10);
    }
    if v >= 9 {
        p = p.with_current_leader_epoch(2);
    }
    if v >= 12 {
        p = p.with_last_fetched_epoch(1);
    }
    let mut tp = FetchTopic::default().with_partitions(vec![p]);
    tp = if v >= 13 {
        tp.with_topic_id(uuid(2))
    } else {
        tp.with_topic(topic("orders"))
    };
    let mut r = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_isolation_level(1)
        .with_topics(vec![tp]);
    if v <= 14 {
        r = r.with_replica_id(BrokerId(-1));
    }
    if v >= 7 {
        let mut f = ForgottenTopic::default().with_partitions(vec![7]);
        f = if v >= 13 {
            f.with_topic_id(uuid(4))
        } else {
            f.with_topic(topic("old"))
        };
        r = r
            .with_session_id(55)
            .with_session_epoch(6)
            .with_forgotten_topics_data(vec![f]);
    }
    if v >= 11 {
        r = r.with_rack_id(s("rack-a"));
    }
    if v >= 12 {
        r = r.with_cluster_id(Some(s("cluster-x")));
    }
    if v >= 15 {
        r = r.with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(-1))
                .with_replica_epoch(-1),
        );
    }
    r
}

fn offset_commit_request(v: i16) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default()
        .with_partition_index(1)
        .with_committed_offset(4242)
        .with_committed_metadata(Some(s("meta")));
    if v >= 6 {
        p = p.with_committed_leader_epoch(3);
    }
    let mut tp = OffsetCommitRequestTopic::default().with_partitions(vec![p]);
    tp = if v >= 10 {
        tp.with_topic_id(uuid(5))
    } else {
        tp.with_name(topic("orders"))
    };
    let mut r = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(8)
        .with_member_id(s("member-1"))
        .with_topics(vec![tp]);
    if v >= 7 {
        r = r.with_group_instance_id(Some(s("instance-1")));
    }
    if v <= 4 {
        r = r.with_retention_time_ms(86_400_000);
    }
    r
}

fn offset_fetch_request(v: i16) -> OffsetFetchRequest {
    if v >= 8 {
        let mut tp = OffsetFetchRequestTopics::default().with_partition_indexes(vec![0, 2]);
        tp = if v >= 10 {
            tp.with_topic_id(uuid(6))
        } else {
            tp.with_name(topic("orders"))
        };
        let mut g = OffsetFetchRequestGroup::default()
            .with_group_id(group())
            .with_topics(Some(vec![tp]));
        if v >= 9 {
            g = g.with_member_id(Some(s("member-1"))).with_member_epoch(5);
        }
        return OffsetFetchRequest::default()
            .with_groups(vec![g])
            .with_require_stable(true);
    }
    let tp = OffsetFetchRequestTopic::default()
        .with_name(topic("orders"))
        .with_partition_indexes(vec![0, 2]);
    let mut r = OffsetFetchRequest::default()
        .with_group_id(group())
        .with_topics(Some(vec![tp]));
    if v >= 7 {
        r = r.with_require_stable(true);
    }
    r
}
