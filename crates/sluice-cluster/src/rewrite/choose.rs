//! Choosing which Sluice node stands in for a real broker.
//!
//! Every choice is a pure function of (the up Sluice nodes, the real broker's
//! rack, a stable hash of what is being placed), so every Sluice instance
//! gives every client the same answer, and answers do not change from one
//! Metadata response to the next unless a node goes up or down or a leader
//! moves to another rack. Sluice routes by its own view of the cluster, never
//! by the client's, so the mapping only needs to be stable and to spread load.
//!
//! **Partition leaders follow whole brokers** ([`Chooser::pick_leader`]). A
//! consumer keeps one fetch in flight per node it sees, and Kafka's Java
//! consumer sends none to a node while any partition it leads still has
//! buffered records. If a node stood for a share of every broker's
//! partitions, each of its fetches would be split over the brokers, and a
//! consumer could not overlap fetching from one broker with processing
//! another's records. So the node shown as a partition's leader is picked by
//! where its real leader stands among the brokers partitions are placed by
//! (its rank by id, in its rack when the rack has nodes): with as many nodes
//! as brokers, each node stands for exactly one broker, and a consumer's
//! fetches go as they would directly. With fewer nodes each stands for
//! several whole brokers; with more, a broker's partitions spread (by their
//! hash) over the nodes that share its rank modulo the broker count.
//!
//! **Ranks stay put when a broker fails.** The brokers ranked are every
//! listed broker *and every replica a known partition names*
//! ([`ClusterView::placed_brokers`]): a killed or hung broker leaves the
//! broker list when the controller fences it, but stays a replica of its
//! partitions, so it keeps its rank and so does every other broker. Only the
//! partitions whose real leader moved are shown on another node, as they
//! would move to another broker directly. Were ranks taken over the listed
//! brokers alone, a broker leaving would shift the ranks above it and move
//! the shown leader of most partitions; two Sluice nodes learn of the fence
//! a moment apart, so for that moment they would show one partition on two
//! nodes, and an idempotent producer would have batches of one partition in
//! flight to one real leader over two connections, where they can arrive
//! out of order (OUT_OF_ORDER_SEQUENCE_NUMBER, aborted transactions). A
//! Sluice node refuses a Produce for a partition it does not show
//! (`route/produce_fetch.rs`), as a broker refuses one for a partition it
//! does not lead, so one partition's batches never take two paths.
//!
//! ```text
//! brokers 1 2 3, two Sluice nodes A B; ranks 0 1 2 → nodes A B A
//! t=0   broker 2 hangs
//! t≈9s  fenced: the broker list is 1 3, but 2 is still a replica
//!       ranks stay 0 1 2: partitions led by 1 and 3 stay on A;
//!       those 2 led move to wherever their new leader is shown
//! ```
//!
//! The hash is FNV-1a with a 64-bit finalizer, written out here rather than
//! taken from `std` because `DefaultHasher` is not guaranteed to be the same
//! across Rust releases, and two Sluice builds must agree.

use std::collections::HashMap;

use sluice_codec::kafka_protocol::messages::BrokerId;

use crate::topology::{ClusterView, ShotoverNode};

/// A stable 64-bit hash of `parts` (each part length-prefixed, so that
/// `["ab", "c"]` and `["a", "bc"]` differ).
pub(crate) fn stable_hash(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .fold(StableHasher::new(), |h, part| h.part(part))
        .finish()
}

/// [`stable_hash`] fed one part at a time: a copy taken after a common
/// prefix (a topic's, see [`topic_hasher`]) hashes only what follows it,
/// with the same result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StableHasher(u64);

impl StableHasher {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hasher of no parts yet.
    pub(crate) fn new() -> Self {
        Self(Self::OFFSET)
    }

    /// Adds one part (length-prefixed).
    pub(crate) fn part(self, part: &[u8]) -> Self {
        let mut h = self.0;
        let len = part.len() as u64;
        for byte in len.to_le_bytes().iter().chain(part.iter()) {
            h ^= u64::from(*byte);
            h = h.wrapping_mul(Self::PRIME);
        }
        Self(h)
    }

    /// The hash of the parts added.
    pub(crate) fn finish(self) -> u64 {
        // fmix64 from MurmurHash3: FNV's low bits alone spread poorly under `%`.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    /// The hash placing `partition` of the topic this hasher was made for
    /// by [`topic_hasher`]: [`partition_hash`] without rehashing the topic.
    pub(crate) fn partition(self, partition: i32) -> u64 {
        self.part(&partition.to_be_bytes()).finish()
    }
}

/// The hasher of a topic's partitions (see [`StableHasher::partition`]).
pub(crate) fn topic_hasher(topic: &[u8]) -> StableHasher {
    StableHasher::new().part(b"partition").part(topic)
}

/// The hash that places a partition.
pub(crate) fn partition_hash(topic: &[u8], partition: i32) -> u64 {
    topic_hasher(topic).partition(partition)
}

/// Where each real broker partitions are placed by stands, by id: among the
/// brokers of its rack, and among all (see [`Chooser::pick_leader`] and
/// [`ClusterView::placed_brokers`]).
#[derive(Debug, Default)]
pub(crate) struct BrokerRanks<'a> {
    /// Broker → (its rank in its rack, its rank among all).
    ranks: HashMap<BrokerId, (usize, usize)>,
    /// Rack → how many brokers it has (`None`: the brokers without one).
    per_rack: HashMap<Option<&'a str>, usize>,
    /// How many brokers are known.
    all: usize,
}

impl<'a> BrokerRanks<'a> {
    /// The ranks of the brokers `view` places partitions by.
    pub(crate) fn new(view: &'a ClusterView) -> Self {
        // The view keeps its brokers by id, so both ranks go by id.
        let mut ranks = HashMap::new();
        let mut per_rack: HashMap<Option<&str>, usize> = HashMap::new();
        let mut all = 0;
        for (id, rack) in view.placed_brokers() {
            let in_rack = per_rack.entry(rack).or_default();
            ranks.insert(id, (*in_rack, all));
            *in_rack += 1;
            all += 1;
        }
        Self {
            ranks,
            per_rack,
            all,
        }
    }

    /// `broker`'s rank and the broker count, among its rack's brokers
    /// (`in_rack`) or among all; `None` for a broker not known.
    fn rank(&self, broker: BrokerId, in_rack: Option<&str>) -> Option<(usize, usize)> {
        let &(rank_in_rack, rank) = self.ranks.get(&broker)?;
        match in_rack {
            Some(rack) => Some((rank_in_rack, *self.per_rack.get(&Some(rack))?)),
            None => Some((rank, self.all)),
        }
    }
}

/// The up Sluice nodes, indexed by rack.
#[derive(Debug)]
pub(crate) struct Chooser<'a> {
    /// Up nodes sorted by broker id; never empty.
    up: Vec<&'a ShotoverNode>,
    /// Rack → indexes into `up`.
    by_rack: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Chooser<'a> {
    /// None when no node is up.
    pub(crate) fn new(nodes: &'a [ShotoverNode]) -> Option<Self> {
        let mut up: Vec<&ShotoverNode> = nodes.iter().filter(|n| n.up).collect();
        if up.is_empty() {
            return None;
        }
        up.sort_by_key(|n| n.broker_id);
        up.dedup_by_key(|n| n.broker_id);
        let mut by_rack: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in up.iter().enumerate() {
            by_rack.entry(&*node.rack).or_default().push(i);
        }
        Some(Self { up, by_rack })
    }

    /// The up nodes, sorted by broker id.
    pub(crate) fn up(&self) -> &[&'a ShotoverNode] {
        &self.up
    }

    /// The index (into [`up`](Self::up)) of the node for `hash`: among the
    /// nodes in `rack` when there are any, else among all up nodes.
    fn pick_index(&self, rack: Option<&str>, hash: u64) -> usize {
        match rack.and_then(|r| self.by_rack.get(r)) {
            Some(in_rack) => in_rack[modulo(hash, in_rack.len())],
            None => modulo(hash, self.up.len()),
        }
    }

    /// The node for `hash`, preferring `rack`.
    pub(crate) fn pick(&self, rack: Option<&str>, hash: u64) -> &'a ShotoverNode {
        self.up[self.pick_index(rack, hash)]
    }

    /// The node shown as leader of a partition (placed by `hash`) that real
    /// broker `leader` of `rack` leads: the node standing for that broker
    /// (see the module doc). A broker the ranks do not know (not yet in the
    /// view) falls back to [`pick`](Self::pick).
    pub(crate) fn pick_leader(
        &self,
        leader: BrokerId,
        rack: Option<&str>,
        ranks: &BrokerRanks<'_>,
        hash: u64,
    ) -> &'a ShotoverNode {
        self.up[self.plan_index(self.leader_plan(leader, rack, ranks), hash)]
    }

    /// What [`pick_leader`](Self::pick_leader) decides from the real leader
    /// alone, whatever the partition: a response naming one leader for many
    /// partitions decides it once.
    pub(crate) fn leader_plan(
        &self,
        leader: BrokerId,
        rack: Option<&str>,
        ranks: &BrokerRanks<'_>,
    ) -> LeaderPlan<'_> {
        let in_rack = rack.and_then(|r| self.by_rack.get_key_value(r));
        let nodes = in_rack.map(|(_, nodes)| nodes.as_slice());
        match ranks.rank(leader, in_rack.map(|(r, _)| *r)) {
            Some((rank, brokers)) => LeaderPlan::Ranked {
                rank,
                brokers,
                nodes,
            },
            None => LeaderPlan::Hashed { nodes },
        }
    }

    /// The index (into [`up`](Self::up)) of the node `plan` shows as the
    /// leader of the partition placed by `hash`.
    pub(crate) fn plan_index(&self, plan: LeaderPlan<'_>, hash: u64) -> usize {
        match plan {
            LeaderPlan::Ranked {
                rank,
                brokers,
                nodes: Some(nodes),
            } => nodes[stand_for(rank, brokers, nodes.len(), hash)],
            LeaderPlan::Ranked {
                rank,
                brokers,
                nodes: None,
            } => stand_for(rank, brokers, self.up.len(), hash),
            LeaderPlan::Hashed { nodes: Some(nodes) } => nodes[modulo(hash, nodes.len())],
            LeaderPlan::Hashed { nodes: None } => modulo(hash, self.up.len()),
        }
    }

    /// Fills `out` with a replica list of at most `count` distinct nodes:
    /// the node at `leader` (an index into [`up`](Self::up), when there is a
    /// leader) first, then the following up nodes in broker-id order,
    /// wrapping around. Without a leader the list starts at a node chosen by
    /// `hash`. Reuses `out`'s memory.
    pub(crate) fn replicas_into(
        &self,
        leader: Option<usize>,
        hash: u64,
        count: usize,
        out: &mut Vec<BrokerId>,
    ) {
        let n = self.up.len();
        let start = leader.unwrap_or_else(|| modulo(hash, n));
        out.clear();
        out.extend((0..count.min(n)).map(|k| self.up[(start + k) % n].broker_id));
    }
}

/// What [`Chooser::pick_leader`] decides from a real leader alone
/// ([`Chooser::leader_plan`]); [`Chooser::plan_index`] adds the partition's
/// hash. Borrows the chooser's rack index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaderPlan<'c> {
    /// A broker the ranks know: its rank among `brokers` brokers, shown on
    /// one of `nodes` (indexes into the up nodes: its rack's), or of all up
    /// nodes when `None`.
    Ranked {
        rank: usize,
        brokers: usize,
        nodes: Option<&'c [usize]>,
    },
    /// A broker the ranks do not know: by hash among `nodes`, or among all
    /// up nodes when `None`.
    Hashed { nodes: Option<&'c [usize]> },
}

/// Which of `nodes` nodes stands for the broker of rank `rank` among
/// `brokers`, for a partition placed by `hash`: rank modulo the nodes when
/// there are no more nodes than brokers, else one of the nodes whose index
/// is the rank modulo the brokers.
fn stand_for(rank: usize, brokers: usize, nodes: usize, hash: u64) -> usize {
    if nodes <= brokers {
        return rank % nodes.max(1);
    }
    // rank < brokers < nodes: the indexes rank, rank + brokers, ... below nodes.
    let slots = (nodes - 1 - rank) / brokers + 1;
    rank + brokers * modulo(hash, slots)
}

fn modulo(hash: u64, n: usize) -> usize {
    // n > 0 everywhere this is called; usize fits in u64 on every target.
    (hash % n.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeSet;

    use super::*;
    use crate::topology::fixtures;

    #[test]
    fn hash_is_stable_and_separates_parts() {
        // Pinned: a change here changes every client's view of leadership.
        assert_eq!(stable_hash(&[b"a"]), stable_hash(&[b"a"]));
        assert_ne!(stable_hash(&[b"ab", b"c"]), stable_hash(&[b"a", b"bc"]));
        assert_ne!(partition_hash(b"t", 0), partition_hash(b"t", 1));
        assert_eq!(stable_hash(&[b"sluice"]), 0x4235_a9a2_f0fa_a7ff);
    }

    #[test]
    fn a_topic_hasher_gives_the_partition_hash() {
        for topic in [&b""[..], b"t", b"orders", &[0xff; 300]] {
            let hasher = topic_hasher(topic);
            for p in [-1, 0, 1, 19, i32::MAX] {
                let whole = stable_hash(&[b"partition", topic, &p.to_be_bytes()]);
                assert_eq!(hasher.partition(p), whole);
                assert_eq!(partition_hash(topic, p), whole);
            }
        }
    }

    #[test]
    fn a_node_stands_for_whole_brokers() {
        // No more nodes than brokers: rank modulo the nodes, whatever the hash.
        for hash in 0..20 {
            assert_eq!(
                (0..3).map(|r| stand_for(r, 3, 3, hash)).collect::<Vec<_>>(),
                [0, 1, 2]
            );
            assert_eq!(
                (0..5).map(|r| stand_for(r, 5, 2, hash)).collect::<Vec<_>>(),
                [0, 1, 0, 1, 0]
            );
            assert_eq!(stand_for(0, 1, 1, hash), 0);
        }
        // More nodes: the nodes at the rank modulo the brokers, all used.
        let seen = |rank| {
            (0..64)
                .map(|h| stand_for(rank, 3, 8, h))
                .collect::<BTreeSet<_>>()
        };
        assert_eq!(seen(0), BTreeSet::from([0, 3, 6]));
        assert_eq!(seen(1), BTreeSet::from([1, 4, 7]));
        assert_eq!(seen(2), BTreeSet::from([2, 5]));
    }

    #[test]
    fn picks_in_rack_and_falls_back_to_all() {
        let nodes = fixtures::sluice_nodes().snapshot();
        let chooser = Chooser::new(&nodes).unwrap();
        assert_eq!(chooser.up().len(), 5, "the down node is left out");
        for h in 0..50 {
            let a = chooser.pick(Some("rack-a"), h).broker_id.0;
            assert!(a == 100 || a == 101);
            // rack-c's only node is down: any up node.
            assert_ne!(chooser.pick(Some("rack-c"), h).broker_id.0, 105);
            assert_ne!(chooser.pick(None, h).broker_id.0, 105);
        }
        let leader = chooser.pick_index(Some("rack-b"), 7);
        let mut replicas = vec![BrokerId(-7); 9];
        chooser.replicas_into(Some(leader), 7, 3, &mut replicas);
        assert_eq!(replicas[0], chooser.up()[leader].broker_id);
        assert_eq!(replicas.len(), 3);
        chooser.replicas_into(None, 7, 9, &mut replicas);
        assert_eq!(replicas.len(), 5, "at most the up nodes");
        assert!(Chooser::new(&[]).is_none());
    }
}
