//! Consuming through KafkaSinkCluster from partitions led by all three
//! brokers of the real cluster (`trio`): one Sluice node splits each of a
//! client's fetches over the brokers, answers as soon as a part has data,
//! and parks the parts still waiting at their brokers to serve the client's
//! next fetch if it asks for the same offsets. These tests show that this
//! is fast where it must be and loses, repeats or reorders nothing:
//!
//! - **A long max wait does not hold data back.** A Java and a librdkafka
//!   consumer assigned every partition fetch with a 60 s max wait; one new
//!   record on a partition led by one broker must reach them within 20 s
//!   (a wide margin: it takes well under a second), once for each broker.
//!   Waiting for the slowest part, Sluice would hold it for up to 60 s.
//! - **Seeks.** Java and librdkafka programs (`SeekCheck.java`,
//!   `seek_check.py`) seek at random, backwards and forwards, one partition
//!   or all, while a trickle of records keeps some parts parked: the first
//!   record after a seek is exactly the one sought, and the ones after it
//!   follow without a gap or a repeat. A parked part for the old offset
//!   must never answer for the new one.
//! - **Rebalances** (classic and KIP-848 protocols): two consumers of one
//!   group, and a third joining and leaving, while records trickle in; every
//!   acknowledged record is consumed, each owner's polls of a partition are
//!   contiguous, and no record is committed twice.
//! - **A leader move** (reassignment, then preferred elections through
//!   Sluice) under a parked fetch: the same checks, and the clients keep
//!   their connections.
//! - **read_committed** consumers (Java and librdkafka) tail a topic that a
//!   transactional librdkafka producer writes to in committed and aborted
//!   transactions, interleaved: they see exactly the committed records, in
//!   offset order per partition, and none of the aborted ones.
//! - **Thirty partitions over a longer run**, Java and librdkafka consumers:
//!   every record once, in order. The Java consumer uses the incremental
//!   fetch session (KIP-227) Sluice offers it, and Sluice its own sessions
//!   with the brokers: both sides' sessions are opened and used
//!   (`sluice_fetch_sessions_opened_total`, `sluice_fetch_incremental_total`),
//!   and no client is answered a session error. (librdkafka does not use
//!   fetch sessions; the Java consumers of the other tests do.)
//!
//! Brokers are never stopped here: the broker kill under parked fetches is
//! in `tests/lifecycle.rs` (serial phase). Every topic and group is the test's own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::clients::{self, ClientOutput, KEYED, java_produce, keyed_records};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::consumption::{self, Reading, Record};
use sluice_testkit::delivery::{self, Acked, Consumed, Produced, ProducerRun, ToolProcess};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests::{self, produce_until_accepted};
use sluice_testkit::sluice::{SluiceProcess, sum_metric};
use sluice_testkit::{unique, wait};

mod isolation;
mod pause;
mod wire;

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

const CLOSED_ON_ERROR: &str = "sluice_client_connections_closed_on_error_total";
const SESSIONS_OPENED: &str = "sluice_fetch_sessions_opened_total";
const INCREMENTAL: &str = "sluice_fetch_incremental_total";
const SESSION_ERRORS: &str = "sluice_fetch_session_errors_total";
/// How long a broker may hold a fetch part in the tests that want parts to
/// park (Java `fetch.max.wait.ms`, librdkafka `fetch.wait.max.ms`).
const PARKING_WAIT_MS: u32 = 5000;
/// The widest wait for a consumer to read what was written.
const READ_TIMEOUT: Duration = Duration::from_secs(90);

fn java_parking() -> String {
    format!("fetch.max.wait.ms={PARKING_WAIT_MS}")
}

fn librdkafka_parking() -> String {
    format!("fetch.wait.max.ms={PARKING_WAIT_MS}")
}

/// `(partition, offset)` pairs as acknowledged sends.
fn acked(written: &[(i32, i64)]) -> Vec<Acked> {
    written
        .iter()
        .map(|&(partition, offset)| Acked { partition, offset })
        .collect()
}

fn assert_no_closed_client(sluice: &SluiceProcess) {
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}

// ---- A long max wait does not hold data back ----

/// A 3-partition topic, one partition led by each broker; returns it and
/// partition -> leader.
fn topic_led_by_each_broker(cluster: &Cluster) -> (String, BTreeMap<i32, i32>) {
    let topic = unique("consume-long-wait");
    create_spread_topic(cluster, &topic, 3);
    let leaders = cluster.partition_leaders(&topic);
    (topic, leaders)
}

/// With `consumer` (fetching every partition of `topic` with a 60 s max
/// wait through `listen`) having read a first record of each partition, one
/// record is written to the partition each broker leads in turn: each must
/// reach the consumer within 20 s, not after the 60 s the other parts may
/// wait at their brokers.
fn each_new_record_arrives_at_once(
    listen: &str,
    topic: &str,
    leaders: &BTreeMap<i32, i32>,
    consumer: &mut ToolProcess,
) {
    let mut client = RawClient::connect(listen);
    let partitions: Vec<i32> = leaders.keys().copied().collect();
    let first = produce_until_accepted(&mut client, topic, &partitions, "first");
    delivery::wait_assigned(consumer, partitions.len(), Duration::from_secs(60));
    delivery::wait_consumed(consumer, topic, &acked(&first), READ_TIMEOUT);
    for (partition, broker) in leaders {
        let written = produce_until_accepted(&mut client, topic, &[*partition], "one");
        let started = Instant::now();
        delivery::wait_consumed(consumer, topic, &acked(&written), READ_TIMEOUT);
        let took = started.elapsed();
        eprintln!("the record to partition {partition} (broker {broker}) took {took:?}");
        assert!(
            took < Duration::from_secs(20),
            "the record written to partition {partition} (led by broker {broker}) reached the \
             consumer after {took:?}: a fetch split over brokers must be answered when one \
             part has data, not when the others' 60 s max wait runs out"
        );
    }
}

#[test]
fn java_consumer_with_a_60s_max_wait_gets_each_new_record_at_once() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let (topic, leaders) = topic_led_by_each_broker(&cluster);
    // The request timeout must outlast the max wait, or the client gives
    // up on the fetch itself.
    let config = ["fetch.max.wait.ms=60000", "request.timeout.ms=120000"];
    let group = unique("long-wait");
    let mut consumer =
        delivery::start_consumer_configured(&cluster, &listen, &topic, &group, &config, &[]);
    each_new_record_arrives_at_once(&listen, &topic, &leaders, &mut consumer);
    assert_no_closed_client(&sluice);
    // Killed (on drop), not closed: a closing Java consumer waits up to 30 s
    // for its fetch in flight, which may wait 60 s.
    drop(consumer);
}

#[test]
fn librdkafka_consumer_with_a_60s_max_wait_gets_each_new_record_at_once() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let (topic, leaders) = topic_led_by_each_broker(&cluster);
    let group = unique("long-wait");
    let settings = ["fetch.wait.max.ms=60000", "socket.timeout.ms=120000"];
    let mut consumer = delivery::start_librdkafka_consumer(&listen, &topic, &group, &settings, &[]);
    each_new_record_arrives_at_once(&listen, &topic, &leaders, &mut consumer);
    let out = consumer.terminate(Duration::from_secs(60));
    assert_no_client_errors("librdkafka consumer", &delivery::events(&out.stdout));
    assert_no_closed_client(&sluice);
}

/// Panics on any `consume_error` or `client_error` event of `tail_consumer.py`.
fn assert_no_client_errors(what: &str, events: &[Value]) {
    let errors: Vec<&Value> = events
        .iter()
        .filter(|e| matches!(e["name"].as_str(), Some("consume_error" | "client_error")))
        .collect();
    assert!(errors.is_empty(), "{what} reported errors: {errors:?}");
}

// ---- Seeks ----

/// The last JSON line of a seek checker's output; panics unless it ran
/// clean, sought often and read a fair amount.
fn assert_seeks_clean(what: &str, out: &ClientOutput, least_records: u64) {
    let report: Value = out
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{what} printed no report\n{}", out.text()));
    assert!(
        out.code == Some(0) && report["error_count"].as_u64() == Some(0),
        "{what}: every record after a seek starts at the offset sought and follows without a \
         gap or repeat; report: {report}\n--- stderr ---\n{}",
        out.stderr
    );
    eprintln!("{what}: {report}");
    let seeks = report["seeks"].as_u64().unwrap_or(0);
    let after_seek = report["after_seek"].as_u64().unwrap_or(0);
    let records = report["records"].as_u64().unwrap_or(0);
    assert!(
        seeks >= 10 && after_seek >= 5 && records >= least_records,
        "{what} sought and read enough: {report}"
    );
}

#[test]
fn seeks_read_exactly_from_the_offset_sought() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-seek");
    create_spread_topic(&cluster, &topic, 6);
    java_produce(
        &cluster,
        &listen,
        &topic,
        &keyed_records("seek", 600),
        &KEYED,
    );
    // A trickle: each broker gets a record every few hundred milliseconds,
    // so some of each fetch's parts park.
    let mut trickle = ProducerRun::idempotent(1_000_000, 20).start(&cluster, &listen, &topic);
    delivery::wait_acked(&mut trickle, 20, Duration::from_secs(60));
    let base = [
        "--bootstrap",
        listen.as_str(),
        "--topic",
        &topic,
        "--seconds",
        "30",
    ];
    let rdkafka_wait = librdkafka_parking();
    let mut args = base.to_vec();
    args.extend_from_slice(&["-X", &rdkafka_wait]);
    let mut librdkafka = ToolProcess::spawn(clients::librdkafka("seek_check.py", &args), "seek");
    let java_wait = java_parking();
    let mut args = base.to_vec();
    args.extend_from_slice(&["-X", &java_wait, "-X", "max.poll.records=50"]);
    let java = clients::run(
        clients::java_program(&cluster, "SeekCheck.java", &args),
        None,
        Duration::from_secs(150),
        "SeekCheck.java",
    );
    let librdkafka = librdkafka.wait_exit(Duration::from_secs(60));
    trickle.assert_running();
    trickle.terminate(Duration::from_secs(60));
    assert_seeks_clean("the Java consumer (SeekCheck.java)", &java, 600);
    assert_seeks_clean("the librdkafka consumer (seek_check.py)", &librdkafka, 600);
    assert_no_closed_client(&sluice);
}

// ---- Rebalances and a leader move ----

/// A `VerifiableConsumer` in `group` whose fetches park, with `extra`
/// arguments (`--group-protocol consumer`).
fn parking_consumer(
    cluster: &Cluster,
    listen: &str,
    topic: &str,
    group: &str,
    extra: &[&str],
) -> ToolProcess {
    let config = [java_parking()];
    let config: Vec<&str> = config.iter().map(String::as_str).collect();
    delivery::start_consumer_configured(cluster, listen, topic, group, &config, extra)
}

/// Waits until `consumers` together own all `partitions` of `topic`, each
/// some and none the same (a rebalance has settled).
fn wait_owners(consumers: &mut [&mut ToolProcess], topic: &str, partitions: i32, what: &str) {
    wait::until(Duration::from_secs(90), what, || {
        let owned: Vec<BTreeSet<i32>> = consumers
            .iter_mut()
            .map(|c| {
                c.assert_running();
                consumption::owned(&c.events(), topic)
            })
            .collect();
        let all: BTreeSet<i32> = owned.iter().flatten().copied().collect();
        let total: usize = owned.iter().map(BTreeSet::len).sum();
        if all.len() == partitions as usize
            && total == all.len()
            && owned.iter().all(|o| !o.is_empty())
        {
            Ok(())
        } else {
            Err(format!("owned: {owned:?}"))
        }
    });
}

/// Waits (while the producer runs) for `more` acknowledged sends beyond
/// those it has now.
fn wait_more_acks(producer: &mut ToolProcess, more: usize) {
    let now = delivery::wait_acked(producer, 0, Duration::from_secs(5));
    delivery::wait_acked(producer, now + more, Duration::from_secs(90));
}

/// Stops the producer (SIGTERM: it flushes, prints its totals) and checks
/// that it had every send acknowledged.
fn stop_producer(producer: &mut ToolProcess) -> Produced {
    let out = producer.terminate(Duration::from_secs(60));
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    produced.assert_all_acked();
    produced
}

/// The records of `acked` that none of `events` (each consumer's) read.
fn unread<'a>(events: &[Vec<Value>], topic: &str, acked: &'a [Acked]) -> Vec<&'a Acked> {
    let consumed: Vec<Consumed> = events
        .iter()
        .map(|e| Consumed::from_events(e, topic))
        .collect();
    acked
        .iter()
        .filter(|a| !consumed.iter().any(|c| c.contains(a.partition, a.offset)))
        .collect()
}

/// Waits until the running `consumers`, with what the stopped ones read
/// (`stopped`, events each), have read every record of `acked`.
fn wait_read_by_all(
    consumers: &mut [&mut ToolProcess],
    stopped: &[Vec<Value>],
    topic: &str,
    acked: &[Acked],
) {
    wait::until(
        READ_TIMEOUT,
        "the consumers to read every acknowledged record",
        || {
            let mut events = stopped.to_vec();
            for consumer in consumers.iter_mut() {
                consumer.assert_running();
                events.push(consumer.events());
            }
            let missing = unread(&events, topic, acked);
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} not read yet, e.g. {:?}",
                    missing.len(),
                    &missing[..missing.len().min(5)]
                ))
            }
        },
    );
}

/// The checks on what consumers read (`events` each, in one group): no
/// poll outside an assignment, contiguous polls within each, no record
/// committed twice, no hole inside a poll, every record of `acked` read.
fn assert_read_once_in_order(events: &[Vec<Value>], topic: &str, acked: &[Acked]) {
    let readings: Vec<Reading> = events
        .iter()
        .map(|e| Reading::from_events(e, topic))
        .collect();
    for (i, reading) in readings.iter().enumerate() {
        assert_eq!(
            reading.breaks(),
            [],
            "consumer {i}: polls of a partition within one assignment follow each other"
        );
        assert_eq!(
            reading.unowned,
            [],
            "consumer {i}: no poll of a partition it did not own"
        );
        let holes = Consumed::from_events(&events[i], topic).holes;
        assert_eq!(holes, [], "consumer {i}: no record missing inside a poll");
    }
    assert_eq!(
        consumption::committed_twice(&readings),
        [],
        "no record committed twice"
    );
    let missing = unread(events, topic, acked);
    assert!(
        missing.is_empty(),
        "{} acknowledged records never read, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}

/// Two consumers of a group with `protocol` read a 6-partition topic while
/// records trickle in; a third joins, then leaves.
fn rebalance_under_parked_fetches(protocol: &str) {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-rebalance");
    create_spread_topic(&cluster, &topic, 6);
    let group = unique("rebalance");
    let extra = ["--group-protocol", protocol];
    let start = || parking_consumer(&cluster, &listen, &topic, &group, &extra);
    let (mut first, mut second) = (start(), start());
    wait_owners(
        &mut [&mut first, &mut second],
        &topic,
        6,
        "two consumers to share the partitions",
    );
    let mut producer = ProducerRun::idempotent(1_000_000, 30).start(&cluster, &listen, &topic);
    wait_more_acks(&mut producer, 150);

    let mut third = start();
    wait_owners(
        &mut [&mut first, &mut second, &mut third],
        &topic,
        6,
        "the third consumer to get partitions",
    );
    wait_more_acks(&mut producer, 150);
    let third_out = third.terminate(Duration::from_secs(60));
    wait_owners(
        &mut [&mut first, &mut second],
        &topic,
        6,
        "the two to share the third's partitions",
    );
    wait_more_acks(&mut producer, 150);
    let produced = stop_producer(&mut producer);

    let third_events = vec![delivery::events(&third_out.stdout)];
    let running = &mut [&mut first, &mut second];
    wait_read_by_all(running, &third_events, &topic, &produced.acked);
    let mut events = third_events;
    for consumer in [&mut first, &mut second] {
        events.push(delivery::events(
            &consumer.terminate(Duration::from_secs(60)).stdout,
        ));
    }
    assert_read_once_in_order(&events, &topic, &produced.acked);
    assert_no_closed_client(&sluice);
}

#[test]
fn classic_group_rebalances_skip_and_repeat_nothing() {
    rebalance_under_parked_fetches("classic");
}

#[test]
fn kip848_group_rebalances_skip_and_repeat_nothing() {
    rebalance_under_parked_fetches("consumer");
}

#[test]
fn leader_moves_under_parked_fetches_skip_and_repeat_nothing() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-leaders");
    fronted::create_topic_with_replicas(&cluster, &topic, &fronted::rotated_replicas(6, 0));
    let mut consumer = parking_consumer(&cluster, &listen, &topic, &unique("leaders"), &[]);
    delivery::wait_assigned(&mut consumer, 6, Duration::from_secs(60));
    let mut producer = ProducerRun::idempotent(1_000_000, 30).start(&cluster, &listen, &topic);
    wait_more_acks(&mut producer, 150);
    for by in [1, 2] {
        fronted::move_leaders(&cluster, &listen, &topic, &fronted::rotated_replicas(6, by));
        wait_more_acks(&mut producer, 150);
    }
    let produced = stop_producer(&mut producer);
    delivery::wait_consumed(&mut consumer, &topic, &produced.acked, READ_TIMEOUT);
    let out = consumer.terminate(Duration::from_secs(60));
    assert_read_once_in_order(&[delivery::events(&out.stdout)], &topic, &produced.acked);
    assert_eq!(
        delivery::disconnects(&out.stderr),
        Vec::<String>::new(),
        "the consumer kept its connections to Sluice"
    );
    assert_no_closed_client(&sluice);
}

// ---- read_committed ----

/// The arguments of `transactions.py` for `n` transactions of `count`
/// records, every third one aborted (the last one commits).
fn interleaved_transactions(n: usize) -> Vec<String> {
    (0..n)
        .flat_map(|i| {
            if i % 3 == 1 {
                ["--abort".to_owned(), format!("a{i}")]
            } else {
                ["--commit".to_owned(), format!("c{i}")]
            }
        })
        .collect()
}

/// Partition -> `(offset, value)` of the records `transactions.py` wrote in
/// transactions that ended with `action` (`commit` or `abort`), by offset.
fn written(report: &Value, action: &str) -> BTreeMap<i32, BTreeMap<i64, String>> {
    let mut by_partition: BTreeMap<i32, BTreeMap<i64, String>> = BTreeMap::new();
    let steps = report["transactions"]
        .as_array()
        .expect("transactions in the report");
    for step in steps
        .iter()
        .filter(|s| s["action"].as_str() == Some(action))
    {
        for record in step["written"].as_array().expect("written records") {
            let partition = i32::try_from(record[0].as_i64().unwrap()).unwrap();
            let value = record[2].as_str().unwrap().to_owned();
            by_partition
                .entry(partition)
                .or_default()
                .insert(record[1].as_i64().unwrap(), value);
        }
    }
    by_partition
}

/// Partition -> `(offset, value)` of `records`, in the order read.
fn by_partition(records: &[Record]) -> BTreeMap<i32, Vec<(i64, String)>> {
    let mut read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for r in records {
        read.entry(r.partition)
            .or_default()
            .push((r.offset, r.value.clone().unwrap_or_default()));
    }
    read
}

/// Waits until `consumer` printed every record of `expected`, then checks
/// that it read exactly those, in offset order per partition.
fn assert_reads_exactly(
    what: &str,
    consumer: &mut ToolProcess,
    topic: &str,
    expected: &BTreeMap<i32, BTreeMap<i64, String>>,
    aborted: &BTreeMap<i32, BTreeMap<i64, String>>,
) {
    let total: usize = expected.values().map(BTreeMap::len).sum();
    let records = wait::until(
        READ_TIMEOUT,
        &format!("{what} to read all {total} committed records"),
        || {
            consumer.assert_running();
            let records = consumption::records(&consumer.events(), topic);
            let read: BTreeSet<(i32, i64)> =
                records.iter().map(|r| (r.partition, r.offset)).collect();
            let missing = expected
                .iter()
                .flat_map(|(p, o)| o.keys().map(|o| (*p, *o)))
                .filter(|r| !read.contains(r))
                .count();
            if missing == 0 {
                Ok(records)
            } else {
                Err(format!("{missing} not read yet"))
            }
        },
    );
    let leaked: Vec<&Record> = records
        .iter()
        .filter(|r| {
            aborted
                .get(&r.partition)
                .is_some_and(|a| a.contains_key(&r.offset))
        })
        .collect();
    assert!(leaked.is_empty(), "{what} read aborted records: {leaked:?}");
    let want: BTreeMap<i32, Vec<(i64, String)>> = expected
        .iter()
        .map(|(p, records)| (*p, records.iter().map(|(o, v)| (*o, v.clone())).collect()))
        .collect();
    assert_eq!(
        by_partition(&records),
        want,
        "{what} read exactly the committed records, once each, in offset order"
    );
}

#[test]
fn read_committed_consumers_see_exactly_the_committed_records_in_order() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-txn");
    create_spread_topic(&cluster, &topic, 6);
    let config = ["isolation.level=read_committed".to_owned(), java_parking()];
    let config: Vec<&str> = config.iter().map(String::as_str).collect();
    let mut java = delivery::start_consumer_configured(
        &cluster,
        &listen,
        &topic,
        &unique("txn"),
        &config,
        &["--verbose"],
    );
    let settings = [
        "isolation.level=read_committed".to_owned(),
        librdkafka_parking(),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let mut rdkafka = delivery::start_librdkafka_consumer(
        &listen,
        &topic,
        &unique("txn"),
        &settings,
        &["--verbose"],
    );
    delivery::wait_assigned(&mut java, 6, Duration::from_secs(60));
    delivery::wait_assigned(&mut rdkafka, 6, Duration::from_secs(60));

    let transactional_id = unique("txn-id");
    let mut args = vec![
        "--bootstrap",
        &listen,
        "--topic",
        &topic,
        "--transactional-id",
        &transactional_id,
        "--count",
        "18",
        "--delay-ms",
        "25",
        "--report-records",
    ];
    let steps = interleaved_transactions(12);
    args.extend(steps.iter().map(String::as_str));
    let out = clients::run_librdkafka("transactions.py", &args, Duration::from_secs(180));
    out.assert_success("librdkafka transactions");
    let report: Value = serde_json::from_str(out.stdout.trim()).expect("transactions.py report");
    let mut expected = written(&report, "commit");
    let aborted = written(&report, "abort");
    assert!(
        aborted.len() >= 3 && expected.len() == 6,
        "aborted records on several partitions, committed on all: {report}"
    );
    // One plain record after everything on each partition: once a consumer
    // has read it, whatever came before is decided, aborted records included.
    let mut client = RawClient::connect(&listen);
    for (p, o) in produce_until_accepted(&mut client, &topic, &(0..6).collect::<Vec<_>>(), "end") {
        expected.entry(p).or_default().insert(o, "end".to_owned());
    }
    assert_reads_exactly("the Java consumer", &mut java, &topic, &expected, &aborted);
    assert_reads_exactly(
        "the librdkafka consumer",
        &mut rdkafka,
        &topic,
        &expected,
        &aborted,
    );
    let out = rdkafka.terminate(Duration::from_secs(60));
    assert_no_client_errors("librdkafka consumer", &delivery::events(&out.stdout));
    java.terminate(Duration::from_secs(60));
    assert_no_closed_client(&sluice);
}

// ---- Thirty partitions over a longer run ----

#[test]
fn java_and_librdkafka_read_thirty_partitions_once_in_order() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-thirty");
    create_spread_topic(&cluster, &topic, 30);
    let mut java = delivery::start_consumer(&cluster, &listen, &topic, &unique("thirty"));
    let mut rdkafka =
        delivery::start_librdkafka_consumer(&listen, &topic, &unique("thirty"), &[], &[]);
    delivery::wait_assigned(&mut java, 30, Duration::from_secs(60));
    delivery::wait_assigned(&mut rdkafka, 30, Duration::from_secs(60));
    // 40 s at 100 records/s: each partition gets a record every few
    // hundred milliseconds, so most fetches find data on some brokers only.
    let mut run = ProducerRun::idempotent(4000, 100);
    run.repeating_keys = 300;
    let out = run
        .start(&cluster, &listen, &topic)
        .wait_exit(Duration::from_secs(150));
    out.assert_success("VerifiableProducer");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    assert_eq!(
        (produced.acked.len(), produced.errors.len()),
        (4000, 0),
        "every record acknowledged"
    );
    assert!(
        produced.partitions().len() >= 25,
        "records on most partitions: {:?}",
        produced.partitions()
    );

    for (what, consumer) in [("Java", &mut java), ("librdkafka", &mut rdkafka)] {
        delivery::wait_consumed(consumer, &topic, &produced.acked, READ_TIMEOUT);
        let events = delivery::events(&consumer.terminate(Duration::from_secs(60)).stdout);
        assert_read_once_in_order(std::slice::from_ref(&events), &topic, &produced.acked);
        let read = Reading::from_events(&events, &topic).records;
        assert_eq!(read, 4000, "the {what} consumer read every record once");
        assert_no_client_errors(what, &events);
    }
    // The Java consumer uses the incremental fetch session Sluice offers
    // (KIP-227); Sluice keeps its own sessions with the brokers.
    let metrics = sluice.metrics();
    let shown: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_fetch"))
        .collect();
    eprintln!("fetch metrics:\n{}", shown.join("\n"));
    let metric =
        |name: &str, side: &str| sum_metric(&metrics, name, &[&format!("side=\"{side}\"")]);
    for side in ["client", "broker"] {
        assert!(
            metric(SESSIONS_OPENED, side) >= 1.0 && metric(INCREMENTAL, side) >= 10.0,
            "fetch sessions opened and used for incremental fetches ({side} side):\n{}",
            shown.join("\n")
        );
    }
    assert_eq!(
        metric(SESSION_ERRORS, "client"),
        0.0,
        "no fetch session error answered to a client"
    );
    assert_no_closed_client(&sluice);
}

// ---- A session Sluice does not have, on the wire ----

/// A Fetch (v12) in session `id` at `epoch` of `partitions` of `topic`.
fn session_fetch(topic: &str, id: i32, epoch: i32, partitions: &[(i32, i64)]) -> RequestKind {
    let RequestKind::Fetch(mut fetch) = requests::fetch(topic, 0, 0, 100) else {
        unreachable!("requests::fetch builds a Fetch");
    };
    fetch.session_id = id;
    fetch.session_epoch = epoch;
    let template = fetch.topics[0].partitions[0].clone();
    fetch.topics[0].partitions = partitions
        .iter()
        .map(|&(p, offset)| template.clone().with_partition(p).with_fetch_offset(offset))
        .collect();
    if partitions.is_empty() {
        fetch.topics.clear();
    }
    RequestKind::Fetch(fetch)
}

/// The session id and top-level error of a Fetch answer, and the partitions
/// it lists.
fn session_answer(answer: ResponseKind) -> (i32, i16, Vec<i32>) {
    let ResponseKind::Fetch(f) = answer else {
        panic!("not a Fetch answer: {answer:?}");
    };
    let listed = f
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect();
    (f.session_id, f.error_code, listed)
}

/// The session lifecycle a client sees through Sluice, as KIP-227 gives it:
/// a full fetch opens a session listing every partition, an incremental one
/// lists only what has news, a wrong epoch is INVALID_FETCH_SESSION_EPOCH,
/// and a session Sluice does not hold (one evicted, or never given) is
/// FETCH_SESSION_ID_NOT_FOUND; a full fetch then opens a new one, as the
/// Java client's FetchSessionHandler does. A full fetch naming a session
/// Sluice does not hold (a client reconnecting) is served, and a
/// sessionless fetch leaves the open session alone.
#[test]
fn fetch_sessions_recover_from_unknown_ids_and_wrong_epochs() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-sessions");
    create_spread_topic(&cluster, &topic, 3);
    let mut client = RawClient::connect(&listen);
    let all = [(0, 0), (1, 0), (2, 0)];
    let opened = client.request(ApiKey::Fetch, 12, session_fetch(&topic, 0, 0, &all));
    let (id, error, listed) = session_answer(opened);
    assert!(
        id != 0 && error == 0,
        "a session is opened: id {id}, error {error}"
    );
    assert_eq!(
        listed,
        vec![0, 1, 2],
        "the first answer lists every partition"
    );

    // An incremental fetch names nothing: the session stands for all three.
    let (same, error, listed) =
        session_answer(client.request(ApiKey::Fetch, 12, session_fetch(&topic, id, 1, &[])));
    assert_eq!(
        (same, error),
        (id, 0),
        "an incremental answer in the session"
    );
    assert!(
        listed.iter().all(|p| (0..3).contains(p)),
        "only the session's partitions: {listed:?}"
    );

    let skipped = client.request(ApiKey::Fetch, 12, session_fetch(&topic, id, 5, &[]));
    let (_, error, _) = session_answer(skipped);
    let invalid_epoch = ResponseError::InvalidFetchSessionEpoch.code();
    assert_eq!(error, invalid_epoch, "epoch 5 where 2 is due");

    let evicted = client.request(ApiKey::Fetch, 12, session_fetch(&topic, id + 1000, 1, &[]));
    let (_, error, _) = session_answer(evicted);
    let not_found = ResponseError::FetchSessionIdNotFound.code();
    assert_eq!(error, not_found, "a session Sluice does not hold");

    let reopened = client.request(ApiKey::Fetch, 12, session_fetch(&topic, 0, 0, &all));
    let (new_id, error, listed) = session_answer(reopened);
    assert!(
        new_id != 0 && new_id != id && error == 0,
        "a new session: {new_id}"
    );
    assert_eq!(listed, vec![0, 1, 2]);

    // A Java client whose connection dropped names its old session in a
    // full fetch on the next one, (S, 0): served, as Kafka serves it.
    let mut reconnected = RawClient::connect(&listen);
    let full = session_fetch(&topic, new_id, 0, &all);
    let (other_id, error, listed) = session_answer(reconnected.request(ApiKey::Fetch, 12, full));
    assert!(
        other_id != 0 && error == 0,
        "a full fetch naming a session of another connection opens one: id {other_id}, error {error}"
    );
    assert_eq!(listed, vec![0, 1, 2]);
    // A sessionless fetch closes no session: the open one goes on.
    let plain = session_fetch(&topic, 0, -1, &[(0, 0)]);
    let (none, error, _) = session_answer(reconnected.request(ApiKey::Fetch, 12, plain));
    assert_eq!((none, error), (0, 0), "a sessionless answer");
    let next = session_fetch(&topic, other_id, 1, &[]);
    let (same, error, _) = session_answer(reconnected.request(ApiKey::Fetch, 12, next));
    assert_eq!(
        (same, error),
        (other_id, 0),
        "the session outlives a sessionless fetch"
    );
    let errors = sum_metric(&sluice.metrics(), "sluice_fetch_session_errors_total", &[]);
    assert_eq!(
        errors, 2.0,
        "only the two session errors asked for are counted"
    );
}
