//! The observability endpoint of a running Sluice, against the real 3-node
//! cluster (`trio`): `/health` and `/ready` for a KafkaSinkSingle, a
//! KafkaSinkCluster, one whose brokers require SASL and one whose brokers
//! are nowhere; and the metrics reference (`docs/metrics.md`) and the
//! Grafana dashboard (`deploy/grafana/sluice.json`) held to the metrics the
//! binary exports: the names in `sluice_metrics::names` and what `/metrics`
//! shows after real traffic. Renaming a metric fails these tests until the
//! reference and the dashboard follow.
//!
//! Every broker of the cluster going down and coming back is in
//! `tests/lifecycle.rs` (it kills brokers, so it runs in the serial phase).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
use sluice_codec::{ApiKey, RequestKind};
use sluice_metrics::{catalog, names};
use sluice_testkit::cluster::{Cluster, SINGLE, TRIO};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::{SluiceProcess, sum_metric};
use sluice_testkit::{clients, free_port, fronted, repo_root, unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A source `name` on `listen` whose chain is `sink` (YAML lines indented
/// for a chain entry).
fn source(name: &str, listen: &str, sink: &str) -> String {
    format!(
        "  - Kafka:\n      name: \"{name}\"\n      listen_addr: \"{listen}\"\n      chain:\n{sink}"
    )
}

/// A KafkaSinkCluster named `name`, the only Sluice node, on `listen`.
fn cluster_sink(name: &str, listen: &str, contact_points: &str) -> String {
    format!(
        r#"        - KafkaSinkCluster:
            name: "{name}"
            shotover_nodes:
              - address_for_clients: "{listen}"
                address_for_peers: "{listen}"
                rack: "rack0"
                broker_id: 0
            local_shotover_broker_id: 0
            first_contact_points: [{contact_points}]
            connect_timeout_ms: 3000
"#
    )
}

/// Waits until `/ready` answers `status`; returns its body.
fn wait_ready_status(sluice: &SluiceProcess, status: u16) -> String {
    wait::until(
        Duration::from_secs(30),
        &format!("/ready to answer {status}"),
        || match sluice.http("/ready") {
            (got, body) if got == status => Ok(body),
            (got, body) => Err(format!("{got} {body}")),
        },
    )
}

#[test]
fn health_and_ready_are_200_in_front_of_a_running_cluster() {
    let cluster = Cluster::get(TRIO);
    let (single, plain, sasl) = (
        fronted::listen_addrs(1),
        fronted::listen_addrs(1),
        fronted::listen_addrs(1),
    );
    let (single, plain, sasl) = (&single[0], &plain[0], &sasl[0]);
    let single_sink = format!(
        "        - KafkaSinkSingle:\n            name: \"single-sink\"\n            destination_address: \"127.0.0.1:{}\"\n            connect_timeout_ms: 3000\n",
        cluster.port(1, "PLAINTEXT")
    );
    let topology = format!(
        "sources:\n{}{}{}",
        source("single", single, &single_sink),
        source(
            "plain",
            plain,
            &cluster_sink(
                "cluster-sink",
                plain,
                &fronted::contact_points(&cluster, "PLAINTEXT")
            )
        ),
        source(
            "sasl",
            sasl,
            &cluster_sink(
                "sasl-sink",
                sasl,
                &fronted::contact_points(&cluster, "SASL_PLAINTEXT")
            )
        ),
    );
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[single, plain, sasl]);
    let body = wait_ready_status(&sluice, 200);
    assert_eq!(sluice.http("/health"), (200, "ok\n".to_owned()));
    assert!(
        body.starts_with("ready: ") && body.ends_with('\n') && body.lines().count() == 1,
        "{body}"
    );
    for expected in [
        "sink single-sink: 1 of 1 broker(s) reachable, metadata lists 3 broker(s)",
        "sink cluster-sink: 3 of 3 broker(s) reachable, metadata lists 3 broker(s)",
        "sink sasl-sink: 3 of 3 broker(s) reachable; they require SASL",
    ] {
        assert!(body.contains(expected), "{expected:?} in {body}");
    }
    for (sink, reachable) in [
        ("single-sink", 1.0),
        ("cluster-sink", 3.0),
        ("sasl-sink", 3.0),
    ] {
        let label = format!("sink=\"{sink}\"");
        assert_eq!(
            sluice.metric(names::SINK_READY, &[&label]),
            1.0,
            "{sink} ready"
        );
        assert_eq!(
            sluice.metric(names::SINK_BROKERS_REACHABLE, &[&label]),
            reachable,
            "{sink} reachable brokers"
        );
    }
    assert_eq!(
        sluice.metric(
            names::BUILD_INFO,
            &[&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))]
        ),
        1.0,
        "the build is named"
    );
    let (status, body) = sluice.http("/nope");
    assert_eq!(status, 404, "{body}");
    // The probe logs nothing at WARN once ready, and Sluice serves clients.
    let topic = unique("ready");
    cluster.create_topic(&topic, 3, 3);
    let records: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    let got = clients::java_round_trip(&cluster, plain, &topic, &records, None);
    assert_eq!(got.len(), 10, "{got:?}");
}

#[test]
fn ready_is_503_naming_the_sink_whose_brokers_are_unreachable() {
    let listen = format!("127.0.0.1:{}", free_port());
    let nowhere = format!("\"127.0.0.1:{}\"", free_port());
    let topology = format!(
        "sources:\n{}",
        source(
            "lost",
            &listen,
            &cluster_sink("lost-sink", &listen, &nowhere)
        )
    );
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen]);
    let body = wait_ready_status(&sluice, 503);
    assert!(
        body.starts_with("not ready: sink lost-sink: no broker reachable (127.0.0.1:")
            && body.contains("cannot connect")
            && body.lines().count() == 1,
        "{body}"
    );
    assert_eq!(
        sluice.http("/health"),
        (200, "ok\n".to_owned()),
        "the process serves"
    );
    assert_eq!(
        sluice.metric(names::SINK_READY, &["sink=\"lost-sink\""]),
        0.0
    );
    assert!(
        sluice
            .log()
            .contains("sink lost-sink is not ready: no broker reachable"),
        "{}",
        sluice.log()
    );
}

/// Every metric `docs/metrics.md` documents: name to (type, labels).
fn documented() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let path = repo_root().join("docs/metrics.md");
    let text = std::fs::read_to_string(&path).expect("docs/metrics.md");
    let mut metrics = BTreeMap::new();
    let rows = text
        .lines()
        .filter(|l| l.starts_with("| `sluice_") || l.starts_with("| `process_"));
    for line in rows {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        let kind = cells[2].split_whitespace().next().unwrap_or("").to_owned();
        let labels: BTreeSet<String> = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "none")
            .collect();
        assert!(
            metrics.insert(name.clone(), (kind, labels)).is_none(),
            "{name} is documented twice"
        );
    }
    metrics
}

/// The metric names in a PromQL expression (`sluice_...`, `process_...`):
/// its identifiers with either prefix (a label value is quoted, so
/// `scope="process"` is not one).
fn metrics_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '"'))
        .filter(|word| word.starts_with("sluice_") || word.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

/// The labels an expression aggregates `by (...)`.
fn grouped_by(expr: &str) -> Vec<String> {
    expr.split("by (")
        .skip(1)
        .filter_map(|part| part.split(')').next())
        .flat_map(|labels| labels.split(','))
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A histogram's series (`_count`, `_sum`, `_bucket`) named by its metric.
fn base_name(series: &str) -> &str {
    for suffix in ["_count", "_sum", "_bucket"] {
        if let Some(base) = series.strip_suffix(suffix)
            && names::ALL.contains(&base)
        {
            return base;
        }
    }
    series
}

/// Every `expr` in the dashboard, with the title of its panel.
fn dashboard_exprs() -> Vec<(String, String)> {
    let path = repo_root().join("deploy/grafana/sluice.json");
    let text = std::fs::read_to_string(&path).expect("deploy/grafana/sluice.json");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("").to_owned();
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                exprs.push((title.clone(), expr.to_owned()));
            }
        }
    }
    exprs
}

#[test]
fn the_reference_documents_every_metric_and_the_dashboard_reads_only_real_ones() {
    let docs = documented();
    for name in names::ALL {
        assert!(docs.contains_key(*name), "{name} is not in docs/metrics.md");
    }
    for (name, (kind, _)) in &docs {
        assert!(
            names::ALL.contains(&name.as_str()),
            "docs/metrics.md documents {name}, which Sluice does not export"
        );
        let exported = catalog::lookup(name).map(|m| m.kind.as_str());
        assert_eq!(
            exported,
            Some(kind.as_str()),
            "docs/metrics.md says {name} is a {kind}"
        );
    }
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 10, "the dashboard has panels: {exprs:?}");
    let mut shown = BTreeSet::new();
    for (panel, expr) in &exprs {
        let metrics = metrics_in(expr);
        assert!(
            !metrics.is_empty(),
            "panel {panel:?} reads no Sluice metric: {expr}"
        );
        let mut labels = BTreeSet::new();
        for series in &metrics {
            let name = base_name(series);
            let (kind, documented_labels) = docs.get(name).unwrap_or_else(|| {
                panic!("panel {panel:?} reads {series}, which Sluice does not export")
            });
            labels.extend(documented_labels.iter().cloned());
            // A histogram's buckets and a summary's quantiles are labels.
            match kind.as_str() {
                "histogram" => {
                    labels.insert("le".to_owned());
                }
                "summary" => {
                    labels.insert("quantile".to_owned());
                }
                _ => {}
            }
            shown.insert(name.to_owned());
        }
        for label in grouped_by(expr) {
            assert!(
                labels.contains(&label) || label == "instance" || label == "job",
                "panel {panel:?} groups by `{label}`, a label none of {metrics:?} has"
            );
        }
    }
    for required in [
        names::REQUESTS,
        names::ERRORS,
        names::CLIENT_CONNECTIONS_OPEN,
        names::SINK_READY,
        names::TLS_RELOADS,
        names::TLS_CERTIFICATE_EXPIRY,
        names::BROKER_RECEIVE_ERRORS,
        names::BUILD_INFO,
        names::CLIENT_REQUEST_DURATION,
        names::BROKER_REQUEST_DURATION,
        names::BROKER_CONNECT_FAILURES,
        names::PROCESS_CPU_SECONDS,
        names::PROCESS_RESIDENT_MEMORY,
        names::PROCESS_OPEN_FDS,
        names::PROCESS_MAX_FDS,
        names::FETCHES_READ_AHEAD,
    ] {
        assert!(shown.contains(required), "the dashboard shows {required}");
    }
}

/// `# TYPE` lines of a scrape: metric name to type.
fn exported_types(scrape: &str) -> BTreeMap<String, String> {
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some((name.to_owned(), kind.trim().to_owned()))
        })
        .collect()
}

/// Every `# TYPE` line of a scrape follows a `# HELP` line of its metric,
/// with its catalog text.
fn assert_every_metric_has_help(scrape: &str) {
    let lines: Vec<&str> = scrape.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let Some(typed) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let name = typed.split(' ').next().unwrap_or("");
        let help = at
            .checked_sub(1)
            .and_then(|before| lines[before].strip_prefix(&format!("# HELP {name} ")));
        let expected = catalog::lookup(name).map(|m| m.help);
        assert_eq!(help, expected, "the # HELP line of {name}");
    }
}

#[test]
fn what_sluice_exports_after_traffic_is_documented_with_its_type() {
    let cluster = Cluster::get(TRIO);
    let listen = fronted::listen_addrs(1);
    let tls = format!(
        "      tls:\n        certificate_path: \"{}\"\n        private_key_path: \"{}\"\n",
        cluster.cert("sluice-server.pem"),
        cluster.cert("sluice-server-key.pem")
    );
    let tls_listen = format!("127.0.0.1:{}", free_port());
    let topology = format!(
        "{}{}",
        fronted::sink_topology(
            &listen,
            &["rack0"],
            0,
            &fronted::contact_points(&cluster, "PLAINTEXT"),
            30,
            ""
        ),
        source(
            "tls",
            &tls_listen,
            &format!(
                "        - KafkaSinkSingle:\n            destination_address: \"127.0.0.1:{}\"\n            connect_timeout_ms: 3000\n",
                cluster.port(1, "PLAINTEXT")
            )
        )
        .replacen("      chain:\n", &format!("{tls}      chain:\n"), 1),
    );
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen[0], &tls_listen]);
    let topic = unique("metrics-doc");
    cluster.create_topic(&topic, 3, 3);
    let records: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    let got = clients::java_round_trip(&cluster, &listen[0], &topic, &records, None);
    assert_eq!(got.len(), 20);
    sluice.send_sighup();
    wait::until(
        Duration::from_secs(30),
        "a TLS reload and a readiness round",
        || {
            let text = sluice.metrics();
            let types = exported_types(&text);
            if types.contains_key(names::TLS_RELOADS) && types.contains_key(names::SINK_READY) {
                Ok(())
            } else {
                Err(format!("{:?}", types.keys().collect::<Vec<_>>()))
            }
        },
    );

    let scrape = sluice.metrics();
    let types = exported_types(&scrape);
    let docs = documented();
    assert!(
        types.len() >= 20,
        "a scrape after traffic shows most metrics: {types:?}"
    );
    assert_every_metric_has_help(&scrape);
    for (name, kind) in &types {
        let (documented_kind, _) = docs
            .get(name)
            .unwrap_or_else(|| panic!("/metrics exports {name}, which docs/metrics.md lacks"));
        assert_eq!(
            kind, documented_kind,
            "{name} is a {kind}, documented as a {documented_kind}"
        );
        assert!(
            names::ALL.contains(&name.as_str()),
            "{name} is not in sluice_metrics::names"
        );
    }
}

/// The label values of `label` over every sample of `name`.
fn label_values(scrape: &str, name: &str, label: &str) -> BTreeSet<String> {
    let prefix = format!("{name}{{");
    let key = format!("{label}=\"");
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|labels| {
            let value = labels.split(&key).nth(1)?;
            Some(value.split('"').next()?.to_owned())
        })
        .collect()
}

/// Kafka's API names, as the `api` label spells them.
fn api_names() -> BTreeSet<String> {
    (0..200i16)
        .filter_map(|key| ApiKey::try_from(key).ok())
        .map(|api| format!("{api:?}"))
        .collect()
}

/// The metrics operators size and debug with, against the real 1-node
/// cluster (`single`): client and broker latency histograms (with buckets,
/// by api, and by broker, every label from a bounded set), connect failures
/// by broker, the build, and the process's CPU, memory and file
/// descriptors, each with its `# HELP` line.
#[test]
fn latency_connect_failures_build_and_process_metrics_after_traffic() {
    let cluster = Cluster::get(SINGLE);
    let listen = format!("127.0.0.1:{}", free_port());
    let dead_listen = format!("127.0.0.1:{}", free_port());
    let dead = format!("127.0.0.1:{}", free_port());
    let contact_points = fronted::contact_points(&cluster, "PLAINTEXT");
    let topology = format!(
        "sources:\n{}{}",
        source(
            "cluster",
            &listen,
            &cluster_sink("cluster-sink", &listen, &contact_points)
        ),
        source(
            "dead",
            &dead_listen,
            &format!(
                "        - KafkaSinkSingle:\n            name: \"dead-sink\"\n            destination_address: \"{dead}\"\n            connect_timeout_ms: 3000\n"
            )
        ),
    );
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen, &dead_listen]);
    let topic = unique("latency");
    cluster.create_topic(&topic, 1, 1);
    let records: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    let got = clients::java_round_trip(&cluster, &listen, &topic, &records, None);
    assert_eq!(got.len(), 20, "{got:?}");
    // Nothing listens at `dead`: the single sink's connect fails, and the
    // client's connection is closed.
    let mut client = RawClient::connect(&dead_listen);
    client.send(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    assert!(
        client.closed_by_peer_within(Duration::from_secs(20)),
        "sluice closes a client whose broker cannot be reached"
    );

    let client_took = names::CLIENT_REQUEST_DURATION;
    let broker_took = names::BROKER_REQUEST_DURATION;
    let count = |name: &str| format!("{name}_count");
    // Every answer written is timed once: the histogram's count per api is
    // the responses counter (waited for: the last writes may be in flight).
    let scrape = wait::until(
        Duration::from_secs(30),
        "every answer timed and the connect failure counted",
        || {
            let scrape = sluice.metrics();
            let failures = sum_metric(
                &scrape,
                names::BROKER_CONNECT_FAILURES,
                &[&format!("broker=\"{dead}\""), "kind=\"connect\""],
            );
            let untimed: Vec<String> = label_values(&scrape, names::RESPONSES, "api")
                .into_iter()
                .filter(|api| {
                    let label = format!("api=\"{api}\"");
                    sum_metric(&scrape, names::RESPONSES, &[&label])
                        != sum_metric(&scrape, &count(client_took), &[&label])
                })
                .collect();
            if failures >= 1.0 && untimed.is_empty() {
                Ok(scrape)
            } else {
                Err(format!("{failures} connect failures; untimed: {untimed:?}"))
            }
        },
    );
    let types = exported_types(&scrape);
    for name in [client_took, broker_took] {
        assert_eq!(types.get(name).map(String::as_str), Some("histogram"));
    }
    for api in [
        "ApiVersions",
        "Metadata",
        "Produce",
        "Fetch",
        "FindCoordinator",
    ] {
        let label = format!("api=\"{api}\"");
        let timed = sum_metric(&scrape, &count(client_took), &[&label]);
        assert!(timed >= 1.0, "{api} answers timed: {timed}");
        let all = sum_metric(
            &scrape,
            &format!("{client_took}_bucket"),
            &[&label, "le=\"+Inf\""],
        );
        assert_eq!(all, timed, "{api}: the +Inf bucket holds every answer");
    }
    let at_broker: Vec<&str> = scrape
        .lines()
        .filter(|l| l.starts_with(&count(broker_took)))
        .collect();
    // Sluice answers ApiVersions itself, from what brokers support.
    for api in ["Metadata", "Produce", "Fetch", "FindCoordinator"] {
        let labels = [&format!("api=\"{api}\"") as &str, "broker=\"1\""];
        let timed = sum_metric(&scrape, &count(broker_took), &labels);
        assert!(timed >= 1.0, "{api} timed at broker 1: {at_broker:#?}");
    }
    let sum = sum_metric(&scrape, &format!("{client_took}_sum"), &["api=\"Produce\""]);
    assert!(sum > 0.0, "Produce answers took time: {sum}");

    // Bounded labels: Kafka's API names; the broker's id or its contact point.
    let known = api_names();
    for name in [client_took, broker_took] {
        let apis = label_values(&scrape, &format!("{name}_count"), "api");
        assert!(apis.is_subset(&known), "{name}: {apis:?}");
    }
    let brokers = label_values(&scrape, &count(broker_took), "broker");
    let allowed: BTreeSet<String> = ["1".to_owned(), cluster.bootstrap("PLAINTEXT")].into();
    assert!(
        brokers.is_subset(&allowed),
        "{brokers:?} within {allowed:?}"
    );

    let commits = label_values(&scrape, names::BUILD_INFO, "commit");
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert!(commits.iter().all(|c| !c.is_empty()), "{commits:?}");
    assert_eq!(sum_metric(&scrape, names::BUILD_INFO, &[]), 1.0);

    let value = |name: &str| sum_metric(&scrape, name, &[]);
    assert!(value(names::PROCESS_CPU_SECONDS) > 0.0);
    let rss = value(names::PROCESS_RESIDENT_MEMORY);
    let from_proc = sluice.rss_bytes().expect("the process runs") as f64;
    assert!(
        rss > 1_048_576.0 && rss < from_proc * 2.0 && rss > from_proc / 2.0,
        "resident {rss} bytes, /proc says {from_proc}"
    );
    // Two listeners and the observability endpoint at least.
    let open = value(names::PROCESS_OPEN_FDS);
    assert!(open >= 3.0, "{open} open fds");
    assert!(value(names::PROCESS_MAX_FDS) >= open);
    assert_every_metric_has_help(&scrape);
}
