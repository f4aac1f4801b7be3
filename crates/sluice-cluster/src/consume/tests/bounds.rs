//! What bounds a fetch's answer: the time a fetch without a deadline waits
//! and the bytes an assembled answer carries.

use std::time::Duration;

use super::*;

#[test]
fn a_fetch_without_max_wait_does_not_wait_for_the_parts_it_adopted() {
    let mut state = FetchState::<Part>::default();
    let _out = first_fetch_answered_by_broker_1(&mut state);
    // Brokers 2 and 3 hold the first fetch's parts for its 500 ms; the
    // client now asks not to wait at all.
    let mut request = fetch(&[(0, 12), (1, 20), (2, 30)], 1);
    request.max_wait_ms = 0;
    let planned = plan(&mut state, &request, now());
    assert_eq!(planned.adopted.len(), 2);
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(0, 0, 12)]))).unwrap();
    let started = now();
    wait(&combine, &mut parts);
    assert!(
        now().duration_since(started) == Duration::ZERO,
        "answered as soon as its own part answered: waited {:?}",
        now().duration_since(started)
    );
    assert!(combine.enough(&mut parts, now()));
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 12), (1, 0, 0, -1), (2, 0, 0, -1)]
    );
    assert_eq!(state.parked.len(), 2, "the adopted parts stay parked");
}

/// The client's `max_bytes` in the tests below.
const M: i32 = 600_000;

fn third() -> usize {
    usize::try_from(M / 3).unwrap()
}

#[test]
fn an_answer_with_stashed_and_new_data_keeps_to_the_client_s_max_bytes() {
    let mut state = FetchState::<Part>::default();
    // Fetch 1 asks partitions 0 (broker 1) and 1 (broker 2), half of M each;
    // broker 1 answers, broker 2's part is parked and answers a half of M
    // between fetches: stashed.
    let first = fetch(&[(0, 10), (1, 20)], 1).with_max_bytes(M);
    let (combine, mut parts, mut replies) = send(plan(&mut state, &first, now()));
    let (_, _, to_2) = replies.remove(1);
    let (_, _, to_1) = replies.remove(0);
    to_1.send(Ok(answer(vec![data(0, 100, 11)]))).unwrap();
    wait(&combine, &mut parts);
    let done = outcomes(&mut state, &combine, parts);
    drop(state.assemble(combine, done, now()));
    let half = usize::try_from(M / 2).unwrap();
    to_2.send(Ok(answer(vec![data(1, half, 40)]))).unwrap();
    for parked in state.take_parked() {
        absorb_answered(&mut state, parked);
    }
    // Fetch 2 adds partition 2 (broker 3): a third of M for each new part,
    // besides the stashed half.
    let second = fetch(&[(0, 11), (1, 20), (2, 30)], 1).with_max_bytes(M);
    let (combine, mut parts, replies) = send(plan(&mut state, &second, now()));
    assert_eq!(replies.len(), 2);
    for (broker, request, tx) in replies {
        assert_eq!(request.max_bytes, M / 3);
        let p = request.topics[0].partitions[0].partition;
        assert_eq!(broker.0, p + 1);
        tx.send(Ok(answer(vec![data(p, third(), 50)]))).unwrap();
    }
    for part in &mut parts {
        part.wait();
    }
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    let served: Vec<(i32, usize)> = partitions(&response).iter().map(|p| (p.0, p.1)).collect();
    let total: usize = served.iter().map(|p| p.1).sum();
    assert!(
        total <= usize::try_from(M).unwrap(),
        "the answer holds {total} bytes of records, over max_bytes {M}: {served:?}"
    );
    assert_eq!(
        served,
        vec![(0, third()), (1, half), (2, 0)],
        "the stashed half first, then what fits in request order"
    );
    // Partition 2's records were kept: the client asks there again.
    let third_fetch = fetch(&[(0, 12), (1, 21), (2, 30)], 1).with_max_bytes(M);
    let planned = plan(&mut state, &third_fetch, now());
    assert!(
        planned.fresh.iter().all(|n| n.request.topics[0]
            .partitions
            .iter()
            .all(|p| p.partition != 2)),
        "partition 2 is served from the stash"
    );
    let (combine, parts, _replies) = send(planned);
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    assert_eq!(partitions(&response)[2], (2, third(), 0, 50));
}

#[test]
fn a_first_partition_larger_than_max_bytes_is_still_served() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20)], 1).with_max_bytes(M);
    let (combine, mut parts, replies) = send(plan(&mut state, &request, now()));
    let big = usize::try_from(M).unwrap() + 1;
    for (_, request, tx) in replies {
        let p = request.topics[0].partitions[0].partition;
        tx.send(Ok(answer(vec![data(p, big, 50)]))).unwrap();
    }
    for part in &mut parts {
        part.wait();
    }
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    let served: Vec<usize> = partitions(&response).iter().map(|p| p.1).collect();
    assert_eq!(
        served,
        vec![big, 0],
        "one batch over max_bytes, as a broker returns it"
    );
}

#[test]
fn nothing_kept_between_fetches_holds_a_broker_frame_by_its_topic_name() {
    let mut state = FetchState::<Part>::default();
    // The client takes partition 1 and still buffers partition 4: its 1 KiB
    // is copied out of the 4 MiB frame, and must not keep the frame by its
    // key (topic names of a v12 answer are slices of its frame).
    let frame = stash_from_one_frame(&mut state, &[(0, 12), (1, 20), (2, 30)]);
    let range = frame.as_ptr_range();
    let name_inside = |key: &PartitionKey| match &key.0 {
        TopicRef::Name(name) => range.contains(&name.as_bytes().as_ptr()),
        TopicRef::Id(_) => false,
    };
    assert!(
        !state.stash.keys().any(name_inside),
        "a stashed partition's key is a slice of the frame its records were copied out of"
    );
    assert!(
        !state.marks.keys().any(name_inside),
        "a partition's watermarks are kept under a key that is a slice of a broker frame"
    );
}

#[test]
fn a_partition_asked_twice_is_answered_once_at_its_last_offset() {
    let mut state = FetchState::<Part>::default();
    // Partition 1 twice (5, then 20), as Kafka reads it: once, where it
    // first appears, with its last fields.
    let request = fetch(&[(0, 10), (1, 5), (2, 30), (1, 20)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, replies) = send(planned);
    let asked: Vec<(i32, i64)> = replies
        .iter()
        .flat_map(|(_, r, _)| {
            r.topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition, p.fetch_offset))
        })
        .collect();
    assert_eq!(asked, vec![(0, 10), (1, 20), (2, 30)]);
    for (_, request, tx) in replies {
        let p = request.topics[0].partitions[0].partition;
        tx.send(Ok(answer(vec![data(p, 10, 50)]))).unwrap();
    }
    for part in &mut parts {
        part.wait();
    }
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 10, 0, 50), (1, 10, 0, 50), (2, 10, 0, 50)]
    );
}

#[test]
fn the_answer_carries_the_longest_throttle_of_its_parts() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let (combine, mut parts, replies) = send(plan(&mut state, &request, now()));
    for (broker, request, tx) in replies {
        let p = request.topics[0].partitions[0].partition;
        let mut throttled = answer(vec![data(p, 10, 50)]);
        if let Ok(ResponseKind::Fetch(f)) = throttled.body_mut() {
            f.throttle_time_ms = [0, 120, 300, 80][usize::try_from(broker.0).unwrap()];
        }
        tx.send(Ok(throttled)).unwrap();
    }
    for part in &mut parts {
        part.wait();
    }
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    assert_eq!(
        response.throttle_time_ms, 300,
        "the client backs off as long as its most throttled broker asks"
    );
}
