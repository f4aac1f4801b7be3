//! One descriptor per Kafka API: everything the cluster sink decides about an
//! API by its key, in one table ([`describe`]).
//!
//! | column | what it says | who reads it |
//! |---|---|---|
//! | [`ApiDescriptor::family`] | where it goes: any broker, split by leader or coordinator, one coordinator, every broker, or nowhere (Sluice answers) | `sink/send.rs` |
//! | [`ApiDescriptor::split_since`] | the first version that is split (OffsetFetch before v8 names one group and goes whole to its coordinator) | `sink/send.rs` |
//! | [`ApiDescriptor::on_failure`] | what a client gets when the broker fails: a per-partition error, a whole error answer, a retry elsewhere, or a close | `exchange.rs`, `sink/send.rs` |
//! | [`ApiDescriptor::failure_answer_since`] | from which version its answer has a place for an error (none: a failure closes the client); the answer itself is built by its family's [`failure::FailureAnswer`] | `route::failure_answer` |
//! | [`ApiDescriptor::rewritten`] | its answer always passes through the rewriter (it names brokers) | `rewrite.rs`, `sink/finish.rs` |
//! | [`ApiDescriptor::leader_hints_since`] | from which version its answer may carry leader hints naming brokers | `rewrite.rs`, `exchange.rs` |
//! | [`ApiDescriptor::filtered_after_fan_out`] | each broker's answer is cut down to what the local Sluice node owns before merging | `exchange.rs` |
//! | [`ApiDescriptor::versions`] | which versions are offered to clients beyond those Sluice decodes | [`offered_versions`] |
//!
//! How a split API splits and merges is code, per request type, in
//! [`crate::split`]; the list of those types (`split_apis!` in
//! `split/dispatch.rs`) also gives each one's per-partition error
//! ([`crate::split::dispatch::unavailable_error`]), which the table's
//! failure policy uses. A test checks that the table's split families and
//! that list agree.

pub mod failure;

#[cfg(test)]
mod tests;

use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::protocol::VersionRange;

use crate::error_codes::{self, ErrorCode, REQUEST_TIMED_OUT};
use crate::split::groups::OFFSET_FETCH_GROUPS_VERSION;
use crate::topology::CoordinatorKeyType;

/// How an API is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
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
    /// ShareFetch and ShareAcknowledge: split by partition leader within
    /// the client's share session, which Sluice holds, keeping a share
    /// session of its own with each broker (see [`crate::route::share`]).
    ShareSession,
    /// Any broker (KRaft brokers forward controller work themselves).
    Admin(Admin),
    /// SaslHandshake and SaslAuthenticate that reach routing: only from a
    /// client already taken to use no authentication (see [`crate::client_auth`]),
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
pub enum Meta {
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
pub struct Admin {
    /// It changes the cluster: never retried after a failure, answered with
    /// REQUEST_TIMED_OUT instead (it may or may not have happened).
    pub write: bool,
    /// Its success changes partition leadership or topics: the topics it
    /// names are forgotten from the view, so that the next request refreshes.
    pub marks_topics_stale: bool,
}

const READ: Admin = Admin {
    write: false,
    marks_topics_stale: false,
};
const WRITE: Admin = Admin {
    write: true,
    marks_topics_stale: false,
};
const TOPIC_WRITE: Admin = Admin {
    write: true,
    marks_topics_stale: true,
};

/// What to answer for one part of a request whose broker failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// The split module synthesizes this code for the part's partitions or groups.
    SplitError(ErrorCode),
    /// Synthesize a whole response carrying this code.
    Synthesize(ErrorCode),
    /// Send the request once more, to another broker; if that fails too,
    /// synthesize this code where the response has a place for it.
    RetryElsewhere(ErrorCode),
    /// Nothing safe can be answered: close the client connection.
    Close,
}

/// Which versions of an API Sluice offers clients when it does not decode
/// the API itself (those it decodes: `sluice_codec::versions::DECODED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// Only the decoded ones (none, for an API not listed there).
    Decoded,
    /// Every version whose request and response `kafka-protocol` both
    /// decode: Sluice routes it by its body.
    BodyDecodable,
    /// The codec's whole range: forwarded undecoded.
    Codec,
}

/// Everything the sink decides about one API by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiDescriptor {
    /// Where it is routed.
    pub family: Family,
    /// The first version that is split (for the split families).
    pub split_since: i16,
    /// What the client gets when the broker serving it fails.
    pub on_failure: OnFailure,
    /// The first version whose answer has a place for an error, which a
    /// failure answer carries (see [`failure`]); `None`: never, a failure
    /// closes the client.
    pub failure_answer_since: Option<i16>,
    /// Its answer always passes through the rewriter: it names brokers.
    pub rewritten: bool,
    /// The first version whose answer may carry leader hints naming
    /// brokers (brokers fill them in on errors such as
    /// NOT_LEADER_OR_FOLLOWER, which cannot be known without decoding).
    pub leader_hints_since: Option<i16>,
    /// Each broker's answer to the fan-out is cut down to what the local
    /// Sluice node is shown to own, since clients ask every node.
    pub filtered_after_fan_out: bool,
    /// The versions offered beyond the decoded ones.
    pub versions: Versions,
}

impl ApiDescriptor {
    const fn new(family: Family, on_failure: OnFailure, versions: Versions) -> Self {
        Self {
            family,
            split_since: 0,
            on_failure,
            failure_answer_since: Some(0),
            rewritten: false,
            leader_hints_since: None,
            filtered_after_fan_out: false,
            versions,
        }
    }

    const fn meta(meta: Meta) -> Self {
        let on_failure = OnFailure::RetryElsewhere(REQUEST_TIMED_OUT);
        Self::new(Family::Meta(meta), on_failure, Versions::Decoded)
    }

    /// A split family; its per-part error comes from the split types.
    const fn split(family: Family) -> Self {
        Self::new(family, OnFailure::Close, Versions::BodyDecodable)
    }

    const fn coordinator(key_type: CoordinatorKeyType) -> Self {
        let on_failure = OnFailure::Synthesize(error_codes::NOT_COORDINATOR);
        Self::new(
            Family::Coordinator(key_type),
            on_failure,
            Versions::BodyDecodable,
        )
    }

    const fn admin(admin: Admin) -> Self {
        let on_failure = if admin.write {
            OnFailure::Synthesize(REQUEST_TIMED_OUT)
        } else {
            OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
        };
        Self::new(Family::Admin(admin), on_failure, Versions::Codec)
    }

    const fn closing(family: Family) -> Self {
        Self::new(family, OnFailure::Close, Versions::Decoded)
    }

    const fn rewritten(mut self) -> Self {
        self.rewritten = true;
        self
    }

    const fn leader_hints_since(mut self, version: i16) -> Self {
        self.leader_hints_since = Some(version);
        self
    }

    const fn filtered_after_fan_out(mut self) -> Self {
        self.filtered_after_fan_out = true;
        self
    }

    const fn split_since(mut self, version: i16) -> Self {
        self.split_since = version;
        self
    }

    const fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    const fn failure_answer_since(mut self, version: Option<i16>) -> Self {
        self.failure_answer_since = version;
        self
    }

    /// Whether a client may send it (else Sluice answers it with an error).
    pub fn is_client_facing(&self) -> bool {
        self.family != Family::NotForClients
    }

    /// Whether its answer at `version` has a place for an error, so that a
    /// failure can be answered instead of closing the client.
    pub fn has_failure_answer(&self, version: i16) -> bool {
        self.failure_answer_since
            .is_some_and(|since| version >= since)
    }

    /// Whether its answer at `version` may carry leader hints.
    pub fn may_carry_leader_hints(&self, version: i16) -> bool {
        self.leader_hints_since
            .is_some_and(|since| version >= since)
    }
}

/// The descriptor of `api`: the table.
pub fn describe(api: ApiKey) -> ApiDescriptor {
    use ApiDescriptor as A;
    use ApiKey as K;
    use CoordinatorKeyType::{Group, Transaction};
    let descriptor = match api {
        K::ApiVersions => A::meta(Meta::ApiVersions),
        // Metadata has a top-level error code from v13 only.
        K::Metadata => A::meta(Meta::Metadata)
            .rewritten()
            .failure_answer_since(Some(13)),
        K::FindCoordinator => {
            A::meta(Meta::FindCoordinator)
                .rewritten()
                .on_failure(OnFailure::RetryElsewhere(
                    error_codes::COORDINATOR_NOT_AVAILABLE,
                ))
        }
        K::DescribeCluster => A::meta(Meta::DescribeCluster).rewritten(),
        K::DescribeTopicPartitions => A::admin(READ).rewritten(),

        K::Produce => A::split(Family::ByLeader).leader_hints_since(10),
        K::Fetch => A::split(Family::ByLeader).leader_hints_since(11),
        K::ListOffsets | K::OffsetForLeaderEpoch | K::DeleteRecords | K::DescribeProducers => {
            A::split(Family::ByLeader)
        }
        K::OffsetFetch => A::split(Family::ByCoordinator).split_since(OFFSET_FETCH_GROUPS_VERSION),
        K::DescribeGroups | K::DeleteGroups => A::split(Family::ByCoordinator),
        K::ListGroups | K::ListTransactions | K::DescribeLogDirs => {
            A::split(Family::FanOut).filtered_after_fan_out()
        }

        K::JoinGroup
        | K::SyncGroup
        | K::Heartbeat
        | K::LeaveGroup
        | K::OffsetCommit
        | K::OffsetDelete
        | K::TxnOffsetCommit
        | K::ConsumerGroupHeartbeat
        | K::ConsumerGroupDescribe
        // Streams groups (KIP-1071). Their answers name Streams instances
        // (members' `user_endpoint`, the `application.server` each member
        // sent in its own heartbeat; `client_host`, the address the broker
        // saw, a Sluice node's), never a broker: no coordinator, leader or
        // node field. Checked field by field in `route/tests/streams.rs`.
        | K::StreamsGroupHeartbeat
        | K::StreamsGroupDescribe
        | K::StreamsGroupTopologyDescriptionUpdate
        // Share groups (KIP-932): the heartbeat, the description and the
        // offset admin APIs live with the group's coordinator. Their answers
        // name members (`client_host`: the address the broker saw, a Sluice
        // node's) and partitions, never a broker.
        | K::ShareGroupHeartbeat
        | K::ShareGroupDescribe
        | K::DescribeShareGroupOffsets
        | K::AlterShareGroupOffsets
        | K::DeleteShareGroupOffsets => A::coordinator(Group),
        // A failed broker's part: its partitions' fetch and
        // acknowledgements get NOT_LEADER_OR_FOLLOWER (`route::share`).
        K::ShareFetch | K::ShareAcknowledge => A::new(
            Family::ShareSession,
            OnFailure::SplitError(error_codes::NOT_LEADER_OR_FOLLOWER),
            Versions::BodyDecodable,
        )
        .leader_hints_since(0),
        K::InitProducerId
        | K::AddPartitionsToTxn
        | K::AddOffsetsToTxn
        | K::EndTxn
        | K::DescribeTransactions => A::coordinator(Transaction),

        // ElectLeaders has a top-level error code from v1 only.
        K::ElectLeaders => A::admin(TOPIC_WRITE).failure_answer_since(Some(1)),
        K::CreateTopics
        | K::DeleteTopics
        | K::CreatePartitions
        | K::AlterPartitionReassignments => A::admin(TOPIC_WRITE),
        K::AlterConfigs
        | K::IncrementalAlterConfigs
        | K::CreateAcls
        | K::DeleteAcls
        | K::CreateDelegationToken
        | K::RenewDelegationToken
        | K::ExpireDelegationToken
        | K::UpdateFeatures => A::admin(WRITE),
        // Their errors live in per-entry results that Sluice does not build:
        // a failed broker closes the client.
        K::AlterUserScramCredentials | K::AlterClientQuotas | K::AlterReplicaLogDirs => {
            A::admin(WRITE).failure_answer_since(None)
        }

        K::SaslHandshake | K::SaslAuthenticate => {
            A::closing(Family::Sasl).failure_answer_since(None)
        }
        // Hidden from clients: inter-broker and controller-only APIs, which
        // no client sends, the share-group state APIs between brokers, and
        // the admin APIs about the controller quorum and broker membership,
        // which expose or change exactly the topology Sluice hides
        // (DescribeQuorum lists voters with hosts and ports; AddRaftVoter,
        // RemoveRaftVoter, UnregisterBroker, UnregisterController take real
        // ids). LeaderAndIsr,
        // StopReplica, UpdateMetadata and ControlledShutdown (ZooKeeper era)
        // are not in the codec at all. Shown, among the rest:
        // GetTelemetrySubscriptions and PushTelemetry (KIP-714, naming no
        // broker), config APIs naming a broker resource (Sluice maps
        // a Sluice node id to a real broker, `route::admin::configs`), and
        // the operator APIs that carry real broker ids, never addresses
        // (ElectLeaders, Alter/ListPartitionReassignments, AlterReplicaLogDirs).
        K::WriteTxnMarkers
        | K::Vote
        | K::BeginQuorumEpoch
        | K::EndQuorumEpoch
        | K::AlterPartition
        | K::Envelope
        | K::FetchSnapshot
        | K::BrokerRegistration
        | K::BrokerHeartbeat
        | K::AllocateProducerIds
        | K::ControllerRegistration
        | K::AssignReplicasToDirs
        | K::UpdateRaftVoter
        | K::InitializeShareGroupState
        | K::ReadShareGroupState
        | K::WriteShareGroupState
        | K::DeleteShareGroupState
        | K::ReadShareGroupStateSummary
        | K::DescribeQuorum
        | K::AddRaftVoter
        | K::RemoveRaftVoter
        | K::UnregisterBroker
        | K::UnregisterController => A::closing(Family::NotForClients),

        // Every other API a client may send: read-only admin. No wildcard:
        // an API the codec gains gets a row of its own.
        K::DescribeAcls
        | K::DescribeConfigs
        | K::DescribeDelegationToken
        | K::ListPartitionReassignments
        | K::DescribeClientQuotas
        | K::DescribeUserScramCredentials
        | K::GetTelemetrySubscriptions
        | K::PushTelemetry
        | K::ListConfigResources => A::admin(READ),
    };
    match descriptor.family {
        Family::ByLeader | Family::ByCoordinator | Family::FanOut => {
            let code = crate::split::dispatch::unavailable_error(api).unwrap_or(REQUEST_TIMED_OUT);
            descriptor.on_failure(OnFailure::SplitError(code))
        }
        _ => descriptor,
    }
}

/// The versions of `api` Sluice offers clients, before intersecting with the
/// brokers: the [`versions::DECODED`](sluice_codec::versions::DECODED) range
/// for the APIs listed there; otherwise as the table's [`Versions`] says.
pub fn offered_versions(api: ApiKey) -> Option<VersionRange> {
    if let Some(range) = sluice_codec::versions::decoded(api) {
        return Some(VersionRange {
            min: range.min,
            max: range.max,
        });
    }
    match describe(api).versions {
        Versions::Decoded => None,
        Versions::BodyDecodable => {
            sluice_codec::guard::decodable_versions(api).map(|(min, max)| VersionRange { min, max })
        }
        Versions::Codec => Some(api.valid_versions()),
    }
}

/// Whether Sluice serves a client's `api` at `version`: an offered version
/// of it, or an API clients may not send (answered with an error). Kafka
/// closes a client that uses a version it does not support or an API it
/// does not offer; ApiVersions is answered at any version, with the
/// versions supported.
pub fn serves(api: ApiKey, version: i16) -> bool {
    let supported = match offered_versions(api) {
        Some(range) => (range.min..=range.max).contains(&version),
        None => !describe(api).is_client_facing(),
    };
    api == ApiKey::ApiVersions || supported
}
