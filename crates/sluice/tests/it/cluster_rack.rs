//! Rack-aware routing against the real 3-node cluster (`trio`, whose brokers
//! 1, 2, 3 sit in racks az-1, az-2, az-3): a Sluice node in az-2 serves
//! consumer fetches from broker 2's in-sync replicas even for partitions led
//! in other racks, so that no fetch leaves its rack; writes still go to the
//! leaders (and are counted as out-of-rack requests). With one Sluice node
//! per broker rack, clients are shown each partition's leader in its real
//! leader's rack, so nothing they produce or fetch leaves its rack. A Sluice
//! node in a rack without brokers counts its fetches as out-of-rack. Java and
//! librdkafka clients read every record. A follower's OFFSET_OUT_OF_RANGE
//! reaches the client as NOT_LEADER_OR_FOLLOWER, and the retry goes to the
//! leader, whose answer stands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sluice_testkit::clients::{
    KEYED, java_consume, java_produce, keyed_records, librdkafka_round_trip, sorted_values,
};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::unique;

const OUT_OF_RACK: &str = "sluice_out_of_rack_requests_total";

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// One Sluice node in `rack` in front of `cluster`; returns it and its address.
fn start_in_rack(cluster: &Cluster, rack: &str) -> (SluiceProcess, String) {
    fronted::start_one_in_rack(sluice_bin(), cluster, rack)
}

#[test]
fn consumer_fetches_stay_in_the_sluice_nodes_rack() {
    let cluster = Cluster::get(TRIO);
    let topic = unique("rack-fetch");
    fronted::create_spread_topic(&cluster, &topic, 6);
    let (sluice, listen) = start_in_rack(&cluster, "az-2");

    let sent = keyed_records("rack", 300);
    java_produce(&cluster, &listen, &topic, &sent, &KEYED);
    let offsets = fronted::offsets(&cluster, &listen, &topic, "-1");
    assert!(
        offsets.len() == 6 && offsets.values().all(|o| *o > 0),
        "records on every partition, so on leaders in every rack: {offsets:?}"
    );
    assert!(
        sluice.metric(OUT_OF_RACK, &["api=\"Produce\""]) >= 1.0,
        "writes to leaders in az-1 and az-3 are out-of-rack requests"
    );

    let got = java_consume(&cluster, &listen, &topic, sent.len(), &[]);
    assert_eq!(
        sorted_values(&got),
        sorted_values(&sent),
        "java read every record"
    );
    let group = unique("rack-rdkafka");
    let extra = ["--skip-produce", "--group", &group];
    librdkafka_round_trip(&listen, &topic, 300, &extra, "librdkafka read every record");

    assert!(
        sluice.metric("sluice_requests_total", &["api=\"Fetch\""]) >= 2.0,
        "the consumers fetched through Sluice"
    );
    assert_eq!(
        sluice.metric(OUT_OF_RACK, &["api=\"Fetch\""]),
        0.0,
        "every fetch went to broker 2 (az-2), the leader or an in-sync follower"
    );
    assert_eq!(
        sluice.metric("sluice_synthesized_error_responses_total", &[]),
        0.0,
        "no broker failed"
    );
}

#[test]
fn fetches_from_a_rack_without_brokers_are_counted_out_of_rack() {
    let cluster = Cluster::get(TRIO);
    let topic = unique("rack-elsewhere");
    fronted::create_spread_topic(&cluster, &topic, 3);
    let (sluice, listen) = start_in_rack(&cluster, "az-9");
    let sent = keyed_records("elsewhere", 30);
    java_produce(&cluster, &listen, &topic, &sent, &[]);
    let got = java_consume(&cluster, &listen, &topic, sent.len(), &[]);
    assert_eq!(got.len(), sent.len(), "read every record");
    assert!(
        sluice.metric(OUT_OF_RACK, &["api=\"Fetch\""]) >= 1.0,
        "no replica is in az-9: fetches go to the leaders, out of the rack"
    );
}

#[test]
fn one_sluice_node_per_rack_keeps_produce_and_fetch_in_their_racks() {
    let cluster = Cluster::get(TRIO);
    let topic = unique("rack-trio");
    fronted::create_spread_topic(&cluster, &topic, 6);
    let (nodes, addrs) =
        fronted::start_nodes_in_racks(sluice_bin(), &cluster, &["az-1", "az-2", "az-3"]);
    let bootstrap = addrs.join(",");
    let sent = keyed_records("trio", 300);
    java_produce(&cluster, &bootstrap, &topic, &sent, &KEYED);
    let got = java_consume(&cluster, &bootstrap, &topic, sent.len(), &[]);
    assert_eq!(
        sorted_values(&got),
        sorted_values(&sent),
        "java read every record"
    );
    librdkafka_round_trip(
        &bootstrap,
        &topic,
        200,
        &[],
        "librdkafka produce and consume",
    );

    let sum = |api: &str| -> f64 {
        let label = format!("api=\"{api}\"");
        nodes.iter().map(|n| n.metric(OUT_OF_RACK, &[&label])).sum()
    };
    let served = |api: &str| -> Vec<f64> {
        let label = format!("api=\"{api}\"");
        nodes
            .iter()
            .map(|n| n.metric("sluice_requests_total", &[&label]))
            .collect()
    };
    assert!(
        served("Produce").iter().all(|n| *n >= 1.0),
        "every node is shown as the leader of some partitions and took writes: {:?}",
        served("Produce")
    );
    assert_eq!(sum("Produce"), 0.0, "every write stayed in its rack");
    assert_eq!(sum("Fetch"), 0.0, "every fetch stayed in its rack");
}

#[test]
fn a_followers_out_of_range_is_softened_and_the_leader_answers_next() {
    use sluice_codec::{ApiKey, ResponseKind};
    use sluice_testkit::raw::RawClient;
    use sluice_testkit::requests::{self, FETCH_VERSION, NOT_LEADER_OR_FOLLOWER};
    const OFFSET_OUT_OF_RANGE: i16 =
        sluice_codec::kafka_protocol::error::ResponseError::OffsetOutOfRange.code();

    let cluster = Cluster::get(TRIO);
    let topic = unique("rack-range");
    fronted::create_spread_topic(&cluster, &topic, 3);
    let (sluice, listen) = start_in_rack(&cluster, "az-2");
    // A partition led outside az-2: its fetches go to broker 2, a follower.
    let (partition, leader) = cluster
        .partition_leaders(&topic)
        .into_iter()
        .find(|(_, leader)| *leader != 2)
        .expect("a partition led by broker 1 or 3");
    let mut client = RawClient::connect(&listen);
    let mut fetch_far_ahead = || -> Vec<(i32, i16)> {
        let request = requests::fetch(&topic, partition, 1_000_000, 0);
        let answer = client.request(ApiKey::Fetch, FETCH_VERSION, request);
        assert!(matches!(answer, ResponseKind::Fetch(_)), "{answer:?}");
        requests::partition_errors(&answer)
    };
    // The follower's OFFSET_OUT_OF_RANGE could be a lagging follower's, so
    // the client is told to retry...
    assert_eq!(
        fetch_far_ahead(),
        vec![(partition, NOT_LEADER_OR_FOLLOWER)],
        "from the follower (leader {leader})"
    );
    let out_of_rack_before = sluice.metric(OUT_OF_RACK, &["api=\"Fetch\""]);
    // ...and its retry goes to the leader, whose answer is the truth.
    assert_eq!(
        fetch_far_ahead(),
        vec![(partition, OFFSET_OUT_OF_RANGE)],
        "from the leader"
    );
    assert_eq!(
        sluice.metric(OUT_OF_RACK, &["api=\"Fetch\""]),
        out_of_rack_before + 1.0,
        "the fenced partition's fetch went to its leader, in another rack"
    );
}
