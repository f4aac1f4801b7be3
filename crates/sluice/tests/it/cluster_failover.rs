//! Failover through KafkaSinkCluster against the real 3-node cluster (`trio`):
//! the cluster or the Sluice deployment changes under running clients, and
//! the application sees no error and loses nothing it was told was written.
//!
//! - Partition leaders move (a reassignment that reorders the replicas, then
//!   a preferred leader election sent through Sluice) twice while Kafka's
//!   `VerifiableProducer` (idempotent, acks=all) and `VerifiableConsumer` run
//!   through one Sluice node: no failed send, every acknowledged record
//!   consumed, no disconnect seen by the clients.
//! - One of three Sluice nodes stops (SIGTERM, or SIGKILL) while the same
//!   clients run through the other two (and, through the metadata, the third
//!   too): no failed send, every acknowledged record consumed, and the
//!   surviving nodes stop listing the stopped one in their metadata.
//!
//! Brokers are never stopped here (see `tests/lifecycle.rs`); every topic is the
//! test's own, so moving its leaders disturbs no other test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{
    self, Acked, Consumed, Produced, ProducerRun, ToolProcess, disconnects,
};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

const CLOSED_ON_ERROR: &str = "sluice_client_connections_closed_on_error_total";

/// Waits until the producer has `n` acknowledged sends; returns how many.
fn wait_acked(producer: &mut ToolProcess, n: usize) -> usize {
    delivery::wait_acked(producer, n, Duration::from_secs(90))
}

/// Waits until the consumer has read every record of `acked`, then stops it.
fn consume_all(consumer: &mut ToolProcess, topic: &str, acked: &[Acked]) -> Consumed {
    let consumed = delivery::wait_consumed(consumer, topic, acked, Duration::from_secs(90));
    consumer.terminate(Duration::from_secs(60));
    consumed
}

/// The partitions with an acknowledged send after the first `from` acks.
fn acked_partitions_after(produced: &Produced, from: usize) -> BTreeSet<i32> {
    produced.acked[from.min(produced.acked.len())..]
        .iter()
        .map(|a| a.partition)
        .collect()
}

/// Waits until every one of `partitions` has an acknowledged send after
/// the first `from` acks, then stops the producer (SIGTERM: it flushes what
/// it has sent and prints its totals) and returns what it reported.
fn stop_after_acks_everywhere(
    producer: &mut ToolProcess,
    from: usize,
    partitions: usize,
) -> (Produced, String) {
    wait::until(
        Duration::from_secs(90),
        &format!("acks on all {partitions} partitions after the change"),
        || {
            producer.assert_running();
            let after = acked_partitions_after(&Produced::from_events(&producer.events()), from);
            if after.len() == partitions {
                Ok(())
            } else {
                Err(format!("partitions acked since: {after:?}"))
            }
        },
    );
    let out = producer.terminate(Duration::from_secs(60));
    let produced = Produced::from_events(&delivery::events(&out.stdout));
    (produced, out.stderr)
}

/// `topic`'s 3 replica lists rotated `by` places (see
/// [`fronted::rotated_replicas`]).
fn rotated(by: usize) -> Vec<Vec<i32>> {
    fronted::rotated_replicas(3, by)
}

/// Moves every leader of `topic` (3 partitions) to its replica list's
/// first broker after rotating the lists `by` places.
fn move_leaders(cluster: &Cluster, listen: &str, topic: &str, by: usize) {
    fronted::move_leaders(cluster, listen, topic, &rotated(by));
}

#[test]
fn leaders_move_under_load_without_client_errors_or_loss() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("failover-leaders");
    fronted::create_topic_with_replicas(&cluster, &topic, &rotated(0));

    let mut consumer = delivery::start_consumer(&cluster, &listen, &topic, &unique("failover"));
    delivery::wait_assigned(&mut consumer, 3, Duration::from_secs(60));
    // Runs until stopped: the test stops it once the leaders have moved.
    let mut producer = ProducerRun::idempotent(1_000_000, 200).start(&cluster, &listen, &topic);
    wait_acked(&mut producer, 400);
    move_leaders(&cluster, &listen, &topic, 1);
    let after_first = wait_acked(&mut producer, 0);
    wait_acked(&mut producer, after_first + 400);
    move_leaders(&cluster, &listen, &topic, 2);
    let after_second = wait_acked(&mut producer, 0);
    let (produced, stderr) = stop_after_acks_everywhere(&mut producer, after_second, 3);
    produced.assert_all_acked();
    let producer_disconnects = disconnects(&stderr);

    let consumed = consume_all(&mut consumer, &topic, &produced.acked);
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    let consumer_disconnects = disconnects(&consumer.stderr());
    assert_eq!(
        (producer_disconnects, consumer_disconnects),
        (Vec::new(), Vec::new()),
        "the clients kept their connections to Sluice"
    );
    assert_eq!(sluice.metric(CLOSED_ON_ERROR, &[]), 0.0);
}

/// Three Sluice nodes, each knowing all three and checking the others every
/// 500 ms; returns them and their addresses once each lists all three.
fn three_sluice_nodes(cluster: &Cluster) -> (Vec<SluiceProcess>, Vec<String>) {
    fronted::start_nodes_checking(sluice_bin(), cluster, &["rack0"; 3], 500)
}

/// A new topic (6 partitions, leaders on every broker) of which at least
/// one partition is shown led by Sluice node `id` through `node`: which node
/// stands for a leader is a hash of the topic name, so try a few names.
fn topic_with_a_leader_on(cluster: &Cluster, node: &str, id: i32) -> String {
    for _ in 0..5 {
        let topic = unique("failover-sluice");
        create_spread_topic(cluster, &topic, 6);
        let shown = wait::until(
            Duration::from_secs(30),
            &format!("{node} to list {topic}"),
            || fronted::topic_replicas(node, &topic).ok_or_else(|| "not yet".to_owned()),
        );
        if shown.values().any(|(leader, _)| *leader == id) {
            return topic;
        }
    }
    panic!("no topic of five had a partition shown on sluice node {id}");
}

/// How the third Sluice node goes away.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGTERM: it stops listening, drains and exits.
    Graceful,
    /// SIGKILL: its connections break with requests in flight.
    Crash,
}

#[test]
fn clients_of_two_sluice_nodes_ride_out_the_third_stopping() {
    third_node_goes_away(Stop::Graceful);
}

#[test]
fn clients_of_two_sluice_nodes_ride_out_the_third_crashing() {
    third_node_goes_away(Stop::Crash);
}

fn third_node_goes_away(how: Stop) {
    let cluster = Cluster::get(TRIO);
    let (mut processes, nodes) = three_sluice_nodes(&cluster);
    let topic = topic_with_a_leader_on(&cluster, &nodes[0], 2);
    // Bootstrapped from the two survivors; the metadata sends them to all
    // three, since leaders and coordinators are spread over the Sluice nodes.
    let bootstrap = format!("{},{}", nodes[0], nodes[1]);

    let mut consumer = delivery::start_consumer(&cluster, &bootstrap, &topic, &unique("failover"));
    delivery::wait_assigned(&mut consumer, 6, Duration::from_secs(60));
    let mut producer = ProducerRun::idempotent(1_000_000, 200).start(&cluster, &bootstrap, &topic);
    wait_acked(&mut producer, 400);

    let mut stopped = processes.pop().expect("three nodes");
    assert!(
        stopped.metric("sluice_requests_total", &["api=\"Produce\""]) > 0.0,
        "the clients were producing through the node about to stop"
    );
    match how {
        Stop::Graceful => {
            let status = stopped.terminate(Duration::from_secs(60));
            assert!(
                status.success(),
                "sluice node 2 drained and exited: {status}"
            );
        }
        Stop::Crash => stopped.kill(),
    }
    let at_stop = wait_acked(&mut producer, 0);
    let survivors = &nodes[..2];
    for node in survivors {
        let what = format!("{node} to stop listing the stopped node");
        fronted::wait_listed(node, survivors, &what);
    }
    // Partitions whose leaders the clients saw on the stopped node moved to
    // the survivors: every partition takes writes after the stop.
    let (produced, _) = stop_after_acks_everywhere(&mut producer, at_stop, 6);
    produced.assert_all_acked();
    let consumed = consume_all(&mut consumer, &topic, &produced.acked);
    assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
    for (i, sluice) in processes.iter().enumerate() {
        assert_eq!(
            sluice.metric(CLOSED_ON_ERROR, &[]),
            0.0,
            "sluice node {i} closed no client connection"
        );
    }
}
