//! Read-ahead (`consume/ahead.rs`) and the stash it fills, on the test clock.

use bytes::{BufMut, BytesMut};

use super::*;

/// Partition `p` answered with one v2 record batch of `count` offsets from
/// `base`, high watermark `hw`.
pub(super) fn batch_data(p: i32, base: i64, count: i32, hw: i64) -> PartitionData {
    let mut b = BytesMut::new();
    b.put_i64(base);
    b.put_i32(61 - 12);
    b.put_i32(0);
    b.put_u8(2);
    b.put_u32(0);
    b.put_i16(0);
    b.put_i32(count - 1);
    b.put_bytes(0, 61 - 27);
    PartitionData::default()
        .with_partition_index(p)
        .with_high_watermark(hw)
        .with_records(Some(b.freeze()))
}

/// Each part ahead's broker and (partition, offset) asked.
fn asked_ahead(ahead: &[ReadAhead]) -> Vec<(i32, Vec<(i32, i64)>)> {
    ahead
        .iter()
        .map(|a| {
            let asked = a.request.topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition, p.fetch_offset))
                .collect();
            (a.broker.0, asked)
        })
        .collect()
}

/// The first fetch of partitions 0..3 at 10, 20, 30 (brokers 1, 2, 3):
/// broker 1 answers records 10..15, broker 2 answers empty, broker 3 stays
/// out. Returns what to send ahead and broker 3's reply.
fn first_fetch(state: &mut FetchState<Part>) -> (Vec<ReadAhead>, Reply) {
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let planned = plan(state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, third) = replies.remove(2);
    let (_, _, second) = replies.remove(1);
    let (_, _, first) = replies.remove(0);
    first
        .send(Ok(answer(vec![batch_data(0, 10, 5, 15)])))
        .unwrap();
    second.send(Ok(answer(vec![data(1, 0, 20)]))).unwrap();
    parts[0].wait();
    parts[1].wait();
    let outcomes = outcomes(state, &combine, parts);
    let (_, ahead) = state.assemble(combine, outcomes, now());
    (ahead, third)
}

#[test]
fn only_a_free_broker_that_served_records_is_asked_ahead_where_the_client_reads_next() {
    let mut state = FetchState::<Part>::default();
    let (ahead, _third) = first_fetch(&mut state);
    assert_eq!(
        asked_ahead(&ahead),
        vec![(1, vec![(0, 15)])],
        "broker 2 answered empty and broker 3 is still out: neither is asked ahead"
    );
    let part = &ahead[0];
    assert!(part.meta.ahead);
    assert_eq!(part.request.max_wait_ms, MAX_WAIT_MS, "the client's wait");
    assert_eq!(
        part.request.topics[0].partitions[0].partition_max_bytes,
        PARTITION_MAX_BYTES
    );
}

/// Parks `ahead` as the sink does once it is sent, answering it with
/// `reply`; returns nothing kept out.
fn park_answered(state: &mut FetchState<Part>, ahead: ReadAhead, reply: Vec<PartitionData>) {
    let (part, tx) = part(ahead.broker);
    tx.send(Ok(answer(reply))).unwrap();
    state.park(Parked {
        part,
        meta: ahead.meta,
    });
}

/// Stashes the parked parts that have answered (the sink's harvest).
fn harvest(state: &mut FetchState<Part>) {
    for parked in state.take_parked() {
        if parked.part.is_waiting() && parked.meta.broker == BrokerId(3) {
            state.park(parked);
            continue;
        }
        absorb_answered(state, parked);
    }
}

#[test]
fn the_next_fetch_at_the_offset_asked_ahead_is_served_from_the_part_ahead() {
    let mut state = FetchState::<Part>::default();
    let (mut ahead, _third) = first_fetch(&mut state);
    park_answered(&mut state, ahead.remove(0), vec![batch_data(0, 15, 5, 20)]);
    let request = fetch(&[(0, 15), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    assert_eq!(planned.adopted.len(), 2, "the part ahead and broker 3's");
    let (combine, mut parts, replies) = send(planned);
    assert_eq!(
        replies.iter().map(|r| r.0.0).collect::<Vec<_>>(),
        vec![2],
        "only broker 2 gets a new part"
    );
    wait(&combine, &mut parts);
    assert!(combine.enough(&mut parts, now()));
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, ahead) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response)[0],
        (0, 61, 0, 20),
        "records 15..20, as the client asked"
    );
    assert_eq!(asked_ahead(&ahead), vec![(1, vec![(0, 20)])]);
}

#[test]
fn a_part_ahead_asked_at_another_offset_serves_nothing() {
    let mut state = FetchState::<Part>::default();
    let (mut ahead, _third) = first_fetch(&mut state);
    park_answered(&mut state, ahead.remove(0), vec![batch_data(0, 15, 5, 20)]);
    // The client sought partition 0 back to 3.
    let request = fetch(&[(0, 3), (1, 20), (2, 30)], 1);
    let start = now();
    let planned = plan(&mut state, &request, start);
    let (combine, mut parts, _replies) = send(planned);
    wait(&combine, &mut parts);
    let again = combine.refetches(&mut parts, now());
    assert_eq!(
        again
            .iter()
            .map(|n| (n.broker.0, n.request.topics[0].partitions[0].fetch_offset))
            .collect::<Vec<_>>(),
        vec![(1, 3)],
        "broker 1 is asked again at the offset sought"
    );
}

#[test]
fn a_stashed_answer_waits_for_its_partition_until_it_is_too_old() {
    let mut state = FetchState::<Part>::default();
    let (mut ahead, _third) = first_fetch(&mut state);
    park_answered(&mut state, ahead.remove(0), vec![batch_data(0, 15, 5, 20)]);
    harvest(&mut state);
    assert_eq!(state.stash.len(), 1, "the part ahead's answer is stashed");

    // The client still buffers partition 0 and leaves it out.
    let request = fetch(&[(1, 20), (2, 30)], 1);
    let _ = plan(&mut state, &request, now());
    assert_eq!(
        state.stash.len(),
        1,
        "a partition the fetch left out keeps its answer"
    );
    let request = fetch(&[(0, 15), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    assert!(
        matches!(
            planned.combine.topics[0].partitions[0].source,
            Source::Stashed(_)
        ),
        "served from the stash at its offset"
    );

    let (mut ahead, _third) = first_fetch(&mut FetchState::<Part>::default());
    let mut state = FetchState::<Part>::default();
    park_answered(&mut state, ahead.remove(0), vec![batch_data(0, 15, 5, 20)]);
    harvest(&mut state);
    advance(STASH_KEEP);
    let request = fetch(&[(1, 20)], 1);
    let _ = plan(&mut state, &request, now());
    assert!(state.stash.is_empty(), "dropped once too old");
    assert_eq!(state.kept_bytes(), 0);
}

#[test]
fn a_part_ahead_fits_the_room_of_the_budgets_or_is_not_sent() {
    let mut state = FetchState::<Part>::default();
    let (mut ahead, _third) = first_fetch(&mut state);
    let mut part = ahead.remove(0);
    let partition_max = usize::try_from(PARTITION_MAX_BYTES).unwrap();
    assert_eq!(
        part.fit(1 << 30),
        Some(partition_max),
        "with room to spare, it may bring its partition's max"
    );
    assert_eq!(
        part.fit(100 * 1024),
        Some(100 * 1024),
        "lowered to the room"
    );
    assert_eq!(part.request.max_bytes, 100 * 1024);
    assert_eq!(part.fit(1000), None, "too little room: not read ahead");
}
