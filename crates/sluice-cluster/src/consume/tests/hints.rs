//! Partition answers that carry no records but a hint or an error the
//! client must act on: a diverging epoch (KIP-320), a preferred read
//! replica (KIP-392), OFFSET_OUT_OF_RANGE; in an entry that waits, and
//! through a parked part whose answer is stashed between fetches.

use std::time::Duration;

use crate::error_codes::ErrorCode;
use sluice_codec::kafka_protocol::messages::BrokerId as WireBrokerId;
use sluice_codec::kafka_protocol::messages::fetch_response::EpochEndOffset;

use super::*;

/// Partition `p` answered with no records and a diverging epoch.
fn diverging(p: i32) -> PartitionData {
    data(p, 0, 30).with_diverging_epoch(EpochEndOffset::default().with_epoch(4).with_end_offset(15))
}

/// Partition `p` answered with no records and a preferred read replica.
fn elsewhere(p: i32) -> PartitionData {
    data(p, 0, 30).with_preferred_read_replica(WireBrokerId(3))
}

/// The first fetch, of partitions 0..3 (brokers 1..3), with broker 2's
/// answer for partition 1 in hand: `answered`.
fn answered_by_broker_2(
    state: &mut FetchState<Part>,
    answered: PartitionData,
) -> (
    FetchCombine,
    Vec<Part>,
    Vec<(BrokerId, FetchRequest, Reply)>,
) {
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let planned = plan(state, &request, now());
    let (combine, parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(1);
    tx.send(Ok(answer(vec![answered]))).unwrap();
    (combine, parts, replies)
}

#[test]
fn a_preferred_read_replica_is_not_asked_again_in_a_loop() {
    let mut state = FetchState::<Part>::default();
    let (combine, mut parts, _out) = answered_by_broker_2(&mut state, elsewhere(1));
    advance(Duration::from_millis(1));
    wait(&combine, &mut parts);
    assert!(
        combine.refetches(&mut parts, now()).is_empty(),
        "the broker answers a preferred replica at once: asking again until the deadline spins"
    );
}

#[test]
fn a_diverging_epoch_answers_at_once_and_is_not_asked_again() {
    let mut state = FetchState::<Part>::default();
    let (combine, mut parts, _out) = answered_by_broker_2(&mut state, diverging(1));
    let started = now();
    wait(&combine, &mut parts);
    assert_eq!(
        now().duration_since(started),
        Duration::ZERO,
        "the client must truncate: answered at once, as a broker answers it"
    );
    assert!(combine.enough(&mut parts, now()));
    assert!(combine.refetches(&mut parts, now()).is_empty());
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    let p1 = &response.responses[0].partitions[1];
    assert_eq!(
        (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset),
        (4, 15)
    );
}

/// The first fetch answered by broker 1; broker 2's parked part then
/// answers partition 1 with `between` before the client's next fetch.
fn stashed_between_fetches(state: &mut FetchState<Part>, between: PartitionData) {
    let mut out = first_fetch_answered_by_broker_1(state);
    let (_, _, second) = out.remove(0);
    second.send(Ok(answer(vec![between]))).unwrap();
    let mut parked = state.take_parked();
    let at = parked.iter().position(|p| p.meta.broker == BrokerId(2));
    absorb_answered(state, parked.swap_remove(at.unwrap()));
    for p in parked {
        state.park(p);
    }
}

/// Where each new part of `planned` asks: (broker, partition, offset).
fn asked(planned: &Planned<Part>) -> Vec<(i32, i32, i64)> {
    planned
        .fresh
        .iter()
        .flat_map(|n| {
            n.request.topics[0]
                .partitions
                .iter()
                .map(move |p| (n.broker.0, p.partition, p.fetch_offset))
        })
        .collect()
}

const OUT_OF_RANGE: ErrorCode = crate::error_codes::OFFSET_OUT_OF_RANGE;

#[test]
fn an_offset_out_of_range_stashed_serves_only_the_offset_it_was_for() {
    let mut state = FetchState::<Part>::default();
    stashed_between_fetches(&mut state, error_partition(1, OUT_OF_RANGE));
    let planned = plan(&mut state, &fetch(&[(1, 20)], 1), now());
    assert!(asked(&planned).is_empty(), "served from the stash");
    let (combine, mut parts, _) = send(planned);
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(partitions(&response), vec![(1, 0, OUT_OF_RANGE.code(), -1)]);

    // The client reset its offset (to the log start, 3): the error was for
    // offset 20 and must not reach the fetch at 3.
    let mut state = FetchState::<Part>::default();
    stashed_between_fetches(&mut state, error_partition(1, OUT_OF_RANGE));
    let planned = plan(&mut state, &fetch(&[(1, 3)], 1), now());
    assert_eq!(
        asked(&planned),
        vec![(2, 1, 3)],
        "asked again at the reset offset"
    );
    assert!(state.stash.is_empty());
}

#[test]
fn a_diverging_epoch_between_fetches_is_asked_again_not_served_stale() {
    let mut state = FetchState::<Part>::default();
    stashed_between_fetches(&mut state, diverging(1));
    // Kept or not, a stale divergence must not answer a fetch that already
    // truncated (at offset 15, its new position).
    let planned = plan(&mut state, &fetch(&[(1, 15)], 1), now());
    assert_eq!(asked(&planned), vec![(2, 1, 15)]);
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(1, 40, 30)]))).unwrap();
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(partitions(&response), vec![(1, 40, 0, 30)]);
    assert_eq!(
        response.responses[0].partitions[0].diverging_epoch.epoch,
        -1
    );
}
