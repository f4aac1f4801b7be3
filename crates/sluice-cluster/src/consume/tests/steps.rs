//! The head fetch's next step as data: wait, send the parts the time left
//! calls for, or answer; and what an unroutable partition is answered with.

use std::time::Duration;

use super::*;
use crate::error_codes::{UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};
use crate::split::Unroutable;
use crate::topology::ClusterView;
use crate::topology::fixtures::{metadata_response, name};

#[test]
fn a_split_fetch_waits_refetches_and_answers_as_its_parts_come_in() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    // The client sought partition 1 back to offset 5: broker 2's parked
    // part asked offset 20.
    let request = fetch(&[(0, 12), (1, 5), (2, 30)], 1);
    let start = now();
    let planned = plan(&mut state, &request, start);
    let (mut combine, mut parts, _replies) = send(planned);
    let step = combine.on_settled(&mut parts, &mut state.upstream, start);
    assert!(matches!(step, FetchStep::Wait), "{step:?}");

    advance(Duration::from_millis(100));
    let (_, _, tx) = out.remove(0);
    tx.send(Ok(answer(vec![data(1, 40, 22)]))).unwrap();
    wait(&combine, &mut parts);
    let FetchStep::Refetch(again) = combine.on_settled(&mut parts, &mut state.upstream, now())
    else {
        panic!("the old part's data is for offset 20, not 5: broker 2 is asked again");
    };
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].broker, BrokerId(2));
    assert_eq!(again[0].request.max_wait_ms, 400, "the time left");
    let (p, tx) = part(again[0].broker);
    parts.push(p);
    combine.commit(again.into_iter().next().unwrap().claim, now());
    tx.send(Ok(answer(vec![data(1, 70, 22)]))).unwrap();
    wait(&combine, &mut parts);
    let step = combine.on_settled(&mut parts, &mut state.upstream, now());
    assert!(matches!(step, FetchStep::Answer), "{step:?}");
}

#[test]
fn a_split_fetch_with_nothing_out_is_answered() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20)], 1).with_max_wait_ms(0);
    let planned = plan(&mut state, &request, now());
    let (mut combine, mut parts, replies) = send(planned);
    for (_, _, tx) in replies {
        tx.send(Ok(answer(Vec::new()))).unwrap();
    }
    wait(&combine, &mut parts);
    let step = combine.on_settled(&mut parts, &mut state.upstream, now());
    assert!(matches!(step, FetchStep::Answer), "{step:?}");
}

#[test]
fn partitions_the_cluster_does_not_have_are_answered_as_kafka_does() {
    let mut view = ClusterView::default();
    view.apply_metadata(12, &metadata_response(5));
    let unroutable = |topic: TopicRef, partition| Unroutable::Partition { topic, partition };
    let missing = TopicRef::Name(name("missing"));
    let orders = TopicRef::Name(name("orders"));
    let events = TopicRef::Name(name("events"));
    let asked = [
        unroutable(missing.clone(), 0),
        unroutable(orders.clone(), 99),
        // Known, without a leader now: not listed (NOT_LEADER_OR_FOLLOWER).
        unroutable(events.clone(), 1),
    ];
    let by_name = unknown_partitions(&view, &asked, 12);
    assert_eq!(by_name.len(), 2, "{by_name:?}");
    assert_eq!(by_name[&(missing.clone(), 0)], UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(by_name[&(orders.clone(), 99)], UNKNOWN_TOPIC_OR_PARTITION);
    let by_id = unknown_partitions(&view, &asked, 13);
    assert_eq!(
        by_id[&(missing, 0)],
        UNKNOWN_TOPIC_ID,
        "a topic id from v13"
    );
    assert_eq!(by_id[&(orders, 99)], UNKNOWN_TOPIC_OR_PARTITION);
}

#[test]
fn a_parked_part_that_failed_leaves_its_error_for_the_next_fetch_unless_sent_ahead() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, _parts, _replies) = send(planned);
    let mut meta = combine.meta(0).cloned().expect("one part");
    assert!(matches!(
        Outcome::answered(ResponseKind::Produce(Default::default()), 0),
        Outcome::Failed(code) if code == NOT_LEADER_OR_FOLLOWER
    ));
    meta.ahead = true;
    state.settle(&meta, Outcome::failed(), now());
    assert!(
        state.stash.is_empty(),
        "no fetch asked for a part sent ahead"
    );
    meta.ahead = false;
    state.settle(&meta, Outcome::failed(), now());
    assert_eq!(
        state.stash.len(),
        1,
        "the next fetch of partition 0 learns the error"
    );
}

#[test]
fn a_sessionless_fetch_one_broker_serves_goes_out_as_it_came_while_nothing_is_kept() {
    use sluice_codec::RequestKind;
    use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let mut view = ClusterView::default();
    view.apply_metadata(12, &metadata_response(5));
    let orders = |partitions: &[i32]| {
        let fetch = FetchRequest::default().with_topics(vec![
            FetchTopic::default()
                .with_topic(name("orders"))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| FetchPartition::default().with_partition(*p))
                        .collect(),
                ),
        ]);
        let request = RequestKind::Fetch(fetch);
        crate::split::dispatch::split_request(&request, 12, &view).expect("a fetch splits")
    };
    let one_broker = orders(&[0, 3]);
    let whole: Option<&FetchRequest> = None;
    assert!(passes_through(whole, SessionReply::None, true, &one_broker));
    assert!(
        !passes_through(whole, SessionReply::None, false, &one_broker),
        "something kept"
    );
    assert!(
        !passes_through(whole, SessionReply::Opened(7), true, &one_broker),
        "a client session"
    );
    let in_session = FetchRequest::default();
    assert!(!passes_through(
        Some(&in_session),
        SessionReply::None,
        true,
        &one_broker
    ));
    assert!(
        !passes_through(whole, SessionReply::None, true, &orders(&[0, 1])),
        "two brokers"
    );
}
