//! OffsetFetch, DescribeGroups, DeleteGroups: split by coordinator, merged in
//! the client's group order, at every version.

use sluice_codec::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use sluice_codec::kafka_protocol::messages::describe_groups_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use sluice_codec::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use sluice_codec::kafka_protocol::protocol::{Message, StrBytes};

use super::super::{PartResult, SplitApi};
use super::*;
use crate::error_codes::NOT_COORDINATOR;

/// Each group of [`GROUPS`] with the error the merge must give it.
fn expected_groups() -> Vec<(String, i16)> {
    GROUPS
        .iter()
        .map(|g| {
            (
                g.to_string(),
                if *g == "g-lost" {
                    NOT_COORDINATOR.code()
                } else {
                    0
                },
            )
        })
        .collect()
}

fn groups() -> Vec<GroupId> {
    GROUPS.iter().map(|g| group(g)).collect()
}

fn id(group: &GroupId) -> String {
    group.0.to_string()
}

/// Each group's id and error code, in order.
fn outcomes<G>(groups: &[G], outcome: impl Fn(&G) -> (&GroupId, i16)) -> Vec<(String, i16)> {
    groups
        .iter()
        .map(|g| {
            let (group, error_code) = outcome(g);
            (id(group), error_code)
        })
        .collect()
}

/// `request` through the client codec, split by coordinator over
/// [`FakeCluster::three_brokers`], and its parts checked: each part's groups
/// (`part_groups`) are coordinated by its broker.
fn group_split<R: Wire>(
    request: R,
    version: i16,
    part_groups: impl Fn(&R) -> Vec<GroupId>,
) -> (R, Split<R>) {
    let cluster = FakeCluster::three_brokers();
    let request = request.through_client(version);
    let split = request.split(version, &cluster);
    check_group_parts(&split, &cluster, part_groups);
    (request, split)
}

/// Checks the parts of a split by coordinator of [`GROUPS`].
fn check_group_parts<Req>(
    split: &Split<Req>,
    cluster: &FakeCluster,
    part_groups: impl Fn(&Req) -> Vec<GroupId>,
) {
    let brokers: Vec<i32> = split.parts.iter().map(|(b, _)| b.0).collect();
    assert_eq!(brokers, [2, 1, 3], "parts in order of first use");
    for (to, part) in &split.parts {
        for g in part_groups(part) {
            assert_eq!(
                cluster.coordinator(CoordinatorKeyType::Group, &id(&g)),
                Some(*to)
            );
        }
    }
    assert_eq!(
        split.unroutable,
        vec![Unroutable::Group {
            group_id: group("g-lost")
        }]
    );
}

fn offset_fetch_request(version: i16) -> OffsetFetchRequest {
    if version < 8 {
        let topic = OffsetFetchRequestTopic::default()
            .with_name(name("alpha"))
            .with_partition_indexes(vec![0, 1]);
        let request = OffsetFetchRequest::default()
            .with_group_id(group("g-two"))
            .with_topics(Some(vec![topic]));
        return if version >= 7 {
            request.with_require_stable(true)
        } else {
            request
        };
    }
    let groups = GROUPS.iter().enumerate().map(|(at, g)| {
        let topics = (at != 2).then(|| {
            vec![
                OffsetFetchRequestTopics::default()
                    .with_name(name("alpha"))
                    .with_partition_indexes(vec![0, 2]),
            ]
        });
        let request_group = OffsetFetchRequestGroup::default()
            .with_group_id(group(g))
            .with_topics(topics);
        if version >= 9 {
            request_group
                .with_member_id(Some(StrBytes::from_static_str("member-1")))
                .with_member_epoch(12)
        } else {
            request_group
        }
    });
    OffsetFetchRequest::default()
        .with_groups(groups.collect())
        .with_require_stable(true)
}

/// Coordinator `to`'s answer: committed offset [`mark`]ed.
fn offset_fetch_answer(
    to: BrokerId,
    part: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let response = if version < 8 {
        let topics = part.topics.iter().flatten().map(|t| {
            let partitions = t.partition_indexes.iter().map(|p| {
                OffsetFetchResponsePartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(mark(to, *p))
            });
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions.collect())
        });
        OffsetFetchResponse::default().with_topics(topics.collect())
    } else {
        let groups = part.groups.iter().map(|g| {
            let topics = g.topics.iter().flatten().map(|t| {
                let partitions = t.partition_indexes.iter().map(|p| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(*p)
                        .with_committed_offset(mark(to, *p))
                });
                OffsetFetchResponseTopics::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions.collect())
            });
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_topics(topics.collect())
        });
        OffsetFetchResponse::default().with_groups(groups.collect())
    };
    response.with_throttle_time_ms(to.0 * 10)
}

fn offset_fetch_single_group(version: i16) {
    let cluster = FakeCluster::three_brokers();
    let request = offset_fetch_request(version).through_client(version);
    let split = request.split(version, &cluster);
    assert_eq!(
        split.passthrough(),
        Some(BrokerId(2)),
        "v{version}: whole to g-two's coordinator"
    );
    assert_eq!(split.parts, vec![(BrokerId(2), request.clone())]);
    let answer = offset_fetch_answer(BrokerId(2), &request, version);
    let answer = OffsetFetchRequest::through_broker(version, answer);
    let merged = OffsetFetchRequest::merge(split.plan, vec![PartResult::Response(answer.clone())]);
    assert_eq!(merged.unwrap(), answer);

    // The same group without a coordinator: answered NOT_COORDINATOR.
    let lost = request.clone().with_group_id(group("g-lost"));
    let split = lost.split(version, &cluster);
    assert!(split.parts.is_empty());
    let merged = OffsetFetchRequest::merge(split.plan, Vec::new()).unwrap();
    if version >= 2 {
        assert_eq!(merged.error_code, NOT_COORDINATOR, "v{version}");
        assert!(merged.topics.is_empty());
    } else {
        let errors: Vec<(i32, i16)> = merged.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(
            errors,
            [(0, NOT_COORDINATOR.code()), (1, NOT_COORDINATOR.code())]
        );
    }
    OffsetFetchRequest::assert_merged_encodes(version, &merged);
}

fn offset_fetch_many_groups(version: i16) {
    let (request, split) = group_split(offset_fetch_request(version), version, |r| {
        r.groups.iter().map(|g| g.group_id.clone()).collect()
    });
    let merged = merge_answers(version, split, |to, part| {
        assert_eq!(part.require_stable, request.require_stable);
        offset_fetch_answer(to, part, version)
    });
    let got = outcomes(&merged.groups, |g| (&g.group_id, g.error_code));
    assert_eq!(got, expected_groups(), "v{version} group order");
    // g-two (broker 2) asked alpha 0 and 2; g-one (index 2) asked every topic.
    let g_two: Vec<i64> = merged.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(g_two, [2000, 2002]);
    assert!(merged.groups[2].topics.is_empty());
    assert_eq!(merged.throttle_time_ms, 30);
    OffsetFetchRequest::assert_merged_encodes(version, &merged);
}

#[test]
fn offset_fetch_every_version() {
    let v = <OffsetFetchRequest as Message>::VERSIONS;
    for version in v.min..=v.max {
        if version < 8 {
            offset_fetch_single_group(version);
        } else {
            offset_fetch_many_groups(version);
        }
    }
}

#[test]
fn offset_fetch_v8_failed_coordinator_answers_not_coordinator() {
    let version = 8;
    let cluster = FakeCluster::three_brokers();
    let split = offset_fetch_request(version).split(version, &cluster);
    let failed = Some((3, NOT_COORDINATOR));
    let merged = merge_with_failure(version, split, failed, |to, part| {
        offset_fetch_answer(to, part, version)
    });
    let errors: Vec<i16> = merged.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(
        errors,
        [0, NOT_COORDINATOR.code(), 0, NOT_COORDINATOR.code()]
    );
}

fn describe_groups(version: i16) {
    let request = DescribeGroupsRequest::default().with_groups(groups());
    let request = if version >= 3 {
        request.with_include_authorized_operations(true)
    } else {
        request
    };
    let (request, split) = group_split(request, version, |r| r.groups.clone());
    let merged = merge_answers(version, split, |to, part| {
        assert_eq!(
            part.include_authorized_operations,
            request.include_authorized_operations
        );
        let described = part.groups.iter().map(|g| {
            DescribedGroup::default()
                .with_group_id(g.clone())
                .with_group_state(StrBytes::from_string(format!("Stable@{}", to.0)))
                .with_protocol_type(StrBytes::from_static_str("consumer"))
        });
        DescribeGroupsResponse::default()
            .with_throttle_time_ms(to.0 * 10)
            .with_groups(described.collect())
    });
    let got = outcomes(&merged.groups, |g| (&g.group_id, g.error_code));
    assert_eq!(got, expected_groups(), "v{version} group order");
    let states: Vec<&str> = merged
        .groups
        .iter()
        .map(|g| g.group_state.as_str())
        .collect();
    assert_eq!(states, ["Stable@2", "", "Stable@1", "Stable@3"]);
    DescribeGroupsRequest::assert_merged_encodes(version, &merged);
}

#[test]
fn describe_groups_every_version() {
    let v = <DescribeGroupsRequest as Message>::VERSIONS;
    assert_eq!((v.min, v.max), (0, 6));
    for version in v.min..=v.max {
        describe_groups(version);
    }
}

fn delete_groups(version: i16) {
    let request = DeleteGroupsRequest::default().with_groups_names(groups());
    let (_, split) = group_split(request, version, |r| r.groups_names.clone());
    let merged = merge_answers(version, split, |to, part| {
        // g-three's coordinator refuses: the error must survive the merge.
        let deleted = part.groups_names.iter().map(|g| {
            let error = if id(g) == "g-three" { 69 } else { 0 };
            DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(error)
        });
        DeleteGroupsResponse::default()
            .with_throttle_time_ms(to.0 * 10)
            .with_results(deleted.collect())
    });
    let got = outcomes(&merged.results, |g| (&g.group_id, g.error_code));
    let mut expected = expected_groups();
    expected[3].1 = 69;
    assert_eq!(got, expected, "v{version} group order");
    assert_eq!(merged.throttle_time_ms, 30);
    DeleteGroupsRequest::assert_merged_encodes(version, &merged);
}

#[test]
fn delete_groups_every_version() {
    let v = <DeleteGroupsRequest as Message>::VERSIONS;
    assert_eq!((v.min, v.max), (0, 3));
    for version in v.min..=v.max {
        delete_groups(version);
    }
}

#[test]
fn group_error_responses_name_every_group() {
    let request = DescribeGroupsRequest::default().with_groups(groups());
    let response = request.error_response_for(6, NOT_COORDINATOR);
    assert!(
        response
            .groups
            .iter()
            .all(|g| g.error_code == NOT_COORDINATOR)
    );
    assert_eq!(response.groups.len(), 4);
    broker_roundtrip(ApiKey::DescribeGroups, 6, response);
    let request = DeleteGroupsRequest::default().with_groups_names(groups());
    let response = request.error_response_for(0, NOT_COORDINATOR);
    assert_eq!(response.results.len(), 4);
    broker_roundtrip(ApiKey::DeleteGroups, 0, response);
    for version in [1, 2, 7, 8, 9] {
        let response = offset_fetch_request(version).error_response_for(version, NOT_COORDINATOR);
        broker_roundtrip(ApiKey::OffsetFetch, version, response);
    }
}
