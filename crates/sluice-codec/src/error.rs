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
    FrameTooLarge { size: usize, max: usize },
    /// The length prefix was negative.
    #[error("invalid negative frame length {0}")]
    NegativeLength(i32),
    /// The frame ended before a field could be read.
    #[error("truncated {what}: need {needed} bytes, have {available}")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    /// A field held a value that the protocol does not allow.
    #[error("malformed {what}")]
    Malformed { what: &'static str },
    /// The api key is not one that Sluice knows.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// `kafka-protocol` failed to decode a body.
    #[error("cannot decode {api:?} v{version} {kind}: {reason}")]
    Decode {
        api: kafka_protocol::messages::ApiKey,
        version: i16,
        kind: &'static str,
        reason: String,
    },
    /// `kafka-protocol` failed to encode a body.
    #[error("cannot encode {api:?} v{version} {kind}: {reason}")]
    Encode {
        api: kafka_protocol::messages::ApiKey,
        version: i16,
        kind: &'static str,
        reason: String,
    },
    /// An I/O error from the underlying stream.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}
