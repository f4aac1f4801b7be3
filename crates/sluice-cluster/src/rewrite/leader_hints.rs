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
//! ShareFetch and ShareAcknowledge (KIP-932) carry the same hints
//! (`current_leader` as a plain broker id, `node_endpoints`), rewritten alike.
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
use sluice_codec::kafka_protocol::messages::share_acknowledge_response::{
    NodeEndpoint as ShareAckNodeEndpoint, ShareAcknowledgeResponse,
};
use sluice_codec::kafka_protocol::messages::share_fetch_response::{
    NodeEndpoint as ShareFetchNodeEndpoint, ShareFetchResponse,
};

use super::choose::partition_hash;
use super::{Listed, NodeEntry, Rewriter, listed, node_entries, node_entry};
use crate::topology::{ShotoverNode, TopicId};

/// Maps real leaders to Sluice nodes and remembers which nodes were named.
struct LeaderMap<'r, 'a> {
    rewriter: &'r Rewriter<'a>,
    /// Racks of the real brokers named in the response's `node_endpoints`.
    listed: Listed,
    /// Sluice nodes named so far, by id.
    named: BTreeMap<BrokerId, &'a ShotoverNode>,
}

impl<'r, 'a> LeaderMap<'r, 'a> {
    /// A map for a response whose `node_endpoints` are `endpoints`.
    fn new<E: NodeEntry>(rewriter: &'r Rewriter<'a>, endpoints: &[E]) -> Self {
        Self {
            rewriter,
            listed: listed(endpoints),
            named: BTreeMap::new(),
        }
    }

    /// Replaces real leader `leader` of a partition by the Sluice node
    /// standing in for it; -1 stays -1.
    fn replace(&mut self, topic_key: &[u8], partition: i32, leader: &mut BrokerId) {
        if leader.0 < 0 {
            return;
        }
        let rack = self.rewriter.rack_of(*leader, &self.listed);
        let hash = partition_hash(topic_key, partition);
        let node = self
            .rewriter
            .chooser
            .pick_leader(*leader, rack, self.rewriter.ranks(), hash);
        self.named.insert(node.broker_id, node);
        *leader = node.broker_id;
    }

    /// The `node_endpoints` for the Sluice nodes named, by id.
    fn endpoints<E: NodeEntry>(self) -> Vec<E> {
        node_entries(self.named.into_values())
    }
}

node_entry!(
    ProduceNodeEndpoint: node_id,
    FetchNodeEndpoint: node_id,
    ShareFetchNodeEndpoint: node_id,
    ShareAckNodeEndpoint: node_id
);

impl Rewriter<'_> {
    /// Rewrites a Produce response's leader hints in place (a no-op for
    /// versions before 10, which carry none).
    pub fn produce(&self, resp: &mut ProduceResponse) {
        let mut leaders = LeaderMap::new(self, &resp.node_endpoints);
        for topic in &mut resp.responses {
            let key = self.topic_key(Some(&topic.name.0), TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partition_responses {
                leaders.replace(&key, p.index, &mut p.current_leader.leader_id);
            }
        }
        resp.node_endpoints = leaders.endpoints();
    }

    /// Rewrites a Fetch response's leader hints in place (a no-op for
    /// versions before 11, which carry none).
    pub fn fetch(&self, resp: &mut FetchResponse) {
        let mut leaders = LeaderMap::new(self, &resp.node_endpoints);
        for topic in &mut resp.responses {
            let key = self.topic_key(Some(&topic.topic.0), TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partitions {
                leaders.replace(&key, p.partition_index, &mut p.current_leader.leader_id);
                p.preferred_read_replica = BrokerId(-1);
            }
        }
        resp.node_endpoints = leaders.endpoints();
    }

    /// Rewrites a ShareFetch response's leader hints in place.
    pub fn share_fetch(&self, resp: &mut ShareFetchResponse) {
        let mut leaders = LeaderMap::new(self, &resp.node_endpoints);
        for topic in &mut resp.responses {
            let key = self.topic_key(None, TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partitions {
                let mut leader = BrokerId(p.current_leader.leader_id);
                leaders.replace(&key, p.partition_index, &mut leader);
                p.current_leader.leader_id = leader.0;
            }
        }
        resp.node_endpoints = leaders.endpoints();
    }

    /// Rewrites a ShareAcknowledge response's leader hints in place.
    pub fn share_acknowledge(&self, resp: &mut ShareAcknowledgeResponse) {
        let mut leaders = LeaderMap::new(self, &resp.node_endpoints);
        for topic in &mut resp.responses {
            let key = self.topic_key(None, TopicId(topic.topic_id.as_u128()));
            for p in &mut topic.partitions {
                let mut leader = BrokerId(p.current_leader.leader_id);
                leaders.replace(&key, p.partition_index, &mut leader);
                p.current_leader.leader_id = leader.0;
            }
        }
        resp.node_endpoints = leaders.endpoints();
    }
}
