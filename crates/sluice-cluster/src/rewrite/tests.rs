//! Rewrite tests on real encoded responses: each response is built with
//! `kafka-protocol`, encoded and framed as a broker would send it, parsed,
//! rewritten through `body_mut()`, encoded again and parsed again, and then
//! checked field by field and byte by byte for leaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::BytesMut;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use sluice_codec::kafka_protocol::messages::find_coordinator_response::{
    Coordinator, FindCoordinatorResponse,
};
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeGroupsResponse, ResponseKind,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::*;
use crate::topology::fixtures::{
    self, REAL_CONTROLLER, SLUICE, assert_no_real_hosts, name, reparse, through_wire, wire_bytes,
};
use crate::topology::{Address, ClusterView, ShotoverNode, SluiceNodes};

mod api_versions;
mod configs;
mod leader_hints;
mod topic_partitions;

const UP: [i32; 5] = [100, 101, 102, 103, 104];

/// Unwraps one `ResponseKind` variant.
macro_rules! body {
    ($variant:ident, $kind:expr) => {
        match $kind {
            ResponseKind::$variant(body) => body,
            other => panic!("expected a {} answer, got {other:?}", stringify!($variant)),
        }
    };
}
pub(super) use body;

fn view() -> ClusterView {
    let mut view = ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(5));
    view
}

/// Sends `body` through the wire, rewrites it, and returns the bytes the
/// client would receive and their decoded body.
fn rewrite_wire(
    api: ApiKey,
    version: i16,
    body: ResponseKind,
    view: &ClusterView,
    nodes: &[ShotoverNode],
    key: Option<&str>,
) -> (BytesMut, ResponseKind) {
    let mut resp = through_wire(api, version, body);
    let rewriter = Rewriter::new(view, nodes).unwrap();
    assert!(rewriter.rewrite_response(&mut resp, key).unwrap());
    assert!(resp.is_dirty());
    let bytes = wire_bytes(&resp);
    assert_no_real_hosts(&bytes);
    let body = reparse(&bytes, api, version).into_body().unwrap();
    (bytes, body)
}

/// [`rewrite_wire`] against [`view`] and the fixture's Sluice nodes.
fn rewritten(
    api: ApiKey,
    version: i16,
    body: ResponseKind,
    key: Option<&str>,
) -> (BytesMut, ResponseKind) {
    let nodes = fixtures::sluice_nodes().snapshot();
    rewrite_wire(api, version, body, &view(), &nodes, key)
}

fn rewrite_metadata(
    version: i16,
    resp: MetadataResponse,
    view: &ClusterView,
    nodes: &[ShotoverNode],
) -> (BytesMut, MetadataResponse) {
    let body = ResponseKind::Metadata(resp);
    let (bytes, body) = rewrite_wire(ApiKey::Metadata, version, body, view, nodes, None);
    (bytes, body!(Metadata, body))
}

fn sluice_address(id: i32) -> (&'static str, i32, &'static str) {
    let (_, host, port, rack) = SLUICE.iter().find(|n| n.0 == id).copied().unwrap();
    (host, port, rack)
}

/// Checks the ids of a rewritten partition of the fixture cluster: its
/// `replicas` and the further `ids` it names are up Sluice nodes; with no
/// error it is led by one, listed first, else it stays leaderless; the
/// replicas are distinct and as many as the real ones (three).
fn assert_partition_ids<'a>(
    error_code: i16,
    leader: BrokerId,
    replicas: &'a [BrokerId],
    ids: impl IntoIterator<Item = &'a BrokerId>,
    what: &str,
) {
    for id in replicas.iter().chain(ids) {
        assert!(UP.contains(&id.0), "{what}: {id:?}");
    }
    if error_code == 0 {
        assert!(UP.contains(&leader.0), "{what}: leader {leader:?}");
        assert_eq!(replicas[0], leader, "{what}: leader first");
    } else {
        assert_eq!(
            leader.0, -1,
            "{what}: a leaderless partition stays leaderless"
        );
    }
    let distinct: BTreeSet<_> = replicas.iter().collect();
    assert_eq!(
        distinct.len(),
        3,
        "{what}: distinct, as many as the real list"
    );
}

/// Leaders of a topic's partitions, by partition index.
fn leaders(resp: &MetadataResponse, topic: &str) -> BTreeMap<i32, i32> {
    let t = resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| &*n.0 == topic))
        .unwrap();
    t.partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect()
}

#[test]
fn metadata_every_version_names_only_up_sluice_nodes() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let view = view();
    for version in [0, 1, 4, 7, 9, 10, 12, 13] {
        let (_, m) = rewrite_metadata(version, fixtures::metadata_response(5), &view, &nodes);
        let ids: Vec<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
        assert_eq!(ids, UP, "v{version}: brokers are the up nodes");
        for b in &m.brokers {
            let (host, port, rack) = sluice_address(b.node_id.0);
            assert_eq!((&*b.host, b.port), (host, port));
            let want_rack = (version >= 1).then_some(rack);
            assert_eq!(b.rack.as_deref(), want_rack, "v{version}");
        }
        if version >= 1 {
            assert!(UP.contains(&m.controller_id.0), "v{version}: controller");
        }
        if version >= 2 {
            assert_eq!(m.cluster_id.as_deref(), Some("real-cluster-id"));
        }
        for topic in &m.topics {
            for p in &topic.partitions {
                let ids = p.isr_nodes.iter().chain(&p.offline_replicas);
                let what = format!("v{version}: partition {}", p.partition_index);
                assert_partition_ids(p.error_code, p.leader_id, &p.replica_nodes, ids, &what);
                assert_eq!(p.isr_nodes, p.replica_nodes[..2], "isr: a prefix");
                if version >= 5 {
                    assert_eq!(
                        p.offline_replicas,
                        p.replica_nodes[2..],
                        "offline: a suffix"
                    );
                }
                if version >= 7 {
                    assert_eq!(p.leader_epoch, 5, "epochs stay real");
                }
            }
        }
        let missing = m
            .topics
            .iter()
            .find(|t| t.error_code == ResponseError::UnknownTopicOrPartition.code())
            .unwrap();
        assert!(missing.partitions.is_empty());
    }
}

#[test]
fn metadata_prefers_the_leaders_rack_and_spreads() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let (_, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
    let orders = leaders(&m, "orders");
    let mut per_node: BTreeMap<i32, usize> = BTreeMap::new();
    for (partition, leader) in &orders {
        // Real leaders: partition % 3 + 1 (racks a, b, c).
        match partition % 3 {
            0 => assert!([100, 101].contains(leader), "rack-a → rack-a node"),
            1 => assert!([102, 103].contains(leader), "rack-b → rack-b node"),
            _ => assert!(UP.contains(leader), "rack-c has no up node: any up node"),
        }
        *per_node.entry(*leader).or_default() += 1;
    }
    assert!(per_node.len() >= 4, "leadership spreads: {per_node:?}");

    // Many partitions led by one rack-a broker split over both rack-a nodes.
    let many = one_topic_response("wide", 400, 1);
    let (_, m) = rewrite_metadata(12, many, &view(), &nodes);
    let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
    for leader in leaders(&m, "wide").values() {
        *counts.entry(*leader).or_default() += 1;
    }
    assert_eq!(counts.keys().copied().collect::<Vec<_>>(), [100, 101]);
    assert!(counts.values().all(|&c| c > 150), "even spread: {counts:?}");
}

/// `count` Sluice nodes 0.. in one rack, all up.
fn rackless_nodes(count: i32) -> Vec<ShotoverNode> {
    (0..count)
        .map(|id| ShotoverNode {
            broker_id: BrokerId(id),
            rack: StrBytes::from_static_str("rack0"),
            address_for_clients: Address::new(StrBytes::from_static_str("sluice"), 9192 + id),
            address_for_peers: Address::new(StrBytes::from_static_str("sluice"), 9292 + id),
            up: true,
        })
        .collect()
}

/// Which Sluice nodes show the partitions of `orders` each real broker
/// leads, with brokers and nodes in no common rack (the usual single-rack
/// setup: brokers without `broker.rack`).
fn nodes_per_broker(nodes: &[ShotoverNode]) -> BTreeMap<i32, BTreeSet<i32>> {
    let mut resp = fixtures::metadata_response(5);
    for broker in &mut resp.brokers {
        broker.rack = None;
    }
    let mut view = ClusterView::new();
    view.apply_metadata(12, &resp);
    let (_, m) = rewrite_metadata(12, resp, &view, nodes);
    let mut per_broker: BTreeMap<i32, BTreeSet<i32>> = BTreeMap::new();
    for (partition, leader) in leaders(&m, "orders") {
        // Real leaders: partition % 3 + 1.
        per_broker
            .entry(partition % 3 + 1)
            .or_default()
            .insert(leader);
    }
    per_broker
}

#[test]
fn leaders_follow_whole_brokers() {
    // As many nodes as brokers: each node stands for exactly one broker.
    let one_each = nodes_per_broker(&rackless_nodes(3));
    assert_eq!(
        one_each
            .values()
            .map(|n| n.iter().copied().collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        [vec![0], vec![1], vec![2]],
        "brokers 1, 2, 3 (ranks 0, 1, 2) on nodes 0, 1, 2"
    );
    // Fewer: each node stands for whole brokers.
    let fewer = nodes_per_broker(&rackless_nodes(2));
    assert!(fewer.values().all(|n| n.len() == 1), "{fewer:?}");
    assert_eq!(fewer[&1], fewer[&3], "ranks 0 and 2 share node 0");
    assert_ne!(fewer[&1], fewer[&2]);
    // More: a broker's partitions spread over the nodes of its rank modulo 3.
    let more = nodes_per_broker(&rackless_nodes(7));
    let slots = [
        BTreeSet::from([0, 3, 6]),
        BTreeSet::from([1, 4]),
        BTreeSet::from([2, 5]),
    ];
    for (broker, slots) in (1..=3).zip(&slots) {
        assert!(more[&broker].is_subset(slots), "{broker}: {more:?}");
    }
    assert!(more[&1].len() > 1, "spread by partition: {more:?}");
}

/// The Sluice node shown for each partition of `orders` by `nodes`, with
/// `resp` applied to a fresh view (so the view knows only what `resp` says).
fn shown_orders(resp: &MetadataResponse, nodes: &[ShotoverNode]) -> BTreeMap<i32, i32> {
    let mut view = ClusterView::new();
    view.apply_metadata(12, resp);
    let (_, m) = rewrite_metadata(12, resp.clone(), &view, nodes);
    leaders(&m, "orders")
}

#[test]
fn a_fenced_broker_moves_only_the_partitions_it_led() {
    // Two Sluice nodes, three brokers without racks: brokers 1 and 3 share
    // a node. Broker 2 is fenced (killed or hung): the broker list drops it,
    // its partitions get new leaders (1 here), and it stays an offline
    // replica of every partition.
    let nodes = rackless_nodes(2);
    let mut before = fixtures::metadata_response(5);
    for broker in &mut before.brokers {
        broker.rack = None;
    }
    let mut after = before.clone();
    after.brokers.retain(|b| b.node_id.0 != 2);
    for topic in &mut after.topics {
        for p in &mut topic.partitions {
            if p.leader_id.0 == 2 {
                p.leader_id = BrokerId(1);
                p.leader_epoch += 1;
            }
            p.isr_nodes.retain(|r| r.0 != 2);
            if !p.offline_replicas.contains(&BrokerId(2)) {
                p.offline_replicas.push(BrokerId(2));
            }
        }
    }
    let (was, now) = (shown_orders(&before, &nodes), shown_orders(&after, &nodes));
    // Real leaders before: partition % 3 + 1.
    for (partition, shown) in &was {
        if partition % 3 + 1 != 2 {
            assert_eq!(
                now[partition],
                *shown,
                "partition {partition} (led by broker {} throughout) moved between \
                 Sluice nodes when broker 2 was fenced: before {was:?}, after {now:?}",
                partition % 3 + 1
            );
        } else {
            assert_eq!(
                now[partition], was[&0],
                "now led by broker 1: shown with its partitions"
            );
        }
    }
}

/// A response with one topic of `partitions` partitions, all led by `leader`.
fn one_topic_response(topic: &'static str, partitions: i32, leader: i32) -> MetadataResponse {
    let mut resp = fixtures::metadata_response(1);
    let partitions = (0..partitions)
        .map(|i| {
            MetadataResponsePartition::default()
                .with_partition_index(i)
                .with_leader_id(BrokerId(leader))
                .with_replica_nodes(vec![BrokerId(leader)])
                .with_isr_nodes(vec![BrokerId(leader)])
        })
        .collect();
    resp.topics = vec![
        MetadataResponseTopic::default()
            .with_name(Some(name(topic)))
            .with_partitions(partitions),
    ];
    resp
}

#[test]
fn metadata_without_racks_spreads_over_all_up_nodes() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let mut resp = one_topic_response("flat", 500, 2);
    for b in &mut resp.brokers {
        b.rack = None;
    }
    let (_, m) = rewrite_metadata(12, resp.clone(), &ClusterView::new(), &nodes);
    let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
    for leader in leaders(&m, "flat").values() {
        *counts.entry(*leader).or_default() += 1;
    }
    assert_eq!(counts.keys().copied().collect::<Vec<_>>(), UP);
    assert!(counts.values().all(|&c| c > 60), "even spread: {counts:?}");
    // v0 carries no racks: the view's racks are used instead.
    let (_, m) = rewrite_metadata(0, one_topic_response("flat", 50, 2), &view(), &nodes);
    assert!(leaders(&m, "flat").values().all(|l| [102, 103].contains(l)));
}

#[test]
fn metadata_excludes_down_nodes_and_falls_back() {
    let sluice = fixtures::sluice_nodes();
    sluice.set_up(BrokerId(102), false);
    sluice.set_up(BrokerId(103), false);
    let nodes = sluice.snapshot();
    let (bytes, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
    let ids: Vec<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
    assert_eq!(ids, [100, 101, 104]);
    for leader in leaders(&m, "orders").values() {
        assert!([100, 101, 104].contains(leader));
    }
    for id in [102, 103, 105] {
        let host = sluice_address(id).0;
        let found = bytes.windows(host.len()).any(|w| w == host.as_bytes());
        assert!(!found, "down node {host} advertised");
    }
}

/// A leaving local node (100) is rewritten away like a down peer: what it
/// stood for is shown on the remaining nodes, exactly as a peer that sees it
/// down shows it.
#[test]
fn a_leaving_local_node_is_shown_like_a_down_one() {
    let leaving = fixtures::sluice_nodes();
    assert!(leaving.set_leaving(std::time::Instant::now()));
    // What a peer shows once its health check finds 100 gone.
    let mut peer_view = fixtures::sluice_nodes().snapshot();
    for node in &mut peer_view {
        node.up &= node.broker_id.0 != 100;
    }
    let leaving = leaving.snapshot();
    let (bytes, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &leaving);
    let ids: Vec<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
    assert_eq!(ids, [101, 102, 103, 104], "the leaving node is not listed");
    let host = sluice_address(100).0;
    assert!(
        !bytes.windows(host.len()).any(|w| w == host.as_bytes()),
        "the leaving node is not advertised"
    );
    let (_, seen_by_peer) =
        rewrite_metadata(12, fixtures::metadata_response(5), &view(), &peer_view);
    assert_eq!(
        leaders(&m, "orders"),
        leaders(&seen_by_peer, "orders"),
        "its own answer and its peers' agree"
    );
    assert!(leaders(&m, "orders").values().all(|l| *l != 100));
    assert_ne!(m.controller_id.0, 100);
    let coordinator = |nodes: &[ShotoverNode]| {
        let real = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("kafka-1.internal"))
            .with_port(9092);
        let body = ResponseKind::FindCoordinator(real);
        let (_, body) = rewrite_wire(
            ApiKey::FindCoordinator,
            3,
            body,
            &view(),
            nodes,
            Some("group-a"),
        );
        body!(FindCoordinator, body).node_id.0
    };
    assert_eq!(coordinator(&leaving), coordinator(&peer_view));
    assert_ne!(coordinator(&leaving), 100);
}

#[test]
fn metadata_is_deterministic_across_rewriters_and_versions() {
    let a = fixtures::sluice_nodes().snapshot();
    let b = fixtures::sluice_nodes().snapshot();
    let (bytes_a, ma) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &a);
    let (bytes_b, _) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &b);
    assert_eq!(bytes_a, bytes_b, "same input, same bytes");
    // Another Metadata version.
    let (_, m4) = rewrite_metadata(4, fixtures::metadata_response(5), &view(), &a);
    assert_eq!(leaders(&ma, "orders"), leaders(&m4, "orders"));
    assert_eq!(ma.controller_id, m4.controller_id);
    // An empty view (racks from the response): brokers it does not rank yet
    // are placed by the partition hash, still on up nodes in their rack.
    let (_, empty) = rewrite_metadata(4, fixtures::metadata_response(5), &ClusterView::new(), &a);
    assert_eq!(ma.controller_id, empty.controller_id);
    for (partition, leader) in leaders(&empty, "orders") {
        match partition % 3 {
            0 => assert!([100, 101].contains(&leader), "rack-a → rack-a node"),
            1 => assert!([102, 103].contains(&leader), "rack-b → rack-b node"),
            _ => assert!(UP.contains(&leader)),
        }
    }
}

#[test]
fn metadata_topic_by_id_agrees_with_topic_by_name() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let view = view();
    let (_, by_name) = rewrite_metadata(13, fixtures::metadata_response(5), &view, &nodes);
    let mut resp = fixtures::metadata_response(5);
    resp.topics[0].name = None;
    let (_, by_id) = rewrite_metadata(13, resp, &view, &nodes);
    let id_leaders: BTreeMap<i32, i32> = by_id.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    assert_eq!(leaders(&by_name, "orders"), id_leaders);
}

#[test]
fn controller_stays_in_its_rack() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let (_, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
    assert_eq!(REAL_CONTROLLER, 2);
    assert!([102, 103].contains(&m.controller_id.0), "rack-b controller");
    let mut none = fixtures::metadata_response(5);
    none.controller_id = BrokerId(-1);
    let (_, m) = rewrite_metadata(12, none, &view(), &nodes);
    assert_eq!(m.controller_id.0, -1);
}

fn rewrite_find_coordinator(
    version: i16,
    resp: FindCoordinatorResponse,
    key: Option<&str>,
) -> FindCoordinatorResponse {
    let body = ResponseKind::FindCoordinator(resp);
    body!(
        FindCoordinator,
        rewritten(ApiKey::FindCoordinator, version, body, key).1
    )
}

#[test]
fn find_coordinator_v0_to_v3() {
    for version in 0..=3 {
        let real = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("kafka-2.internal.corp"))
            .with_port(19093);
        let f = rewrite_find_coordinator(version, real.clone(), Some("group-1"));
        assert!([102, 103].contains(&f.node_id.0), "v{version}: rack-b node");
        let (host, port, _) = sluice_address(f.node_id.0);
        assert_eq!((&*f.host, f.port), (host, port));
        let again = rewrite_find_coordinator(version, real.clone(), Some("group-1"));
        assert_eq!(again.node_id, f.node_id, "deterministic");
        let without_key = rewrite_find_coordinator(version, real, None);
        assert!([102, 103].contains(&without_key.node_id.0));
        // Errors keep their code and name no node.
        let error = FindCoordinatorResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code())
            .with_error_message(Some(StrBytes::from_static_str("not available")))
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("kafka-2.internal.corp"))
            .with_port(19093);
        let f = rewrite_find_coordinator(version, error, Some("group-1"));
        assert_eq!(
            (f.error_code, f.node_id.0, &*f.host, f.port),
            (15, -1, "", -1)
        );
    }
}

#[test]
fn find_coordinator_v4_plus_batches() {
    let coordinator = |key: String, id: i32, error: i16| {
        let (_, host, port, _) = fixtures::REAL_BROKERS[(id.max(1) - 1) as usize];
        Coordinator::default()
            .with_key(StrBytes::from_string(key))
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_static_str(host))
            .with_port(port)
            .with_error_code(error)
    };
    for version in 4..=6 {
        let mut list: Vec<_> = (0..40)
            .map(|i| coordinator(format!("g{i}"), 1, 0))
            .collect();
        list.push(coordinator("c".to_owned(), 3, 0));
        list.push(coordinator("bad".to_owned(), 2, 16));
        let resp = FindCoordinatorResponse::default().with_coordinators(list);
        let f = rewrite_find_coordinator(version, resp, None);
        let mut used = BTreeSet::new();
        for c in &f.coordinators[..40] {
            assert!([100, 101].contains(&c.node_id.0), "rack-a coordinator");
            let (host, port, _) = sluice_address(c.node_id.0);
            assert_eq!((&*c.host, c.port), (host, port));
            used.insert(c.node_id.0);
        }
        assert_eq!(used.len(), 2, "keys spread over the rack's nodes");
        assert!(
            UP.contains(&f.coordinators[40].node_id.0),
            "rack-c: any up node"
        );
        let bad = &f.coordinators[41];
        assert_eq!((bad.error_code, bad.node_id.0, bad.port), (16, -1, -1));
        assert_eq!(&*bad.key, "bad", "keys are kept");
    }
}

/// A DescribeCluster answer through [`rewritten`].
fn describe_cluster(version: i16, real: DescribeClusterResponse) -> DescribeClusterResponse {
    let body = ResponseKind::DescribeCluster(real);
    body!(
        DescribeCluster,
        rewritten(ApiKey::DescribeCluster, version, body, None).1
    )
}

#[test]
fn describe_cluster_names_only_sluice_nodes() {
    let nodes = fixtures::sluice_nodes().snapshot();
    for version in 0..=2 {
        let brokers = fixtures::REAL_BROKERS
            .iter()
            .map(|&(id, host, port, rack)| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(id))
                    .with_host(StrBytes::from_static_str(host))
                    .with_port(port)
                    .with_rack(Some(StrBytes::from_static_str(rack)))
            })
            .collect();
        let real = DescribeClusterResponse::default()
            .with_cluster_id(StrBytes::from_static_str("real-cluster-id"))
            .with_controller_id(BrokerId(2))
            .with_brokers(brokers);
        let d = describe_cluster(version, real.clone());
        let ids: Vec<i32> = d.brokers.iter().map(|b| b.broker_id.0).collect();
        assert_eq!(ids, UP);
        assert!(d.brokers.iter().all(|b| !b.is_fenced));
        assert!([102, 103].contains(&d.controller_id.0));
        assert_eq!(&*d.cluster_id, "real-cluster-id");
        // The same controller as Metadata names.
        let (_, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
        assert_eq!(m.controller_id, d.controller_id);
        let d = describe_cluster(
            version,
            real.with_error_code(ResponseError::ClusterAuthorizationFailed.code()),
        );
        assert!(d.brokers.is_empty());
        assert_eq!((d.error_code, d.controller_id.0), (31, -1));
    }
}

#[test]
fn other_responses_are_left_undecoded() {
    let nodes = fixtures::sluice_nodes().snapshot();
    let view = view();
    let rewriter = Rewriter::new(&view, &nodes).unwrap();
    let body = ResponseKind::DescribeGroups(DescribeGroupsResponse::default());
    let mut resp = through_wire(ApiKey::DescribeGroups, 5, body);
    assert!(!rewriter.rewrite_response(&mut resp, None).unwrap());
    assert!(!rewriter.rewrite_leader_hints(&mut resp).unwrap());
    assert!(!resp.is_dirty());
}

#[test]
fn no_up_node_is_an_error() {
    let mut nodes = fixtures::sluice_nodes().snapshot();
    for n in &mut nodes {
        n.up = false;
    }
    let view = view();
    let err = Rewriter::new(&view, &nodes).unwrap_err();
    assert!(matches!(err, RewriteError::NoSluiceNodeUp));
    assert_eq!(err.side(), sluice_error::ErrorSide::Internal);
    let _: SluiceNodes = fixtures::sluice_nodes();
}

#[test]
fn metadata_broker_entries_are_exactly_the_nodes() {
    // Guards the broker entry shape used by the rewrite.
    let nodes = fixtures::sluice_nodes().snapshot();
    let (_, m) = rewrite_metadata(12, fixtures::metadata_response(5), &view(), &nodes);
    let first = MetadataResponseBroker::default()
        .with_node_id(BrokerId(100))
        .with_host(StrBytes::from_static_str("sluice-0.example.com"))
        .with_port(9192)
        .with_rack(Some(StrBytes::from_static_str("rack-a")));
    assert_eq!(m.brokers[0], first);
}

/// The per-partition rule as written out in the module docs, deciding
/// everything afresh for each partition: what the rewrite, which decides a
/// leader's rack and rank once per response and reuses the lists' memory,
/// must show.
fn reference_partition(
    rewriter: &Rewriter<'_>,
    topic: &[u8],
    listed: &[(BrokerId, Option<StrBytes>)],
    p: &MetadataResponsePartition,
) -> (BrokerId, Vec<BrokerId>, Vec<BrokerId>, Vec<BrokerId>) {
    let hash = choose::stable_hash(&[b"partition", topic, &p.partition_index.to_be_bytes()]);
    let leader = (p.leader_id.0 >= 0).then(|| {
        let rack = rewriter.rack_of(p.leader_id, listed);
        rewriter
            .chooser
            .pick_leader(p.leader_id, rack, rewriter.ranks(), hash)
    });
    let up = rewriter.chooser.up();
    let n = up.len();
    let start = leader
        .and_then(|l| up.iter().position(|u| u.broker_id == l.broker_id))
        .unwrap_or((hash % n as u64) as usize);
    let replicas: Vec<BrokerId> = (0..p.replica_nodes.len().min(n))
        .map(|k| up[(start + k) % n].broker_id)
        .collect();
    let isr = p.isr_nodes.len().min(replicas.len());
    let offline = p.offline_replicas.len().min(replicas.len() - isr);
    (
        leader.map_or(BrokerId(-1), |l| l.broker_id),
        replicas.clone(),
        replicas[..isr].to_vec(),
        replicas[replicas.len() - offline..].to_vec(),
    )
}

#[test]
fn many_partitions_show_what_the_rule_gives_each_one() {
    // Leaders among the listed brokers, one the view knows but the answer
    // does not list (4, rack-a), one nobody knows (9), and none (-1); lists
    // of every length up to longer than the up nodes.
    let mut view = view();
    let mut with_four = fixtures::metadata_response(5);
    with_four.brokers.push(
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(4))
            .with_host(StrBytes::from_static_str("kafka-4.internal.corp"))
            .with_port(19095)
            .with_rack(Some(StrBytes::from_static_str("rack-a"))),
    );
    view.apply_metadata(12, &with_four);
    let nodes = fixtures::sluice_nodes().snapshot();
    let leaders = [1, 2, 3, 4, 9, -1];
    let topics: Vec<MetadataResponseTopic> = (0..12)
        .map(|t| {
            let partitions = (0..40)
                .map(|i: i32| {
                    let ids = |len: usize| (0..len).map(|k| BrokerId(1 + k as i32)).collect();
                    let len = (i as usize * 7 + t) % 8;
                    MetadataResponsePartition::default()
                        .with_partition_index(i)
                        .with_leader_id(BrokerId(leaders[(i as usize + t) % leaders.len()]))
                        .with_leader_epoch(3)
                        .with_replica_nodes(ids(len))
                        .with_isr_nodes(ids(len.saturating_sub(i as usize % 3)))
                        .with_offline_replicas(ids(i as usize % 3))
                })
                .collect();
            MetadataResponseTopic::default()
                .with_name(Some(name(["orders", "events", "t-2", "t-3"][t % 4])))
                .with_partitions(partitions)
        })
        .collect();
    let real = fixtures::metadata_response(5).with_topics(topics);
    let rewriter = Rewriter::new(&view, &nodes).unwrap();
    let listed = listed(&real.brokers);
    let mut rewritten = real.clone();
    rewriter.metadata(&mut rewritten);
    let mut shown = BTreeSet::new();
    for (real_topic, topic) in real.topics.iter().zip(&rewritten.topics) {
        let key = real_topic.name.as_ref().unwrap().0.as_bytes();
        for (real_p, p) in real_topic.partitions.iter().zip(&topic.partitions) {
            let (leader, replicas, isr, offline) =
                reference_partition(&rewriter, key, &listed, real_p);
            let what = format!("{key:?}/{}", p.partition_index);
            assert_eq!(p.leader_id, leader, "{what}: leader");
            assert_eq!(p.replica_nodes, replicas, "{what}: replicas");
            assert_eq!(p.isr_nodes, isr, "{what}: isr");
            assert_eq!(p.offline_replicas, offline, "{what}: offline");
            shown.insert(leader.0);
        }
    }
    assert!(shown.contains(&-1) && shown.len() > 3, "{shown:?}");
}
