//! The real Kafka cluster a test runs against.
//!
//! The test command starts clusters with `scripts/kafka/cluster.sh` and shares
//! them between tests; each writes `<state>/clusters/<name>/cluster.json`,
//! which this module reads. A test never starts its own broker unless it must
//! kill one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::process::{self, ClientOutput};

/// The shared single-node cluster (KafkaSinkSingle tests).
pub const SINGLE: &str = "single";
/// The shared three-node cluster (KafkaSinkCluster tests).
pub const TRIO: &str = "trio";
/// A 1-node cluster whose brokers set `connections.max.reauth.ms` to
/// [`REAUTH_MS`] (`cluster.sh start --reauth-ms`), for the re-authentication
/// tests (`crates/sluice/tests/reauth.rs`); `scripts/test` starts it for
/// them.
pub const REAUTH: &str = "reauth";
/// The `connections.max.reauth.ms` of [`REAUTH`].
pub const REAUTH_MS: u64 = 8000;

/// A running test cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    name: String,
    info: Value,
}

impl Cluster {
    /// The running cluster `name`; panics with instructions if it is not up.
    pub fn get(name: &str) -> Self {
        let path = crate::state_dir()
            .join("clusters")
            .join(name)
            .join("cluster.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "test cluster `{name}` is not running ({}: {e}). Run the whole suite with \
                 `scripts/test`, or start it with `scripts/kafka/cluster.sh start --name {name} ...`",
                path.display()
            )
        });
        let info: Value = serde_json::from_str(&text).expect("valid cluster.json");
        Self {
            name: name.to_string(),
            info,
        }
    }

    fn str(&self, key: &str) -> &str {
        self.info[key]
            .as_str()
            .unwrap_or_else(|| panic!("cluster.json of {} lacks {key}", self.name))
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pid of node `id`'s broker process (from its pid file).
    pub(crate) fn broker_pid(&self, id: usize) -> u32 {
        let file = self.info["nodes"][id - 1]["pid_file"]
            .as_str()
            .unwrap_or_else(|| panic!("no pid file for node {id} in cluster.json"));
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{file}: not a pid ({e}): {text:?}"))
    }

    /// Number of broker nodes.
    pub fn node_count(&self) -> usize {
        self.info["node_count"].as_u64().unwrap_or(0) as usize
    }

    /// Bootstrap list for a listener (`PLAINTEXT`, `SASL_PLAINTEXT`, `SSL`).
    pub fn bootstrap(&self, listener: &str) -> String {
        self.info["bootstrap"][listener]
            .as_str()
            .unwrap_or_else(|| panic!("cluster {} has no {listener} listener", self.name))
            .to_string()
    }

    /// Port of `listener` on node `id` (1-based).
    pub fn port(&self, id: usize, listener: &str) -> u16 {
        self.info["nodes"][id - 1]["ports"][listener]
            .as_u64()
            .unwrap_or_else(|| panic!("cluster {} node {id} has no {listener} port", self.name))
            as u16
    }

    /// The `server.log` of node `id` (1-based).
    pub(crate) fn node_log(&self, id: usize) -> PathBuf {
        let log = self.info["nodes"][id - 1]["log"].as_str();
        PathBuf::from(log.unwrap_or_else(|| panic!("cluster {} node {id} has no log", self.name)))
    }

    /// Directory of the generated certificates.
    pub fn certs_dir(&self) -> PathBuf {
        PathBuf::from(self.str("certs_dir"))
    }

    /// A file in the certificates directory, e.g. `ca.pem`.
    pub fn cert(&self, file: &str) -> String {
        self.certs_dir().join(file).display().to_string()
    }

    /// Directory of the Kafka jars.
    pub fn libs_dir(&self) -> PathBuf {
        PathBuf::from(self.str("libs_dir"))
    }

    /// The Kafka version the cluster runs (`cluster.sh start --kafka-version`).
    pub fn kafka_version(&self) -> &str {
        self.str("kafka_version")
    }

    /// The JVM options that configure the logging of a tool or Java client
    /// run with the cluster's jars (see [`java_log_args`]).
    pub fn java_log_args(&self) -> Vec<String> {
        java_log_args(&self.libs_dir())
    }

    /// A generated client properties file (`ssl-client`, `scram512-admin`, ...).
    pub fn client_config(&self, name: &str) -> String {
        self.info["client_configs"][name]
            .as_str()
            .unwrap_or_else(|| panic!("cluster {} has no client config {name}", self.name))
            .to_string()
    }

    /// Creates a topic directly on the cluster (PLAINTEXT, bypassing Sluice).
    pub fn create_topic(&self, topic: &str, partitions: u32, replication: u32) {
        self.create_topic_with_configs(topic, partitions, replication, &[]);
    }

    /// Runs a Java tool against this cluster's jars.
    pub fn tool(&self, class: &str, args: &[&str], timeout: Duration) -> ClientOutput {
        let mut command = self.jvm(&[]);
        command.arg(class).args(args);
        process::run(command, None, timeout, class)
    }

    /// Runs `scripts/kafka/cluster.sh` with `args` for this cluster.
    pub fn script(&self, args: &[&str]) -> ClientOutput {
        let mut command = Command::new(crate::repo_root().join("scripts/kafka/cluster.sh"));
        command.args(args).arg("--name").arg(&self.name);
        process::run(command, None, Duration::from_secs(180), "cluster.sh")
    }

    /// `java` with the cluster's jars (then those of `extra_libs`) on the
    /// classpath and its logging options, up to the main class.
    ///
    /// The JVM only uses its quick (C1) compiler and the serial collector:
    /// the tools are short-lived, and that halves the CPU each one spends
    /// starting on a busy 2-core machine. Measure peak client throughput
    /// elsewhere.
    pub(crate) fn jvm(&self, extra_libs: &[&Path]) -> Command {
        let mut classpath = format!("{}/*", self.libs_dir().display());
        for dir in extra_libs {
            classpath.push_str(&format!(":{}/*", dir.display()));
        }
        let mut command = Command::new("java");
        command
            .arg("-Xmx768m")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-XX:+UseSerialGC")
            .arg("-cp")
            .arg(classpath)
            .args(self.java_log_args());
        command
    }
}

/// The JVM options that configure the logging of a tool or Java client run
/// with the Kafka jars in `libs`: WARN and above on stderr (a later
/// `-Dsluice.log.network=INFO` shows the clients' `NetworkClient` lines).
/// Kafka 4.x logs through log4j2 (`scripts/kafka/tools-log4j2.properties`);
/// Kafka 3.9 through reload4j, a log4j 1 (`tools-log4j.properties`), known
/// by its slf4j binding among the jars (as `scripts/kafka/versions.sh` does).
pub fn java_log_args(libs: &Path) -> Vec<String> {
    let scripts = crate::repo_root().join("scripts/kafka");
    let reload4j = std::fs::read_dir(libs)
        .unwrap_or_else(|e| panic!("read the Kafka jars in {}: {e}", libs.display()))
        .filter_map(Result::ok)
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("slf4j-reload4j-")
        });
    let option = if reload4j {
        format!(
            "-Dlog4j.configuration=file:{}",
            scripts.join("tools-log4j.properties").display()
        )
    } else {
        format!(
            "-Dlog4j2.configurationFile={}",
            scripts.join("tools-log4j2.properties").display()
        )
    };
    vec![option]
}
