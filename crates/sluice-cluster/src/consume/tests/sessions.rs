//! Client fetch sessions (KIP-227) as Kafka's `FetchManager` keeps them:
//! which fetches open, continue, close or are refused.

use sluice_codec::kafka_protocol::messages::fetch_request::ForgottenTopic;

use super::*;

/// A fetch in session `id` at `epoch` of `partitions`.
fn in_session(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut request = fetch(partitions, 1);
    request.session_id = id;
    request.session_epoch = epoch;
    request
}

fn response(partitions: Vec<PartitionData>) -> FetchResponse {
    FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic(topic())
            .with_partitions(partitions),
    ])
}

fn listed(response: &FetchResponse) -> Vec<i32> {
    partitions(response).iter().map(|p| p.0).collect()
}

fn offsets(request: &FetchRequest) -> Vec<(i32, i64)> {
    request.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.fetch_offset))
        .collect()
}

#[test]
fn a_session_remembers_what_incremental_fetches_leave_out() {
    let mut sessions = ClientSessions::default();
    let (full, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 10), (1, 20), (2, 30)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_ne!(id, 0);
    let full = full.unwrap();
    assert_eq!(
        (full.session_id, full.session_epoch),
        (0, -1),
        "parts are sessionless"
    );
    let mut first = response(vec![data(0, 0, 10), data(1, 5, 21), data(2, 0, 30)]);
    sessions.answer(reply, &mut first, VERSION);
    assert_eq!(first.session_id, id);
    assert_eq!(listed(&first), vec![0, 1, 2], "the first answer is full");

    // Only partition 1 moved on.
    let (full, reply) = sessions
        .apply(&in_session(id, 1, &[(1, 21)]), VERSION)
        .unwrap();
    assert_eq!(reply, SessionReply::Incremental(id));
    assert_eq!(offsets(&full.unwrap()), vec![(0, 10), (1, 21), (2, 30)]);
    let mut next = response(vec![data(0, 0, 10), data(1, 0, 21), data(2, 9, 31)]);
    sessions.answer(reply, &mut next, VERSION);
    assert_eq!(listed(&next), vec![2], "only partitions with news");

    let mut forget = in_session(id, 2, &[]);
    forget.topics.clear();
    forget.forgotten_topics_data = vec![
        ForgottenTopic::default()
            .with_topic(topic())
            .with_partitions(vec![0]),
    ];
    let (full, _) = sessions.apply(&forget, VERSION).unwrap();
    assert_eq!(offsets(&full.unwrap()), vec![(1, 21), (2, 30)]);
}

#[test]
fn an_unknown_session_or_epoch_is_a_session_error() {
    let mut sessions = ClientSessions::default();
    let unknown = sessions.apply(&in_session(77, 1, &[(0, 1)]), VERSION);
    assert_eq!(unknown.unwrap_err(), FETCH_SESSION_ID_NOT_FOUND);
    let (_, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("opened");
    };
    let skipped = sessions.apply(&in_session(id, 2, &[]), VERSION);
    assert_eq!(skipped.unwrap_err(), INVALID_FETCH_SESSION_EPOCH);
    assert!(sessions.apply(&in_session(id, 1, &[]), VERSION).is_ok());
}

/// A client that reconnects keeps its session id: its full fetches
/// naming a session this connection never had are served (franz-go
/// sends every later fetch at epoch -1 with that id once one failed).
#[test]
fn a_full_fetch_naming_an_unknown_session_is_served() {
    let mut sessions = ClientSessions::default();
    let (full, reply) = sessions
        .apply(&in_session(7, -1, &[(0, 5)]), VERSION)
        .expect("a sessionless fetch naming an unknown session");
    assert_eq!(reply, SessionReply::None);
    let full = full.expect("sent without the session id");
    assert_eq!((full.session_id, full.session_epoch), (0, -1));
    assert_eq!(offsets(&full), vec![(0, 5)]);

    let (full, reply) = sessions
        .apply(&in_session(7, 0, &[(0, 6)]), VERSION)
        .expect("a full fetch opening a session in place of an unknown one");
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_eq!(offsets(&full.unwrap()), vec![(0, 6)]);
    // A full fetch naming another session leaves this one open.
    let other = if id == 7 { 8 } else { 7 };
    sessions
        .apply(&in_session(other, -1, &[(0, 6)]), VERSION)
        .expect("served");
    let (_, reply) = sessions
        .apply(&in_session(id, 1, &[]), VERSION)
        .expect("still open");
    assert_eq!(reply, SessionReply::Incremental(id));
    let unknown = sessions.apply(&in_session(other, 1, &[]), VERSION);
    assert_eq!(unknown.unwrap_err(), FETCH_SESSION_ID_NOT_FOUND);
}

#[test]
fn the_final_epoch_closes_the_session() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("opened");
    };
    let (full, reply) = sessions
        .apply(&in_session(id, -1, &[(0, 2)]), VERSION)
        .unwrap();
    assert_eq!(reply, SessionReply::None);
    assert_eq!(offsets(&full.unwrap()), vec![(0, 2)]);
    let gone = sessions.apply(&in_session(id, 1, &[]), VERSION);
    assert_eq!(gone.unwrap_err(), FETCH_SESSION_ID_NOT_FOUND);
    let (plain, reply) = sessions.apply(&fetch(&[(0, 3)], 1), VERSION).unwrap();
    assert!(
        plain.is_none() && reply == SessionReply::None,
        "sessionless as is"
    );
    let (_, again) = sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    assert_ne!(
        again,
        SessionReply::Opened(id),
        "a new session gets a new id"
    );
}
#[test]
fn a_consumer_reconnecting_with_its_old_session_id_is_served() {
    // A Java client whose connection dropped asks (S, 0) on the next one.
    let mut sessions = ClientSessions::default();
    let (full, reply) = sessions
        .apply(&in_session(7, 0, &[(0, 1), (1, 2)]), VERSION)
        .expect("a full fetch opens a new session whatever id it names");
    let SessionReply::Opened(id) = reply else {
        panic!("opened: {reply:?}");
    };
    assert_eq!(offsets(&full.unwrap()), vec![(0, 1), (1, 2)]);
    assert!(sessions.apply(&in_session(id, 1, &[]), VERSION).is_ok());

    let (full, reply) = sessions
        .apply(&in_session(99, -1, &[(0, 5)]), VERSION)
        .expect("a sessionless full fetch is served whatever id it names");
    assert_eq!(reply, SessionReply::None);
    let full = full.unwrap();
    assert_eq!((full.session_id, full.session_epoch), (0, -1));
    assert_eq!(offsets(&full), vec![(0, 5)]);
    assert!(
        sessions.apply(&in_session(id, 2, &[]), VERSION).is_ok(),
        "closing another id leaves the open session alone"
    );
}

#[test]
fn a_sessionless_fetch_leaves_the_open_session_alone() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("opened");
    };
    let (plain, reply) = sessions.apply(&fetch(&[(1, 3)], 1), VERSION).unwrap();
    assert!(plain.is_none() && reply == SessionReply::None);
    let (full, reply) = sessions
        .apply(&in_session(id, 1, &[]), VERSION)
        .expect("the session a sessionless fetch does not name stays open");
    assert_eq!(reply, SessionReply::Incremental(id));
    assert_eq!(offsets(&full.unwrap()), vec![(0, 1)]);
}

#[test]
fn an_incremental_fetch_without_a_session_id_is_unknown() {
    let mut sessions = ClientSessions::default();
    sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    let nameless = sessions.apply(&in_session(0, 1, &[(0, 2)]), VERSION);
    assert_eq!(nameless.unwrap_err(), FETCH_SESSION_ID_NOT_FOUND);
}

#[test]
fn a_session_counts_against_the_client_s_memory_budget() {
    let mut state = FetchState::<Part>::default();
    let many: Vec<(i32, i64)> = (0..10_000).map(|p| (p, 0)).collect();
    let (_, reply) = state
        .sessions
        .apply(&in_session(0, 0, &many), VERSION)
        .unwrap();
    assert!(matches!(reply, SessionReply::Opened(_)));
    let kept = state.kept_bytes();
    assert!(
        kept >= 10_000 * 100,
        "a session of 10,000 partitions is counted: {kept} bytes"
    );
    assert!(
        state
            .sessions
            .apply(&in_session(0, -1, &[]), VERSION)
            .is_ok()
    );
}

#[test]
fn a_session_keeps_no_slice_of_the_request_frame() {
    use sluice_codec::{ApiKey, Request, RequestKind};

    let mut sessions = ClientSessions::default();
    let mut request = in_session(0, 0, &[(0, 1)]);
    request.topics[0].topic = TopicName(StrBytes::from_string("x".repeat(100)));
    let request = Request::from_body(ApiKey::Fetch, VERSION, 7, None, RequestKind::Fetch(request));
    let mut frame = bytes::BytesMut::new();
    request.encode(&mut frame).unwrap();
    let frame = frame.split_off(4);
    let mut parsed = Request::parse(frame).unwrap();
    let raw = parsed.raw_frame().unwrap().clone();
    let RequestKind::Fetch(decoded) = parsed.body().unwrap() else {
        panic!("a fetch");
    };
    let decoded_name = decoded.topics[0].topic.as_bytes();
    let range = raw.as_ptr_range();
    let sliced = range.contains(&decoded_name.as_ptr());
    sessions.apply(decoded, VERSION).unwrap();
    let held = sessions.held_names();
    assert_eq!(held.len(), 2);
    assert!(
        held.iter().all(|name| !range.contains(&name.as_ptr())),
        "the session's topic names are slices of the request frame (decoded names sliced: {sliced})"
    );
}

/// Kafka closes a session that an incremental fetch empties and answers it
/// sessionless, to free its slot in the broker's shared session cache.
/// Sluice keeps one session per connection, so there is no slot to free:
/// the emptied session stays open, and the client, answered within it,
/// goes on adding partitions to it.
#[test]
fn an_emptied_session_goes_on_serving_its_client() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 1)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    let mut forget = in_session(id, 1, &[]);
    forget.topics.clear();
    forget.forgotten_topics_data = vec![
        ForgottenTopic::default()
            .with_topic(topic())
            .with_partitions(vec![0]),
    ];
    let (full, reply) = sessions.apply(&forget, VERSION).unwrap();
    assert_eq!(reply, SessionReply::Incremental(id));
    assert!(full.unwrap().topics.is_empty(), "nothing to fetch");
    let (full, reply) = sessions
        .apply(&in_session(id, 2, &[(1, 7)]), VERSION)
        .unwrap();
    assert_eq!(reply, SessionReply::Incremental(id));
    assert_eq!(offsets(&full.unwrap()), vec![(1, 7)]);
}

/// Forgets `partitions` of topic `t` in an incremental fetch.
fn forgetting(id: i32, epoch: i32, partitions: Vec<i32>) -> FetchRequest {
    let mut forget = in_session(id, epoch, &[]);
    forget.topics.clear();
    forget.forgotten_topics_data = vec![
        ForgottenTopic::default()
            .with_topic(topic())
            .with_partitions(partitions),
    ];
    forget
}

/// What a session opened afresh with `partitions` holds: an incremental
/// session must hold (and count) exactly that.
fn fresh_held_bytes(partitions: &[(i32, i64)]) -> usize {
    let mut fresh = ClientSessions::default();
    fresh.apply(&in_session(0, 0, partitions), VERSION).unwrap();
    fresh.held_bytes()
}

#[test]
fn incremental_fetches_add_change_and_forget_partitions_in_order() {
    let mut sessions = ClientSessions::default();
    let (full, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 10), (1, 20), (2, 30)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_eq!(offsets(&full.unwrap()), vec![(0, 10), (1, 20), (2, 30)]);
    // Each step: the incremental fetch, then the full fetch it stands for.
    let steps: Vec<(FetchRequest, Vec<(i32, i64)>)> = vec![
        // Partition 1 moved on, partition 3 is new.
        (
            in_session(id, 1, &[(1, 25), (3, 0)]),
            vec![(0, 10), (1, 25), (2, 30), (3, 0)],
        ),
        // Nothing changed.
        (
            in_session(id, 2, &[]),
            vec![(0, 10), (1, 25), (2, 30), (3, 0)],
        ),
        // Partition 0 forgotten.
        (forgetting(id, 3, vec![0]), vec![(1, 25), (2, 30), (3, 0)]),
        // Partition 0 back, at another offset, and partition 2 moved on.
        (
            in_session(id, 4, &[(2, 31), (0, 50)]),
            vec![(1, 25), (2, 31), (3, 0), (0, 50)],
        ),
        // Partitions 1 and 3 forgotten, and one the session never had.
        (forgetting(id, 5, vec![3, 1, 9]), vec![(2, 31), (0, 50)]),
    ];
    for (epoch, (request, want)) in steps.into_iter().enumerate() {
        let (full, reply) = sessions.apply(&request, VERSION).unwrap();
        assert_eq!(reply, SessionReply::Incremental(id), "step {epoch}");
        assert_eq!(offsets(&full.unwrap()), want, "step {epoch}");
        assert_eq!(
            sessions.held_bytes(),
            fresh_held_bytes(&want),
            "step {epoch}: the session counts what it holds"
        );
    }
    // A reset: a full fetch opening a new session in place of this one.
    let (full, reply) = sessions
        .apply(&in_session(id, 0, &[(5, 1)]), VERSION)
        .unwrap();
    let SessionReply::Opened(new_id) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_ne!(new_id, id);
    assert_eq!(offsets(&full.unwrap()), vec![(5, 1)]);
    assert_eq!(sessions.held_bytes(), fresh_held_bytes(&[(5, 1)]));
    let stale = sessions.apply(&in_session(id, 6, &[(2, 40)]), VERSION);
    assert_eq!(stale.unwrap_err(), FETCH_SESSION_ID_NOT_FOUND);
    let (full, _) = sessions
        .apply(&in_session(new_id, 1, &[(2, 40)]), VERSION)
        .unwrap();
    assert_eq!(offsets(&full.unwrap()), vec![(5, 1), (2, 40)]);
}

#[test]
fn incremental_answers_list_only_news_across_fetches() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions
        .apply(&in_session(0, 0, &[(0, 10), (1, 20), (2, 30)]), VERSION)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    let mut first = response(vec![data(0, 0, 10), data(1, 0, 20), data(2, 0, 30)]);
    sessions.answer(reply, &mut first, VERSION);
    assert_eq!(listed(&first), vec![0, 1, 2], "the first answer is full");
    // Each step: the answer's (partition, record bytes, high watermark),
    // and the partitions the client must be told of.
    type Step = (Vec<(i32, usize, i64)>, Vec<i32>);
    let steps: Vec<Step> = vec![
        (vec![(0, 0, 10), (1, 0, 20), (2, 0, 30)], vec![]),
        (vec![(0, 0, 11), (1, 0, 20), (2, 0, 30)], vec![0]),
        // The same watermark again is no news; records are.
        (vec![(0, 0, 11), (1, 5, 20), (2, 0, 30)], vec![1]),
        (vec![(0, 0, 11), (1, 0, 20), (2, 0, 35)], vec![2]),
        (vec![(0, 0, 11), (1, 0, 20), (2, 0, 35)], vec![]),
    ];
    for (epoch, (answer, want)) in steps.into_iter().enumerate() {
        let epoch = i32::try_from(epoch).unwrap() + 1;
        let (_, reply) = sessions
            .apply(&in_session(id, epoch, &[]), VERSION)
            .unwrap();
        let mut answer = response(
            answer
                .into_iter()
                .map(|(p, records, hw)| data(p, records, hw))
                .collect(),
        );
        sessions.answer(reply, &mut answer, VERSION);
        assert_eq!(listed(&answer), want, "fetch at epoch {epoch}");
    }
}
