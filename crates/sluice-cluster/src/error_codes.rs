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
//! | [`NOT_LEADER_OR_FOLLOWER`] | Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers; ShareFetch and ShareAcknowledge (the fetch and the acknowledgements of a failed broker, or acknowledgements of records acquired from a broker that no longer leads) | refreshes metadata and retries (idempotence protects produce; a share consumer's acknowledgements fail, their records are delivered again) |
//! | [`SHARE_SESSION_NOT_FOUND`] | ShareFetch and ShareAcknowledge in a share session Sluice does not hold | opens a new share session |
//! | [`INVALID_RECORD_STATE`] | acknowledgements of records acquired in a share session a broker lost (the broker released them with the session) | fails the acknowledgements without retrying; the records are delivered again |
//! | [`INVALID_SHARE_SESSION_EPOCH`] | ShareFetch and ShareAcknowledge at an epoch other than the session's next | opens a new share session |
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

/// Declares each named code once: its constant, Kafka's name for it (the
/// constant's) and whether `Errors.java` makes it retriable (its exception
/// extends `RetriableException`), and the table [`ErrorCode::name`] and
/// [`ErrorCode::retriable`] read. A test checks the flags against
/// `kafka-protocol`'s copy of Kafka's classification.
macro_rules! named_codes {
    ($($(#[doc = $doc:literal])* $name:ident = $variant:ident, retriable: $retriable:literal;)*) => {
        $(
            $(#[doc = $doc])*
            pub const $name: ErrorCode = ErrorCode(ResponseError::$variant.code());
        )*

        /// Every named code: Kafka's name, and whether it is retriable.
        const KNOWN: &[(ErrorCode, &str, bool)] = &[
            (NONE, "NONE", false),
            $(($name, stringify!($name), $retriable),)*
        ];
    };
}

/// No error.
pub const NONE: ErrorCode = ErrorCode(0);

named_codes! {
    /// The broker is not the partition's leader: refresh metadata, retry.
    NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollower, retriable: true;
    /// No such topic id: refresh metadata.
    UNKNOWN_TOPIC_ID = UnknownTopicId, retriable: true;
    /// No such topic or partition: refresh metadata.
    UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartition, retriable: true;
    /// The server disconnected before a response was received.
    NETWORK_EXCEPTION = NetworkException, retriable: true;
    /// The coordinator is loading: retry.
    COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgress, retriable: true;
    /// The coordinator is not available: retry.
    COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailable, retriable: true;
    /// The broker is not the coordinator: find it again, retry.
    NOT_COORDINATOR = NotCoordinator, retriable: true;
    /// The request is malformed: a refused config resource's code.
    INVALID_REQUEST = InvalidRequest, retriable: false;
    /// The version of the API is not supported.
    UNSUPPORTED_VERSION = UnsupportedVersion, retriable: false;
    /// No answer in time: retriable, and what a request that cannot wait
    /// for a broker is answered with.
    REQUEST_TIMED_OUT = RequestTimedOut, retriable: true;
    /// The fetch offset is out of the partition's range (a follower may be
    /// behind its leader).
    OFFSET_OUT_OF_RANGE = OffsetOutOfRange, retriable: false;
    /// The client's fetch session is not known (any more).
    FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFound, retriable: true;
    /// The fetch session's epoch is not the next one.
    INVALID_FETCH_SESSION_EPOCH = InvalidFetchSessionEpoch, retriable: true;
    /// A fetch session mixed topic names and topic ids.
    FETCH_SESSION_TOPIC_ID_ERROR = FetchSessionTopicIdError, retriable: true;
    /// The client asked for a SASL mechanism that is not offered.
    UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanism, retriable: false;
    /// Wrong credentials.
    SASL_AUTHENTICATION_FAILED = SaslAuthenticationFailed, retriable: false;
    /// A SASL request out of the exchange's order.
    ILLEGAL_SASL_STATE = IllegalSaslState, retriable: false;
    /// The share session is not known (any more): the client opens a new one.
    SHARE_SESSION_NOT_FOUND = ShareSessionNotFound, retriable: true;
    /// The share session's epoch is not the next one: the client opens a new one.
    INVALID_SHARE_SESSION_EPOCH = InvalidShareSessionEpoch, retriable: true;
    /// No more share sessions may be opened: the client tries again later.
    SHARE_SESSION_LIMIT_REACHED = ShareSessionLimitReached, retriable: true;
    /// The records acknowledged are not (any more) acquired by the member:
    /// the acknowledgements fail for good, and the records are delivered
    /// again.
    INVALID_RECORD_STATE = InvalidRecordState, retriable: false;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_agrees_with_the_protocol_on_retriable() {
        for &(code, name, retriable) in KNOWN {
            let protocol = ResponseError::try_from_code(code.code());
            let protocol_retriable = protocol.is_some_and(|e| e.is_retriable());
            assert_eq!(retriable, protocol_retriable, "{name}");
            assert_eq!(code.retriable(), retriable, "{name}");
        }
    }

    /// `NotLeaderOrFollower` -> `NOT_LEADER_OR_FOLLOWER`.
    fn kafka_name(variant: &str) -> String {
        let mut name = String::new();
        for (i, c) in variant.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }

    #[test]
    fn every_name_is_kafkas_for_its_number() {
        for &(code, name, _) in &KNOWN[1..] {
            let Some(protocol) = ResponseError::try_from_code(code.code()) else {
                panic!("{name} has no protocol error");
            };
            assert_eq!(kafka_name(&format!("{protocol:?}")), name);
        }
        assert_eq!(KNOWN[0], (NONE, "NONE", false));
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
