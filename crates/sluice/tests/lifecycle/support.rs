//! What the lifecycle tests share: the Sluice under test and its clients
//! ([`Front`]), the shared cluster's topics and leaders, and the waits on
//! the clients' progress.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_testkit::cluster::Cluster;
use sluice_testkit::delivery::{self, Acked, Consumed, Produced, ProducerRun, ToolProcess};
use sluice_testkit::nodes::{KilledNode, StoppedNode};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{free_port, unique, wait};
use sluice_testkit::{fronted, scram};

pub(crate) const PARTITIONS: u32 = 6;
/// The broker the kill-under-load tests kill.
pub(crate) const VICTIM: usize = 2;
pub(crate) const OPENED: &str = "sluice_broker_connections_opened_total";
pub(crate) const RECREATED: &str = "sluice_broker_connections_recreated_total";
pub(crate) const RECEIVE_ERRORS: &str = "sluice_broker_receive_errors_total";
/// Idle broker connections that ended (counted apart from receive errors).
pub(crate) const IDLE_CLOSED: &str = "sluice_broker_connections_idle_closed_total";
pub(crate) const SYNTHESIZED: &str = "sluice_synthesized_error_responses_total";
pub(crate) const CLOSED_ON_ERROR: &str = "sluice_client_connections_closed_on_error_total";
pub(crate) const OPEN_CLIENTS: &str = "sluice_client_connections_open";
pub(crate) const TOKENS_CREATED: &str = "sluice_delegation_token_creations_total";

/// One test at a time, whatever `--test-threads` says.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// One Sluice node (KafkaSinkCluster, no authentication) in front of the
/// cluster's PLAINTEXT listeners, with a read timeout.
pub(crate) fn start(cluster: &Cluster) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let contact_points = fronted::contact_points(cluster, "PLAINTEXT");
    let nodes = std::slice::from_ref(&listen);
    let topology = fronted::sink_topology(nodes, &["rack0"], 0, &contact_points, 10, "");
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen]);
    (sluice, listen)
}

/// Creates `topic` (6 partitions, RF 3, `configs`) directly on the cluster
/// and waits until its leaders are on all three brokers; returns them.
pub(crate) fn spread_topic(cluster: &Cluster, topic: &str, configs: &[&str]) -> BTreeMap<i32, i32> {
    cluster.create_topic_with_configs(topic, PARTITIONS, 3, configs);
    wait::until(
        Duration::from_secs(30),
        &format!("leaders of {topic} on three brokers"),
        || {
            let leaders = cluster.partition_leaders(topic);
            let distinct: BTreeSet<i32> = leaders.values().copied().collect();
            if leaders.len() == PARTITIONS as usize && distinct.len() == 3 {
                Ok(leaders)
            } else {
                Err(format!("{leaders:?}"))
            }
        },
    )
}

/// Sum of a per-broker metric for broker `id`, whether Sluice labelled the
/// connection by id or (a connection to a first contact point on
/// `listener`) by address.
pub(crate) fn broker_metric_on(
    sluice: &SluiceProcess,
    cluster: &Cluster,
    listener: &str,
    name: &str,
    id: usize,
) -> f64 {
    let by_id = format!("broker=\"{id}\"");
    let by_addr = format!("broker=\"127.0.0.1:{}\"", cluster.port(id, listener));
    let text = sluice.metrics();
    sluice_testkit::sluice::sum_metric(&text, name, &[&by_id])
        + sluice_testkit::sluice::sum_metric(&text, name, &[&by_addr])
}

/// [`broker_metric_on`] for a Sluice whose first contact points are the
/// PLAINTEXT listeners.
pub(crate) fn broker_metric(
    sluice: &SluiceProcess,
    cluster: &Cluster,
    name: &str,
    id: usize,
) -> f64 {
    broker_metric_on(sluice, cluster, "PLAINTEXT", name, id)
}

/// Log lines at WARN or above (`<timestamp> <LEVEL> <target>: ...`).
pub(crate) fn warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| matches!(l.split_whitespace().nth(1), Some("WARN" | "ERROR")))
        .collect()
}

/// Preferred leader elections of `topic` until broker `id` leads one of its
/// partitions again; returns the leaders.
pub(crate) fn lead_again(cluster: &Cluster, topic: &str, id: i32) -> BTreeMap<i32, i32> {
    wait::until(
        Duration::from_secs(90),
        &format!("broker {id} to lead a partition of {topic} again"),
        || {
            let out = cluster.elect_preferred_leaders(topic, PARTITIONS);
            let leaders = cluster.partition_leaders(topic);
            if leaders.values().any(|l| *l == id) {
                Ok(leaders)
            } else {
                Err(format!(
                    "leaders {leaders:?}; election: {}{}",
                    out.stdout.trim(),
                    out.stderr.trim()
                ))
            }
        },
    )
}

/// A Sluice under test and how its clients reach it.
pub(crate) struct Front {
    pub(crate) sluice: SluiceProcess,
    pub(crate) listen: String,
    /// The broker listener of Sluice's first contact points (connections to
    /// them are labelled by address in the metrics).
    pub(crate) contact_listener: &'static str,
    /// Properties added to the producers' config (authentication).
    pub(crate) producer_config: Vec<String>,
    /// Arguments added to the consumer's command line (authentication).
    pub(crate) consumer_args: Vec<String>,
}

impl Front {
    /// Sluice without authentication in front of the PLAINTEXT listeners.
    pub(crate) fn plaintext(cluster: &Cluster) -> Self {
        let (sluice, listen) = start(cluster);
        Self {
            sluice,
            listen,
            contact_listener: "PLAINTEXT",
            producer_config: Vec::new(),
            consumer_args: Vec::new(),
        }
    }

    /// Sluice with SCRAM over mTLS (tokens of an hour: no rotation during
    /// the test), and clients logging in with SCRAM-SHA-512 as `admin`.
    pub(crate) fn scram_over_mtls(cluster: &Cluster) -> Self {
        Self::scram_over_mtls_with_tokens_of(cluster, 3600)
    }

    /// The same with delegation tokens of `lifetime_secs`.
    pub(crate) fn scram_over_mtls_with_tokens_of(cluster: &Cluster, lifetime_secs: u64) -> Self {
        let (sluice, listen) = scram::start(sluice_bin(), cluster, lifetime_secs, 10);
        Self {
            sluice,
            listen,
            contact_listener: "SASL_PLAINTEXT",
            producer_config: scram::client_properties(cluster, "scram512-admin"),
            consumer_args: vec![
                "--command-config".into(),
                cluster.client_config("scram512-admin"),
            ],
        }
    }

    pub(crate) fn broker_metric(&self, cluster: &Cluster, name: &str, id: usize) -> f64 {
        broker_metric_on(&self.sluice, cluster, self.contact_listener, name, id)
    }

    pub(crate) fn producer(
        &self,
        max_messages: u64,
        throughput: u64,
        prefix: Option<u32>,
    ) -> ProducerRun {
        let mut run = ProducerRun::idempotent(max_messages, throughput);
        run.value_prefix = prefix;
        run.config.extend(self.producer_config.iter().cloned());
        run
    }

    pub(crate) fn consumer(&self, cluster: &Cluster, topic: &str) -> ToolProcess {
        let extra: Vec<&str> = self.consumer_args.iter().map(String::as_str).collect();
        let group = unique("lifecycle-group");
        delivery::start_consumer_with(cluster, &self.listen, topic, &group, &extra)
    }
}

/// Waits until the consumer is assigned every partition of the topic.
pub(crate) fn wait_assigned(consumer: &mut ToolProcess) {
    delivery::wait_assigned(consumer, PARTITIONS as usize, Duration::from_secs(60));
}

/// Waits until the consumer has read every record of `acked`.
pub(crate) fn wait_consumed(consumer: &mut ToolProcess, topic: &str, acked: &[Acked]) -> Consumed {
    delivery::wait_consumed(consumer, topic, acked, Duration::from_secs(90))
}

/// Kills broker 2 once the producer has 1500 acks, waits until the producer
/// writes to every partition again, and checks that Sluice synthesized the
/// retriable errors; returns the broker's guard.
pub(crate) fn kill_under_load(
    cluster: &Cluster,
    front: &Front,
    producer: &mut ToolProcess,
) -> KilledNode {
    delivery::wait_acked(producer, 1500, Duration::from_secs(60));
    let killed = cluster.kill_node(VICTIM);
    let acked_at_kill = acked_so_far(producer);
    // The partitions the victim led move to the survivors, and the producer
    // follows them through Sluice: acks on every partition after the kill.
    let every: BTreeSet<i32> = (0..PARTITIONS as i32).collect();
    wait_acks_on(producer, acked_at_kill, &every, "the kill");
    assert!(
        front.sluice.metric(SYNTHESIZED, &[]) > 0.0,
        "Sluice answered requests for the killed broker with retriable errors"
    );
    killed
}

/// How many sends the running `producer` has had acknowledged.
pub(crate) fn acked_so_far(producer: &ToolProcess) -> usize {
    Produced::from_events(&producer.events()).acked.len()
}

/// Waits until the running `producer` has an acknowledged send on each of
/// `partitions` after its first `from` acks (those before `since`).
pub(crate) fn wait_acks_on(
    producer: &mut ToolProcess,
    from: usize,
    partitions: &BTreeSet<i32>,
    since: &str,
) {
    wait::until(
        Duration::from_secs(90),
        &format!("acks on partitions {partitions:?} after {since}"),
        || {
            let report = Produced::from_events(&producer.events());
            let after: BTreeSet<i32> = report.acked[from.min(report.acked.len())..]
                .iter()
                .map(|a| a.partition)
                .collect();
            if after.is_superset(partitions) {
                Ok(())
            } else if producer.exited() {
                panic!(
                    "the producer finished too early: acks after {since} on {after:?}; stderr:\n{}",
                    producer.stderr()
                );
            } else {
                Err(format!("partitions acked since: {after:?}"))
            }
        },
    );
}

/// How long the SIGSTOP tests keep a broker frozen: longer than the
/// controller's fencing (`broker.session.timeout.ms`, 9 s) and as long as
/// the producer's request timeout (30 s), which a direct client waits out.
pub(crate) const FROZEN_FOR: Duration = Duration::from_secs(30);

/// What an idempotent VerifiableProducer and a VerifiableConsumer saw of a
/// broker frozen for [`FROZEN_FOR`] ([`FrozenRun::finish`]).
pub(crate) struct FrozenRun {
    pub(crate) produced: Produced,
    pub(crate) consumed: Consumed,
    pub(crate) disconnects: (Vec<String>, Vec<String>),
}

impl FrozenRun {
    /// Keeps `stopped` frozen until [`FROZEN_FOR`] has passed since
    /// `stopped_at` (both clients must keep running), resumes it, and
    /// collects what the producer (`expected` records) and the consumer of
    /// `topic` saw.
    pub(crate) fn finish(
        stopped: StoppedNode,
        stopped_at: Instant,
        mut producer: ToolProcess,
        mut consumer: ToolProcess,
        topic: &str,
    ) -> Self {
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
        let out = producer.wait_exit(Duration::from_secs(180));
        out.assert_success("VerifiableProducer");
        let produced = Produced::from_events(&delivery::events(&out.stdout));
        let producer_disconnects = delivery::disconnects(&out.stderr);
        let out_of_order = out.stderr.matches("OUT_OF_ORDER_SEQUENCE_NUMBER").count();
        let consumed = wait_consumed(&mut consumer, topic, &produced.acked);
        let out = consumer.terminate(Duration::from_secs(60));
        let consumer_disconnects = delivery::disconnects(&out.stderr);
        eprintln!(
            "{} records acked, {} failed; {out_of_order} OUT_OF_ORDER_SEQUENCE_NUMBER answers",
            produced.acked.len(),
            produced.errors.len(),
        );
        Self {
            produced,
            consumed,
            disconnects: (producer_disconnects, consumer_disconnects),
        }
    }

    /// No record failed, all `expected` were acknowledged and read, and no
    /// client saw a broker disconnect.
    pub(crate) fn assert_clean(&self, expected: usize) {
        let errors = &self.produced.errors;
        assert!(
            errors.is_empty(),
            "no record failed ({} failed): {:?}",
            errors.len(),
            &errors[..errors.len().min(3)]
        );
        assert_eq!(
            self.produced.acked.len(),
            expected,
            "every record acknowledged"
        );
        assert!(
            self.consumed.holes.is_empty(),
            "gaps: {:?}",
            self.consumed.holes
        );
        assert_eq!(
            self.disconnects,
            (Vec::new(), Vec::new()),
            "clients of Sluice never see a broker disconnect"
        );
    }
}
