//! Proof of delivery across broker failures: Kafka's `VerifiableProducer` and
//! `VerifiableConsumer` run in the background while a test breaks the
//! cluster, and their JSON events are compared afterwards.
//!
//! Both tools print one JSON event per line on stdout. The producer reports
//! every acknowledged send (`producer_send_success`: `partition`, `offset`)
//! and every failed one (`producer_send_error`: `exception`, `message`); the
//! consumer reports what each poll returned (`records_consumed`: per
//! partition `minOffset`..=`maxOffset` and `count`). Comparing the acked
//! `(partition, offset)` pairs with the consumed ranges says whether an
//! acknowledged record was lost, without trusting either tool's summary.
//!
//! The tools run with the clients' `NetworkClient` logger at INFO, so their
//! stderr shows each `Node N disconnected.`: a client that only talks to
//! Sluice should see none while brokers fail behind it.
//!
//! While they run, tests wait (bounded, failing fast if a tool exited) until
//! the consumer is assigned its partitions, the producer has so many acks,
//! and the consumer has read every acknowledged record.
//!
//! `tests/clients/python/tail_consumer.py` is a librdkafka consumer that
//! prints the consumer's events in the same format, so the same checks
//! read both ([`start_librdkafka_consumer`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use tempfile::TempDir;
use wait_timeout::ChildExt;

use crate::clients::ClientOutput;
use crate::cluster::Cluster;

/// Kafka's verifiable producer class.
pub(crate) const VERIFIABLE_PRODUCER: &str = "org.apache.kafka.tools.VerifiableProducer";
/// Kafka's verifiable consumer class.
pub(crate) const VERIFIABLE_CONSUMER: &str = "org.apache.kafka.tools.VerifiableConsumer";

/// Producer exceptions a Java client may surface for a broker that failed
/// or moved: retriable, so no data is known lost and a retry may succeed.
pub(crate) const RETRIABLE_PRODUCER_EXCEPTIONS: &[&str] = &[
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException",
    "org.apache.kafka.common.errors.NetworkException",
    "org.apache.kafka.common.errors.TimeoutException",
    "org.apache.kafka.common.errors.NotEnoughReplicasException",
    "org.apache.kafka.common.errors.NotEnoughReplicasAfterAppendException",
    "org.apache.kafka.common.errors.RequestTimeoutException",
    "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
];

/// A Java tool running in the background; its output is collected as it
/// comes. Dropping it kills the process.
pub struct ToolProcess {
    child: Option<Child>,
    what: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
    _dir: Option<TempDir>,
}

impl ToolProcess {
    /// Starts `command` with stdout and stderr collected.
    pub fn spawn(mut command: Command, what: &str) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout pipe");
        let err = child.stderr.take().expect("stderr pipe");
        let readers = vec![collect(out, stdout.clone()), collect(err, stderr.clone())];
        Self {
            child: Some(child),
            what: what.to_owned(),
            stdout,
            stderr,
            readers,
            _dir: None,
        }
    }

    /// Standard output so far.
    pub fn stdout(&self) -> String {
        self.stdout
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The JSON events printed so far.
    pub fn events(&self) -> Vec<Value> {
        events(&self.stdout())
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// Panics with the tool's output if it exited before it was done.
    pub fn assert_running(&mut self) {
        if self.exited() {
            panic!(
                "{} exited early\n--- stdout (tail) ---\n{}\n--- stderr ---\n{}",
                self.what,
                tail(&self.stdout(), 40),
                self.stderr()
            );
        }
    }

    /// Waits (bounded) for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> ClientOutput {
        let mut child = self
            .child
            .take()
            .unwrap_or_else(|| panic!("{} already stopped", self.what));
        let status = match child.wait_timeout(timeout).expect("wait for tool") {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                self.join_readers();
                panic!(
                    "{} did not finish within {timeout:?}\n--- stdout (tail) ---\n{}\n--- stderr ---\n{}",
                    self.what,
                    tail(&self.stdout(), 40),
                    self.stderr()
                );
            }
        };
        self.join_readers();
        ClientOutput {
            code: status.code(),
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }

    /// Sends SIGTERM (the tools then close their clients cleanly and print
    /// `shutdown_complete`) and waits (bounded) for the exit.
    pub fn terminate(&mut self, timeout: Duration) -> ClientOutput {
        if let Some(child) = &self.child {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        self.wait_exit(timeout)
    }

    fn join_readers(&mut self) {
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- {} stderr ----\n{}\n---- end ----",
                self.what,
                tail(&self.stderr(), 60)
            );
        }
    }
}

fn collect(stream: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stream);
        let mut line = String::new();
        while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            into.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&line);
            line.clear();
        }
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The JSON events in a tool's stdout (other lines are skipped).
pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// A command running Java tool `class` with the cluster's jars and the
/// clients' `NetworkClient` logger at INFO (on stderr).
pub(crate) fn java_with_network_log(cluster: &Cluster, class: &str, args: &[&str]) -> Command {
    let mut command = Command::new("java");
    command
        .arg("-Xmx512m")
        .arg("-cp")
        .arg(format!("{}/*", cluster.libs_dir().display()))
        .args(cluster.java_log_args())
        .arg("-Dsluice.log.network=INFO")
        .arg(class)
        .args(args);
    command
}

/// What a `VerifiableProducer` run sends.
#[derive(Debug, Clone)]
pub struct ProducerRun {
    /// Records to send (`--max-messages`).
    pub(crate) max_messages: u64,
    /// Records per second (`--throughput`).
    pub(crate) throughput: u64,
    /// Keys cycle over this many values (`--repeating-keys`), so that the
    /// records spread over every partition.
    pub repeating_keys: u32,
    /// Prefix of the values (`--value-prefix`, an integer: values become
    /// `prefix.n`), to tell runs apart.
    pub value_prefix: Option<u32>,
    /// Producer properties (`--command-config`), `key=value`.
    pub config: Vec<String>,
    /// `--acks`: `-1` (all), `1` or `0`.
    pub(crate) acks: &'static str,
}

impl ProducerRun {
    /// An idempotent `acks=all` producer (with retries: the tool's own
    /// default is `retries=0`, which idempotence refuses).
    pub fn idempotent(max_messages: u64, throughput: u64) -> Self {
        Self {
            max_messages,
            throughput,
            repeating_keys: 60,
            value_prefix: None,
            config: vec![
                "acks=all".into(),
                "enable.idempotence=true".into(),
                "retries=2147483647".into(),
                "delivery.timeout.ms=120000".into(),
            ],
            acks: "-1",
        }
    }

    /// An `acks=0` producer: fire and forget, every send "acknowledged"
    /// at once with no offset; what reached the log is counted from the
    /// topic's offsets.
    pub fn fire_and_forget(max_messages: u64, throughput: u64) -> Self {
        Self {
            max_messages,
            throughput,
            repeating_keys: 60,
            value_prefix: None,
            config: vec!["acks=0".into(), "enable.idempotence=false".into()],
            acks: "0",
        }
    }

    /// Starts the producer against `bootstrap`.
    pub fn start(&self, cluster: &Cluster, bootstrap: &str, topic: &str) -> ToolProcess {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("producer.properties");
        std::fs::write(&config, self.config.join("\n") + "\n").expect("write producer config");
        let (max, rate, keys) = (
            self.max_messages.to_string(),
            self.throughput.to_string(),
            self.repeating_keys.to_string(),
        );
        let config = config.display().to_string();
        let mut args = vec![
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--max-messages",
            &max,
            "--throughput",
            &rate,
            "--acks",
            self.acks,
            "--repeating-keys",
            &keys,
            "--command-config",
            &config,
        ];
        let prefix = self.value_prefix.map(|p| p.to_string());
        if let Some(prefix) = &prefix {
            args.extend_from_slice(&["--value-prefix", prefix]);
        }
        let mut process = ToolProcess::spawn(
            java_with_network_log(cluster, VERIFIABLE_PRODUCER, &args),
            "VerifiableProducer",
        );
        process._dir = Some(dir);
        process
    }
}

/// Starts a `VerifiableConsumer` of `topic` in `group` (classic protocol,
/// from the earliest offset, committing after each poll).
pub fn start_consumer(cluster: &Cluster, bootstrap: &str, topic: &str, group: &str) -> ToolProcess {
    start_consumer_with(cluster, bootstrap, topic, group, &[])
}

/// Starts a `VerifiableConsumer` like [`start_consumer`], with `extra`
/// arguments (e.g. `--command-config <file>` to authenticate).
pub fn start_consumer_with(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    group: &str,
    extra: &[&str],
) -> ToolProcess {
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group-id",
        group,
        "--reset-policy",
        "earliest",
    ];
    args.extend_from_slice(extra);
    ToolProcess::spawn(
        java_with_network_log(cluster, VERIFIABLE_CONSUMER, &args),
        "VerifiableConsumer",
    )
}

/// Starts a `VerifiableConsumer` like [`start_consumer_with`], with the
/// consumer properties `config` (`key=value`, e.g. `fetch.max.wait.ms=5000`)
/// in a `--command-config` file.
pub fn start_consumer_configured(
    cluster: &Cluster,
    bootstrap: &str,
    topic: &str,
    group: &str,
    config: &[&str],
    extra: &[&str],
) -> ToolProcess {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("consumer.properties");
    std::fs::write(&path, config.join("\n") + "\n").expect("write consumer config");
    let path = path.display().to_string();
    let mut args = vec!["--command-config", path.as_str()];
    args.extend_from_slice(extra);
    let mut process = start_consumer_with(cluster, bootstrap, topic, group, &args);
    process._dir = Some(dir);
    process
}

/// Starts `tests/clients/python/tail_consumer.py`, a librdkafka consumer of
/// `topic` in `group` that prints the events of a `VerifiableConsumer`, with
/// librdkafka `settings` (`key=value`) and `extra` arguments (`--verbose`).
pub fn start_librdkafka_consumer(
    bootstrap: &str,
    topic: &str,
    group: &str,
    settings: &[&str],
    extra: &[&str],
) -> ToolProcess {
    let mut args = vec!["--bootstrap", bootstrap, "--topic", topic, "--group", group];
    for setting in settings {
        args.extend_from_slice(&["-X", setting]);
    }
    args.extend_from_slice(extra);
    ToolProcess::spawn(
        crate::clients::librdkafka("tail_consumer.py", &args),
        "librdkafka tail_consumer.py",
    )
}

/// One acknowledged send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acked {
    /// The partition.
    pub partition: i32,
    /// The offset the broker gave it.
    pub offset: i64,
}

/// One failed send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendError {
    /// The exception class.
    pub(crate) exception: String,
    /// Its message.
    pub(crate) message: String,
}

impl SendError {
    /// Whether the exception is one of [`RETRIABLE_PRODUCER_EXCEPTIONS`].
    pub fn retriable(&self) -> bool {
        RETRIABLE_PRODUCER_EXCEPTIONS.contains(&self.exception.as_str())
    }
}

/// What a producer's events say.
#[derive(Debug, Clone, Default)]
pub struct Produced {
    /// Every acknowledged send, in event order.
    pub acked: Vec<Acked>,
    /// Every failed send.
    pub errors: Vec<SendError>,
    /// `tool_data.sent`, once the tool has exited.
    pub sent: Option<u64>,
}

impl Produced {
    /// Reads the producer's events.
    pub fn from_events(events: &[Value]) -> Self {
        let mut report = Self::default();
        for event in events {
            match event["name"].as_str() {
                Some("producer_send_success") => {
                    if let (Some(partition), Some(offset)) =
                        (event["partition"].as_i64(), event["offset"].as_i64())
                    {
                        report.acked.push(Acked {
                            partition: i32::try_from(partition).unwrap_or(-1),
                            offset,
                        });
                    }
                }
                Some("producer_send_error") => report.errors.push(SendError {
                    exception: event["exception"].as_str().unwrap_or("?").to_owned(),
                    message: event["message"].as_str().unwrap_or("").to_owned(),
                }),
                Some("tool_data") => report.sent = event["sent"].as_u64(),
                _ => {}
            }
        }
        report
    }

    /// Panics unless every send the producer made was acknowledged and
    /// none failed, except one send racing the stop itself (the tool's main
    /// thread may send once more while its shutdown hook closes the
    /// producer: `IllegalStateException: Cannot perform operation after
    /// producer has been closed` before the send, or `KafkaException:
    /// Producer closed while send in progress` from the accumulator during
    /// it).
    pub fn assert_all_acked(&self) {
        let (stop, failed): (Vec<_>, Vec<_>) = self.errors.iter().partition(|e| {
            (e.exception.contains("IllegalStateException") && e.message.contains("closed"))
                || (e.exception.contains("KafkaException")
                    && e.message.contains("Producer closed while send in progress"))
        });
        assert!(failed.is_empty(), "no failed send: {failed:?}");
        assert!(stop.len() <= 1, "{stop:?}");
        let sent = self.sent.expect("the producer printed its totals");
        assert!(sent > 0, "the producer sent records");
        assert_eq!(
            (self.acked.len() + stop.len()) as u64,
            sent,
            "every record sent was acknowledged"
        );
    }

    /// The partitions with at least one acknowledged send.
    pub fn partitions(&self) -> BTreeSet<i32> {
        self.acked.iter().map(|a| a.partition).collect()
    }
}

/// The offset ranges a consumer reported, per partition of one topic.
#[derive(Debug, Clone, Default)]
pub struct Consumed {
    ranges: BTreeMap<i32, Vec<(i64, i64)>>,
    /// `(partition, minOffset, maxOffset, count)` of the ranges whose
    /// `count` is not `maxOffset - minOffset + 1`: records missing inside a
    /// poll (none expected without transactions).
    pub holes: Vec<(i32, i64, i64, i64)>,
    /// Total records reported.
    pub records: u64,
}

impl Consumed {
    /// Reads the `records_consumed` events about `topic`.
    pub fn from_events(events: &[Value], topic: &str) -> Self {
        let mut consumed = Self::default();
        let polls = events
            .iter()
            .filter(|e| e["name"].as_str() == Some("records_consumed"));
        for poll in polls {
            let partitions = poll["partitions"].as_array().into_iter().flatten();
            for p in partitions.filter(|p| p["topic"].as_str() == Some(topic)) {
                let (Some(partition), Some(min), Some(max), Some(count)) = (
                    p["partition"].as_i64(),
                    p["minOffset"].as_i64(),
                    p["maxOffset"].as_i64(),
                    p["count"].as_i64(),
                ) else {
                    continue;
                };
                let partition = i32::try_from(partition).unwrap_or(-1);
                if count != max - min + 1 {
                    consumed.holes.push((partition, min, max, count));
                }
                consumed.records += u64::try_from(count).unwrap_or(0);
                consumed
                    .ranges
                    .entry(partition)
                    .or_default()
                    .push((min, max));
            }
        }
        consumed
    }

    /// Whether the record at `partition`/`offset` was consumed.
    pub fn contains(&self, partition: i32, offset: i64) -> bool {
        self.ranges
            .get(&partition)
            .is_some_and(|r| r.iter().any(|(min, max)| (*min..=*max).contains(&offset)))
    }

    /// The acknowledged sends that were not consumed.
    pub(crate) fn missing<'a>(&self, acked: impl IntoIterator<Item = &'a Acked>) -> Vec<Acked> {
        acked
            .into_iter()
            .filter(|a| !self.contains(a.partition, a.offset))
            .copied()
            .collect()
    }
}

/// The `Node N disconnected.` lines of a Java client's stderr.
pub fn disconnects(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("Node ") && l.contains(" disconnected."))
        .map(str::to_owned)
        .collect()
}

/// The consumer's `offsets_committed` events that did not succeed, as JSON.
pub fn failed_commits(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["name"].as_str() == Some("offsets_committed"))
        .filter(|e| e["success"].as_bool() != Some(true))
        .map(Value::to_string)
        .collect()
}

/// Waits (up to `timeout`) until the running `consumer` is assigned
/// `partitions` partitions.
pub fn wait_assigned(consumer: &mut ToolProcess, partitions: usize, timeout: Duration) {
    crate::wait::until(
        timeout,
        &format!("the consumer to be assigned all {partitions} partitions"),
        || {
            consumer.assert_running();
            match assigned_partitions(&consumer.events()) {
                Some(n) if n == partitions => Ok(()),
                other => Err(format!("assigned: {other:?}")),
            }
        },
    );
}

/// Waits (up to `timeout`) until the running `producer` has `n`
/// acknowledged sends; returns how many it has.
pub fn wait_acked(producer: &mut ToolProcess, n: usize, timeout: Duration) -> usize {
    crate::wait::until(timeout, &format!("{n} acknowledged sends"), || {
        producer.assert_running();
        let acked = Produced::from_events(&producer.events()).acked.len();
        if acked >= n {
            Ok(acked)
        } else {
            Err(format!("{acked} acked"))
        }
    })
}

/// Waits (up to `timeout`) until the running `consumer` has read every
/// record of `acked` from `topic`; returns what it consumed.
pub fn wait_consumed(
    consumer: &mut ToolProcess,
    topic: &str,
    acked: &[Acked],
    timeout: Duration,
) -> Consumed {
    crate::wait::until(
        timeout,
        "the consumer to read every acknowledged record",
        || {
            consumer.assert_running();
            let consumed = Consumed::from_events(&consumer.events(), topic);
            let missing = consumed.missing(acked);
            if missing.is_empty() {
                Ok(consumed)
            } else {
                Err(format!(
                    "{} of {} acked records not consumed yet, e.g. {:?}",
                    missing.len(),
                    acked.len(),
                    &missing[..missing.len().min(5)]
                ))
            }
        },
    )
}

/// How many partitions the consumer's latest `partitions_assigned` event names.
pub(crate) fn assigned_partitions(events: &[Value]) -> Option<usize> {
    events
        .iter()
        .rev()
        .find(|e| e["name"].as_str() == Some("partitions_assigned"))
        .and_then(|e| e["partitions"].as_array().map(Vec::len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acked_sends_are_checked_against_consumed_ranges() {
        let producer = events(
            r#"{"name":"startup_complete"}
{"name":"producer_send_success","partition":0,"offset":0}
{"name":"producer_send_success","partition":0,"offset":1}
{"name":"producer_send_success","partition":1,"offset":5}
{"name":"producer_send_error","exception":"org.apache.kafka.common.errors.NetworkException","message":"x"}
{"name":"tool_data","sent":4,"acked":3}"#,
        );
        let produced = Produced::from_events(&producer);
        assert_eq!(produced.acked.len(), 3);
        assert_eq!(produced.sent, Some(4));
        assert_eq!(produced.partitions().len(), 2);
        assert!(produced.errors[0].retriable());
        let consumer = events(
            r#"{"name":"records_consumed","count":2,"partitions":[{"topic":"t","partition":0,"count":2,"minOffset":0,"maxOffset":1}]}
{"name":"records_consumed","count":1,"partitions":[{"topic":"other","partition":1,"count":1,"minOffset":5,"maxOffset":5}]}
{"name":"records_consumed","count":1,"partitions":[{"topic":"t","partition":2,"count":1,"minOffset":3,"maxOffset":4}]}"#,
        );
        let consumed = Consumed::from_events(&consumer, "t");
        assert_eq!(consumed.records, 3);
        assert_eq!(consumed.holes, [(2, 3, 4, 1)]);
        assert_eq!(
            consumed.missing(&produced.acked),
            [Acked {
                partition: 1,
                offset: 5
            }]
        );
        assert_eq!(
            disconnects("[x] INFO [Producer clientId=p] Node 2 disconnected. (org)\nother"),
            ["[x] INFO [Producer clientId=p] Node 2 disconnected. (org)"]
        );
    }
}
