//! Tests of the routing decisions: families, failure policies, synthesized
//! answers (every one must encode at every version a client may use), keys,
//! staleness, the Fetch header walk and the internal request versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::create_topics_request::CreatableTopic;
use sluice_codec::kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use sluice_codec::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Response, ResponseKind};

use super::*;
use crate::topology::{TopicId, fixtures};

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

fn group(s: &'static str) -> GroupId {
    GroupId(StrBytes::from_static_str(s))
}

/// Encodes `body` as the answer to `api`/`version` and decodes it back.
fn round_trip(api: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
    let mut buf = BytesMut::new();
    Response::from_body(api, version, 1, body)
        .encode(&mut buf)
        .unwrap_or_else(|e| panic!("{api:?} v{version} does not encode: {e}"));
    let frame = buf.split_off(4);
    Response::parse(frame, api, version)
        .unwrap()
        .into_body()
        .unwrap_or_else(|e| panic!("{api:?} v{version} does not decode: {e}"))
}

/// Every version of `api` a client could send through Sluice.
fn client_versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let range = offered_versions(api).unwrap_or_else(|| api.valid_versions());
    range.min..=range.max
}

#[test]
fn families() {
    use ApiKey as K;
    let cases = [
        (K::ApiVersions, Family::Meta(Meta::ApiVersions)),
        (K::Metadata, Family::Meta(Meta::Metadata)),
        (K::FindCoordinator, Family::Meta(Meta::FindCoordinator)),
        (K::DescribeCluster, Family::Meta(Meta::DescribeCluster)),
        (K::Produce, Family::ByLeader),
        (K::Fetch, Family::ByLeader),
        (K::ListOffsets, Family::ByLeader),
        (K::OffsetForLeaderEpoch, Family::ByLeader),
        (K::DeleteRecords, Family::ByLeader),
        (K::DescribeProducers, Family::ByLeader),
        (K::OffsetFetch, Family::ByCoordinator),
        (K::DescribeGroups, Family::ByCoordinator),
        (K::DeleteGroups, Family::ByCoordinator),
        (K::JoinGroup, Family::Coordinator(CoordinatorKeyType::Group)),
        (
            K::TxnOffsetCommit,
            Family::Coordinator(CoordinatorKeyType::Group),
        ),
        (
            K::ConsumerGroupHeartbeat,
            Family::Coordinator(CoordinatorKeyType::Group),
        ),
        (
            K::EndTxn,
            Family::Coordinator(CoordinatorKeyType::Transaction),
        ),
        (
            K::InitProducerId,
            Family::Coordinator(CoordinatorKeyType::Transaction),
        ),
        (K::ListGroups, Family::FanOut),
        (K::ListTransactions, Family::FanOut),
        (K::DescribeLogDirs, Family::FanOut),
        (K::SaslHandshake, Family::Sasl),
        (K::SaslAuthenticate, Family::Sasl),
        (K::WriteTxnMarkers, Family::NotForClients),
        (K::Vote, Family::NotForClients),
        (K::DescribeQuorum, Family::NotForClients),
    ];
    for (api, want) in cases {
        assert_eq!(family(api), want, "{api:?}");
    }
    let create = family(K::CreateTopics);
    assert_eq!(
        create,
        Family::Admin(Admin {
            write: true,
            marks_topics_stale: true
        })
    );
    assert_eq!(
        family(K::DescribeConfigs),
        Family::Admin(Admin {
            write: false,
            marks_topics_stale: false
        })
    );
    assert_eq!(
        family(K::IncrementalAlterConfigs),
        Family::Admin(Admin {
            write: true,
            marks_topics_stale: false
        })
    );
    // A read to any broker, retried elsewhere; its answer is rewritten.
    assert_eq!(
        family(K::DescribeTopicPartitions),
        Family::Admin(Admin {
            write: false,
            marks_topics_stale: false
        })
    );
    assert_eq!(
        on_failure(K::DescribeTopicPartitions),
        OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
    );
}

#[test]
fn offered_versions_clamp_to_what_sluice_decodes() {
    let produce = offered_versions(ApiKey::Produce).unwrap();
    assert_eq!((produce.min, produce.max), (3, 13));
    let commit = offered_versions(ApiKey::OffsetCommit).unwrap();
    assert_eq!(commit.max, 9, "kafka-protocol overstates OffsetCommit");
    // Admin APIs forwarded undecoded keep the codec's range.
    let partitions = offered_versions(ApiKey::CreatePartitions).unwrap();
    assert_eq!(partitions, ApiKey::CreatePartitions.valid_versions());
    assert!(offered_versions(ApiKey::IncrementalAlterConfigs).is_some());
    // Routed by their bodies, though not in the codec's DECODED table: every
    // version both sides decode, so that admin tools can use them.
    for api in [
        ApiKey::DescribeProducers,
        ApiKey::DeleteGroups,
        ApiKey::OffsetDelete,
        ApiKey::DescribeTransactions,
        ApiKey::ListTransactions,
        ApiKey::DescribeLogDirs,
    ] {
        let (min, max) = sluice_codec::guard::decodable_versions(api).unwrap();
        let range = offered_versions(api).unwrap_or_else(|| panic!("{api:?} not offered"));
        assert_eq!((range.min, range.max), (min, max), "{api:?}");
    }
    // Admin APIs whose bodies Sluice decodes (to rewrite answers, or to
    // route broker config resources): the codec's range is what both sides
    // decode.
    for api in [
        ApiKey::DescribeTopicPartitions,
        ApiKey::AlterConfigs,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::DescribeConfigs,
    ] {
        let (min, max) = sluice_codec::guard::decodable_versions(api).unwrap();
        let range = offered_versions(api).unwrap_or_else(|| panic!("{api:?} not offered"));
        assert_eq!((range.min, range.max), (min, max), "{api:?}");
    }
    // Not routable (share groups) or not for clients.
    for api in [
        ApiKey::ShareFetch,
        ApiKey::ShareGroupHeartbeat,
        ApiKey::WriteTxnMarkers,
        ApiKey::DescribeQuorum,
    ] {
        assert_eq!(offered_versions(api), None, "{api:?}");
    }
}

#[test]
fn failure_policies() {
    use ApiKey as K;
    assert_eq!(on_failure(K::Produce), OnFailure::SplitError(6));
    assert_eq!(on_failure(K::Fetch), OnFailure::SplitError(6));
    assert_eq!(on_failure(K::OffsetFetch), OnFailure::SplitError(16));
    assert_eq!(on_failure(K::JoinGroup), OnFailure::Synthesize(16));
    assert_eq!(on_failure(K::EndTxn), OnFailure::Synthesize(16));
    assert_eq!(on_failure(K::Metadata), OnFailure::RetryElsewhere(7));
    assert_eq!(on_failure(K::ApiVersions), OnFailure::RetryElsewhere(7));
    assert_eq!(
        on_failure(K::FindCoordinator),
        OnFailure::RetryElsewhere(15)
    );
    assert_eq!(on_failure(K::DescribeConfigs), OnFailure::RetryElsewhere(7));
    assert_eq!(on_failure(K::CreateTopics), OnFailure::Synthesize(7));
    assert_eq!(on_failure(K::DeleteAcls), OnFailure::Synthesize(7));
    assert_eq!(on_failure(K::SaslAuthenticate), OnFailure::Close);
}

/// `(api, default request)` for each listed api.
macro_rules! defaults {
    ($($api:ident),* $(,)?) => {
        vec![$((ApiKey::$api, RequestKind::$api(Default::default()))),*]
    };
}

/// A default request of every API Sluice may have to answer itself.
fn default_requests() -> Vec<(ApiKey, RequestKind)> {
    defaults![
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetDelete,
        TxnOffsetCommit,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        OffsetFetch,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        DescribeTransactions,
        FindCoordinator,
        DescribeCluster,
        ApiVersions,
        Metadata,
        CreateTopics,
        DeleteTopics,
        CreatePartitions,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        DescribeTopicPartitions,
        CreateAcls,
        DeleteAcls,
        DescribeAcls,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DescribeUserScramCredentials,
        DescribeClientQuotas,
        Produce,
        Fetch,
        ListOffsets,
        OffsetForLeaderEpoch,
        DeleteRecords,
        DescribeProducers,
        DescribeGroups,
        DeleteGroups,
        ListGroups,
        ListTransactions,
        DescribeLogDirs,
    ]
}

#[test]
fn every_synthesized_error_encodes_at_every_client_version() {
    for (api, request) in default_requests() {
        let code = match on_failure(api) {
            OnFailure::Synthesize(c) | OnFailure::RetryElsewhere(c) | OnFailure::SplitError(c) => c,
            OnFailure::Close => continue,
        };
        for version in client_versions(api) {
            let Some(body) = error_response(api, &request, version, code) else {
                assert!(
                    api == ApiKey::ElectLeaders || api == ApiKey::Metadata,
                    "{api:?} v{version}: no error answer"
                );
                continue;
            };
            round_trip(api, version, body);
        }
    }
}

#[test]
fn errors_land_where_clients_read_them() {
    let commit = OffsetCommitRequest::default()
        .with_group_id(group("g"))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default().with_partition_index(0),
                    OffsetCommitRequestPartition::default().with_partition_index(4),
                ]),
        ]);
    let request = RequestKind::OffsetCommit(commit);
    let body = error_response(ApiKey::OffsetCommit, &request, 8, NOT_COORDINATOR).unwrap();
    let ResponseKind::OffsetCommit(r) = round_trip(ApiKey::OffsetCommit, 8, body) else {
        panic!("not an OffsetCommit answer");
    };
    let codes: Vec<(i32, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(codes, [(0, 16), (4, 16)]);
    assert_eq!(
        groups::response_error_codes(&ResponseKind::OffsetCommit(r)),
        [16, 16]
    );

    let create = RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default().with_name(name("a")),
        CreatableTopic::default().with_name(name("b")),
    ]));
    let body = error_response(ApiKey::CreateTopics, &create, 7, REQUEST_TIMED_OUT).unwrap();
    let ResponseKind::CreateTopics(r) = round_trip(ApiKey::CreateTopics, 7, body) else {
        panic!("not a CreateTopics answer");
    };
    assert!(r.topics.iter().all(|t| t.error_code == REQUEST_TIMED_OUT));
    assert_eq!(r.topics.len(), 2);

    let heartbeat = RequestKind::Heartbeat(HeartbeatRequest::default());
    let body = error_response(ApiKey::Heartbeat, &heartbeat, 4, NOT_COORDINATOR).unwrap();
    assert_eq!(groups::response_error_codes(&body), [NOT_COORDINATOR]);
    // Metadata before v13 has no place for an error.
    let metadata = RequestKind::Metadata(MetadataRequest::default());
    assert!(error_response(ApiKey::Metadata, &metadata, 12, 7).is_none());
    assert!(error_response(ApiKey::Metadata, &metadata, 13, 7).is_some());
}

#[test]
fn apis_clients_may_not_send_get_an_answer() {
    use ApiKey as K;
    for api in [
        K::WriteTxnMarkers,
        K::Vote,
        K::BeginQuorumEpoch,
        K::EndQuorumEpoch,
        K::AlterPartition,
        K::Envelope,
        K::FetchSnapshot,
        K::BrokerRegistration,
        K::BrokerHeartbeat,
        K::AllocateProducerIds,
        K::ControllerRegistration,
        K::AssignReplicasToDirs,
        K::UpdateRaftVoter,
        K::InitializeShareGroupState,
        K::ReadShareGroupState,
        K::WriteShareGroupState,
        K::DeleteShareGroupState,
        K::ReadShareGroupStateSummary,
        K::DescribeQuorum,
        K::AddRaftVoter,
        K::RemoveRaftVoter,
        K::UnregisterBroker,
    ] {
        assert_eq!(family(api), Family::NotForClients, "{api:?}");
        let range = api.valid_versions();
        for version in range.min..=range.max {
            let body = admin::not_for_clients(api, version)
                .unwrap_or_else(|| panic!("{api:?}: no answer"));
            round_trip(api, version, body);
        }
    }
    let vote = admin::not_for_clients(K::Vote, 0).unwrap();
    let ResponseKind::Vote(v) = vote else {
        panic!("not a Vote answer")
    };
    assert_eq!(v.error_code, UNSUPPORTED_VERSION);
}

#[test]
fn coordinator_keys() {
    let join = RequestKind::JoinGroup(JoinGroupRequest::default().with_group_id(group("g1")));
    assert_eq!(
        groups::coordinator_key(&join),
        Some((CoordinatorKeyType::Group, "g1".to_owned()))
    );
    let txn_commit = RequestKind::TxnOffsetCommit(
        TxnOffsetCommitRequest::default()
            .with_group_id(group("g2"))
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx"))),
    );
    assert_eq!(
        groups::coordinator_key(&txn_commit),
        Some((CoordinatorKeyType::Group, "g2".to_owned())),
        "offsets live with the group"
    );
    let idempotent = RequestKind::InitProducerId(InitProducerIdRequest::default());
    assert_eq!(groups::coordinator_key(&idempotent), None, "any broker");
    let tx = TransactionalId(StrBytes::from_static_str("tx-1"));
    let transactional = RequestKind::InitProducerId(
        InitProducerIdRequest::default().with_transactional_id(Some(tx.clone())),
    );
    assert_eq!(
        groups::coordinator_key(&transactional),
        Some((CoordinatorKeyType::Transaction, "tx-1".to_owned()))
    );
    let add_v3 = RequestKind::AddPartitionsToTxn(
        AddPartitionsToTxnRequest::default().with_v3_and_below_transactional_id(tx.clone()),
    );
    assert_eq!(
        transactions::transaction_key(&add_v3).as_deref(),
        Some("tx-1")
    );
    let add_v4 = RequestKind::AddPartitionsToTxn(
        AddPartitionsToTxnRequest::default().with_transactions(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx-2"))),
        ]),
    );
    assert_eq!(
        transactions::transaction_key(&add_v4).as_deref(),
        Some("tx-2")
    );
    let end = RequestKind::EndTxn(EndTxnRequest::default().with_transactional_id(tx));
    assert_eq!(
        groups::coordinator_key(&end).map(|(t, _)| t),
        Some(CoordinatorKeyType::Transaction)
    );
    let offset_fetch_v7 =
        RequestKind::OffsetFetch(OffsetFetchRequest::default().with_group_id(group("g3")));
    assert_eq!(groups::group_key(&offset_fetch_v7).as_deref(), Some("g3"));
    let describe = RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default());
    assert_eq!(groups::group_key(&describe), None, "no group named");
}

#[test]
fn admin_writes_name_their_stale_topics() {
    let create = RequestKind::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default().with_name(name("new"))]),
    );
    assert_eq!(admin::stale_topics(&create), [TopicRef::Name(name("new"))]);
    let id = uuid::Uuid::from_u128(77);
    let delete = RequestKind::DeleteTopics(
        DeleteTopicsRequest::default()
            .with_topic_names(vec![name("old")])
            .with_topics(vec![DeleteTopicState::default().with_topic_id(id)]),
    );
    assert_eq!(
        admin::stale_topics(&delete),
        [TopicRef::Name(name("old")), TopicRef::Id(TopicId(77))]
    );
    let elect_all =
        RequestKind::ElectLeaders(ElectLeadersRequest::default().with_topic_partitions(None));
    assert!(admin::stale_topics(&elect_all).is_empty());
    let describe = RequestKind::DescribeConfigs(DescribeConfigsRequest::default());
    assert!(admin::stale_topics(&describe).is_empty());
}

#[test]
fn stale_partitions_are_forgotten() {
    let mut view = crate::topology::ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(3));
    let orders = TopicRef::Name(name("orders"));
    assert!(view.leader(&orders, 1).is_some());
    let produce = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(name("orders"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default().with_index(0),
                PartitionProduceResponse::default()
                    .with_index(1)
                    .with_error_code(6),
            ]),
        TopicProduceResponse::default()
            .with_name(name("events"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_error_code(3),
            ]),
    ]);
    assert!(produce_fetch::produce_needs_rewrite(&produce));
    let stale = produce_fetch::stale_partitions(&ResponseKind::Produce(produce), 12);
    assert_eq!(
        stale,
        [
            Stale::Leader(orders.clone(), 1),
            Stale::Topic(TopicRef::Name(name("events")))
        ]
    );
    assert_eq!(forget(&mut view, &stale), 2);
    assert_eq!(view.leader(&orders, 1), None);
    assert!(view.leader(&orders, 0).is_some(), "only the stale one");
    assert!(view.topic(&TopicRef::Name(name("events"))).is_none());
    assert_eq!(partition_staleness(0, &orders, 0), None);
    assert_eq!(
        partition_staleness(16, &orders, 0),
        None,
        "not about partitions"
    );
    assert_eq!(top_level_staleness(41), Some(Stale::Controller));
}

#[test]
fn clean_produce_answers_need_no_rewrite() {
    let produce = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(name("t"))
            .with_partition_responses(vec![PartitionProduceResponse::default().with_index(0)]),
    ]);
    assert!(!produce_fetch::produce_needs_rewrite(&produce));
    let fetch = FetchResponse::default();
    assert!(!produce_fetch::fetch_needs_rewrite(&fetch));
}

#[test]
fn stale_groups_from_split_answers() {
    let describe = DescribeGroupsResponse::default().with_groups(vec![
        describe_groups_response::DescribedGroup::default()
            .with_group_id(group("moved"))
            .with_error_code(16),
        describe_groups_response::DescribedGroup::default().with_group_id(group("fine")),
    ]);
    assert_eq!(
        groups::stale_groups(&ResponseKind::DescribeGroups(describe)),
        [Stale::Coordinator(
            CoordinatorKeyType::Group,
            "moved".into()
        )]
    );
}

/// A Fetch answer with `partitions` in one topic.
fn fetch_answer(partitions: Vec<PartitionData>, endpoints: bool) -> FetchResponse {
    let topic = FetchableTopicResponse::default()
        .with_topic(name("orders"))
        .with_topic_id(uuid::Uuid::from_u128(9))
        .with_partitions(partitions);
    let mut resp = FetchResponse::default().with_responses(vec![topic.clone(), topic]);
    if endpoints {
        resp.node_endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("kafka-2"))
                .with_port(9092),
        ];
    }
    resp
}

fn fetch_body(version: i16, resp: FetchResponse) -> Bytes {
    let mut buf = BytesMut::new();
    Response::from_body(ApiKey::Fetch, version, 1, ResponseKind::Fetch(resp))
        .encode(&mut buf)
        .unwrap();
    let frame = buf.split_off(4).freeze();
    let offset =
        sluice_codec::header::response_body_offset(&frame, ApiKey::Fetch, version).unwrap();
    frame.slice(offset..)
}

#[test]
fn fetch_walk_finds_errors_without_decoding() {
    let records = Bytes::from(vec![7u8; 300]);
    let clean = || {
        PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(10)
            .with_records(Some(records.clone()))
    };
    let range = offered_versions(ApiKey::Fetch).unwrap();
    for version in range.min..=range.max {
        let body = fetch_body(version, fetch_answer(vec![clean(), clean()], false));
        assert!(
            !produce_fetch::fetch_may_need_rewrite(&body, version),
            "v{version}: clean answer"
        );
        let error = clean().with_error_code(6);
        let body = fetch_body(version, fetch_answer(vec![clean(), error], false));
        assert!(
            produce_fetch::fetch_may_need_rewrite(&body, version),
            "v{version}: partition error"
        );
        if version >= 11 {
            let follower = clean().with_preferred_read_replica(BrokerId(3));
            let body = fetch_body(version, fetch_answer(vec![follower], false));
            assert!(
                produce_fetch::fetch_may_need_rewrite(&body, version),
                "v{version}: preferred read replica"
            );
        }
        if version >= 16 {
            let body = fetch_body(version, fetch_answer(vec![clean()], true));
            assert!(
                produce_fetch::fetch_may_need_rewrite(&body, version),
                "v{version}: node endpoints"
            );
        }
        // A body cut short cannot be walked: decode it to find out.
        let body = fetch_body(version, fetch_answer(vec![clean()], false));
        let cut = &body[..body.len() - 10];
        assert!(
            produce_fetch::fetch_may_need_rewrite(cut, version),
            "v{version}: truncated"
        );
    }
}

fn broker_versions(entries: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        entries
            .iter()
            .map(|&(api, min, max)| {
                ApiVersion::default()
                    .with_api_key(api as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

#[test]
fn internal_versions_follow_the_broker() {
    let modern = broker_versions(&[(ApiKey::Metadata, 0, 13), (ApiKey::FindCoordinator, 0, 6)]);
    let v = InternalVersions::choose(Some(&modern));
    assert_eq!((v.metadata, v.find_coordinator), (12, 6));
    let old = broker_versions(&[(ApiKey::Metadata, 0, 9), (ApiKey::FindCoordinator, 0, 3)]);
    let v = InternalVersions::choose(Some(&old));
    assert_eq!((v.metadata, v.find_coordinator), (9, 3));
    let unknown = InternalVersions::choose(None);
    assert_eq!((unknown.metadata, unknown.find_coordinator), (12, 6));
}

#[test]
fn metadata_refresh_requests() {
    let mut view = crate::topology::ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(1));
    let orders_id = view.topic_id(&name("orders")).unwrap();
    let brokers_only = meta::metadata_request(None, 12, &view);
    assert_eq!(brokers_only.topics, Some(Vec::new()));
    assert!(!brokers_only.allow_auto_topic_creation);
    let unknown = TopicId(12345);
    let topics = [
        TopicRef::Name(name("a")),
        TopicRef::Id(orders_id),
        TopicRef::Name(name("a")),
        TopicRef::Id(unknown),
    ];
    let req = meta::metadata_request(Some(&topics), 12, &view);
    let listed: Vec<(Option<String>, u128)> = req
        .topics
        .unwrap()
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()),
                t.topic_id.as_u128(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (Some("a".to_owned()), 0),
            (Some("orders".to_owned()), 0),
            (None, 12345)
        ],
        "known ids by name, unknown ids by id, no duplicates"
    );
    let old = meta::metadata_request(Some(&topics), 9, &view);
    assert_eq!(old.topics, None, "an unknown id before v12: every topic");
}

#[test]
fn find_coordinator_requests_batch_from_v4() {
    let keys = ["a".to_owned(), "b".to_owned()];
    let batched = meta::find_coordinator_requests(CoordinatorKeyType::Transaction, &keys, 4);
    assert_eq!(batched.len(), 1);
    assert_eq!(batched[0].coordinator_keys.len(), 2);
    assert_eq!(batched[0].key_type, 1);
    let single = meta::find_coordinator_requests(CoordinatorKeyType::Group, &keys, 3);
    assert_eq!(single.len(), 2);
    assert_eq!(single[1].key.as_str(), "b");
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("g"))
        .with_key_type(0);
    assert_eq!(
        meta::find_coordinator_key(&request, 3),
        (
            Some(CoordinatorKeyType::Group),
            Some(StrBytes::from_static_str("g"))
        )
    );
    assert_eq!(meta::find_coordinator_key(&request, 4).1, None);
}

#[test]
fn client_api_versions_intersect_every_broker() {
    let a = broker_versions(&[
        (ApiKey::Produce, 0, 13),
        (ApiKey::Fetch, 4, 17),
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::ShareFetch, 0, 1),
        (ApiKey::DescribeTopicPartitions, 0, 0),
        (ApiKey::WriteTxnMarkers, 0, 1),
    ]);
    let b = broker_versions(&[
        (ApiKey::Produce, 3, 12),
        (ApiKey::Fetch, 4, 18),
        (ApiKey::CreatePartitions, 0, 3),
    ]);
    let answer = meta::client_api_versions(&a, &[std::sync::Arc::new(b)]);
    let got: Vec<(i16, i16, i16)> = answer
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert_eq!(
        got,
        [
            (ApiKey::Produce as i16, 3, 12),
            (ApiKey::Fetch as i16, 4, 17),
            (ApiKey::CreatePartitions as i16, 0, 3),
        ]
    );
    let unsupported = meta::unsupported_api_versions();
    assert_eq!(unsupported.error_code, UNSUPPORTED_VERSION);
    round_trip(
        ApiKey::ApiVersions,
        0,
        ResponseKind::ApiVersions(unsupported),
    );
    assert!(meta::api_versions_decodable(3) && !meta::api_versions_decodable(5));
}

#[test]
fn multi_key_requests_split_and_merge_in_request_order() {
    let request = RequestKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![group("a"), group("b"), group("c")])
            .with_include_authorized_operations(true),
    );
    let (kind, keys) = keyed::keys(&request).unwrap();
    assert_eq!(kind, CoordinatorKeyType::Group);
    assert_eq!(keys, ["a", "b", "c"]);
    let part = keyed::with_keys(&request, &["c".to_owned(), "a".to_owned()]);
    let RequestKind::ConsumerGroupDescribe(p) = &part else {
        panic!("not a ConsumerGroupDescribe request")
    };
    assert_eq!(p.group_ids, [group("c"), group("a")]);
    assert!(p.include_authorized_operations, "other fields are kept");

    let answer = ConsumerGroupDescribeResponse::default()
        .with_throttle_time_ms(5)
        .with_groups(vec![
            consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(group("c"))
                .with_group_state(StrBytes::from_static_str("Stable")),
            consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(group("a"))
                .with_error_code(16),
        ]);
    let merged = keyed::merge(
        &request,
        vec![
            keyed::KeyedResult::Answer(ResponseKind::ConsumerGroupDescribe(answer)),
            keyed::KeyedResult::Failed(vec!["b".to_owned()], NOT_COORDINATOR),
        ],
        &keys,
    )
    .unwrap();
    let stale = keyed::stale(&merged);
    let ResponseKind::ConsumerGroupDescribe(m) =
        round_trip(ApiKey::ConsumerGroupDescribe, 1, merged)
    else {
        panic!("not a ConsumerGroupDescribe answer")
    };
    let got: Vec<(String, i16)> = m
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.error_code))
        .collect();
    assert_eq!(
        got,
        [
            ("a".to_owned(), 16),
            ("b".to_owned(), 16),
            ("c".to_owned(), 0)
        ]
    );
    assert_eq!(m.throttle_time_ms, 5);
    assert_eq!(
        stale,
        [
            Stale::Coordinator(CoordinatorKeyType::Group, "a".into()),
            Stale::Coordinator(CoordinatorKeyType::Group, "b".into())
        ]
    );

    let txn = RequestKind::DescribeTransactions(
        DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(StrBytes::from_static_str("t1"))]),
    );
    let (kind, keys) = keyed::keys(&txn).unwrap();
    assert_eq!((kind, keys.len()), (CoordinatorKeyType::Transaction, 1));
    let merged = keyed::merge(
        &txn,
        vec![keyed::KeyedResult::Failed(keys.clone(), 15)],
        &keys,
    );
    round_trip(ApiKey::DescribeTransactions, 0, merged.unwrap());
    assert!(keyed::keys(&RequestKind::Heartbeat(Default::default())).is_none());
}
