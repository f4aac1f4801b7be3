//! Tests of [`ClusterView`] built from real encoded Metadata and
//! FindCoordinator responses of several versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sluice_codec::ResponseKind;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::find_coordinator_response::{
    Coordinator, FindCoordinatorResponse,
};
use sluice_codec::kafka_protocol::messages::metadata_response::MetadataResponse;
use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::*;
use crate::topology::fixtures::{self, name, through_wire};

/// The response as a client of `version` would have received it.
fn metadata_at(version: i16, resp: MetadataResponse) -> MetadataResponse {
    let wire = through_wire(ApiKey::Metadata, version, ResponseKind::Metadata(resp));
    match wire.into_body().unwrap() {
        ResponseKind::Metadata(m) => m,
        other => panic!("unexpected body {other:?}"),
    }
}

fn orders() -> TopicRef {
    TopicRef::Name(name("orders"))
}

#[test]
fn builds_from_every_metadata_version() {
    for version in 0..=13 {
        let mut view = ClusterView::new();
        let applied = view.apply_metadata(
            version,
            &metadata_at(version, fixtures::metadata_response(5)),
        );
        assert_eq!(
            applied.added_brokers,
            [BrokerId(1), BrokerId(2), BrokerId(3)]
        );
        assert_eq!(view.leader(&orders(), 0), Some(BrokerId(1)), "v{version}");
        assert_eq!(view.leader(&orders(), 4), Some(BrokerId(2)), "v{version}");
        assert_eq!(
            view.leader(&TopicRef::Name(name("events")), 1),
            None,
            "no leader"
        );
        assert!(view.topic(&TopicRef::Name(name("missing"))).is_none());
        let addr = view.broker_address(BrokerId(3)).unwrap();
        assert_eq!(addr.to_string(), "kafka-3.internal.corp:19094");
        let rack = view.broker_rack(BrokerId(2)).map(|r| r.to_string());
        assert_eq!(
            rack,
            (version >= 1).then(|| "rack-b".to_owned()),
            "v{version}"
        );
        let controller = (version >= 1).then_some(BrokerId(2));
        assert_eq!(view.controller(), controller, "v{version}");
        if version >= 10 {
            let id = view.topic_id(&name("orders")).unwrap();
            assert!(!id.is_nil());
            assert_eq!(view.leader(&TopicRef::Id(id), 2), Some(BrokerId(3)));
            assert_eq!(view.topic_name(id), Some(&name("orders")));
        } else {
            assert_eq!(view.topic_id(&name("orders")), None, "v{version}");
        }
        let p = view.partition(&orders(), 0).unwrap();
        assert_eq!(p.replicas, [BrokerId(1), BrokerId(2), BrokerId(3)]);
        assert_eq!(p.isr, [BrokerId(1), BrokerId(2)]);
        let epoch = if version >= 7 { 5 } else { -1 };
        assert_eq!(p.leader_epoch, epoch, "v{version}");
    }
}

#[test]
fn older_epochs_do_not_win_but_recreated_topics_do() {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(7));
    // A lagging broker answers with epoch 6 and another leader.
    let mut stale = fixtures::metadata_response(6);
    stale.topics[0].partitions[0].leader_id = BrokerId(3);
    let applied = view.apply_metadata(12, &stale);
    assert_eq!(view.leader(&orders(), 0), Some(BrokerId(1)));
    let ignored = &applied.older_epochs_ignored;
    assert!(!ignored.is_empty(), "the driver is told what was ignored");
    assert!(ignored.iter().all(|o| (o.kept, o.ignored) == (7, 6)));
    assert!(
        ignored
            .iter()
            .any(|o| o.topic == name("orders") && o.partition == 0)
    );
    // The same with a newer epoch wins.
    let mut newer = fixtures::metadata_response(8);
    newer.topics[0].partitions[0].leader_id = BrokerId(3);
    let applied = view.apply_metadata(12, &newer);
    assert_eq!(applied.older_epochs_ignored, []);
    assert_eq!(view.leader(&orders(), 0), Some(BrokerId(3)));
    // Recreated (new id): epochs restart and the new topic wins.
    let old_id = view.topic_id(&name("orders")).unwrap();
    let mut recreated = fixtures::metadata_response(0);
    recreated.topics[0].topic_id = "11111111-2222-3333-4444-555555555555".parse().unwrap();
    view.apply_metadata(12, &recreated);
    assert_eq!(view.leader(&orders(), 0), Some(BrokerId(1)));
    assert_ne!(view.topic_id(&name("orders")), Some(old_id));
    assert_eq!(view.topic_name(old_id), None);
    // Metadata < v7 carries no epoch (-1): it is taken as is, and keeps the id.
    let mut old_version = fixtures::metadata_response(0);
    old_version.topics[0].partitions[0].leader_id = BrokerId(2);
    view.apply_metadata(4, &metadata_at(4, old_version));
    assert_eq!(view.leader(&orders(), 0), Some(BrokerId(2)));
    assert!(view.topic_id(&name("orders")).is_some());
}

/// A partition as (index, leader, epoch, replicas, isr, offline).
type Shown = (i32, i32, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// Every partition of `topic` in the view.
fn partitions_of(view: &ClusterView, topic: &'static str) -> Vec<Shown> {
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    view.topic(&TopicRef::Name(name(topic)))
        .unwrap()
        .partitions
        .iter()
        .map(|(i, p)| {
            (
                *i,
                p.leader.0,
                p.leader_epoch,
                ids(&p.replicas),
                ids(&p.isr),
                ids(&p.offline),
            )
        })
        .collect()
}

#[test]
fn a_refresh_leaves_the_view_as_a_fresh_one_from_the_same_answer() {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(5));
    // orders: partition 3 moves (newer epoch, other lists), 11 is gone, 12
    // is new, 5 lags (older epoch); listed out of order, 7 twice (the later
    // one wins, as in a map of the answer).
    let mut next = fixtures::metadata_response(5);
    let parts = &mut next.topics[0].partitions;
    parts[3] = fixtures::partition(3, 2, 6).with_isr_nodes(vec![BrokerId(2)]);
    parts[5] = fixtures::partition(5, 1, 4);
    parts.pop();
    parts.push(fixtures::partition(12, 1, 5));
    parts.swap(0, 1);
    parts.push(fixtures::partition(7, 3, 5));
    let applied = view.apply_metadata(12, &next);
    let older: Vec<_> = applied
        .older_epochs_ignored
        .iter()
        .map(|o| (o.topic.0.to_string(), o.partition, o.kept, o.ignored))
        .collect();
    assert_eq!(older, [("orders".to_owned(), 5, 5, 4)]);
    // What a view that never saw the first answer holds, but for the
    // partition whose older epoch was ignored.
    let mut fresh = ClusterView::new();
    fresh.apply_metadata(12, &next);
    let mut want = partitions_of(&fresh, "orders");
    want[5] = partitions_of(&view, "orders")[5].clone();
    assert_eq!(want[5], (5, 3, 5, vec![3, 1, 2], vec![3, 1], vec![2]));
    assert_eq!(partitions_of(&view, "orders"), want);
    assert_eq!(
        want.iter().map(|p| p.0).collect::<Vec<_>>(),
        (0..11).chain([12]).collect::<Vec<_>>()
    );
    assert_eq!(want[3], (3, 2, 6, vec![2, 3, 1], vec![2], vec![1]));
    assert_eq!(want[7].1, 3, "the later of two entries wins");
    assert_eq!(
        partitions_of(&view, "events"),
        partitions_of(&fresh, "events")
    );
}

#[test]
fn a_refresh_keeps_the_partition_lists_memory() {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(5));
    let lists = |view: &ClusterView| {
        let p = view.partition(&orders(), 0).unwrap();
        (p.replicas.as_ptr(), p.isr.as_ptr())
    };
    let before = lists(&view);
    // Unchanged, then a new leader at a newer epoch with lists of the same
    // lengths: the entry is updated where it is.
    view.apply_metadata(12, &fixtures::metadata_response(5));
    assert_eq!(lists(&view), before);
    let mut moved = fixtures::metadata_response(6);
    moved.topics[0].partitions[0] = fixtures::partition(0, 2, 6);
    view.apply_metadata(12, &moved);
    assert_eq!(lists(&view), before);
    assert_eq!(view.leader(&orders(), 0), Some(BrokerId(2)));
    assert_eq!(
        view.partition(&orders(), 0).unwrap().replicas,
        [BrokerId(2), BrokerId(3), BrokerId(1)]
    );
}

#[test]
fn a_refresh_learns_an_id_and_keeps_it() {
    let mut view = ClusterView::new();
    view.apply_metadata(4, &metadata_at(4, fixtures::metadata_response(5)));
    assert_eq!(view.topic_id(&name("orders")), None);
    view.apply_metadata(12, &fixtures::metadata_response(5));
    let id = view.topic_id(&name("orders")).unwrap();
    assert_eq!(view.topic_name(id), Some(&name("orders")));
    // An answer without ids (v4) keeps it.
    view.apply_metadata(4, &metadata_at(4, fixtures::metadata_response(5)));
    assert_eq!(view.topic_id(&name("orders")), Some(id));
    assert_eq!(view.topic_name(id), Some(&name("orders")));
}

#[test]
fn brokers_are_replaced_and_errors_forget() {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(1));
    let mut fewer = fixtures::metadata_response(1);
    fewer.brokers.truncate(2);
    fewer.controller_id = BrokerId(1);
    let applied = view.apply_metadata(12, &fewer);
    assert_eq!(applied.removed_brokers, [BrokerId(3)]);
    assert!(applied.controller_changed);
    assert!(view.broker(BrokerId(3)).is_none());
    // Top-level error (v13): nothing changes.
    let failed =
        MetadataResponse::default().with_error_code(ResponseError::RebootstrapRequired.code());
    assert_eq!(view.apply_metadata(13, &failed), MetadataApplied::default());
    assert_eq!(view.brokers().count(), 2);
    // The topic is deleted.
    let mut deleted = fixtures::metadata_response(1);
    deleted.topics[0].error_code = 3;
    view.apply_metadata(12, &deleted);
    assert!(view.topic(&orders()).is_none());
}

#[test]
fn forget_helpers() {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(4));
    assert!(view.forget_leader(&orders(), 1));
    assert_eq!(view.leader(&orders(), 1), None);
    assert!(!view.forget_leader(&orders(), 99));
    // The same epoch from a refresh restores the leader.
    view.apply_metadata(12, &fixtures::metadata_response(4));
    assert_eq!(view.leader(&orders(), 1), Some(BrokerId(2)));
    let id = view.topic_id(&name("orders")).unwrap();
    assert!(view.forget_topic(&TopicRef::Id(id)));
    assert!(view.topic(&orders()).is_none());
    assert!(!view.forget_topic(&orders()));
    view.forget_controller();
    assert_eq!(view.controller(), None);
}

#[test]
fn any_broker_goes_round() {
    let mut view = ClusterView::new();
    assert_eq!(view.any_broker(), None);
    view.apply_metadata(12, &fixtures::metadata_response(1));
    let mut seen: Vec<i32> = (0..6).map(|_| view.any_broker().unwrap().0).collect();
    seen.sort_unstable();
    assert_eq!(seen, [1, 1, 2, 2, 3, 3]);
}

fn find_coordinator_at(version: i16, resp: FindCoordinatorResponse) -> FindCoordinatorResponse {
    let wire = through_wire(
        ApiKey::FindCoordinator,
        version,
        ResponseKind::FindCoordinator(resp),
    );
    match wire.into_body().unwrap() {
        ResponseKind::FindCoordinator(r) => r,
        other => panic!("unexpected body {other:?}"),
    }
}

#[test]
fn coordinators_from_find_coordinator_v0_to_v6() {
    let key = StrBytes::from_static_str("group-a");
    for version in 0..=3 {
        let mut view = ClusterView::new();
        let resp = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(3))
            .with_host(StrBytes::from_static_str("kafka-3.internal.corp"))
            .with_port(19094);
        let resp = find_coordinator_at(version, resp);
        view.apply_find_coordinator(version, CoordinatorKeyType::Group, None, &resp);
        assert_eq!(view.coordinator(CoordinatorKeyType::Group, "group-a"), None);
        view.apply_find_coordinator(version, CoordinatorKeyType::Group, Some(&key), &resp);
        assert_eq!(
            view.coordinator(CoordinatorKeyType::Group, "group-a"),
            Some(BrokerId(3)),
            "v{version}"
        );
        assert_eq!(
            view.coordinator(CoordinatorKeyType::Transaction, "group-a"),
            None
        );
        // The coordinator's broker is reachable before any Metadata.
        assert!(view.broker_address(BrokerId(3)).is_some());
        let failed = FindCoordinatorResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code())
            .with_node_id(BrokerId(-1));
        view.apply_find_coordinator(version, CoordinatorKeyType::Group, Some(&key), &failed);
        assert_eq!(view.coordinator(CoordinatorKeyType::Group, "group-a"), None);
    }
    for version in 4..=6 {
        let mut view = ClusterView::new();
        let coordinator = |key: &'static str, id: i32, error: i16| {
            Coordinator::default()
                .with_key(StrBytes::from_static_str(key))
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_static_str("kafka-1.internal.corp"))
                .with_port(19092)
                .with_error_code(error)
        };
        let resp = FindCoordinatorResponse::default()
            .with_coordinators(vec![coordinator("txn-1", 1, 0), coordinator("txn-2", 2, 0)]);
        let resp = find_coordinator_at(version, resp);
        view.apply_find_coordinator(version, CoordinatorKeyType::Transaction, None, &resp);
        let txn = CoordinatorKeyType::Transaction;
        assert_eq!(view.coordinator(txn, "txn-1"), Some(BrokerId(1)));
        assert_eq!(view.coordinator(txn, "txn-2"), Some(BrokerId(2)));
        let resp = FindCoordinatorResponse::default()
            .with_coordinators(vec![coordinator("txn-2", -1, 15)]);
        view.apply_find_coordinator(version, txn, None, &resp);
        assert_eq!(view.coordinator(txn, "txn-2"), None);
        assert!(view.forget_coordinator(txn, "txn-1"));
        assert!(!view.forget_coordinator(txn, "txn-1"));
    }
}

#[test]
fn coordinator_key_types() {
    for t in [
        CoordinatorKeyType::Group,
        CoordinatorKeyType::Transaction,
        CoordinatorKeyType::Share,
    ] {
        assert_eq!(CoordinatorKeyType::try_from(t.as_i8()), Ok(t));
    }
    assert_eq!(CoordinatorKeyType::try_from(7), Err(7));
}
