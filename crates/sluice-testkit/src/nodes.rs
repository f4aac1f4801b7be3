//! Breaking the test cluster on purpose, and putting it back: kill a broker
//! and restart it, reset TCP connections, see who leads what, move leadership
//! back to the preferred replicas.
//!
//! Tests that use this change a cluster other tests share, so they run alone
//! (the serial phase of `scripts/test`) and restore what they broke: a
//! [`KilledNode`] restarts its node when dropped, also when the test panics.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::MetadataRequest;
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::clients::{self, ClientOutput};
use crate::cluster::Cluster;
use crate::raw::RawClient;

/// A broker killed with SIGKILL. [`KilledNode::restart`] starts it again and
/// waits until it serves; dropping it unrestarted does the same (errors are
/// printed, never panicked on, since drop may run during a panic).
#[derive(Debug)]
pub struct KilledNode {
    cluster: Cluster,
    id: usize,
    restarted: bool,
}

impl KilledNode {
    /// Starts the node again and waits until it serves (`cluster.sh
    /// start-node`, bounded by its own start timeout). Panics if it fails.
    pub fn restart(mut self) {
        self.restarted = true;
        let id = self.id.to_string();
        self.cluster
            .script(&["start-node", "--node", &id])
            .assert_success(&format!("restart node {id}"));
    }
}

impl Drop for KilledNode {
    fn drop(&mut self) {
        if self.restarted {
            return;
        }
        let script = crate::repo_root().join("scripts/kafka/cluster.sh");
        let id = self.id.to_string();
        let status = Command::new(script)
            .args(["start-node", "--node", &id, "--name", self.cluster.name()])
            .status();
        match status {
            Ok(s) if s.success() => eprintln!("restarted node {id} of {}", self.cluster.name()),
            other => eprintln!(
                "could not restart node {id} of {} ({other:?}); run `scripts/kafka/cluster.sh \
                 start-node --name {} --node {id}`",
                self.cluster.name(),
                self.cluster.name()
            ),
        }
    }
}

/// A broker frozen with SIGSTOP: its sockets stay open and nothing answers,
/// like a hung process or a stuck disk. [`StoppedNode::resume`] sends
/// SIGCONT; dropping it does the same, also when the test panics.
#[derive(Debug)]
pub struct StoppedNode {
    pid: u32,
    id: usize,
    resumed: bool,
}

impl StoppedNode {
    /// Sends SIGCONT. Panics if it cannot be sent.
    pub fn resume(mut self) {
        self.resumed = true;
        signal(self.pid, "-CONT").unwrap_or_else(|e| panic!("resume node {}: {e}", self.id));
    }
}

impl Drop for StoppedNode {
    fn drop(&mut self) {
        if !self.resumed
            && let Err(e) = signal(self.pid, "-CONT")
        {
            eprintln!(
                "could not resume node {} (pid {}): {e}; run `kill -CONT {}`",
                self.id, self.pid, self.pid
            );
        }
    }
}

/// `kill SIG PID`.
fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(|e| format!("cannot run kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid} failed: {status}"))
    }
}

impl Cluster {
    /// Kills node `id` with SIGKILL (`cluster.sh kill-node`); the returned
    /// guard restarts it.
    pub fn kill_node(&self, id: usize) -> KilledNode {
        let arg = id.to_string();
        self.script(&["kill-node", "--node", &arg])
            .assert_success(&format!("kill node {id}"));
        KilledNode {
            cluster: self.clone(),
            id,
            restarted: false,
        }
    }

    /// Freezes node `id` with SIGSTOP; the returned guard resumes it.
    pub fn stop_node(&self, id: usize) -> StoppedNode {
        let pid = self.broker_pid(id);
        signal(pid, "-STOP").unwrap_or_else(|e| panic!("stop node {id}: {e}"));
        StoppedNode {
            pid,
            id,
            resumed: false,
        }
    }

    /// Creates a topic directly on the cluster with topic configs
    /// (`key=value`, e.g. `min.insync.replicas=2`).
    pub fn create_topic_with_configs(
        &self,
        topic: &str,
        partitions: u32,
        replication: u32,
        configs: &[&str],
    ) {
        let (p, r) = (partitions.to_string(), replication.to_string());
        let bootstrap = self.bootstrap("PLAINTEXT");
        let mut args = vec![
            "--create",
            "--topic",
            topic,
            "--partitions",
            &p,
            "--replication-factor",
            &r,
        ];
        for config in configs {
            args.extend_from_slice(&["--config", config]);
        }
        clients::tool_ok(self, clients::TOPIC_COMMAND, &bootstrap, &args);
    }

    /// The PLAINTEXT address of every node that accepts connections now.
    pub(crate) fn live_brokers(&self) -> Vec<String> {
        (1..=self.node_count())
            .map(|id| format!("127.0.0.1:{}", self.port(id, "PLAINTEXT")))
            .filter(|addr| {
                addr.parse::<SocketAddr>()
                    .is_ok_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
            })
            .collect()
    }

    /// Partition -> leader id of `topic`, asked of a live broker directly
    /// (Metadata v12). Partitions without a leader are left out.
    pub fn partition_leaders(&self, topic: &str) -> BTreeMap<i32, i32> {
        let live = self.live_brokers();
        let broker = live
            .first()
            .unwrap_or_else(|| panic!("no broker of {} accepts connections", self.name()));
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default()
                .with_name(Some(StrBytes::from_string(topic.to_owned()).into())),
        ]));
        let mut client = RawClient::connect(broker);
        let ResponseKind::Metadata(m) =
            client.request(ApiKey::Metadata, 12, RequestKind::Metadata(request))
        else {
            panic!("not a Metadata answer from {broker}");
        };
        m.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader_id.0 >= 0)
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect()
    }

    /// Asks for a preferred leader election of every partition of `topic`
    /// (directly, not through Sluice). Partitions already led by their
    /// preferred replica are left alone; the tool fails for partitions whose
    /// preferred replica is not in sync yet, so callers poll.
    pub fn elect_preferred_leaders(&self, topic: &str, partitions: u32) -> ClientOutput {
        let bootstrap = self.live_brokers().join(",");
        crate::fronted::elect_preferred(self, &bootstrap, topic, partitions)
    }
}

/// Whether this machine can reset a TCP connection with `ss -K` (root and a
/// kernel with `CONFIG_INET_DIAG_DESTROY`): tried on a loopback pair.
pub fn socket_destroy_supported() -> Result<(), String> {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let mut client = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let (_server, _) = listener.accept().map_err(|e| e.to_string())?;
    destroy_sockets(&format!("( sport = :{port} )"))?;
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 1];
    match client.read(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
        other => Err(format!(
            "ss -K did not reset a loopback connection (the peer read {other:?})"
        )),
    }
}

/// Resets (RST) every established TCP connection from process `pid` to the
/// broker listening on `broker_port`, the way a broker or a middlebox does:
/// the broker's end of each connection is destroyed with `ss -K`, so the
/// kernel sends the peer a RST. Returns how many connections were reset.
///
/// Needs root and a kernel with `CONFIG_INET_DIAG_DESTROY`; an `Err` says
/// why it could not be done, so that a test can fall back to another way.
pub fn reset_connections(broker_port: u16, pid: u32) -> Result<usize, String> {
    let local_ports = connections_of(broker_port, pid)?;
    if local_ports.is_empty() {
        return Err(format!(
            "process {pid} has no connection to port {broker_port}"
        ));
    }
    for port in &local_ports {
        destroy_sockets(&format!("( sport = :{broker_port} and dport = :{port} )"))?;
    }
    let left: Vec<u16> = connections_of(broker_port, pid)?
        .into_iter()
        .filter(|p| local_ports.contains(p))
        .collect();
    if left.is_empty() {
        Ok(local_ports.len())
    } else {
        Err(format!(
            "ss -K left the connections from ports {left:?} open (no kernel support for socket destroy?)"
        ))
    }
}

/// Destroys the established TCP sockets that `filter` (an `ss` filter)
/// selects, with `ss -K`.
fn destroy_sockets(filter: &str) -> Result<(), String> {
    let out = Command::new("ss")
        .args(["-K", "-tn", "state", "established", filter])
        .output()
        .map_err(|e| format!("cannot run ss: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ss -K failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The local ports of `pid`'s established connections to `port` (from `ss -tnp`).
fn connections_of(port: u16, pid: u32) -> Result<Vec<u16>, String> {
    let filter = format!("( dport = :{port} )");
    let out = Command::new("ss")
        .args(["-Htnp", "state", "established", &filter])
        .output()
        .map_err(|e| format!("cannot run ss: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ss failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let owner = format!("pid={pid},");
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter(|line| line.contains(&owner))
        .filter_map(|line| {
            // Recv-Q Send-Q Local:Port Peer:Port Process
            let local = line.split_whitespace().nth(2)?;
            local.rsplit_once(':')?.1.parse().ok()
        })
        .collect())
}
