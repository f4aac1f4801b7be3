//! Multi-key requests (ConsumerGroupDescribe, DescribeTransactions): split by
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
