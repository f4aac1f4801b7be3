//! The answer-early rules and the matching of parked parts and stashed
//! answers to the next fetch, on a test clock: parts are answered through
//! their [`Reply`], and [`wait`] does what the driver's wait does.

use std::time::Duration;

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use sluice_codec::kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Response, ResponseKind};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use super::combine::GATHER_BYTES;
use super::*;
use crate::split::fetch::error_partition;

const VERSION: i16 = 12;
const MAX_WAIT_MS: i32 = 500;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

fn key(partition: i32) -> PartitionKey {
    (TopicRef::Name(topic()), partition)
}

/// The `partition_max_bytes` of every partition [`fetch`] asks for.
const PARTITION_MAX_BYTES: i32 = 1 << 20;

/// A fetch of `partitions` (index, offset) of topic `t`.
fn fetch(partitions: &[(i32, i64)], min_bytes: i32) -> FetchRequest {
    let partitions = partitions
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(PARTITION_MAX_BYTES)
        })
        .collect();
    FetchRequest::default()
        .with_max_wait_ms(MAX_WAIT_MS)
        .with_min_bytes(min_bytes)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic())
                .with_partitions(partitions),
        ])
}

/// `request` split by `leader_of`.
fn routed(request: &FetchRequest, leader_of: impl Fn(i32) -> i32) -> Vec<(BrokerId, FetchRequest)> {
    let mut parts: Vec<(BrokerId, FetchRequest)> = Vec::new();
    for p in &request.topics[0].partitions {
        let broker = BrokerId(leader_of(p.partition));
        let at = match parts.iter().position(|(b, _)| *b == broker) {
            Some(at) => at,
            None => {
                let topic = FetchTopic::default().with_topic(topic());
                parts.push((broker, FetchRequest::default().with_topics(vec![topic])));
                parts.len() - 1
            }
        };
        parts[at].1.topics[0].partitions.push(p.clone());
    }
    parts
}

/// Partition `p` answered with `records` bytes and high watermark `hw`.
fn data(p: i32, records: usize, hw: i64) -> PartitionData {
    PartitionData::default()
        .with_partition_index(p)
        .with_high_watermark(hw)
        .with_records(Some(Bytes::from(vec![7u8; records])))
}

fn answer(partitions: Vec<PartitionData>) -> Response {
    let body = FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic(topic())
            .with_partitions(partitions),
    ]);
    Response::from_body(ApiKey::Fetch, VERSION, 0, ResponseKind::Fetch(body))
}

thread_local! {
    /// The test's clock (each test runs on a thread of its own).
    static CLOCK: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The test clock's time.
fn now() -> Instant {
    CLOCK.with(|c| {
        let at = c.get().unwrap_or_else(Instant::now);
        c.set(Some(at));
        at
    })
}

/// Moves the test clock on.
fn advance(by: Duration) {
    let at = now() + by;
    CLOCK.with(|c| c.set(Some(at)));
}

/// A broker's failure, as a part sees it.
#[derive(Debug)]
struct Failed;

/// Where a test part stands.
#[derive(Debug)]
enum Slot {
    /// Nothing sent back yet.
    Out,
    /// Sent back, not yet seen by a wait (as an answer in its channel).
    Arrived(Result<Response, Failed>),
    /// Seen.
    Done(Result<Response, Failed>),
    /// Taken out to be combined.
    Taken,
}

/// A part as the driver holds one: its answer arrives through its [`Reply`].
#[derive(Debug)]
struct Part(Rc<RefCell<Slot>>);

/// What answers a [`Part`].
struct Reply(Rc<RefCell<Slot>>);

impl Reply {
    fn send(self, result: Result<Response, Failed>) -> Result<(), ()> {
        *self.0.borrow_mut() = Slot::Arrived(result);
        Ok(())
    }
}

impl Part {
    /// Sees an answer that arrived (the driver's `Part::wait`, for an
    /// answer that is there).
    fn settle(&mut self) -> bool {
        let mut slot = self.0.borrow_mut();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Arrived(result) => {
                *slot = Slot::Done(result);
                true
            }
            other => {
                *slot = other;
                false
            }
        }
    }

    /// Waits for the answer, which the test has sent.
    fn wait(&mut self) {
        self.settle();
        assert!(!self.is_waiting(), "waited for a part never answered");
    }

    fn take_result(&mut self) -> Option<Result<Response, Failed>> {
        let mut slot = self.0.borrow_mut();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Done(result) => Some(result),
            other => {
                *slot = other;
                None
            }
        }
    }
}

impl FetchPart for Part {
    fn is_waiting(&self) -> bool {
        matches!(*self.0.borrow(), Slot::Out | Slot::Arrived(_))
    }

    fn has_failed(&self) -> bool {
        matches!(*self.0.borrow(), Slot::Done(Err(_)))
    }

    fn answer_mut(&mut self) -> Option<&mut Response> {
        let slot = Rc::get_mut(&mut self.0)?.get_mut();
        match slot {
            Slot::Done(Ok(response)) => Some(response),
            _ => None,
        }
    }
}

/// What the driver's wait for a split fetch does, on the test clock:
/// returns at once when every part is in or the entry has waited enough;
/// sees one more answer if one has arrived; else sleeps until the core's
/// next look.
fn wait(combine: &FetchCombine, parts: &mut [Part]) {
    if parts.iter().all(|p| !p.is_waiting()) {
        return;
    }
    if !combine.has_deadline() {
        for part in combine.own_parts(parts) {
            part.wait();
        }
        return;
    }
    let Some(wake) = combine.next_look(parts, now()) else {
        return;
    };
    if parts.iter_mut().any(Part::settle) {
        return;
    }
    CLOCK.with(|c| c.set(Some(wake)));
}

/// A sent part to `broker` and the sender of its answer.
fn part(_broker: BrokerId) -> (Part, Reply) {
    let slot = Rc::new(RefCell::new(Slot::Out));
    (Part(Rc::clone(&slot)), Reply(slot))
}

/// Plans `request`, sessionless, split by [`leader`], at `now`.
fn plan(state: &mut FetchState<Part>, request: &FetchRequest, now: Instant) -> Planned<Part> {
    let split = routed(request, leader);
    state.plan(request, VERSION, (None, SessionReply::None), &split, now)
}

/// Sends the planned parts: one sent part per new part, committed.
fn send(
    planned: Planned<Part>,
) -> (
    FetchCombine,
    Vec<Part>,
    Vec<(BrokerId, FetchRequest, Reply)>,
) {
    let Planned {
        mut combine,
        adopted,
        fresh,
    } = planned;
    let mut parts = adopted;
    let mut replies = Vec::new();
    for new in fresh {
        let (p, tx) = part(new.broker);
        parts.push(p);
        replies.push((new.broker, new.request, tx));
        combine.commit(new.claim, now());
    }
    (combine, parts, replies)
}

/// The outcome of each part, parking those still out (as the sink does).
fn outcomes(
    state: &mut FetchState<Part>,
    combine: &FetchCombine,
    parts: Vec<Part>,
) -> Vec<Outcome> {
    parts
        .into_iter()
        .enumerate()
        .map(|(index, mut part)| {
            let meta = combine.meta(index).unwrap().clone();
            match part.take_result() {
                None => {
                    state.park(Parked { part, meta });
                    Outcome::Parked
                }
                Some(Ok(response)) => match response.into_body().unwrap() {
                    ResponseKind::Fetch(answer) => Outcome::Answer(answer, 0),
                    other => panic!("not a fetch answer: {other:?}"),
                },
                Some(Err(_)) => Outcome::Failed(NOT_LEADER_OR_FOLLOWER),
            }
        })
        .collect()
}

/// Waits for a parked part's answer and stashes it (the sink's harvest).
fn absorb_answered(state: &mut FetchState<Part>, mut parked: Parked<Part>) {
    parked.part.wait();
    let Some(Ok(response)) = parked.part.take_result() else {
        panic!("answered");
    };
    let ResponseKind::Fetch(answer) = response.into_body().unwrap() else {
        panic!("a fetch answer");
    };
    state.absorb(&parked.meta, answer, 0, now());
}

/// Each partition's (index, record bytes, error, high watermark), in order.
fn partitions(response: &FetchResponse) -> Vec<(i32, usize, i16, i64)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                records_len(p),
                p.error_code,
                p.high_watermark,
            )
        })
        .collect()
}

fn leader(p: i32) -> i32 {
    p % 3 + 1
}

#[test]
fn each_part_asks_for_its_share_of_max_bytes() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1).with_max_bytes(30 << 20);
    let planned = plan(&mut state, &request, now());
    let asked: Vec<i32> = planned.fresh.iter().map(|n| n.request.max_bytes).collect();
    assert_eq!(
        asked,
        vec![10 << 20; 3],
        "the merged answer stays within max_bytes"
    );
}

#[test]
fn one_part_with_data_answers_before_the_others() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    assert_eq!(replies.len(), 3, "one part per broker");
    assert!(!combine.enough(&mut parts, now()));

    let (_, _, tx) = replies.remove(1);
    tx.send(Ok(answer(vec![data(1, 100, 25)]))).unwrap();
    let started = now();
    wait(&combine, &mut parts);
    assert_eq!(
        now().duration_since(started),
        Duration::ZERO,
        "answered at once, not at max wait"
    );
    assert!(combine.enough(&mut parts, now()));

    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, -1), (1, 100, 0, 25), (2, 0, 0, -1)],
        "every partition is listed, in request order; the parked ones empty"
    );
    assert_eq!(state.parked.len(), 2, "the parts still out are parked");
}

#[test]
fn catching_up_waits_a_moment_for_the_parts_sent_with_the_first() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, first) = replies.remove(0);
    first
        .send(Ok(answer(vec![data(0, GATHER_BYTES, 1000)])))
        .unwrap();
    wait(&combine, &mut parts);
    assert!(
        !combine.enough(&mut parts, now()),
        "a large answer waits for the parts sent with it"
    );
    advance(Duration::from_millis(1));
    let (_, _, second) = replies.remove(0);
    second
        .send(Ok(answer(vec![data(1, GATHER_BYTES, 2000)])))
        .unwrap();
    wait(&combine, &mut parts);
    assert!(!combine.enough(&mut parts, now()));
    let started = now();
    wait(&combine, &mut parts);
    assert_eq!(
        now().duration_since(started),
        Duration::from_millis(4),
        "the third part had its 5 ms and is left parked"
    );
    assert!(combine.enough(&mut parts, now()));
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    let sizes: Vec<usize> = partitions(&response).iter().map(|p| p.1).collect();
    assert_eq!(sizes, vec![GATHER_BYTES, GATHER_BYTES, 0]);
}

#[test]
fn nothing_ready_answers_at_max_wait() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, _replies) = send(planned);
    let started = now();
    wait(&combine, &mut parts);
    assert_eq!(now().duration_since(started), Duration::from_millis(500));
    assert!(combine.enough(&mut parts, now()));
}

#[test]
fn min_bytes_counts_every_answer_in_hand() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 150);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(0, 100, 11)]))).unwrap();
    wait(&combine, &mut parts);
    assert!(!combine.enough(&mut parts, now()), "100 of 150 bytes");
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(1, 60, 21)]))).unwrap();
    wait(&combine, &mut parts);
    assert!(combine.enough(&mut parts, now()), "160 of 150 bytes");
}

#[test]
fn a_failed_part_answers_at_once_with_a_retriable_error() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Err(Failed)).unwrap();
    wait(&combine, &mut parts);
    assert!(combine.enough(&mut parts, now()));
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, NOT_LEADER_OR_FOLLOWER.code(), -1), (1, 0, 0, -1)]
    );
}

#[test]
fn a_fetch_without_max_wait_waits_for_every_part() {
    let mut state = FetchState::<Part>::default();
    let mut request = fetch(&[(0, 10), (1, 20)], 1);
    request.max_wait_ms = 0;
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, first) = replies.remove(0);
    first.send(Ok(answer(vec![data(0, 100, 11)]))).unwrap();
    assert!(!combine.enough(&mut parts, now()));
    let (_, _, second) = replies.remove(0);
    second.send(Ok(answer(vec![data(1, 0, 21)]))).unwrap();
    wait(&combine, &mut parts);
    assert!(parts.iter().all(|p| !p.is_waiting()));
}

/// Answers the first fetch with broker 1's data; brokers 2 and 3 stay out.
fn first_fetch_answered_by_broker_1(
    state: &mut FetchState<Part>,
) -> Vec<(BrokerId, FetchRequest, Reply)> {
    let request = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let planned = plan(state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(0, 100, 12)]))).unwrap();
    wait(&combine, &mut parts);
    let outcomes = outcomes(state, &combine, parts);
    state.assemble(combine, outcomes, now());
    replies
}

#[test]
fn the_next_fetch_adopts_parked_parts_at_the_same_offsets() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    // The client advanced partition 0 only.
    let request = fetch(&[(0, 12), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    assert_eq!(planned.adopted.len(), 2, "brokers 2 and 3 are still busy");
    let (combine, mut parts, replies) = send(planned);
    assert_eq!(replies.len(), 1, "only broker 1 gets a new part");
    assert_eq!(replies[0].1.topics[0].partitions[0].fetch_offset, 12);

    let (_, _, tx) = out.remove(0);
    tx.send(Ok(answer(vec![data(1, 40, 22)]))).unwrap();
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 12), (1, 40, 0, 22), (2, 0, 0, -1)],
        "the parked part's data serves the next fetch; watermarks last seen fill the rest"
    );
}

#[test]
fn a_parked_part_at_other_offsets_is_asked_again_once_it_answers() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    // The client sought partition 1 back to offset 5.
    let request = fetch(&[(0, 12), (1, 5), (2, 30)], 1);
    let start = now();
    let planned = plan(&mut state, &request, start);
    let (mut combine, mut parts, _replies) = send(planned);
    assert!(
        combine.refetches(&mut parts, start).is_empty(),
        "broker 2 still has the old part"
    );

    advance(Duration::from_millis(100));
    let (_, _, tx) = out.remove(0);
    tx.send(Ok(answer(vec![data(1, 40, 22)]))).unwrap();
    wait(&combine, &mut parts);
    assert!(
        !combine.enough(&mut parts, now()),
        "the old part's data is for offset 20, not 5"
    );
    let again = combine.refetches(&mut parts, now());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].broker, BrokerId(2));
    assert_eq!(again[0].request.max_wait_ms, 400, "the time left");
    assert_eq!(again[0].request.topics[0].partitions[0].fetch_offset, 5);
    let (p, tx) = part(again[0].broker);
    parts.push(p);
    combine.commit(again.into_iter().next().unwrap().claim, now());
    tx.send(Ok(answer(vec![data(1, 70, 22)]))).unwrap();
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(partitions(&response)[1], (1, 70, 0, 22));
    assert!(
        state.stash.is_empty(),
        "data for an offset the client left is dropped"
    );
}

#[test]
fn a_parked_answer_between_fetches_is_served_only_at_its_offset() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    assert_eq!(
        state.kept_bytes(),
        2 << 20,
        "two parked parts, each may bring its one partition's max"
    );
    for (_, _, tx) in out.drain(..) {
        // Partition 1 (broker 2) and 2 (broker 3) answer between fetches.
        tx.send(Ok(answer(vec![data(1, 40, 22), data(2, 50, 33)])))
            .unwrap();
    }
    for parked in state.take_parked() {
        absorb_answered(&mut state, parked);
    }
    let stashed = state.kept_bytes();
    assert!(
        (90..2048).contains(&stashed),
        "the stash counts its records: {stashed}"
    );
    // The client asks partition 1 where the stash has it, partition 2 elsewhere.
    let request = fetch(&[(0, 12), (1, 20), (2, 31)], 1);
    let planned = plan(&mut state, &request, now());
    assert!(
        state.stash.is_empty(),
        "every stashed answer is used or dropped"
    );
    assert_eq!(
        state.kept_bytes(),
        0,
        "nothing kept once the next fetch planned"
    );
    let (combine, mut parts, replies) = send(planned);
    let asked: Vec<(i32, i32, i64)> = replies
        .iter()
        .flat_map(|(b, r, _)| {
            r.topics[0]
                .partitions
                .iter()
                .map(move |p| (b.0, p.partition, p.fetch_offset))
        })
        .collect();
    assert_eq!(
        asked,
        vec![(1, 0, 12), (3, 2, 31)],
        "partition 1 comes from the stash"
    );
    wait(&combine, &mut parts);
    assert!(
        combine.enough(&mut parts, now()),
        "stashed data is ready at once"
    );
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 12), (1, 40, 0, 22), (2, 0, 0, 33)]
    );
}

/// The first fetch (read_uncommitted, no leader epoch) answered by broker
/// 1; broker 2's part answers partition 1 between fetches (stashed), broker
/// 3's stays parked. The next fetch asks the same offsets, changed by
/// `change`: neither the stash nor the parked part may serve it.
fn same_offsets_asked_otherwise(change: impl Fn(&mut FetchRequest)) {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    let (_, _, third) = out.remove(1);
    let (_, _, second) = out.remove(0);
    second.send(Ok(answer(vec![data(1, 40, 22)]))).unwrap();
    let mut parked = state.take_parked();
    let at = parked.iter().position(|p| p.meta.broker == BrokerId(2));
    absorb_answered(&mut state, parked.swap_remove(at.unwrap()));
    for p in parked {
        state.park(p);
    }
    let mut request = fetch(&[(0, 12), (1, 20), (2, 30)], 1);
    change(&mut request);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, mut replies) = send(planned);
    let asked: Vec<(i32, i32, i64)> = replies
        .iter()
        .flat_map(|(b, r, _)| {
            r.topics[0]
                .partitions
                .iter()
                .map(move |p| (b.0, p.partition, p.fetch_offset))
        })
        .collect();
    assert_eq!(
        asked,
        vec![(1, 0, 12), (2, 1, 20)],
        "partition 1 is asked again, not served from the stash"
    );
    third.send(Ok(answer(vec![data(2, 50, 33)]))).unwrap();
    let (_, _, to_2) = replies.remove(1);
    let (_, _, to_1) = replies.remove(0);
    to_1.send(Ok(answer(vec![data(0, 0, 12)]))).unwrap();
    to_2.send(Ok(answer(vec![data(1, 7, 22)]))).unwrap();
    for part in &mut parts {
        part.wait();
    }
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 12), (1, 7, 0, 22), (2, 0, 0, 33)],
        "partition 2 is not served by the part parked for the other fetch"
    );
}

#[test]
fn a_read_uncommitted_answer_never_serves_a_read_committed_fetch() {
    same_offsets_asked_otherwise(|r| r.isolation_level = 1);
}

#[test]
fn an_answer_at_an_older_leader_epoch_never_serves_a_newer_one() {
    same_offsets_asked_otherwise(|r| {
        for p in &mut r.topics[0].partitions {
            p.current_leader_epoch = 6;
        }
    });
}

/// `response` as a broker sends it: its records slices of one frame.
fn from_the_wire(response: &Response) -> Response {
    let mut frame = bytes::BytesMut::new();
    response.encode(&mut frame).unwrap();
    let frame = frame.split_off(4);
    Response::parse(frame, ApiKey::Fetch, VERSION).unwrap()
}

/// Whether `slice` lies inside `frame`'s bytes (shares its allocation).
fn inside(slice: &[u8], frame: &[u8]) -> bool {
    let range = frame.as_ptr_range();
    !slice.is_empty() && range.contains(&slice.as_ptr())
}

/// Broker 2's parked part answers partition 1 with 4 MiB and partition 4
/// (asked along with it) with 1 KiB, in one frame, between fetches; the
/// next fetch asks `next`. Returns the frame.
fn stash_from_one_frame(state: &mut FetchState<Part>, next: &[(i32, i64)]) -> Bytes {
    let mut out = first_fetch_answered_by_broker_1(state);
    let (_, _, tx) = out.remove(0);
    let wire = from_the_wire(&answer(vec![data(1, 4 << 20, 22), data(4, 1024, 9)]));
    let frame = wire.raw_frame().unwrap().clone();
    tx.send(Ok(wire)).unwrap();
    let mut parked = state.take_parked();
    let at = parked.iter().position(|p| p.meta.broker == BrokerId(2));
    let mut second = parked.swap_remove(at.unwrap());
    for p in parked {
        state.park(p);
    }
    let at = second.meta.asked[&key(1)];
    Arc::make_mut(&mut second.meta.asked).insert(key(4), at);
    second.part.wait();
    let Some(Ok(response)) = second.part.take_result() else {
        panic!("answered");
    };
    let frame_bytes = response.wire_len();
    let ResponseKind::Fetch(body) = response.into_body().unwrap() else {
        panic!("a fetch answer");
    };
    state.absorb(&second.meta, body, frame_bytes, now());
    drop(plan(state, &fetch(next, 1), now()));
    frame
}

#[test]
fn a_small_stashed_answer_does_not_hide_the_big_frame_it_came_in() {
    let mut state = FetchState::<Part>::default();
    // The client takes partition 1 and still buffers partition 4.
    let frame = stash_from_one_frame(&mut state, &[(0, 12), (1, 20), (2, 30)]);
    let kept = state.kept_bytes();
    let records = state.stash[&key(4)].data.records.as_deref().unwrap();
    assert_eq!(records.len(), 1024);
    assert!(
        !inside(records, &frame) || kept >= frame.len(),
        "1 KiB stashed keeps the {} bytes frame it is a slice of, counted {kept}",
        frame.len()
    );
    assert!(kept < 64 * 1024, "the slice was copied out: counted {kept}");
}

#[test]
fn a_big_stashed_answer_counts_its_frame_once() {
    let mut state = FetchState::<Part>::default();
    // The client buffers both partitions.
    let frame = stash_from_one_frame(&mut state, &[(0, 12), (2, 30)]);
    let kept = state.kept_bytes();
    let big = state.stash[&key(1)].data.records.as_deref().unwrap();
    assert!(inside(big, &frame), "4 MiB of a 4 MiB frame is not copied");
    assert!(
        (frame.len()..frame.len() + 4096).contains(&kept),
        "the frame counted once, the copied 1 KiB besides: {kept} for a {} bytes frame",
        frame.len()
    );
}

#[test]
fn a_stashed_answer_older_than_the_stash_keeps_is_not_served() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    let (_, _, second) = out.remove(0);
    second.send(Ok(answer(vec![data(1, 40, 22)]))).unwrap();
    let mut parked = state.take_parked();
    let at = parked.iter().position(|p| p.meta.broker == BrokerId(2));
    absorb_answered(&mut state, parked.swap_remove(at.unwrap()));
    for p in parked {
        state.park(p);
    }
    // The client processes for longer than STASH_KEEP, then fetches on at
    // the stashed offset: the answer's watermarks (and any error) are old.
    advance(STASH_KEEP + Duration::from_secs(1));
    let planned = plan(&mut state, &fetch(&[(1, 20)], 1), now());
    let asked: Vec<(i32, i32, i64)> = planned
        .fresh
        .iter()
        .flat_map(|n| {
            n.request.topics[0]
                .partitions
                .iter()
                .map(move |p| (n.broker.0, p.partition, p.fetch_offset))
        })
        .collect();
    assert_eq!(
        asked,
        vec![(2, 1, 20)],
        "asked again, not served from the old stash"
    );
    assert!(state.stash.is_empty());
}

#[test]
fn the_throttle_of_an_answer_harvested_between_fetches_reaches_the_client() {
    let mut state = FetchState::<Part>::default();
    let mut out = first_fetch_answered_by_broker_1(&mut state);
    let (_, _, second) = out.remove(0);
    let mut throttled = answer(vec![data(1, 40, 22)]);
    if let Ok(ResponseKind::Fetch(f)) = throttled.body_mut() {
        f.throttle_time_ms = 300;
    }
    second.send(Ok(throttled)).unwrap();
    let mut parked = state.take_parked();
    let at = parked.iter().position(|p| p.meta.broker == BrokerId(2));
    absorb_answered(&mut state, parked.swap_remove(at.unwrap()));
    for p in parked {
        state.park(p);
    }
    advance(Duration::from_millis(100));
    let planned = plan(&mut state, &fetch(&[(1, 20)], 1), now());
    let (combine, mut parts, _replies) = send(planned);
    wait(&combine, &mut parts);
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    assert_eq!(partitions(&response), vec![(1, 40, 0, 22)]);
    assert_eq!(
        response.throttle_time_ms, 200,
        "the client is told to back off for what is left of the broker's throttle"
    );
    let planned = plan(&mut state, &fetch(&[(1, 60)], 1), now());
    let (combine, parts, _replies) = send(planned);
    let done = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, done, now());
    assert_eq!(response.throttle_time_ms, 0, "told once");
}

#[test]
fn a_failed_parked_part_answers_the_next_fetch_with_a_retriable_error() {
    let mut state = FetchState::<Part>::default();
    let _out = first_fetch_answered_by_broker_1(&mut state);
    let parked = state.take_parked();
    for p in &parked {
        state.absorb_failure(&p.meta, NOT_LEADER_OR_FOLLOWER, now());
    }
    let request = fetch(&[(0, 12), (1, 20), (2, 30)], 1);
    let planned = plan(&mut state, &request, now());
    let (combine, mut parts, _replies) = send(planned);
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    let errors: Vec<i16> = partitions(&response).iter().map(|p| p.2).collect();
    assert_eq!(
        errors,
        vec![
            0,
            NOT_LEADER_OR_FOLLOWER.code(),
            NOT_LEADER_OR_FOLLOWER.code()
        ]
    );
}

#[test]
fn an_unroutable_partition_is_answered_not_leader() {
    let mut state = FetchState::<Part>::default();
    let request = fetch(&[(0, 10), (1, 20)], 1);
    // Only partition 0 has a leader.
    let mut split = routed(&request, leader);
    split.retain(|(b, _)| b.0 == 1);
    let planned = state.plan(&request, VERSION, (None, SessionReply::None), &split, now());
    let (combine, mut parts, mut replies) = send(planned);
    let (_, _, tx) = replies.remove(0);
    tx.send(Ok(answer(vec![data(0, 0, 10)]))).unwrap();
    wait(&combine, &mut parts);
    let outcomes = outcomes(&mut state, &combine, parts);
    let (response, _) = state.assemble(combine, outcomes, now());
    assert_eq!(
        partitions(&response),
        vec![(0, 0, 0, 10), (1, 0, NOT_LEADER_OR_FOLLOWER.code(), -1)]
    );
    assert_eq!(key(1).1, 1);
}

mod sessions;

mod upstream;

mod ahead;

mod topic_ids;

mod hints;

mod bounds;

/// What the driver does next with a split fetch at the head of the queue
/// ([`FetchCombine::on_settled`]), and the errors of partitions no broker
/// serves ([`unknown_partitions`]).
mod steps;

/// What a fetch of a big session builds (see [`count_built`]).
mod work;

#[test]
fn a_part_keeps_one_entry_per_topic_when_the_fetch_names_a_topic_twice() {
    let mut state = FetchState::<Part>::default();
    let other = TopicName(StrBytes::from_static_str("u"));
    let mut request = fetch(&[(0, 10), (1, 20)], 1);
    let again = request.topics[0].clone();
    request.topics[0].partitions.truncate(1);
    request.topics.push(
        FetchTopic::default()
            .with_topic(other.clone())
            .with_partitions(vec![FetchPartition::default().with_partition(0)]),
    );
    request.topics.push(again);
    request.topics[2].partitions.remove(0);
    // All to one broker.
    let split = vec![(BrokerId(1), request.clone())];
    let planned = state.plan(&request, VERSION, (None, SessionReply::None), &split, now());
    let [new] = &planned.fresh[..] else {
        panic!("one part: {:?}", planned.fresh);
    };
    let topics: Vec<(TopicName, Vec<i32>)> = new
        .request
        .topics
        .iter()
        .map(|t| {
            let partitions = t.partitions.iter().map(|p| p.partition).collect();
            (t.topic.clone(), partitions)
        })
        .collect();
    assert_eq!(topics, vec![(topic(), vec![0, 1]), (other, vec![0])]);
}
