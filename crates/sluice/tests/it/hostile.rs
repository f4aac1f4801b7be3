//! Hostile clients against the real 3-node cluster (`trio`).
//!
//! One Sluice process (KafkaSinkCluster in front of trio) with three
//! sources: `kafka`, plaintext, where the well-behaved clients run and most
//! cases are played (write deadline 3 s, a hard limit of 500 connections);
//! `kafka-tls`, the same behind TLS; and `kafka-idle`, plaintext with an
//! idle timeout of 3 s, for the slowloris. A Java VerifiableProducer and
//! VerifiableConsumer run through `kafka` for the whole test; meanwhile every
//! hostile case runs against the same process, the independent ones at the
//! same time. Each case checks that the offender is closed (or, for the
//! readers, kept), that exactly one log line names its close, and that a
//! bystander connected to the same source beforehand is still answered
//! afterwards. Sluice's RSS is sampled throughout and must stay within a
//! bound. At the end the producer must have had every send acknowledged,
//! with no error, the consumer must have read every acknowledged record,
//! and neither may have lost a connection to Sluice.
//!
//! The cases: truncated frames; negative and oversized lengths; unknown api
//! keys and unsupported versions; a valid header with a garbage body; TLS
//! garbage; slowloris; pipelining without reading (Produce and Fetch); a
//! slow reader and a one-byte-per-second reader; and, alone at the end, a
//! flood of connections beyond the limit. `docs/reliability.md` lists what
//! Sluice does in each and the log line an operator sees. Two more tests
//! bound memory under a tight process budget: clients that hoard answers,
//! and frames started on many connections at once and never finished; and
//! one floods a SASL/PLAIN passthrough Sluice before authentication (from
//! other loopback addresses) while a PLAIN producer runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod frames;
mod front;
mod slow;

use std::thread;
use std::time::{Duration, Instant};

use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{self, Produced, ProducerRun};
use sluice_testkit::{clients, fronted, unique};

use front::{
    Front, MIB, RSS_BOUND_BYTES, RSS_SLACK_BYTES, RssWatch, TIGHT_BUDGET_BYTES, hoard_topic,
    wait_more_acks,
};
use slow::PRODUCE_PARTITIONS;

#[test]
fn hostile_clients_are_closed_alone_while_well_behaved_clients_run() {
    let started = Instant::now();
    let cluster = Cluster::get(TRIO);
    let front = Front::start(&cluster, None);
    let ca = cluster.cert("ca.pem");
    let steady = unique("steady");
    let hoard = thread::scope(|s| {
        let hoard = s.spawn(|| hoard_topic(&cluster, &front.plain, 2));
        fronted::create_spread_topic(&cluster, &steady, 6);
        hoard.join().unwrap()
    });
    let produced_into = unique("pipelined-produce");
    cluster.create_topic(&produced_into, PRODUCE_PARTITIONS as u32, 1);

    let group = unique("steady");
    let mut consumer = delivery::start_consumer(&cluster, &front.plain, &steady, &group);
    delivery::wait_assigned(&mut consumer, 6, Duration::from_secs(60));
    let run = ProducerRun::idempotent(1_000_000, 50);
    let mut producer = run.start(&cluster, &front.plain, &steady);
    wait_more_acks(&mut producer, 50);
    let rss = RssWatch::start(&front);
    let baseline = front.rss();
    eprintln!(
        "set up in {:?}; RSS {} MiB",
        started.elapsed(),
        baseline >> 20
    );

    let cases = Instant::now();
    thread::scope(|s| {
        s.spawn(|| frames::truncated_frames(&front));
        s.spawn(|| frames::bad_lengths(&front));
        s.spawn(|| frames::unknown_apis_and_versions(&front));
        s.spawn(|| frames::garbage_bodies(&front));
        s.spawn(|| frames::tls_garbage(&front, &ca));
        s.spawn(|| slow::slowloris(&front));
        s.spawn(|| slow::pipelined_fetches(&front, &hoard));
        s.spawn(|| slow::pipelined_produces(&front, &produced_into));
        s.spawn(|| slow::slow_reader(&front, &hoard));
        s.spawn(|| slow::one_byte_per_second(&front, &hoard));
    });
    eprintln!(
        "cases in {:?}; RSS peak {} MiB",
        cases.elapsed(),
        rss.peak() >> 20
    );
    rss.check(&front, "the cases", RSS_BOUND_BYTES);
    wait_more_acks(&mut producer, 50);

    let flooded = Instant::now();
    slow::flood(&front, &mut producer);
    eprintln!(
        "flood in {:?}; RSS peak {} MiB",
        flooded.elapsed(),
        rss.peak() >> 20
    );
    rss.check(&front, "the flood", RSS_BOUND_BYTES);
    if front.log().contains("panicked") {
        front.found("all", "a task panicked".to_owned());
    }
    let findings = front.findings.lock().unwrap().clone();

    // The well-behaved clients: no error, every acked record consumed, no
    // connection to Sluice lost.
    let out = producer.terminate(Duration::from_secs(60));
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    produced.assert_all_acked();
    assert_eq!(
        delivery::disconnects(&out.stderr),
        Vec::<String>::new(),
        "the producer kept its connections to Sluice"
    );
    delivery::wait_consumed(
        &mut consumer,
        &steady,
        &produced.acked,
        Duration::from_secs(60),
    );
    let out = consumer.terminate(Duration::from_secs(60));
    assert_eq!(
        delivery::disconnects(&out.stderr),
        Vec::<String>::new(),
        "the consumer kept its connections to Sluice"
    );
    let events = delivery::events(&out.stdout);
    assert_eq!(delivery::failed_commits(&events), Vec::<String>::new());
    // A new client after it all.
    let after = unique("after");
    cluster.create_topic(&after, 3, 3);
    let what = "librdkafka after the hostile clients";
    clients::librdkafka_round_trip(&front.plain, &after, 50, &[], what);
    eprintln!(
        "{} records acked and consumed; RSS baseline {} MiB, peak {} MiB; {:?} in all",
        produced.acked.len(),
        baseline >> 20,
        rss.peak() >> 20,
        started.elapsed()
    );
    assert!(
        findings.is_empty(),
        "hostile cases not handled as expected:\n{}",
        findings.join("\n")
    );
}

/// Six clients pipelining fetches without reading (6 x 64 MiB of
/// connection budget) and a slow reader, against a process budget of 256
/// MiB: RSS stays within the budget plus slack, each hoarder is closed at
/// the write deadline, the slow reader is kept, and a librdkafka client is
/// served meanwhile.
#[test]
fn hoarders_stay_within_a_tight_memory_budget() {
    let cluster = Cluster::get(TRIO);
    let budgets = (TIGHT_BUDGET_BYTES, 64 * MIB as u64);
    let front = Front::start(&cluster, Some(budgets));
    let hoard = hoard_topic(&cluster, &front.plain, 2);
    let other = unique("beside-hoarders");
    cluster.create_topic(&other, 3, 3);
    let rss = RssWatch::start(&front);
    thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| slow::pipelined_fetches(&front, &hoard));
        }
        s.spawn(|| slow::slow_reader(&front, &hoard));
        let what = "librdkafka beside the hoarders";
        s.spawn(|| clients::librdkafka_round_trip(&front.plain, &other, 50, &[], what));
    });
    let bound = TIGHT_BUDGET_BYTES + RSS_SLACK_BYTES;
    rss.check(&front, "six hoarders under a 256 MiB budget", bound);
    eprintln!(
        "RSS peak {} MiB (bound {} MiB)",
        rss.peak() >> 20,
        bound >> 20
    );
    let findings = front.findings.lock().unwrap().clone();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

/// Frames started on many connections at once and never finished, against
/// a process budget of 256 MiB (against `single`: no broker is involved).
/// Sixteen connections idle first (so that each already waits in a read),
/// then each gets the length prefix of a 95 MiB frame at the same moment
/// and as much of its body as Sluice reads, up to 40 MiB. Only the frames
/// that find room in the budget when their prefix arrives are read on:
/// RSS stays within the budget plus one frame plus slack (without that
/// admission each connection read its 40 MiB: 640 MiB). When they leave a
/// librdkafka client is served.
#[test]
fn frames_started_and_never_finished_stay_within_the_memory_budget() {
    use sluice_testkit::cluster::SINGLE;
    use sluice_testkit::raw::RawClient;
    const CONNECTIONS: usize = 16;
    const FRAME: usize = 95 * MIB;
    const SENT: usize = 40 * MIB;
    let cluster = Cluster::get(SINGLE);
    let front = Front::start(&cluster, Some((TIGHT_BUDGET_BYTES, 64 * MIB as u64)));
    let open = |front: &Front| {
        front
            .sluice
            .metric("sluice_client_connections_open", &["source=\"kafka\""])
    };
    // The connection that checked the listener at start may still be
    // counted for a moment: start from none, or that one closing would
    // leave the count one short of what the test waits for.
    sluice_testkit::wait::until(Duration::from_secs(10), "no client connection open", || {
        let now = open(&front);
        (now == 0.0)
            .then_some(())
            .ok_or_else(|| format!("{now} open"))
    });
    let mut clients: Vec<RawClient> = (0..CONNECTIONS)
        .map(|_| RawClient::connect(&front.plain))
        .collect();
    sluice_testkit::wait::until(Duration::from_secs(30), "the connections open", || {
        let now = open(&front);
        (now >= CONNECTIONS as f64)
            .then_some(())
            .ok_or_else(|| format!("{now} open"))
    });
    let rss = RssWatch::start(&front);
    let prefix = i32::try_from(FRAME).unwrap().to_be_bytes();
    for client in &mut clients {
        client.write_raw(&prefix).expect("write a prefix");
    }
    // Each writes its body until Sluice stops reading it (a write that
    // blocks for 2 s) or 40 MiB are out.
    let sent: Vec<usize> = thread::scope(|s| {
        let writers: Vec<_> = clients
            .iter_mut()
            .map(|client| {
                s.spawn(move || {
                    client.set_write_timeout(Some(Duration::from_secs(2)));
                    let chunk = vec![0u8; MIB];
                    let mut sent = 0;
                    while sent < SENT && client.write_raw(&chunk).is_ok() {
                        sent += chunk.len();
                    }
                    sent
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let bound = TIGHT_BUDGET_BYTES + FRAME as u64 + RSS_SLACK_BYTES;
    let read_whole = sent.iter().filter(|n| **n >= SENT).count();
    eprintln!(
        "frames read to 40 MiB: {read_whole} of {CONNECTIONS}; sent (MiB) {:?}; RSS peak {} MiB (bound {} MiB)",
        sent.iter().map(|n| n >> 20).collect::<Vec<_>>(),
        rss.peak() >> 20,
        bound >> 20
    );
    rss.check(&front, "frames started and never finished", bound);
    assert!(
        read_whole <= 3,
        "{read_whole} frames of 95 MiB were read on under a 256 MiB budget"
    );
    drop(clients);
    let after = unique("after-started-frames");
    cluster.create_topic(&after, 1, 1);
    let what = "librdkafka after frames never finished";
    clients::librdkafka_round_trip(&front.plain, &after, 50, &[], what);
    let findings = front.findings.lock().unwrap().clone();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

/// SASL/PLAIN passthrough in front of `single`'s SASL listener, with
/// `require_authentication`: one address keeps re-opening 100 sockets that
/// never authenticate, another announces 100 MiB frames before
/// authenticating, and a PLAIN producer runs throughout from a third. The
/// flooder holds only its share of the unauthenticated cap, each large
/// frame is refused on its prefix, the producer has every record
/// acknowledged, and new PLAIN clients get in during the flood.
#[test]
fn unauthenticated_floods_and_huge_frames_with_plain_leave_clients_served() {
    use sluice_testkit::cluster::SINGLE;
    use sluice_testkit::delivery::ToolProcess;
    use sluice_testkit::raw::RawClient;
    use sluice_testkit::sluice::SluiceProcess;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let cluster = Cluster::get(SINGLE);
    let listen = fronted::listen_addrs(1).remove(0);
    let sasl = fronted::contact_points(&cluster, "SASL_PLAINTEXT");
    let topology = fronted::sink_topology(
        std::slice::from_ref(&listen),
        &["rack0"],
        0,
        &sasl,
        60,
        "            require_authentication: true\n",
    );
    let sluice = SluiceProcess::start(front::sluice_bin(), &topology, &[&listen]);
    let topic = unique("plain-under-flood");
    cluster.create_topic(&topic, 1, 1);
    let login = [
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=PLAIN",
        r#"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";"#,
        "enable.idempotence=false",
    ];
    let mut args = vec!["--bootstrap", listen.as_str(), "--topic", topic.as_str()];
    for property in &login {
        args.extend(["-X", property]);
    }
    let mut producer = ToolProcess::spawn(
        clients::java_program(&cluster, "SteadyProducer.java", &args),
        "SteadyProducer",
    );
    let count = |producer: &ToolProcess, event: &str| {
        producer
            .events()
            .iter()
            .filter(|e| e["event"] == event)
            .count()
    };
    sluice_testkit::wait::until(Duration::from_secs(90), "the producer to send", || {
        producer.assert_running();
        let sent = count(&producer, "sent");
        (sent >= 5).then_some(()).ok_or(format!("{sent} sent"))
    });
    let sent_before = count(&producer, "sent");

    let stop = AtomicBool::new(false);
    let (held, refused_frames) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let props = cluster.client_config("plain-admin");
    thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let mut round: Vec<RawClient> = (0..100)
                    .map(|_| RawClient::connect_from(&listen, Ipv4Addr::new(127, 0, 0, 2)))
                    .collect();
                let kept = still_open_once_refused(&mut round, 16, Duration::from_secs(10));
                held.fetch_max(kept, Ordering::Relaxed);
            }
        });
        s.spawn(|| {
            for _ in 0..20 {
                let mut big = RawClient::connect_from(&listen, Ipv4Addr::new(127, 0, 0, 3));
                let mut frame = (100 * 1024 * 1024i32).to_be_bytes().to_vec();
                frame.extend_from_slice(&[0u8; 64 * 1024]);
                // The write may fail once Sluice has closed on the prefix.
                let _ = big.write_raw(&frame);
                if big.closed_by_peer_within(Duration::from_secs(5)) {
                    refused_frames.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        s.spawn(|| {
            for i in 0..2 {
                let new_topic = unique("plain-during-flood");
                cluster.create_topic(&new_topic, 1, 1);
                let lines = vec![format!("during-{i}")];
                let got =
                    clients::java_round_trip(&cluster, &listen, &new_topic, &lines, Some(&props));
                assert_eq!(got, lines, "a new PLAIN client during the flood");
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    producer.assert_running();
    let sent_during = count(&producer, "sent") - sent_before;
    let out = producer.terminate(Duration::from_secs(30));
    let failed: Vec<String> = delivery::events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "failed")
        .map(ToString::to_string)
        .collect();
    eprintln!(
        "flooder held at most {} sockets; {} of 20 large frames refused on the prefix; \
         {sent_during} records acknowledged during the flood",
        held.load(Ordering::Relaxed),
        refused_frames.load(Ordering::Relaxed)
    );
    assert!(failed.is_empty(), "the producer failed sends: {failed:?}");
    assert!(sent_during >= 10, "the producer went on during the flood");
    assert!(
        held.load(Ordering::Relaxed) <= 16,
        "one address holds at most its share (16)"
    );
    assert_eq!(refused_frames.load(Ordering::Relaxed), 20);
    assert!(
        sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"unauthenticated_address_limit\""]
        ) > 0.0
    );
}

/// How many of `round` Sluice still holds open once it has closed all but
/// `share` of them, or once `timeout` has passed. Sluice accepts and refuses
/// the sockets in its own time (on a loaded machine, many milliseconds after
/// the connect), so a socket not closed *yet* is not one it kept: this waits
/// for the refusals, and only a round where more than `share` stay open for
/// the whole `timeout` counts more than `share`.
fn still_open_once_refused(
    round: &mut [sluice_testkit::raw::RawClient],
    share: usize,
    timeout: Duration,
) -> usize {
    let deadline = Instant::now() + timeout;
    let mut open: Vec<&mut sluice_testkit::raw::RawClient> = round.iter_mut().collect();
    loop {
        open.retain_mut(|c| !c.closed_by_peer_within(Duration::from_millis(1)));
        if open.len() <= share || Instant::now() >= deadline {
            return open.len();
        }
    }
}
