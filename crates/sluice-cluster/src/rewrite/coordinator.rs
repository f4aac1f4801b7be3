//! FindCoordinator: the coordinator a client is told about is a Sluice node.
//!
//! Each found coordinator becomes the Sluice node chosen by a stable hash of
//! the key among the up nodes in the real coordinator's rack (all up nodes
//! when that rack has none, or the rack is unknown). Kafka has one coordinator
//! per key, and Java clients keep one connection to it, so one node is named
//! per key, never a list. Error answers keep their error code and message;
//! their node fields are scrubbed to Kafka's "no node" (-1, "", -1), which is
//! what Kafka sends with an error anyway.

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::Rewriter;
use super::choose::stable_hash;
use crate::topology::ShotoverNode;

impl Rewriter<'_> {
    /// Rewrites a FindCoordinator response in place. `request_key` is the
    /// request's key, which v0–3 responses do not repeat; without it a v0–3
    /// coordinator is placed by the real coordinator's id instead (still
    /// stable, spread less evenly).
    pub fn find_coordinator(
        &self,
        resp: &mut FindCoordinatorResponse,
        version: i16,
        request_key: Option<&str>,
    ) {
        if version < 4 {
            let node = (resp.error_code == 0 && resp.node_id.0 >= 0)
                .then(|| self.coordinator_node(resp.node_id, request_key.map(str::as_bytes)));
            (resp.node_id, resp.host, resp.port) = node_fields(node);
            return;
        }
        for c in &mut resp.coordinators {
            let node = (c.error_code == 0 && c.node_id.0 >= 0)
                .then(|| self.coordinator_node(c.node_id, Some(c.key.as_bytes())));
            (c.node_id, c.host, c.port) = node_fields(node);
        }
    }

    /// The Sluice node shown as the coordinator of `key` whose real
    /// coordinator is `real`: also the node that lists `key` in ListGroups
    /// and ListTransactions (see `fan_out`).
    pub(super) fn coordinator_node(&self, real: BrokerId, key: Option<&[u8]>) -> &ShotoverNode {
        let hash = match key {
            Some(key) => stable_hash(&[b"coordinator", key]),
            None => stable_hash(&[b"coordinator-broker", &real.0.to_be_bytes()]),
        };
        let rack = self.view.broker_rack(real).map(|r| &**r);
        self.chooser.pick(rack, hash)
    }
}

/// (node_id, host, port) for a node, or Kafka's "no node".
fn node_fields(node: Option<&ShotoverNode>) -> (BrokerId, StrBytes, i32) {
    match node {
        Some(n) => (
            n.broker_id,
            n.address_for_clients.host.clone(),
            n.address_for_clients.port,
        ),
        None => (BrokerId(-1), StrBytes::default(), -1),
    }
}
