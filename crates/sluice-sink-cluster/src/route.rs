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
//! - [`groups`]: group APIs, to the group coordinator of their group id.
//! - [`transactions`]: transaction APIs, to the transaction coordinator.
//! - [`keyed`]: ConsumerGroupDescribe and DescribeTransactions, split by
//!   coordinator when their keys live on several.
//! - [`admin`]: everything else a client may send, to any broker; which
//!   topics an admin write makes stale; synthesized admin errors; and the
//!   answer to inter-broker APIs.
//!
//! Fan-out (ListGroups, ListTransactions, DescribeLogDirs) needs no module of
//! its own: the split module sends the request to every known broker and
//! merges the answers, once each broker's answer has been cut down to what
//! the local Sluice node is shown to own (`rewrite::fan_out`), since the
//! client asks every Sluice node the same question.

pub(crate) mod admin;
pub(crate) mod groups;
pub(crate) mod keyed;
pub(crate) mod meta;
pub(crate) mod produce_fetch;
pub(crate) mod transactions;

#[cfg(test)]
mod tests;

use sluice_codec::kafka_protocol::ResponseError;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::split::error_codes;
use crate::topology::{ClusterView, CoordinatorKeyType, Staleness, TopicRef, staleness};

/// UNSUPPORTED_VERSION: the answer to APIs that clients may not send.
pub(crate) const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();
/// REQUEST_TIMED_OUT: an admin write whose broker failed may or may not have
/// been applied; the client decides whether to retry.
pub(crate) const REQUEST_TIMED_OUT: i16 = ResponseError::RequestTimedOut.code();
/// COORDINATOR_NOT_AVAILABLE: no coordinator could be found for a key.
pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = error_codes::COORDINATOR_NOT_AVAILABLE;
/// NOT_COORDINATOR: the coordinator's broker failed; find it again.
pub(crate) const NOT_COORDINATOR: i16 = error_codes::NOT_COORDINATOR;

/// How an API is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Any broker; the response is then rewritten or recorded.
    Meta(Meta),
    /// Split by partition leader (Produce, Fetch, ListOffsets,
    /// OffsetForLeaderEpoch, DeleteRecords, DescribeProducers).
    ByLeader,
    /// Split by group coordinator (OffsetFetch, DescribeGroups, DeleteGroups).
    ByCoordinator,
    /// The whole request to the coordinator of its key.
    Coordinator(CoordinatorKeyType),
    /// To every known broker, merged (ListGroups, ListTransactions,
    /// DescribeLogDirs).
    FanOut,
    /// Any broker (KRaft brokers forward controller work themselves).
    Admin(Admin),
    /// SaslHandshake and SaslAuthenticate that reach routing: only from a
    /// client already taken to use no authentication (see [`crate::auth`]),
    /// sent untouched to any broker; a broker failure closes the client. A
    /// client's own authentication exchange never gets here: the gate sends
    /// it to the client's auth connection (`sink/auth.rs`), and refuses
    /// re-authentication after it succeeded.
    Sasl,
    /// An inter-broker or hidden API: answered by Sluice with an error.
    NotForClients,
}

/// The four APIs whose answers describe the cluster itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meta {
    /// ApiVersions: intersected across brokers, clamped to what Sluice decodes.
    ApiVersions,
    /// Metadata: recorded in the view, then rewritten.
    Metadata,
    /// FindCoordinator: recorded in the view, then rewritten.
    FindCoordinator,
    /// DescribeCluster: rewritten.
    DescribeCluster,
}

/// What kind of admin request it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admin {
    /// It changes the cluster: never retried after a failure, answered with
    /// REQUEST_TIMED_OUT instead (it may or may not have happened).
    pub(crate) write: bool,
    /// Its success changes partition leadership or topics: the topics it
    /// names are forgotten from the view, so that the next request refreshes.
    pub(crate) marks_topics_stale: bool,
}

/// The routing family of `api`.
pub(crate) fn family(api: ApiKey) -> Family {
    use ApiKey as K;
    if !crate::rewrite::is_client_facing(api) {
        return Family::NotForClients;
    }
    match api {
        K::ApiVersions => Family::Meta(Meta::ApiVersions),
        K::Metadata => Family::Meta(Meta::Metadata),
        K::FindCoordinator => Family::Meta(Meta::FindCoordinator),
        K::DescribeCluster => Family::Meta(Meta::DescribeCluster),
        K::Produce
        | K::Fetch
        | K::ListOffsets
        | K::OffsetForLeaderEpoch
        | K::DeleteRecords
        | K::DescribeProducers => Family::ByLeader,
        K::OffsetFetch | K::DescribeGroups | K::DeleteGroups => Family::ByCoordinator,
        K::JoinGroup
        | K::SyncGroup
        | K::Heartbeat
        | K::LeaveGroup
        | K::OffsetCommit
        | K::OffsetDelete
        | K::TxnOffsetCommit
        | K::ConsumerGroupHeartbeat
        | K::ConsumerGroupDescribe => Family::Coordinator(CoordinatorKeyType::Group),
        K::InitProducerId
        | K::AddPartitionsToTxn
        | K::AddOffsetsToTxn
        | K::EndTxn
        | K::DescribeTransactions => Family::Coordinator(CoordinatorKeyType::Transaction),
        K::ListGroups | K::ListTransactions | K::DescribeLogDirs => Family::FanOut,
        K::SaslHandshake | K::SaslAuthenticate => Family::Sasl,
        other => Family::Admin(admin::kind(other)),
    }
}

/// The versions of `api` Sluice offers clients, before intersecting with the
/// brokers: the [`versions::DECODED`](sluice_codec::versions::DECODED) range
/// for the APIs listed there; for the other APIs that are routed by their
/// body (split by leader or coordinator, sent to a coordinator, fanned out:
/// DescribeProducers, DeleteGroups, OffsetDelete, DescribeTransactions,
/// ListTransactions, DescribeLogDirs) every version whose request and
/// response `kafka-protocol` both decode; the codec's whole range for the
/// admin APIs it forwards undecoded; and nothing for APIs it cannot route
/// correctly (the share-group APIs, which need the share coordinator and
/// partition leaders).
pub(crate) fn offered_versions(
    api: ApiKey,
) -> Option<sluice_codec::kafka_protocol::protocol::VersionRange> {
    use sluice_codec::kafka_protocol::protocol::VersionRange;
    if let Some(range) = sluice_codec::versions::decoded(api) {
        return Some(VersionRange {
            min: range.min,
            max: range.max,
        });
    }
    match family(api) {
        Family::Admin(_) if !admin::is_share_group_api(api) => crate::rewrite::codec_versions(api),
        Family::ByLeader | Family::ByCoordinator | Family::Coordinator(_) | Family::FanOut => {
            sluice_codec::guard::decodable_versions(api).map(|(min, max)| VersionRange { min, max })
        }
        _ => None,
    }
}

/// What to answer for one part of a request whose broker failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnFailure {
    /// The split module synthesizes this code for the part's partitions or groups.
    SplitError(i16),
    /// Synthesize a whole response carrying this code.
    Synthesize(i16),
    /// Send the request once more, to another broker; if that fails too,
    /// synthesize this code where the response has a place for it.
    RetryElsewhere(i16),
    /// Nothing safe can be answered: close the client connection.
    Close,
}

/// The failure policy of `api` (see the architecture's error table).
pub(crate) fn on_failure(api: ApiKey) -> OnFailure {
    match family(api) {
        Family::ByLeader | Family::ByCoordinator | Family::FanOut => {
            OnFailure::SplitError(error_codes::unavailable_error(api).unwrap_or(REQUEST_TIMED_OUT))
        }
        Family::Coordinator(_) => OnFailure::Synthesize(NOT_COORDINATOR),
        Family::Meta(Meta::FindCoordinator) => OnFailure::RetryElsewhere(COORDINATOR_NOT_AVAILABLE),
        Family::Meta(_) => OnFailure::RetryElsewhere(REQUEST_TIMED_OUT),
        Family::Admin(Admin { write: true, .. }) => OnFailure::Synthesize(REQUEST_TIMED_OUT),
        Family::Admin(_) => OnFailure::RetryElsewhere(REQUEST_TIMED_OUT),
        Family::Sasl | Family::NotForClients => OnFailure::Close,
    }
}

/// A whole response to `request` where the request's items (or the response's
/// top level) carry `error_code`; `None` when the response has no place for
/// an error that a client would act on.
pub(crate) fn error_response(
    api: ApiKey,
    request: &RequestKind,
    version: i16,
    error_code: i16,
) -> Option<ResponseKind> {
    crate::split::dispatch::error_response(request, version, error_code)
        .or_else(|| groups::error_response(request, version, error_code))
        .or_else(|| transactions::error_response(request, error_code))
        .or_else(|| meta::error_response(request, version, error_code))
        .or_else(|| admin::error_response(api, request, version, error_code))
}

/// Something a response says is out of date in the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stale {
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
pub(crate) fn partition_staleness(
    error_code: i16,
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
pub(crate) fn top_level_staleness(error_code: i16) -> Option<Stale> {
    match staleness(error_code)? {
        Staleness::Controller => Some(Stale::Controller),
        Staleness::Cluster => Some(Stale::Cluster),
        _ => None,
    }
}

/// Forgets what `stale` names from the view. Returns how many entries were
/// forgotten (for logs).
pub(crate) fn forget(view: &mut ClusterView, stale: &[Stale]) -> usize {
    let mut forgotten = 0;
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
                tracing::warn!(
                    "a broker answered REBOOTSTRAP_REQUIRED; topics are refreshed as clients touch them"
                );
                false
            }
        };
        forgotten += usize::from(changed);
    }
    forgotten
}

/// The versions of the internal requests Sluice sends to a broker, from the
/// broker's ApiVersions (none when it did not answer): Metadata v12 (topic ids,
/// lookup by id) and FindCoordinator v4+ (batched keys) where supported,
/// capped at what Sluice decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InternalVersions {
    /// The Metadata version.
    pub(crate) metadata: i16,
    /// The FindCoordinator version.
    pub(crate) find_coordinator: i16,
}

/// The Metadata version preferred for refreshes.
pub(crate) const PREFERRED_METADATA_VERSION: i16 = 12;
/// The first FindCoordinator version that batches keys.
pub(crate) const BATCHED_FIND_COORDINATOR_VERSION: i16 = 4;

impl InternalVersions {
    /// Chooses from a broker's ApiVersions response (`None`: assume a modern
    /// broker, as the Kafka 4 baseline guarantees).
    pub(crate) fn choose(
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
