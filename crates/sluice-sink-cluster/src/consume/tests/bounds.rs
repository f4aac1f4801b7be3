//! What bounds a fetch's answer: the time a fetch without a deadline waits
//! and the bytes an assembled answer carries.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn a_fetch_without_max_wait_does_not_wait_for_the_parts_it_adopted() {
    let mut state = FetchState::default();
    let _out = first_fetch_answered_by_broker_1(&mut state).await;
    // Brokers 2 and 3 hold the first fetch's parts for its 500 ms; the
    // client now asks not to wait at all.
    let mut request = fetch(&[(0, 12), (1, 20), (2, 30)], 1);
    request.max_wait_ms = 0;
    let planned = plan(&mut state, &request, Instant::now());
    assert_eq!(planned.adopted.len(), 2);
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(0, 0, 12)]))).unwrap();
    let started = Instant::now();
    let waited = tokio::time::timeout(Duration::from_secs(60), combine.wait(&mut parts)).await;
    assert!(
        waited.is_ok() && started.elapsed() == Duration::ZERO,
        "answered as soon as its own part answered: waited {:?}",
        started.elapsed()
    );
    assert!(combine.enough(&mut parts, Instant::now()));
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes);
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 12), (1, 0, 0, -1), (2, 0, 0, -1)]
    );
    assert_eq!(state.parked.len(), 2, "the adopted parts stay parked");
}
