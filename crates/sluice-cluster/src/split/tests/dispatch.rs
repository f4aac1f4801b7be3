//! The `RequestKind` / `ResponseKind` front.

use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::Message;

use super::super::dispatch::unavailable_error;
use super::super::dispatch::{SplitAnswers, merge_responses, split_request};
use super::super::{PartResult, SplitApi, SplitError};
use super::fetch::fetch_request;
use super::produce::produce_request;
use super::*;
use crate::api::failure::FailureAnswer;
use crate::error_codes::{NONE, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER};

#[test]
fn produce_through_the_erased_front() {
    let version = 11;
    let request = client_roundtrip(ApiKey::Produce, version, produce_request(version));
    let split = split_request(&request, version, &FakeCluster::three_brokers()).unwrap();
    assert_eq!(split.plan.api_key(), ApiKey::Produce);
    assert_eq!(
        (split.plan.version(), split.plan.part_count()),
        (version, 3)
    );
    assert_eq!(split.passthrough(), None);
    assert_eq!(split.unroutable.len(), 1);
    let results = split
        .parts
        .iter()
        .map(|(_, part)| {
            let part = kind!(RequestKind::Produce, part.clone());
            let answer = part.error_response_for(version, NONE);
            PartResult::Response(ResponseKind::Produce(answer))
        })
        .collect();
    let merged = kind!(
        ResponseKind::Produce,
        merge_responses(split.plan, results).unwrap()
    );
    assert_eq!(flatten(&merged.responses, version), request_order(false));
}

#[test]
fn a_response_of_another_api_is_refused() {
    let version = 12;
    let request = RequestKind::Fetch(fetch_request(version));
    let split = split_request(&request, version, &FakeCluster::three_brokers()).unwrap();
    let mut results: Vec<_> = (0..split.parts.len())
        .map(|_| PartResult::Response(ResponseKind::Fetch(FetchResponse::default())))
        .collect();
    results[1] = PartResult::Response(ResponseKind::Produce(ProduceResponse::default()));
    let err = merge_responses(split.plan, results).unwrap_err();
    assert_eq!(
        err,
        SplitError::WrongResponse {
            api: ApiKey::Fetch,
            version,
            part: 1,
            got: "Produce"
        }
    );
    assert_eq!(
        err.to_string(),
        "merging Fetch v12: part 1 came back as a Produce response"
    );
}

#[test]
fn other_apis_are_not_split() {
    let request = RequestKind::Metadata(MetadataRequest::default());
    assert!(split_request(&request, 12, &FakeCluster::three_brokers()).is_none());
    let answer =
        SplitAnswers.failure_answer(ApiKey::Metadata, &request, 12, NOT_LEADER_OR_FOLLOWER);
    assert!(answer.is_none());
    assert_eq!(unavailable_error(ApiKey::Metadata), None);
    assert_eq!(unavailable_error(ApiKey::FindCoordinator), None);
}

/// A default request of every split api, with its version range.
fn every_split_api() -> Vec<(ApiKey, RequestKind, (i16, i16))> {
    fn entry<R: Message + Into<RequestKind>>(
        api: ApiKey,
        request: R,
    ) -> (ApiKey, RequestKind, (i16, i16)) {
        (api, request.into(), (R::VERSIONS.min, R::VERSIONS.max))
    }
    vec![
        entry(ApiKey::Produce, produce_request(12)),
        entry(ApiKey::Fetch, fetch_request(12)),
        entry(ApiKey::ListOffsets, ListOffsetsRequest::default()),
        entry(
            ApiKey::OffsetForLeaderEpoch,
            OffsetForLeaderEpochRequest::default(),
        ),
        entry(ApiKey::DeleteRecords, DeleteRecordsRequest::default()),
        entry(
            ApiKey::DescribeProducers,
            DescribeProducersRequest::default(),
        ),
        entry(ApiKey::ListGroups, ListGroupsRequest::default()),
        entry(ApiKey::ListTransactions, ListTransactionsRequest::default()),
        entry(ApiKey::DescribeLogDirs, DescribeLogDirsRequest::default()),
        entry(ApiKey::OffsetFetch, OffsetFetchRequest::default()),
        entry(
            ApiKey::DescribeGroups,
            DescribeGroupsRequest::default().with_groups(vec![group("g")]),
        ),
        entry(
            ApiKey::DeleteGroups,
            DeleteGroupsRequest::default().with_groups_names(vec![group("g")]),
        ),
    ]
}

#[test]
fn error_responses_encode_at_every_version_of_every_split_api() {
    for (api, request, (min, max)) in every_split_api() {
        let code = unavailable_error(api).unwrap();
        for version in min..=max {
            let response = SplitAnswers
                .failure_answer(api, &request, version, code)
                .unwrap();
            broker_roundtrip(api, version, response);
        }
    }
}

#[test]
fn unavailable_errors_follow_the_design_table() {
    let leader = [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::OffsetForLeaderEpoch,
        ApiKey::DeleteRecords,
        ApiKey::DescribeProducers,
    ];
    for api in leader {
        assert_eq!(
            unavailable_error(api),
            Some(NOT_LEADER_OR_FOLLOWER),
            "{api:?}"
        );
    }
    for api in [
        ApiKey::OffsetFetch,
        ApiKey::DescribeGroups,
        ApiKey::DeleteGroups,
    ] {
        assert_eq!(unavailable_error(api), Some(NOT_COORDINATOR), "{api:?}");
    }
    assert_eq!(
        (NOT_LEADER_OR_FOLLOWER.code(), NOT_COORDINATOR.code()),
        (6, 16)
    );
}
