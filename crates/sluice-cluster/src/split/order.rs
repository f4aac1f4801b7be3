//! The client's order, kept across a split and restored by the merge.
//!
//! Kafka clients do not require a response to list topics, partitions or
//! groups in the order of the request (the Java client looks them up by key),
//! but a proxy should be stable and deterministic, and a response that mirrors
//! the request is the least surprising. A split records the order in which the
//! request named its topics and partitions ([`PartitionOrder`]) or its groups
//! ([`Order::Keys`]); the merge groups the parts' entries for one topic into a
//! single entry and sorts everything back into that order. Entries the
//! request did not name (a broker should never send any) go last, in the order
//! they came.
//!
//! A request that names the same topic twice gets one merged topic entry
//! holding the partitions of both, in request order.

use std::collections::HashMap;

use crate::hash::Map;
use std::hash::Hash;

use sluice_codec::kafka_protocol::messages::GroupId;

use super::TopicRef;
use crate::error_codes::ErrorCode;

/// A topic entry of a request or response: something keyed by a topic that
/// holds a list of partitions.
pub trait TopicEntry: Sized {
    /// The per-partition item.
    type Partition: Clone;

    /// The topic as the message names it at `version`.
    fn topic_ref(&self, version: i16) -> TopicRef;
    /// The partitions.
    fn partitions(&self) -> &[Self::Partition];
    /// The partitions, to add to.
    fn partitions_mut(&mut self) -> &mut Vec<Self::Partition>;
    /// The index of a partition item.
    fn partition_index(partition: &Self::Partition) -> i32;
    /// The same topic with no partitions.
    fn empty_like(&self) -> Self;
}

/// One `A` per topic entry of `topics`, made by `topic`, holding what
/// `partition` makes of each of the entry's partitions, in order: e.g. an
/// answer to every partition of a request.
pub fn map_topics<Q: TopicEntry, A: TopicEntry>(
    topics: &[Q],
    topic: impl Fn(&Q) -> A,
    partition: impl Fn(&Q::Partition) -> A::Partition,
) -> Vec<A> {
    let map = |entry: &Q| {
        let mut mapped = topic(entry);
        let partitions = entry.partitions().iter().map(&partition);
        mapped.partitions_mut().extend(partitions);
        mapped
    };
    topics.iter().map(map).collect()
}

/// Implements [`TopicEntry`] for a message struct.
///
/// `topic_entry!(Type, partitions_field, PartitionType, index_field, name(name_field))`
/// for topics always keyed by name, or
/// `... name_or_id(name_field, id_field, first_id_version)` for topics keyed by
/// id from a version on.
macro_rules! topic_entry {
    ($ty:ty, $parts:ident, $part:ty, $index:ident, name($name:ident)) => {
        impl $crate::split::order::TopicEntry for $ty {
            type Partition = $part;
            fn topic_ref(&self, _version: i16) -> $crate::split::TopicRef {
                $crate::split::TopicRef::Name(self.$name.clone())
            }
            $crate::split::order::topic_entry!(@common $parts, $part, $index);
            fn empty_like(&self) -> Self {
                let mut topic = Self::default();
                topic.$name = self.$name.clone();
                topic.unknown_tagged_fields = self.unknown_tagged_fields.clone();
                topic
            }
        }
    };
    ($ty:ty, $parts:ident, $part:ty, $index:ident, name_or_id($name:ident, $id:ident, $since:literal)) => {
        impl $crate::split::order::TopicEntry for $ty {
            type Partition = $part;
            fn topic_ref(&self, version: i16) -> $crate::split::TopicRef {
                if version >= $since {
                    $crate::split::TopicRef::Id($crate::split::TopicId(self.$id.as_u128()))
                } else {
                    $crate::split::TopicRef::Name(self.$name.clone())
                }
            }
            $crate::split::order::topic_entry!(@common $parts, $part, $index);
            fn empty_like(&self) -> Self {
                let mut topic = Self::default();
                topic.$name = self.$name.clone();
                topic.$id = self.$id;
                topic.unknown_tagged_fields = self.unknown_tagged_fields.clone();
                topic
            }
        }
    };
    (@common $parts:ident, $part:ty, $index:ident) => {
        fn partitions(&self) -> &[$part] {
            &self.$parts
        }
        fn partitions_mut(&mut self) -> &mut Vec<$part> {
            &mut self.$parts
        }
        fn partition_index(partition: &$part) -> i32 {
            partition.$index
        }
    };
}
pub(crate) use topic_entry;

/// A response's entry for one group: keyed by its group id, with an error code.
pub trait GroupEntry: Sized {
    /// The group id.
    fn group_id(&self) -> &GroupId;
    /// An entry for `group_id` carrying only `error_code`, as a broker writes
    /// a group it cannot serve.
    fn error(group_id: GroupId, error_code: ErrorCode) -> Self;
}

/// Implements [`GroupEntry`] for message structs with `group_id` and
/// `error_code` fields: `group_entry!(TypeA, TypeB, ...)`.
macro_rules! group_entry {
    ($($ty:ty),+ $(,)?) => {$(
        impl $crate::split::order::GroupEntry for $ty {
            fn group_id(&self) -> &::sluice_codec::kafka_protocol::messages::GroupId {
                &self.group_id
            }
            fn error(
                group_id: ::sluice_codec::kafka_protocol::messages::GroupId,
                error_code: $crate::error_codes::ErrorCode,
            ) -> Self {
                Self::default()
                    .with_group_id(group_id)
                    .with_error_code(error_code.code())
            }
        }
    )+};
}
pub(crate) use group_entry;

/// One entry per group of `groups`, each carrying `error_code`.
pub fn group_errors<'g, T: GroupEntry>(
    groups: impl IntoIterator<Item = &'g GroupId>,
    error_code: ErrorCode,
) -> Vec<T> {
    groups
        .into_iter()
        .map(|group_id| T::error(group_id.clone(), error_code))
        .collect()
}

/// The order in which a request named its topics and partitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionOrder {
    topics: Vec<(TopicRef, Vec<i32>)>,
    rank: Map<TopicRef, usize>,
}

impl PartitionOrder {
    /// Records that the request names `partition` of `topic` next.
    pub fn push(&mut self, topic: &TopicRef, partition: i32) {
        // A request names a topic's partitions together: the last topic is
        // most often the one (and each topic has one slot).
        let last = self.topics.len().checked_sub(1);
        let slot = match self.topics.last() {
            Some((t, _)) if t == topic => last.unwrap_or_default(),
            _ => match self.rank.get(topic) {
                Some(slot) => *slot,
                None => {
                    self.rank.insert(topic.clone(), self.topics.len());
                    self.topics.push((topic.clone(), Vec::new()));
                    self.topics.len() - 1
                }
            },
        };
        if let Some((_, partitions)) = self.topics.get_mut(slot) {
            partitions.push(partition);
        }
    }

    /// The order of every topic from the topic entries of a request.
    #[cfg(test)]
    pub fn of_topics<T: TopicEntry>(topics: &[T], version: i16) -> Self {
        let mut order = Self::default();
        for topic in topics {
            let key = topic.topic_ref(version);
            for partition in topic.partitions() {
                order.push(&key, T::partition_index(partition));
            }
        }
        order
    }

    /// The topics and their partitions, in request order.
    #[cfg(test)]
    pub fn topics(&self) -> &[(TopicRef, Vec<i32>)] {
        &self.topics
    }

    /// Merges entries of the same topic and sorts topics and partitions into
    /// request order. Entries the request did not name go last.
    pub fn merge_topics<T: TopicEntry>(
        &self,
        topics: impl IntoIterator<Item = T>,
        version: i16,
    ) -> Vec<T> {
        let mut merged = group_topics(topics, version);
        merged.sort_by_cached_key(|(key, _)| self.rank.get(key).copied().unwrap_or(usize::MAX));
        merged
            .into_iter()
            .map(|(key, mut topic)| {
                let wanted = self.rank.get(&key).and_then(|slot| self.topics.get(*slot));
                if let Some((_, wanted)) = wanted {
                    sort_partitions(&mut topic, wanted);
                }
                topic
            })
            .collect()
    }
}

/// Merges entries of the same topic, keeping the first entry's place.
fn group_topics<T: TopicEntry>(
    topics: impl IntoIterator<Item = T>,
    version: i16,
) -> Vec<(TopicRef, T)> {
    let mut merged: Vec<(TopicRef, T)> = Vec::new();
    let mut slots: Map<TopicRef, usize> = Map::default();
    for mut topic in topics {
        let key = topic.topic_ref(version);
        match slots.get(&key).and_then(|slot| merged.get_mut(*slot)) {
            Some((_, into)) => into.partitions_mut().append(topic.partitions_mut()),
            None => {
                slots.insert(key.clone(), merged.len());
                merged.push((key, topic));
            }
        }
    }
    merged
}

/// Sorts a topic's partitions into the order of `wanted` (stable; unknown last).
fn sort_partitions<T: TopicEntry>(topic: &mut T, wanted: &[i32]) {
    let mut rank: HashMap<i32, usize> = HashMap::with_capacity(wanted.len());
    for (at, partition) in wanted.iter().enumerate() {
        rank.entry(*partition).or_insert(at);
    }
    topic.partitions_mut().sort_by_key(|p| {
        rank.get(&T::partition_index(p))
            .copied()
            .unwrap_or(usize::MAX)
    });
}

/// The order a merge restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Topics and partitions, for the APIs split by partition leader.
    Partitions(PartitionOrder),
    /// Group ids, for the APIs split by coordinator.
    Keys(Vec<GroupId>),
    /// No order to restore (fan-out): parts in the order they were sent.
    Unordered,
}

impl Order {
    /// [`PartitionOrder::merge_topics`], or only merging same-topic entries
    /// when there is no partition order.
    pub fn merge_topics<T: TopicEntry>(
        &self,
        topics: impl IntoIterator<Item = T>,
        version: i16,
    ) -> Vec<T> {
        match self {
            Order::Partitions(order) => order.merge_topics(topics, version),
            Order::Keys(_) | Order::Unordered => group_topics(topics, version)
                .into_iter()
                .map(|(_, topic)| topic)
                .collect(),
        }
    }

    /// Sorts items keyed by group id into the request's group order (stable;
    /// unknown keys last). Without a key order, items keep their order.
    pub fn sort_groups<T>(&self, items: &mut [T], key: impl Fn(&T) -> &GroupId) {
        if let Order::Keys(keys) = self {
            sort_by_key_order(items, keys, key);
        }
    }
}

/// Sorts `items` into the order of `order` by their key: stable, so items with
/// the same key keep their relative order; keys not in `order` go last.
pub fn sort_by_key_order<T, K: Hash + Eq>(items: &mut [T], order: &[K], key: impl Fn(&T) -> &K) {
    let mut rank: HashMap<&K, usize> = HashMap::with_capacity(order.len());
    for (at, k) in order.iter().enumerate() {
        rank.entry(k).or_insert(at);
    }
    items.sort_by_cached_key(|item| rank.get(key(item)).copied().unwrap_or(usize::MAX));
}

/// Drops every item whose key was already seen, keeping the first.
pub fn dedup_by_key<T, K: Hash + Eq + Clone>(items: &mut Vec<T>, key: impl Fn(&T) -> &K) {
    let mut seen: std::collections::HashSet<K> =
        std::collections::HashSet::with_capacity(items.len());
    items.retain(|item| seen.insert(key(item).clone()));
}
