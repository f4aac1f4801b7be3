//! Real Kafka clients: Kafka's own Java tools and librdkafka (Python
//! `confluent-kafka`), each run as a process with a bounded wait.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

use crate::cluster::Cluster;

/// Output of a client process.
#[derive(Debug)]
pub struct ClientOutput {
    /// Exit code (None if killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl ClientOutput {
    /// Panics with both streams unless the process succeeded.
    pub fn assert_success(&self, what: &str) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Runs `command` with optional stdin, killing it after `timeout`.
pub fn run(
    mut command: Command,
    stdin: Option<&str>,
    timeout: Duration,
    what: &str,
) -> ClientOutput {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    // Drain the pipes on threads so a chatty client cannot block on a full pipe.
    let out = child.stdout.take().expect("stdout pipe");
    let err = child.stderr.take().expect("stderr pipe");
    let out = std::thread::spawn(move || read_all(out));
    let err = std::thread::spawn(move || read_all(err));
    let status = match child.wait_timeout(timeout).expect("wait for client") {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let (stdout, stderr) = (
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            );
            panic!(
                "{what} did not finish within {timeout:?}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            );
        }
    };
    ClientOutput {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

fn read_all(mut r: impl std::io::Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// A command running one of Kafka's Java tools (`class`) with the cluster's jars.
///
/// The JVM only uses its quick (C1) compiler and the serial collector: the
/// tools are short-lived, and that halves the CPU each one spends starting
/// on a busy 2-core machine. Measure peak client throughput elsewhere.
pub fn java(cluster: &Cluster, class: &str, args: &[&str]) -> Command {
    let mut command = Command::new("java");
    command
        .arg("-Xmx768m")
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-XX:+UseSerialGC")
        .arg("-cp")
        .arg(format!("{}/*", cluster.libs_dir().display()))
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            cluster.tools_log4j_config().display()
        ))
        .arg(class)
        .args(args);
    command
}

/// Kafka's console producer class.
pub const CONSOLE_PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
/// Kafka's console consumer class.
pub const CONSOLE_CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
/// Kafka's topics tool class.
pub const TOPIC_COMMAND: &str = "org.apache.kafka.tools.TopicCommand";

/// Produces `lines` with the Java console producer (acks=all), then returns.
pub fn java_produce(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    lines: &[String],
    extra: &[&str],
) {
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--producer-property",
        "acks=all",
    ];
    args.extend_from_slice(extra);
    let input = lines.join("\n") + "\n";
    run(
        java(cluster, CONSOLE_PRODUCER, &args),
        Some(&input),
        Duration::from_secs(120),
        "java console producer",
    )
    .assert_success("java console producer");
}

/// Consumes `count` records from the beginning with the Java console consumer.
pub fn java_consume(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    count: usize,
    extra: &[&str],
) -> Vec<String> {
    let count_text = count.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        &count_text,
        "--timeout-ms",
        "60000",
    ];
    args.extend_from_slice(extra);
    let out = run(
        java(cluster, CONSOLE_CONSUMER, &args),
        None,
        Duration::from_secs(120),
        "java console consumer",
    );
    out.assert_success("java console consumer");
    out.stdout.lines().map(str::to_string).collect()
}

/// The Python interpreter with `confluent-kafka` installed (`SLUICE_PYTHON`,
/// set by the test command).
pub fn python() -> PathBuf {
    std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/sluice/venv/bin/python")
        })
}

/// A command running one of the librdkafka client scripts in `tests/clients/python`.
pub fn librdkafka(script: &str, args: &[&str]) -> Command {
    let path: PathBuf = crate::repo_root().join("tests/clients/python").join(script);
    assert!(
        Path::new(&path).exists(),
        "missing client script {}",
        path.display()
    );
    let mut command = Command::new(python());
    command.arg(path).args(args);
    command
}

/// Runs a librdkafka script and returns its output (bounded by `timeout`).
pub fn run_librdkafka(script: &str, args: &[&str], timeout: Duration) -> ClientOutput {
    run(librdkafka(script, args), None, timeout, script)
}
