//! Leader hints in Produce and Fetch responses (KIP-951 and KIP-392).
//!
//! On NOT_LEADER_OR_FOLLOWER a broker tells the client who leads now:
//! `current_leader` (leader id and epoch) per partition, and `node_endpoints`
//! (id, host, port, rack) for those leaders, so the client can skip a Metadata
//! round trip. Both name real brokers. They become the Sluice node that a
//! Metadata response would name for that partition under that leader (same
//! hash, same rack preference), so the client's picture stays consistent;
//! `node_endpoints` then lists exactly those Sluice nodes. Epochs are kept.
//!
//! Fetch's `preferred_read_replica` (KIP-392, fetch from a follower) names a
//! real follower; it is cleared to -1. Sluice always routes fetches to the
//! leader by its own view, so a broker configured with a `replica.selector`
//! would keep answering "read from the follower" with no records: the fetch
//! router must drop the client's `rack_id` (Fetch v11+) to avoid that.

use std::collections::BTreeMap;

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::messages::fetch_response::{
    FetchResponse, NodeEndpoint as FetchNodeEndpoint,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    NodeEndpoint as ProduceNodeEndpoint, ProduceResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::Rewriter;
use super::choose::partition_hash;
use crate::topology::{ShotoverNode, TopicId};

/// Maps real leaders to Sluice nodes and remembers which nodes were named.
struct LeaderMap<'r, 'a> {
    rewriter: &'r Rewriter<'a>,
    /// Racks of the real brokers named in the response's `node_endpoints`.
    listed: Vec<(BrokerId, Option<StrBytes>)>,
    /// Sluice nodes named so far, by id.
    named: BTreeMap<BrokerId, &'a ShotoverNode>,
}

impl<'r, 'a> LeaderMap<'r, 'a> {
    fn new(rewriter: &'r Rewriter<'a>, listed: Vec<(BrokerId, Option<StrBytes>)>) -> Self {
        Self {
            rewriter,
            listed,
            named: BTreeMap::new(),
        }
    }

    /// The Sluice node standing in for real leader `leader` of a partition;
    /// -1 stays -1.
    fn map(&mut self, topic_key: &[u8], partition: i32, leader: BrokerId) -> BrokerId {
        if leader.0 < 0 {
            return leader;
        }
        let rack = self.rewriter.rack_of(leader, &self.listed);
        let hash = partition_hash(topic_key, partition);
        let node = self.rewriter.chooser.pick(rack, hash);
        self.named.insert(node.broker_id, node);
        node.broker_id
    }
}

impl Rewriter<'_> {
    /// Rewrites a Produce response's leader hints in place (a no-op for
    /// versions before 10, which carry none).
    pub fn produce(&self, resp: &mut ProduceResponse) {
        let listed = resp
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.rack.clone()))
            .collect();
        let mut leaders = LeaderMap::new(self, listed);
        for topic in &mut resp.responses {
            let key = self.topic_key(Some(&topic.name.0), TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partition_responses {
                let leader = &mut p.current_leader.leader_id;
                *leader = leaders.map(&key, p.index, *leader);
            }
        }
        resp.node_endpoints = leaders
            .named
            .values()
            .map(|n| {
                ProduceNodeEndpoint::default()
                    .with_node_id(n.broker_id)
                    .with_host(n.address_for_clients.host.clone())
                    .with_port(n.address_for_clients.port)
                    .with_rack(Some(n.rack.clone()))
            })
            .collect();
    }

    /// Rewrites a Fetch response's leader hints in place (a no-op for
    /// versions before 11, which carry none).
    pub fn fetch(&self, resp: &mut FetchResponse) {
        let listed = resp
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.rack.clone()))
            .collect();
        let mut leaders = LeaderMap::new(self, listed);
        for topic in &mut resp.responses {
            let key = self.topic_key(Some(&topic.topic.0), TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partitions {
                let leader = &mut p.current_leader.leader_id;
                *leader = leaders.map(&key, p.partition_index, *leader);
                p.preferred_read_replica = BrokerId(-1);
            }
        }
        resp.node_endpoints = leaders
            .named
            .values()
            .map(|n| {
                FetchNodeEndpoint::default()
                    .with_node_id(n.broker_id)
                    .with_host(n.address_for_clients.host.clone())
                    .with_port(n.address_for_clients.port)
                    .with_rack(Some(n.rack.clone()))
            })
            .collect();
    }
}
