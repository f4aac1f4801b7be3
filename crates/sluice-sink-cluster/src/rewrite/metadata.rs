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
//! - Controller: a Sluice node in the real controller's rack; -1 stays -1.
//! - Everything else (cluster id, topic ids, leader epochs, errors) is kept:
//!   epochs must stay real, since brokers check the ones clients send.

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::Rewriter;
use super::choose::partition_hash;
use crate::topology::TopicId;

impl Rewriter<'_> {
    /// Rewrites a Metadata response (any version) in place.
    pub fn metadata(&self, resp: &mut MetadataResponse) {
        let listed: Vec<(BrokerId, Option<StrBytes>)> = resp
            .brokers
            .iter()
            .map(|b| (b.node_id, b.rack.clone()))
            .collect();
        resp.brokers = self
            .chooser
            .up()
            .iter()
            .map(|n| {
                MetadataResponseBroker::default()
                    .with_node_id(n.broker_id)
                    .with_host(n.address_for_clients.host.clone())
                    .with_port(n.address_for_clients.port)
                    .with_rack(Some(n.rack.clone()))
            })
            .collect();
        if resp.controller_id.0 >= 0 {
            let rack = self.rack_of(resp.controller_id, &listed);
            resp.controller_id = self.controller_for(resp.controller_id, rack);
        }
        for topic in &mut resp.topics {
            let id = TopicId(topic.topic_id.as_u128());
            let key = self.topic_key(topic.name.as_ref().map(|n| &n.0), id);
            for partition in &mut topic.partitions {
                self.partition(partition, &key, &listed);
            }
        }
    }

    fn partition(
        &self,
        p: &mut MetadataResponsePartition,
        topic_key: &[u8],
        listed: &[(BrokerId, Option<StrBytes>)],
    ) {
        let hash = partition_hash(topic_key, p.partition_index);
        let leader = (p.leader_id.0 >= 0)
            .then(|| self.chooser.pick(self.rack_of(p.leader_id, listed), hash));
        if let Some(leader) = leader {
            p.leader_id = leader.broker_id;
        }
        let replicas = self.chooser.replicas(leader, hash, p.replica_nodes.len());
        let isr = p.isr_nodes.len().min(replicas.len());
        let offline = p.offline_replicas.len().min(replicas.len() - isr);
        p.isr_nodes = replicas[..isr].to_vec();
        p.offline_replicas = replicas[replicas.len() - offline..].to_vec();
        p.replica_nodes = replicas;
    }

    /// Rewrites a DescribeCluster response (any version) in place. An error
    /// response keeps its error and loses any broker it listed.
    pub fn describe_cluster(&self, resp: &mut DescribeClusterResponse) {
        if resp.error_code != 0 {
            resp.brokers.clear();
            resp.controller_id = BrokerId(-1);
            return;
        }
        let listed: Vec<(BrokerId, Option<StrBytes>)> = resp
            .brokers
            .iter()
            .map(|b| (b.broker_id, b.rack.clone()))
            .collect();
        resp.brokers = self
            .chooser
            .up()
            .iter()
            .map(|n| {
                DescribeClusterBroker::default()
                    .with_broker_id(n.broker_id)
                    .with_host(n.address_for_clients.host.clone())
                    .with_port(n.address_for_clients.port)
                    .with_rack(Some(n.rack.clone()))
            })
            .collect();
        if resp.controller_id.0 >= 0 {
            let rack = self.rack_of(resp.controller_id, &listed);
            resp.controller_id = self.controller_for(resp.controller_id, rack);
        }
    }
}
