//! The three ways of cutting a request into parts, shared by every api:
//! topic entries by partition leader ([`split_by_leader`]), groups by
//! coordinator ([`split_by_group`]), and the whole request to every broker
//! ([`to_all`]). Each gives a [`Split`] whose plan restores the request's
//! order; the api only says how to rebuild a part from its entries.
//!
//! The parts come in the order brokers are first needed, so the same request
//! over the same routing always gives the same parts.

use crate::hash::Map;

use sluice_codec::kafka_protocol::messages::GroupId;

use super::order::{Order, PartitionOrder, TopicEntry};
use super::{
    BrokerId, CoordinatorKeyType, Coordinators, PartitionLeaders, Plan, Split, SplitApi, Unroutable,
};

/// Pieces of something split per broker, plus what no broker takes.
struct Pieces<T> {
    per_broker: Vec<(BrokerId, Vec<T>)>,
    slots: Map<BrokerId, usize>,
    rest: Vec<T>,
    unroutable: Vec<Unroutable>,
}

impl<T> Pieces<T> {
    fn new() -> Self {
        Self {
            per_broker: Vec::new(),
            slots: Map::default(),
            rest: Vec::new(),
            unroutable: Vec::new(),
        }
    }

    /// The list for `broker` (or the unroutable list for `None`).
    fn list(&mut self, broker: Option<BrokerId>) -> &mut Vec<T> {
        let Some(broker) = broker else {
            return &mut self.rest;
        };
        let slot = *self.slots.entry(broker).or_insert_with(|| {
            self.per_broker.push((broker, Vec::new()));
            self.per_broker.len() - 1
        });
        match self.per_broker.get_mut(slot) {
            Some((_, list)) => list,
            // Unreachable: slots only holds indexes into per_broker.
            None => &mut self.rest,
        }
    }

    /// Builds the split: `rebuild` makes a request from the items of one part
    /// (or of the unroutable remainder).
    fn into_split<Req: SplitApi>(
        self,
        plan: Plan<Req>,
        rebuild: impl Fn(Vec<T>) -> Req,
    ) -> Split<Req> {
        let parts = self
            .per_broker
            .into_iter()
            .map(|(broker, items)| (broker, rebuild(items)))
            .collect();
        let rest = (!self.rest.is_empty()).then(|| rebuild(self.rest));
        Split::assemble(plan, parts, rest, self.unroutable)
    }
}

/// Splits a request's topic entries by partition leader, keeping one entry
/// per topic entry of the request per broker, partitions in request order;
/// the plan restores that order. `rebuild` makes a request from the topic
/// entries of one part; `modified` is as in [`Plan`].
pub(crate) fn split_by_leader<Req, T, L>(
    topics: &[T],
    version: i16,
    leaders: &L,
    modified: bool,
    rebuild: impl Fn(Vec<T>) -> Req,
) -> Split<Req>
where
    Req: SplitApi,
    T: TopicEntry,
    L: PartitionLeaders + ?Sized,
{
    let mut pieces = Pieces::new();
    let mut order = PartitionOrder::default();
    for topic in topics {
        let key = topic.topic_ref(version);
        // Where this topic entry already has a copy: destination -> index.
        let mut copies: Vec<(Option<BrokerId>, usize)> = Vec::new();
        for partition in topic.partitions() {
            let index = T::partition_index(partition);
            order.push(&key, index);
            let leader = leaders.leader(&key, index);
            if leader.is_none() {
                pieces.unroutable.push(Unroutable::Partition {
                    topic: key.clone(),
                    partition: index,
                });
            }
            let list = pieces.list(leader);
            let at = match copies.iter().find(|(dest, _)| *dest == leader) {
                Some((_, at)) => *at,
                None => {
                    list.push(topic.empty_like());
                    copies.push((leader, list.len() - 1));
                    list.len() - 1
                }
            };
            if let Some(copy) = list.get_mut(at) {
                copy.partitions_mut().push(partition.clone());
            }
        }
    }
    let plan = Plan::new(version, Order::Partitions(order), modified);
    pieces.into_split(plan, rebuild)
}

/// The split of a request whose partitions all have the same known leader:
/// one part, the request itself, which [`Split::passthrough`] then forwards
/// as the client's bytes. `None` when the partitions need more than one
/// broker, or some have no known leader, or there are none: then the
/// request is cut by [`split_by_leader`].
///
/// The common case of a producer or consumer that follows the leaders it is
/// shown, so it is decided with one leader lookup per partition and nothing
/// allocated but the part and its skeleton: no per-broker lists and no
/// partition order to restore (one part's answer is already in request
/// order, and a failed part's synthesized answer is built from the request).
pub(crate) fn whole_to_one_leader<Req, T, L>(
    request: &Req,
    topics: &[T],
    version: i16,
    leaders: &L,
) -> Option<Split<Req>>
where
    Req: SplitApi,
    T: TopicEntry,
    L: PartitionLeaders + ?Sized,
{
    let mut only = None;
    for topic in topics {
        let key = topic.topic_ref(version);
        for partition in topic.partitions() {
            let leader = leaders.leader(&key, T::partition_index(partition))?;
            if *only.get_or_insert(leader) != leader {
                return None;
            }
        }
    }
    let plan = Plan::new(version, Order::Unordered, false);
    Some(Split::assemble(
        plan,
        vec![(only?, request.clone())],
        None,
        Vec::new(),
    ))
}

/// Splits items keyed by group id by their group coordinator; the plan
/// restores the request's group order. `rebuild` makes a request from the
/// items of one part.
pub(crate) fn split_by_group<Req, T, C>(
    items: &[T],
    key: impl Fn(&T) -> &GroupId,
    version: i16,
    coordinators: &C,
    rebuild: impl Fn(Vec<T>) -> Req,
) -> Split<Req>
where
    Req: SplitApi,
    T: Clone,
    C: Coordinators + ?Sized,
{
    let mut pieces = Pieces::new();
    let mut order = Vec::with_capacity(items.len());
    for item in items {
        let group_id = key(item);
        order.push(group_id.clone());
        let coordinator = coordinators.coordinator(CoordinatorKeyType::Group, group_id.0.as_str());
        if coordinator.is_none() {
            pieces.unroutable.push(Unroutable::Group {
                group_id: group_id.clone(),
            });
        }
        pieces.list(coordinator).push(item.clone());
    }
    pieces.into_split(Plan::new(version, Order::Keys(order), false), rebuild)
}

/// One part per broker, each the whole request; with no broker known, the
/// request is unroutable.
pub(crate) fn to_all<Req: SplitApi>(
    request: &Req,
    version: i16,
    brokers: Vec<BrokerId>,
) -> Split<Req> {
    let plan = Plan::new(version, Order::Unordered, false);
    let (rest, unroutable) = if brokers.is_empty() {
        (Some(request.clone()), vec![Unroutable::NoBroker])
    } else {
        (None, Vec::new())
    };
    let mut seen = Vec::with_capacity(brokers.len());
    for broker in brokers {
        if !seen.contains(&broker) {
            seen.push(broker);
        }
    }
    let parts = seen.into_iter().map(|b| (b, request.clone())).collect();
    Split::assemble(plan, parts, rest, unroutable)
}
