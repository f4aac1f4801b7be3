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

/// A broker's side of the session: each partition's offset, as the parts
/// in it leave it.
fn broker_applies(held: &mut Vec<(i32, i64)>, part: &FetchRequest) {
    if part.session_epoch == 0 {
        held.clear();
    }
    for p in part
        .forgotten_topics_data
        .iter()
        .flat_map(|t| &t.partitions)
    {
        held.retain(|(q, _)| q != p);
    }
    for p in part.topics.iter().flat_map(|t| &t.partitions) {
        held.retain(|(q, _)| *q != p.partition);
        held.push((p.partition, p.fetch_offset));
    }
    held.sort_unstable();
}

/// Parts of a session of a thousand partitions that each move, add or
/// drop a few: what the broker holds after each incremental part is the
/// part Sluice meant, and only the change went out.
#[test]
fn incremental_parts_leave_the_broker_holding_each_whole_part() {
    let mut sessions = UpstreamSessions::default();
    let mut wanted: Vec<(i32, i64)> = (0..1_000).map(|p| (p, 0)).collect();
    let mut first = part_of(&wanted);
    let opening = sent_as(&mut sessions, B, &mut first, VERSION);
    sessions.answered(B, opening, &opened(42));
    let mut broker = Vec::new();
    broker_applies(&mut broker, &first);
    let mut seed: u64 = 7;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for step in 0..200 {
        let before = wanted.clone();
        for _ in 0..next(4) {
            let at = usize::try_from(next(wanted.len() as u64)).unwrap();
            match next(3) {
                0 => wanted[at].1 += 1,
                1 => {
                    wanted.remove(at);
                }
                _ => wanted.push((1_000 + i32::try_from(next(50)).unwrap(), 0)),
            }
        }
        wanted.sort_unstable();
        wanted.dedup_by_key(|(p, _)| *p);
        let mut part = part_of(&wanted);
        let epoch = step + 1;
        assert_eq!(
            sent_as(&mut sessions, B, &mut part, VERSION),
            Some((42, epoch))
        );
        let (changed, forgotten) = sent(&part);
        let moved = wanted.iter().filter(|p| !before.contains(p)).count();
        let dropped = before
            .iter()
            .filter(|(p, _)| !wanted.iter().any(|(q, _)| q == p))
            .count();
        assert_eq!(
            (changed.len(), forgotten.len()),
            (moved, dropped),
            "step {step}"
        );
        broker_applies(&mut broker, &part);
        assert_eq!(broker, wanted, "step {step}: the broker holds the part");
    }
}
