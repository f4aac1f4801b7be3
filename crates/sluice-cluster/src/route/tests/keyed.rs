//! Multi-key requests (ConsumerGroupDescribe, ShareGroupDescribe,
//! DescribeShareGroupOffsets, DescribeTransactions): split by
//! key, merged in request order, failed keys stale.

use super::*;
use crate::route::keyed;

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
                .with_error_code(ResponseError::NotCoordinator.code()),
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
        vec![keyed::KeyedResult::Failed(
            keys.clone(),
            crate::error_codes::COORDINATOR_NOT_AVAILABLE,
        )],
        &keys,
    );
    round_trip(ApiKey::DescribeTransactions, 0, merged.unwrap());
    assert!(keyed::keys(&RequestKind::Heartbeat(Default::default())).is_none());
}

#[test]
fn share_group_describe_and_offsets_split_by_key_and_merge_in_order() {
    use sluice_codec::kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    use sluice_codec::kafka_protocol::messages::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
    use sluice_codec::kafka_protocol::messages::share_group_describe_response::DescribedGroup;
    let describe = RequestKind::ShareGroupDescribe(
        ShareGroupDescribeRequest::default().with_group_ids(vec![group("a"), group("b")]),
    );
    let (kind, keys) = keyed::keys(&describe).unwrap();
    assert_eq!(
        (kind, keys.as_slice()),
        (
            CoordinatorKeyType::Group,
            &["a".to_owned(), "b".to_owned()][..]
        )
    );
    let answer = ShareGroupDescribeResponse::default()
        .with_groups(vec![DescribedGroup::default().with_group_id(group("b"))]);
    let merged = keyed::merge(
        &describe,
        vec![
            keyed::KeyedResult::Answer(ResponseKind::ShareGroupDescribe(answer)),
            keyed::KeyedResult::Failed(vec!["a".to_owned()], NOT_COORDINATOR),
        ],
        &keys,
    )
    .unwrap();
    let ResponseKind::ShareGroupDescribe(m) = &merged else {
        panic!("not a ShareGroupDescribe answer")
    };
    let got: Vec<(&str, i16)> = m
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code))
        .collect();
    assert_eq!(got, [("a", NOT_COORDINATOR.code()), ("b", 0)]);
    assert_eq!(keyed::stale(&merged).len(), 1, "a's coordinator is stale");

    let offsets = RequestKind::DescribeShareGroupOffsets(
        DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default().with_group_id(group("x")),
            DescribeShareGroupOffsetsRequestGroup::default().with_group_id(group("y")),
        ]),
    );
    let (_, keys) = keyed::keys(&offsets).unwrap();
    let RequestKind::DescribeShareGroupOffsets(part) =
        keyed::with_keys(&offsets, &["y".to_owned()])
    else {
        panic!("not a DescribeShareGroupOffsets request")
    };
    assert_eq!(part.groups.len(), 1);
    assert_eq!(part.groups[0].group_id, group("y"));
    let answer = DescribeShareGroupOffsetsResponse::default().with_groups(vec![
        DescribeShareGroupOffsetsResponseGroup::default().with_group_id(group("y")),
    ]);
    let merged = keyed::merge(
        &offsets,
        vec![
            keyed::KeyedResult::Answer(ResponseKind::DescribeShareGroupOffsets(answer)),
            keyed::KeyedResult::Failed(vec!["x".to_owned()], NOT_COORDINATOR),
        ],
        &keys,
    )
    .unwrap();
    let ResponseKind::DescribeShareGroupOffsets(m) = merged else {
        panic!("not a DescribeShareGroupOffsets answer")
    };
    let got: Vec<&str> = m.groups.iter().map(|g| g.group_id.0.as_str()).collect();
    assert_eq!(got, ["x", "y"]);
}

#[test]
fn share_group_coordinator_apis_go_to_their_group_and_answer_not_coordinator() {
    use crate::route::groups;
    let heartbeat = RequestKind::ShareGroupHeartbeat(
        ShareGroupHeartbeatRequest::default().with_group_id(group("g")),
    );
    assert_eq!(
        groups::coordinator_key(&heartbeat),
        Some((CoordinatorKeyType::Group, "g".to_owned()))
    );
    let alter = RequestKind::AlterShareGroupOffsets(
        AlterShareGroupOffsetsRequest::default().with_group_id(group("h")),
    );
    assert_eq!(
        groups::coordinator_key(&alter),
        Some((CoordinatorKeyType::Group, "h".to_owned()))
    );
    let delete = RequestKind::DeleteShareGroupOffsets(
        DeleteShareGroupOffsetsRequest::default().with_group_id(group("i")),
    );
    for (request, api) in [
        (heartbeat, ApiKey::ShareGroupHeartbeat),
        (alter, ApiKey::AlterShareGroupOffsets),
        (delete, ApiKey::DeleteShareGroupOffsets),
    ] {
        let version = client_versions(api).start().to_owned();
        let answer = crate::route::failure_answer(api, &request, version, NOT_COORDINATOR)
            .unwrap_or_else(|| panic!("{api:?} has an error answer"));
        assert_eq!(
            groups::response_error_codes(&answer),
            [NOT_COORDINATOR.code()],
            "{api:?}"
        );
        round_trip(api, version, answer);
    }
}

/// Coordinators as a view knows them: `a` and `c` on broker 1, `b` on 2.
struct Known;

impl crate::split::Coordinators for Known {
    fn coordinator(&self, _: CoordinatorKeyType, key: &str) -> Option<crate::topology::BrokerId> {
        match key {
            "a" | "c" => Some(crate::topology::BrokerId(1)),
            "b" => Some(crate::topology::BrokerId(2)),
            _ => None,
        }
    }
}

#[test]
fn keys_go_one_part_per_coordinator_in_first_use_order() {
    let keys: Vec<String> = ["b", "a", "x", "c", "y"]
        .iter()
        .map(|k| (*k).to_owned())
        .collect();
    let parts = keyed::by_coordinator(&Known, CoordinatorKeyType::Group, &keys);
    let shown: Vec<(Option<i32>, Vec<&str>)> = parts
        .iter()
        .map(|(c, keys)| (c.map(|c| c.0), keys.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        shown,
        vec![
            (Some(2), vec!["b"]),
            (Some(1), vec!["a", "c"]),
            (None, vec!["x", "y"]),
        ]
    );
}
