//! Integration tests of the foundation against a real single-node Kafka
//! cluster (`single`, started by `scripts/test`): KafkaSinkSingle with Java and
//! librdkafka clients, TLS and mTLS listeners, protocol abuse, and graceful
//! shutdown with requests in flight.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, fetch_request::FetchPartition, fetch_request::FetchTopic,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::clients::{self, java_round_trip, sorted_values};
use sluice_testkit::cluster::{Cluster, SINGLE};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{free_port, unique};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A topology with one KafkaSinkSingle source in front of the `single` cluster.
fn topology(cluster: &Cluster, listen: &str, tls: &str) -> String {
    format!(
        r#"sources:
  - Kafka:
      name: "kafka"
      listen_addr: "{listen}"
{tls}      chain:
        - DebugPrinter
        - KafkaSinkSingle:
            name: "kafka-sink-single"
            destination_address: "127.0.0.1:{port}"
            connect_timeout_ms: 3000
"#,
        port = cluster.port(1, "PLAINTEXT"),
    )
}

fn tls_block(cluster: &Cluster, with_ca: bool) -> String {
    let ca = if with_ca {
        format!(
            "        certificate_authority_path: \"{}\"\n",
            cluster.cert("ca.pem")
        )
    } else {
        String::new()
    };
    format!(
        "      tls:\n        certificate_path: \"{}\"\n        private_key_path: \"{}\"\n{ca}",
        cluster.cert("sluice-server.pem"),
        cluster.cert("sluice-server-key.pem"),
    )
}

fn start(cluster: &Cluster, tls: &str) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let sluice = SluiceProcess::start(sluice_bin(), &topology(cluster, &listen, tls), &[&listen]);
    (sluice, listen)
}

fn records(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("record-{i}")).collect()
}

#[test]
fn java_console_round_trip_through_single_sink() {
    let cluster = Cluster::get(SINGLE);
    let (sluice, listen) = start(&cluster, "");
    let topic = unique("java-single");
    cluster.create_topic(&topic, 3, 1);

    let sent = records(50);
    let got = java_round_trip(&cluster, &listen, &topic, &sent, None);
    assert_eq!(
        sorted_values(&got),
        sorted_values(&sent),
        "records read back through Sluice"
    );
    assert!(
        sluice.metric("sluice_requests_total", &["api=\"Produce\""]) >= 1.0,
        "Produce requests are counted"
    );
}

#[test]
fn librdkafka_round_trip_through_single_sink() {
    let cluster = Cluster::get(SINGLE);
    let (_sluice, listen) = start(&cluster, "");
    let topic = unique("rdkafka-single");
    cluster.create_topic(&topic, 3, 1);

    clients::librdkafka_round_trip(&listen, &topic, 200, &[], "librdkafka produce/consume");
}

#[test]
fn tls_listener_serves_java_and_librdkafka_clients() {
    let cluster = Cluster::get(SINGLE);
    let (_sluice, listen) = start(&cluster, &tls_block(&cluster, false));
    let topic = unique("tls-single");
    cluster.create_topic(&topic, 1, 1);

    let props = tempfile_with(&format!(
        "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
        cluster.cert("ca.pem")
    ));
    let got = java_round_trip(&cluster, &listen, &topic, &records(10), Some(&props));
    assert_eq!(got.len(), 10, "read back over TLS: {got:?}");

    let ca = format!("ssl.ca.location={}", cluster.cert("ca.pem"));
    let tls = ["-X", "security.protocol=ssl", "-X", &ca];
    clients::librdkafka_round_trip(&listen, &topic, 20, &tls, "librdkafka over TLS");
}

#[test]
fn mtls_listener_rejects_missing_and_foreign_certs_and_accepts_a_good_one() {
    let cluster = Cluster::get(SINGLE);
    let (sluice, listen) = start(&cluster, &tls_block(&cluster, true));
    let ca = cluster.cert("ca.pem");
    let probe = |extra: &[&str]| {
        let mut args = vec!["--addr", listen.as_str(), "--ca", ca.as_str()];
        args.extend_from_slice(extra);
        let out = clients::run_librdkafka("tls_probe.py", &args, Duration::from_secs(60));
        out.assert_success("tls probe");
        out.stdout
    };

    let no_cert = probe(&[]);
    assert!(
        no_cert.contains("\"accepted\": false"),
        "no client cert: {no_cert}"
    );
    let (other, other_key) = (
        cluster.cert("other-client.pem"),
        cluster.cert("other-client-key.pem"),
    );
    let foreign = probe(&["--cert", &other, "--key", &other_key]);
    assert!(
        foreign.contains("\"accepted\": false"),
        "cert from another CA: {foreign}"
    );
    let (good, good_key) = (cluster.cert("client.pem"), cluster.cert("client-key.pem"));
    let accepted = probe(&["--cert", &good, "--key", &good_key]);
    assert!(
        accepted.contains("\"accepted\": true"),
        "good cert: {accepted}"
    );

    // A real client with a good certificate works end to end.
    let topic = unique("mtls-single");
    cluster.create_topic(&topic, 1, 1);
    let props = cluster.client_config("ssl-client");
    let got = java_round_trip(&cluster, &listen, &topic, &records(5), Some(&props));
    assert_eq!(got.len(), 5);
    assert!(
        sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"tls\""]
        ) >= 2.0,
        "both bad handshakes are counted as rejected"
    );
}

#[test]
fn oversized_and_garbage_frames_close_only_that_client() {
    let cluster = Cluster::get(SINGLE);
    let (sluice, listen) = start(&cluster, "");
    let mut good = RawClient::connect(&listen);
    let ping = |c: &mut RawClient| match c.request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("raw"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
    ) {
        ResponseKind::ApiVersions(r) => assert_eq!(r.error_code, 0),
        other => panic!("unexpected {other:?}"),
    };
    ping(&mut good);

    let mut huge = RawClient::connect(&listen);
    huge.write_raw(&(200 * 1024 * 1024i32).to_be_bytes())
        .expect("write prefix");
    assert!(
        huge.closed_by_peer_within(Duration::from_secs(10)),
        "200 MiB prefix closes the client"
    );
    ping(&mut good);

    let mut garbage = RawClient::connect(&listen);
    let mut junk = vec![0u8, 0, 0, 12];
    junk.extend_from_slice(&[0x7f, 0x7f, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6]);
    garbage.write_raw(&junk).expect("write garbage");
    assert!(
        garbage.closed_by_peer_within(Duration::from_secs(10)),
        "garbage closes the client"
    );
    ping(&mut good);

    let log = sluice.log();
    assert!(
        log.contains("exceeds the limit"),
        "oversized frame is logged:\n{log}"
    );
    assert!(log.contains("unknown api key"), "garbage is logged:\n{log}");
}

#[test]
fn sigterm_answers_in_flight_requests_before_exit() {
    let cluster = Cluster::get(SINGLE);
    let (mut sluice, listen) = start(&cluster, "");
    let topic = unique("drain");
    cluster.create_topic(&topic, 1, 1);

    let mut client = RawClient::connect(&listen);
    let topic_id = client.topic_id(&topic);

    // A fetch on an empty partition waits max_wait_ms at the broker: a request
    // that is certainly in flight when SIGTERM arrives.
    let fetch = FetchRequest::default()
        .with_max_wait_ms(3000)
        .with_min_bytes(1)
        .with_max_bytes(1024 * 1024)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1024 * 1024),
                ]),
        ]);
    let sent_at = Instant::now();
    let id = client.send(ApiKey::Fetch, 13, RequestKind::Fetch(fetch));
    wait_until_in_flight(&sluice);

    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let response = client.recv(ApiKey::Fetch, 13);
        let _ = tx.send((response.correlation_id(), sent_at.elapsed()));
    });
    sluice.send_sigterm();
    let (got_id, after) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("in-flight fetch answered after SIGTERM");
    assert_eq!(got_id, id);
    assert!(
        after >= Duration::from_secs(2),
        "the fetch really was in flight ({after:?})"
    );
    let status = sluice.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "clean exit after draining: {status}");
}

fn wait_until_in_flight(sluice: &SluiceProcess) {
    sluice_testkit::wait::until(Duration::from_secs(10), "the fetch to reach Sluice", || {
        let n = sluice.metric("sluice_requests_total", &["api=\"Fetch\""]);
        if n >= 1.0 {
            Ok(())
        } else {
            Err(format!("{n} fetch requests"))
        }
    });
}

fn tempfile_with(content: &str) -> String {
    let path = std::env::temp_dir().join(format!("{}.properties", unique("client")));
    std::fs::write(&path, content).expect("write client properties");
    path.display().to_string()
}
