//! Kafka wire codec for Sluice.
//!
//! Sluice forwards most requests without looking inside them, so this crate is
//! built around one idea: a [`Request`] or [`Response`] keeps the raw bytes it
//! arrived as and decodes its body (with the `kafka-protocol` crate) only when a
//! transform asks for it. A frame whose body was never decoded is written out as
//! the original bytes, with at most its correlation id patched in place.
//!
//! - `frame`: the 4-byte length prefix, with a configurable size limit.
//! - [`header`]: request header parsing (header v1 and flexible v2).
//! - `message`: [`Request`] and [`Response`], lazy decode and re-encode.
//! - `out`: frames on their way out, sharing the bytes they came with.
//! - [`guard`]: the walk that keeps hostile bodies away from the decoder.
//! - [`versions`]: the API versions Sluice decodes.
//! - `wait`: how long a broker may hold a request by design.
//! - `error`: the crate's error type, [`CodecError`].

#![deny(missing_docs)]

mod error;
mod frame;
pub mod guard;
pub mod header;
mod message;
mod out;
pub mod versions;
mod wait;

pub use error::CodecError;
pub use frame::{DEFAULT_MAX_FRAME_BYTES, FrameCodec, MAX_UPFRONT_RESERVE};
pub use header::RequestHeaderInfo;
pub use kafka_protocol;
pub use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
pub use message::{FetchMaxBytes, Request, Response};
pub use out::OutFrames;
