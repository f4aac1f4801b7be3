//! [`ClusterView`]: the real Kafka cluster as Sluice last heard it.
//!
//! It holds what routing needs and nothing more: brokers (id, address, rack),
//! the controller, each topic's partitions (leader, epoch, replicas) and the
//! group/transaction/share coordinators. It is filled from Metadata responses
//! (every version, 0 to 13) and FindCoordinator responses (v0–3, and the
//! batched v4+), and pruned when a broker answers with an error that says a
//! part of it is stale (see [`staleness`](super::staleness)).
//!
//! It also keeps the brokers that partitions are *placed* by
//! ([`ClusterView::placed_brokers`]): every listed broker and every broker a
//! known partition names as a replica, live or not. A broker that is fenced
//! (killed, hung) leaves the broker list but stays a replica of its
//! partitions, so it keeps its place, and the Sluice node shown for the
//! partitions of every other broker stays put (see `rewrite/choose.rs`).
//!
//! Two rules keep it from going backwards:
//! - a partition's entry is replaced only by one with an equal or newer leader
//!   epoch, since a lagging broker may answer Metadata with an old leader;
//! - a topic whose id changed was deleted and recreated, so its partitions are
//!   replaced outright (epochs restart with the new topic).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::hash::Map;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_codec::kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::{BrokerId, TopicName};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use std::time::Instant;

use super::Address;
use crate::error_codes::{ErrorCode, NONE, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};

mod replica;

pub use replica::FOLLOWER_FETCH_VERSION;

/// A topic id. Kept as the `u128` of the UUID (`uuid.as_u128()`), since this
/// crate does not depend on `uuid` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TopicId(pub u128);

impl TopicId {
    /// The all-zero id, which Kafka uses for "no id".
    pub const NIL: TopicId = TopicId(0);

    /// Whether this is the all-zero id.
    pub fn is_nil(self) -> bool {
        self.0 == 0
    }
}

/// A topic, named the way a request names it: by name, or (newer versions of
/// Fetch, Produce and Metadata) by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicRef {
    /// By name.
    Name(TopicName),
    /// By topic id.
    Id(TopicId),
}

impl From<TopicName> for TopicRef {
    fn from(name: TopicName) -> Self {
        TopicRef::Name(name)
    }
}

impl From<TopicId> for TopicRef {
    fn from(id: TopicId) -> Self {
        TopicRef::Id(id)
    }
}

/// A real broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// Its broker id.
    pub id: BrokerId,
    /// Its advertised address (never shown to clients).
    pub address: Address,
    /// Its rack, if the cluster is rack-aware.
    pub rack: Option<StrBytes>,
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The leader, or -1 when there is none.
    pub leader: BrokerId,
    /// The leader epoch, or -1 when the Metadata version did not carry it (< 7).
    pub leader_epoch: i32,
    /// All replicas.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Replicas that are offline.
    pub offline: Vec<BrokerId>,
    /// The partition's error code in the Metadata response (0, or e.g.
    /// LEADER_NOT_AVAILABLE).
    pub error_code: i16,
}

impl PartitionInfo {
    /// The leader, when there is one.
    pub fn leader(&self) -> Option<BrokerId> {
        (self.leader.0 >= 0).then_some(self.leader)
    }

    /// Whether this entry says what `p` says.
    fn describes(&self, p: &MetadataResponsePartition) -> bool {
        self.leader == p.leader_id
            && self.leader_epoch == p.leader_epoch
            && self.error_code == p.error_code
            && self.replicas == p.replica_nodes
            && self.isr == p.isr_nodes
            && self.offline == p.offline_replicas
    }

    /// Makes this entry say what `p` says, reusing the lists' memory.
    fn update_from(&mut self, p: &MetadataResponsePartition) {
        self.leader = p.leader_id;
        self.leader_epoch = p.leader_epoch;
        self.error_code = p.error_code;
        self.replicas.clone_from(&p.replica_nodes);
        self.isr.clone_from(&p.isr_nodes);
        self.offline.clone_from(&p.offline_replicas);
    }

    fn from_response(p: &MetadataResponsePartition) -> Self {
        Self {
            leader: p.leader_id,
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.clone(),
            isr: p.isr_nodes.clone(),
            offline: p.offline_replicas.clone(),
            error_code: p.error_code,
        }
    }
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Its name.
    pub name: TopicName,
    /// Its id, or [`TopicId::NIL`] when only old Metadata versions were seen.
    pub id: TopicId,
    /// Whether Kafka marks it internal (`__consumer_offsets`, ...).
    pub is_internal: bool,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The kind of coordinator a FindCoordinator `key_type` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoordinatorKeyType {
    /// 0: a consumer (or share, or streams) group id.
    Group,
    /// 1: a transactional id.
    Transaction,
    /// 2: a share-partition key (`groupId:topicId:partition`, KIP-932).
    Share,
}

impl CoordinatorKeyType {
    /// The wire value.
    pub fn as_i8(self) -> i8 {
        match self {
            CoordinatorKeyType::Group => 0,
            CoordinatorKeyType::Transaction => 1,
            CoordinatorKeyType::Share => 2,
        }
    }

    fn index(self) -> usize {
        self.as_i8() as usize
    }
}

impl TryFrom<i8> for CoordinatorKeyType {
    type Error = i8;

    /// Parses a wire `key_type`; returns the value back when unknown.
    fn try_from(value: i8) -> Result<Self, i8> {
        match value {
            0 => Ok(CoordinatorKeyType::Group),
            1 => Ok(CoordinatorKeyType::Transaction),
            2 => Ok(CoordinatorKeyType::Share),
            other => Err(other),
        }
    }
}

/// What applying a Metadata response changed, for the caller's bookkeeping
/// (e.g. closing connections to brokers that left).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataApplied {
    /// Brokers that were not known before.
    pub added_brokers: Vec<BrokerId>,
    /// Brokers that are no longer listed.
    pub removed_brokers: Vec<BrokerId>,
    /// Whether the controller id changed.
    pub controller_changed: bool,
    /// Partitions the response described with an older leader epoch than
    /// the view's: the view kept its own entry (for the driver to log).
    pub older_epochs_ignored: Vec<OlderEpoch>,
}

/// A partition a Metadata response described with an older leader epoch
/// than the view's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OlderEpoch {
    /// The topic.
    pub topic: TopicName,
    /// The partition.
    pub partition: i32,
    /// The view's epoch, kept.
    pub kept: i32,
    /// The response's epoch, ignored.
    pub ignored: i32,
}

/// The real cluster: brokers, controller, topics and coordinators.
#[derive(Debug, Default)]
pub struct ClusterView {
    brokers: BTreeMap<BrokerId, Broker>,
    controller: Option<BrokerId>,
    topics: Map<TopicName, TopicInfo>,
    names_by_id: Map<TopicId, TopicName>,
    /// Indexed by [`CoordinatorKeyType::index`].
    coordinators: [HashMap<StrBytes, BrokerId>; 3],
    /// Spreads [`ClusterView::any_broker`] over the brokers.
    next_any: AtomicUsize,
    /// Partitions whose consumer fetches go to the leader only, until the
    /// instant given (see [`replica`]).
    follower_fences: HashMap<(TopicName, i32), Instant>,
    /// The brokers partitions are placed by, with the rack last seen for
    /// each (see [`ClusterView::placed_brokers`]). Rebuilt with each
    /// Metadata response, since topics and brokers come and go.
    placed: BTreeMap<BrokerId, Option<StrBytes>>,
}

impl Clone for ClusterView {
    fn clone(&self) -> Self {
        Self {
            brokers: self.brokers.clone(),
            controller: self.controller,
            topics: self.topics.clone(),
            names_by_id: self.names_by_id.clone(),
            coordinators: self.coordinators.clone(),
            next_any: AtomicUsize::new(self.next_any.load(Ordering::Relaxed)),
            follower_fences: self.follower_fences.clone(),
            placed: self.placed.clone(),
        }
    }
}

impl ClusterView {
    /// An empty view: no brokers, no topics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Updates the view from a Metadata response of any version (0 to 13).
    ///
    /// The broker list is replaced by the response's (a Metadata response
    /// lists every live broker); topics are updated one by one (a response
    /// may cover only some topics); a topic answered with
    /// UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID is forgotten. A v13
    /// response with a top-level error changes nothing.
    pub fn apply_metadata(&mut self, version: i16, resp: &MetadataResponse) -> MetadataApplied {
        let mut applied = MetadataApplied::default();
        if resp.error_code != 0 {
            return applied;
        }
        if !resp.brokers.is_empty() {
            let brokers: BTreeMap<BrokerId, Broker> = resp
                .brokers
                .iter()
                .map(|b| {
                    let broker = Broker {
                        id: b.node_id,
                        address: Address::new(b.host.clone(), b.port),
                        rack: b.rack.clone(),
                    };
                    (b.node_id, broker)
                })
                .collect();
            applied.added_brokers = brokers
                .keys()
                .filter(|id| !self.brokers.contains_key(*id))
                .copied()
                .collect();
            applied.removed_brokers = self
                .brokers
                .keys()
                .filter(|id| !brokers.contains_key(*id))
                .copied()
                .collect();
            self.brokers = brokers;
        }
        if version >= 1 {
            let controller = (resp.controller_id.0 >= 0).then_some(resp.controller_id);
            applied.controller_changed = controller != self.controller;
            self.controller = controller;
        }
        for topic in &resp.topics {
            self.apply_topic(topic, &mut applied.older_epochs_ignored);
        }
        self.place_brokers();
        applied
    }

    /// Rebuilds [`placed`](Self::placed): the listed brokers with their racks,
    /// then every replica of a known partition, with the rack it had when it
    /// was last listed (a fenced broker is not listed, but its rack is the
    /// same when it comes back).
    fn place_brokers(&mut self) {
        let mut placed: BTreeMap<BrokerId, Option<StrBytes>> = self
            .brokers
            .values()
            .map(|b| (b.id, b.rack.clone()))
            .collect();
        let replicas = self
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .flat_map(|p| p.replicas.iter().chain(&p.offline));
        for id in replicas {
            if id.0 >= 0 && !placed.contains_key(id) {
                let rack = self.placed.get(id).cloned().flatten();
                placed.insert(*id, rack);
            }
        }
        self.placed = placed;
    }

    fn apply_topic(&mut self, topic: &MetadataResponseTopic, older: &mut Vec<OlderEpoch>) {
        let id = TopicId(topic.topic_id.as_u128());
        let name = match &topic.name {
            Some(name) if !name.0.is_empty() => Some(name.clone()),
            _ => self.names_by_id.get(&id).cloned(),
        };
        let Some(name) = name else {
            return;
        };
        match ErrorCode::from_wire(topic.error_code) {
            NONE => {}
            UNKNOWN_TOPIC_OR_PARTITION | UNKNOWN_TOPIC_ID => {
                self.forget_topic(&TopicRef::Name(name));
                return;
            }
            _ => return,
        }
        if let Some(old) = self.topics.get_mut(&name) {
            let recreated = !old.id.is_nil() && !id.is_nil() && old.id != id;
            if !recreated {
                // The usual refresh: the same topic, most partitions as
                // they were. Update them in place.
                if !id.is_nil() {
                    old.id = id;
                }
                if !old.id.is_nil() && self.names_by_id.get(&old.id) != Some(&name) {
                    self.names_by_id.insert(old.id, name.clone());
                }
                old.is_internal = topic.is_internal;
                update_partitions(&name, &mut old.partitions, &topic.partitions, older);
                return;
            }
            self.names_by_id.remove(&old.id);
        }
        let partitions: BTreeMap<i32, PartitionInfo> = topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, PartitionInfo::from_response(p)))
            .collect();
        if !id.is_nil() {
            self.names_by_id.insert(id, name.clone());
        }
        let info = TopicInfo {
            name: name.clone(),
            id,
            is_internal: topic.is_internal,
            partitions,
        };
        self.topics.insert(name, info);
    }

    /// Updates the coordinators from a FindCoordinator response.
    ///
    /// v0–3 answer for one key that the response does not repeat: pass the
    /// request's key as `request_key` (nothing is recorded without it). v4+
    /// answer for each key of the batch. A key answered with an error is
    /// forgotten. A coordinator broker not yet in the view is added (without
    /// a rack) so that it can be reached before the next Metadata refresh.
    pub fn apply_find_coordinator(
        &mut self,
        version: i16,
        key_type: CoordinatorKeyType,
        request_key: Option<&StrBytes>,
        resp: &FindCoordinatorResponse,
    ) {
        if version < 4 {
            if let Some(key) = request_key {
                let found = (resp.error_code == 0).then_some((resp.node_id, &resp.host, resp.port));
                self.apply_coordinator(key_type, key, found);
            }
            return;
        }
        for c in &resp.coordinators {
            let found = (c.error_code == 0).then_some((c.node_id, &c.host, c.port));
            self.apply_coordinator(key_type, &c.key, found);
        }
    }

    fn apply_coordinator(
        &mut self,
        key_type: CoordinatorKeyType,
        key: &StrBytes,
        found: Option<(BrokerId, &StrBytes, i32)>,
    ) {
        let map = &mut self.coordinators[key_type.index()];
        match found {
            Some((id, host, port)) if id.0 >= 0 => {
                map.insert(key.clone(), id);
                self.brokers.entry(id).or_insert_with(|| Broker {
                    id,
                    address: Address::new(host.clone(), port),
                    rack: None,
                });
                self.placed.entry(id).or_insert(None);
            }
            _ => {
                map.remove(key.as_bytes());
            }
        }
    }

    /// Records (or clears) the controller, e.g. after NOT_CONTROLLER.
    #[cfg(any(test, feature = "fixtures"))]
    pub fn set_controller(&mut self, controller: Option<BrokerId>) {
        self.controller = controller;
    }

    /// Forgets the controller (after NOT_CONTROLLER).
    pub fn forget_controller(&mut self) {
        self.controller = None;
    }

    /// Forgets a coordinator (after NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE).
    /// Returns whether one was known.
    pub fn forget_coordinator(&mut self, key_type: CoordinatorKeyType, key: &str) -> bool {
        self.coordinators[key_type.index()]
            .remove(key.as_bytes())
            .is_some()
    }

    /// Forgets a topic (after UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID).
    /// Returns whether it was known.
    pub fn forget_topic(&mut self, topic: &TopicRef) -> bool {
        let Some(name) = self.resolve(topic).cloned() else {
            return false;
        };
        match self.topics.remove(&name) {
            Some(info) => {
                self.names_by_id.remove(&info.id);
                true
            }
            None => false,
        }
    }

    /// Forgets a partition's leader (after NOT_LEADER_OR_FOLLOWER and the
    /// like), keeping its epoch so that an older answer cannot restore it.
    /// Returns whether a leader was known.
    pub fn forget_leader(&mut self, topic: &TopicRef, partition: i32) -> bool {
        let Some(name) = self.resolve(topic).cloned() else {
            return false;
        };
        let Some(p) = self
            .topics
            .get_mut(&name)
            .and_then(|t| t.partitions.get_mut(&partition))
        else {
            return false;
        };
        let had = p.leader().is_some();
        p.leader = BrokerId(-1);
        had
    }

    fn resolve<'a>(&'a self, topic: &'a TopicRef) -> Option<&'a TopicName> {
        match topic {
            TopicRef::Name(name) => Some(name),
            TopicRef::Id(id) => self.names_by_id.get(id),
        }
    }

    /// A topic, by name or id.
    pub fn topic(&self, topic: &TopicRef) -> Option<&TopicInfo> {
        self.topics.get(self.resolve(topic)?)
    }

    /// The name of the topic with this id.
    pub fn topic_name(&self, id: TopicId) -> Option<&TopicName> {
        self.names_by_id.get(&id)
    }

    /// The id of the topic with this name, when a Metadata v10+ response gave one.
    #[cfg(test)]
    pub fn topic_id(&self, name: &TopicName) -> Option<TopicId> {
        self.topics
            .get(name)
            .map(|t| t.id)
            .filter(|id| !id.is_nil())
    }

    /// One partition of a topic.
    pub fn partition(&self, topic: &TopicRef, partition: i32) -> Option<&PartitionInfo> {
        self.topic(topic)?.partitions.get(&partition)
    }

    /// The leader of a partition, when known.
    pub fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.partition(topic, partition)?.leader()
    }

    /// The coordinator for a group, transactional id or share key, when known.
    pub fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        self.coordinators[key_type.index()]
            .get(key.as_bytes())
            .copied()
    }

    /// The controller, when known.
    pub fn controller(&self) -> Option<BrokerId> {
        self.controller
    }

    /// A broker, by id.
    #[cfg(test)]
    pub fn broker(&self, id: BrokerId) -> Option<&Broker> {
        self.brokers.get(&id)
    }

    /// A broker's address, by id.
    pub fn broker_address(&self, id: BrokerId) -> Option<&Address> {
        self.brokers.get(&id).map(|b| &b.address)
    }

    /// A broker's rack, by id (None when unknown or not rack-aware).
    pub fn broker_rack(&self, id: BrokerId) -> Option<&StrBytes> {
        self.brokers.get(&id)?.rack.as_ref()
    }

    /// All known brokers, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &Broker> {
        self.brokers.values()
    }

    /// The brokers partitions are placed by, by id, with their racks: every
    /// listed broker and every replica of a known partition, so that a
    /// broker that is fenced keeps its place while its partitions still
    /// name it (see the module doc).
    pub fn placed_brokers(&self) -> impl Iterator<Item = (BrokerId, Option<&str>)> {
        self.placed.iter().map(|(id, rack)| (*id, rack.as_deref()))
    }

    /// Some broker, for requests any broker can serve (Metadata, ListGroups
    /// parts, ...). Successive calls go round the brokers. None when no broker
    /// is known yet.
    pub fn any_broker(&self) -> Option<BrokerId> {
        let n = self.brokers.len();
        if n == 0 {
            return None;
        }
        let i = self.next_any.fetch_add(1, Ordering::Relaxed) % n;
        self.brokers.keys().nth(i).copied()
    }
}

/// Updates a known topic's partitions from a Metadata answer for it, in
/// place: the partitions are the answer's, each as the answer describes it,
/// except that an entry whose leader epoch is newer than the answer's is kept
/// (and returned in `older`; an epoch of -1, from Metadata < v7, carries no
/// order, so the answer wins). An entry the answer describes as it is is left
/// alone, and a changed one keeps its lists' memory, so a refresh that
/// changes nothing allocates nothing.
fn update_partitions(
    topic: &TopicName,
    partitions: &mut BTreeMap<i32, PartitionInfo>,
    answer: &[MetadataResponsePartition],
    older: &mut Vec<OlderEpoch>,
) {
    let first_older = older.len();
    for p in answer {
        let Some(o) = partitions.get_mut(&p.partition_index) else {
            partitions.insert(p.partition_index, PartitionInfo::from_response(p));
            continue;
        };
        if p.leader_epoch >= 0 && o.leader_epoch > p.leader_epoch {
            older.push(OlderEpoch {
                topic: topic.clone(),
                partition: p.partition_index,
                kept: o.leader_epoch,
                ignored: p.leader_epoch,
            });
        } else if !o.describes(p) {
            o.update_from(p);
        }
    }
    // By partition, as a map of the answer's partitions would give them.
    older[first_older..].sort_by_key(|o| o.partition);
    if partitions.len() > distinct_partitions(answer) {
        // The answer no longer lists some partition: keep only its own.
        let listed: BTreeSet<i32> = answer.iter().map(|p| p.partition_index).collect();
        partitions.retain(|index, _| listed.contains(index));
    }
}

/// How many distinct partitions an answer lists (brokers list them in
/// order, once each, which is checked first).
fn distinct_partitions(answer: &[MetadataResponsePartition]) -> usize {
    if answer
        .windows(2)
        .all(|w| w[0].partition_index < w[1].partition_index)
    {
        return answer.len();
    }
    let distinct: BTreeSet<i32> = answer.iter().map(|p| p.partition_index).collect();
    distinct.len()
}

#[cfg(test)]
mod tests;
