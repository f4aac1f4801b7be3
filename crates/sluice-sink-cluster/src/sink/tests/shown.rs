//! A Produce reaches a broker only through the node shown as its
//! partition's leader: any other node answers NOT_LEADER_OR_FOLLOWER, as a
//! broker that does not lead the partition does.

use std::collections::BTreeMap;

use super::leave::two_node_client;
use super::*;

/// Partition → the Sluice node shown as its leader, from `response`.
fn shown_leaders(response: Response) -> BTreeMap<i32, i32> {
    let ResponseKind::Metadata(m) = response.into_body().unwrap() else {
        panic!("not a Metadata answer");
    };
    m.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect()
}

#[tokio::test]
async fn a_produce_for_a_partition_shown_on_another_node_is_refused() {
    let broker = FakeBroker::start().await;
    // The fake cluster's one broker leads partitions 0 and 1, both shown on
    // node 1 of two.
    for (local, code) in [(1, 0), (0, 6)] {
        let (_builder, mut sink, ctx) = two_node_client(broker.addr, local);
        let metadata = exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
        let leaders = shown_leaders(metadata);
        assert_eq!(leaders, [(0, 1), (1, 1)].into(), "both shown on node 1");
        let answer = exchange(&mut *sink, &ctx, produce(2, -1), "produce").await;
        assert_eq!(
            produce_codes(answer),
            [(0, code), (1, code)],
            "node {local}: 0 where it is shown, NOT_LEADER_OR_FOLLOWER where it is not"
        );
    }
    // acks=0 has no answer to carry the error: node 0 forwards it (the
    // broker reads its bytes) rather than drop the records unseen.
    let (_builder, mut sink, ctx) = two_node_client(broker.addr, 0);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    broker.stall.next.store(true, Ordering::SeqCst);
    let stalled = broker.stall.stalled.notified();
    send(&mut *sink, &ctx, produce(3, 0)).await;
    assert_eq!(sink.pending(), 0, "acks=0 owes no answer");
    within("the acks=0 Produce to reach the broker", stalled).await;
    broker.stall.release.notify_one();
}
