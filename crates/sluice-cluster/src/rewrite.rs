//! Response rewriting that hides the real brokers: only Sluice nodes ever
//! reach a client.
//!
//! A client must believe the Sluice nodes are the whole cluster, so every
//! response field that names a broker (id, host, port, rack) is rewritten to
//! name a Sluice node instead. Sluice routes by its own
//! [`ClusterView`](crate::topology::ClusterView), never by what the client
//! thinks, so the client's picture only needs to be stable (see `choose`) and
//! to spread leadership over the up Sluice nodes, preferring the rack of the
//! real broker; a partition's leader is shown on the node that stands for its
//! real leader's whole broker, so that a consumer's fetches to a node go to
//! as few brokers as the node count allows.
//!
//! What is rewritten, and where:
//! - Metadata (v0–13): brokers, partition leaders, replicas, ISR, offline
//!   replicas, controller ([`Rewriter::metadata`]).
//! - FindCoordinator (v0–3 single, v4+ batched) ([`Rewriter::find_coordinator`]).
//! - DescribeCluster ([`Rewriter::describe_cluster`]).
//! - DescribeTopicPartitions (v0): partitions exactly as in Metadata, plus
//!   the eligible leader replicas and last known ELR
//!   ([`Rewriter::describe_topic_partitions`]).
//! - DescribeConfigs, AlterConfigs, IncrementalAlterConfigs answers to
//!   requests whose BROKER or BROKER_LOGGER resources named a Sluice node:
//!   the real broker's id back to the node's, refused resources merged in
//!   request order ([`rewrite_configs_answer`]; the routing half is
//!   [`crate::route::admin::configs`]).
//! - Produce (v10+) and Fetch (v11+) leader hints: `current_leader`,
//!   `node_endpoints` (KIP-951) and Fetch's `preferred_read_replica`
//!   ([`Rewriter::produce`], [`Rewriter::fetch`]).
//! - ApiVersions: the versions every broker and Sluice support, without the
//!   inter-broker APIs ([`intersect_api_versions`], [`is_client_facing`]).
//! - ListGroups, ListTransactions and DescribeLogDirs (fan-out): each real
//!   broker's answer is cut down to the groups, transactions and partitions
//!   that the rewrites above show on the local node, so that a client asking
//!   every Sluice node sees each entry once ([`Rewriter::fan_out`]).
//!
//! Checked and left alone, because they name no broker:
//! - DescribeGroups (v0–6): per group `error_code`, `group_id`, `group_state`,
//!   `protocol_type`, `protocol_data`, `authorized_operations`; per member
//!   `member_id`, `group_instance_id`, `client_id`, `client_host` (the
//!   client's own address as the broker saw it, i.e. a Sluice address),
//!   and `member_metadata`/`member_assignment` (opaque client protocol bytes).
//! - ConsumerGroupDescribe (v0–1): group state, epochs, `assignor_name`;
//!   members' `rack_id` is the client's `client.rack`, `client_host` as above,
//!   assignments name topics and partitions only.
//!
//! APIs that do name brokers but are not rewritten are hidden from clients by
//! [`is_client_facing`] (DescribeQuorum, UnregisterBroker, ...), except the
//! operator APIs that take real broker ids and are forwarded as sent (see
//! [`crate::route::admin`]'s known limits).

mod api_versions;
mod choose;
mod configs;
mod coordinator;
mod fan_out;
mod leader_hints;
mod metadata;
mod topic_partitions;

pub use api_versions::{codec_versions, intersect_api_versions};
pub use configs::refused_answer;
pub use configs::rewrite_configs_answer;

use std::cell::OnceCell;

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{CodecError, Response, ResponseKind};
use sluice_error::{ErrorClass, ErrorSide};

use crate::topology::{ClusterView, ShotoverNode, TopicId, TopicRef};

use choose::{BrokerRanks, Chooser, stable_hash};

/// Why a response could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// No Sluice node is up, so there is nothing to show the client. Cannot
    /// happen with [`SluiceNodes`](crate::topology::SluiceNodes), whose local
    /// node is always up.
    #[error("cannot hide the cluster: no sluice node is up")]
    NoSluiceNodeUp,
    /// The broker's response could not be decoded.
    #[error("{0}")]
    Codec(#[from] CodecError),
}

impl ErrorClass for RewriteError {
    fn side(&self) -> ErrorSide {
        match self {
            RewriteError::NoSluiceNodeUp => ErrorSide::Internal,
            RewriteError::Codec(_) => ErrorSide::Broker,
        }
    }

    fn retriable(&self) -> bool {
        false
    }
}

/// The real brokers a response lists, with their racks (for
/// [`Rewriter::rack_of`]).
type Listed = Vec<(BrokerId, Option<StrBytes>)>;

/// An entry of a response that describes one node by id, host, port and
/// rack: a broker list entry (Metadata, DescribeCluster) or a leader hint's
/// endpoint (Produce, Fetch).
trait NodeEntry: Sized {
    /// The node's id and rack.
    fn id_and_rack(&self) -> (BrokerId, Option<StrBytes>);
    /// The entry describing Sluice node `node` as clients see it.
    fn for_node(node: &ShotoverNode) -> Self;
}

/// Implements [`NodeEntry`] for message structs with `host`, `port`, `rack`
/// and the given id field: `node_entry!(Type: id_field, ...)`.
macro_rules! node_entry {
    ($($ty:ty: $id:ident),+ $(,)?) => {$(
        impl $crate::rewrite::NodeEntry for $ty {
            fn id_and_rack(
                &self,
            ) -> (
                ::sluice_codec::kafka_protocol::messages::BrokerId,
                Option<::sluice_codec::kafka_protocol::protocol::StrBytes>,
            ) {
                (self.$id, self.rack.clone())
            }
            fn for_node(node: &$crate::topology::ShotoverNode) -> Self {
                let mut entry = Self::default()
                    .with_host(node.address_for_clients.host.clone())
                    .with_port(node.address_for_clients.port)
                    .with_rack(Some(node.rack.clone()));
                entry.$id = node.broker_id;
                entry
            }
        }
    )+};
}
use node_entry;

/// The ids and racks of the nodes `entries` list.
fn listed<E: NodeEntry>(entries: &[E]) -> Listed {
    entries.iter().map(NodeEntry::id_and_rack).collect()
}

/// One entry per node of `nodes`, in order.
fn node_entries<'n, E: NodeEntry>(nodes: impl IntoIterator<Item = &'n ShotoverNode>) -> Vec<E> {
    nodes.into_iter().map(E::for_node).collect()
}

/// Rewrites responses against one snapshot of the cluster view and the
/// Sluice nodes. Build one per response (it is cheap) while holding the view's
/// read lock, and drop it before any `.await`.
#[derive(Debug)]
pub struct Rewriter<'a> {
    view: &'a ClusterView,
    chooser: Chooser<'a>,
    /// Where each real broker stands, for the node shown as a leader:
    /// built on first use, since most rewrites show no partition leader.
    ranks: OnceCell<BrokerRanks<'a>>,
}

impl<'a> Rewriter<'a> {
    /// A rewriter showing the up nodes among `nodes` (e.g.
    /// `SluiceNodes::snapshot()`) in place of the brokers of `view`.
    pub fn new(view: &'a ClusterView, nodes: &'a [ShotoverNode]) -> Result<Self, RewriteError> {
        let chooser = Chooser::new(nodes).ok_or(RewriteError::NoSluiceNodeUp)?;
        Ok(Self {
            view,
            chooser,
            ranks: OnceCell::new(),
        })
    }

    /// Where each real broker of the view stands (see `choose`).
    fn ranks(&self) -> &BrokerRanks<'a> {
        self.ranks.get_or_init(|| BrokerRanks::new(self.view))
    }

    /// Rewrites a Metadata, FindCoordinator, DescribeCluster or
    /// DescribeTopicPartitions response in place and returns true; any other
    /// response is left untouched (and undecoded) and false is returned.
    ///
    /// `find_coordinator_key` is the key of the FindCoordinator request; v0–3
    /// responses do not repeat it, and it decides which Sluice node stands in
    /// for the coordinator (see `Rewriter::find_coordinator`).
    pub fn rewrite_response(
        &self,
        response: &mut Response,
        find_coordinator_key: Option<&str>,
    ) -> Result<bool, RewriteError> {
        if !crate::api::describe(response.api_key()).rewritten {
            return Ok(false);
        }
        let version = response.api_version();
        match response.body_mut()? {
            ResponseKind::Metadata(m) => self.metadata(m),
            ResponseKind::FindCoordinator(f) => {
                self.find_coordinator(f, version, find_coordinator_key);
            }
            ResponseKind::DescribeCluster(d) => self.describe_cluster(d),
            ResponseKind::DescribeTopicPartitions(d) => self.describe_topic_partitions(d),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Rewrites the leader hints of a Produce (v10+), Fetch (v11+),
    /// ShareFetch or ShareAcknowledge response
    /// and returns true; any other response is left untouched (and undecoded)
    /// and false is returned. This decodes (and so re-encodes) the whole
    /// response, records included: call it on responses already decoded for a
    /// merge, or on any response of these versions if no broker address may
    /// ever leak.
    pub fn rewrite_leader_hints(&self, response: &mut Response) -> Result<bool, RewriteError> {
        if !crate::api::describe(response.api_key()).may_carry_leader_hints(response.api_version())
        {
            return Ok(false);
        }
        match response.body_mut()? {
            ResponseKind::Produce(p) => self.produce(p),
            ResponseKind::Fetch(f) => self.fetch(f),
            ResponseKind::ShareFetch(f) => self.share_fetch(f),
            ResponseKind::ShareAcknowledge(a) => self.share_acknowledge(a),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The rack of a real broker: from `listed` (the response's own broker
    /// list, when it names one) or else the view.
    fn rack_of<'r>(
        &'r self,
        id: BrokerId,
        listed: &'r [(BrokerId, Option<StrBytes>)],
    ) -> Option<&'r str> {
        listed
            .iter()
            .find(|(b, _)| *b == id)
            .and_then(|(_, rack)| rack.as_deref())
            .or_else(|| self.view.broker_rack(id).map(|r| &**r))
    }

    /// The Sluice node shown as the leader of `partition` of `topic`, which
    /// real broker `leader` leads: the node every rewrite shows clients (see
    /// `choose`).
    pub fn shown_leader(&self, topic: &TopicRef, partition: i32, leader: BrokerId) -> BrokerId {
        let key = match topic {
            TopicRef::Name(name) => self.topic_key(Some(&name.0), TopicId::NIL),
            TopicRef::Id(id) => self.topic_key(None, *id),
        };
        let rack = self.view.broker_rack(leader).map(|r| &**r);
        let hash = choose::partition_hash(&key, partition);
        self.chooser
            .pick_leader(leader, rack, self.ranks(), hash)
            .broker_id
    }

    /// The Sluice node shown as the controller, for a real controller `real`.
    fn controller_for(&self, real: BrokerId, rack: Option<&str>) -> BrokerId {
        let hash = stable_hash(&[b"controller", &real.0.to_be_bytes()]);
        self.chooser.pick(rack, hash).broker_id
    }

    /// The bytes that place a topic's partitions: its name when known (so that
    /// requests by name and by id agree), else its id.
    fn topic_key(&self, name: Option<&StrBytes>, id: TopicId) -> Vec<u8> {
        let name = name
            .filter(|n| !n.is_empty())
            .or_else(|| self.view.topic_name(id).map(|n| &n.0));
        match name {
            Some(name) => name.as_bytes().to_vec(),
            None => id.0.to_be_bytes().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests;
