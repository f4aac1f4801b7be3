//! Which Kafka error codes mean Sluice's [`ClusterView`](super::ClusterView) is
//! out of date.
//!
//! A broker answers with one of these codes when Sluice routed by a picture of
//! the cluster that no longer holds: the partition moved, the coordinator
//! moved, the topic was deleted. The router must then refresh (or forget) the
//! part of the view the code names before it routes that request again;
//! retrying against the same broker would only get the same answer.
//!
//! The list follows what Kafka's own Java clients treat as "request a metadata
//! update" (producer `Sender`, consumer `FetchCollector`, `ListOffsets`, the
//! group and transaction coordinators, the admin client's controller lookup).

use sluice_codec::kafka_protocol::ResponseError;

use crate::error_codes::ErrorCode;

/// What part of the view an error code says is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Staleness {
    /// The partition's leader moved, or has no leader right now: refresh the
    /// topic's metadata.
    Leader,
    /// The topic (or this topic id) is unknown to the broker: the topic was
    /// deleted or recreated, or the broker has not heard of it yet.
    Topic,
    /// The group or transaction coordinator moved: forget it and look it up
    /// again with FindCoordinator.
    Coordinator,
    /// The controller moved: refresh the metadata (which names the controller).
    Controller,
    /// The whole view is untrustworthy (`REBOOTSTRAP_REQUIRED`): rebuild it
    /// from the first contact points.
    Cluster,
}

/// Classifies an error code by the part of the view it says is stale, or
/// `None` when it says nothing about the view (including 0, no error).
///
/// | code | name | staleness |
/// |---|---|---|
/// | 5 | LEADER_NOT_AVAILABLE | leader |
/// | 6 | NOT_LEADER_OR_FOLLOWER | leader |
/// | 9 | REPLICA_NOT_AVAILABLE | leader |
/// | 56 | KAFKA_STORAGE_ERROR | leader (the replica's disk failed; leadership moves) |
/// | 74 | FENCED_LEADER_EPOCH | leader |
/// | 75 | UNKNOWN_LEADER_EPOCH | leader |
/// | 78 | OFFSET_NOT_AVAILABLE | leader (a leader election just happened) |
/// | 3 | UNKNOWN_TOPIC_OR_PARTITION | topic |
/// | 100 | UNKNOWN_TOPIC_ID | topic |
/// | 103 | INCONSISTENT_TOPIC_ID | topic |
/// | 15 | COORDINATOR_NOT_AVAILABLE | coordinator |
/// | 16 | NOT_COORDINATOR | coordinator |
/// | 41 | NOT_CONTROLLER | controller |
/// | 129 | REBOOTSTRAP_REQUIRED | cluster |
///
/// Not stale: COORDINATOR_LOAD_IN_PROGRESS (14; the coordinator is right, only
/// busy) and NOT_ENOUGH_REPLICAS (19/20; the leader is right).
pub fn staleness(code: ErrorCode) -> Option<Staleness> {
    use ResponseError as E;
    Some(match ResponseError::try_from_code(code.code())? {
        E::LeaderNotAvailable
        | E::NotLeaderOrFollower
        | E::ReplicaNotAvailable
        | E::KafkaStorageError
        | E::FencedLeaderEpoch
        | E::UnknownLeaderEpoch
        | E::OffsetNotAvailable => Staleness::Leader,
        E::UnknownTopicOrPartition | E::UnknownTopicId | E::InconsistentTopicId => Staleness::Topic,
        E::CoordinatorNotAvailable | E::NotCoordinator => Staleness::Coordinator,
        E::NotController => Staleness::Controller,
        E::RebootstrapRequired => Staleness::Cluster,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_codes() {
        for (code, want) in [
            (0, None),
            (6, Some(Staleness::Leader)),
            (5, Some(Staleness::Leader)),
            (74, Some(Staleness::Leader)),
            (75, Some(Staleness::Leader)),
            (3, Some(Staleness::Topic)),
            (100, Some(Staleness::Topic)),
            (15, Some(Staleness::Coordinator)),
            (16, Some(Staleness::Coordinator)),
            (41, Some(Staleness::Controller)),
            (129, Some(Staleness::Cluster)),
            (14, None),
            (19, None),
            (-1, None),
            (9999, None),
        ] {
            assert_eq!(staleness(ErrorCode::from_wire(code)), want, "code {code}");
        }
    }
}
