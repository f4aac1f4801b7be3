//! Topology parsing and validation tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::*;
use crate::Config;

const FILE: &str = "topology.yaml";

fn parse(yaml: &str) -> Result<Topology, ConfigError> {
    Topology::parse(yaml, Path::new(FILE))
}

fn err(yaml: &str) -> ConfigError {
    match parse(yaml) {
        Ok(t) => panic!("expected an error, parsed {t:?}"),
        Err(e) => e,
    }
}

/// Asserts that `e` names `field` and the file, and its message contains `text`.
fn assert_err(e: &ConfigError, field: &str, text: &str) {
    let msg = e.to_string();
    assert_eq!(e.field(), Some(field), "{msg}");
    assert!(
        msg.starts_with(&format!("{FILE}: field `{field}`")),
        "{msg}"
    );
    assert!(msg.contains(text), "{msg:?} should contain {text:?}");
}

/// A single-sink topology whose sink body is `sink` (indented 12 spaces).
fn single(sink: &str) -> String {
    format!(
        "sources:\n  - Kafka:\n      name: \"kafka\"\n      listen_addr: \"127.0.0.1:9192\"\n      \
         chain:\n        - KafkaSinkSingle:\n{sink}"
    )
}

/// A directory of empty files, removed on drop.
struct TempFiles(PathBuf);

impl TempFiles {
    fn new(tag: &str, names: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("sluice-config-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in names {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SHOTOVER_PASSTHROUGH: &str = r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkSingle:
            name: "kafka-sink-single"
            destination_port: 9092
            connect_timeout_ms: 3000
"#;

#[test]
fn shotover_passthrough_example_parses() {
    let t = parse(SHOTOVER_PASSTHROUGH).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.name, "kafka");
    assert_eq!(k.listen_addr, "127.0.0.1:9192");
    assert_eq!(k.connection_limit_or_default(), DEFAULT_CONNECTION_LIMIT);
    let Some(TransformConfig::KafkaSinkSingle(s)) = k.sink() else {
        panic!("expected KafkaSinkSingle, got {:?}", k.chain);
    };
    assert_eq!(s.name.as_deref(), Some("kafka-sink-single"));
    assert_eq!(s.destination_port, Some(9092));
    assert_eq!(s.connect_timeout(), Duration::from_millis(3000));
    assert_eq!(s.read_timeout(), None);
}

#[test]
fn shotover_source_options_parse() {
    let certs = TempFiles::new("source-options", &["s.crt", "s.key", "ca.crt"]);
    let yaml = format!(
        r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      connection_limit: 100
      hard_connection_limit: true
      timeout: 60
      tls:
        certificate_path: "{}"
        private_key_path: "{}"
        certificate_authority_path: "{}"
      chain:
        - DebugPrinter
        - KafkaSinkSingle:
            destination_port: 9092
            connect_timeout_ms: 3000
            read_timeout: 30
            tls:
              certificate_authority_path: "{}"
              verify_hostname: false
"#,
        certs.path("s.crt"),
        certs.path("s.key"),
        certs.path("ca.crt"),
        certs.path("ca.crt")
    );
    let t = parse(&yaml).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.connection_limit_or_default(), 100);
    assert!(k.hard_connection_limit_or_default());
    assert_eq!(k.idle_timeout(), Some(Duration::from_secs(60)));
    assert!(matches!(k.chain[0], TransformConfig::DebugPrinter));
    let TransformConfig::KafkaSinkSingle(s) = &k.chain[1] else {
        panic!("{:?}", k.chain)
    };
    assert_eq!(s.read_timeout_secs, Some(30));
    assert!(!s.tls.as_ref().unwrap().verify_hostname);
}

#[test]
fn debug_printer_accepts_shotover_forms() {
    let sink = "            destination_port: 9092\n            connect_timeout_ms: 3000\n";
    for form in [
        "- DebugPrinter",
        "- DebugPrinter: null",
        "- DebugPrinter: {}",
    ] {
        let yaml = single(sink).replace(
            "        - KafkaSinkSingle:",
            &format!("        {form}\n        - KafkaSinkSingle:"),
        );
        let t = parse(&yaml).unwrap_or_else(|e| panic!("{form}: {e}"));
        let SourceConfig::Kafka(k) = &t.sources[0];
        assert_eq!(k.chain.len(), 2, "{form}");
    }
}

#[test]
fn unknown_field_names_field_and_file() {
    let e = err(&single(
        "            destination_portt: 9092\n            connect_timeout_ms: 3000\n",
    ));
    assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
    assert_err(
        &e,
        "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_portt",
        "unknown field",
    );
    assert!(e.to_string().contains("line "), "{e}");
}

#[test]
fn unknown_transform_is_named() {
    let yaml = SHOTOVER_PASSTHROUGH.replace("KafkaSinkSingle:", "KafkaSinkSinlge:");
    let e = err(&yaml);
    assert!(e.to_string().contains("KafkaSinkSinlge"), "{e}");
    assert!(
        e.field().unwrap().starts_with("sources[0].Kafka.chain[0]"),
        "{e}"
    );
}

#[test]
fn wrong_type_names_field() {
    let e = err(&single(
        "            destination_port: \"ninety\"\n            connect_timeout_ms: 3000\n",
    ));
    assert_err(
        &e,
        "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_port",
        "invalid type",
    );
}

#[test]
fn missing_field_names_parent() {
    let e = err(&single("            destination_port: 9092\n"));
    assert_err(
        &e,
        "sources[0].Kafka.chain[0].KafkaSinkSingle",
        "missing field `connect_timeout_ms`",
    );
}

#[test]
fn yaml_syntax_error_names_file() {
    let e = err("sources: [\n");
    assert!(e.to_string().starts_with(FILE), "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
    let e = err("just a string\n");
    assert!(matches!(e, ConfigError::Yaml { .. }), "{e:?}");
    assert!(e.to_string().starts_with(FILE), "{e}");
}

#[test]
fn bad_listen_address_is_rejected() {
    for bad in ["127.0.0.1", "127.0.0.1:70000", "nonsense", "300.1.1.1:9192"] {
        let yaml = SHOTOVER_PASSTHROUGH.replace("127.0.0.1:9192", bad);
        assert_err(
            &err(&yaml),
            "sources[0].Kafka.listen_addr",
            "invalid address",
        );
    }
}

#[test]
fn listen_port_zero_is_allowed() {
    parse(&SHOTOVER_PASSTHROUGH.replace("127.0.0.1:9192", "127.0.0.1:0")).unwrap();
}

#[test]
fn missing_tls_file_names_field_and_path() {
    let yaml = single(
        "            destination_port: 9092\n            connect_timeout_ms: 3000\n            \
         tls:\n              certificate_authority_path: \"/nonexistent/ca.crt\"\n",
    );
    let e = err(&yaml);
    assert_err(
        &e,
        "sources[0].Kafka.chain[0].KafkaSinkSingle.tls.certificate_authority_path",
        "/nonexistent/ca.crt",
    );
}

#[test]
fn client_cert_without_key_is_rejected() {
    let certs = TempFiles::new("cert-no-key", &["ca.crt", "c.crt"]);
    let yaml = single(&format!(
        "            destination_port: 9092\n            connect_timeout_ms: 3000\n            \
         tls:\n              certificate_authority_path: \"{}\"\n              \
         certificate_path: \"{}\"\n",
        certs.path("ca.crt"),
        certs.path("c.crt")
    ));
    assert_err(
        &err(&yaml),
        "sources[0].Kafka.chain[0].KafkaSinkSingle.tls.private_key_path",
        "must be set",
    );
}

#[test]
fn sink_not_last_is_rejected() {
    let yaml = SHOTOVER_PASSTHROUGH.replace(
        "            connect_timeout_ms: 3000\n",
        "            connect_timeout_ms: 3000\n        - DebugPrinter\n",
    );
    assert_err(
        &err(&yaml),
        "sources[0].Kafka.chain[0]",
        "must be the last element",
    );
}

#[test]
fn chain_without_sink_is_rejected() {
    let yaml = "sources:\n  - Kafka:\n      name: k\n      listen_addr: \"127.0.0.1:9192\"\n      \
                chain:\n        - DebugPrinter\n";
    assert_err(
        &err(yaml),
        "sources[0].Kafka.chain[0]",
        "must end in a sink",
    );
    let yaml = "sources:\n  - Kafka:\n      name: k\n      listen_addr: \"127.0.0.1:9192\"\n      \
                chain: []\n";
    assert_err(&err(yaml), "sources[0].Kafka.chain", "must not be empty");
}

#[test]
fn no_sources_is_rejected() {
    assert_err(&err("sources: []\n"), "sources", "at least one source");
}

#[test]
fn duplicate_source_names_are_rejected() {
    let second = SHOTOVER_PASSTHROUGH
        .replace("sources:\n", "")
        .replace("9192", "9193");
    let yaml = format!("{SHOTOVER_PASSTHROUGH}{second}");
    assert_err(
        &err(&yaml),
        "sources[1].Kafka.name",
        "also used by sources[0]",
    );
}

#[test]
fn duplicate_listen_addresses_are_rejected() {
    let second = SHOTOVER_PASSTHROUGH
        .replace("sources:\n", "")
        .replace("name: \"kafka\"", "name: \"other\"");
    let yaml = format!("{SHOTOVER_PASSTHROUGH}{second}");
    assert_err(
        &err(&yaml),
        "sources[1].Kafka.listen_addr",
        "also the listen_addr",
    );
}

#[test]
fn single_sink_destination_rules() {
    let both = single(
        "            destination_port: 9092\n            destination_address: \"10.0.0.1:9092\"\n            \
         connect_timeout_ms: 3000\n",
    );
    assert_err(
        &err(&both),
        "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_address",
        "only one of",
    );
    let neither = single("            connect_timeout_ms: 3000\n");
    assert_err(
        &err(&neither),
        "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_port",
        "destination_address",
    );
    let address = single(
        "            destination_address: \"broker-1:9092\"\n            connect_timeout_ms: 3000\n",
    );
    parse(&address).unwrap();
    let bad = single(
        "            destination_address: \"broker-1\"\n            connect_timeout_ms: 3000\n",
    );
    assert_err(
        &err(&bad),
        "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_address",
        "invalid address",
    );
}

#[test]
fn zero_limits_and_timeouts_are_rejected() {
    let zero_connect = SHOTOVER_PASSTHROUGH.replace("3000", "0");
    assert_err(
        &err(&zero_connect),
        "sources[0].Kafka.chain[0].KafkaSinkSingle.connect_timeout_ms",
        "greater than 0",
    );
    let zero_limit =
        SHOTOVER_PASSTHROUGH.replace("      chain:", "      connection_limit: 0\n      chain:");
    assert_err(
        &err(&zero_limit),
        "sources[0].Kafka.connection_limit",
        "greater than 0",
    );
    let tiny_frames =
        SHOTOVER_PASSTHROUGH.replace("      chain:", "      max_frame_bytes: 10\n      chain:");
    assert_err(
        &err(&tiny_frames),
        "sources[0].Kafka.max_frame_bytes",
        "out of range",
    );
}

#[test]
fn memory_bound_fields_parse_with_defaults_and_are_checked() {
    let t = parse(SHOTOVER_PASSTHROUGH).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.write_timeout(), Duration::from_secs(30));
    assert_eq!(k.max_unauthenticated_frame_bytes_or_default(), 512 * 1024);
    assert_eq!(k.authentication_timeout(), Duration::from_secs(10));
    assert_eq!(k.unauthenticated_connection_limit_or_default(), 128);
    assert_eq!(
        k.unauthenticated_connection_limit_per_address_or_default(),
        16
    );

    let set = SHOTOVER_PASSTHROUGH.replace(
        "      chain:",
        "      write_timeout_secs: 5\n      max_unauthenticated_frame_bytes: 65536\n      \
         authentication_timeout_secs: 3\n      unauthenticated_connection_limit: 7\n      \
         unauthenticated_connection_limit_per_address: 2\n      chain:",
    );
    let t = parse(&set).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.write_timeout(), Duration::from_secs(5));
    assert_eq!(k.max_unauthenticated_frame_bytes_or_default(), 65536);
    assert_eq!(k.authentication_timeout(), Duration::from_secs(3));
    assert_eq!(k.unauthenticated_connection_limit_or_default(), 7);
    assert_eq!(
        k.unauthenticated_connection_limit_per_address_or_default(),
        2
    );

    for (line, field, text) in [
        (
            "write_timeout_secs: 0",
            "write_timeout_secs",
            "greater than 0",
        ),
        (
            "authentication_timeout_secs: 0",
            "authentication_timeout_secs",
            "greater than 0",
        ),
        (
            "unauthenticated_connection_limit: 0",
            "unauthenticated_connection_limit",
            "greater than 0",
        ),
        (
            "unauthenticated_connection_limit_per_address: 0",
            "unauthenticated_connection_limit_per_address",
            "greater than 0",
        ),
        (
            "max_unauthenticated_frame_bytes: 100",
            "max_unauthenticated_frame_bytes",
            "out of range",
        ),
        (
            "max_frame_bytes: 65536\n      max_unauthenticated_frame_bytes: 65537",
            "max_unauthenticated_frame_bytes",
            "max_frame_bytes (65536)",
        ),
    ] {
        let yaml =
            SHOTOVER_PASSTHROUGH.replace("      chain:", &format!("      {line}\n      chain:"));
        assert_err(&err(&yaml), &format!("sources[0].Kafka.{field}"), text);
    }
}

#[test]
fn memory_budgets_parse_with_defaults_and_are_checked() {
    let t = parse(SHOTOVER_PASSTHROUGH).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.connection_memory_budget_bytes_or_default(), 64 << 20);
    assert_eq!(t.memory_budget_bytes_or_default(), 1 << 30);

    let set = format!(
        "memory_budget_bytes: {}\n{}",
        32 << 20,
        SHOTOVER_PASSTHROUGH.replace(
            "      chain:",
            "      connection_memory_budget_bytes: 8388608\n      chain:"
        )
    );
    let t = parse(&set).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    assert_eq!(k.connection_memory_budget_bytes_or_default(), 8 << 20);
    assert_eq!(t.memory_budget_bytes_or_default(), 32 << 20);

    let small = SHOTOVER_PASSTHROUGH.replace(
        "      chain:",
        "      connection_memory_budget_bytes: 1000\n      chain:",
    );
    assert_err(
        &err(&small),
        "sources[0].Kafka.connection_memory_budget_bytes",
        "too small",
    );
    assert_err(
        &err(&format!(
            "memory_budget_bytes: 1000\n{SHOTOVER_PASSTHROUGH}"
        )),
        "memory_budget_bytes",
        "at least 1048576",
    );
    let over = format!("memory_budget_bytes: {}\n{SHOTOVER_PASSTHROUGH}", 16 << 20);
    assert_err(
        &err(&over),
        "sources[0].Kafka.connection_memory_budget_bytes",
        "more than the process's memory_budget_bytes",
    );
}

fn cluster_yaml(certs: &TempFiles, lifetime: u64, local_id: i32) -> String {
    format!(
        r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9191"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address_for_peers: "127.0.0.1:9191"
                address_for_clients: "127.0.0.1:9191"
                rack: "rack0"
                broker_id: 0
              - address_for_peers: "127.0.0.1:9192"
                address_for_clients: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 1
            local_shotover_broker_id: {local_id}
            first_contact_points: ["172.16.1.2:9092"]
            authorize_scram_over_mtls:
              mtls_port_contact_points: ["172.16.1.2:9094"]
              tls:
                certificate_authority_path: "{ca}"
                certificate_path: "{crt}"
                private_key_path: "{key}"
                verify_hostname: true
              delegation_token_lifetime_seconds: {lifetime}
            connect_timeout_ms: 3000
            check_shotover_peers_delay_ms: 3000
            tls:
              certificate_authority_path: "{ca}"
              certificate_path: "{crt}"
              private_key_path: "{key}"
              verify_hostname: true
"#,
        ca = certs.path("ca.crt"),
        crt = certs.path("l.crt"),
        key = certs.path("l.key"),
    )
}

#[test]
fn shotover_cluster_scram_over_mtls_example_parses() {
    let certs = TempFiles::new("cluster", &["ca.crt", "l.crt", "l.key"]);
    let t = parse(&cluster_yaml(&certs, 15, 0)).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    let Some(TransformConfig::KafkaSinkCluster(c)) = k.sink() else {
        panic!("{:?}", k.chain)
    };
    assert_eq!(
        c.local_node().unwrap().address_for_clients,
        "127.0.0.1:9191"
    );
    assert_eq!(c.shotover_nodes.len(), 2);
    assert_eq!(c.check_shotover_peers_delay_ms, Some(3000));
    let scram = c.authorize_scram_over_mtls.as_ref().unwrap();
    assert_eq!(scram.delegation_token_lifetime(), Duration::from_secs(15));
    assert!(scram.tls.has_client_cert());
}

#[test]
fn the_local_node_can_be_given_outside_the_file() {
    let certs = TempFiles::new("cluster-local", &["ca.crt", "l.crt", "l.key"]);
    let mut t = parse(&cluster_yaml(&certs, 15, 0)).unwrap();
    let path = Path::new(FILE);
    t.set_local_shotover_broker_id(1, path).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    let Some(TransformConfig::KafkaSinkCluster(c)) = k.sink() else {
        panic!("{:?}", k.chain)
    };
    assert_eq!(
        c.local_node().unwrap().address_for_clients,
        "127.0.0.1:9192"
    );
    // Not a listed node: named with the flag, the file and the list.
    let e = t.set_local_shotover_broker_id(7, path).unwrap_err();
    assert_err(
        &e,
        "sources[0].Kafka.chain[0].KafkaSinkCluster.shotover_nodes",
        "--local-shotover-broker-id 7 is not the broker_id of any entry",
    );
    assert_eq!(e.path(), path);
    // No cluster sink, or two: refused, naming them.
    let mut single = parse(&single(
        "            destination_port: 9092\n            connect_timeout_ms: 3000\n",
    ))
    .unwrap();
    let e = single.set_local_shotover_broker_id(0, path).unwrap_err();
    assert_err(&e, "sources", "needs a chain ending in KafkaSinkCluster");
    let yaml = cluster_yaml(&certs, 15, 0);
    let second = yaml
        .split_once("sources:\n")
        .unwrap()
        .1
        .replace("name: \"kafka\"", "name: \"other\"")
        .replace(
            "listen_addr: \"127.0.0.1:9191\"",
            "listen_addr: \"127.0.0.1:9193\"",
        );
    let mut two = parse(&format!("{yaml}{second}")).unwrap();
    let e = two.set_local_shotover_broker_id(0, path).unwrap_err();
    assert_err(
        &e,
        "sources",
        "sources[0].Kafka.chain[0].KafkaSinkCluster, sources[1]",
    );
}

#[test]
fn cluster_rules() {
    let certs = TempFiles::new("cluster-rules", &["ca.crt", "l.crt", "l.key"]);
    let sink = "sources[0].Kafka.chain[0].KafkaSinkCluster";
    assert_err(
        &err(&cluster_yaml(&certs, 15, 7)),
        &format!("{sink}.local_shotover_broker_id"),
        "7 is not the broker_id",
    );
    assert_err(
        &err(&cluster_yaml(&certs, 5, 0)),
        &format!("{sink}.authorize_scram_over_mtls.delegation_token_lifetime_seconds"),
        "at least 10",
    );
    let dup = cluster_yaml(&certs, 15, 0).replace("broker_id: 1", "broker_id: 0");
    assert_err(
        &err(&dup),
        &format!("{sink}.shotover_nodes[1].broker_id"),
        "also used by shotover_nodes[0]",
    );
    let no_contact = cluster_yaml(&certs, 15, 0).replace("[\"172.16.1.2:9092\"]", "[]");
    assert_err(
        &err(&no_contact),
        &format!("{sink}.first_contact_points"),
        "at least one",
    );
    for unspecified in ["0.0.0.0:9192", "[::]:9192"] {
        let yaml = cluster_yaml(&certs, 15, 0).replace(
            "address_for_clients: \"127.0.0.1:9192\"",
            &format!("address_for_clients: \"{unspecified}\""),
        );
        assert_err(
            &err(&yaml),
            &format!("{sink}.shotover_nodes[1].address_for_clients"),
            "clients cannot connect to an unspecified address",
        );
    }
    let bad_contact = cluster_yaml(&certs, 15, 0).replace("172.16.1.2:9092", "172.16.1.2");
    assert_err(
        &err(&bad_contact),
        &format!("{sink}.first_contact_points[0]"),
        "invalid address",
    );
    let bad_peer = cluster_yaml(&certs, 15, 0).replace(
        "address_for_peers: \"127.0.0.1:9192\"",
        "address_for_peers: \"x\"",
    );
    assert_err(
        &err(&bad_peer),
        &format!("{sink}.shotover_nodes[1].address_for_peers"),
        "invalid address",
    );
}

#[test]
fn scram_over_mtls_needs_a_client_certificate() {
    let certs = TempFiles::new("scram-no-cert", &["ca.crt", "l.crt", "l.key"]);
    let yaml = cluster_yaml(&certs, 15, 0).replacen(
        &format!(
            "                certificate_path: \"{}\"\n                private_key_path: \"{}\"\n",
            certs.path("l.crt"),
            certs.path("l.key")
        ),
        "",
        1,
    );
    assert_err(
        &err(&yaml),
        "sources[0].Kafka.chain[0].KafkaSinkCluster.authorize_scram_over_mtls.tls.certificate_path",
        "must be set",
    );
}

#[test]
fn older_shotover_node_address_form_parses() {
    let yaml = r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 0
            local_shotover_broker_id: 0
            first_contact_points: ["172.16.1.2:9092"]
            connect_timeout_ms: 3000
"#;
    let t = parse(yaml).unwrap();
    let SourceConfig::Kafka(k) = &t.sources[0];
    let Some(TransformConfig::KafkaSinkCluster(c)) = k.sink() else {
        panic!()
    };
    assert_eq!(c.shotover_nodes[0].address_for_peers, "127.0.0.1:9192");
    assert_eq!(c.shotover_nodes[0].address_for_clients, "127.0.0.1:9192");

    let both = yaml.replace(
        "              - address: \"127.0.0.1:9192\"\n",
        "              - address: \"127.0.0.1:9192\"\n                address_for_peers: \"127.0.0.1:9192\"\n",
    );
    let e = err(&both);
    assert!(e.to_string().contains("not both"), "{e}");
    assert!(
        e.field()
            .unwrap()
            .starts_with("sources[0].Kafka.chain[0].KafkaSinkCluster.shotover_nodes[0]"),
        "{e}"
    );
}

/// Every file shipped in `config/` and `config/examples/` stays true to the
/// schema: a file with top-level `sources` is a topology, any other a config
/// file. Their TLS files are deployment-specific, so only the file checks are
/// skipped.
#[test]
fn shipped_examples_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let (mut topologies, mut configs) = (0, 0);
    for dir in [root.clone(), root.join("examples")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                continue;
            }
            let ext = path.extension().and_then(|e| e.to_str());
            assert!(
                matches!(ext, Some("yaml" | "yml")),
                "{}: only YAML files belong in config/",
                path.display()
            );
            let text = std::fs::read_to_string(&path).unwrap();
            let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
            if value.get("sources").is_some() {
                let t: Topology = crate::load::parse_yaml(&text, &path).unwrap();
                t.check(Checks { files: false })
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                topologies += 1;
            } else {
                Config::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
                configs += 1;
            }
        }
    }
    assert!(
        topologies >= 3 && configs >= 1,
        "expected topology.yaml, two examples and config.yaml, saw {topologies} topologies \
         and {configs} configs"
    );
}

/// The default topology is fully valid as shipped (it has no TLS files).
#[test]
fn default_topology_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    Topology::load(&root.join("topology.yaml")).unwrap();
}

#[test]
fn malformed_chain_elements_are_named() {
    let chain = |element: &str| {
        format!(
            "sources:\n  - Kafka:\n      name: k\n      listen_addr: \"127.0.0.1:1\"\n      \
             chain:\n        - {element}\n"
        )
    };
    assert_err(
        &err(&chain("KafkaSinkSingle")),
        "sources[0].Kafka.chain[0]",
        "KafkaSinkSingle needs settings",
    );
    assert_err(
        &err(&chain("DebugPrinter: {x: 1}")),
        "sources[0].Kafka.chain[0].DebugPrinter.x",
        "unknown field",
    );
    assert_err(
        &err(&chain("DebugPrinter: {}\n          KafkaSinkSingle: {}")),
        "sources[0].Kafka.chain[0]",
        "one transform per chain element",
    );
    // shotover-proxy's transforms that Sluice does not implement, in both
    // forms, are refused by name with what Sluice does implement.
    for element in ["QueryCounter:\n            name: counter", "NullSink"] {
        let name = element.split(':').next().unwrap_or(element);
        let e = err(&chain(element));
        assert_err(
            &e,
            "sources[0].Kafka.chain[0]",
            &format!("unknown transform `{name}`"),
        );
        assert!(
            e.to_string().contains("Sluice implements DebugPrinter"),
            "{e}"
        );
    }
    assert_err(
        &err("sources:\n  - Kafak:\n      name: k\n"),
        "sources[0].Kafak",
        "unknown variant",
    );
}
