//! TLS reload of a running Sluice, against the real 3-node cluster (`trio`):
//!
//! - the listener's certificate replaced under live traffic and reloaded on
//!   SIGHUP: a producer and a consumer keep their connections and see no
//!   error, a connection opened before keeps the old certificate and keeps
//!   working, new connections get the new one;
//! - a bad certificate (garbage, a key that does not match) is refused with
//!   a log line naming the file, and the certificate in use stays; a good
//!   one written without a signal is picked up by the file poll;
//! - the client certificate Sluice presents to brokers (mTLS) reloaded:
//!   new broker connections authenticate as the new principal, those opened
//!   before keep the old one, and a bad file is refused.
//!
//! Certificates come from rcgen: a CA of the test's own for the listener,
//! and the test cluster's CA (its key in the certs directory) for the
//! brokers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod pki;

use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::MetadataRequest;
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{self, Produced, ProducerRun, ToolProcess, disconnects};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{fronted, unique, wait};

use client::TlsClient;
use pki::{Ca, Files, Leaf};

const RELOADS: &str = "sluice_tls_reloads_total";
const PARTITIONS: u32 = 3;
/// Kafka's TOPIC_AUTHORIZATION_FAILED.
const TOPIC_AUTHORIZATION_FAILED: i16 = ResponseError::TopicAuthorizationFailed.code();

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// One Sluice node (KafkaSinkCluster) in front of `listener` of the cluster,
/// with `source_tls` (the source's `tls:` block, or empty) and the further
/// sink `settings`.
fn start(
    cluster: &Cluster,
    listener: &str,
    source_tls: &str,
    settings: &str,
) -> (SluiceProcess, String) {
    let nodes = fronted::listen_addrs(1);
    let contact_points = fronted::contact_points(cluster, listener);
    let topology = fronted::sink_topology(&nodes, &["rack0"], 0, &contact_points, 30, settings)
        .replacen("      chain:\n", &format!("{source_tls}      chain:\n"), 1);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&nodes[0]]);
    (sluice, nodes[0].clone())
}

/// The source's `tls:` block over `server.pem` and `server-key.pem`.
fn listener_tls(files: &Files) -> String {
    format!(
        "      tls:\n        certificate_path: \"{}\"\n        private_key_path: \"{}\"\n",
        files.text("server.pem"),
        files.text("server-key.pem")
    )
}

/// Waits until `sluice_tls_reloads_total{side,result}` reaches `n`.
fn wait_reloads(sluice: &SluiceProcess, side: &str, result: &str, n: f64) {
    let labels = [format!("side=\"{side}\""), format!("result=\"{result}\"")];
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    wait::until(
        Duration::from_secs(30),
        &format!("{n} {side} TLS reload(s) with result {result}"),
        || {
            let got = sluice.metric(RELOADS, &labels);
            if got >= n {
                Ok(())
            } else {
                Err(format!("{got}; log:\n{}", sluice.log()))
            }
        },
    );
}

/// The certificate a new TLS connection to `listen` is shown.
fn presented(listen: &str, ca: &Ca) -> Vec<u8> {
    let mut client = TlsClient::connect(listen, &ca.pem).expect("TLS handshake with Sluice");
    assert_eq!(client.api_versions(), 0, "a new connection is served");
    client.server_certificate()
}

/// Java client properties for the TLS listener, trusting `ca`.
fn ssl_properties(files: &Files, ca: &Ca) -> Vec<String> {
    files.write("ca.pem", &ca.pem);
    vec![
        "security.protocol=SSL".into(),
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", files.text("ca.pem")),
    ]
}

/// A producer and a consumer through the TLS listener, started before a
/// reload and checked after it.
struct Traffic {
    topic: String,
    producer: ToolProcess,
    consumer: ToolProcess,
}

impl Traffic {
    /// Starts both over `ssl` and waits until the producer has 300 acks.
    fn start(cluster: &Cluster, listen: &str, ssl: &[String]) -> Self {
        let topic = unique("tls-reload");
        fronted::create_spread_topic(cluster, &topic, PARTITIONS);
        let ssl_refs: Vec<&str> = ssl.iter().map(String::as_str).collect();
        let group = unique("g");
        let mut consumer =
            delivery::start_consumer_configured(cluster, listen, &topic, &group, &ssl_refs, &[]);
        delivery::wait_assigned(&mut consumer, PARTITIONS as usize, Duration::from_secs(60));
        let mut run = ProducerRun::idempotent(3_000, 150);
        run.config.extend(ssl.iter().cloned());
        let mut producer = run.start(cluster, listen, &topic);
        delivery::wait_acked(&mut producer, 300, Duration::from_secs(60));
        Self {
            topic,
            producer,
            consumer,
        }
    }

    fn acked(&self) -> usize {
        Produced::from_events(&self.producer.events()).acked.len()
    }

    /// Waits for the producer to finish and the consumer to read every
    /// record: no failed send, none lost, the producer went on after
    /// `acked_at_reload`, and neither client lost its connection.
    fn finish(mut self, acked_at_reload: usize) {
        let out = self.producer.wait_exit(Duration::from_secs(120));
        out.assert_success("VerifiableProducer");
        let produced = Produced::from_events(&delivery::events(&out.stdout));
        let consumed = delivery::wait_consumed(
            &mut self.consumer,
            &self.topic,
            &produced.acked,
            Duration::from_secs(90),
        );
        let consumer_out = self.consumer.terminate(Duration::from_secs(60));
        assert!(
            produced.errors.is_empty(),
            "no failed send: {:?}",
            produced.errors
        );
        assert_eq!(produced.acked.len(), 3_000, "every record acknowledged");
        assert!(
            produced.acked.len() > acked_at_reload,
            "the producer went on producing after the reload (acked {acked_at_reload} before)"
        );
        assert!(consumed.holes.is_empty(), "gaps: {:?}", consumed.holes);
        assert_eq!(
            (disconnects(&out.stderr), disconnects(&consumer_out.stderr)),
            (Vec::new(), Vec::new()),
            "the clients kept their connections"
        );
    }
}

#[test]
fn listener_certificate_reloads_on_sighup_under_live_traffic_without_a_client_error() {
    let cluster = Cluster::get(TRIO);
    let ca = Ca::new("Reload Test CA");
    let (old, new) = (ca.server(), ca.server());
    let files = Files::new();
    files.write_leaf("server", &old);
    let (sluice, listen) = start(&cluster, "PLAINTEXT", &listener_tls(&files), "");
    // The start's own wait for the port is a plain TCP connect: one failed
    // handshake, counted once Sluice sees the socket close.
    let failed_handshakes = || {
        sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"tls\""],
        )
    };
    let failed_at_start = wait::until(
        Duration::from_secs(10),
        "the start's port check to count as a failed handshake",
        || match failed_handshakes() {
            n if n >= 1.0 => Ok(n),
            n => Err(format!("{n}")),
        },
    );
    let mut before = TlsClient::connect(&listen, &ca.pem).expect("TLS handshake before the reload");
    assert_eq!(before.server_certificate(), old.der());
    assert_eq!(before.api_versions(), 0);
    let traffic = Traffic::start(&cluster, &listen, &ssl_properties(&files, &ca));

    files.write_leaf("server", &new);
    sluice.send_sighup();
    wait_reloads(&sluice, "client", "ok", 1.0);
    let acked_at_reload = traffic.acked();
    assert_eq!(
        presented(&listen, &ca),
        new.der(),
        "a new connection gets the new certificate"
    );
    for _ in 0..3 {
        assert_eq!(
            before.api_versions(),
            0,
            "the connection opened before keeps working"
        );
    }
    assert_eq!(
        before.server_certificate(),
        old.der(),
        "and keeps its session"
    );

    traffic.finish(acked_at_reload);
    assert_eq!(
        sluice.metric("sluice_client_connections_closed_on_error_total", &[]),
        0.0
    );
    assert_eq!(failed_handshakes(), failed_at_start, "no handshake failed");
    let log = sluice.log();
    assert!(
        log.contains("tls reloaded: the client TLS of kafka (SIGHUP)"),
        "{log}"
    );
}

#[test]
fn a_bad_listener_certificate_is_refused_and_a_changed_file_is_picked_up_without_a_signal() {
    let cluster = Cluster::get(TRIO);
    let ca = Ca::new("Reload Test CA");
    let (first, second) = (ca.server(), ca.server());
    let files = Files::new();
    files.write_leaf("server", &first);
    let (sluice, listen) = start(&cluster, "PLAINTEXT", &listener_tls(&files), "");
    let mut open = TlsClient::connect(&listen, &ca.pem).expect("TLS handshake");

    files.write("server.pem", "not a certificate\n");
    sluice.send_sighup();
    wait_reloads(&sluice, "client", "error", 1.0);
    let cert_path = files.text("server.pem");
    let log = sluice.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("tls reload refused"))
        .collect();
    assert!(
        refused
            .iter()
            .any(|l| l.contains(&cert_path) && l.contains("ERROR")),
        "an ERROR line names the file: {refused:?}"
    );
    assert!(
        refused
            .iter()
            .all(|l| l.contains("the certificate in use stays")),
        "{refused:?}"
    );
    assert_eq!(
        presented(&listen, &ca),
        first.der(),
        "the certificate in use stays"
    );

    // The new certificate with the old key: they do not match.
    files.write("server.pem", &second.cert);
    sluice.send_sighup();
    wait_reloads(&sluice, "client", "error", 2.0);
    assert_eq!(
        presented(&listen, &ca),
        first.der(),
        "a mismatched key is refused"
    );
    assert_eq!(sluice.metric(RELOADS, &["result=\"ok\""]), 0.0);

    // Its key too, without a signal: the poll sees the files change.
    files.write("server-key.pem", &second.key);
    wait::until(
        Duration::from_secs(30),
        "the poll to load the new certificate",
        || {
            if presented(&listen, &ca) == second.der() {
                Ok(())
            } else {
                Err("still the first certificate".to_owned())
            }
        },
    );
    assert!(
        sluice.log().contains("(its files changed)"),
        "{}",
        sluice.log()
    );
    assert_eq!(
        open.api_versions(),
        0,
        "the connection opened first still works"
    );
    assert_eq!(open.server_certificate(), first.der());
}

/// The topology lines of a KafkaSinkCluster's TLS to brokers.
fn broker_tls(files: &Files) -> String {
    format!(
        "            tls:\n              certificate_authority_path: \"{}\"\n              certificate_path: \"{}\"\n              private_key_path: \"{}\"\n",
        files.text("ca.pem"),
        files.text("client.pem"),
        files.text("client-key.pem"),
    )
}

/// The error code of `topic` in a Metadata answer on `client`'s connection.
fn topic_error(client: &mut RawClient, topic: &str) -> i16 {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default()
            .with_name(Some(StrBytes::from_string(topic.to_owned()).into())),
    ]));
    let ResponseKind::Metadata(answer) =
        client.request(ApiKey::Metadata, 12, RequestKind::Metadata(request))
    else {
        panic!("not a Metadata answer");
    };
    answer
        .topics
        .first()
        .map(|t| t.error_code)
        .expect("the topic in the answer")
}

#[test]
fn broker_tls_reload_authenticates_new_broker_connections_with_the_new_certificate() {
    let cluster = Cluster::get(TRIO);
    let cluster_ca = Ca::of_cluster(&cluster.certs_dir());
    let admin = Leaf {
        cert: std::fs::read_to_string(cluster.cert("sluice-admin.pem")).unwrap(),
        key: std::fs::read_to_string(cluster.cert("sluice-admin-key.pem")).unwrap(),
    };
    let files = Files::new();
    files.write("ca.pem", &cluster_ca.pem);
    files.write_leaf("client", &admin);
    let (sluice, listen) = start(&cluster, "SSL", "", &broker_tls(&files));
    let topic = unique("tls-reload-broker");
    cluster.create_topic(&topic, 1, 3);

    // The super user sees the topic.
    let mut before = RawClient::connect(&listen);
    assert_eq!(topic_error(&mut before, &topic), 0);

    // A principal without ACLs: new broker connections are refused the topic.
    files.write_leaf("client", &cluster_ca.client("sluice-reload-test"));
    sluice.send_sighup();
    wait_reloads(&sluice, "broker", "ok", 1.0);
    let mut after = RawClient::connect(&listen);
    assert_eq!(
        topic_error(&mut after, &topic),
        TOPIC_AUTHORIZATION_FAILED,
        "a new client connection's broker connections present the new certificate"
    );
    assert_eq!(
        topic_error(&mut before, &topic),
        0,
        "broker connections opened before keep theirs"
    );

    // A bad key: refused, naming the file; the new principal stays.
    files.write("client-key.pem", "garbage\n");
    sluice.send_sighup();
    wait_reloads(&sluice, "broker", "error", 1.0);
    let key_path = files.text("client-key.pem");
    assert!(
        sluice
            .log()
            .lines()
            .any(|l| l.contains("tls reload refused") && l.contains(&key_path)),
        "{}",
        sluice.log()
    );
    let mut refused = RawClient::connect(&listen);
    assert_eq!(
        topic_error(&mut refused, &topic),
        TOPIC_AUTHORIZATION_FAILED
    );

    // Back to the super user.
    files.write_leaf("client", &admin);
    sluice.send_sighup();
    wait_reloads(&sluice, "broker", "ok", 2.0);
    let mut again = RawClient::connect(&listen);
    assert_eq!(topic_error(&mut again, &topic), 0);
    assert_eq!(topic_error(&mut before, &topic), 0);
}
