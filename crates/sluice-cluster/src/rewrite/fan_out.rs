//! Fan-out answers (ListGroups, ListTransactions, DescribeLogDirs) cut down to
//! what the local Sluice node is shown to own.
//!
//! A client that lists groups, transactions or log dirs asks every node it
//! knows, i.e. every Sluice node. Each Sluice node asks every real broker (see
//! `split::fan_out`), so without this filter an entry would come back once per
//! Sluice node. Instead each broker's answer is filtered before the merge, so
//! that the union over the up Sluice nodes lists each entry once, on the node
//! that the other rewrites already show as its owner:
//!
//! - **ListGroups / ListTransactions**: broker B lists the groups (the
//!   transactional ids) it coordinates. A key is kept when the Sluice node
//!   that FindCoordinator rewriting shows as its coordinator, with B as the
//!   real coordinator (stable hash of the key among the up nodes of B's rack,
//!   see `coordinator`), is the local node. A client that then looks up the
//!   coordinator of a listed group is sent to the node that listed it. Error
//!   codes are kept as they are: a broker that failed makes every node's list
//!   partial, so every node must say so.
//! - **DescribeLogDirs**: each replica of a partition reports it, so a
//!   partition is kept from one broker's answer only: its real leader's, per
//!   the cluster view; and only on the Sluice node that Metadata rewriting
//!   shows as its leader (partition hash among the up nodes of the real
//!   leader's rack, see `metadata`). Log-dir entries keep their error code and
//!   total/usable bytes whatever is left of their topics (a log dir may end up
//!   with no topics); topics left with no partition are dropped. A partition
//!   reported as both the current and the future log of the same broker is
//!   kept twice, as Kafka lists it.
//!
//! **Partitions whose leader is not in the view** (a topic this Sluice node
//! has not seen in any Metadata answer, or a partition without a leader): when
//! the client named its topics, the split reports such partitions so the sink
//! refreshes their metadata before sending (see `split::fan_out`); what is
//! still unknown after that, and any partition of a request for every topic,
//! is neither dropped nor repeated: it is kept from the first broker (in the
//! order of the parts, i.e. by broker id) that reports it, and on the node
//! chosen by the partition hash among all up nodes, with no rack preference.
//! Likewise, when the view's leader did not report the partition (leadership
//! moved since the view heard of it), the first reporting broker stands in.
//!
//! **When the nodes disagree.** Every choice is a pure function of the up
//! Sluice nodes and the view, so nodes that agree on both list each entry
//! exactly once. Nodes that disagree (a peer health check not yet caught up, a
//! leader known to one node and not to another, in a cluster whose Sluice
//! nodes share racks with the brokers) may, until they agree again, list an
//! entry on two nodes or on none; the client's next listing is right. With a
//! single up Sluice node, ListGroups and ListTransactions keep everything and
//! DescribeLogDirs only drops followers' copies of a partition.

use std::collections::HashMap;

use sluice_codec::kafka_protocol::messages::{
    BrokerId, DescribeLogDirsResponse, ListGroupsResponse, ListTransactionsResponse, ResponseKind,
    TopicName,
};

use super::Rewriter;
use super::choose::partition_hash;
use crate::split::PartResult;
use crate::topology::{TopicId, TopicRef};

/// A partition, by topic name.
type PartitionKey = (TopicName, i32);

impl Rewriter<'_> {
    /// Filters the brokers' answers of one fan-out request in place, before
    /// they are merged: `results[i]` is the answer of broker `brokers[i]`.
    /// Failed parts and answers of other APIs are left alone.
    pub fn fan_out(
        &self,
        local: BrokerId,
        brokers: &[BrokerId],
        results: &mut [PartResult<ResponseKind>],
    ) {
        let mut log_dirs = Vec::new();
        for (broker, result) in brokers.iter().zip(results.iter_mut()) {
            match result {
                PartResult::Response(ResponseKind::ListGroups(r)) => {
                    self.list_groups(r, *broker, local);
                }
                PartResult::Response(ResponseKind::ListTransactions(r)) => {
                    self.list_transactions(r, *broker, local);
                }
                PartResult::Response(ResponseKind::DescribeLogDirs(r)) => {
                    log_dirs.push((*broker, r));
                }
                _ => {}
            }
        }
        if !log_dirs.is_empty() {
            self.describe_log_dirs(local, &mut log_dirs);
        }
    }

    /// Keeps the groups of `real`'s answer whose coordinator is shown as
    /// `local`.
    pub fn list_groups(&self, resp: &mut ListGroupsResponse, real: BrokerId, local: BrokerId) {
        resp.groups
            .retain(|g| self.coordinated_on(local, real, g.group_id.as_bytes()));
    }

    /// Keeps the transactions of `real`'s answer whose coordinator is shown as
    /// `local`.
    pub fn list_transactions(
        &self,
        resp: &mut ListTransactionsResponse,
        real: BrokerId,
        local: BrokerId,
    ) {
        resp.transaction_states
            .retain(|t| self.coordinated_on(local, real, t.transactional_id.as_bytes()));
    }

    /// Whether `key`, coordinated by `real`, is shown as coordinated by
    /// `local` (see [`Rewriter::coordinator_node`]).
    fn coordinated_on(&self, local: BrokerId, real: BrokerId, key: &[u8]) -> bool {
        self.coordinator_node(real, Some(key)).broker_id == local
    }

    /// Keeps each partition in one broker's answer (its leader's) and only
    /// when it is shown as led by `local`; `parts` are the brokers' answers in
    /// part order.
    pub fn describe_log_dirs(
        &self,
        local: BrokerId,
        parts: &mut [(BrokerId, &mut DescribeLogDirsResponse)],
    ) {
        let keep = self.log_dir_sources(local, parts);
        for (broker, resp) in parts.iter_mut() {
            for dir in &mut resp.results {
                for topic in &mut dir.topics {
                    let name = &topic.name;
                    topic
                        .partitions
                        .retain(|p| keep.get(&(name.clone(), p.partition_index)) == Some(&*broker));
                }
                dir.topics.retain(|t| !t.partitions.is_empty());
            }
        }
    }

    /// The partitions `local` lists, each with the broker whose answer it is
    /// taken from.
    fn log_dir_sources(
        &self,
        local: BrokerId,
        parts: &[(BrokerId, &mut DescribeLogDirsResponse)],
    ) -> HashMap<PartitionKey, BrokerId> {
        let mut reporters: HashMap<PartitionKey, Vec<BrokerId>> = HashMap::new();
        for (broker, resp) in parts {
            let reported = resp.results.iter().flat_map(|d| &d.topics).flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.partition_index))
            });
            for key in reported {
                let brokers = reporters.entry(key).or_default();
                if !brokers.contains(broker) {
                    brokers.push(*broker);
                }
            }
        }
        reporters
            .into_iter()
            .filter_map(|((topic, partition), brokers)| {
                let leader = self.view.leader(&TopicRef::Name(topic.clone()), partition);
                let source = leader
                    .filter(|l| brokers.contains(l))
                    .or_else(|| brokers.first().copied())?;
                let rack = leader.and_then(|l| self.view.broker_rack(l)).map(|r| &**r);
                let key = self.topic_key(Some(&topic.0), TopicId::NIL);
                let hash = partition_hash(&key, partition);
                let shown = match leader {
                    Some(l) => self.chooser.pick_leader(l, rack, self.ranks(), hash),
                    None => self.chooser.pick(rack, hash),
                };
                (shown.broker_id == local).then_some(((topic, partition), source))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::{BTreeMap, BTreeSet};

    use sluice_codec::kafka_protocol::messages::describe_log_dirs_response::{
        DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
    };
    use sluice_codec::kafka_protocol::messages::list_groups_response::ListedGroup;
    use sluice_codec::kafka_protocol::messages::list_transactions_response::TransactionState;
    use sluice_codec::kafka_protocol::messages::{
        FindCoordinatorResponse, GroupId, TransactionalId,
    };
    use sluice_codec::kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::topology::fixtures::{self, name, reparse, through_wire, wire_bytes};
    use crate::topology::{Address, ClusterView, ShotoverNode};
    use sluice_codec::ApiKey;
    use sluice_codec::kafka_protocol::error::ResponseError;

    /// The real cluster of the fixtures (brokers 1–3 in rack-a, -b, -c;
    /// `orders` led by 1, 2, 3 in turn; `events` led by 3, partition 1
    /// without a leader).
    fn view() -> ClusterView {
        let mut view = ClusterView::new();
        view.apply_metadata(12, &fixtures::metadata_response(5));
        view
    }

    /// Up Sluice nodes: (id, rack).
    fn nodes(spec: &[(i32, &'static str)]) -> Vec<ShotoverNode> {
        spec.iter()
            .map(|&(id, rack)| ShotoverNode {
                broker_id: BrokerId(id),
                rack: StrBytes::from_static_str(rack),
                address_for_clients: Address::new(StrBytes::from_static_str("sluice"), 9000 + id),
                address_for_peers: Address::new(StrBytes::from_static_str("sluice"), 8000 + id),
                up: true,
            })
            .collect()
    }

    const THREE_NO_RACK: [(i32, &str); 3] = [(0, "rack0"), (1, "rack0"), (2, "rack0")];
    const RACKED: [(i32, &str); 4] = [(0, "rack-a"), (1, "rack-a"), (2, "rack-b"), (3, "rack-d")];

    /// Runs `results` (broker id, answer) through the wire, then through the
    /// filter of node `local`, then through the wire again.
    fn filtered(
        view: &ClusterView,
        nodes: &[ShotoverNode],
        local: i32,
        api: ApiKey,
        version: i16,
        results: &[(i32, ResponseKind)],
    ) -> Vec<ResponseKind> {
        let brokers: Vec<BrokerId> = results.iter().map(|(b, _)| BrokerId(*b)).collect();
        let mut parts: Vec<PartResult<ResponseKind>> = results
            .iter()
            .map(|(_, body)| {
                let resp = through_wire(api, version, body.clone());
                PartResult::Response(resp.into_body().unwrap())
            })
            .collect();
        let rewriter = Rewriter::new(view, nodes).unwrap();
        rewriter.fan_out(BrokerId(local), &brokers, &mut parts);
        parts
            .into_iter()
            .map(|p| match p {
                PartResult::Response(body) => {
                    let resp = sluice_codec::Response::from_body(api, version, 42, body);
                    reparse(&wire_bytes(&resp), api, version)
                        .into_body()
                        .unwrap()
                }
                PartResult::Failed { .. } => panic!("no part failed"),
            })
            .collect()
    }

    fn groups_answer(ids: &[String]) -> ResponseKind {
        ResponseKind::ListGroups(
            ListGroupsResponse::default().with_groups(
                ids.iter()
                    .map(|g| {
                        ListedGroup::default()
                            .with_group_id(GroupId(StrBytes::from_string(g.clone())))
                            .with_protocol_type(StrBytes::from_static_str("consumer"))
                    })
                    .collect(),
            ),
        )
    }

    fn listed_groups(bodies: &[ResponseKind]) -> Vec<String> {
        bodies
            .iter()
            .flat_map(|b| match b {
                ResponseKind::ListGroups(r) => r.groups.iter().map(|g| g.group_id.to_string()),
                other => panic!("not ListGroups: {other:?}"),
            })
            .collect()
    }

    /// Groups g0..g29 on broker 1, h0..h29 on broker 3 (1 and 3 have racks).
    fn group_answers() -> Vec<(i32, ResponseKind)> {
        let on =
            |prefix: &str| -> Vec<String> { (0..30).map(|i| format!("{prefix}{i}")).collect() };
        vec![(1, groups_answer(&on("g"))), (3, groups_answer(&on("h")))]
    }

    /// Every group exactly once over the nodes, each on the node
    /// FindCoordinator shows for it; returns the nodes that listed any.
    fn assert_groups_partitioned(spec: &[(i32, &'static str)]) -> BTreeSet<i32> {
        let view = view();
        let nodes = nodes(spec);
        let answers = group_answers();
        let mut seen: BTreeMap<String, i32> = BTreeMap::new();
        for &(local, _) in spec {
            let bodies = filtered(&view, &nodes, local, ApiKey::ListGroups, 4, &answers);
            for group in listed_groups(&bodies) {
                assert!(
                    seen.insert(group.clone(), local).is_none(),
                    "{group} listed twice"
                );
            }
        }
        assert_eq!(seen.len(), 60, "every group listed once: {seen:?}");
        let rewriter = Rewriter::new(&view, &nodes).unwrap();
        for (group, node) in &seen {
            let real = if group.starts_with('g') { 1 } else { 3 };
            let mut found = FindCoordinatorResponse::default().with_node_id(BrokerId(real));
            rewriter.find_coordinator(&mut found, 3, Some(group));
            assert_eq!(found.node_id.0, *node, "{group}: listed where it is found");
        }
        seen.values().copied().collect()
    }

    #[test]
    fn groups_are_listed_once_over_nodes_without_racks() {
        let listing = assert_groups_partitioned(&THREE_NO_RACK);
        assert_eq!(listing.len(), 3, "60 groups spread over every node");
    }

    #[test]
    fn groups_follow_the_rack_of_their_real_coordinator() {
        let listing = assert_groups_partitioned(&RACKED);
        // Broker 1 is in rack-a (nodes 0, 1); broker 3's rack-c has no node,
        // so its groups go to any up node.
        let view = view();
        let nodes = nodes(&RACKED);
        let answers = group_answers();
        for local in [2, 3] {
            let bodies = filtered(&view, &nodes, local, ApiKey::ListGroups, 4, &answers);
            let groups = listed_groups(&bodies);
            assert!(
                groups.iter().all(|g| g.starts_with('h')),
                "node {local} lists only broker 3's groups: {groups:?}"
            );
        }
        assert!(listing.contains(&0) && listing.contains(&1), "{listing:?}");
    }

    #[test]
    fn a_single_node_lists_every_group_and_transaction() {
        let view = view();
        let nodes = nodes(&[(7, "rack-z")]);
        let answers = group_answers();
        let bodies = filtered(&view, &nodes, 7, ApiKey::ListGroups, 4, &answers);
        assert_eq!(listed_groups(&bodies).len(), 60);

        let txn = transactions_answer(&["t1", "t2", "t3"], 15);
        let bodies = filtered(&view, &nodes, 7, ApiKey::ListTransactions, 1, &[(2, txn)]);
        let ResponseKind::ListTransactions(r) = &bodies[0] else {
            panic!("not ListTransactions");
        };
        assert_eq!(r.transaction_states.len(), 3);
        assert_eq!(
            r.error_code,
            ResponseError::CoordinatorNotAvailable.code(),
            "the error code is kept"
        );
    }

    fn transactions_answer(ids: &[&str], error_code: i16) -> ResponseKind {
        ResponseKind::ListTransactions(
            ListTransactionsResponse::default()
                .with_error_code(error_code)
                .with_transaction_states(
                    ids.iter()
                        .map(|t| {
                            TransactionState::default()
                                .with_transactional_id(TransactionalId(StrBytes::from_string(
                                    (*t).to_owned(),
                                )))
                                .with_transaction_state(StrBytes::from_static_str("Ongoing"))
                        })
                        .collect(),
                ),
        )
    }

    #[test]
    fn transactions_are_listed_once_with_their_error_code() {
        let view = view();
        let nodes = nodes(&THREE_NO_RACK);
        let ids: Vec<String> = (0..40).map(|i| format!("txn-{i}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let answers = [
            (2, transactions_answer(&refs, 0)),
            (3, transactions_answer(&[], 51)),
        ];
        let mut seen = BTreeSet::new();
        for local in 0..3 {
            let bodies = filtered(&view, &nodes, local, ApiKey::ListTransactions, 1, &answers);
            for body in &bodies {
                let ResponseKind::ListTransactions(r) = body else {
                    panic!("not ListTransactions");
                };
                for t in &r.transaction_states {
                    assert!(seen.insert(t.transactional_id.to_string()), "listed twice");
                }
            }
            let ResponseKind::ListTransactions(failed) = &bodies[1] else {
                panic!("not ListTransactions");
            };
            assert_eq!(
                failed.error_code,
                ResponseError::ConcurrentTransactions.code(),
                "node {local} keeps the error"
            );
        }
        assert_eq!(seen.len(), 40);
    }

    fn log_dir(dir: &str, topics: &[(&'static str, &[(i32, bool)])]) -> DescribeLogDirsResult {
        DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_string(dir.to_owned()))
            .with_total_bytes(1000)
            .with_usable_bytes(400)
            .with_topics(
                topics
                    .iter()
                    .map(|(t, parts)| {
                        DescribeLogDirsTopic::default()
                            .with_name(name(t))
                            .with_partitions(
                                parts
                                    .iter()
                                    .map(|&(p, future)| {
                                        DescribeLogDirsPartition::default()
                                            .with_partition_index(p)
                                            .with_partition_size(100)
                                            .with_is_future_key(future)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    /// Every broker holds a replica of every partition of `orders` (12),
    /// `events` (3) and `unseen` (4, a topic the view does not know); broker
    /// 2 also holds a future log of orders-1 in a second dir.
    fn log_dir_answers() -> Vec<(i32, ResponseKind)> {
        const ORDERS: [(i32, bool); 12] = [
            (0, false),
            (1, false),
            (2, false),
            (3, false),
            (4, false),
            (5, false),
            (6, false),
            (7, false),
            (8, false),
            (9, false),
            (10, false),
            (11, false),
        ];
        const SMALL: [(i32, bool); 4] = [(0, false), (1, false), (2, false), (3, false)];
        (1..=3)
            .map(|b| {
                let mut dirs = vec![log_dir(
                    &format!("/data/{b}"),
                    &[
                        ("orders", &ORDERS),
                        ("events", &SMALL[..3]),
                        ("unseen", &SMALL),
                    ],
                )];
                dirs.push(if b == 2 {
                    log_dir("/data/2b", &[("orders", &[(1, true)])])
                } else {
                    log_dir(&format!("/empty/{b}"), &[])
                });
                let resp = DescribeLogDirsResponse::default().with_results(dirs);
                (b, ResponseKind::DescribeLogDirs(resp))
            })
            .collect()
    }

    /// (topic, partition, future) -> (Sluice node, broker) over every node.
    type Listed = BTreeMap<(String, i32, bool), Vec<(i32, i32)>>;

    fn listed_log_dirs(spec: &[(i32, &'static str)], view: &ClusterView) -> Listed {
        let nodes = nodes(spec);
        let answers = log_dir_answers();
        let mut listed = Listed::new();
        for &(local, _) in spec {
            let bodies = filtered(view, &nodes, local, ApiKey::DescribeLogDirs, 4, &answers);
            for (body, (broker, _)) in bodies.iter().zip(&answers) {
                let ResponseKind::DescribeLogDirs(r) = body else {
                    panic!("not DescribeLogDirs");
                };
                assert_eq!(r.results.len(), 2, "log dirs are all kept");
                for dir in &r.results {
                    assert_eq!((dir.total_bytes, dir.usable_bytes), (1000, 400));
                    for t in &dir.topics {
                        assert!(!t.partitions.is_empty(), "empty topics are dropped");
                        for p in &t.partitions {
                            listed
                                .entry((t.name.to_string(), p.partition_index, p.is_future_key))
                                .or_default()
                                .push((local, *broker));
                        }
                    }
                }
            }
        }
        listed
    }

    fn assert_each_once(listed: &Listed) {
        assert_eq!(listed.len(), 12 + 3 + 4 + 1, "{listed:?}");
        for (key, on) in listed {
            assert_eq!(on.len(), 1, "{key:?} listed once: {on:?}");
        }
    }

    #[test]
    fn log_dirs_list_each_partition_once_from_its_leader_on_its_shown_leader() {
        let view = view();
        for spec in [&THREE_NO_RACK[..], &RACKED[..]] {
            let listed = listed_log_dirs(spec, &view);
            assert_each_once(&listed);
            let nodes = nodes(spec);
            let rewriter = Rewriter::new(&view, &nodes).unwrap();
            let mut metadata = fixtures::metadata_response(5);
            rewriter.metadata(&mut metadata);
            for topic in &metadata.topics {
                let topic_name = topic.name.as_ref().unwrap().to_string();
                for p in &topic.partitions {
                    let Some(on) = listed.get(&(topic_name.clone(), p.partition_index, false))
                    else {
                        continue;
                    };
                    let real =
                        view.leader(&TopicRef::Name(name_of(&topic_name)), p.partition_index);
                    if let Some(real) = real {
                        assert_eq!(
                            on[0],
                            (p.leader_id.0, real.0),
                            "{topic_name}-{}",
                            p.partition_index
                        );
                    }
                }
            }
        }
    }

    fn name_of(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.to_owned()))
    }

    #[test]
    fn log_dirs_without_a_known_leader_are_kept_once_from_the_first_broker() {
        let view = view();
        let listed = listed_log_dirs(&RACKED, &view);
        let nodes = nodes(&RACKED);
        let rewriter = Rewriter::new(&view, &nodes).unwrap();
        // `unseen` is not in the view; events-1 has no leader.
        let unknown = (0..4)
            .map(|p| ("unseen", p))
            .chain(std::iter::once(("events", 1)));
        for (topic, p) in unknown {
            let on = &listed[&(topic.to_owned(), p, false)];
            let hashed = rewriter
                .chooser
                .pick(None, partition_hash(topic.as_bytes(), p))
                .broker_id;
            assert_eq!(on, &vec![(hashed.0, 1)], "{topic}-{p}");
        }
        // The future log of orders-1 is on broker 2, its leader: kept there.
        let future = &listed[&("orders".to_owned(), 1, true)];
        assert_eq!(future[0].1, 2);
    }

    #[test]
    fn log_dirs_fall_back_to_a_reporting_broker_when_the_leader_did_not_answer() {
        // Broker 1 leads orders-0, 3, 6, 9, but only brokers 2 and 3 answer.
        let view = view();
        let spec = [(0, "rack0")];
        let nodes = nodes(&spec);
        let answers: Vec<_> = log_dir_answers().into_iter().skip(1).collect();
        let bodies = filtered(&view, &nodes, 0, ApiKey::DescribeLogDirs, 4, &answers);
        let mut from: BTreeMap<i32, i32> = BTreeMap::new();
        for (body, (broker, _)) in bodies.iter().zip(&answers) {
            let ResponseKind::DescribeLogDirs(r) = body else {
                panic!("not DescribeLogDirs");
            };
            for t in r.results.iter().flat_map(|d| &d.topics) {
                for p in t.partitions.iter().filter(|p| !p.is_future_key) {
                    if t.name.0.as_str() == "orders" {
                        assert!(from.insert(p.partition_index, *broker).is_none());
                    }
                }
            }
        }
        assert_eq!(from.len(), 12, "a single node lists every partition");
        for (p, broker) in from {
            let expected = match p % 3 {
                0 => 2, // leader 1 did not answer: the first reporter
                1 => 2,
                _ => 3,
            };
            assert_eq!(broker, expected, "orders-{p}");
        }
    }

    #[test]
    fn only_fan_out_apis_are_filtered() {
        assert!(crate::api::describe(ApiKey::ListGroups).filtered_after_fan_out);
        assert!(crate::api::describe(ApiKey::ListTransactions).filtered_after_fan_out);
        assert!(crate::api::describe(ApiKey::DescribeLogDirs).filtered_after_fan_out);
        assert!(!crate::api::describe(ApiKey::DescribeGroups).filtered_after_fan_out);
        // Failed parts are left alone.
        let view = view();
        let nodes = nodes(&THREE_NO_RACK);
        let mut parts = vec![PartResult::Failed {
            error_code: crate::error_codes::COORDINATOR_NOT_AVAILABLE,
        }];
        Rewriter::new(&view, &nodes)
            .unwrap()
            .fan_out(BrokerId(0), &[BrokerId(1)], &mut parts);
        assert_eq!(
            parts,
            vec![PartResult::Failed {
                error_code: crate::error_codes::COORDINATOR_NOT_AVAILABLE
            }]
        );
    }
}
