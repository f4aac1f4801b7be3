//! Sluice's configuration files, in shotover-proxy's Kafka topology format.
//!
//! Two files: the topology (sources, each with a chain of transforms) and the
//! config (log level, observability address). [`Topology::load`] and
//! [`Config::load`] read a file, parse it with serde (`deny_unknown_fields`,
//! through `serde_path_to_error` so that errors name the field), then check it
//! with `validate()`. Every error is a [`ConfigError`] naming the file and the
//! field.
//!
//! What validation enforces:
//! - at least one source; source names and listen addresses unique;
//! - every address parses as `host:port` (IPv6 as `[addr]:port`);
//! - every chain ends in exactly one sink, and has no sink elsewhere;
//! - `KafkaSinkSingle` has exactly one of `destination_port` and `destination_address`;
//! - `KafkaSinkCluster` has contact points, unique broker ids, and its own
//!   `local_shotover_broker_id` among `shotover_nodes`;
//! - timeouts and limits are positive, `max_frame_bytes` in a sane range,
//!   delegation tokens live at least [`MIN_DELEGATION_TOKEN_LIFETIME_SECS`];
//! - TLS files exist (relative paths are relative to the working directory).
//!
//! The types derive `schemars::JsonSchema`, kept in step with their serde
//! attributes: `docs/configuration.md` is tested against that schema
//! (`reference`, a test module), so a field added, renamed or removed without
//! the reference following fails the tests.

#![deny(missing_docs)]

mod address;
mod config;
mod error;
mod load;
pub mod topology;
mod validate;

#[cfg(test)]
mod reference;

pub use address::HostPort;
pub use config::Config;
pub use error::{ConfigError, FieldError};
pub use topology::{
    AuthorizeScramOverMtlsConfig, DEFAULT_CONNECTION_LIMIT, DEFAULT_MAX_FRAME_BYTES,
    KafkaSinkClusterConfig, KafkaSinkSingleConfig, KafkaSourceConfig,
    MIN_DELEGATION_TOKEN_LIFETIME_SECS, ShotoverNodeConfig, SourceConfig, TlsAcceptorConfig,
    TlsConnectorConfig, Topology, TransformConfig,
};
