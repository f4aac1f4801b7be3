//! Splitting requests per broker and merging their responses.
//!
//! A client sees the Sluice nodes as the whole cluster, so one client request
//! may name partitions led by several brokers, or groups owned by several
//! coordinators, or ask something that every broker answers for itself. This
//! module turns such a request into one part per broker and merges the parts'
//! responses back into the single response the client expects. It is pure
//! logic over `kafka-protocol` message structs: no I/O, no clocks, and record
//! batches are never decoded (`records` stay as `Bytes`).
//!
//! Three routing families (see [`SplitApi`] and its implementations):
//! - **by partition leader** ([`produce`], [`fetch`], [`partitions`]): Produce,
//!   Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers;
//! - **fan-out to every broker** ([`fan_out`]): ListGroups, ListTransactions,
//!   DescribeLogDirs;
//! - **by group coordinator** ([`groups`]): OffsetFetch, DescribeGroups,
//!   DeleteGroups.
//!
//! The lifecycle, in the sink driver's terms:
//! 1. [`SplitApi::split`] (or [`dispatch::split_request`] on a `RequestKind`),
//!    given a [`Routing`] (the sink's [`ClusterView`] implements it), gives a
//!    [`Split`]: the parts to send, the partitions or groups that no broker
//!    can serve, and a [`Plan`] to merge with.
//!    [`Split::passthrough`] says when the original frame can be forwarded as is.
//! 2. The driver sends every part at the client's api version and collects one
//!    [`PartResult`] per part, in the order of [`Split::parts`]: the broker's
//!    response, or [`PartResult::Failed`] with the error code to synthesize.
//! 3. [`SplitApi::merge`] (or [`dispatch::merge_responses`]) builds the one
//!    response for the client. Unroutable partitions and groups, and failed
//!    parts, carry a synthesized error (see [`error_codes`]); topics,
//!    partitions and groups come back in the client's order ([`order`]).
//!
//! Produce with `acks = 0` has no response: send the parts and never merge.
//!
//! Fetch sessions (KIP-227) cannot span brokers behind one client session, so
//! every Fetch part is sessionless and the merged response says `session_id = 0`;
//! see [`fetch`].

pub mod dispatch;
pub mod fan_out;
pub mod fetch;
pub mod groups;
pub mod order;
pub mod partitions;
pub mod produce;
mod route;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

use std::hash::Hash;

use sluice_codec::kafka_protocol::messages::{ApiKey, GroupId};
use sluice_error::{ErrorClass, ErrorSide};

pub use crate::topology::{BrokerId, CoordinatorKeyType, TopicId, TopicRef};

use crate::error_codes::ErrorCode;
use crate::topology::ClusterView;

use self::order::{GroupEntry, Order, TopicEntry, dedup_by_key};

/// Who leads a partition. [`ClusterView`] implements it; tests use fakes.
pub trait PartitionLeaders {
    /// The broker leading `partition` of `topic`, if known.
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId>;

    /// The broker that serves a consumer's fetch (v11+) of `partition`: the
    /// leader, unless a rack-aware router knows an in-rack follower
    /// (`RackRouting`).
    fn fetch_replica(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.leader(topic, partition)
    }
}

/// Who coordinates a group or transactional id. [`ClusterView`] implements it
/// from the FindCoordinator answers it has seen.
pub trait Coordinators {
    /// The broker coordinating `key` of `key_type`, if known.
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId>;
}

/// Everything a split needs to know about the cluster.
pub trait Routing: PartitionLeaders + Coordinators {
    /// Every broker, for requests fanned out to all of them. The order given is
    /// the order of the parts, and of their results in merged lists.
    fn brokers(&self) -> Vec<BrokerId>;
}

/// The sink routes by its [`ClusterView`] (hold its read guard for the call:
/// splitting is synchronous).
impl PartitionLeaders for ClusterView {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        ClusterView::leader(self, topic, partition)
    }
}

impl Coordinators for ClusterView {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        ClusterView::coordinator(self, key_type, key)
    }
}

impl Routing for ClusterView {
    /// Every known broker, by id.
    fn brokers(&self) -> Vec<BrokerId> {
        ClusterView::brokers(self).map(|broker| broker.id).collect()
    }
}

/// The sink's routing: its [`ClusterView`], plus the local Sluice node's rack
/// so that consumer fetches go to an in-rack replica where there is one (see
/// [`ClusterView::fetch_replica`]). Everything but fetches routes like the
/// view.
pub struct RackRouting<'a, U> {
    /// The view (hold its read guard for the split).
    pub view: &'a ClusterView,
    /// The local Sluice node's rack; empty for none.
    pub rack: &'a str,
    /// The time fences are checked against.
    pub now: std::time::Instant,
    /// Whether a follower may serve fetches now (e.g. it is not suspect).
    pub usable: U,
}

impl<U: Fn(BrokerId) -> bool> PartitionLeaders for RackRouting<'_, U> {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.view.leader(topic, partition)
    }

    fn fetch_replica(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.view
            .fetch_replica(topic, partition, Some(self.rack), self.now, &self.usable)
    }
}

impl<U> Coordinators for RackRouting<'_, U> {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        self.view.coordinator(key_type, key)
    }
}

impl<U: Fn(BrokerId) -> bool> Routing for RackRouting<'_, U> {
    fn brokers(&self) -> Vec<BrokerId> {
        Routing::brokers(self.view)
    }
}

/// Something in a request that no broker can serve right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unroutable {
    /// A partition without a known leader.
    Partition {
        /// The topic, as the request named it.
        topic: TopicRef,
        /// The partition index.
        partition: i32,
    },
    /// A group without a known coordinator.
    Group {
        /// The group id.
        group_id: GroupId,
    },
    /// A request for every broker, while no broker is known.
    NoBroker,
}

/// A request split into one part per broker.
#[derive(Debug, Clone)]
pub struct Split<Req> {
    /// What to send where, at the client's api version. A broker appears at
    /// most once; the order is the order of first use in the request (or of
    /// [`Routing::brokers`] for fan-out). May be empty when nothing is routable.
    pub parts: Vec<(BrokerId, Req)>,
    /// What no broker can serve (for logs and metrics); the merge answers
    /// these with [`SplitApi::UNAVAILABLE_ERROR`].
    pub unroutable: Vec<Unroutable>,
    /// What [`SplitApi::merge`] needs.
    pub plan: Plan<Req>,
}

impl<Req> Split<Req> {
    /// The broker to forward the client's original frame to, unchanged: the
    /// whole request goes to one broker and its only part equals the request,
    /// so the broker's response needs no merge either. `None` when the parts
    /// must be encoded, sent and merged.
    pub fn passthrough(&self) -> Option<BrokerId> {
        match self.parts.as_slice() {
            [(broker, _)] if self.unroutable.is_empty() && !self.plan.modified => Some(*broker),
            _ => None,
        }
    }
}

/// What a merge needs from the split: the client's version and order, and
/// enough of each part to synthesize its response if its broker fails.
#[derive(Debug, Clone)]
pub struct Plan<Req> {
    version: i16,
    order: Order,
    /// Per part, a copy without record data, for [`SplitApi::error_response_for`].
    skeletons: Vec<Req>,
    /// The unroutable remainder of the request, answered with an error.
    unroutable: Option<Req>,
    /// Whether a single part would differ from the client's request.
    modified: bool,
}

impl<Req> Plan<Req> {
    /// The client's api version.
    pub fn version(&self) -> i16 {
        self.version
    }

    /// How many results [`SplitApi::merge`] expects.
    pub fn part_count(&self) -> usize {
        self.skeletons.len()
    }
}

/// The outcome of one part.
#[derive(Debug, Clone, PartialEq)]
pub enum PartResult<Resp> {
    /// The broker answered.
    Response(Resp),
    /// The part got no response (its connection failed, it timed out…): the
    /// merge synthesizes one where every partition or group has `error_code`.
    Failed {
        /// The Kafka error code to report, e.g. `SplitApi::UNAVAILABLE_ERROR`.
        error_code: ErrorCode,
    },
}

/// A merge that cannot be done: always a bug in the caller (internal, not retriable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The number of results differs from the number of parts.
    #[error("merging {api:?} v{version}: {expected} parts were sent but {got} results came back")]
    PartCount {
        /// The api being merged.
        api: ApiKey,
        /// The client's version.
        version: i16,
        /// Parts in the plan.
        expected: usize,
        /// Results given.
        got: usize,
    },
    /// A part's response is for another api.
    #[error("merging {api:?} v{version}: part {part} came back as a {got} response")]
    WrongResponse {
        /// The api being merged.
        api: ApiKey,
        /// The client's version.
        version: i16,
        /// Index of the part.
        part: usize,
        /// What it was instead.
        got: &'static str,
    },
}

impl ErrorClass for SplitError {
    fn side(&self) -> ErrorSide {
        ErrorSide::Internal
    }

    fn retriable(&self) -> bool {
        false
    }
}

/// A request that this module knows how to split and merge.
pub trait SplitApi: Sized + Clone {
    /// The matching response.
    type Response;
    /// The api key.
    const API_KEY: ApiKey;
    /// The error code for partitions or groups that no broker serves, and the
    /// recommended code for [`PartResult::Failed`] (see [`error_codes`]).
    const UNAVAILABLE_ERROR: ErrorCode;

    /// Splits the request (decoded at `version`) into parts per broker.
    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self>;

    /// Merges one result per part (in the order of [`Split::parts`]) into the
    /// response for the client.
    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<Self::Response>>,
    ) -> Result<Self::Response, SplitError>;

    /// A full response to this request at `version` where every partition or
    /// group (or the whole response, where the protocol has no finer place)
    /// carries `error_code`. Used for failed parts and for whole requests
    /// whose broker connection failed.
    fn error_response_for(&self, version: i16, error_code: ErrorCode) -> Self::Response;

    /// A copy keeping what [`SplitApi::error_response_for`] needs; Produce
    /// drops its record batches here.
    fn skeleton(&self) -> Self {
        self.clone()
    }
}

/// The responses of a merge, one per part plus the synthesized unroutable one.
struct Resolved<Resp> {
    version: i16,
    order: Order,
    responses: Vec<Resp>,
}

impl<Req: SplitApi> Plan<Req> {
    fn new(version: i16, order: Order, modified: bool) -> Self {
        Self {
            version,
            order,
            skeletons: Vec::new(),
            unroutable: None,
            modified,
        }
    }

    /// Replaces failed parts and the unroutable remainder by synthesized responses.
    fn resolve(
        self,
        results: Vec<PartResult<Req::Response>>,
    ) -> Result<Resolved<Req::Response>, SplitError> {
        if results.len() != self.skeletons.len() {
            return Err(SplitError::PartCount {
                api: Req::API_KEY,
                version: self.version,
                expected: self.skeletons.len(),
                got: results.len(),
            });
        }
        let version = self.version;
        let mut responses = Vec::with_capacity(results.len() + 1);
        for (skeleton, result) in self.skeletons.iter().zip(results) {
            responses.push(match result {
                PartResult::Response(response) => response,
                PartResult::Failed { error_code } => {
                    skeleton.error_response_for(version, error_code)
                }
            });
        }
        if let Some(rest) = &self.unroutable {
            responses.push(rest.error_response_for(version, Req::UNAVAILABLE_ERROR));
        }
        Ok(Resolved {
            version,
            order: self.order,
            responses,
        })
    }
}

impl<Req: SplitApi> Split<Req> {
    /// Assembles a split, taking the skeletons from the parts.
    fn assemble(
        mut plan: Plan<Req>,
        parts: Vec<(BrokerId, Req)>,
        rest: Option<Req>,
        unroutable: Vec<Unroutable>,
    ) -> Self {
        plan.skeletons = parts.iter().map(|(_, part)| part.skeleton()).collect();
        plan.unroutable = rest;
        Self {
            parts,
            unroutable,
            plan,
        }
    }
}

impl<Resp> Resolved<Resp> {
    /// The largest throttle time of the responses (0 for none).
    fn throttle(&self, throttle: impl Fn(&Resp) -> i32) -> i32 {
        self.responses
            .iter()
            .map(throttle)
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// The first non-zero error code of the responses (0 for none).
    fn error(&self, error: impl Fn(&Resp) -> i16) -> i16 {
        self.responses
            .iter()
            .map(error)
            .find(|code| *code != 0)
            .unwrap_or(0)
    }

    /// Every response's topic entries, one entry per topic, in request order.
    fn into_topics<T: TopicEntry>(self, topics: impl FnMut(Resp) -> Vec<T>) -> Vec<T> {
        let all = self.responses.into_iter().flat_map(topics);
        self.order.merge_topics(all, self.version)
    }

    /// Every response's topic entries (as [`Resolved::into_topics`]) and node
    /// endpoints, each node once (the first one listed).
    fn into_topics_and_nodes<T: TopicEntry, N, K: Hash + Eq + Clone>(
        self,
        lists: impl Fn(Resp) -> (Vec<T>, Vec<N>),
        node_id: impl Fn(&N) -> &K,
    ) -> (Vec<T>, Vec<N>) {
        let mut topics = Vec::new();
        let mut nodes = Vec::new();
        for response in self.responses {
            let (more_topics, more_nodes) = lists(response);
            topics.extend(more_topics);
            nodes.extend(more_nodes);
        }
        dedup_by_key(&mut nodes, node_id);
        (self.order.merge_topics(topics, self.version), nodes)
    }

    /// Every response's group entries, in request order.
    fn into_groups<T: GroupEntry>(self, groups: impl FnMut(Resp) -> Vec<T>) -> Vec<T> {
        let mut all: Vec<T> = self.responses.into_iter().flat_map(groups).collect();
        self.order.sort_groups(&mut all, T::group_id);
        all
    }
}
