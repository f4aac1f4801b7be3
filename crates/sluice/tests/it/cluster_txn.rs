//! Transactions through KafkaSinkCluster against the real 3-node cluster
//! (`trio`), with Kafka 4.4 clients (transactions v2, KIP-890: Produce v12+
//! adds partitions implicitly and EndTxn v5 bumps the epoch):
//!
//! - librdkafka commits one transaction and aborts another; a Java
//!   `read_committed` consumer sees exactly the committed records, while a
//!   `read_uncommitted` one also sees the aborted ones (they did reach the logs);
//! - Kafka's Java `TransactionalMessageCopier` copies a partition with
//!   exactly-once semantics (consumed offsets committed in the transaction,
//!   random aborts): a `read_committed` consumer of the output sees every input
//!   record exactly once, and the group's committed offset is the input's end.
//!
//! Partition leaders, the transaction coordinator and the group coordinator
//! sit on different brokers, so every transaction API crosses brokers behind
//! the one Sluice node the clients know.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_testkit::clients::{self, java_produce};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::{unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Every record of `topic` that a consumer with `isolation` reads through
/// `bootstrap`: it stops after `expected + 1` records (one too many) or once
/// no record came for 15 s, so that extra records are seen, not cut off.
fn read_all(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    isolation: &str,
    expected: usize,
) -> Vec<String> {
    let max = (expected + 1).to_string();
    let args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--isolation-level",
        isolation,
        "--max-messages",
        &max,
        "--timeout-ms",
        "15000",
    ];
    let out = clients::run(
        clients::java(cluster, clients::CONSOLE_CONSUMER, &args),
        None,
        Duration::from_secs(120),
        "java console consumer",
    );
    out.assert_success(&format!("java console consumer ({isolation})"));
    let mut lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

fn named(prefix: &str, n: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    v.sort();
    v
}

#[test]
fn librdkafka_transactions_commit_and_abort() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("txn-rdkafka");
    create_spread_topic(&cluster, &topic, 6);
    let count = 60;
    let out = clients::run_librdkafka(
        "transactions.py",
        &[
            "--bootstrap",
            &listen,
            "--topic",
            &topic,
            "--transactional-id",
            &unique("txn-id"),
            "--count",
            &count.to_string(),
            "--commit",
            "first",
            "--abort",
            "aborted",
            "--commit",
            "second",
        ],
        Duration::from_secs(120),
    );
    out.assert_success("librdkafka transactions");

    let mut committed = named("first", count);
    committed.extend(named("second", count));
    committed.sort();
    let got = read_all(&cluster, &listen, &topic, "read_committed", committed.len());
    assert_eq!(
        got, committed,
        "read_committed through Sluice sees exactly the committed records"
    );

    let mut everything = committed.clone();
    everything.extend(named("aborted", count));
    everything.sort();
    let got = read_all(
        &cluster,
        &listen,
        &topic,
        "read_uncommitted",
        everything.len(),
    );
    assert_eq!(
        got, everything,
        "the aborted records were written (and are visible to read_uncommitted)"
    );
    assert_eq!(
        sluice.metric("sluice_synthesized_error_responses_total", &[]),
        0.0,
        "no broker failed"
    );
    assert!(sluice.metric("sluice_requests_total", &["api=\"EndTxn\""]) >= 3.0);
}

#[test]
fn java_exactly_once_copy_with_random_aborts() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let input = unique("txn-in");
    let output = unique("txn-out");
    let group = unique("txn-group");
    let transactional_id = unique("copier");
    cluster.create_topic(&input, 1, 3);
    create_spread_topic(&cluster, &output, 6);
    let count = 400;
    let sent: Vec<String> = (0..count).map(|i| format!("k{i}:copy-{i}")).collect();
    java_produce(
        &cluster,
        &listen,
        &input,
        &sent,
        &[
            "--reader-property",
            "parse.key=true",
            "--reader-property",
            "key.separator=:",
        ],
    );

    let out = clients::run(
        clients::java(
            &cluster,
            "org.apache.kafka.tools.TransactionalMessageCopier",
            &[
                "--broker-list",
                &listen,
                "--input-topic",
                &input,
                "--input-partition",
                "0",
                "--output-topic",
                &output,
                "--transactional-id",
                &transactional_id,
                "--consumer-group",
                &group,
                "--transaction-size",
                "40",
                "--enable-random-aborts",
                "--use-group-metadata",
            ],
        ),
        None,
        Duration::from_secs(150),
        "TransactionalMessageCopier",
    );
    out.assert_success("TransactionalMessageCopier");
    assert!(
        out.stdout.contains("\"remaining\":0"),
        "the copier reached the end of its input\n{}",
        out.stdout
    );

    let mut expected: Vec<String> = (0..count).map(|i| format!("copy-{i}")).collect();
    expected.sort();
    let got = read_all(&cluster, &listen, &output, "read_committed", count);
    assert_eq!(
        got, expected,
        "every input record exactly once in the committed output"
    );

    let described = cluster.tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &[
            "--bootstrap-server",
            &listen,
            "--describe",
            "--group",
            &group,
        ],
        Duration::from_secs(60),
    );
    described.assert_success("describe the copier's group through Sluice");
    let committed: Vec<u64> = described
        .stdout
        .lines()
        .filter(|l| l.contains(&input))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse().ok())
        .collect();
    assert_eq!(
        committed,
        [count as u64],
        "the transactional offset commit landed\n{}",
        described.stdout
    );
    transactions_tool_sees(&cluster, &listen, &transactional_id, &output);
    assert_eq!(
        sluice.metric("sluice_synthesized_error_responses_total", &[]),
        0.0,
        "no broker failed"
    );
    // Transactions v2: partitions join a transaction through Produce, and the
    // group through TxnOffsetCommit, so AddPartitionsToTxn and AddOffsetsToTxn
    // are never sent. They would be if Sluice hid `transaction.version`.
    assert!(sluice.metric("sluice_requests_total", &["api=\"EndTxn\""]) >= 10.0);
    assert!(sluice.metric("sluice_requests_total", &["api=\"TxnOffsetCommit\""]) >= 10.0);
    for v1_only in ["AddPartitionsToTxn", "AddOffsetsToTxn"] {
        let label = format!("api=\"{v1_only}\"");
        assert_eq!(
            sluice.metric("sluice_requests_total", &[&label]),
            0.0,
            "{v1_only}: the Java client did not use transactions v2"
        );
    }
}

/// Kafka's TransactionsCommand through Sluice: `list` (ListTransactions, sent
/// to every broker), `describe` (DescribeTransactions, to the transaction
/// coordinator) and `describe-producers` (DescribeProducers, to the
/// partition leader) all see the copier's finished transaction.
fn transactions_tool_sees(cluster: &Cluster, listen: &str, transactional_id: &str, topic: &str) {
    let tool = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", listen];
        all.extend_from_slice(args);
        let out = cluster.tool(
            "org.apache.kafka.tools.TransactionsCommand",
            &all,
            Duration::from_secs(60),
        );
        out.assert_success(&format!("kafka-transactions {args:?}"));
        out.stdout
    };
    let listed = tool(&["list"]);
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().next() == Some(transactional_id)),
        "{listed}"
    );
    // The copier's last EndTxn returned once the coordinator prepared the
    // commit; its markers are written right after.
    let producer_id = wait::until(
        Duration::from_secs(30),
        "the last transaction to complete",
        || {
            let described = tool(&["describe", "--transactional-id", transactional_id]);
            let row = described
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(transactional_id))
                .ok_or_else(|| described.clone())?;
            let columns: Vec<&str> = row.split_whitespace().collect();
            match columns.as_slice() {
                ["0", _, producer_id, _, "CompleteCommit", ..] => Ok(producer_id.to_string()),
                _ => Err(described.clone()),
            }
        },
    );
    // Keyed records spread the output over every partition, 0 included.
    let producers = tool(&["describe-producers", "--topic", topic, "--partition", "0"]);
    assert!(
        producers
            .lines()
            .any(|l| l.split_whitespace().next() == Some(producer_id.as_str())),
        "producer {producer_id} wrote to the output partitions\n{producers}"
    );
}
