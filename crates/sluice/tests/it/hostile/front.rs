//! The shared Sluice of the hostile-client suite, what the cases check with
//! (close lines, bystanders, the RSS sampler) and the data they hoard.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, fetch_request::FetchPartition, fetch_request::FetchTopic,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::Cluster;
use sluice_testkit::delivery::{self, ToolProcess};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{clients, fronted, requests, unique, wait};

/// `write_timeout_secs` of the plaintext and TLS sources.
pub(crate) const WRITE_TIMEOUT_SECS: u64 = 3;
/// `timeout` (idle) of the slowloris source.
pub(crate) const IDLE_TIMEOUT_SECS: u64 = 3;
/// `connection_limit` (hard) of the plaintext source.
pub(crate) const CONNECTION_LIMIT: usize = 500;
/// Connections the flood opens at once.
pub(crate) const FLOOD: usize = 2000;
/// Connections of the shared test that hoard (pipeline fetches and read
/// little or nothing) at the same time, at most.
pub(crate) const HOARDERS: u64 = 4;
/// The default `connection_memory_budget_bytes`.
pub(crate) const CONNECTION_BUDGET_BYTES: u64 = 64 << 20;
/// What Sluice may hold beyond its budgets: code, runtime, idle
/// connections, and buffers the budgets do not count (see
/// docs/reliability.md).
pub(crate) const RSS_SLACK_BYTES: u64 = 64 << 20;
/// The shared test's bound: its hoarders hold at most their connection
/// budgets (the process budget, 1 GiB by default, is far above that).
pub(crate) const RSS_BOUND_BYTES: u64 = HOARDERS * CONNECTION_BUDGET_BYTES + RSS_SLACK_BYTES;
/// `memory_budget_bytes` of the budget test.
pub(crate) const TIGHT_BUDGET_BYTES: u64 = 256 << 20;

pub(crate) const MIB: usize = 1 << 20;

pub(crate) fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

// ---------------------------------------------------------------- the front

/// One source of the shared Sluice: `name` on `listen`, a KafkaSinkCluster
/// in front of trio's PLAINTEXT listeners, with the source `fields` (YAML
/// lines). The topology's `sources:` line is left out.
pub(crate) fn source(cluster: &Cluster, name: &str, listen: &str, fields: &[String]) -> String {
    let contact_points = fronted::contact_points(cluster, "PLAINTEXT");
    let yaml = fronted::sink_topology(
        &[listen.to_owned()],
        &["rack0"],
        0,
        &contact_points,
        60,
        "            check_shotover_peers_delay_ms: 1000\n",
    );
    let lines: String = fields.iter().map(|f| format!("      {f}\n")).collect();
    yaml.replacen("name: \"kafka\"", &format!("name: \"{name}\""), 1)
        .replacen("      chain:\n", &format!("{lines}      chain:\n"), 1)
        .strip_prefix("sources:\n")
        .expect("a topology starts with its sources")
        .to_owned()
}

/// The shared Sluice, its three listeners, and what the cases found.
pub(crate) struct Front {
    pub sluice: SluiceProcess,
    /// `kafka`: plaintext, write deadline, hard connection limit.
    pub plain: String,
    /// `kafka-tls`: TLS, write deadline.
    pub tls: String,
    /// `kafka-idle`: plaintext, idle timeout.
    pub idle: String,
    /// Expectations a case found unmet: reported together at the end, after
    /// every other case and the well-behaved clients were checked.
    pub findings: Mutex<Vec<String>>,
}

impl Front {
    /// Starts the shared Sluice; with `budgets` (process, connection), the
    /// topology sets `memory_budget_bytes` and the plaintext source's
    /// `connection_memory_budget_bytes` (fields of the budget work).
    pub(crate) fn start(cluster: &Cluster, budgets: Option<(u64, u64)>) -> Self {
        let addrs = fronted::listen_addrs(3);
        let mut plain = vec![
            format!("write_timeout_secs: {WRITE_TIMEOUT_SECS}"),
            format!("connection_limit: {CONNECTION_LIMIT}"),
            "hard_connection_limit: true".to_owned(),
        ];
        let mut top = String::new();
        if let Some((process, connection)) = budgets {
            plain.push(format!("connection_memory_budget_bytes: {connection}"));
            top = format!("memory_budget_bytes: {process}\n");
        }
        let write_timeout = format!("write_timeout_secs: {WRITE_TIMEOUT_SECS}");
        let tls = format!(
            "tls:\n        certificate_path: \"{}\"\n        private_key_path: \"{}\"",
            cluster.cert("sluice-server.pem"),
            cluster.cert("sluice-server-key.pem"),
        );
        let topology = format!(
            "{top}sources:\n{}{}{}",
            source(cluster, "kafka", &addrs[0], &plain),
            source(cluster, "kafka-tls", &addrs[1], &[write_timeout, tls]),
            source(
                cluster,
                "kafka-idle",
                &addrs[2],
                &[format!("timeout: {IDLE_TIMEOUT_SECS}")],
            ),
        );
        let waits: Vec<&str> = addrs.iter().map(String::as_str).collect();
        let sluice = SluiceProcess::start(sluice_bin(), &topology, &waits);
        Self {
            sluice,
            plain: addrs[0].clone(),
            tls: addrs[1].clone(),
            idle: addrs[2].clone(),
            findings: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn log(&self) -> String {
        self.sluice.log()
    }

    pub(crate) fn rss(&self) -> u64 {
        self.sluice.rss_bytes().expect("sluice is running")
    }

    /// Records an unmet expectation of `case`.
    pub(crate) fn found(&self, case: &str, what: String) {
        eprintln!("FINDING {case}: {what}");
        let mut findings = self.findings.lock().unwrap_or_else(|p| p.into_inner());
        findings.push(format!("{case}: {what}"));
    }

    /// Checks that the offender at `addr` was closed with exactly one close
    /// line (see [`close_lines`]) and that it holds `reason`; returns it.
    pub(crate) fn expect_close_line(&self, case: &str, addr: &str, reason: &str) -> Option<String> {
        let seen = wait::within(Duration::from_secs(20), || {
            let lines = close_lines(&self.log(), addr);
            if lines.is_empty() {
                Err("no close line".to_owned())
            } else {
                Ok(lines)
            }
        });
        match seen {
            Err(_) => {
                self.found(case, format!("no log line closes {addr} within 20 s"));
                None
            }
            Ok(lines) if lines.len() == 1 && lines[0].contains(reason) => lines.into_iter().next(),
            Ok(lines) => {
                self.found(
                    case,
                    format!("expected one close line with {reason:?}, got {lines:#?}"),
                );
                None
            }
        }
    }

    /// Checks that no close line names `addr`.
    pub(crate) fn expect_not_closed(&self, case: &str, addr: &str) {
        let lines = close_lines(&self.log(), addr);
        if !lines.is_empty() {
            self.found(case, format!("{addr} was closed: {lines:#?}"));
        }
    }
}

/// The lines of `log` about the close of the connection from `addr`: the
/// connection's report (target `sluice_source::connection::close`) and any
/// line at INFO or above naming it (`client <addr> (conn <id>)` in its text,
/// or its client span `client{... client=<addr>}`, which everything logged
/// for that connection carries). Debug details (a fetch clamped, a frame cut
/// short) are not counted, nor is the stall check's warning
/// (`sluice_sink_cluster::sink::stalled`): it is about a broker that went
/// quiet for a while, which the suite's load on trio's brokers (the
/// hoarders of both tests) can cause, and says nothing about the client.
pub(crate) fn close_lines(log: &str, addr: &str) -> Vec<String> {
    let named = format!("client {addr} (conn ");
    let in_span = format!("client={addr}}}");
    log.lines()
        .filter(|l| l.contains(&named) || l.contains(&in_span))
        .filter(|l| !l.contains("sluice_sink_cluster::sink::stalled:"))
        .filter(|l| {
            l.contains("sluice_source::connection::close:")
                || [" INFO ", " WARN ", " ERROR "]
                    .iter()
                    .any(|lvl| l.contains(lvl))
        })
        .map(str::to_owned)
        .collect()
}

/// A connection to the same source opened before a case: it must be
/// answered after it.
pub(crate) struct Bystander(pub RawClient);

impl Bystander {
    pub(crate) fn connect(addr: &str) -> Self {
        let mut client = RawClient::connect(addr);
        api_versions(&mut client);
        Self(client)
    }

    pub(crate) fn assert_served(&mut self, case: &str) {
        let ResponseKind::ApiVersions(answer) = self.0.request(
            ApiKey::ApiVersions,
            3,
            RequestKind::ApiVersions(api_versions_request()),
        ) else {
            panic!("{case}: the bystander got no ApiVersions answer")
        };
        assert_eq!(answer.error_code, 0, "{case}: the bystander is served");
    }
}

pub(crate) fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("hostile"))
        .with_client_software_version(StrBytes::from_static_str("1"))
}

pub(crate) fn api_versions(client: &mut RawClient) {
    let body = RequestKind::ApiVersions(api_versions_request());
    let ResponseKind::ApiVersions(answer) = client.request(ApiKey::ApiVersions, 3, body) else {
        panic!("not an ApiVersions answer")
    };
    assert_eq!(answer.error_code, 0, "ApiVersions answered");
}

/// Connects to the plaintext source, lets `offend` misbehave on the
/// connection, and checks that Sluice closes it with one log line holding
/// `reason`, while a bystander is still served. Returns the line.
pub(crate) fn closes(
    front: &Front,
    case: &str,
    reason: &str,
    offend: impl FnOnce(&mut RawClient),
) -> Option<String> {
    let mut bystander = Bystander::connect(&front.plain);
    let mut offender = RawClient::connect(&front.plain);
    let addr = offender.local_addr();
    offend(&mut offender);
    let closed = offender.closed_by_peer_within(Duration::from_secs(20));
    bystander.assert_served(case);
    if !closed {
        front.found(
            case,
            "Sluice kept the offender's connection open".to_owned(),
        );
        return None;
    }
    front.expect_close_line(case, &addr, reason)
}

/// Like [`closes`] on the TLS source; a new TLS client is served after it.
pub(crate) fn closes_tls(
    front: &Front,
    ca: &str,
    case: &str,
    offend: impl FnOnce(&mut RawClient),
) -> Option<String> {
    let mut offender = RawClient::connect(&front.tls);
    let addr = offender.local_addr();
    offend(&mut offender);
    let closed = offender.closed_by_peer_within(Duration::from_secs(20));
    let probe = clients::run_librdkafka(
        "tls_probe.py",
        &["--addr", &front.tls, "--ca", ca],
        Duration::from_secs(60),
    );
    assert!(
        probe.stdout.contains("\"accepted\": true"),
        "{case}: a TLS client is served afterwards: {}",
        probe.text()
    );
    if !closed {
        front.found(
            case,
            "Sluice kept the offender's connection open".to_owned(),
        );
        return None;
    }
    front.expect_close_line(case, &addr, "tls")
}

// ---------------------------------------------------------------- memory

/// Samples Sluice's RSS every 100 ms in the background; keeps the peak.
pub(crate) struct RssWatch {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: Option<thread::JoinHandle<()>>,
}

impl RssWatch {
    pub(crate) fn start(front: &Front) -> Self {
        let pid = front.sluice.pid().expect("sluice is running");
        let peak = Arc::new(AtomicU64::new(front.rss()));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = rss_of(pid) {
                        peak.fetch_max(rss, Ordering::Relaxed);
                    }
                    // A sampling period, not a synchronisation.
                    thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            peak,
            stop,
            sampler: Some(sampler),
        }
    }

    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Records a finding if the peak so far is over `bound`.
    pub(crate) fn check(&self, front: &Front, when: &str, bound: u64) {
        let peak = self.peak();
        if peak > bound {
            front.found(
                when,
                format!(
                    "Sluice's RSS peaked at {} MiB, over the bound of {} MiB",
                    peak >> 20,
                    bound >> 20
                ),
            );
        }
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
    }
}

pub(crate) fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

// ---------------------------------------------------------------- data

/// A topic of 3 partitions (one led by each broker) holding `per_partition`
/// MiB in each, in records of 512 KiB, produced through `addr`.
pub(crate) fn hoard_topic(cluster: &Cluster, addr: &str, per_partition: usize) -> String {
    let topic = unique("hoard");
    fronted::create_spread_topic(cluster, &topic, 3);
    let mut client = RawClient::connect(addr);
    let value = "h".repeat(MIB / 2);
    for _ in 0..per_partition * 2 {
        let body = requests::produce(&topic, &[0, 1, 2], &value);
        let answer = client.request(ApiKey::Produce, 9, body);
        let errors = requests::partition_errors(&answer);
        assert_eq!(errors, [(0, 0), (1, 0), (2, 0)], "hoard produce");
    }
    topic
}

/// A sessionless Fetch of every partition of `topic` from offset 0, up to
/// 50 MiB (as the bench's pipelining client asks).
pub(crate) fn fetch_all(topic: &str) -> RequestKind {
    let partitions = (0..3)
        .map(|p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(50 * MIB as i32)
        })
        .collect();
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(50 * MIB as i32)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(StrBytes::from_string(topic.to_owned()).into())
                    .with_partitions(partitions),
            ]),
    )
}

/// Sends `n` copies of [`fetch_all`] without reading.
pub(crate) fn pipeline_fetches(client: &mut RawClient, topic: &str, n: usize) {
    for _ in 0..n {
        client.send(ApiKey::Fetch, 12, fetch_all(topic));
    }
}

pub(crate) fn wait_more_acks(producer: &mut ToolProcess, more: usize) {
    let now = delivery::wait_acked(producer, 0, Duration::from_secs(5));
    delivery::wait_acked(producer, now + more, Duration::from_secs(60));
}
