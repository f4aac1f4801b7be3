//! Which replica serves a consumer's fetch: rack-aware follower fetching.
//!
//! When Sluice runs in a rack (availability zone) and a partition's leader
//! sits in another one, reading from a follower in Sluice's own rack saves
//! cross-rack traffic, as KIP-392 lets a consumer do with `client.rack`.
//! Clients cannot do it themselves behind Sluice (they never see the real
//! replicas), so Sluice decides, per partition, in [`ClusterView::fetch_replica`]:
//!
//! 1. no local rack configured, or the leader is in the local rack: the leader;
//! 2. else an in-sync, online replica in the local rack that the caller can
//!    use (not suspect), chosen by partition index among those (stable, so a
//!    partition keeps its follower, and partitions spread over followers);
//! 3. else the leader (an out-of-rack request, counted by the caller).
//!
//! A follower serves consumer fetches of v11+ (the first version with
//! client metadata; older ones are refused with NOT_LEADER_OR_FOLLOWER), up
//! to its own high watermark, which trails the leader's by about one
//! replication round trip. Only in-sync replicas are chosen, so a consumer's
//! position (at most the leader's high watermark) is never past the
//! follower's log end.
//!
//! **Fences.** When a follower answers a partition with an error, that
//! partition's consumer fetches go to the leader for [`FOLLOWER_FENCE`]
//! ([`ClusterView::fence_follower_fetch`]), so the authoritative broker
//! answers next. This matters most for OFFSET_OUT_OF_RANGE, which a client
//! acts on by resetting its position: from a lagging follower it may be
//! false, so the sink turns it into a retriable error and lets the leader
//! say. A timeline, for a follower F and leader L of partition p:
//!
//! ```text
//! t0      fetch p -> F       F: OFFSET_OUT_OF_RANGE
//!         client gets NOT_LEADER_OR_FOLLOWER; p fenced until t0 + 30 s
//! t0+δ    client refreshes metadata, fetches p again -> L (fenced)
//!         L answers with records, or with the true OFFSET_OUT_OF_RANGE
//! t0+30s  the fence lapses; p's fetches go back to F
//! ```

use std::time::Duration;

use sluice_codec::kafka_protocol::messages::BrokerId;
use std::time::Instant;

use super::{ClusterView, TopicRef};

/// How long a partition's consumer fetches stay on its leader after a
/// follower answered them with an error.
pub(crate) const FOLLOWER_FENCE: Duration = Duration::from_secs(30);

/// The first Fetch version a follower serves to consumers (KIP-392).
pub const FOLLOWER_FETCH_VERSION: i16 = 11;

impl ClusterView {
    /// The broker that should serve a consumer's fetch of `partition` of
    /// `topic` for a Sluice node in `rack` (see the module doc); `usable`
    /// says whether a follower may be chosen (e.g. not suspect). `None` when
    /// the partition has no known leader.
    pub fn fetch_replica(
        &self,
        topic: &TopicRef,
        partition: i32,
        rack: Option<&str>,
        now: Instant,
        usable: impl Fn(BrokerId) -> bool,
    ) -> Option<BrokerId> {
        let name = self.resolve(topic)?;
        let p = self.topics.get(name)?.partitions.get(&partition)?;
        let leader = p.leader()?;
        let Some(rack) = rack.filter(|r| !r.is_empty()) else {
            return Some(leader);
        };
        let in_rack = |id: BrokerId| self.broker_rack(id).map(|r| &**r) == Some(rack);
        if in_rack(leader) {
            return Some(leader);
        }
        let fenced = self
            .follower_fences
            .get(&(name.clone(), partition))
            .is_some_and(|until| *until > now);
        if fenced {
            return Some(leader);
        }
        let mut followers: Vec<BrokerId> = p
            .isr
            .iter()
            .copied()
            .filter(|id| *id != leader && !p.offline.contains(id) && in_rack(*id) && usable(*id))
            .collect();
        followers.sort_unstable();
        followers.dedup();
        let count = followers.len().max(1);
        let pick = usize::try_from(partition.unsigned_abs()).unwrap_or(0) % count;
        Some(followers.get(pick).copied().unwrap_or(leader))
    }

    /// Sends consumer fetches of `partition` of `topic` to its leader for
    /// [`FOLLOWER_FENCE`] from `now`. Expired fences are dropped on the way.
    /// Returns false for a topic id the view cannot name.
    pub fn fence_follower_fetch(&mut self, topic: &TopicRef, partition: i32, now: Instant) -> bool {
        let Some(name) = self.resolve(topic).cloned() else {
            return false;
        };
        self.follower_fences.retain(|_, until| *until > now);
        self.follower_fences
            .insert((name, partition), now + FOLLOWER_FENCE);
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use sluice_codec::kafka_protocol::messages::TopicName;
    use sluice_codec::kafka_protocol::messages::metadata_response::{
        MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use sluice_codec::kafka_protocol::protocol::StrBytes;

    use super::*;

    fn broker(id: i32, rack: &str) -> MetadataResponseBroker {
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(9000 + id)
            .with_rack(Some(StrBytes::from_string(rack.to_owned())))
    }

    fn partition(
        index: i32,
        leader: i32,
        isr: &[i32],
        offline: &[i32],
    ) -> MetadataResponsePartition {
        let ids = |v: &[i32]| v.iter().map(|i| BrokerId(*i)).collect::<Vec<_>>();
        MetadataResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(leader))
            .with_leader_epoch(1)
            .with_replica_nodes(ids(&[1, 2, 3, 4]))
            .with_isr_nodes(ids(isr))
            .with_offline_replicas(ids(offline))
    }

    /// Brokers 1 (az-1), 2 and 4 (az-2), 3 (az-3); topic `t` with partitions
    /// led by 1 (0, 1), 2 (2) and 1 with only 3 in sync besides (3).
    fn view() -> ClusterView {
        let mut view = ClusterView::new();
        let topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(vec![
                partition(0, 1, &[1, 2, 3, 4], &[]),
                partition(1, 1, &[1, 2, 3, 4], &[]),
                partition(2, 2, &[1, 2, 3, 4], &[]),
                partition(3, 1, &[1, 3], &[]),
                partition(4, 1, &[1, 2, 4], &[2, 4]),
            ]);
        let resp = MetadataResponse::default()
            .with_brokers(vec![
                broker(1, "az-1"),
                broker(2, "az-2"),
                broker(3, "az-3"),
                broker(4, "az-2"),
            ])
            .with_topics(vec![topic]);
        view.apply_metadata(12, &resp);
        view
    }

    fn t() -> TopicRef {
        TopicRef::Name(TopicName(StrBytes::from_static_str("t")))
    }

    fn pick(view: &ClusterView, p: i32, rack: Option<&str>, now: Instant) -> i32 {
        view.fetch_replica(&t(), p, rack, now, |_| true).unwrap().0
    }

    #[test]
    fn leader_without_a_rack_or_in_the_rack() {
        let view = view();
        let now = Instant::now();
        assert_eq!(pick(&view, 0, None, now), 1);
        assert_eq!(pick(&view, 0, Some(""), now), 1);
        assert_eq!(pick(&view, 0, Some("az-1"), now), 1);
        assert_eq!(
            pick(&view, 2, Some("az-2"), now),
            2,
            "the leader is in the rack"
        );
    }

    #[test]
    fn in_rack_in_sync_followers_spread_by_partition() {
        let view = view();
        let now = Instant::now();
        // Partitions 0 and 1 have followers 2 and 4 in az-2: one each.
        let (a, b) = (
            pick(&view, 0, Some("az-2"), now),
            pick(&view, 1, Some("az-2"), now),
        );
        assert_eq!([a.min(b), a.max(b)], [2, 4]);
        assert_eq!(pick(&view, 0, Some("az-2"), now), a, "stable");
        // Partition 3: az-2 has no in-sync replica; az-3 does.
        assert_eq!(pick(&view, 3, Some("az-2"), now), 1);
        assert_eq!(pick(&view, 3, Some("az-3"), now), 3);
        // Partition 4: its az-2 replicas are offline.
        assert_eq!(pick(&view, 4, Some("az-2"), now), 1);
        // No broker in the rack at all.
        assert_eq!(pick(&view, 0, Some("elsewhere"), now), 1);
    }

    #[test]
    fn unusable_followers_are_skipped() {
        let view = view();
        let now = Instant::now();
        let only_4 = view.fetch_replica(&t(), 0, Some("az-2"), now, |id| id.0 != 2);
        assert_eq!(only_4, Some(BrokerId(4)));
        let none = view.fetch_replica(&t(), 0, Some("az-2"), now, |id| id.0 == 1);
        assert_eq!(none, Some(BrokerId(1)));
    }

    #[test]
    fn unknown_partitions_and_leaderless_ones_have_no_replica() {
        let mut view = view();
        let now = Instant::now();
        assert_eq!(
            view.fetch_replica(&t(), 9, Some("az-2"), now, |_| true),
            None
        );
        view.forget_leader(&t(), 0);
        assert_eq!(
            view.fetch_replica(&t(), 0, Some("az-2"), now, |_| true),
            None
        );
    }

    #[test]
    fn a_fence_sends_fetches_to_the_leader_until_it_lapses() {
        let mut view = view();
        let start = Instant::now();
        let follower = pick(&view, 0, Some("az-2"), start);
        assert_ne!(follower, 1);
        assert!(view.fence_follower_fetch(&t(), 0, start));
        let fenced = start + FOLLOWER_FENCE - Duration::from_millis(1);
        assert_eq!(pick(&view, 0, Some("az-2"), fenced), 1, "fenced");
        assert_ne!(pick(&view, 1, Some("az-2"), fenced), 1, "only p0");
        let lapsed = start + FOLLOWER_FENCE;
        assert_eq!(pick(&view, 0, Some("az-2"), lapsed), follower, "lapsed");
        let unknown = TopicRef::Id(crate::topology::TopicId(42));
        assert!(!view.fence_follower_fetch(&unknown, 0, lapsed));
    }
}
