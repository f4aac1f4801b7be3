//! Broker failure behind KafkaSinkCluster, against the real 3-node cluster
//! (`trio`; PLAINTEXT without authentication unless said otherwise): the
//! seed's requirement that a failure to receive from a broker is never
//! silently ignored, seen from the clients' side.
//!
//! - A broker killed under load: no acknowledged record is lost, Sluice
//!   closes no client connection, the clients see no failed send and no
//!   disconnect, and traffic flows through the broker again once restarted.
//!   The same again through a Sluice with SCRAM over mTLS (clients log in
//!   with SCRAM-SHA-512; every broker connection is token-authenticated).
//! - SCRAM over mTLS with tokens of 30 s while a broker stays down for 60
//!   s under load: the token rotates through the outage, and the clients
//!   see no error, lose nothing and keep their connections.
//! - A reset (RST) of idle broker connections: the client's next requests
//!   succeed at the first try and Sluice logs nothing at WARN or above.
//! - A broker killed while a Fetch waits on it: the Fetch is answered at
//!   once with NOT_LEADER_OR_FOLLOWER, and the client connection stays open
//!   and usable.
//! - A broker killed while a consumer's split fetches are parked at every
//!   broker (long max wait, a trickle of records), then restarted: no
//!   record skipped, repeated or committed twice, no client disconnect
//!   (`it/cluster_consume.rs` has the same checks without a broker failure).
//! - The leader of some partitions SIGSTOPped for 30 s under an idempotent
//!   producer at 1,000 records/s: no record fails, every acknowledged one
//!   is consumed, no client is disconnected, and Sluice ends its
//!   connections to the broker once it has left the cluster.
//! - The same behind two Sluice nodes, with a transactional producer too:
//!   the partitions the hung broker did not lead stay on the Sluice node
//!   that showed them, on both nodes (`lifecycle/two_nodes.rs`).
//! - A Kafka Streams application on the Streams protocol (KIP-1071) with
//!   exactly_once_v2, a broker killed while it counts: every count exact,
//!   no client connection closed (`lifecycle/streams.rs`).
//! - Three share consumers (KIP-932) behind two Sluice nodes, a broker
//!   killed and a member leaving mid-run: every record acknowledged, no
//!   client connection closed (`lifecycle/share.rs`).
//! - Every broker killed: `/ready` turns 503 naming the sink and why while
//!   `/health` stays 200, and `/ready` is 200 again once they are back.
//!
//! These tests kill and restart the shared cluster's brokers, so they are
//! `#[ignore]`d in the normal run and run alone in the serial phase of
//! `scripts/test` (`cargo test -p sluice --test lifecycle -- --ignored
//! --test-threads=1`); a lock also keeps them from overlapping when run with
//! more threads. Each restores the node it killed, also when it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::consumption::{Reading, committed_twice};
use sluice_testkit::delivery::{self, Acked, Produced, disconnects};
use sluice_testkit::nodes;
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests::{
    self, FETCH_VERSION, METADATA_VERSION, NOT_LEADER_OR_FOLLOWER, PRODUCE_VERSION,
    partition_errors, produce_until_accepted,
};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{unique, wait};

mod lifecycle {
    mod share;
    mod streams;
    pub(crate) mod support;
    mod two_nodes;
}

use lifecycle::support::*;

/// Kill -9 one broker while an idempotent VerifiableProducer (acks=all,
/// min.insync.replicas=2) and a VerifiableConsumer run through Sluice, then
/// restart it.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn broker_killed_under_load_loses_no_acked_record_and_closes_no_client() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::plaintext(&cluster);
    broker_killed_under_load(&cluster, &front);
}

/// The same through a Sluice with SCRAM over mTLS: every broker connection
/// is authenticated with the user's delegation token, and those to the
/// killed broker are opened and authenticated again after its restart.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn broker_killed_under_load_with_scram_over_mtls_loses_no_acked_record_and_closes_no_client() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::scram_over_mtls(&cluster);
    broker_killed_under_load(&cluster, &front);
    let sluice = &front.sluice;
    assert_eq!(
        sluice.metric("sluice_delegation_token_failures_total", &[]),
        0.0,
        "the token task never failed"
    );
    assert!(
        sluice.metric("sluice_delegation_token_creations_total", &[]) >= 1.0,
        "the clients went through token connections"
    );
}

/// SCRAM over mTLS with tokens of 30 s while broker 2 stays down for 60 s
/// under an idempotent VerifiableProducer and a VerifiableConsumer: the
/// token is replaced at least three times while the broker is away (each
/// created through a broker that answers, awaited only on those), and the
/// returning broker is served with the current token. The clients see no
/// failed send, no failed commit and no disconnect; every acknowledged
/// record is consumed; Sluice closes no client connection and no token
/// creation fails.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn thirty_second_tokens_outlast_a_broker_down_for_sixty_seconds() {
    const LIFETIME_SECS: u64 = 30;
    const DOWN: Duration = Duration::from_secs(60);
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::scram_over_mtls_with_tokens_of(&cluster, LIFETIME_SECS);
    let sluice = &front.sluice;
    let topic = unique("lifecycle-token-outage");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let mut consumer = front.consumer(&cluster, &topic);
    wait_assigned(&mut consumer);
    // 100 records/s for 100 s: 10 s before the kill, 60 s down, the rest after.
    let mut producer = front
        .producer(10_000, 100, None)
        .start(&cluster, &front.listen, &topic);
    delivery::wait_acked(&mut producer, 1_000, Duration::from_secs(60));
    let created_at_kill = sluice.metric(TOKENS_CREATED, &[]);
    let killed = cluster.kill_node(VICTIM);
    let down_since = Instant::now();
    // The outage is the fault itself, timed; meanwhile the producer must
    // keep being acknowledged on the partitions that moved.
    let acked_at_kill = acked_so_far(&producer);
    let every: BTreeSet<i32> = (0..PARTITIONS as i32).collect();
    wait_acks_on(&mut producer, acked_at_kill, &every, "the kill");
    while down_since.elapsed() < DOWN {
        assert!(
            !producer.exited(),
            "the producer ended while broker {VICTIM} was down; stderr:\n{}",
            producer.stderr()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let rotated = sluice.metric(TOKENS_CREATED, &[]) - created_at_kill;
    killed.restart();

    let out = producer.wait_exit(Duration::from_secs(120));
    out.assert_success("VerifiableProducer");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    let producer_disconnects = disconnects(&out.stderr);
    let consumed = wait_consumed(&mut consumer, &topic, &produced.acked);
    let out = consumer.terminate(Duration::from_secs(60));
    let events = delivery::events(&out.stdout);
    eprintln!(
        "{} records acked; {rotated} tokens created while broker {VICTIM} was down",
        produced.acked.len()
    );

    assert!(
        rotated >= 3.0,
        "tokens of {LIFETIME_SECS} s were replaced while broker {VICTIM} was down ({rotated} created)"
    );
    assert_eq!(
        sluice.metric("sluice_delegation_token_failures_total", &[]),
        0.0,
        "no token creation failed while a broker was down"
    );
    assert!(
        produced.errors.is_empty(),
        "no send failed: {:?}",
        produced.errors
    );
    assert_eq!(produced.acked.len(), 10_000, "every record acknowledged");
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    assert_eq!(delivery::failed_commits(&events), Vec::<String>::new());
    assert_eq!(
        (producer_disconnects, disconnects(&out.stderr)),
        (Vec::new(), Vec::new()),
        "clients of Sluice never see a broker disconnect"
    );
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}

/// The broker kill under load, through `front`.
fn broker_killed_under_load(cluster: &Cluster, front: &Front) {
    let sluice = &front.sluice;
    let topic = unique("lifecycle-kill");
    spread_topic(cluster, &topic, &["min.insync.replicas=2"]);
    let mut consumer = front.consumer(cluster, &topic);
    wait_assigned(&mut consumer);
    let mut producer = front
        .producer(15_000, 500, None)
        .start(cluster, &front.listen, &topic);
    let killed = kill_under_load(cluster, front, &mut producer);

    killed.restart();
    let opened_at_restart = front.broker_metric(cluster, OPENED, VICTIM);
    let leaders = lead_again(cluster, &topic, VICTIM as i32);
    let victim_partitions: BTreeSet<i32> = leaders
        .iter()
        .filter(|(_, l)| **l == VICTIM as i32)
        .map(|(p, _)| *p)
        .collect();

    let out = producer.wait_exit(Duration::from_secs(120));
    out.assert_success("VerifiableProducer");
    let first = Produced::from_events(&delivery::events(&out.stdout));
    let first_disconnects = disconnects(&out.stderr);
    // Retries the client made on its own (for the report, not asserted).
    let retried = |code: &str| out.stderr.matches(code).count();
    eprintln!(
        "producer retries through the kill: NOT_LEADER_OR_FOLLOWER {}, OUT_OF_ORDER_SEQUENCE_NUMBER {}; \
         Sluice synthesized {} error answers",
        retried("Error: NOT_LEADER_OR_FOLLOWER"),
        retried("Error: OUT_OF_ORDER_SEQUENCE_NUMBER"),
        sluice.metric(SYNTHESIZED, &[])
    );

    // A second producer after the restart: it writes to the partitions the
    // restarted broker leads again, through a new connection to it.
    let out = front
        .producer(1_200, 1_000, Some(2))
        .start(cluster, &front.listen, &topic)
        .wait_exit(Duration::from_secs(120));
    out.assert_success("VerifiableProducer after the restart");
    let second = Produced::from_events(&delivery::events(&out.stdout));
    let second_disconnects = disconnects(&out.stderr);

    let acked: Vec<Acked> = first.acked.iter().chain(&second.acked).copied().collect();
    let consumed = wait_consumed(&mut consumer, &topic, &acked);
    let out = consumer.terminate(Duration::from_secs(60));
    let consumer_disconnects = disconnects(&out.stderr);

    assert!(
        first.errors.iter().all(|e| e.retriable()),
        "only retriable send errors: {:?}",
        first.errors
    );
    assert!(
        first.errors.is_empty() && second.errors.is_empty(),
        "an idempotent producer with retries fails no send: {:?} {:?}",
        first.errors,
        second.errors
    );
    assert_eq!(first.sent, Some(15_000));
    assert_eq!(first.acked.len(), 15_000, "every record acknowledged");
    assert_eq!(second.acked.len(), 1_200, "every record acknowledged");
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    assert!(
        second
            .acked
            .iter()
            .any(|a| victim_partitions.contains(&a.partition)),
        "records written to partitions {victim_partitions:?} of the restarted broker {VICTIM}"
    );
    assert!(
        front.broker_metric(cluster, OPENED, VICTIM) > opened_at_restart,
        "Sluice connected to broker {VICTIM} again after its restart"
    );
    assert_eq!(
        (first_disconnects, second_disconnects, consumer_disconnects),
        (Vec::new(), Vec::new(), Vec::new()),
        "clients of Sluice never see a broker disconnect"
    );
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
    wait::until(
        Duration::from_secs(20),
        "every client connection closed by its client",
        || {
            let open = sluice.metric(OPEN_CLIENTS, &[]);
            if open == 0.0 {
                Ok(())
            } else {
                Err(format!("{open} open"))
            }
        },
    );
}

/// Kill -9 one broker while a consumer's fetches park at every broker (a
/// 10 s max wait; records trickle in at 30 a second, so most parts wait),
/// then restart it and give it partitions to lead again: every
/// acknowledged record is read, each poll of a partition follows the
/// previous one (no record skipped or repeated), no record is committed
/// twice, and the clients keep their connections to Sluice.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn broker_killed_under_parked_fetches_skips_and_repeats_no_record() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::plaintext(&cluster);
    let topic = unique("lifecycle-parked");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let group = unique("lifecycle-group");
    let config = ["fetch.max.wait.ms=10000"];
    let mut consumer =
        delivery::start_consumer_configured(&cluster, &front.listen, &topic, &group, &config, &[]);
    wait_assigned(&mut consumer);
    let mut producer = front
        .producer(1_000_000, 30, None)
        .start(&cluster, &front.listen, &topic);
    delivery::wait_acked(&mut producer, 150, Duration::from_secs(60));

    let killed = cluster.kill_node(VICTIM);
    let every: BTreeSet<i32> = (0..PARTITIONS as i32).collect();
    let at_kill = acked_so_far(&producer);
    wait_acks_on(&mut producer, at_kill, &every, "the kill");
    killed.restart();
    let leaders = lead_again(&cluster, &topic, VICTIM as i32);
    let led: BTreeSet<i32> = leaders
        .iter()
        .filter(|(_, l)| **l == VICTIM as i32)
        .map(|(p, _)| *p)
        .collect();
    let at_return = acked_so_far(&producer);
    wait_acks_on(&mut producer, at_return, &led, "the restart");
    let out = producer.terminate(Duration::from_secs(60));
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    produced.assert_all_acked();
    let producer_disconnects = disconnects(&out.stderr);

    let consumed = wait_consumed(&mut consumer, &topic, &produced.acked);
    let out = consumer.terminate(Duration::from_secs(60));
    let reading = Reading::from_events(&delivery::events(&out.stdout), &topic);
    assert_eq!(
        reading.breaks(),
        [],
        "polls of a partition follow each other"
    );
    assert_eq!(reading.unowned, [], "no poll of a partition not owned");
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    assert_eq!(committed_twice(&[reading]), [], "no record committed twice");
    assert_eq!(
        (producer_disconnects, disconnects(&out.stderr)),
        (Vec::new(), Vec::new()),
        "clients of Sluice never see a broker disconnect"
    );
    assert_eq!(
        front.sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}

/// Produces one record to every partition through `client`; returns the
/// partition error codes.
fn produce_everywhere(client: &mut RawClient, topic: &str, value: &str) -> Vec<(i32, i16)> {
    let partitions: Vec<i32> = (0..PARTITIONS as i32).collect();
    let answer = client.request(
        ApiKey::Produce,
        PRODUCE_VERSION,
        requests::produce(topic, &partitions, value),
    );
    partition_errors(&answer)
}

/// Sluice's connections to every broker are reset (RST) while idle; the
/// client's next request succeeds at once, and nothing is logged at WARN.
/// Where `ss -K` cannot reset a socket (or `SLUICE_TEST_NO_SOCKET_DESTROY`
/// is set), a broker is killed and restarted while idle instead (the kernel
/// closes its sockets), and leadership is moved back before the next request.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn idle_broker_connections_reset_without_a_client_visible_error_or_warning() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = start(&cluster);
    let topic = unique("lifecycle-rst");
    let leaders = spread_topic(&cluster, &topic, &[]);
    let mut client = RawClient::connect(&listen);
    let ok: Vec<(i32, i16)> = (0..PARTITIONS as i32).map(|p| (p, 0)).collect();
    // Leaders on three brokers: Sluice now holds a connection to each.
    let partitions: Vec<i32> = (0..PARTITIONS as i32).collect();
    produce_until_accepted(&mut client, &topic, &partitions, "before");

    let opened_before = sluice.metric(OPENED, &[]);
    let reopened_before = sluice.metric(RECREATED, &["reason=\"closed\""]);
    let errors_before = sluice.metric(RECEIVE_ERRORS, &[]);
    let log_mark = sluice.log().len();
    let supported = match std::env::var_os("SLUICE_TEST_NO_SOCKET_DESTROY") {
        Some(_) => Err("SLUICE_TEST_NO_SOCKET_DESTROY is set".to_owned()),
        None => nodes::socket_destroy_supported(),
    };
    // How many of Sluice's broker connections ended.
    let ended = match supported {
        Ok(()) => {
            let resets_before = sluice.metric(IDLE_CLOSED, &["kind=\"reset\""]);
            let pid = sluice.pid().expect("sluice runs");
            let mut reset = 0;
            for id in 1..=3 {
                reset += nodes::reset_connections(cluster.port(id, "PLAINTEXT"), pid)
                    .unwrap_or_else(|e| panic!("reset the connections to broker {id}: {e}"));
            }
            assert!(reset >= 3, "one connection per broker at least: {reset}");
            wait::until(Duration::from_secs(10), "Sluice to see every reset", || {
                let seen = sluice.metric(IDLE_CLOSED, &["kind=\"reset\""]) - resets_before;
                if seen >= reset as f64 {
                    Ok(())
                } else {
                    Err(format!("{seen} of {reset} resets seen"))
                }
            });
            reset
        }
        Err(why) => {
            eprintln!("ss -K cannot reset sockets here ({why}); killing a broker instead");
            let victim = 3;
            let ended_before = broker_metric(&sluice, &cluster, IDLE_CLOSED, victim);
            let killed = cluster.kill_node(victim);
            wait::until(
                Duration::from_secs(10),
                "Sluice to see its idle connection end",
                || {
                    let ended = broker_metric(&sluice, &cluster, IDLE_CLOSED, victim);
                    if ended > ended_before {
                        Ok(())
                    } else {
                        Err(format!("{ended}"))
                    }
                },
            );
            killed.restart();
            // Put leadership back where Sluice last saw it, so that the next
            // request meets the same leaders, as after a reset.
            wait::until(Duration::from_secs(90), "the original leaders back", || {
                cluster.elect_preferred_leaders(&topic, PARTITIONS);
                let now = cluster.partition_leaders(&topic);
                if now == leaders {
                    Ok(())
                } else {
                    Err(format!("{now:?}, want {leaders:?}"))
                }
            });
            1
        }
    };

    assert_eq!(
        produce_everywhere(&mut client, &topic, "after"),
        ok,
        "the first request after the resets succeeds on every partition"
    );
    let answer = client.request(
        ApiKey::Metadata,
        METADATA_VERSION,
        requests::metadata(&[&topic]),
    );
    let ResponseKind::Metadata(m) = answer else {
        panic!("not a Metadata answer");
    };
    assert_eq!(m.topics[0].error_code, 0);
    assert!(
        sluice.metric(OPENED, &[]) >= opened_before + ended as f64,
        "Sluice opened a new connection for each one that ended, on use"
    );
    assert!(
        sluice.metric(RECREATED, &["reason=\"closed\""]) >= reopened_before + ended as f64,
        "each reopened connection is counted as recreated (closed)"
    );
    assert_eq!(sluice.metric(SYNTHESIZED, &[]), 0.0, "no synthesized error");
    assert_eq!(sluice.metric(CLOSED_ON_ERROR, &[]), 0.0);
    assert_eq!(
        sluice.metric(RECEIVE_ERRORS, &[]),
        errors_before,
        "an idle connection ending is not a receive error"
    );
    let log = sluice.log();
    let after_reset = warnings(&log[log_mark.min(log.len())..]);
    assert!(
        after_reset.is_empty(),
        "no WARN or ERROR about an idle broker connection ending:\n{}",
        after_reset.join("\n")
    );
}

/// A Fetch waits at a broker (max_wait_ms 60 s) when the broker is killed:
/// Sluice answers it at once with NOT_LEADER_OR_FOLLOWER, and the client
/// connection stays open and serves the next requests.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn fetch_in_flight_on_a_killed_broker_gets_a_retriable_error_and_the_client_stays() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = start(&cluster);
    let topic = unique("lifecycle-fetch");
    let leaders = spread_topic(&cluster, &topic, &[]);
    let victim = 1;
    let partition = leaders
        .iter()
        .find(|(_, l)| **l == victim as i32)
        .map(|(p, _)| *p)
        .expect("broker 1 leads a partition");
    let mut client = RawClient::connect(&listen);
    // One record, so that the Fetch from offset 1 waits at the log end.
    produce_until_accepted(&mut client, &topic, &[partition], "before");

    let fetch_id = client.send(
        ApiKey::Fetch,
        FETCH_VERSION,
        requests::fetch(&topic, partition, 1, 60_000),
    );
    assert!(
        !client.readable_within(Duration::from_secs(2)),
        "the Fetch waits at broker {victim}"
    );
    let killed_at = Instant::now();
    let killed = cluster.kill_node(victim);
    let answer = client.recv(ApiKey::Fetch, FETCH_VERSION);
    let waited = killed_at.elapsed();
    assert_eq!(answer.correlation_id(), fetch_id);
    let errors = partition_errors(&answer.into_body().expect("decode the Fetch answer"));
    assert_eq!(
        errors,
        [(partition, NOT_LEADER_OR_FOLLOWER)],
        "the in-flight Fetch is answered with NOT_LEADER_OR_FOLLOWER"
    );
    assert!(
        waited < Duration::from_secs(20),
        "answered when the broker died, not after max_wait_ms: {waited:?}"
    );

    // The same client connection serves the next requests.
    let ResponseKind::ApiVersions(versions) = client.request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("lifecycle-test"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
    ) else {
        panic!("not an ApiVersions answer");
    };
    assert_eq!(versions.error_code, 0);
    let ResponseKind::Metadata(m) = client.request(
        ApiKey::Metadata,
        METADATA_VERSION,
        requests::metadata(&[&topic]),
    ) else {
        panic!("not a Metadata answer");
    };
    assert_eq!(m.topics[0].error_code, 0);
    assert_eq!(m.topics[0].partitions.len(), PARTITIONS as usize);
    // Once the partition has a new leader, the same client writes to it.
    produce_until_accepted(&mut client, &topic, &[partition], "failover");
    assert!(sluice.metric(SYNTHESIZED, &["api=\"Fetch\""]) >= 1.0);
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
    // Logged with the broker (by address: a bootstrap connection has no id).
    let log = sluice.log();
    let address = format!("127.0.0.1:{}", cluster.port(victim, "PLAINTEXT"));
    assert!(
        warnings(&log)
            .iter()
            .any(|l| l.contains(&address) && l.contains("Fetch")),
        "the failed Fetch is logged with its broker:\n{log}"
    );
    killed.restart();
    produce_until_accepted(&mut client, &topic, &[partition], "after");
}

/// SIGSTOP one broker for 30 s while an idempotent VerifiableProducer
/// (acks=all, min.insync.replicas=2) and a VerifiableConsumer run through
/// Sluice, then SIGCONT. The broker's sockets stay open and nothing on them
/// is answered; once the controller fences it, Sluice answers what it owed
/// with retriable errors (`sluice_cluster::plan::stall`), so the clients follow the
/// partitions to their new leaders: no client request times out, no client
/// is disconnected, nothing acknowledged is lost.
#[test]
#[ignore = "stops brokers; run in the serial phase of scripts/test"]
fn broker_frozen_under_load_times_out_no_client_request_and_loses_nothing() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::plaintext(&cluster);
    let sluice = &front.sluice;
    let topic = unique("lifecycle-stop");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let mut consumer = front.consumer(&cluster, &topic);
    wait_assigned(&mut consumer);
    let mut producer = front
        .producer(20_000, 500, None)
        .start(&cluster, &front.listen, &topic);
    delivery::wait_acked(&mut producer, 1500, Duration::from_secs(60));

    let stopped = cluster.stop_node(VICTIM);
    let stopped_at = Instant::now();
    let acked_at_stop = acked_so_far(&producer);
    let every: BTreeSet<i32> = (0..PARTITIONS as i32).collect();
    wait_acks_on(&mut producer, acked_at_stop, &every, "the stop");
    let moved_after = stopped_at.elapsed();
    // The fault lasts its full time; meanwhile the clients must keep going.
    wait::until(
        FROZEN_FOR + Duration::from_secs(5),
        "the broker's frozen time to pass",
        || {
            producer.assert_running();
            consumer.assert_running();
            if stopped_at.elapsed() >= FROZEN_FOR {
                Ok(())
            } else {
                Err(format!("frozen for {:?}", stopped_at.elapsed()))
            }
        },
    );
    stopped.resume();
    lead_again(&cluster, &topic, VICTIM as i32);

    let out = producer.wait_exit(Duration::from_secs(120));
    out.assert_success("VerifiableProducer");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    let timeouts: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("request timeout") || l.contains("TimeoutException"))
        .collect();
    let producer_disconnects = disconnects(&out.stderr);
    let consumed = wait_consumed(&mut consumer, &topic, &produced.acked);
    let out = consumer.terminate(Duration::from_secs(60));
    let consumer_disconnects = disconnects(&out.stderr);
    eprintln!(
        "every partition written again {moved_after:?} after the SIGSTOP; Sluice synthesized {} error answers",
        sluice.metric(SYNTHESIZED, &[])
    );

    assert!(
        timeouts.is_empty(),
        "no client request timed out: {timeouts:#?}"
    );
    assert!(
        produced.errors.is_empty(),
        "no send failed: {:?}",
        produced.errors
    );
    assert_eq!(produced.acked.len(), 20_000, "every record acknowledged");
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    assert_eq!(
        (producer_disconnects, consumer_disconnects),
        (Vec::new(), Vec::new()),
        "clients of Sluice never see a broker disconnect"
    );
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}

/// SIGSTOP the leader of some partitions for 30 s under an idempotent
/// VerifiableProducer at 1,000 records/s (acks=all, five requests in
/// flight, min.insync.replicas=2), then SIGCONT, and let the producer run
/// on for as long again. Sluice answers what the frozen broker owes once it
/// is fenced, while the broker still holds some of those requests; Sluice
/// must then end its connections there (nothing more reaches the broker on
/// them, nothing later queues behind them), and the producer must resolve
/// every batch, as it does directly: no record fails, every acknowledged
/// one is consumed, and no client is disconnected.
#[test]
#[ignore = "stops brokers; run in the serial phase of scripts/test"]
fn leader_frozen_under_an_idempotent_producer_fails_no_record() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::plaintext(&cluster);
    let sluice = &front.sluice;
    let topic = unique("lifecycle-frozen-leader");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let mut consumer = front.consumer(&cluster, &topic);
    wait_assigned(&mut consumer);
    let mut producer = front
        .producer(60_000, 1_000, None)
        .start(&cluster, &front.listen, &topic);
    delivery::wait_acked(&mut producer, 5_000, Duration::from_secs(60));
    let stopped = cluster.stop_node(VICTIM);
    let run = FrozenRun::finish(stopped, Instant::now(), producer, consumer, &topic);
    eprintln!(
        "Sluice synthesized {} error answers",
        sluice.metric(SYNTHESIZED, &[])
    );
    run.assert_clean(60_000);
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
    assert!(
        sluice.metric(RECEIVE_ERRORS, &["kind=\"left_cluster\""]) >= 1.0,
        "Sluice ended its connections to broker {VICTIM} once it left the cluster, \
         rather than leaving its unanswered requests queued on them"
    );
}

/// Every node of the cluster killed with SIGKILL; all are started again
/// when this is dropped, also when the test panics.
struct AllKilled {
    cluster: Cluster,
    restarted: bool,
}

impl AllKilled {
    fn kill(cluster: &Cluster) -> Self {
        let guard = Self {
            cluster: cluster.clone(),
            restarted: false,
        };
        for id in 1..=cluster.node_count() {
            let id = id.to_string();
            cluster
                .script(&["kill-node", "--node", &id])
                .assert_success(&format!("kill node {id}"));
        }
        guard
    }

    /// Starts every node and waits until all of them serve.
    fn restart(mut self) {
        self.restarted = true;
        start_all(&self.cluster).unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for AllKilled {
    fn drop(&mut self) {
        if !self.restarted
            && let Err(e) = start_all(&self.cluster)
        {
            eprintln!(
                "{e}; start the nodes with `scripts/kafka/cluster.sh start-node --name {} --node N`",
                self.cluster.name()
            );
        }
    }
}

/// Starts every node of a cluster whose nodes are all down: all but the
/// last without waiting (a KRaft node alone has no quorum to serve with),
/// then the last, which waits until every running node serves.
fn start_all(cluster: &Cluster) -> Result<(), String> {
    let last = cluster.node_count();
    for id in 1..=last {
        let id = id.to_string();
        let mut args = vec!["start-node", "--node", &id];
        if id != last.to_string() {
            args.push("--no-wait");
        }
        let out = cluster.script(&args);
        if out.code != Some(0) {
            return Err(format!("cannot start node {id}: {}", out.text()));
        }
    }
    Ok(())
}

/// Waits until `/ready` answers `status`; returns its body.
fn wait_ready(sluice: &SluiceProcess, status: u16, timeout: Duration) -> String {
    wait::until(
        timeout,
        &format!("/ready to answer {status}"),
        || match sluice.http("/ready") {
            (got, body) if got == status => Ok(body),
            (got, body) => Err(format!("{got} {body}")),
        },
    )
}

/// Every broker killed: `/ready` turns 503, naming the sink and why, while
/// `/health` stays 200 (the process serves); once the brokers are back,
/// `/ready` is 200 again and clients are served.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn ready_turns_false_when_every_broker_is_down_and_true_when_they_return() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = start(&cluster);
    let body = wait_ready(&sluice, 200, Duration::from_secs(30));
    assert!(
        body.contains("sink kafka-sink-cluster: 3 of 3 broker(s) reachable"),
        "{body}"
    );
    let ready = "sluice_sink_ready";

    let down = AllKilled::kill(&cluster);
    let body = wait_ready(&sluice, 503, Duration::from_secs(30));
    assert!(
        body.starts_with("not ready: sink kafka-sink-cluster: no broker reachable (")
            && body.lines().count() == 1,
        "{body}"
    );
    assert_eq!(
        sluice.http("/health"),
        (200, "ok\n".to_owned()),
        "the process still serves"
    );
    assert_eq!(sluice.metric(ready, &[]), 0.0);
    assert!(
        sluice
            .log()
            .contains("sink kafka-sink-cluster is not ready: no broker reachable"),
        "the change is logged"
    );

    down.restart();
    wait_ready(&sluice, 200, Duration::from_secs(60));
    // Ready from the first broker back; every broker back in a round or two.
    wait::until(
        Duration::from_secs(30),
        "every broker in /ready",
        || match sluice.http("/ready") {
            (200, body) if body.contains("3 of 3 broker(s) reachable, metadata lists 3") => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        },
    );
    assert_eq!(sluice.metric(ready, &[]), 1.0);
    let log = sluice.log();
    let down_at = log
        .find("sink kafka-sink-cluster is not ready")
        .expect("the change is logged");
    assert!(
        log[down_at..].contains("sink kafka-sink-cluster is ready: "),
        "the change back is logged"
    );
    let topic = unique("ready-again");
    cluster.create_topic(&topic, 3, 3);
    let records: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    let got = sluice_testkit::clients::java_round_trip(&cluster, &listen, &topic, &records, None);
    assert_eq!(got.len(), 10, "served again: {got:?}");
}

/// SCRAM over mTLS: the first client of a fresh Sluice makes it create its
/// user's delegation token right after a broker was killed, while the
/// controller still lists that broker (until `broker.session.timeout.ms`).
/// The token is created through a broker that answers and waited for only
/// on the brokers that answer (`sluice-auth/src/token/kafka.rs`): the
/// creation does not fail, and the client is served.
#[test]
#[ignore = "kills brokers; run in the serial phase of scripts/test"]
fn a_token_is_created_while_a_listed_broker_is_down() {
    let _serial = serial();
    let cluster = Cluster::get(TRIO);
    let front = Front::scram_over_mtls(&cluster);
    let sluice = &front.sluice;
    let topic = unique("lifecycle-token-down");
    spread_topic(&cluster, &topic, &["min.insync.replicas=2"]);
    let killed = cluster.kill_node(VICTIM);
    let out = front
        .producer(300, 100, None)
        .start(&cluster, &front.listen, &topic)
        .wait_exit(Duration::from_secs(120));
    out.assert_success("VerifiableProducer right after the kill");
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    killed.restart();

    assert!(
        sluice.metric("sluice_delegation_token_creations_total", &[]) >= 1.0,
        "the client went through a token created after the kill"
    );
    assert_eq!(
        sluice.metric("sluice_delegation_token_failures_total", &[]),
        0.0,
        "no token creation failed on the broker that was down"
    );
    assert!(
        produced.errors.is_empty(),
        "no send failed: {:?}",
        produced.errors
    );
    assert_eq!(produced.acked.len(), 300, "every record acknowledged");
    assert_eq!(
        sluice.metric(CLOSED_ON_ERROR, &[]),
        0.0,
        "Sluice closed no client connection"
    );
}
