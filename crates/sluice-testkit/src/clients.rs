//! Real Kafka clients: Kafka's own Java tools and librdkafka (Python
//! `confluent-kafka`), each run as a process with a bounded wait; and the
//! round trips tests repeat (console producer then consumer, with keyed
//! records or a client properties file; `produce_consume.py`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cluster::Cluster;

pub use crate::process::{ClientOutput, run};

/// A command running one of Kafka's Java tools (`class`) with the cluster's
/// jars and JVM options ([`Cluster::jvm`]).
pub fn java(cluster: &Cluster, class: &str, args: &[&str]) -> Command {
    let mut command = jvm(cluster);
    command.arg(class).args(args);
    command
}

/// `java` with the options of [`java`], up to the main class.
fn jvm(cluster: &Cluster) -> Command {
    cluster.jvm(&[])
}

/// A command running the single-file Java program `source` in
/// `tests/clients/java` (the JDK compiles it at start) with the JVM
/// options and jars of [`java`].
pub fn java_program(cluster: &Cluster, source: &str, args: &[&str]) -> Command {
    let path = crate::repo_root().join("tests/clients/java").join(source);
    assert!(path.exists(), "missing Java program {}", path.display());
    let mut command = jvm(cluster);
    command.arg(path).args(args);
    command
}

/// [`java_program`] with Kafka Streams on the classpath too: the jars of
/// `scripts/kafka/fetch-streams.sh` for the cluster's Kafka version, fetched
/// from Maven Central on first use (bounded by 10 minutes).
pub fn java_streams_program(cluster: &Cluster, source: &str, args: &[&str]) -> Command {
    let path = crate::repo_root().join("tests/clients/java").join(source);
    assert!(path.exists(), "missing Java program {}", path.display());
    let fetch = crate::repo_root().join("scripts/kafka/fetch-streams.sh");
    let mut command = Command::new(&fetch);
    command.args(["--kafka-version", cluster.kafka_version()]);
    let out = run(command, None, Duration::from_secs(600), "fetch-streams.sh");
    out.assert_success("scripts/kafka/fetch-streams.sh");
    let libs = out
        .stdout
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut command = cluster.jvm(&[Path::new(&libs)]);
    command.arg(path).args(args);
    command
}

/// Kafka's console producer class.
pub(crate) const CONSOLE_PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
/// Kafka's console consumer class.
pub const CONSOLE_CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
/// Kafka's topics tool class.
pub const TOPIC_COMMAND: &str = "org.apache.kafka.tools.TopicCommand";
/// Kafka's leader election tool.
pub(crate) const LEADER_ELECTION_COMMAND: &str = "org.apache.kafka.tools.LeaderElectionCommand";

/// Runs Java tool `class` with `--bootstrap-server bootstrap` and `args`
/// (bounded by 90 s), successful or not.
pub fn tool_at(cluster: &Cluster, class: &str, bootstrap: &str, args: &[&str]) -> ClientOutput {
    let mut all = vec!["--bootstrap-server", bootstrap];
    all.extend_from_slice(args);
    cluster.tool(class, &all, Duration::from_secs(90))
}

/// Like [`tool_at`], and panics unless it succeeded; returns stdout.
pub fn tool_ok(cluster: &Cluster, class: &str, bootstrap: &str, args: &[&str]) -> String {
    let out = tool_at(cluster, class, bootstrap, args);
    out.assert_success(&format!("{class} {args:?}"));
    out.stdout
}

/// Console producer arguments that read each line as `key:value`.
pub const KEYED: [&str; 4] = [
    "--reader-property",
    "parse.key=true",
    "--reader-property",
    "key.separator=:",
];

/// `key:value` lines, for a console producer with [`KEYED`], so that the
/// records spread over every partition.
pub fn keyed_records(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}:{prefix}-{i}")).collect()
}

/// The values of `key:value` lines (a line without `:` is its own value),
/// sorted: what a console consumer prints of them, in any order.
pub fn sorted_values(lines: &[String]) -> Vec<String> {
    let mut values: Vec<String> = lines
        .iter()
        .map(|l| l.split_once(':').map_or(l.as_str(), |(_, v)| v).to_owned())
        .collect();
    values.sort();
    values
}

/// Produces `lines` with the Java console producer, then reads as many
/// records of `topic` from the beginning with the console consumer, both
/// with the client properties file `config` if any; returns what was read.
pub fn java_round_trip(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    lines: &[String],
    config: Option<&str>,
) -> Vec<String> {
    let with = |flag| config.map(|c| vec![flag, c]).unwrap_or_default();
    java_produce(cluster, bootstrap, topic, lines, &with("--command-config"));
    let consumer = with("--command-config");
    java_consume(cluster, bootstrap, topic, lines.len(), &consumer)
}

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
        "--command-property",
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
pub(crate) fn python() -> PathBuf {
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

/// Runs `produce_consume.py` through `bootstrap`: `count` records produced
/// to `topic` and consumed back, with `extra` arguments (`-X key=value`
/// settings, `--skip-produce`, `--group`, ...). Panics (naming `what`)
/// unless it succeeded and reports `count` records consumed and, unless it
/// skipped producing, delivered. Returns its output.
pub fn librdkafka_round_trip(
    bootstrap: &str,
    topic: &str,
    count: usize,
    extra: &[&str],
    what: &str,
) -> ClientOutput {
    let count_text = count.to_string();
    let mut args = vec![
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--count",
        &count_text,
    ];
    args.extend_from_slice(extra);
    let out = run_librdkafka("produce_consume.py", &args, Duration::from_secs(120));
    out.assert_success(what);
    let expected = if args.contains(&"--skip-produce") {
        format!("\"consumed\": {count}")
    } else {
        format!("\"delivered\": {count}, \"consumed\": {count}")
    };
    assert!(
        out.stdout.contains(&expected),
        "{what}: expected {expected}\n{}",
        out.stdout
    );
    out
}

/// `-X` arguments of a librdkafka script for a SASL_PLAINTEXT login.
pub fn sasl_settings(mechanism: &str, user: &str, password: &str) -> Vec<String> {
    [
        "security.protocol=sasl_plaintext".to_owned(),
        format!("sasl.mechanism={mechanism}"),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ]
    .into_iter()
    .flat_map(|setting| ["-X".to_owned(), setting])
    .collect()
}
