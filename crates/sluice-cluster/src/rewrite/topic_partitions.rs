//! DescribeTopicPartitions (API 75): partition leadership, rewritten exactly
//! like Metadata's so that only Sluice nodes appear.
//!
//! Java's Admin (3.8+) describes topics with this API whenever the node
//! offers it (`kafka-topics --describe`), and its answer names brokers by id
//! in every partition: leader, replicas, ISR, eligible leader replicas, last
//! known ELR and offline replicas. Each partition goes through the same
//! helper as a Metadata partition (`metadata.rs`), keyed by the same topic
//! bytes (the name, else the id), so both APIs show the same leader and
//! replica list for the same partition. The answer carries no broker list, so
//! the real leader's rack comes from the view; a leader the view does not know
//! yet is placed among all up nodes.
//!
//! Topic names and ids, errors, leader epochs, authorized operations and the
//! pagination cursor are kept. Nothing is recorded in the view: Metadata
//! stays its only source, and the answer holds nothing routing needs that
//! Metadata does not.

use sluice_codec::kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponse;

use super::Rewriter;
use super::choose::topic_hasher;
use super::metadata::{LeaderPlans, partition_nodes};
use crate::topology::TopicId;

impl Rewriter<'_> {
    /// Rewrites a DescribeTopicPartitions response (v0) in place.
    pub fn describe_topic_partitions(&self, resp: &mut DescribeTopicPartitionsResponse) {
        let mut plans = LeaderPlans::default();
        for topic in &mut resp.topics {
            let id = TopicId(topic.topic_id.as_u128());
            let key = self.topic_key(topic.name.as_ref().map(|n| &n.0), id);
            let hasher = topic_hasher(&key);
            for p in &mut topic.partitions {
                let elr = p.eligible_leader_replicas.as_mut();
                let last_known_elr = p.last_known_elr.as_mut();
                let nodes = partition_nodes!(p, elr, last_known_elr);
                self.partition_nodes(nodes, hasher, &[], &mut plans);
            }
        }
    }
}
