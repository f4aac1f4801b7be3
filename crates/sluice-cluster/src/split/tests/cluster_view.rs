//! The sink's `ClusterView`, filled from real Metadata and FindCoordinator
//! responses, routes splits exactly as the fake cluster does.

use sluice_codec::kafka_protocol::messages::find_coordinator_response::Coordinator;
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{
    DescribeGroupsRequest, FindCoordinatorResponse, ListGroupsRequest, MetadataResponse,
    ProduceRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::super::SplitApi;
use super::produce::produce_request;
use super::*;
use crate::topology::ClusterView;

const METADATA_VERSION: i16 = 12;
const FIND_COORDINATOR_VERSION: i16 = 4;

/// The fake cluster's layout, as brokers would describe it.
fn view() -> ClusterView {
    let brokers = (1..=3).map(|id| {
        MetadataResponseBroker::default()
            .with_node_id(broker(id))
            .with_host(StrBytes::from_string(format!("broker-{id}.internal")))
            .with_port(9092)
    });
    let leaders: [&[i32]; 2] = [&[1, 2, 3], &[2, 1]];
    let topics = leaders.iter().enumerate().map(|(t, leaders)| {
        let (text, id, _, _) = TOPICS[t];
        let partitions = leaders.iter().enumerate().map(|(p, leader)| {
            MetadataResponsePartition::default()
                .with_partition_index(p as i32)
                .with_leader_id(broker(*leader))
                .with_leader_epoch(1)
                .with_replica_nodes(vec![broker(*leader)])
                .with_isr_nodes(vec![broker(*leader)])
        });
        MetadataResponseTopic::default()
            .with_name(Some(name(text)))
            .with_topic_id(uuid!(id))
            .with_partitions(partitions.collect())
    });
    let metadata = MetadataResponse::default()
        .with_brokers(brokers.collect())
        .with_controller_id(broker(1))
        .with_topics(topics.collect());
    let metadata = kind!(
        ResponseKind::Metadata,
        broker_roundtrip(ApiKey::Metadata, METADATA_VERSION, metadata)
    );
    let coordinators = [("g-one", 1), ("g-two", 2), ("g-three", 3)].map(|(key, id)| {
        Coordinator::default()
            .with_key(StrBytes::from_static_str(key))
            .with_node_id(broker(id))
            .with_host(StrBytes::from_string(format!("broker-{id}.internal")))
            .with_port(9092)
    });
    let found = FindCoordinatorResponse::default().with_coordinators(coordinators.to_vec());
    let found = kind!(
        ResponseKind::FindCoordinator,
        broker_roundtrip(ApiKey::FindCoordinator, FIND_COORDINATOR_VERSION, found)
    );
    let mut view = ClusterView::new();
    view.apply_metadata(METADATA_VERSION, &metadata);
    view.apply_find_coordinator(
        FIND_COORDINATOR_VERSION,
        CoordinatorKeyType::Group,
        None,
        &found,
    );
    view
}

#[test]
fn cluster_view_routes_like_the_fake_cluster() {
    let view = view();
    let fake = FakeCluster::three_brokers();
    for version in [9, 13] {
        let request = produce_request(version);
        let by_view = request.split(version, &view);
        let by_fake = ProduceRequest::split(&request, version, &fake);
        assert_eq!(by_view.parts, by_fake.parts, "produce v{version}");
        assert_eq!(by_view.unroutable, by_fake.unroutable, "produce v{version}");
    }
    let request = DescribeGroupsRequest::default().with_groups(GROUPS.map(group).to_vec());
    let by_view = request.split(5, &view);
    let by_fake = request.split(5, &fake);
    assert_eq!(by_view.parts, by_fake.parts, "describe groups");
    assert_eq!(by_view.unroutable, by_fake.unroutable, "describe groups");

    let split = ListGroupsRequest::default().split(5, &view);
    let brokers: Vec<i32> = split.parts.iter().map(|(b, _)| b.0).collect();
    assert_eq!(brokers, [1, 2, 3], "fan-out to every broker, by id");
}
