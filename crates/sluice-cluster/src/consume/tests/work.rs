//! A fetch's work follows what it carries, not the size of its session:
//! a consumer of [`SESSION`] partitions on one broker, fetching as the
//! driver runs it (its session applied, the fetch split and planned, the
//! parked part ahead adopted, the answer assembled, a part sent ahead in
//! the broker session), to a broker that keeps its own side of the session.

use super::ahead::batch_data;
use super::*;
use crate::hash::Map;

/// The partitions of the client's session.
const SESSION: i32 = 1_000;

/// The one broker, and the session id it gives.
const BROKER: BrokerId = BrokerId(1);
const BROKER_SESSION: i32 = 42;

/// A broker: each partition's log end offset, and what its fetch session
/// with Sluice holds (partition -> offset asked).
#[derive(Default)]
struct Broker {
    log_end: Map<i32, i64>,
    session: Map<i32, i64>,
}

impl Broker {
    /// Applies a part to the session, as a broker's `FetchManager` does.
    fn apply(&mut self, part: &FetchRequest) {
        if part.session_epoch <= 0 {
            self.session.clear();
        }
        for topic in &part.forgotten_topics_data {
            for p in &topic.partitions {
                self.session.remove(p);
            }
        }
        for p in part.topics.iter().flat_map(|t| &t.partitions) {
            self.session.insert(p.partition, p.fetch_offset);
        }
    }

    /// Its answer to the part last applied (`full`: list every partition).
    fn answer(&self, full: bool) -> Response {
        let mut listed: Vec<PartitionData> = Vec::new();
        let mut asked: Vec<(i32, i64)> = self.session.iter().map(|(p, o)| (*p, *o)).collect();
        asked.sort_unstable();
        for (p, offset) in asked {
            let end = self.log_end.get(&p).copied().unwrap_or(0);
            if offset < end {
                let count = i32::try_from(end - offset).unwrap();
                listed.push(batch_data(p, offset, count, end));
            } else if full {
                listed.push(data(p, 0, end));
            }
        }
        let mut response = answer(listed);
        if let Ok(ResponseKind::Fetch(body)) = response.body_mut() {
            body.session_id = BROKER_SESSION;
        }
        response
    }
}

/// A client fetch in session `id` at `epoch` of `partitions`.
fn in_session(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut request = fetch(partitions, 1);
    request.session_id = id;
    request.session_epoch = epoch;
    request
}

/// The driver, for one client connection.
struct Driver {
    state: FetchState<Part>,
    broker: Broker,
    /// The reply of the part parked ahead, if one is out.
    ahead: Option<Reply>,
}

impl Driver {
    /// Serves `request` while `arrives` is written to its partition's log:
    /// returns the client's answer.
    fn fetch(&mut self, request: &FetchRequest, arrives: i32) -> FetchResponse {
        let (full, reply) = self.state.sessions.apply(request, VERSION).unwrap();
        let full = full.unwrap_or_else(|| request.clone());
        let split = routed(&full, |_| BROKER.0);
        let Planned {
            mut combine,
            adopted,
            fresh,
        } = self
            .state
            .plan(&full, VERSION, (None, reply), &split, now());
        let mut parts = adopted;
        *self.broker.log_end.entry(arrives).or_default() += 1;
        if let Some(ahead) = self.ahead.take() {
            ahead.send(Ok(self.broker.answer(false))).unwrap();
        }
        for NewPart {
            broker,
            mut request,
            mut claim,
        } in fresh
        {
            let prepared = self.state.upstream.prepare(broker, &mut request, VERSION);
            claim.sent_in(self.state.upstream.commit(prepared));
            self.broker.apply(&request);
            let (part, tx) = part(broker);
            tx.send(Ok(self.broker.answer(request.session_epoch <= 0)))
                .unwrap();
            parts.push(part);
            combine.commit(claim, now());
        }
        for part in &mut parts {
            part.wait();
        }
        combine.learn(&mut parts, &mut self.state.upstream);
        let outcomes = outcomes(&mut self.state, &combine, parts);
        let (response, ahead) = self.state.assemble(combine, outcomes, now());
        for ReadAhead {
            broker,
            mut request,
            mut meta,
            ..
        } in ahead
        {
            let prepared = self.state.upstream.prepare(broker, &mut request, VERSION);
            meta.sent_in = self.state.upstream.commit(prepared);
            self.broker.apply(&request);
            let (part, tx) = part(broker);
            self.ahead = Some(tx);
            self.state.park(Parked { part, meta });
        }
        response
    }
}

/// Each listed partition's (index, record bytes).
fn listed(response: &FetchResponse) -> Vec<(i32, usize)> {
    partitions(response).iter().map(|p| (p.0, p.1)).collect()
}

#[test]
fn an_incremental_fetch_of_one_change_builds_entries_for_what_it_carries() {
    let mut driver = Driver {
        state: FetchState::default(),
        broker: Broker::default(),
        ahead: None,
    };
    let all: Vec<(i32, i64)> = (0..SESSION).map(|p| (p, 0)).collect();
    let first = driver.fetch(&in_session(0, 0, &all), 0);
    assert_eq!(first.responses[0].partitions.len(), 1_000, "a full answer");
    let id = first.session_id;
    // Fetch `n` asks the partition of fetch n-1 at its next offset, while
    // partition n gets a record; its answer carries partition n alone.
    let mut built = Vec::new();
    for n in 1..6 {
        take_built();
        let request = in_session(id, n, &[(n - 1, 1)]);
        let response = driver.fetch(&request, n);
        built.push(take_built());
        assert_eq!(listed(&response), vec![(n, 61)], "fetch {n}");
        let ahead = &driver.state.parked[0];
        assert_eq!(ahead.meta.asked.len(), 1_000, "fetch {n}: ahead asks all");
        assert_eq!(
            driver.broker.session.get(&n),
            Some(&1),
            "fetch {n}: the broker session moved on"
        );
    }
    eprintln!("partition entries built per fetch: {built:?}");
    assert_eq!(driver.broker.session.len(), 1_000);
    assert!(
        built.iter().all(|b| *b <= 16),
        "partition entries built per fetch of a 1,000-partition session \
         changing one partition and carrying one: {built:?}"
    );
}

/// A part's positions built on a base: the base's partitions the part
/// leaves out are not kept, and a base another part still holds is not
/// changed under it.
#[test]
fn asked_positions_built_on_a_base_are_the_part_s_own() {
    let version = VERSION;
    let first = fetch(&[(0, 10), (1, 20), (2, 30)], 1);
    let base = super::super::asked::asked_on(None, &first, version);
    let held = Arc::clone(&base);
    let moved = fetch(&[(0, 10), (1, 21), (2, 30)], 1);
    let asked = super::super::asked::asked_on(Some(base), &moved, version);
    assert_eq!(asked[&key(1)].fetch_offset, 21);
    assert_eq!(
        held[&key(1)].fetch_offset,
        20,
        "the other part's map is its own"
    );
    let fewer = fetch(&[(0, 10), (3, 5)], 1);
    let asked = super::super::asked::asked_on(Some(asked), &fewer, version);
    let mut keys: Vec<i32> = asked.keys().map(|k| k.1).collect();
    keys.sort_unstable();
    assert_eq!(keys, vec![0, 3], "partition 1 and 2 are no longer asked");
}

/// The positions a part asked outlive its fetch (the next part's are built
/// on them): their topic names are not slices of the request frame.
#[test]
fn asked_positions_keep_no_slice_of_the_request_frame() {
    use sluice_codec::{Request, RequestKind};

    let decoded = |request: FetchRequest| {
        let mut request = request;
        request.topics[0].topic = TopicName(StrBytes::from_string("x".repeat(100)));
        let request =
            Request::from_body(ApiKey::Fetch, VERSION, 7, None, RequestKind::Fetch(request));
        let mut frame = bytes::BytesMut::new();
        request.encode(&mut frame).unwrap();
        let mut parsed = Request::parse(frame.split_off(4)).unwrap();
        let raw = parsed.raw_frame().unwrap().clone();
        let RequestKind::Fetch(decoded) = parsed.body().unwrap().clone() else {
            panic!("a fetch");
        };
        (raw, decoded)
    };
    let in_frame = |asked: &Asked, raw: &Bytes| {
        asked.keys().any(|(topic, _)| match topic {
            TopicRef::Name(name) => raw.as_ptr_range().contains(&name.as_bytes().as_ptr()),
            TopicRef::Id(_) => false,
        })
    };
    let (raw, first) = decoded(fetch(&[(0, 10), (1, 20)], 1));
    let base = super::super::asked::asked_on(None, &first, VERSION);
    assert!(!in_frame(&base, &raw), "built afresh");
    let (raw, next) = decoded(fetch(&[(0, 10), (1, 21), (2, 0)], 1));
    let asked = super::super::asked::asked_on(Some(base), &next, VERSION);
    assert_eq!(asked.len(), 3);
    assert!(!in_frame(&asked, &raw), "built on a base");
}
