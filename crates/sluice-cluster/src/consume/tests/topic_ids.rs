//! Fetch sessions at v13+, where topics are named by id: a client session
//! remembers and forgets partitions by topic id, and a session keeps the
//! kind of key it was opened with (Kafka's `FetchManager.newContext`
//! answers an incremental fetch of the other kind
//! FETCH_SESSION_TOPIC_ID_ERROR; the Java client switches versions within a
//! session when a topic id goes missing and relies on that answer).

use sluice_codec::kafka_protocol::messages::fetch_request::ForgottenTopic;

use super::*;
use crate::error_codes::FETCH_SESSION_TOPIC_ID_ERROR;

const V13: i16 = 13;
const ID: Uuid = Uuid::from_u128(0x5eed);

/// A v13 fetch in session `id` at `epoch` of `partitions`, by topic id.
fn by_id(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut request = fetch(partitions, 1);
    request.topics[0].topic = TopicName::default();
    request.topics[0].topic_id = ID;
    request.session_id = id;
    request.session_epoch = epoch;
    request
}

fn by_name(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut request = fetch(partitions, 1);
    request.session_id = id;
    request.session_epoch = epoch;
    request
}

fn offsets(request: &FetchRequest) -> Vec<(Uuid, i32, i64)> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition, p.fetch_offset))
        })
        .collect()
}

#[test]
fn a_v13_session_remembers_and_forgets_partitions_by_topic_id() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions
        .apply(&by_id(0, 0, &[(0, 10), (1, 20)]), V13)
        .unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    let (full, reply) = sessions.apply(&by_id(id, 1, &[(1, 25)]), V13).unwrap();
    assert_eq!(reply, SessionReply::Incremental(id));
    assert_eq!(
        offsets(&full.unwrap()),
        vec![(ID, 0, 10), (ID, 1, 25)],
        "the session stands for both partitions, by id"
    );
    let mut forget = by_id(id, 2, &[]);
    forget.topics.clear();
    forget.forgotten_topics_data = vec![
        ForgottenTopic::default()
            .with_topic_id(ID)
            .with_partitions(vec![0]),
    ];
    let (full, _) = sessions.apply(&forget, V13).unwrap();
    assert_eq!(
        offsets(&full.unwrap()),
        vec![(ID, 1, 25)],
        "partition 0 forgotten by its topic id"
    );
}

#[test]
fn an_incremental_fetch_keyed_otherwise_than_its_session_is_refused() {
    let mut sessions = ClientSessions::default();
    let (_, reply) = sessions.apply(&by_name(0, 0, &[(0, 10)]), VERSION).unwrap();
    let SessionReply::Opened(id) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_eq!(
        sessions.apply(&by_id(id, 1, &[(1, 5)]), V13).err(),
        Some(FETCH_SESSION_TOPIC_ID_ERROR),
        "a session keyed by name takes no fetch keyed by id"
    );
    // The client starts over, (S, 0) at v13: a session keyed by id.
    let (_, reply) = sessions.apply(&by_id(id, 0, &[(0, 10)]), V13).unwrap();
    let SessionReply::Opened(by_ids) = reply else {
        panic!("a new session: {reply:?}");
    };
    assert_eq!(
        sessions.apply(&by_name(by_ids, 1, &[]), VERSION).err(),
        Some(FETCH_SESSION_TOPIC_ID_ERROR),
        "nor the other way round"
    );
    assert!(sessions.apply(&by_id(by_ids, 1, &[]), V13).is_ok());
}

#[test]
fn a_part_keyed_otherwise_than_the_broker_session_opens_a_new_one() {
    let mut sessions = UpstreamSessions::default();
    let b = BrokerId(2);
    let mut first = by_name(0, -1, &[(0, 10)]);
    let prepared = sessions.prepare(b, &mut first, VERSION);
    let in_first = sessions.commit(prepared);
    sessions.answered(b, in_first, &FetchResponse::default().with_session_id(42));
    let mut next = by_id(0, -1, &[(0, 11)]);
    let prepared = sessions.prepare(b, &mut next, V13);
    assert_eq!(
        sessions.commit(prepared),
        Some((42, 0)),
        "(S, 0): the broker drops the session keyed by name and opens one by id"
    );
    assert_eq!(offsets(&next), vec![(ID, 0, 11)], "in full");
    sessions.answered(
        b,
        Some((42, 0)),
        &FetchResponse::default().with_session_id(43),
    );
    let mut after = by_id(0, -1, &[(0, 12)]);
    let prepared = sessions.prepare(b, &mut after, V13);
    assert_eq!(
        sessions.commit(prepared),
        Some((43, 1)),
        "incremental again"
    );
    assert_eq!(offsets(&after), vec![(ID, 0, 12)]);
}

#[test]
fn a_topic_id_session_error_from_a_broker_is_the_session_s_business() {
    let mut sessions = UpstreamSessions::default();
    let b = BrokerId(2);
    let mut first = by_name(0, -1, &[(0, 10)]);
    let prepared = sessions.prepare(b, &mut first, VERSION);
    let in_first = sessions.commit(prepared);
    sessions.answered(b, in_first, &FetchResponse::default().with_session_id(42));
    let mut next = by_name(0, -1, &[(0, 11)]);
    let prepared = sessions.prepare(b, &mut next, VERSION);
    let in_next = sessions.commit(prepared);
    let refused = FetchResponse::default().with_error_code(FETCH_SESSION_TOPIC_ID_ERROR.code());
    sessions.answered(b, in_next, &refused);
    assert!(crate::consume::upstream::is_session_error(
        FETCH_SESSION_TOPIC_ID_ERROR
    ));
    let mut again = by_name(0, -1, &[(0, 11)]);
    let prepared = sessions.prepare(b, &mut again, VERSION);
    assert_eq!(
        sessions.commit(prepared),
        Some((42, 0)),
        "a new session, naming the one the broker still holds"
    );
}

#[test]
fn a_broker_session_keeps_no_slice_of_the_client_s_request() {
    let mut sessions = UpstreamSessions::default();
    let b = BrokerId(2);
    let frame = Bytes::from(b"....a-topic-named-in-a-big-request-frame....".to_vec());
    let name = TopicName(StrBytes::try_from(frame.slice(4..40)).unwrap());
    let mut part = by_name(0, -1, &[(0, 10)]);
    part.topics[0].topic = name;
    let prepared = sessions.prepare(b, &mut part, VERSION);
    let sent = sessions.commit(prepared);
    drop(part);
    sessions.answered(b, sent, &FetchResponse::default().with_session_id(42));
    let range = frame.as_ptr_range();
    assert!(
        sessions
            .held_names()
            .iter()
            .all(|name| !range.contains(&name.as_ptr())),
        "the broker session keeps the client's request frame by a topic name"
    );
}
