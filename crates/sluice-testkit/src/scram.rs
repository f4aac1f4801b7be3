//! Sluice with SCRAM over mTLS in front of a test cluster, what a Java client
//! needs to authenticate through it, and what the brokers log about it.
//!
//! Sluice takes the client's SCRAM login on a `SASL_PLAINTEXT` first contact
//! point, then authenticates each broker connection with the user's
//! delegation token, which it creates over the brokers' `SSL` listeners as
//! `sluice-admin` (mTLS). Tests of token rotation and of broker failures
//! under authentication share this topology.
//!
//! A broker closes a connection whose SASL session expired (a token
//! connection's session ends with its token) on the next request it reads,
//! and logs that only at DEBUG (`Disconnecting expired channel`, logger
//! `kafka.network.Processor`). [`DebugLogger`] turns such a logger to DEBUG
//! on every broker for the length of a test, so the test can show that it
//! never happened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::fronted::{contact_points, sink_topology};
use crate::sluice::SluiceProcess;

/// Kafka's config tool (also alters broker loggers).
pub const CONFIG_COMMAND: &str = "org.apache.kafka.tools.ConfigCommand";

/// The broker logger that logs the accepted connections and the closes of
/// expired SASL sessions (at DEBUG).
pub const PROCESSOR_LOGGER: &str = "kafka.network.Processor";

/// The line a broker logs (at DEBUG, [`PROCESSOR_LOGGER`]) when it closes a
/// connection because its SASL session expired.
pub const EXPIRED_CHANNEL: &str = "Disconnecting expired channel";

/// The line a broker logs (at DEBUG, [`PROCESSOR_LOGGER`]) for each accepted
/// connection: shows that DEBUG is on.
pub const NEW_CONNECTION: &str = "listening to new connection from";

/// One Sluice node on `listen` in front of `cluster`'s SASL listeners, with
/// SCRAM over mTLS and tokens of `token_lifetime_secs`.
pub(crate) fn topology(
    cluster: &Cluster,
    listen: &str,
    token_lifetime_secs: u64,
    read_timeout_secs: u64,
) -> String {
    sasl_topology(
        cluster,
        listen,
        Some(token_lifetime_secs),
        read_timeout_secs,
    )
}

/// The `authorize_scram_over_mtls` block of a KafkaSinkCluster (indented
/// for [`sink_topology`]'s extra settings): `cluster`'s mTLS listeners, the
/// test super-user's certificate, tokens of `lifetime_secs`.
pub fn scram_over_mtls_settings(cluster: &Cluster, lifetime_secs: u64) -> String {
    format!(
        r#"            authorize_scram_over_mtls:
              mtls_port_contact_points: [{mtls}]
              delegation_token_lifetime_seconds: {lifetime_secs}
              tls:
                certificate_authority_path: "{ca}"
                certificate_path: "{cert}"
                private_key_path: "{key}"
"#,
        mtls = contact_points(cluster, "SSL"),
        ca = cluster.cert("ca.pem"),
        cert = cluster.cert("sluice-admin.pem"),
        key = cluster.cert("sluice-admin-key.pem"),
    )
}

/// One Sluice node on `listen` in front of `cluster`'s SASL listeners; with
/// SCRAM over mTLS and tokens of this lifetime in seconds, or without it
/// (`None`: clients may then use SASL PLAIN only).
pub fn sasl_topology(
    cluster: &Cluster,
    listen: &str,
    token_lifetime_secs: Option<u64>,
    read_timeout_secs: u64,
) -> String {
    let scram = token_lifetime_secs
        .map(|lifetime| scram_over_mtls_settings(cluster, lifetime))
        .unwrap_or_default();
    let sasl = contact_points(cluster, "SASL_PLAINTEXT");
    sink_topology(
        &[listen.to_owned()],
        &["rack0"],
        0,
        &sasl,
        read_timeout_secs,
        &scram,
    )
}

/// Starts `binary` with [`topology`] on a free port; returns it and its
/// client address.
pub fn start(
    binary: &Path,
    cluster: &Cluster,
    token_lifetime_secs: u64,
    read_timeout_secs: u64,
) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", crate::free_port());
    let topology = topology(cluster, &listen, token_lifetime_secs, read_timeout_secs);
    let sluice = SluiceProcess::start(binary, &topology, &[&listen]);
    (sluice, listen)
}

/// The `key=value` lines of one of the cluster's client configs (e.g.
/// `scram512-admin`), comments left out: to add to a tool's own properties.
pub fn client_properties(cluster: &Cluster, name: &str) -> Vec<String> {
    let path = cluster.client_config(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read client config {path}: {e}"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// How many lines node `id`'s `server.log` has now.
pub fn log_line_count(cluster: &Cluster, id: usize) -> usize {
    std::fs::read_to_string(cluster.node_log(id))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The lines node `id`'s `server.log` gained after its first `from` lines.
pub fn log_lines_since(cluster: &Cluster, id: usize, from: usize) -> Vec<String> {
    let path: PathBuf = cluster.node_log(id);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .skip(from)
        .map(str::to_owned)
        .collect()
}

/// A broker logger set to DEBUG on every node of a cluster; dropping it
/// puts the logger back to the root level (errors are printed, never
/// panicked on, since drop may run during a panic).
#[derive(Debug)]
pub struct DebugLogger {
    cluster: Cluster,
    logger: String,
}

impl DebugLogger {
    /// Sets `logger` to DEBUG on every node (dynamic broker-logger config;
    /// the brokers' log4j file is untouched).
    pub fn enable(cluster: &Cluster, logger: &str) -> Self {
        let setting = format!("{logger}=DEBUG");
        for out in alter_loggers(cluster, "--add-config", &setting) {
            out.unwrap_or_else(|e| panic!("set {setting}: {e}"))
                .assert_success(&format!("set {setting}"));
        }
        Self {
            cluster: cluster.clone(),
            logger: logger.to_owned(),
        }
    }
}

impl Drop for DebugLogger {
    fn drop(&mut self) {
        for out in alter_loggers(&self.cluster, "--delete-config", &self.logger) {
            match out {
                Ok(out) if out.code == Some(0) => {}
                Ok(out) => eprintln!(
                    "could not reset broker logger {}: {}{}",
                    self.logger, out.stdout, out.stderr
                ),
                Err(e) => eprintln!("could not reset broker logger {}: {e}", self.logger),
            }
        }
    }
}

/// Runs `ConfigCommand --alter --entity-type broker-loggers <op> <arg>` on
/// every node at once; a run that panicked (timed out) is an `Err`.
fn alter_loggers(
    cluster: &Cluster,
    op: &str,
    arg: &str,
) -> Vec<Result<crate::clients::ClientOutput, String>> {
    let bootstrap = cluster.bootstrap("PLAINTEXT");
    std::thread::scope(|s| {
        let runs: Vec<_> = (1..=cluster.node_count())
            .map(|id| {
                let (bootstrap, id) = (&bootstrap, id.to_string());
                s.spawn(move || {
                    cluster.tool(
                        CONFIG_COMMAND,
                        &[
                            "--bootstrap-server",
                            bootstrap,
                            "--alter",
                            "--entity-type",
                            "broker-loggers",
                            "--entity-name",
                            &id,
                            op,
                            arg,
                        ],
                        Duration::from_secs(120),
                    )
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().map_err(|_| "the config command failed".to_owned()))
            .collect()
    })
}
