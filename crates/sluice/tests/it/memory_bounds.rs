//! Bounded memory against the real 3-node cluster (`trio`): a client that
//! pipelines fetches and never reads is closed at the write deadline while
//! well-behaved clients keep working; before authentication (SCRAM over
//! mTLS) a large frame is refused at once, a client that never
//! authenticates is closed at the deadline, and unauthenticated connections
//! have a cap of their own; once authenticated, large frames pass. The
//! same limits hold with SASL/PLAIN passthrough once Sluice knows that the
//! brokers require SASL (configured, or learned from a handshake they
//! accepted), and a request sent before authentication then closes the
//! client without reaching a broker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::{
    FetchRequest, MetadataRequest, fetch_request::FetchPartition, fetch_request::FetchTopic,
};
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::clients::{java_consume, java_produce, java_round_trip, librdkafka_round_trip};
use sluice_testkit::cluster::{Cluster, SINGLE, TRIO};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{free_port, fronted, unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// `topology` with `fields` (YAML lines, 6 spaces in) added to its source.
fn with_source_fields(topology: &str, fields: &[&str]) -> String {
    let lines: String = fields.iter().map(|f| format!("      {f}\n")).collect();
    topology.replacen("      chain:\n", &format!("{lines}      chain:\n"), 1)
}

/// One Sluice node with SCRAM over mTLS in front of `trio`, its source
/// given `fields`.
fn start_sasl(cluster: &Cluster, fields: &[&str]) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let topology = sluice_testkit::scram::sasl_topology(cluster, &listen, Some(3600), 60);
    let topology = with_source_fields(&topology, fields);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen]);
    (sluice, listen)
}

/// One Sluice node with SASL/PLAIN passthrough (no SCRAM over mTLS) in
/// front of `cluster`'s SASL listeners, its source given `fields` and its sink
/// the `sink_settings` lines.
fn start_plain(cluster: &Cluster, fields: &[&str], sink_settings: &str) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let sasl = fronted::contact_points(cluster, "SASL_PLAINTEXT");
    let topology = fronted::sink_topology(
        std::slice::from_ref(&listen),
        &["rack0"],
        0,
        &sasl,
        60,
        sink_settings,
    );
    let topology = with_source_fields(&topology, fields);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen]);
    (sluice, listen)
}

/// What a broker's SASL listener logs when a request other than
/// ApiVersions or SASL reaches it first.
const BEFORE_SASL: &str = "during SASL handshake";

/// How many lines each broker's log has now.
fn broker_log_lengths(cluster: &Cluster) -> Vec<usize> {
    (1..=cluster.node_count())
        .map(|id| sluice_testkit::scram::log_line_count(cluster, id))
        .collect()
}

/// The broker log lines since `from` (from [`broker_log_lengths`]) that
/// contain `text`.
fn broker_lines_since(cluster: &Cluster, from: &[usize], text: &str) -> Vec<String> {
    from.iter()
        .enumerate()
        .flat_map(|(i, from)| sluice_testkit::scram::log_lines_since(cluster, i + 1, *from))
        .filter(|l| l.contains(text))
        .collect()
}

/// The before-authentication limits of a source in front of brokers that
/// require SASL (`authentication_timeout_secs: 3`,
/// `unauthenticated_connection_limit: 4`): a request before authentication
/// closes the client and reaches no broker, a 100 MiB frame is refused on
/// its prefix, silence is closed at the deadline, connections over the cap
/// are closed at once, and a PLAIN client is served.
fn assert_plain_before_authentication_limits(
    cluster: &Cluster,
    sluice: &SluiceProcess,
    listen: &str,
) {
    let logs_from = broker_log_lengths(cluster);
    let mut early = RawClient::connect(listen);
    let body = RequestKind::Metadata(MetadataRequest::default().with_topics(None));
    early.send(ApiKey::Metadata, 12, body);
    assert!(
        early.closed_by_peer_within(Duration::from_secs(10)),
        "a Metadata request before authentication closes the client"
    );
    wait_for_log(
        sluice,
        Duration::from_secs(10),
        "Metadata before authentication: this listener requires SASL authentication",
    );

    let mut big = RawClient::connect(listen);
    let mut frame = (100 * 1024 * 1024i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0u8; 1024]);
    big.write_raw(&frame).expect("write the frame's start");
    assert!(
        big.closed_by_peer_within(Duration::from_secs(10)),
        "a 100 MiB frame before authentication closes the connection at once"
    );
    wait_for_log(
        sluice,
        Duration::from_secs(10),
        "frame of 104857600 bytes exceeds the limit of 524288 bytes before authentication",
    );

    let mut silent = RawClient::connect(listen);
    assert!(
        silent.closed_by_peer_within(Duration::from_secs(30)),
        "a client that never authenticates is closed"
    );
    wait_for_log(
        sluice,
        Duration::from_secs(10),
        "not authenticated within 3s of connecting (authentication_timeout_secs)",
    );

    wait_for_no_open_connections(sluice);
    let mut idle: Vec<RawClient> = (0..4).map(|_| RawClient::connect(listen)).collect();
    let mut excess = RawClient::connect(listen);
    assert!(
        excess.closed_by_peer_within(Duration::from_secs(10)),
        "a connection over the unauthenticated cap is closed at once"
    );
    for (i, client) in idle.iter_mut().enumerate() {
        assert!(
            !client.readable_within(Duration::from_millis(200)),
            "idle connection {i} within the cap is kept"
        );
    }
    drop(idle);
    wait_for_no_open_connections(sluice);

    let topic = unique("plain-after-limits");
    cluster.create_topic(&topic, 1, 1);
    let props = cluster.client_config("plain-admin");
    let sent: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let got = java_round_trip(cluster, listen, &topic, &sent, Some(&props));
    assert_eq!(got.len(), sent.len(), "a PLAIN client is served: {got:?}");
    let reached = broker_lines_since(cluster, &logs_from, BEFORE_SASL);
    assert!(
        reached.is_empty(),
        "an unauthenticated request reached a broker's SASL listener: {reached:?}"
    );
}

#[test]
fn plain_passthrough_configured_to_require_authentication_applies_the_limits() {
    let cluster = Cluster::get(SINGLE);
    let (sluice, listen) = start_plain(
        &cluster,
        &[
            "authentication_timeout_secs: 3",
            "unauthenticated_connection_limit: 4",
        ],
        "            require_authentication: true\n",
    );
    assert_plain_before_authentication_limits(&cluster, &sluice, &listen);
}

#[test]
fn plain_passthrough_learns_that_the_brokers_require_sasl_and_applies_the_limits() {
    let cluster = Cluster::get(SINGLE);
    let (sluice, listen) = start_plain(
        &cluster,
        &[
            "authentication_timeout_secs: 3",
            "unauthenticated_connection_limit: 4",
        ],
        "",
    );
    // A PLAIN client's handshake, accepted by a broker, tells Sluice.
    let topic = unique("plain-learns");
    cluster.create_topic(&topic, 1, 1);
    let props = cluster.client_config("plain-admin");
    let got = java_round_trip(
        &cluster,
        &listen,
        &topic,
        &["first".to_owned()],
        Some(&props),
    );
    assert_eq!(got.len(), 1, "the first PLAIN client is served");
    assert_plain_before_authentication_limits(&cluster, &sluice, &listen);
    wait_for_log(&sluice, Duration::from_secs(10), "the brokers require SASL");
}

fn wait_for_log(sluice: &SluiceProcess, within: Duration, text: &str) {
    wait::until(within, &format!("the log line {text:?}"), || {
        let log = sluice.log();
        log.contains(text)
            .then_some(())
            .ok_or_else(|| "not logged yet".to_owned())
    });
}

fn wait_for_no_open_connections(sluice: &SluiceProcess) {
    wait::until(
        Duration::from_secs(30),
        "every client connection closed",
        || {
            // The start-up check's connection (the one that found the port
            // open) may still wait in the accept queue: it counts once the
            // listener has taken it, and must be gone too.
            let taken = sluice.metric("sluice_client_connections_total", &[]);
            let open = sluice.metric("sluice_client_connections_open", &[]);
            (taken >= 1.0 && open == 0.0)
                .then_some(())
                .ok_or(format!("{taken} accepted, {open} still open"))
        },
    );
}

/// A sessionless fetch of partition 0 of `topic` from offset 0, up to 1 MiB.
fn fetch_everything(topic: &FetchTopic) -> RequestKind {
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1024 * 1024)
            .with_session_epoch(-1)
            .with_topics(vec![topic.clone().with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1024 * 1024),
                ])]),
    )
}

#[test]
fn a_client_that_pipelines_fetches_and_never_reads_is_closed_at_the_write_deadline() {
    let cluster = Cluster::get(TRIO);
    let nodes = fronted::listen_addrs(1);
    let topology = fronted::topology(&cluster, &nodes, 0, 1000);
    let topology = with_source_fields(&topology, &["write_timeout_secs: 2"]);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&nodes[0]]);
    let listen = nodes[0].clone();
    let topic = unique("never-reads");
    cluster.create_topic(&topic, 1, 3);
    // 4 MiB in the partition: every fetch is answered with 1 MiB.
    let records: Vec<String> = (0..400)
        .map(|i| format!("{i:05}{}", "x".repeat(10_000)))
        .collect();
    java_produce(&cluster, &listen, &topic, &records, &[]);

    let mut greedy = RawClient::connect(&listen);
    let topic_id = greedy.topic_id(&topic);
    // 300 MiB of answers owed, far more than the sockets' buffers hold.
    let fetched = FetchTopic::default().with_topic_id(topic_id);
    for _ in 0..300 {
        greedy.send(ApiKey::Fetch, 13, fetch_everything(&fetched));
    }

    // Well-behaved clients are served meanwhile and afterwards.
    let other = unique("well-behaved");
    cluster.create_topic(&other, 3, 3);
    let sent: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
    let got = java_round_trip(&cluster, &listen, &other, &sent, None);
    assert_eq!(got.len(), sent.len(), "java through sluice: {got:?}");
    wait_for_log(
        &sluice,
        Duration::from_secs(60),
        "read none of the responses owed to it for 2s (write_timeout_secs)",
    );
    let rdkafka_topic = unique("well-behaved-rdkafka");
    cluster.create_topic(&rdkafka_topic, 3, 3);
    librdkafka_round_trip(
        &listen,
        &rdkafka_topic,
        50,
        &[],
        "librdkafka beside a stalled client",
    );
    // Its memory is released with its connection.
    wait_for_no_open_connections(&sluice);
    drop(greedy);
}

#[test]
fn before_authentication_large_frames_are_refused_and_silence_is_bounded() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = start_sasl(&cluster, &["authentication_timeout_secs: 3"]);

    // 1 MiB announced before authentication: refused on its length prefix.
    let mut big = RawClient::connect(&listen);
    let mut frame = (1024 * 1024i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0u8; 1024]);
    big.write_raw(&frame).expect("write the frame's start");
    assert!(
        big.closed_by_peer_within(Duration::from_secs(10)),
        "a 1 MiB frame before authentication closes the connection at once"
    );
    wait_for_log(
        &sluice,
        Duration::from_secs(10),
        "frame of 1048576 bytes exceeds the limit of 524288 bytes before authentication",
    );

    // A client that never authenticates is closed at the deadline.
    let mut silent = RawClient::connect(&listen);
    assert!(
        silent.closed_by_peer_within(Duration::from_secs(30)),
        "a client that never authenticates is closed"
    );
    wait_for_log(
        &sluice,
        Duration::from_secs(10),
        "not authenticated within 3s of connecting (authentication_timeout_secs)",
    );

    // Once authenticated, a 700 KiB record (over the 512 KiB before-auth
    // limit) goes through.
    let topic = unique("large-after-auth");
    cluster.create_topic(&topic, 1, 3);
    let props = cluster.client_config("scram512-admin");
    let record = "y".repeat(700 * 1024);
    java_produce(
        &cluster,
        &listen,
        &topic,
        std::slice::from_ref(&record),
        &[
            "--command-config",
            &props,
            "--command-property",
            "max.request.size=2000000",
        ],
    );
    let got = java_consume(&cluster, &listen, &topic, 1, &["--command-config", &props]);
    assert_eq!(got.len(), 1, "one record back");
    assert_eq!(got[0].len(), record.len(), "the whole record came back");
}

#[test]
fn unauthenticated_connections_over_their_cap_are_closed_at_once() {
    const CAP: usize = 4;
    let cluster = Cluster::get(TRIO);
    let cap = format!("unauthenticated_connection_limit: {CAP}");
    let (sluice, listen) = start_sasl(&cluster, &[&cap, "authentication_timeout_secs: 120"]);
    // The start-up probe's connection must be gone: it held a slot too.
    wait_for_no_open_connections(&sluice);
    let mut idle: Vec<RawClient> = (0..CAP).map(|_| RawClient::connect(&listen)).collect();
    let mut excess: Vec<RawClient> = (0..2).map(|_| RawClient::connect(&listen)).collect();
    for (i, client) in excess.iter_mut().enumerate() {
        assert!(
            client.closed_by_peer_within(Duration::from_secs(10)),
            "connection {i} over the cap is closed at once"
        );
    }
    assert_eq!(
        sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"unauthenticated_limit\""]
        ),
        2.0
    );
    for (i, client) in idle.iter_mut().enumerate() {
        assert!(
            !client.readable_within(Duration::from_millis(200)),
            "idle connection {i} within the cap is kept"
        );
    }
    drop(idle);
    wait_for_no_open_connections(&sluice);

    let topic = unique("after-the-cap");
    cluster.create_topic(&topic, 3, 3);
    let props = cluster.client_config("scram512-admin");
    let sent: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let got = java_round_trip(&cluster, &listen, &topic, &sent, Some(&props));
    assert_eq!(
        got.len(),
        sent.len(),
        "an authenticating client works: {got:?}"
    );
}

/// Clients that connect, ask their versions and idle cost no broker
/// connection: once the brokers' versions are cached, ApiVersions is
/// answered from the cache, and every client gets the same versions.
#[test]
fn idle_clients_that_asked_their_versions_hold_no_broker_connection() {
    use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
    use sluice_codec::kafka_protocol::protocol::StrBytes;
    const OPENED: &str = "sluice_broker_connections_opened_total";
    let cluster = Cluster::get(TRIO);
    let nodes = fronted::listen_addrs(1);
    let topology = fronted::topology(&cluster, &nodes, 0, 1000);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&nodes[0]]);
    let ask = |client: &mut RawClient| {
        let body = RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("sluice-test"))
                .with_client_software_version(StrBytes::from_static_str("1.0")),
        );
        match client.request(ApiKey::ApiVersions, 3, body) {
            ResponseKind::ApiVersions(v) => {
                assert_eq!(v.error_code, 0, "ApiVersions answered with an error");
                v.api_keys
            }
            other => panic!("not an ApiVersions answer: {other:?}"),
        }
    };
    let mut first = RawClient::connect(&nodes[0]);
    let versions = ask(&mut first);
    let opened = sluice.metric(OPENED, &[]);
    let mut idle: Vec<RawClient> = Vec::new();
    for _ in 0..50 {
        let mut client = RawClient::connect(&nodes[0]);
        assert_eq!(
            ask(&mut client),
            versions,
            "the same versions from the cache"
        );
        idle.push(client);
    }
    let now = sluice.metric(OPENED, &[]);
    assert_eq!(
        now,
        opened,
        "50 idle clients opened {} broker connections",
        now - opened
    );
    drop(idle);
}
