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
    let broker = fake_broker().await;
    // The fake cluster's one broker leads partitions 0 and 1, both shown on
    // node 1 of two.
    for (local, code) in [(1, 0), (0, 6)] {
        let (_builder, mut sink, ctx) = two_node_client(broker.addr(), local);
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
    let (_builder, mut sink, ctx) = two_node_client(broker.addr(), 0);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    broker.stall().next.store(true, Ordering::SeqCst);
    let stalled = broker.stall().stalled.notified();
    send(&mut *sink, &ctx, produce(3, 0)).await;
    assert_eq!(sink.pending(), 0, "acks=0 owes no answer");
    within("the acks=0 Produce to reach the broker", stalled).await;
    broker.stall().release.notify_one();
}

/// The head of a v2 record batch of producer 7, epoch 0, whose first record
/// has sequence `seq` (the fake broker reads no further).
fn idempotent_batch(seq: i32) -> bytes::Bytes {
    let mut b = vec![0u8; 61];
    b[16] = 2; // magic
    b[43..51].copy_from_slice(&7i64.to_be_bytes()); // producerId
    b[51..53].copy_from_slice(&0i16.to_be_bytes()); // producerEpoch
    b[53..57].copy_from_slice(&seq.to_be_bytes()); // baseSequence
    bytes::Bytes::from(b)
}

/// The soak's transactional producer: a batch refused unsent (its partition
/// shown on the other node), the view changing a moment later (here: the
/// other node goes down, so both partitions are shown here), and the batch
/// the client had in flight behind the refused one. Forwarded, its leader
/// would refuse it as OUT_OF_ORDER_SEQUENCE_NUMBER (its predecessor was
/// never written) and librdkafka would bump the epoch, aborting the
/// transaction. It is refused unsent like the first, until the client
/// resends from the gap.
#[tokio::test]
async fn a_batch_behind_one_refused_unsent_is_refused_too_until_the_client_resends_it() {
    let broker = fake_broker().await;
    let (builder, mut sink, ctx) = two_node_client(broker.addr(), 0);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    let first = produce_records(2, -1, idempotent_batch(0));
    let answer = exchange(&mut *sink, &ctx, first, "the first batch").await;
    assert_eq!(produce_codes(answer), [(0, 6), (1, 6)], "shown on node 1");

    assert!(builder.shared.nodes.set_up(BrokerId(1), false).changed());
    let behind = produce_records(3, -1, idempotent_batch(5));
    let answer = exchange(&mut *sink, &ctx, behind, "the batch behind it").await;
    assert_eq!(
        produce_codes(answer),
        [(0, 6), (1, 6)],
        "held back although both partitions are now shown here: its predecessor was never written"
    );

    let resent = produce_records(4, -1, idempotent_batch(0));
    let answer = exchange(&mut *sink, &ctx, resent, "the first batch resent").await;
    assert_eq!(produce_codes(answer), [(0, 0), (1, 0)], "the gap is resent");
    let behind = produce_records(5, -1, idempotent_batch(5));
    let answer = exchange(&mut *sink, &ctx, behind, "the batch behind it resent").await;
    assert_eq!(
        produce_codes(answer),
        [(0, 0), (1, 0)],
        "the rest follows it"
    );
}

/// Batches without a producer id carry no order: one refused does not hold
/// back the next.
#[tokio::test]
async fn a_batch_of_a_producer_that_is_not_idempotent_is_never_held() {
    let broker = fake_broker().await;
    let (builder, mut sink, ctx) = two_node_client(broker.addr(), 0);
    exchange(&mut *sink, &ctx, metadata(1), "metadata").await;
    let answer = exchange(&mut *sink, &ctx, produce(2, -1), "the first batch").await;
    assert_eq!(produce_codes(answer), [(0, 6), (1, 6)], "shown on node 1");
    assert!(builder.shared.nodes.set_up(BrokerId(1), false).changed());
    let answer = exchange(&mut *sink, &ctx, produce(3, -1), "the next batch").await;
    assert_eq!(produce_codes(answer), [(0, 0), (1, 0)], "shown here now");
}
