//! Fetch rules seen on the wire, with a raw client against `trio` through
//! one Sluice node, where what a broker does decides the outcome:
//!
//! - **Unknown topics within `max_wait_ms`.** A fetch naming a topic no
//!   broker has makes Sluice refresh its metadata first. That refresh goes
//!   to the least busy broker connection, and when every broker holds one
//!   of the connection's parked parts (5 s), it waits behind one: the
//!   fetch must still be answered within its own max wait (1 s) counted
//!   from when Sluice read it, and the unknown partitions get Kafka's
//!   errors (UNKNOWN_TOPIC_OR_PARTITION by name, UNKNOWN_TOPIC_ID by id),
//!   not NOT_LEADER_OR_FOLLOWER.
//! - **v13+ fetch sessions by topic id**: opened, incremental (only the
//!   partitions with news), a partition forgotten by its topic id, and an
//!   incremental fetch keyed by name in that session refused with
//!   FETCH_SESSION_TOPIC_ID_ERROR.
//! - **`max_bytes` over a whole answer.** Parts read ahead and parked by
//!   one fetch, each with its share of `max_bytes`, and a new part for a
//!   partition the next fetch adds, each bring one 600 KB batch: the next
//!   fetch (`max_bytes` 1 MiB) is answered with at most one of them over
//!   the limit, as a broker answers, and the others on the fetches after.

use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic,
};
use sluice_codec::kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests::produce_until_accepted;
use sluice_testkit::sluice::sum_metric;
use sluice_testkit::unique;
use uuid::Uuid;

use super::sluice_bin;

/// A sessionless fetch (v12 and below: by name) of `topics`' partitions at
/// their offsets: `(topic, [(partition, offset)])`.
fn fetch_of(topics: &[(&str, &[(i32, i64)])], max_wait_ms: i32) -> FetchRequest {
    let topics = topics
        .iter()
        .map(|(topic, partitions)| {
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string((*topic).to_owned())))
                .with_partitions(partitions_at(partitions))
        })
        .collect();
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(topics)
}

fn partitions_at(partitions: &[(i32, i64)]) -> Vec<FetchPartition> {
    partitions
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(4 << 20)
        })
        .collect()
}

fn answer(body: ResponseKind) -> FetchResponse {
    match body {
        ResponseKind::Fetch(f) => f,
        other => panic!("not a Fetch answer: {other:?}"),
    }
}

/// Each partition of `answer`: (partition, error, record bytes), in order.
fn listed(answer: &FetchResponse) -> Vec<(i32, i16, usize)> {
    answer
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let bytes = p.records.as_ref().map_or(0, |r| r.len());
            (p.partition_index, p.error_code, bytes)
        })
        .collect()
}

const FETCH_V12: i16 = 12;
const FETCH_V13: i16 = 13;

#[test]
fn a_fetch_naming_an_unknown_topic_is_answered_within_its_max_wait() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-unknown");
    create_spread_topic(&cluster, &topic, 3);
    let mut producer = RawClient::connect(&listen);
    produce_until_accepted(&mut producer, &topic, &[0], "first");
    let mut client = RawClient::connect(&listen);
    // Partition 0 answers at once; 1 and 2 stay parked at their brokers for
    // 5 s, and partition 0's broker gets a part read ahead, parked too.
    let first = fetch_of(&[(&topic, &[(0, 0), (1, 0), (2, 0)])], 5000);
    let first = answer(client.request(ApiKey::Fetch, FETCH_V12, RequestKind::Fetch(first)));
    assert!(
        listed(&first).iter().any(|p| p.0 == 0 && p.2 > 0),
        "partition 0's record answers the first fetch: {:?}",
        listed(&first)
    );
    let read_ahead = sum_metric(&sluice.metrics(), "sluice_fetches_read_ahead_total", &[]);
    assert!(
        read_ahead >= 1.0,
        "every broker holds a part of the connection (one read ahead)"
    );
    let missing = unique("consume-no-such-topic");
    let second = fetch_of(
        &[(&topic, &[(0, 1), (1, 0), (2, 0)]), (&missing, &[(0, 0)])],
        1000,
    );
    let started = Instant::now();
    let second = answer(client.request(ApiKey::Fetch, FETCH_V12, RequestKind::Fetch(second)));
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(3000),
        "a fetch with a 1 s max wait was held {took:?} (a refresh queued behind a 5 s parked part)"
    );
    let unknown = second
        .responses
        .iter()
        .find(|t| t.topic.as_str() == missing)
        .map(|t| t.partitions[0].error_code);
    assert_eq!(
        unknown,
        Some(ResponseError::UnknownTopicOrPartition.code()),
        "a topic no broker has, by name, as Kafka answers it"
    );

    // By id (v13+), on a fresh connection: a topic id no broker has, and a
    // partition its topic does not have.
    let mut by_id = RawClient::connect(&listen);
    let id = by_id.topic_id(&topic);
    // An id no topic has (ids are random; this one is made up).
    let nowhere = Uuid::from_u128(0x51ce_0000_dead_beef_0000_0000_0000_0001);
    let fetch = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic_id(nowhere)
                .with_partitions(partitions_at(&[(0, 0)])),
            FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions_at(&[(0, 0), (7, 0)])),
        ]);
    let answered = answer(by_id.request(ApiKey::Fetch, FETCH_V13, RequestKind::Fetch(fetch)));
    let errors: Vec<(Uuid, i32, i16)> = answered
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(
        errors,
        vec![
            (nowhere, 0, ResponseError::UnknownTopicId.code()),
            (id, 0, 0),
            (id, 7, ResponseError::UnknownTopicOrPartition.code()),
        ]
    );
}

/// A v13 fetch by topic id `id` in session `session` at `epoch`.
fn by_id(id: Uuid, session: i32, epoch: i32, partitions: &[(i32, i64)]) -> RequestKind {
    let mut fetch = FetchRequest::default()
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(session)
        .with_session_epoch(epoch);
    if !partitions.is_empty() {
        fetch.topics = vec![
            FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions_at(partitions)),
        ];
    }
    RequestKind::Fetch(fetch)
}

#[test]
fn v13_fetch_sessions_are_kept_by_topic_id() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-ids");
    create_spread_topic(&cluster, &topic, 3);
    let mut producer = RawClient::connect(&listen);
    produce_until_accepted(&mut producer, &topic, &[1], "one");
    let mut client = RawClient::connect(&listen);
    let id = client.topic_id(&topic);
    let all = [(0, 0), (1, 0), (2, 0)];
    let opened = answer(client.request(ApiKey::Fetch, FETCH_V13, by_id(id, 0, 0, &all)));
    let session = opened.session_id;
    assert!(
        session != 0 && opened.error_code == 0,
        "a session by id: {session}"
    );
    assert!(
        opened.responses.iter().all(|t| t.topic_id == id),
        "answered by topic id"
    );
    let mut parts: Vec<i32> = listed(&opened).iter().map(|p| p.0).collect();
    parts.sort_unstable();
    assert_eq!(
        parts,
        vec![0, 1, 2],
        "the full answer lists every partition"
    );

    // Partition 1 moved on; nothing else changed.
    let next = answer(client.request(ApiKey::Fetch, FETCH_V13, by_id(id, session, 1, &[(1, 1)])));
    assert_eq!((next.session_id, next.error_code), (session, 0));
    assert!(
        listed(&next).iter().all(|p| p.2 == 0),
        "nothing new: {:?}",
        listed(&next)
    );
    // Forget partition 2 by its topic id; a record on it is then not told.
    produce_until_accepted(&mut producer, &topic, &[2], "two");
    let RequestKind::Fetch(mut forget) = by_id(id, session, 2, &[]) else {
        unreachable!("by_id builds a Fetch");
    };
    forget.forgotten_topics_data = vec![
        ForgottenTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![2]),
    ];
    let after = answer(client.request(ApiKey::Fetch, FETCH_V13, RequestKind::Fetch(forget)));
    assert_eq!((after.session_id, after.error_code), (session, 0));
    assert!(
        listed(&after).iter().all(|p| p.0 != 2),
        "partition 2 is out of the session: {:?}",
        listed(&after)
    );
    // The same session asked by name (v12): refused, as Kafka refuses it.
    let RequestKind::Fetch(mut by_name) = by_id(id, session, 3, &[]) else {
        unreachable!("by_id builds a Fetch");
    };
    by_name.topics.clear();
    let refused = answer(client.request(ApiKey::Fetch, FETCH_V12, RequestKind::Fetch(by_name)));
    assert_eq!(
        refused.error_code,
        ResponseError::FetchSessionTopicIdError.code()
    );
}

#[test]
fn an_answer_with_parked_and_new_parts_keeps_to_max_bytes() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-max-bytes");
    create_spread_topic(&cluster, &topic, 3);
    let mut producer = RawClient::connect(&listen);
    produce_until_accepted(&mut producer, &topic, &[0], "first");
    let mut client = RawClient::connect(&listen);
    const MAX_BYTES: i32 = 1 << 20;
    // Partition 0 answers at once and is read ahead (at offset 1, half of
    // max_bytes); partition 1's part (the other half) stays parked.
    let mut first = fetch_of(&[(&topic, &[(0, 0), (1, 0)])], 10_000);
    first.max_bytes = MAX_BYTES;
    let first = answer(client.request(ApiKey::Fetch, FETCH_V12, RequestKind::Fetch(first)));
    assert!(listed(&first).iter().any(|p| p.0 == 0 && p.2 > 0));
    // One 600 KB batch on every partition: the parked parts answer with it.
    let big = "x".repeat(600_000);
    produce_until_accepted(&mut producer, &topic, &[0, 1, 2], &big);
    // The next fetch adds partition 2 and waits for more than max_bytes.
    let mut second = fetch_of(&[(&topic, &[(0, 1), (1, 0), (2, 0)])], 10_000);
    second.max_bytes = MAX_BYTES;
    second.min_bytes = MAX_BYTES + MAX_BYTES / 2;
    let mut served = Vec::new();
    let mut offsets = [1i64, 0, 0];
    let started = Instant::now();
    while served.len() < 3 && started.elapsed() < Duration::from_secs(60) {
        let mut fetch = second.clone();
        fetch.topics[0].partitions =
            partitions_at(&[(0, offsets[0]), (1, offsets[1]), (2, offsets[2])]);
        if !served.is_empty() {
            fetch.min_bytes = 1;
        }
        let got = answer(client.request(ApiKey::Fetch, FETCH_V12, RequestKind::Fetch(fetch)));
        let parts = listed(&got);
        let total: usize = parts.iter().map(|p| p.2).sum();
        let largest = parts.iter().map(|p| p.2).max().unwrap_or(0);
        assert!(
            total <= usize::try_from(MAX_BYTES).unwrap().max(largest),
            "an answer of {total} bytes of records for max_bytes {MAX_BYTES}: {parts:?}"
        );
        for (p, error, bytes) in parts {
            assert_eq!(error, 0, "partition {p}");
            if bytes > 0 {
                served.push(p);
                offsets[usize::try_from(p).unwrap()] += 1;
            }
        }
    }
    served.sort_unstable();
    assert_eq!(served, vec![0, 1, 2], "every big batch is served, once");
}
