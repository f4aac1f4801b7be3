//! Broker fetch sessions: what Sluice asks of each broker, and how it
//! recovers when a broker forgets or refuses a session.

use super::*;

/// Prepares `part` for broker `b` and commits it, as a part that was sent.
fn sent_as(
    sessions: &mut UpstreamSessions,
    b: BrokerId,
    part: &mut FetchRequest,
    version: i16,
) -> SentIn {
    let prepared = sessions.prepare(b, part, version);
    sessions.commit(prepared)
}

#[test]
fn a_part_never_sent_leaves_the_session_as_it_was() {
    let mut sessions = UpstreamSessions::default();
    let mut lost = part_of(&[(0, 10)]);
    drop(sessions.prepare(B, &mut lost, VERSION));
    let mut first = part_of(&[(0, 10)]);
    let in_first = sent_as(&mut sessions, B, &mut first, VERSION);
    assert_eq!(
        in_first,
        Some((0, 0)),
        "still closed: the next part opens one"
    );
    sessions.answered(B, in_first, &opened(42));
    let mut lost = part_of(&[(0, 11)]);
    drop(sessions.prepare(B, &mut lost, VERSION));
    let mut next = part_of(&[(0, 11)]);
    assert_eq!(
        sent_as(&mut sessions, B, &mut next, VERSION),
        Some((42, 1)),
        "the epoch a lost part would have used is used again"
    );
    assert_eq!(sent(&next).0, vec![(0, 11)], "and the change it carried");
}

fn part_of(partitions: &[(i32, i64)]) -> FetchRequest {
    let mut part = fetch(partitions, 1);
    part.session_id = 0;
    part.session_epoch = -1;
    part
}

fn sent(part: &FetchRequest) -> (Vec<(i32, i64)>, Vec<i32>) {
    let mut topics: Vec<(i32, i64)> = part
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
        .collect();
    topics.sort_unstable();
    let forgotten = part
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    (topics, forgotten)
}

fn opened(id: i32) -> FetchResponse {
    FetchResponse::default().with_session_id(id)
}

const B: BrokerId = BrokerId(2);

#[test]
fn parts_go_out_incrementally_in_the_broker_session() {
    let mut sessions = UpstreamSessions::default();
    let mut first = part_of(&[(0, 10), (1, 20), (2, 30)]);
    let in_first = sent_as(&mut sessions, B, &mut first, VERSION);
    assert_eq!(in_first, Some((0, 0)), "the first part opens a session");
    assert_eq!(sent(&first).0.len(), 3, "in full");

    let mut meanwhile = part_of(&[(0, 10)]);
    assert_eq!(sent_as(&mut sessions, B, &mut meanwhile, VERSION), None);
    assert_eq!(
        (meanwhile.session_id, meanwhile.session_epoch),
        (0, -1),
        "sessionless while the session opens"
    );

    sessions.answered(B, in_first, &opened(42));
    let mut next = part_of(&[(0, 10), (1, 25)]);
    assert_eq!(sent_as(&mut sessions, B, &mut next, VERSION), Some((42, 1)));
    assert_eq!((next.session_id, next.session_epoch), (42, 1));
    assert_eq!(
        sent(&next),
        (vec![(1, 25)], vec![2]),
        "only the changed partition, and the dropped one forgotten"
    );
    let mut again = part_of(&[(0, 10), (1, 25)]);
    assert_eq!(
        sent_as(&mut sessions, B, &mut again, VERSION),
        Some((42, 2))
    );
    assert_eq!(sent(&again), (vec![], vec![]), "nothing changed");
}

#[test]
fn a_session_error_or_a_failure_opens_a_new_session() {
    let mut sessions = UpstreamSessions::default();
    let mut first = part_of(&[(0, 10)]);
    let in_first = sent_as(&mut sessions, B, &mut first, VERSION);
    sessions.answered(B, in_first, &opened(42));
    let mut next = part_of(&[(0, 11)]);
    let in_next = sent_as(&mut sessions, B, &mut next, VERSION);
    let evicted = FetchResponse::default().with_error_code(FETCH_SESSION_ID_NOT_FOUND.code());
    sessions.answered(B, in_next, &evicted);
    let mut full = part_of(&[(0, 11)]);
    assert_eq!(sent_as(&mut sessions, B, &mut full, VERSION), Some((0, 0)));
    assert_eq!(sent(&full).0, vec![(0, 11)]);

    sessions.answered(B, Some((0, 0)), &opened(43));
    let mut lost = part_of(&[(0, 12)]);
    let in_lost = sent_as(&mut sessions, B, &mut lost, VERSION);
    sessions.failed(B, in_lost);
    let mut after = part_of(&[(0, 12)]);
    assert_eq!(
        sent_as(&mut sessions, B, &mut after, VERSION),
        Some((43, 0)),
        "the broker may have applied the lost part: its session is named, to be dropped"
    );
}

#[test]
fn a_new_session_after_an_error_closes_the_one_the_broker_may_still_hold() {
    let mut sessions = UpstreamSessions::default();
    let mut first = part_of(&[(0, 10)]);
    let in_first = sent_as(&mut sessions, B, &mut first, VERSION);
    sessions.answered(B, in_first, &opened(42));
    let mut next = part_of(&[(0, 11)]);
    let in_next = sent_as(&mut sessions, B, &mut next, VERSION);
    let skipped = FetchResponse::default().with_error_code(INVALID_FETCH_SESSION_EPOCH.code());
    sessions.answered(B, in_next, &skipped);
    let mut full = part_of(&[(0, 11)]);
    assert_eq!(
        sent_as(&mut sessions, B, &mut full, VERSION),
        Some((42, 0)),
        "(S, 0): the broker drops S and opens a new session"
    );
    assert_eq!((full.session_id, full.session_epoch), (42, 0));
    sessions.answered(B, Some((42, 0)), &opened(43));
    let mut lost = part_of(&[(0, 12)]);
    let in_lost = sent_as(&mut sessions, B, &mut lost, VERSION);
    sessions.failed(B, in_lost);
    assert_eq!(sessions.held().collect::<Vec<_>>(), vec![(B, 43)]);
    let mut after = part_of(&[(0, 12)]);
    assert_eq!(
        sent_as(&mut sessions, B, &mut after, VERSION),
        Some((43, 0))
    );
    sessions.answered(B, Some((43, 0)), &opened(44));
    assert_eq!(sessions.held().collect::<Vec<_>>(), vec![(B, 44)]);
}

#[test]
fn a_broker_without_room_for_a_session_is_asked_again() {
    let mut sessions = UpstreamSessions::default();
    let mut first = part_of(&[(0, 10)]);
    let in_first = sent_as(&mut sessions, B, &mut first, VERSION);
    sessions.answered(B, in_first, &opened(0));
    let mut next = part_of(&[(0, 11)]);
    assert_eq!(sent_as(&mut sessions, B, &mut next, VERSION), Some((0, 0)));
}

#[test]
fn old_versions_have_no_sessions() {
    let mut sessions = UpstreamSessions::default();
    let mut part = part_of(&[(0, 10)]);
    assert_eq!(sent_as(&mut sessions, B, &mut part, 6), None);
    assert_eq!(part.session_epoch, -1);
}
