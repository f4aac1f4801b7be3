//! Sluice's configuration files, in shotover-proxy's Kafka topology format.
//!
//! Two files: the topology (sources, each with a chain of transforms) and the
//! config (log level, observability address). Both are parsed with serde and
//! `deny_unknown_fields`, then checked by `validate()`; every error names the
//! file and the field.

pub mod config;
pub mod error;
pub mod topology;

pub use config::Config;
pub use error::ConfigError;
pub use topology::{
    AuthorizeScramOverMtlsConfig, KafkaSinkClusterConfig, KafkaSinkSingleConfig, KafkaSourceConfig,
    ShotoverNodeConfig, SourceConfig, TlsAcceptorConfig, TlsConnectorConfig, Topology,
    TransformConfig,
};
