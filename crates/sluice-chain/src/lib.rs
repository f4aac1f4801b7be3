//! The transform chain that every client request passes through.
//!
//! A client connection owns one [`Chain`]: zero or more [`Transform`]s that see
//! each request on the way in and each response on the way out (in reverse
//! order), ending in one [`Sink`] that talks to Kafka (`KafkaSinkSingle` and
//! `KafkaSinkCluster`, each in its own crate). Transforms are
//! synchronous rewrites; the sink is where I/O happens.
//!
//! - `context`: what a chain knows about its client connection.
//! - `transform`: the [`Transform`], [`Sink`] and builder traits, and [`Chain`].
//! - `error`: [`ChainError`], what a transform or sink fails with.
//! - [`readiness`]: each sink's readiness probe and the rule `/ready` applies.
//! - [`debug_printer`]: the `DebugPrinter` transform.

#![deny(missing_docs)]

mod context;
pub mod debug_printer;
mod error;
pub mod readiness;
mod transform;

#[cfg(test)]
mod test_support;

pub use context::ConnectionContext;
pub use error::{ChainError, SinkError};
pub use transform::{Chain, ChainBuilder, Sink, SinkBuilder, Transform, TransformBuilder};
