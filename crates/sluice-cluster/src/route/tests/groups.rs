//! Group and transaction APIs: the coordinator key of each request, and the
//! groups a split answer shows stale.

use super::*;
use crate::route::groups;

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
fn stale_groups_from_split_answers() {
    let describe = DescribeGroupsResponse::default().with_groups(vec![
        describe_groups_response::DescribedGroup::default()
            .with_group_id(group("moved"))
            .with_error_code(ResponseError::NotCoordinator.code()),
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
