//! The Kafka error codes Sluice reads or writes, in one place.
//!
//! Values come from `kafka_protocol::ResponseError`, so they cannot drift from
//! the protocol. Each code is chosen for what the client does with it:
//!
//! | code | used for | what the client does |
//! |---|---|---|
//! | [`NOT_LEADER_OR_FOLLOWER`] | Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers; ShareFetch and ShareAcknowledge (the fetch and the acknowledgements of a failed broker, or acknowledgements of records acquired from a broker that no longer leads) | refreshes metadata and retries (idempotence protects produce; a share consumer's acknowledgements fail, their records are delivered again) |
//! | [`SHARE_SESSION_NOT_FOUND`] | ShareFetch and ShareAcknowledge in a share session Sluice does not hold, and acknowledgements for a broker whose session Sluice lost | opens a new share session |
//! | [`INVALID_SHARE_SESSION_EPOCH`] | ShareFetch and ShareAcknowledge at an epoch other than the session's next | opens a new share session |
//! | [`NOT_COORDINATOR`] | OffsetFetch, DescribeGroups, DeleteGroups | finds the coordinator again and retries |
//! | [`COORDINATOR_NOT_AVAILABLE`] | ListGroups | the Java admin client retries the listing |
//! | [`COORDINATOR_LOAD_IN_PROGRESS`] | ListTransactions | the only code the Java admin client retries there |
//! | [`NETWORK_EXCEPTION`] | DescribeLogDirs (v3+ only; v1–2 have no error field) | reports a retriable failure |
//! | [`UNKNOWN_TOPIC_ID`] | Fetch v13+ of a topic id no broker knows (after a metadata refresh), as Kafka answers it | refreshes metadata |
//! | [`UNKNOWN_TOPIC_OR_PARTITION`] | Fetch below v13 of a topic name no broker knows, or of a partition its topic does not have | refreshes metadata |

use sluice_codec::kafka_protocol::ResponseError;

/// The broker is not the partition's leader: refresh metadata, retry.
pub const NOT_LEADER_OR_FOLLOWER: i16 = ResponseError::NotLeaderOrFollower.code();
/// No such topic id: refresh metadata.
pub const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();
/// No such topic or partition: refresh metadata.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
/// The server disconnected before a response was received.
pub const NETWORK_EXCEPTION: i16 = ResponseError::NetworkException.code();
/// The coordinator is loading: retry.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = ResponseError::CoordinatorLoadInProgress.code();
/// The coordinator is not available: retry.
pub const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
/// The broker is not the coordinator: find it again, retry.
pub const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
/// The request is malformed: a refused config resource's code.
pub const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();
/// The version of the API is not supported.
pub const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();
/// No answer in time: retriable, and what a request that cannot wait for a
/// broker is answered with.
pub const REQUEST_TIMED_OUT: i16 = ResponseError::RequestTimedOut.code();
/// The fetch offset is out of the partition's range (a follower may be
/// behind its leader).
pub const OFFSET_OUT_OF_RANGE: i16 = ResponseError::OffsetOutOfRange.code();
/// The client's fetch session is not known (any more).
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = ResponseError::FetchSessionIdNotFound.code();
/// The fetch session's epoch is not the next one.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = ResponseError::InvalidFetchSessionEpoch.code();
/// A fetch session mixed topic names and topic ids.
pub const FETCH_SESSION_TOPIC_ID_ERROR: i16 = ResponseError::FetchSessionTopicIdError.code();
/// The client asked for a SASL mechanism that is not offered.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = ResponseError::UnsupportedSaslMechanism.code();
/// Wrong credentials.
pub const SASL_AUTHENTICATION_FAILED: i16 = ResponseError::SaslAuthenticationFailed.code();
/// A SASL request out of the exchange's order.
pub const ILLEGAL_SASL_STATE: i16 = ResponseError::IllegalSaslState.code();
/// The share session is not known (any more): the client opens a new one.
pub const SHARE_SESSION_NOT_FOUND: i16 = ResponseError::ShareSessionNotFound.code();
/// The share session's epoch is not the next one: the client opens a new one.
pub const INVALID_SHARE_SESSION_EPOCH: i16 = ResponseError::InvalidShareSessionEpoch.code();
/// No more share sessions may be opened: the client tries again later.
pub const SHARE_SESSION_LIMIT_REACHED: i16 = ResponseError::ShareSessionLimitReached.code();
