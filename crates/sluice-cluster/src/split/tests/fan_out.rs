//! ListGroups, ListTransactions, DescribeLogDirs: sent to every broker and
//! concatenated, at every version.

use sluice_codec::kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use sluice_codec::kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResult;
use sluice_codec::kafka_protocol::messages::list_groups_response::ListedGroup;
use sluice_codec::kafka_protocol::messages::list_transactions_response::TransactionState;
use sluice_codec::kafka_protocol::messages::{
    BrokerId, DescribeLogDirsRequest, DescribeLogDirsResponse, ListGroupsRequest,
    ListGroupsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TransactionalId,
};
use sluice_codec::kafka_protocol::protocol::{Message, StrBytes};

use super::super::SplitApi;
use super::*;
use crate::error_codes::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NETWORK_EXCEPTION, NONE,
};

fn text(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

/// `request` through the client codec and split over
/// [`FakeCluster::three_brokers`]; checks that the split sends the unchanged
/// request to brokers 1, 2, 3.
fn fan_out_split<R: Wire + PartialEq + std::fmt::Debug>(request: R, version: i16) -> Split<R> {
    let request = request.through_client(version);
    let split = request.split(version, &FakeCluster::three_brokers());
    let brokers: Vec<i32> = split.parts.iter().map(|(b, _)| b.0).collect();
    assert_eq!(brokers, [1, 2, 3]);
    assert!(split.parts.iter().all(|(_, part)| *part == request));
    assert!(split.unroutable.is_empty());
    assert_eq!(split.passthrough(), None);
    split
}

fn list_groups_answer(to: BrokerId) -> ListGroupsResponse {
    let listed = |id: String| {
        ListedGroup::default()
            .with_group_id(GroupId(text(id)))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
    };
    ListGroupsResponse::default()
        .with_throttle_time_ms(to.0 * 10)
        .with_groups(vec![
            listed(format!("g-on-{}", to.0)),
            listed("shared".into()),
        ])
}

#[test]
fn list_groups_every_version() {
    let v = <ListGroupsRequest as Message>::VERSIONS;
    for version in v.min..=v.max {
        let mut request = ListGroupsRequest::default();
        if version >= 4 {
            request.states_filter = vec![StrBytes::from_static_str("Stable")];
        }
        if version >= 5 {
            request.types_filter = vec![StrBytes::from_static_str("classic")];
        }
        let split = fan_out_split(request, version);
        let failed = Some((3, COORDINATOR_NOT_AVAILABLE));
        let merged = merge_with_failure(version, split, failed, |to, _| list_groups_answer(to));
        let ids: Vec<String> = merged
            .groups
            .iter()
            .map(|g| g.group_id.0.to_string())
            .collect();
        assert_eq!(
            ids,
            ["g-on-1", "shared", "g-on-2"],
            "v{version}: deduplicated"
        );
        assert_eq!(
            merged.error_code, COORDINATOR_NOT_AVAILABLE,
            "a failed broker shows"
        );
        assert_eq!(merged.throttle_time_ms, if version >= 1 { 20 } else { 0 });
        ListGroupsRequest::assert_merged_encodes(version, &merged);
    }
}

#[test]
fn list_transactions_every_version() {
    let v = <ListTransactionsRequest as Message>::VERSIONS;
    for version in v.min..=v.max {
        let mut request = ListTransactionsRequest::default()
            .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
            .with_producer_id_filters(vec![ProducerId(7)]);
        if version >= 1 {
            request.duration_filter = 1000;
        }
        if version >= 2 {
            request.transactional_id_pattern = Some(StrBytes::from_static_str("tx-.*"));
        }
        let split = fan_out_split(request, version);
        let merged = merge_answers(version, split, |to, _| {
            let state = |id: String| {
                TransactionState::default()
                    .with_transactional_id(TransactionalId(text(id)))
                    .with_producer_id(ProducerId(i64::from(to.0)))
                    .with_transaction_state(StrBytes::from_static_str("Ongoing"))
            };
            let unknown = vec![text("Bogus".into()), text(format!("Odd{}", to.0 % 2))];
            ListTransactionsResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_unknown_state_filters(unknown)
                .with_transaction_states(vec![
                    state(format!("tx-{}", to.0)),
                    state("tx-shared".into()),
                ])
        });
        let ids: Vec<String> = merged
            .transaction_states
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect();
        assert_eq!(ids, ["tx-1", "tx-shared", "tx-2", "tx-3"], "v{version}");
        let unknown: Vec<&str> = merged
            .unknown_state_filters
            .iter()
            .map(|s| s.as_str())
            .collect();
        assert_eq!(unknown, ["Bogus", "Odd1", "Odd0"], "a union, in order");
        assert_eq!((merged.error_code, merged.throttle_time_ms), (0, 30));
        ListTransactionsRequest::assert_merged_encodes(version, &merged);
    }
}

#[test]
fn describe_log_dirs_every_version() {
    let v = <DescribeLogDirsRequest as Message>::VERSIONS;
    for version in v.min..=v.max {
        let topic = DescribableLogDirTopic::default()
            .with_topic(name("alpha"))
            .with_partitions(vec![0, 1]);
        let request = DescribeLogDirsRequest::default().with_topics(Some(vec![topic]));
        let split = fan_out_split(request, version);
        let failed = Some((2, NETWORK_EXCEPTION));
        let merged = merge_with_failure(version, split, failed, |to, _| {
            let dir = DescribeLogDirsResult::default()
                .with_log_dir(text(format!("/data/broker-{}", to.0)));
            let dir = if version >= 4 {
                dir.with_total_bytes(1 << 30)
            } else {
                dir
            };
            DescribeLogDirsResponse::default()
                .with_throttle_time_ms(to.0 * 10)
                .with_results(vec![dir])
        });
        let dirs: Vec<&str> = merged.results.iter().map(|r| r.log_dir.as_str()).collect();
        assert_eq!(dirs, ["/data/broker-1", "/data/broker-3"], "v{version}");
        let expected_error = if version >= 3 {
            NETWORK_EXCEPTION
        } else {
            NONE
        };
        assert_eq!(merged.error_code, expected_error, "v{version}");
        assert_eq!(merged.throttle_time_ms, 30);
        DescribeLogDirsRequest::assert_merged_encodes(version, &merged);
    }
}

#[test]
fn fan_out_without_brokers_answers_the_unavailable_error() {
    let cluster = FakeCluster::empty();
    let split = ListGroupsRequest::default().split(5, &cluster);
    assert!(split.parts.is_empty());
    assert_eq!(split.unroutable, vec![Unroutable::NoBroker]);
    let merged = ListGroupsRequest::merge(split.plan, Vec::new()).unwrap();
    assert_eq!(merged.error_code, COORDINATOR_NOT_AVAILABLE);
    assert!(merged.groups.is_empty());

    let split = ListTransactionsRequest::default().split(2, &cluster);
    let merged = ListTransactionsRequest::merge(split.plan, Vec::new()).unwrap();
    assert_eq!(merged.error_code, COORDINATOR_LOAD_IN_PROGRESS);
}

#[test]
fn fan_out_to_one_broker_is_forwarded_unchanged() {
    let request = DescribeLogDirsRequest::default().with_topics(None);
    let split = request.split(4, &FakeCluster::single_broker());
    assert_eq!(split.passthrough(), Some(BrokerId(1)));
    assert_eq!(split.parts, vec![(BrokerId(1), request)]);
}
