//! Produce and Fetch leader hints (KIP-951, KIP-392), on real encoded responses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch as FetchLeader,
    NodeEndpoint as FetchEndpoint, PartitionData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch as ProduceLeader, NodeEndpoint as ProduceEndpoint, PartitionProduceResponse,
    ProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId, ResponseKind};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::super::Rewriter;
use super::{UP, leaders, rewrite_metadata, sluice_address, view};
use crate::api::describe;
use crate::topology::fixtures::{
    self, ORDERS_ID, assert_no_real_hosts, name, reparse, through_wire, wire_bytes,
};

/// The Sluice leader a Metadata response names for `orders` partition 0 once
/// real broker 2 leads it.
fn metadata_leader_of_orders_0_under_broker_2() -> i32 {
    let nodes = fixtures::sluice_nodes().snapshot();
    let mut resp = fixtures::metadata_response(6);
    resp.topics[0].partitions[0].leader_id = BrokerId(2);
    let (_, m) = rewrite_metadata(12, resp, &view(), &nodes);
    leaders(&m, "orders")[&0]
}

fn rewrite_hints(api: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
    assert!(describe(api).may_carry_leader_hints(version));
    let nodes = fixtures::sluice_nodes().snapshot();
    let view = view();
    let mut resp = through_wire(api, version, body);
    assert!(
        Rewriter::new(&view, &nodes)
            .unwrap()
            .rewrite_leader_hints(&mut resp)
            .unwrap()
    );
    let bytes = wire_bytes(&resp);
    assert_no_real_hosts(&bytes);
    reparse(&bytes, api, version).into_body().unwrap()
}

#[test]
fn produce_hints_name_the_metadata_leader() {
    let expected = metadata_leader_of_orders_0_under_broker_2();
    assert!([102, 103].contains(&expected));
    for version in [10, 11, 12, 13] {
        let partition = PartitionProduceResponse::default()
            .with_index(0)
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_current_leader(
                ProduceLeader::default()
                    .with_leader_id(BrokerId(2))
                    .with_leader_epoch(6),
            );
        let mut topic = TopicProduceResponse::default().with_partition_responses(vec![partition]);
        if version >= 13 {
            topic = topic.with_topic_id(ORDERS_ID.parse().unwrap());
        } else {
            topic = topic.with_name(name("orders"));
        }
        let endpoint = ProduceEndpoint::default()
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("kafka-2.internal.corp"))
            .with_port(19093)
            .with_rack(Some(StrBytes::from_static_str("rack-b")));
        let resp = ProduceResponse::default()
            .with_responses(vec![topic])
            .with_node_endpoints(vec![endpoint]);
        let ResponseKind::Produce(p) = rewrite_hints(ApiKey::Produce, version, resp.into()) else {
            panic!("v{version}: not a produce response");
        };
        let leader = &p.responses[0].partition_responses[0].current_leader;
        assert_eq!(
            (leader.leader_id.0, leader.leader_epoch),
            (expected, 6),
            "v{version}"
        );
        assert_eq!(p.node_endpoints.len(), 1);
        let endpoint = &p.node_endpoints[0];
        let (host, port, rack) = sluice_address(expected);
        assert_eq!(endpoint.node_id.0, expected);
        assert_eq!((&*endpoint.host, endpoint.port), (host, port));
        assert_eq!(endpoint.rack.as_deref(), Some(rack));
    }
}

#[test]
fn fetch_hints_name_the_metadata_leader_and_drop_the_follower() {
    let expected = metadata_leader_of_orders_0_under_broker_2();
    for version in [11, 12, 15, 16, 17] {
        let partition = PartitionData::default()
            .with_partition_index(0)
            .with_error_code(if version >= 12 { 6 } else { 0 })
            .with_preferred_read_replica(BrokerId(3));
        let partition = if version >= 12 {
            partition.with_current_leader(
                FetchLeader::default()
                    .with_leader_id(BrokerId(2))
                    .with_leader_epoch(6),
            )
        } else {
            partition
        };
        let mut topic = FetchableTopicResponse::default().with_partitions(vec![partition]);
        if version >= 13 {
            topic = topic.with_topic_id(ORDERS_ID.parse().unwrap());
        } else {
            topic = topic.with_topic(name("orders"));
        }
        let mut resp = FetchResponse::default().with_responses(vec![topic]);
        if version >= 16 {
            resp = resp.with_node_endpoints(vec![
                FetchEndpoint::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("kafka-2.internal.corp"))
                    .with_port(19093),
            ]);
        }
        let ResponseKind::Fetch(f) = rewrite_hints(ApiKey::Fetch, version, resp.into()) else {
            panic!("v{version}: not a fetch response");
        };
        let p = &f.responses[0].partitions[0];
        assert_eq!(p.preferred_read_replica.0, -1, "v{version}");
        if version >= 12 {
            assert_eq!(p.current_leader.leader_id.0, expected, "v{version}");
            assert_eq!(p.current_leader.leader_epoch, 6);
        }
        if version >= 16 {
            let ids: Vec<i32> = f.node_endpoints.iter().map(|e| e.node_id.0).collect();
            assert_eq!(ids, [expected]);
        } else {
            assert!(f.node_endpoints.is_empty());
        }
        assert!(f.node_endpoints.iter().all(|e| UP.contains(&e.node_id.0)));
    }
}

#[test]
fn hints_are_only_for_recent_versions() {
    assert!(!describe(ApiKey::Produce).may_carry_leader_hints(9));
    assert!(!describe(ApiKey::Fetch).may_carry_leader_hints(10));
    assert!(!describe(ApiKey::Metadata).may_carry_leader_hints(12));
}

#[test]
fn share_fetch_and_acknowledge_hints_name_the_metadata_leader() {
    use sluice_codec::kafka_protocol::messages::share_acknowledge_response as ack;
    use sluice_codec::kafka_protocol::messages::share_fetch_response as share;
    let expected = metadata_leader_of_orders_0_under_broker_2();
    let real = |id: i32| {
        (
            BrokerId(id),
            StrBytes::from_static_str("kafka-2.internal.corp"),
        )
    };
    for version in [1, 2] {
        let (id, host) = real(2);
        let resp = share::ShareFetchResponse::default()
            .with_responses(vec![
                share::ShareFetchableTopicResponse::default()
                    .with_topic_id(ORDERS_ID.parse().unwrap())
                    .with_partitions(vec![
                        share::PartitionData::default()
                            .with_partition_index(0)
                            .with_error_code(ResponseError::NotLeaderOrFollower.code())
                            .with_acknowledge_error_code(ResponseError::NotLeaderOrFollower.code())
                            .with_current_leader(
                                share::LeaderIdAndEpoch::default()
                                    .with_leader_id(2)
                                    .with_leader_epoch(6),
                            ),
                    ]),
            ])
            .with_node_endpoints(vec![
                share::NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(host.clone())
                    .with_port(19093),
            ]);
        let ResponseKind::ShareFetch(f) = rewrite_hints(ApiKey::ShareFetch, version, resp.into())
        else {
            panic!("v{version}: not a share fetch response");
        };
        let p = &f.responses[0].partitions[0];
        assert_eq!(p.current_leader.leader_id, expected, "v{version}");
        assert_eq!(p.current_leader.leader_epoch, 6);
        let ids: Vec<i32> = f.node_endpoints.iter().map(|e| e.node_id.0).collect();
        assert_eq!(ids, [expected]);

        let resp = ack::ShareAcknowledgeResponse::default()
            .with_responses(vec![
                ack::ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(ORDERS_ID.parse().unwrap())
                    .with_partitions(vec![
                        ack::PartitionData::default()
                            .with_partition_index(0)
                            .with_error_code(ResponseError::NotLeaderOrFollower.code())
                            .with_current_leader(
                                ack::LeaderIdAndEpoch::default()
                                    .with_leader_id(2)
                                    .with_leader_epoch(6),
                            ),
                    ]),
            ])
            .with_node_endpoints(vec![
                ack::NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(host)
                    .with_port(19093),
            ]);
        let ResponseKind::ShareAcknowledge(a) =
            rewrite_hints(ApiKey::ShareAcknowledge, version, resp.into())
        else {
            panic!("v{version}: not a share acknowledge response");
        };
        assert_eq!(
            a.responses[0].partitions[0].current_leader.leader_id,
            expected
        );
        let ids: Vec<i32> = a.node_endpoints.iter().map(|e| e.node_id.0).collect();
        assert_eq!(ids, [expected]);
    }
}
