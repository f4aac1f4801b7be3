//! **Mixed isolation levels on one connection.** A raw client's
//! read_uncommitted fetch leaves parts parked at two brokers; a
//! transactional producer then writes to their partitions in a transaction
//! it keeps open, and the parked parts answer with its uncommitted records.
//! The same connection then fetches the same offsets read_committed: no
//! uncommitted record may reach it (they are past the last stable offset),
//! though Sluice holds an answer at those offsets. A read_uncommitted
//! fetch after it still gets them.

use std::time::Duration;

use sluice_codec::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use sluice_codec::kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::clients;
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::ToolProcess;
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests::produce_until_accepted;
use sluice_testkit::{unique, wait};

use super::sluice_bin;

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

fn fetch(topic: &str, at: &[(i32, i64)], isolation_level: i8, max_wait_ms: i32) -> RequestKind {
    let partitions = at
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(8 << 20)
            .with_isolation_level(isolation_level)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partitions(partitions),
            ]),
    )
}

/// Record bytes per partition of a Fetch answer.
fn records(answer: ResponseKind) -> Vec<(i32, usize)> {
    let ResponseKind::Fetch(FetchResponse { responses, .. }) = answer else {
        panic!("not a Fetch answer");
    };
    let mut bytes: Vec<(i32, usize)> = responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.records.as_ref().map_or(0, |r| r.len())))
        .collect();
    bytes.sort_unstable();
    bytes
}

#[test]
fn a_read_uncommitted_answer_never_reaches_a_read_committed_fetch() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-isolation");
    create_spread_topic(&cluster, &topic, 3);
    let mut producer = RawClient::connect(&listen);
    produce_until_accepted(&mut producer, &topic, &[0], "plain");
    let mut client = RawClient::connect(&listen);
    // Partition 0 answers at once; 1 and 2 park at their brokers for 20 s.
    let first = fetch(&topic, &[(0, 0), (1, 0), (2, 0)], READ_UNCOMMITTED, 20_000);
    let first = records(client.request(ApiKey::Fetch, 12, first));
    assert!(
        first[0].1 > 0 && first[1].1 == 0 && first[2].1 == 0,
        "{first:?}"
    );

    // A transaction writes to every partition and stays open (40 records,
    // 250 ms apart, then aborted).
    let transactional_id = unique("isolation-txn");
    let args = [
        "--bootstrap",
        listen.as_str(),
        "--topic",
        &topic,
        "--transactional-id",
        &transactional_id,
        "--abort",
        "open",
        "--count",
        "40",
        "--delay-ms",
        "250",
    ];
    let mut txn = ToolProcess::spawn(clients::librdkafka("transactions.py", &args), "txn");
    // Seen read_uncommitted from another connection: the parked part of
    // the first there has answered with them too (it waits for any record).
    let mut probe = RawClient::connect(&listen);
    wait::until(
        Duration::from_secs(60),
        "uncommitted records on partition 1 or 2",
        || {
            let seen = records(probe.request(
                ApiKey::Fetch,
                12,
                fetch(&topic, &[(1, 0), (2, 0)], READ_UNCOMMITTED, 200),
            ));
            if seen.iter().any(|p| p.1 > 0) {
                Ok(())
            } else {
                Err(format!("record bytes per partition: {seen:?}"))
            }
        },
    );
    let committed = records(client.request(
        ApiKey::Fetch,
        12,
        fetch(&topic, &[(0, 1), (1, 0), (2, 0)], READ_COMMITTED, 1000),
    ));
    assert_eq!(
        committed,
        vec![(0, 0), (1, 0), (2, 0)],
        "a read_committed fetch got records of a transaction still open"
    );
    let uncommitted = records(client.request(
        ApiKey::Fetch,
        12,
        fetch(&topic, &[(1, 0), (2, 0)], READ_UNCOMMITTED, 1000),
    ));
    assert!(
        uncommitted.iter().any(|p| p.1 > 0),
        "read_uncommitted on the same connection sees them: {uncommitted:?}"
    );
    let out = txn.wait_exit(Duration::from_secs(90));
    assert_eq!(out.code, Some(0), "the transaction ran\n{}", out.text());
}
