//! The Kafka error codes that splitting and merging synthesize, in one place.
//!
//! Values come from `kafka_protocol::ResponseError`, so they cannot drift from
//! the protocol. Each code is chosen for what the client does with it:
//!
//! | code | used for | what the client does |
//! |---|---|---|
//! | [`NOT_LEADER_OR_FOLLOWER`] | Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers | refreshes metadata and retries (idempotence protects produce) |
//! | [`NOT_COORDINATOR`] | OffsetFetch, DescribeGroups, DeleteGroups | finds the coordinator again and retries |
//! | [`COORDINATOR_NOT_AVAILABLE`] | ListGroups | the Java admin client retries the listing |
//! | [`COORDINATOR_LOAD_IN_PROGRESS`] | ListTransactions | the only code the Java admin client retries there |
//! | [`NETWORK_EXCEPTION`] | DescribeLogDirs (v3+ only; v1–2 have no error field) | reports a retriable failure |
//! | [`UNKNOWN_TOPIC_ID`] | Fetch v13+ of a topic id no broker knows (after a metadata refresh), as Kafka answers it | refreshes metadata |
//! | [`UNKNOWN_TOPIC_OR_PARTITION`] | Fetch below v13 of a topic name no broker knows, or of a partition its topic does not have | refreshes metadata |

use sluice_codec::kafka_protocol::ResponseError;

/// The broker is not the partition's leader: refresh metadata, retry.
pub(crate) const NOT_LEADER_OR_FOLLOWER: i16 = ResponseError::NotLeaderOrFollower.code();
/// No such topic id: refresh metadata.
pub(crate) const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();
/// No such topic or partition: refresh metadata.
pub(crate) const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
/// The server disconnected before a response was received.
pub(crate) const NETWORK_EXCEPTION: i16 = ResponseError::NetworkException.code();
/// The coordinator is loading: retry.
pub(crate) const COORDINATOR_LOAD_IN_PROGRESS: i16 =
    ResponseError::CoordinatorLoadInProgress.code();
/// The coordinator is not available: retry.
pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
/// The broker is not the coordinator: find it again, retry.
pub(crate) const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
