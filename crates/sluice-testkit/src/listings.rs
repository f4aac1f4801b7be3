//! What clients list through Sluice: consumer groups, transactions and log
//! dirs, as Kafka's admin tools print them and as raw requests return them.
//!
//! A Java admin client lists groups, transactions and log dirs by asking every
//! node that Metadata names, i.e. every Sluice node; tests with several Sluice
//! nodes check that the union names each entry once. The entries are made
//! directly on the real cluster, so that only the listing goes through Sluice.

use std::time::Duration;

use sluice_codec::kafka_protocol::messages::{
    FindCoordinatorRequest, ListGroupsRequest, ListTransactionsRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::clients;
use crate::cluster::Cluster;
use crate::raw::RawClient;

/// Kafka's consumer groups tool class.
pub(crate) const CONSUMER_GROUP_COMMAND: &str =
    "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
/// Kafka's transactions tool class.
pub(crate) const TRANSACTIONS_COMMAND: &str = "org.apache.kafka.tools.TransactionsCommand";
/// Kafka's log dirs tool class.
pub(crate) const LOG_DIRS_COMMAND: &str = "org.apache.kafka.tools.LogDirsCommand";

/// Creates consumer groups `groups` directly on `cluster`: each commits the
/// earliest offsets of every partition of `topic` (one tool run for all).
pub fn create_groups_directly(cluster: &Cluster, topic: &str, groups: &[String]) {
    let direct = cluster.bootstrap("PLAINTEXT");
    let mut args = vec![
        "--reset-offsets",
        "--to-earliest",
        "--execute",
        "--topic",
        topic,
    ];
    for group in groups {
        args.extend(["--group", group.as_str()]);
    }
    clients::tool_ok(cluster, CONSUMER_GROUP_COMMAND, &direct, &args);
}

/// Commits one transaction of `transactional_id` (one record to `topic`)
/// directly on `cluster`, with librdkafka, so that its coordinator lists it.
pub fn commit_transaction_directly(cluster: &Cluster, topic: &str, transactional_id: &str) {
    let direct = cluster.bootstrap("PLAINTEXT");
    let args = [
        "--bootstrap",
        direct.as_str(),
        "--topic",
        topic,
        "--transactional-id",
        transactional_id,
        "--count",
        "1",
        "--commit",
        "listed",
    ];
    clients::run_librdkafka("transactions.py", &args, Duration::from_secs(120))
        .assert_success("commit a transaction directly");
}

/// The group ids `kafka-consumer-groups.sh --list` prints through
/// `bootstrap`, in its order, repeats included.
pub fn tool_groups(cluster: &Cluster, bootstrap: &str) -> Vec<String> {
    clients::tool_ok(cluster, CONSUMER_GROUP_COMMAND, bootstrap, &["--list"])
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// (transactional id, coordinator id) for each line `kafka-transactions.sh
/// list` prints through `bootstrap`, repeats included.
pub fn tool_transactions(cluster: &Cluster, bootstrap: &str) -> Vec<(String, i32)> {
    clients::tool_ok(cluster, TRANSACTIONS_COMMAND, bootstrap, &["list"])
        .lines()
        .skip_while(|l| !l.starts_with("TransactionalId"))
        .skip(1)
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let id = fields.next()?.to_owned();
            let coordinator = fields.next()?.parse().ok()?;
            Some((id, coordinator))
        })
        .collect()
}

/// The group ids a ListGroups (v5) request to `addr` returns.
pub fn raw_groups(addr: &str) -> Vec<String> {
    let mut client = RawClient::connect(addr);
    let request = RequestKind::ListGroups(ListGroupsRequest::default());
    match client.request(ApiKey::ListGroups, 5, request) {
        ResponseKind::ListGroups(r) => {
            assert_eq!(r.error_code, 0, "ListGroups error from {addr}");
            r.groups.iter().map(|g| g.group_id.to_string()).collect()
        }
        other => panic!("not a ListGroups answer from {addr}: {other:?}"),
    }
}

/// The transactional ids a ListTransactions (v1) request to `addr` returns.
pub fn raw_transactions(addr: &str) -> Vec<String> {
    let mut client = RawClient::connect(addr);
    let request = RequestKind::ListTransactions(ListTransactionsRequest::default());
    match client.request(ApiKey::ListTransactions, 1, request) {
        ResponseKind::ListTransactions(r) => {
            assert_eq!(r.error_code, 0, "ListTransactions error from {addr}");
            r.transaction_states
                .iter()
                .map(|t| t.transactional_id.to_string())
                .collect()
        }
        other => panic!("not a ListTransactions answer from {addr}: {other:?}"),
    }
}

/// The node id a FindCoordinator (v4) request to `addr` names for `key` of
/// `key_type` (0: group, 1: transaction).
pub fn coordinator_of(addr: &str, key_type: i8, key: &str) -> i32 {
    let mut client = RawClient::connect(addr);
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![StrBytes::from_string(key.to_owned())]);
    match client.request(
        ApiKey::FindCoordinator,
        4,
        RequestKind::FindCoordinator(request),
    ) {
        ResponseKind::FindCoordinator(r) => {
            let c = r.coordinators.first().expect("one coordinator");
            assert_eq!(c.error_code, 0, "FindCoordinator {key} through {addr}");
            c.node_id.0
        }
        other => panic!("not a FindCoordinator answer from {addr}: {other:?}"),
    }
}

/// One partition log `kafka-log-dirs.sh --describe` reports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogDirPartition {
    /// The node the tool asked (a Sluice node id through Sluice).
    pub broker: i32,
    /// `topic-partition`.
    pub partition: String,
    /// Whether it is a future log (a move between dirs in progress).
    pub is_future: bool,
    /// The log dir.
    pub(crate) log_dir: String,
}

/// Every partition log of `topics` that `kafka-log-dirs.sh --describe`
/// reports through `bootstrap`, repeats included.
pub fn tool_log_dirs(cluster: &Cluster, bootstrap: &str, topics: &[&str]) -> Vec<LogDirPartition> {
    let list = topics.join(",");
    let out = cluster.tool(
        LOG_DIRS_COMMAND,
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--topic-list",
            &list,
        ],
        Duration::from_secs(60),
    );
    out.assert_success("kafka-log-dirs --describe");
    let json = out
        .stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON in kafka-log-dirs output: {}", out.stdout));
    let parsed: serde_json::Value = serde_json::from_str(json).expect("kafka-log-dirs JSON");
    let mut found = Vec::new();
    for broker in parsed["brokers"].as_array().expect("brokers") {
        let id = broker["broker"].as_i64().expect("broker id") as i32;
        for dir in broker["logDirs"].as_array().expect("logDirs") {
            assert!(dir["error"].is_null(), "log dir error: {dir}");
            for p in dir["partitions"].as_array().expect("partitions") {
                found.push(LogDirPartition {
                    broker: id,
                    partition: p["partition"].as_str().expect("partition").to_owned(),
                    is_future: p["isFuture"].as_bool().unwrap_or(false),
                    log_dir: dir["logDir"].as_str().unwrap_or_default().to_owned(),
                });
            }
        }
    }
    found
}
