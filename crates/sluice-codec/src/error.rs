//! Errors raised while framing, parsing or encoding Kafka messages.
//!
//! Every variant describes bytes that came from a peer (or a message we could
//! not encode), so none of them is a reason to panic: callers log the error and
//! close the offending connection.

/// An error in Kafka framing or message encoding.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The length prefix announced a frame larger than the configured limit.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The announced size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The length prefix was negative.
    #[error("invalid negative frame length {0}")]
    NegativeLength(i32),
    /// The frame ended before a field could be read.
    #[error("truncated {what}: need {needed} bytes, have {available}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A field held a value that the protocol does not allow.
    #[error("malformed {what}")]
    Malformed {
        /// The field.
        what: &'static str,
    },
    /// The api key is not one that Sluice knows.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// `kafka-protocol` failed to decode a body.
    #[error("cannot decode {api:?} v{version} {kind}: {reason}")]
    Decode {
        /// The body's api.
        api: kafka_protocol::messages::ApiKey,
        /// Its version.
        version: i16,
        /// `"request"` or `"response"`.
        kind: &'static str,
        /// What `kafka-protocol` said.
        reason: String,
    },
    /// `kafka-protocol` failed to encode a body.
    #[error("cannot encode {api:?} v{version} {kind}: {reason}")]
    Encode {
        /// The body's api.
        api: kafka_protocol::messages::ApiKey,
        /// Its version.
        version: i16,
        /// `"request"` or `"response"`.
        kind: &'static str,
        /// What `kafka-protocol` said.
        reason: String,
    },
    /// An I/O error from the underlying stream.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}
