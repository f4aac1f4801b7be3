//! Runs the built `sluice` binary: configuration errors, `validate-config`,
//! and signal handling.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sluice-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A topology and a config file (no metrics endpoint) in this directory.
    fn files(&self, topology: &str) -> (PathBuf, PathBuf) {
        (
            self.write("topology.yaml", topology),
            self.write("config.yaml", "main_log_level: \"info\"\n"),
        )
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sluice(topology: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("--topology-file")
        .arg(topology)
        .arg("--config-file")
        .arg(config)
        .env_remove("RUST_LOG");
    cmd
}

/// Runs `cmd` to completion, failing the test if it takes longer than `TIMEOUT`.
fn run(mut cmd: Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(TIMEOUT) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            signal(pid, "KILL");
            panic!("sluice did not exit within {TIMEOUT:?}");
        }
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn single_source(listen_addr: &str, sink: &str) -> String {
    format!(
        "sources:\n  - Kafka:\n      name: \"kafka\"\n      listen_addr: \"{listen_addr}\"\n      \
         chain:\n        - KafkaSinkSingle:\n{sink}"
    )
}

#[test]
fn unknown_field_fails_naming_field_and_file() {
    let dir = Scratch::new("unknown-field");
    let (topology, config) = dir.files(&single_source(
        "127.0.0.1:0",
        "            destination_portt: 9092\n            connect_timeout_ms: 3000\n",
    ));
    for validate in [false, true] {
        let mut cmd = sluice(&topology, &config);
        if validate {
            cmd.arg("validate-config");
        }
        let out = run(cmd);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "validate={validate}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(
            stderr.contains("sources[0].Kafka.chain[0].KafkaSinkSingle.destination_portt"),
            "{stderr}"
        );
        assert!(stderr.contains(&topology.display().to_string()), "{stderr}");
        assert!(!text(&out.stdout).contains("listening"), "bound a listener");
    }
}

#[test]
fn validate_config_accepts_the_default_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.current_dir(&root).arg("validate-config");
    let out = run(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "configuration OK");
}

#[test]
fn bad_listen_address_fails_before_binding() {
    let dir = Scratch::new("bad-listen");
    let sink = "            destination_port: 9092\n            connect_timeout_ms: 3000\n";
    let good = single_source("127.0.0.1:0", sink);
    let bad = single_source("127.0.0.1:notaport", sink)
        .replace("sources:\n", "")
        .replace("name: \"kafka\"", "name: \"second\"");
    let (topology, config) = dir.files(&format!("{good}{bad}"));
    let out = run(sluice(&topology, &config));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("sources[1].Kafka.listen_addr"), "{stderr}");
    assert!(stderr.contains("notaport"), "{stderr}");
    assert!(stderr.contains(&topology.display().to_string()), "{stderr}");
    // The first, valid source was not bound either.
    assert!(!text(&out.stdout).contains("listening"), "bound a listener");
}

#[test]
fn a_json_log_stream_stays_json_when_sluice_fails() {
    // The listen address is taken: binding fails after logging started.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = Scratch::new("json-failure");
    let (topology, config) = dir.files(&single_source(
        &addr,
        "            destination_port: 9092\n            connect_timeout_ms: 3000\n",
    ));
    let mut cmd = sluice(&topology, &config);
    cmd.arg("--log-format").arg("json");
    let out = run(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    for line in &lines {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "a line that is not JSON: {line}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"ERROR\"") && l.contains(&addr)),
        "the failure is logged as JSON, naming the address: {lines:?}"
    );
}

/// Every line on stdout and stderr, each parsed as JSON; fails on a line
/// that is not.
fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    stdout
        .lines()
        .chain(stderr.lines())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {line}"))
        })
        .collect()
}

#[test]
fn a_bad_config_under_json_logs_is_reported_as_a_json_line() {
    let dir = Scratch::new("json-bad-config");
    let sink = "            destination_port: 9092\n            connect_timeout_ms: 3000\n";
    let good_topology = dir.write("good.yaml", &single_source("127.0.0.1:0", sink));
    let bad_topology = dir.write(
        "bad.yaml",
        &single_source(
            "127.0.0.1:0",
            &sink.replace("destination_port", "destination_portt"),
        ),
    );
    let good_config = dir.write("config.yaml", "main_log_level: \"info\"\n");
    let bad_config = dir.write("bad-config.yaml", "main_log_level: \"warning\"\n");
    let cases = [
        (
            &bad_topology,
            &good_config,
            "sources[0].Kafka.chain[0].KafkaSinkSingle.destination_portt",
        ),
        (&good_topology, &bad_config, "main_log_level"),
    ];
    for (topology, config, field) in cases {
        let file = if topology == &bad_topology {
            topology
        } else {
            config
        };
        for validate in [false, true] {
            let mut cmd = sluice(topology, config);
            cmd.arg("--log-format").arg("json");
            if validate {
                cmd.arg("validate-config");
            }
            let out = run(cmd);
            assert_eq!(out.status.code(), Some(1), "{field}, validate={validate}");
            let lines = json_lines(&out);
            assert_eq!(lines.len(), 1, "one line, the error: {lines:?}");
            let line = &lines[0];
            assert_eq!(line["level"], "ERROR", "{line}");
            let message = line["fields"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(field), "names the field: {line}");
            assert!(
                message.contains(&file.display().to_string()),
                "names the file: {line}"
            );
        }
    }
    // The verdict on good files is a JSON line too.
    let mut cmd = sluice(&good_topology, &good_config);
    cmd.arg("--log-format").arg("json").arg("validate-config");
    let out = run(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["level"], "INFO", "{}", lines[0]);
    assert_eq!(lines[0]["fields"]["message"], "configuration OK");
}

#[test]
fn missing_config_file_is_named() {
    let dir = Scratch::new("missing-config");
    let (topology, _) = dir.files(&single_source(
        "127.0.0.1:0",
        "            destination_port: 9092\n            connect_timeout_ms: 3000\n",
    ));
    let missing = dir.0.join("nope.yaml");
    let out = run(sluice(&topology, &missing));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

/// A running `sluice`, killed on drop, with its stdout lines on a channel.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .arg("--log-format")
            .arg("json")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The first log line containing every one of `needles`.
    fn wait_for_line(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
                Ok(_) => {}
                Err(e) => panic!("no log line with {needles:?} within {TIMEOUT:?}: {e}"),
            }
        }
    }

    /// The address of the listener, from its `listening` log line.
    fn listen_addr(&self) -> String {
        let line = self.wait_for_line(&["\"listening\"", "\"addr\":\""]);
        let rest = &line[line.find("\"addr\":\"").unwrap() + 8..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    fn signal(&self, name: &str) {
        signal(self.child.id(), name);
    }

    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "sluice still running after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let dir = Scratch::new("sigterm");
    let (topology, config) = dir.files(&single_source(
        "127.0.0.1:0",
        "            destination_address: \"127.0.0.1:9\"\n            connect_timeout_ms: 3000\n",
    ));
    let mut sluice = Running::start(sluice(&topology, &config));
    let addr = sluice.listen_addr();
    TcpStream::connect(&addr).unwrap();
    sluice.wait_for_line(&["sluice started"]);
    sluice.signal("TERM");
    let status = sluice.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{status}");
}

/// A one-node `KafkaSinkCluster` topology; its contact point has no broker,
/// which an idle node never notices.
fn cluster_source(listen_addr: &str) -> String {
    format!(
        "sources:\n  - Kafka:\n      name: \"kafka\"\n      listen_addr: \"{listen_addr}\"\n      \
         chain:\n        - KafkaSinkCluster:\n            shotover_nodes:\n              \
         - address_for_clients: \"{listen_addr}\"\n                \
         address_for_peers: \"{listen_addr}\"\n                rack: \"rack0\"\n                \
         broker_id: 0\n            local_shotover_broker_id: 0\n            \
         first_contact_points: [\"127.0.0.1:9\"]\n            connect_timeout_ms: 3000\n"
    )
}

/// Stops an idle node with SIGTERM `times` times; every stop must exit 0.
/// An idle source returns as soon as it stops accepting, which can come
/// before the drain begins: that is a normal stop, not a failure.
fn idle_stops_exit_zero(tag: &str, topology: impl Fn(&str) -> String, times: usize) {
    let dir = Scratch::new(tag);
    for round in 1..=times {
        let addr = format!("127.0.0.1:{}", free_port());
        let (topology, config) = dir.files(&topology(&addr));
        let mut sluice = Running::start(sluice(&topology, &config));
        sluice.wait_for_line(&["sluice started"]);
        sluice.signal("TERM");
        let status = sluice.wait(Duration::from_secs(10));
        if status.code() != Some(0) {
            // The log lines up to the exit, for the failure message.
            let log: Vec<String> = sluice.lines.try_iter().collect();
            panic!(
                "stop {round} of {times} exited {status}; log:\n{}",
                log.join("\n")
            );
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

#[test]
fn sigterm_to_an_idle_cluster_node_exits_zero_every_time() {
    idle_stops_exit_zero("idle-cluster", cluster_source, 20);
}

#[test]
fn sigterm_to_an_idle_single_node_exits_zero_every_time() {
    let single = |addr: &str| {
        single_source(
            addr,
            "            destination_address: \"127.0.0.1:9\"\n            connect_timeout_ms: 3000\n",
        )
    };
    idle_stops_exit_zero("idle-single", single, 20);
}

/// ApiVersions v0 with correlation id 1 and a null client id.
const API_VERSIONS_V0: [u8; 14] = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];

#[test]
fn second_signal_exits_without_draining() {
    // A "broker" that accepts and reads but never answers, so that the
    // request stays in flight and the drain cannot finish by itself.
    let broker = TcpListener::bind("127.0.0.1:0").unwrap();
    let broker_addr = broker.local_addr().unwrap();
    let dir = Scratch::new("second-signal");
    let (topology, config) = dir.files(&single_source(
        "127.0.0.1:0",
        &format!(
            "            destination_address: \"{broker_addr}\"\n            \
             connect_timeout_ms: 3000\n"
        ),
    ));
    let mut cmd = sluice(&topology, &config);
    cmd.arg("--drain-timeout-secs").arg("120");
    let mut sluice = Running::start(cmd);
    let addr = sluice.listen_addr();

    let mut client = TcpStream::connect(&addr).unwrap();
    client.write_all(&API_VERSIONS_V0).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut conn, _) = broker.accept().unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).unwrap();
        tx.send(conn).unwrap();
    });
    let _held = rx
        .recv_timeout(TIMEOUT)
        .expect("the request did not reach the broker");

    sluice.signal("TERM");
    sluice.wait_for_line(&["shutting down"]);
    assert!(
        sluice.child.try_wait().unwrap().is_none(),
        "exited before draining"
    );
    sluice.signal("INT");
    let status = sluice.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{status}");
}

#[test]
fn validate_config_reads_tls_files() {
    let dir = Scratch::new("bad-pem");
    let cert = dir.write("server.pem", "not a certificate\n");
    let key = dir.write("server-key.pem", "not a key\n");
    let topology = format!(
        "sources:\n  - Kafka:\n      name: \"kafka\"\n      listen_addr: \"127.0.0.1:0\"\n      \
         tls:\n        certificate_path: \"{}\"\n        private_key_path: \"{}\"\n      \
         chain:\n        - KafkaSinkSingle:\n            destination_port: 9092\n            \
         connect_timeout_ms: 3000\n",
        cert.display(),
        key.display()
    );
    let (topology, config) = dir.files(&topology);
    let mut cmd = sluice(&topology, &config);
    cmd.arg("validate-config");
    let out = run(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("sources[0].Kafka.tls"), "{stderr}");
    assert!(stderr.contains(&cert.display().to_string()), "{stderr}");
}

#[test]
fn validate_config_checks_the_memory_bound_fields() {
    let dir = Scratch::new("memory-bounds");
    let sink = "            destination_port: 9092\n            connect_timeout_ms: 3000\n";
    let with = |fields: &str| {
        single_source("127.0.0.1:0", sink)
            .replace("      chain:\n", &format!("{fields}      chain:\n"))
    };
    let good = with(
        "      write_timeout_secs: 30\n      max_unauthenticated_frame_bytes: 524288\n      \
         authentication_timeout_secs: 10\n      unauthenticated_connection_limit: 128\n",
    );
    let (topology, config) = dir.files(&good);
    let mut cmd = sluice(&topology, &config);
    cmd.arg("validate-config");
    let out = run(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let bad = with("      max_unauthenticated_frame_bytes: 200000000\n");
    let (topology, config) = dir.files(&bad);
    let mut cmd = sluice(&topology, &config);
    cmd.arg("validate-config");
    let out = run(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("sources[0].Kafka.max_unauthenticated_frame_bytes")
            && stderr.contains("out of range"),
        "{stderr}"
    );
}

#[test]
fn version_names_the_commit() {
    let out = run({
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--version");
        cmd
    });
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let expected = format!("sluice {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(stdout.starts_with(&expected), "{stdout}");
    let commit = stdout[expected.len()..].trim_end().trim_end_matches(')');
    assert!(
        commit == "unknown" || commit.chars().take(12).all(|c| c.is_ascii_hexdigit()),
        "a commit id or `unknown`: {stdout}"
    );
}

#[test]
fn local_shotover_broker_id_picks_a_listed_node() {
    let dir = Scratch::new("local-node");
    let (topology, config) = dir.files(&cluster_source("127.0.0.1:9192"));
    let check = |id: &str| {
        let mut cmd = sluice(&topology, &config);
        cmd.args(["validate-config", "--local-shotover-broker-id", id]);
        run(cmd)
    };
    let out = check("0");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = check("7");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--local-shotover-broker-id 7 is not the broker_id of any entry"),
        "{stderr}"
    );
    assert!(stderr.contains(&topology.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("sources[0].Kafka.chain[0].KafkaSinkCluster.shotover_nodes"),
        "{stderr}"
    );
}
