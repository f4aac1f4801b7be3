//! The failure answer of every API the table offers clients, found from its
//! row: an API, a version and a code in; an answer (or none) out.

use super::*;
use crate::api::describe;
use crate::api::failure::{FailureAnswer, NoAnswer};
use crate::error_codes::ErrorCode;

/// A default request of `api`, for every API the codec knows.
macro_rules! default_requests {
    ($($api:ident,)*) => {
        fn default_request(api: ApiKey) -> RequestKind {
            match api {
                $(ApiKey::$api => RequestKind::$api(Default::default()),)*
            }
        }
    };
}

default_requests! {
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        SaslHandshake,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        WriteTxnMarkers,
        TxnOffsetCommit,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeConfigs,
        AlterConfigs,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        SaslAuthenticate,
        CreatePartitions,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DeleteGroups,
        ElectLeaders,
        IncrementalAlterConfigs,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        Vote,
        BeginQuorumEpoch,
        EndQuorumEpoch,
        DescribeQuorum,
        AlterPartition,
        UpdateFeatures,
        Envelope,
        FetchSnapshot,
        DescribeCluster,
        DescribeProducers,
        BrokerRegistration,
        BrokerHeartbeat,
        UnregisterBroker,
        DescribeTransactions,
        ListTransactions,
        AllocateProducerIds,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        ControllerRegistration,
        GetTelemetrySubscriptions,
        PushTelemetry,
        AssignReplicasToDirs,
        ListConfigResources,
        DescribeTopicPartitions,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        AddRaftVoter,
        RemoveRaftVoter,
        UpdateRaftVoter,
        InitializeShareGroupState,
        ReadShareGroupState,
        WriteShareGroupState,
        DeleteShareGroupState,
        ReadShareGroupStateSummary,
        StreamsGroupHeartbeat,
        StreamsGroupDescribe,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
        StreamsGroupTopologyDescriptionUpdate,
        UnregisterController,
}

/// The code a failure of `api` is answered with, per its row.
fn failure_code(api: ApiKey) -> ErrorCode {
    match describe(api).on_failure {
        OnFailure::Synthesize(c) | OnFailure::RetryElsewhere(c) | OnFailure::SplitError(c) => c,
        OnFailure::Close => REQUEST_TIMED_OUT,
    }
}

#[test]
fn every_offered_api_and_version_has_a_failure_answer_unless_its_row_says_none() {
    let mut missing = Vec::new();
    for api in ApiKey::iter() {
        let Some(range) = offered_versions(api) else {
            continue;
        };
        let row = describe(api);
        let request = default_request(api);
        for version in range.min..=range.max {
            let answer = failure_answer(api, &request, version, failure_code(api));
            if row.has_failure_answer(version) {
                match answer {
                    Some(body) => _ = round_trip(api, version, body),
                    None => missing.push((api, version)),
                }
            } else {
                assert!(
                    answer.is_none(),
                    "{api:?} v{version}: answered against its row"
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "rows promise a failure answer, none was built: {missing:?}"
    );
}

#[test]
fn the_offered_apis_without_a_failure_answer_are_the_documented_ones() {
    let mut none: Vec<(ApiKey, i16)> = Vec::new();
    for api in ApiKey::iter() {
        let Some(range) = offered_versions(api) else {
            continue;
        };
        let row = describe(api);
        if let Some(since) = (range.min..=range.max).find(|v| !row.has_failure_answer(*v)) {
            none.push((api, since));
        }
    }
    // (api, the first offered version without a failure answer)
    assert_eq!(
        none,
        [
            (ApiKey::Metadata, 0),
            (ApiKey::SaslHandshake, 0),
            (ApiKey::AlterReplicaLogDirs, 1),
            (ApiKey::SaslAuthenticate, 0),
            (ApiKey::ElectLeaders, 0),
            (ApiKey::AlterClientQuotas, 0),
            (ApiKey::AlterUserScramCredentials, 0),
        ]
    );
}

#[test]
fn each_api_is_answered_by_one_implementation_the_one_its_row_picks() {
    let all: [&dyn FailureAnswer; 7] = [
        &crate::split::dispatch::SplitAnswers,
        &crate::route::share::ShareAnswers,
        &crate::route::groups::GroupAnswers,
        &crate::route::transactions::TransactionAnswers,
        &crate::route::meta::MetaAnswers,
        &crate::route::admin::AdminAnswers,
        &NoAnswer,
    ];
    for api in ApiKey::iter() {
        let request = default_request(api);
        let version = api.valid_versions().max;
        let code = failure_code(api);
        let answers: Vec<ResponseKind> = all
            .iter()
            .filter_map(|a| a.failure_answer(api, &request, version, code))
            .collect();
        assert!(
            answers.len() <= 1,
            "{api:?} is answered by several families"
        );
        let picked = answers_of(describe(api).family).failure_answer(api, &request, version, code);
        assert_eq!(
            answers.first(),
            picked.as_ref(),
            "{api:?}: its row picks another family"
        );
    }
}

#[test]
fn a_failure_answer_carries_the_code_where_the_client_reads_it() {
    let heartbeat = RequestKind::Heartbeat(HeartbeatRequest::default());
    let Some(ResponseKind::Heartbeat(answer)) =
        failure_answer(ApiKey::Heartbeat, &heartbeat, 4, NOT_COORDINATOR)
    else {
        panic!("no Heartbeat answer");
    };
    assert_eq!(answer.error_code, NOT_COORDINATOR);

    let fetch = RequestKind::Fetch(FetchRequest::default());
    let Some(ResponseKind::Fetch(_)) =
        failure_answer(ApiKey::Fetch, &fetch, 12, NOT_LEADER_OR_FOLLOWER)
    else {
        panic!("no Fetch answer");
    };

    let metadata = RequestKind::Metadata(MetadataRequest::default());
    assert!(failure_answer(ApiKey::Metadata, &metadata, 12, REQUEST_TIMED_OUT).is_none());
    let Some(ResponseKind::Metadata(answer)) =
        failure_answer(ApiKey::Metadata, &metadata, 13, REQUEST_TIMED_OUT)
    else {
        panic!("no Metadata v13 answer");
    };
    assert_eq!(answer.error_code, REQUEST_TIMED_OUT);

    let handshake = RequestKind::SaslHandshake(SaslHandshakeRequest::default());
    assert!(failure_answer(ApiKey::SaslHandshake, &handshake, 1, REQUEST_TIMED_OUT).is_none());
}
