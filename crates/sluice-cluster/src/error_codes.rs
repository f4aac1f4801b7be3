//! The Kafka error codes Sluice reads or writes, in one place, as a type.
//!
//! Sluice decides on and synthesizes [`ErrorCode`]s; a bare `i16` appears
//! only where a `kafka-protocol` message is read or built. Values come from
//! `kafka_protocol::ResponseError`, so they cannot drift from the protocol;
//! names and the retriable flag follow Kafka's `Errors.java` (an error is
//! retriable when its exception is a `RetriableException`). Each code is
//! chosen for what the client does with it:
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

use std::fmt;

use sluice_codec::kafka_protocol::ResponseError;

/// A Kafka error code (`0` is [`NONE`]: no error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(i16);

impl ErrorCode {
    /// The code a message carries, as read off the wire.
    pub const fn from_wire(code: i16) -> Self {
        Self(code)
    }

    /// The code to write into a message.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// Whether it is [`NONE`].
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Kafka's name for the code, for the codes Sluice names.
    pub fn name(self) -> Option<&'static str> {
        KNOWN.iter().find(|k| k.0 == self).map(|k| k.1)
    }

    /// Whether Kafka classifies it as retriable (`Errors.java`). A code
    /// Sluice does not name is not: Kafka clients treat a code they do not
    /// know as a non-retriable `UnknownServerException`.
    pub fn retriable(self) -> bool {
        KNOWN.iter().find(|k| k.0 == self).is_some_and(|k| k.2)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "error code {}", self.0),
        }
    }
}

/// A code read off a message compares with a named one directly
/// (`partition.error_code == NOT_LEADER_OR_FOLLOWER`).
impl PartialEq<ErrorCode> for i16 {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.0
    }
}

impl PartialEq<i16> for ErrorCode {
    fn eq(&self, other: &i16) -> bool {
        self.0 == *other
    }
}

const fn code(error: ResponseError) -> ErrorCode {
    ErrorCode(error.code())
}

/// No error.
pub const NONE: ErrorCode = ErrorCode(0);
/// The broker is not the partition's leader: refresh metadata, retry.
pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = code(ResponseError::NotLeaderOrFollower);
/// No such topic id: refresh metadata.
pub const UNKNOWN_TOPIC_ID: ErrorCode = code(ResponseError::UnknownTopicId);
/// No such topic or partition: refresh metadata.
pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = code(ResponseError::UnknownTopicOrPartition);
/// The server disconnected before a response was received.
pub const NETWORK_EXCEPTION: ErrorCode = code(ResponseError::NetworkException);
/// The coordinator is loading: retry.
pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = code(ResponseError::CoordinatorLoadInProgress);
/// The coordinator is not available: retry.
pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = code(ResponseError::CoordinatorNotAvailable);
/// The broker is not the coordinator: find it again, retry.
pub const NOT_COORDINATOR: ErrorCode = code(ResponseError::NotCoordinator);
/// The request is malformed: a refused config resource's code.
pub const INVALID_REQUEST: ErrorCode = code(ResponseError::InvalidRequest);
/// The version of the API is not supported.
pub const UNSUPPORTED_VERSION: ErrorCode = code(ResponseError::UnsupportedVersion);
/// No answer in time: retriable, and what a request that cannot wait for a
/// broker is answered with.
pub const REQUEST_TIMED_OUT: ErrorCode = code(ResponseError::RequestTimedOut);
/// The fetch offset is out of the partition's range (a follower may be
/// behind its leader).
pub const OFFSET_OUT_OF_RANGE: ErrorCode = code(ResponseError::OffsetOutOfRange);
/// The client's fetch session is not known (any more).
pub const FETCH_SESSION_ID_NOT_FOUND: ErrorCode = code(ResponseError::FetchSessionIdNotFound);
/// The fetch session's epoch is not the next one.
pub const INVALID_FETCH_SESSION_EPOCH: ErrorCode = code(ResponseError::InvalidFetchSessionEpoch);
/// A fetch session mixed topic names and topic ids.
pub const FETCH_SESSION_TOPIC_ID_ERROR: ErrorCode = code(ResponseError::FetchSessionTopicIdError);
/// The client asked for a SASL mechanism that is not offered.
pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = code(ResponseError::UnsupportedSaslMechanism);
/// Wrong credentials.
pub const SASL_AUTHENTICATION_FAILED: ErrorCode = code(ResponseError::SaslAuthenticationFailed);
/// A SASL request out of the exchange's order.
pub const ILLEGAL_SASL_STATE: ErrorCode = code(ResponseError::IllegalSaslState);

/// Every named code: Kafka's name and whether `Errors.java` makes it
/// retriable (its exception extends `RetriableException`).
const KNOWN: [(ErrorCode, &str, bool); 18] = [
    (NONE, "NONE", false),
    (OFFSET_OUT_OF_RANGE, "OFFSET_OUT_OF_RANGE", false),
    (
        UNKNOWN_TOPIC_OR_PARTITION,
        "UNKNOWN_TOPIC_OR_PARTITION",
        true,
    ),
    (NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER", true),
    (REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT", true),
    (NETWORK_EXCEPTION, "NETWORK_EXCEPTION", true),
    (
        COORDINATOR_LOAD_IN_PROGRESS,
        "COORDINATOR_LOAD_IN_PROGRESS",
        true,
    ),
    (COORDINATOR_NOT_AVAILABLE, "COORDINATOR_NOT_AVAILABLE", true),
    (NOT_COORDINATOR, "NOT_COORDINATOR", true),
    (
        UNSUPPORTED_SASL_MECHANISM,
        "UNSUPPORTED_SASL_MECHANISM",
        false,
    ),
    (ILLEGAL_SASL_STATE, "ILLEGAL_SASL_STATE", false),
    (UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION", false),
    (INVALID_REQUEST, "INVALID_REQUEST", false),
    (
        SASL_AUTHENTICATION_FAILED,
        "SASL_AUTHENTICATION_FAILED",
        false,
    ),
    (
        FETCH_SESSION_ID_NOT_FOUND,
        "FETCH_SESSION_ID_NOT_FOUND",
        true,
    ),
    (
        INVALID_FETCH_SESSION_EPOCH,
        "INVALID_FETCH_SESSION_EPOCH",
        true,
    ),
    (UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID", true),
    (
        FETCH_SESSION_TOPIC_ID_ERROR,
        "FETCH_SESSION_TOPIC_ID_ERROR",
        true,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_agrees_with_the_protocol_on_retriable() {
        for (code, name, retriable) in KNOWN {
            let protocol = ResponseError::try_from_code(code.code());
            let protocol_retriable = protocol.is_some_and(|e| e.is_retriable());
            assert_eq!(retriable, protocol_retriable, "{name}");
            assert_eq!(code.retriable(), retriable, "{name}");
        }
    }

    #[test]
    fn names_are_unique_and_shown_with_the_number() {
        let mut names: Vec<&str> = KNOWN.iter().map(|k| k.1).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOWN.len());
        assert_eq!(
            NOT_LEADER_OR_FOLLOWER.to_string(),
            "NOT_LEADER_OR_FOLLOWER (6)"
        );
        assert_eq!(REQUEST_TIMED_OUT.to_string(), "REQUEST_TIMED_OUT (7)");
        assert_eq!(ErrorCode::from_wire(9999).to_string(), "error code 9999");
        assert!(!ErrorCode::from_wire(9999).retriable());
    }

    #[test]
    fn wire_values_round_trip() {
        assert_eq!(ErrorCode::from_wire(6), NOT_LEADER_OR_FOLLOWER);
        assert_eq!(NOT_COORDINATOR.code(), 16);
        assert!(NONE.is_none());
        assert!(!NOT_COORDINATOR.is_none());
    }
}
