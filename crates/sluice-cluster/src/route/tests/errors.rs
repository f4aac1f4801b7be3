//! Answers Sluice synthesizes itself: every one encodes at every version a
//! client may use, and puts the error where clients read it.

use sluice_codec::kafka_protocol::messages::create_topics_request::CreatableTopic;
use sluice_codec::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};

use super::*;
use crate::route::groups;

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
        StreamsGroupHeartbeat,
        StreamsGroupDescribe,
        StreamsGroupTopologyDescriptionUpdate,
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
            let Some(body) = failure_answer(api, &request, version, code) else {
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
    let body = failure_answer(ApiKey::OffsetCommit, &request, 8, NOT_COORDINATOR).unwrap();
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
    let body = failure_answer(ApiKey::CreateTopics, &create, 7, REQUEST_TIMED_OUT).unwrap();
    let ResponseKind::CreateTopics(r) = round_trip(ApiKey::CreateTopics, 7, body) else {
        panic!("not a CreateTopics answer");
    };
    assert!(r.topics.iter().all(|t| t.error_code == REQUEST_TIMED_OUT));
    assert_eq!(r.topics.len(), 2);

    let heartbeat = RequestKind::Heartbeat(HeartbeatRequest::default());
    let body = failure_answer(ApiKey::Heartbeat, &heartbeat, 4, NOT_COORDINATOR).unwrap();
    assert_eq!(groups::response_error_codes(&body), [NOT_COORDINATOR]);
    // Metadata before v13 has no place for an error.
    let metadata = RequestKind::Metadata(MetadataRequest::default());
    assert!(failure_answer(ApiKey::Metadata, &metadata, 12, REQUEST_TIMED_OUT).is_none());
    assert!(failure_answer(ApiKey::Metadata, &metadata, 13, REQUEST_TIMED_OUT).is_some());
}
