//! Metadata and DescribeCluster: the broker list, partition leadership and the
//! controller, rewritten to name only the up Sluice nodes.
//!
//! - Brokers: exactly the up Sluice nodes (id, client address, rack).
//! - Leader: the Sluice node chosen by a stable hash of (topic, partition)
//!   among the up nodes in the real leader's rack, or among all up nodes when
//!   that rack has none. A partition without a leader (-1) keeps -1, so that
//!   the client waits and refreshes as it would against Kafka.
//! - Replicas: the chosen leader first, then the next up nodes, as many as the
//!   real list had (at most the number of up nodes). ISR: a prefix of that
//!   list as long as the real ISR; offline replicas: a suffix as long as the
//!   real list, disjoint from the ISR.
//! - Eligible leader replicas and last known ELR (KIP-966, only in
//!   DescribeTopicPartitions, see `topic_partitions.rs`): as long as the real
//!   lists (at most the rewritten replica count), taken from the rewritten
//!   replicas: the ELR from the replicas after the ISR prefix (wrapping into
//!   the ISR only when too few are left), the last known ELR as a suffix like
//!   the offline replicas. Both stay disjoint from the ISR whenever the
//!   lengths allow, as in Kafka; null stays null. They are placeholders of
//!   the right size: which real replica is eligible is not shown.
//! - Controller: a Sluice node in the real controller's rack; -1 stays -1.
//! - Everything else (cluster id, topic ids, leader epochs, errors) is kept:
//!   epochs must stay real, since brokers check the ones clients send.

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::choose::{LeaderPlan, StableHasher, topic_hasher};
use super::{Listed, NodeEntry, Rewriter, listed, node_entries, node_entry};
use crate::topology::TopicId;

/// The fields of one partition that name brokers, borrowed from either
/// kafka-protocol partition struct (Metadata's or DescribeTopicPartitions').
pub(super) struct PartitionNodes<'p> {
    /// The partition index.
    pub(super) index: i32,
    /// The leader, -1 when there is none.
    pub(super) leader: &'p mut BrokerId,
    /// Every replica.
    pub(super) replicas: &'p mut Vec<BrokerId>,
    /// The in-sync replicas.
    pub(super) isr: &'p mut Vec<BrokerId>,
    /// The offline replicas.
    pub(super) offline: &'p mut Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966; DescribeTopicPartitions only; null
    /// stays null).
    pub(super) elr: Option<&'p mut Vec<BrokerId>>,
    /// Last known eligible leader replicas (as `elr`).
    pub(super) last_known_elr: Option<&'p mut Vec<BrokerId>>,
}

/// The [`PartitionNodes`] of `p`, a partition struct with Metadata's field
/// names (Metadata's or DescribeTopicPartitions'), with the given ELR fields.
macro_rules! partition_nodes {
    ($p:ident, $elr:expr, $last_known_elr:expr) => {
        $crate::rewrite::metadata::PartitionNodes {
            index: $p.partition_index,
            leader: &mut $p.leader_id,
            replicas: &mut $p.replica_nodes,
            isr: &mut $p.isr_nodes,
            offline: &mut $p.offline_replicas,
            elr: $elr,
            last_known_elr: $last_known_elr,
        }
    };
}
pub(super) use partition_nodes;

/// The [`LeaderPlan`] of each real leader a response names, decided at its
/// first partition and reused for the others (a response names a handful of
/// brokers for thousands of partitions). Sorted by broker id.
#[derive(Debug, Default)]
pub(super) struct LeaderPlans<'c> {
    by_leader: Vec<(BrokerId, LeaderPlan<'c>)>,
}

impl<'a> Rewriter<'a> {
    /// Rewrites a Metadata response (any version) in place.
    pub fn metadata(&self, resp: &mut MetadataResponse) {
        let listed = self.show_up_nodes(&mut resp.brokers, &mut resp.controller_id);
        let mut plans = LeaderPlans::default();
        for topic in &mut resp.topics {
            let id = TopicId(topic.topic_id.as_u128());
            let key = self.topic_key(topic.name.as_ref().map(|n| &n.0), id);
            let hasher = topic_hasher(&key);
            for p in &mut topic.partitions {
                let nodes = partition_nodes!(p, None, None);
                self.partition_nodes(nodes, hasher, &listed, &mut plans);
            }
        }
    }

    /// The plan for real leader `leader`, from `plans` or decided now (its
    /// rack from `listed` or the view) and kept there.
    fn leader_plan<'c>(
        &'c self,
        leader: BrokerId,
        listed: &[(BrokerId, Option<StrBytes>)],
        plans: &mut LeaderPlans<'c>,
    ) -> LeaderPlan<'c> {
        match plans.by_leader.binary_search_by_key(&leader, |(id, _)| *id) {
            Ok(i) => plans.by_leader[i].1,
            Err(i) => {
                let rack = self.rack_of(leader, listed);
                let plan = self.chooser.leader_plan(leader, rack, self.ranks());
                plans.by_leader.insert(i, (leader, plan));
                plan
            }
        }
    }

    /// Rewrites the broker-naming fields of one partition (see the module
    /// docs for the rule), in place: the lists keep their memory, since none
    /// grows. Shared by Metadata and DescribeTopicPartitions, so that both
    /// show the same leader and replicas for the same partition. `topic` is
    /// the partition's topic's hasher ([`topic_hasher`]).
    pub(super) fn partition_nodes<'c>(
        &'c self,
        p: PartitionNodes<'_>,
        topic: StableHasher,
        listed: &[(BrokerId, Option<StrBytes>)],
        plans: &mut LeaderPlans<'c>,
    ) {
        let hash = topic.partition(p.index);
        let leader = (p.leader.0 >= 0).then(|| {
            let plan = self.leader_plan(*p.leader, listed, plans);
            self.chooser.plan_index(plan, hash)
        });
        if let Some(leader) = leader {
            *p.leader = self.chooser.up()[leader].broker_id;
        }
        let replicas = p.replicas;
        self.chooser
            .replicas_into(leader, hash, replicas.len(), replicas);
        let isr = p.isr.len().min(replicas.len());
        let offline = p.offline.len().min(replicas.len() - isr);
        p.isr.clear();
        p.isr.extend_from_slice(&replicas[..isr]);
        p.offline.clear();
        p.offline
            .extend_from_slice(&replicas[replicas.len() - offline..]);
        if let Some(elr) = p.elr {
            // Not in the ISR first (what an ELR member is), wrapping into it
            // only when the real list is longer than what is left.
            let count = elr.len().min(replicas.len());
            elr.clear();
            elr.extend(replicas[isr..].iter().chain(&replicas[..isr]).take(count));
        }
        if let Some(last_known) = p.last_known_elr {
            // A suffix, like the offline replicas it usually names.
            let count = last_known.len().min(replicas.len());
            last_known.clear();
            last_known.extend_from_slice(&replicas[replicas.len() - count..]);
        }
    }

    /// Rewrites a DescribeCluster response (any version) in place. An error
    /// response keeps its error and loses any broker it listed.
    pub fn describe_cluster(&self, resp: &mut DescribeClusterResponse) {
        if resp.error_code != 0 {
            resp.brokers.clear();
            resp.controller_id = BrokerId(-1);
            return;
        }
        self.show_up_nodes(&mut resp.brokers, &mut resp.controller_id);
    }

    /// Replaces a broker list by the up Sluice nodes, and a real controller
    /// (-1 stays -1) by a Sluice node in its rack. Returns the real brokers
    /// the list named, with their racks.
    fn show_up_nodes<E: NodeEntry>(
        &self,
        brokers: &mut Vec<E>,
        controller: &mut BrokerId,
    ) -> Listed {
        let listed = listed(brokers);
        *brokers = node_entries(self.chooser.up().iter().copied());
        if controller.0 >= 0 {
            let rack = self.rack_of(*controller, &listed);
            *controller = self.controller_for(*controller, rack);
        }
        listed
    }
}

node_entry!(MetadataResponseBroker: node_id, DescribeClusterBroker: broker_id);
