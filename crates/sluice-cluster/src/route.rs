//! Routing decisions: which broker (or brokers) must serve each request, what
//! to do with the answer, and what to answer when a broker fails.
//!
//! Everything here is a pure function of the request, its version and the
//! broker responses, so that the decisions can be unit-tested without I/O; the
//! sink driver ([`crate::sink`]) does the sending and waiting. One module per
//! API family:
//!
//! - [`meta`]: ApiVersions, Metadata, FindCoordinator, DescribeCluster: any
//!   broker, then rewritten so that only Sluice nodes appear.
//! - [`produce_fetch`]: the partition-leader APIs (split by leader), Fetch's
//!   `rack_id`, the cheap leader-hint check and per-partition staleness.
//! - [`produce_order`]: an idempotent batch failed unsent holds back the
//!   batches behind it on the same client connection.
//! - [`groups`]: group APIs, to the group coordinator of their group id.
//! - [`transactions`]: transaction APIs, to the transaction coordinator.
//! - [`keyed`]: ConsumerGroupDescribe, StreamsGroupDescribe and
//!   DescribeTransactions, split by coordinator when their keys live on
//!   several.
//! - [`share`]: share groups (KIP-932): ShareFetch and ShareAcknowledge in
//!   the client's share session with Sluice and Sluice's sessions with the
//!   brokers; the share-group coordinator APIs (`share::coordinator`).
//! - [`admin`]: everything else a client may send, to any broker; which
//!   topics an admin write makes stale; synthesized admin errors; and the
//!   answer to inter-broker APIs.
//!
//! Fan-out (ListGroups, ListTransactions, DescribeLogDirs) needs no module of
//! its own: the split module sends the request to every known broker and
//! merges the answers, once each broker's answer has been cut down to what
//! the local Sluice node is shown to own (`rewrite::fan_out`), since the
//! client asks every Sluice node the same question.

pub mod admin;
pub mod groups;
pub mod keyed;
pub mod meta;
pub mod produce_fetch;
pub mod produce_order;
pub mod share;
pub mod transactions;

#[cfg(test)]
mod tests;

use sluice_codec::{ApiKey, CodecError, Request, RequestKind, ResponseKind};

use crate::api::failure::{FailureAnswer, NoAnswer};
use crate::error_codes::{ErrorCode, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER, UNSUPPORTED_VERSION};
use crate::split::Unroutable;
use crate::topology::{ClusterView, CoordinatorKeyType, Staleness, TopicRef, staleness};

// The per-API facts routing decides by live in the API table.
pub use crate::api::{Admin, Family, Meta, OnFailure, offered_versions};

/// The answer a client gets when `request` (of `api`, decoded at `version`)
/// fails with `code`: the request's items (or the response's top level)
/// carry `code`. Built by the [`FailureAnswer`] of the API's family, read
/// from its row in the API table; `None` when the row says its answer has no
/// place for an error at `version` (the caller then closes the client).
pub fn failure_answer(
    api: ApiKey,
    request: &RequestKind,
    version: i16,
    code: ErrorCode,
) -> Option<ResponseKind> {
    let row = crate::api::describe(api);
    if !row.has_failure_answer(version) {
        return None;
    }
    answers_of(row.family).failure_answer(api, request, version, code)
}

/// While the local node leaves (see `topology/nodes.rs`), the answer to a
/// request that needs a leader or a coordinator, with its code: the
/// retriable NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR that sends the
/// client elsewhere. `None` for other requests, for a Fetch (answered from
/// its fetch session: [`leaving_fetch_answer`]), for InitProducerId without
/// a transactional id (it needs no coordinator), and where the answer has
/// no place for the error. Only those requests' bodies are decoded.
pub fn leaving_answer(
    request: &mut Request,
) -> Result<Option<(ResponseKind, ErrorCode)>, CodecError> {
    let (api, version) = (request.api_key(), request.api_version());
    let code = match crate::api::describe(api).family {
        Family::ByLeader if api == ApiKey::Fetch => return Ok(None),
        Family::ByLeader => NOT_LEADER_OR_FOLLOWER,
        Family::ByCoordinator => NOT_COORDINATOR,
        Family::Coordinator(key_type) => {
            let key = groups::coordinator_key(request.body()?);
            if key.is_none_or(|(t, _)| t != key_type) {
                return Ok(None);
            }
            NOT_COORDINATOR
        }
        _ => return Ok(None),
    };
    let answer = failure_answer(api, request.body()?, version, code);
    Ok(answer.map(|answer| (answer, code)))
}

/// While the local node leaves, the answer to a Fetch at `version`
/// (`body`: the whole fetch its session stands for, else the request's
/// own): every partition NOT_LEADER_OR_FOLLOWER.
pub fn leaving_fetch_answer(body: &RequestKind, version: i16) -> Option<(ResponseKind, ErrorCode)> {
    let code = NOT_LEADER_OR_FOLLOWER;
    failure_answer(ApiKey::Fetch, body, version, code).map(|answer| (answer, code))
}

/// What the view must learn before a request whose split left something
/// unroutable is split once more.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refresh {
    /// A Metadata refresh, if any.
    pub metadata: Option<MetadataRefresh>,
    /// Groups whose coordinators to look up (FindCoordinator).
    pub groups: Vec<String>,
}

/// Which Metadata refresh a split needs.
#[derive(Debug, PartialEq, Eq)]
pub enum MetadataRefresh {
    /// These topics' partitions (some have no known leader).
    Topics(Vec<TopicRef>),
    /// Only the broker list (no broker is known to send a fan-out to).
    Brokers,
}

impl Refresh {
    /// What to refresh for a split's `unroutable` parts. A partition in
    /// `held` (its idempotent batch waits for an earlier one, see
    /// `produce_order`) is answered unsent whatever the view says: it
    /// needs nothing.
    pub fn for_unroutable(unroutable: &[Unroutable], held: &[(TopicRef, i32)]) -> Self {
        let mut topics: Vec<TopicRef> = Vec::new();
        let mut refresh = Refresh::default();
        let mut no_broker = false;
        for u in unroutable {
            match u {
                Unroutable::Partition { topic, partition }
                    if held.iter().any(|(t, p)| t == topic && p == partition) => {}
                Unroutable::Partition { topic, .. } if !topics.contains(topic) => {
                    topics.push(topic.clone());
                }
                Unroutable::Partition { .. } => {}
                Unroutable::Group { group_id } => refresh.groups.push(group_id.0.to_string()),
                Unroutable::NoBroker => no_broker = true,
            }
        }
        refresh.metadata = if !topics.is_empty() {
            Some(MetadataRefresh::Topics(topics))
        } else if no_broker {
            Some(MetadataRefresh::Brokers)
        } else {
            None
        };
        refresh
    }
}

/// Who builds the failure answers of an API family.
pub fn answers_of(family: Family) -> &'static dyn FailureAnswer {
    match family {
        Family::ByLeader | Family::ByCoordinator | Family::FanOut => {
            &crate::split::dispatch::SplitAnswers
        }
        Family::Coordinator(CoordinatorKeyType::Group) => &groups::GroupAnswers,
        Family::Coordinator(CoordinatorKeyType::Transaction) => &transactions::TransactionAnswers,
        Family::Meta(_) => &meta::MetaAnswers,
        Family::Admin(_) | Family::NotForClients => &admin::AdminAnswers,
        // No API is routed to a share coordinator by its key.
        Family::ShareSession => &share::ShareAnswers,
        Family::Sasl | Family::Coordinator(CoordinatorKeyType::Share) => &NoAnswer,
    }
}

/// Something a response says is out of date in the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// A partition's leader moved (or it has none).
    Leader(TopicRef, i32),
    /// A topic is unknown (deleted, recreated, not yet known).
    Topic(TopicRef),
    /// A coordinator moved.
    Coordinator(CoordinatorKeyType, String),
    /// The controller moved.
    Controller,
    /// The whole view is untrustworthy (REBOOTSTRAP_REQUIRED).
    Cluster,
}

/// What a partition-level `error_code` says is stale about `topic`/`partition`.
pub fn partition_staleness(
    error_code: ErrorCode,
    topic: &TopicRef,
    partition: i32,
) -> Option<Stale> {
    match staleness(error_code)? {
        Staleness::Leader => Some(Stale::Leader(topic.clone(), partition)),
        Staleness::Topic => Some(Stale::Topic(topic.clone())),
        Staleness::Controller => Some(Stale::Controller),
        Staleness::Cluster => Some(Stale::Cluster),
        Staleness::Coordinator => None,
    }
}

/// What a top-level `error_code` of an admin or meta response says is stale.
pub fn top_level_staleness(error_code: ErrorCode) -> Option<Stale> {
    match staleness(error_code)? {
        Staleness::Controller => Some(Stale::Controller),
        Staleness::Cluster => Some(Stale::Cluster),
        _ => None,
    }
}

/// What [`forget`] did, for the driver to log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// How many entries of the view were forgotten.
    pub entries: usize,
    /// A broker answered REBOOTSTRAP_REQUIRED ([`Stale::Cluster`]): nothing
    /// is forgotten for it, topics are refreshed as clients touch them.
    pub rebootstrap_required: bool,
}

/// Forgets what `stale` names from the view.
pub fn forget(view: &mut ClusterView, stale: &[Stale]) -> Forgotten {
    let mut forgotten = Forgotten::default();
    for s in stale {
        let changed = match s {
            Stale::Leader(topic, partition) => view.forget_leader(topic, *partition),
            Stale::Topic(topic) => view.forget_topic(topic),
            Stale::Coordinator(key_type, key) => view.forget_coordinator(*key_type, key),
            Stale::Controller => {
                let had = view.controller().is_some();
                view.forget_controller();
                had
            }
            Stale::Cluster => {
                forgotten.rebootstrap_required = true;
                false
            }
        };
        forgotten.entries += usize::from(changed);
    }
    forgotten
}

/// The versions of the internal requests Sluice sends to a broker, from the
/// broker's ApiVersions (none when it did not answer): Metadata v12 (topic ids,
/// lookup by id) and FindCoordinator v4+ (batched keys) where supported,
/// capped at what Sluice decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternalVersions {
    /// The Metadata version.
    pub metadata: i16,
    /// The FindCoordinator version.
    pub find_coordinator: i16,
}

/// The Metadata version preferred for refreshes.
pub const PREFERRED_METADATA_VERSION: i16 = 12;
/// The first FindCoordinator version that batches keys.
pub const BATCHED_FIND_COORDINATOR_VERSION: i16 = 4;

impl InternalVersions {
    /// Chooses from a broker's ApiVersions response (`None`: assume a modern
    /// broker, as the Kafka 4 baseline guarantees).
    pub fn choose(
        broker: Option<&sluice_codec::kafka_protocol::messages::ApiVersionsResponse>,
    ) -> Self {
        let pick = |api: ApiKey, preferred: i16| -> i16 {
            let ours = sluice_codec::versions::decoded(api).map_or(preferred, |r| r.max);
            let want = preferred.min(ours);
            let Some(broker) = broker.filter(|b| b.error_code == 0) else {
                return want;
            };
            match broker.api_keys.iter().find(|k| k.api_key == api as i16) {
                Some(range) if range.max_version >= range.min_version => {
                    want.min(range.max_version).max(range.min_version)
                }
                _ => want,
            }
        };
        Self {
            metadata: pick(ApiKey::Metadata, PREFERRED_METADATA_VERSION),
            find_coordinator: pick(ApiKey::FindCoordinator, 6),
        }
    }
}
