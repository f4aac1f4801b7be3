//! A leaving node: shown down in its own answers, requests for leaders and
//! coordinators answered with retriable errors without reaching a broker,
//! metadata and acks=0 Produce served as before.

use super::*;

/// A sink of node `local` of two (node 0 on port 9192, node 1 on 9193),
/// without health checks: the other node is always up, and leave errors
/// start at once. The fake broker's partitions are both shown on node 1.
pub(super) fn two_node_client(broker: SocketAddr, local: i32) -> Client {
    let yaml = format!(
        r#"sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address_for_clients: "127.0.0.1:9192"
                address_for_peers: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 0
              - address_for_clients: "127.0.0.1:9193"
                address_for_peers: "127.0.0.1:9193"
                rack: "rack0"
                broker_id: 1
            local_shotover_broker_id: {local}
            first_contact_points: ["{broker}"]
            connect_timeout_ms: 2000
            read_timeout: 5
"#
    );
    let topology = sluice_config::Topology::parse(&yaml, Path::new("t.yaml")).unwrap();
    let sluice_config::SourceConfig::Kafka(source) = &topology.sources[0];
    let Some(sluice_config::TransformConfig::KafkaSinkCluster(cfg)) = source.chain.first() else {
        panic!("no KafkaSinkCluster in the test topology");
    };
    let builder = KafkaSinkClusterBuilder::new(cfg).unwrap();
    let sink = builder.build(&ctx());
    (builder, sink, ctx())
}

fn shown(response: Response) -> Vec<(i32, i32)> {
    let ResponseKind::Metadata(m) = response.into_body().unwrap() else {
        panic!("not a Metadata answer");
    };
    m.brokers.iter().map(|b| (b.node_id.0, b.port)).collect()
}

fn heartbeat(id: i32) -> Request {
    let body = HeartbeatRequest::default()
        .with_group_id(StrBytes::from_static_str("g").into())
        .with_generation_id(1)
        .with_member_id(StrBytes::from_static_str("m"));
    client_request(ApiKey::Heartbeat, 4, id, RequestKind::Heartbeat(body))
}

#[tokio::test]
async fn a_leaving_node_sends_its_clients_to_the_others() {
    let broker = fake_broker().await;
    // Node 1, which shows the partitions it is sent a Produce for.
    let (builder, mut sink, ctx) = two_node_client(broker.addr(), 1);
    let before = exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    assert_eq!(shown(before), [(0, 9192), (1, 9193)]);
    let answer = exchange(&mut *sink, &ctx, produce(2, -1), "produce").await;
    assert_eq!(produce_codes(answer), [(0, 0), (1, 0)], "served");

    assert!(builder.leave_handle().leave(), "node 0 takes the clients");
    let after = exchange(&mut *sink, &ctx, metadata(3), "metadata while leaving").await;
    assert_eq!(shown(after), [(0, 9192)], "only the other node is shown");

    // The broker would answer 0: these never reach it.
    broker.fail_produce(true);
    let answer = exchange(&mut *sink, &ctx, produce(4, -1), "produce while leaving").await;
    assert_eq!(answer.correlation_id(), 4);
    assert_eq!(
        produce_codes(answer),
        [(0, 6), (1, 6)],
        "NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and moves"
    );
    let answer = exchange(&mut *sink, &ctx, heartbeat(5), "heartbeat while leaving").await;
    let ResponseKind::Heartbeat(h) = answer.into_body().unwrap() else {
        panic!("not a Heartbeat answer");
    };
    assert_eq!(
        h.error_code, 16,
        "NOT_COORDINATOR: the client finds another"
    );
    broker.fail_produce(false);
    send(&mut *sink, &ctx, produce(6, 0)).await;
    assert_eq!(sink.pending(), 0, "acks=0 has no answer to carry an error");
}
