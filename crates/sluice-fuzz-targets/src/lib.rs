//! The bodies of Sluice's fuzz targets, one function per target.
//!
//! They live in a workspace crate, not in `fuzz/`, so that the same code
//! runs two ways: under libFuzzer (the `fuzz/` cargo-fuzz crate, nightly,
//! whose `fuzz_targets/*.rs` only call these functions) and as ordinary
//! stable tests (`tests/corpus.rs` feeds every file of `fuzz/corpus/<target>/`
//! through them, so `cargo test --workspace` replays the seeds and every
//! crash input that was ever added to a corpus).
//!
//! Each function takes arbitrary bytes and must never panic; a panic is a bug
//! in Sluice (or an `assert!` here that found a broken invariant).
//!
//! - [`framing`]: `FrameCodec` over a byte stream, `Request::parse` of each
//!   frame, then `body()`, `body_mut()` and `encode()`.
//! - [`response`]: `Response::parse` of one frame for an api and version
//!   picked by the first two bytes, lazy decode, the public rewrites of
//!   `sluice-sink-cluster`, `encode()` and `encode_into()` (which must agree).
//! - [`split`]: `split_request` of a decoded request over a fake cluster,
//!   each part encoded, then `merge_responses` of failed parts.
//! - [`sasl`]: the PLAIN and SCRAM parsers, picked by the first byte.
//!
//! [`seeds`] builds the seed corpora from real encoded messages.

#![deny(missing_docs)]

mod fixtures;
mod framing;
mod response;
mod sasl;
pub mod seeds;
mod split;
mod wire;

pub use framing::framing;
pub use response::response;
pub use sasl::sasl;
pub use split::split;

/// A target's body: takes any input, must never panic.
pub type Target = fn(&[u8]);

/// The fuzz targets: the name of each (its `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/corpus/<name>/`) and its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("framing", framing),
    ("response", response),
    ("split", split),
    ("sasl", sasl),
];
