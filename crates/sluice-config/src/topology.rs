//! The topology file: sources and their transform chains.
//!
//! The schema follows shotover-proxy's Kafka topology format, so that a
//! shotover user's file parses unchanged. Rust field names carry their units
//! (`idle_timeout_secs`); serde renames map them to shotover's names (`timeout`).
//! Sluice's extensions (`destination_address`, `max_frame_bytes`, `name` on
//! sinks) are optional and never appear in shotover files.
//!
//! - `chain`: the elements of a chain, and the rule that a sink ends it.
//! - `tls`: TLS settings for listeners and for broker connections.
//! - `sinks`: `KafkaSinkSingle` and `KafkaSinkCluster`.

pub(crate) mod chain;
pub(crate) mod sinks;
pub(crate) mod tls;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

pub use chain::TransformConfig;
pub use sinks::{
    AuthorizeScramOverMtlsConfig, KafkaSinkClusterConfig, KafkaSinkSingleConfig,
    MIN_DELEGATION_TOKEN_LIFETIME_SECS, ShotoverNodeConfig,
};
pub use tls::{TlsAcceptorConfig, TlsConnectorConfig};

use crate::validate::{self, Checks};
use crate::{ConfigError, FieldError, load};

/// Client connections a source accepts at once unless `connection_limit` says otherwise.
pub const DEFAULT_CONNECTION_LIMIT: usize = 512;
/// Largest client frame accepted unless `max_frame_bytes` says otherwise (Kafka's
/// `socket.request.max.bytes` default).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;
/// Smallest `max_frame_bytes` accepted: below this, ordinary metadata requests fail.
pub(crate) const MIN_MAX_FRAME_BYTES: usize = 64 * 1024;
/// Largest `max_frame_bytes` accepted.
pub(crate) const MAX_MAX_FRAME_BYTES: usize = 1024 * 1024 * 1024;
/// Seconds a client that is owed responses may go without reading any of
/// them, unless `write_timeout_secs` says otherwise. Kafka clients read their
/// socket all the time, so 30 s (the Java client's own `request.timeout.ms`,
/// after which it gives up on a request itself) without accepting a single
/// byte is a client that stopped reading or a dead peer, not a slow one.
pub(crate) const DEFAULT_WRITE_TIMEOUT_SECS: u64 = 30;
/// Largest frame accepted before a client has authenticated unless
/// `max_unauthenticated_frame_bytes` says otherwise: Kafka's
/// `sasl.server.max.receive.size` default (512 KiB).
pub(crate) const DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES: usize = 512 * 1024;
/// Smallest `max_unauthenticated_frame_bytes` accepted: ApiVersions and the
/// SASL messages of any client fit well within it.
pub(crate) const MIN_MAX_UNAUTHENTICATED_FRAME_BYTES: usize = 4 * 1024;
/// Seconds a client has to finish SASL authentication, from its connection,
/// unless `authentication_timeout_secs` says otherwise. A real client needs
/// one to three round trips (ApiVersions, SaslHandshake, one or two
/// SaslAuthenticate), well under a second; 10 s leaves room for a slow
/// network and a busy broker while keeping a socket that never authenticates
/// from holding its slot for long.
pub(crate) const DEFAULT_AUTHENTICATION_TIMEOUT_SECS: u64 = 10;
/// Connections not yet authenticated a source holds at once unless
/// `unauthenticated_connection_limit` says otherwise.
pub(crate) const DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT: usize = 128;
/// Of those, how many one client address may hold unless
/// `unauthenticated_connection_limit_per_address` says otherwise: an eighth
/// of the cap, so that one address cannot lock every other client out, and
/// a burst of clients behind one NAT that all connect at once mostly gets
/// in (a refused one reconnects, as after any lost connection).
pub(crate) const DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT_PER_ADDRESS: usize = 16;
/// Bytes one client connection may hold unless
/// `connection_memory_budget_bytes` says otherwise: room for one Fetch at
/// the Java consumer's default `fetch.max.bytes` (50 MiB) plus the requests
/// a producer keeps in flight, so well-behaved clients are never clamped.
pub(crate) const DEFAULT_CONNECTION_MEMORY_BUDGET_BYTES: usize = 64 * 1024 * 1024;
/// Bytes all client connections of the process may hold together unless
/// `memory_budget_bytes` says otherwise.
pub const DEFAULT_MEMORY_BUDGET_BYTES: usize = 1024 * 1024 * 1024;
/// Smallest memory budget accepted, for a connection or the process.
pub(crate) const MIN_MEMORY_BUDGET_BYTES: usize = 1024 * 1024;

/// The whole topology file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Listeners, each with its chain.
    pub sources: Vec<SourceConfig>,
    /// Bytes all client connections of the process may hold together
    /// (default [`DEFAULT_MEMORY_BUDGET_BYTES`]): requests read and not yet
    /// answered, the responses they will bring, and responses not yet
    /// written. At the limit connections stop reading until it drains.
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_MEMORY_BUDGET_BYTES))]
    pub(crate) memory_budget_bytes: Option<usize>,
}

impl Topology {
    /// Reads, parses and validates the topology file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(&load::read_file(path)?, path)
    }

    /// Parses and validates `yaml`; `path` names the origin in errors.
    pub fn parse(yaml: &str, path: &Path) -> Result<Self, ConfigError> {
        let topology: Self = load::parse_yaml(yaml, path)?;
        topology.validate(path)?;
        Ok(topology)
    }

    /// Checks every rule (see the crate docs); `path` names the file in errors.
    pub(crate) fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        self.check(Checks::ALL).map_err(|e| e.in_file(path))
    }

    /// Makes this process the node `broker_id` of the topology's cluster
    /// sink, in place of the file's `local_shotover_broker_id` (the
    /// `--local-shotover-broker-id` flag): every node of a deployment can
    /// then run the same file, which lists them all. The topology must have
    /// exactly one `KafkaSinkCluster`, and `broker_id` must be one of its
    /// `shotover_nodes`; `path` names the file in errors.
    pub fn set_local_shotover_broker_id(
        &mut self,
        broker_id: i32,
        path: &Path,
    ) -> Result<(), ConfigError> {
        const FLAG: &str = "--local-shotover-broker-id";
        let mut sinks: Vec<(String, &mut KafkaSinkClusterConfig)> = Vec::new();
        for (i, SourceConfig::Kafka(kafka)) in self.sources.iter_mut().enumerate() {
            let at = kafka.chain.len().saturating_sub(1);
            if let Some(TransformConfig::KafkaSinkCluster(sink)) = kafka.chain.last_mut() {
                sinks.push((
                    format!("sources[{i}].Kafka.chain[{at}].KafkaSinkCluster"),
                    sink,
                ));
            }
        }
        let (field, sink) = match sinks.len() {
            1 => sinks.remove(0),
            0 => {
                return Err(FieldError::new(
                    "sources",
                    format!(
                        "{FLAG} {broker_id} needs a chain ending in KafkaSinkCluster; there is none"
                    ),
                )
                .in_file(path));
            }
            _ => {
                let found: Vec<&str> = sinks.iter().map(|(f, _)| f.as_str()).collect();
                return Err(FieldError::new(
                    "sources",
                    format!(
                        "{FLAG} {broker_id} needs exactly one KafkaSinkCluster, found {}: \
                         give each its local_shotover_broker_id in the file instead",
                        found.join(", ")
                    ),
                )
                .in_file(path));
            }
        };
        if !sink.shotover_nodes.iter().any(|n| n.broker_id == broker_id) {
            return Err(FieldError::new(
                format!("{field}.shotover_nodes"),
                format!("{FLAG} {broker_id} is not the broker_id of any entry"),
            )
            .in_file(path));
        }
        sink.local_shotover_broker_id = broker_id;
        Ok(())
    }

    /// `memory_budget_bytes`, or its default.
    pub fn memory_budget_bytes_or_default(&self) -> usize {
        self.memory_budget_bytes
            .unwrap_or(DEFAULT_MEMORY_BUDGET_BYTES)
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        if self.sources.is_empty() {
            return Err(FieldError::new("sources", "must list at least one source"));
        }
        validate::at_least(
            "memory_budget_bytes",
            self.memory_budget_bytes,
            MIN_MEMORY_BUDGET_BYTES,
        )?;
        let process = self.memory_budget_bytes_or_default();
        for (i, SourceConfig::Kafka(kafka)) in self.sources.iter().enumerate() {
            let connection = kafka.connection_memory_budget_bytes_or_default();
            if connection > process {
                return Err(FieldError::new(
                    format!("sources[{i}].Kafka.connection_memory_budget_bytes"),
                    format!(
                        "{connection} is more than the process's memory_budget_bytes ({process})"
                    ),
                ));
            }
        }
        let mut names = HashMap::new();
        let mut listen = HashMap::new();
        for (i, source) in self.sources.iter().enumerate() {
            let at = format!("sources[{i}]");
            source.check(checks).map_err(|e| e.within(&at))?;
            let SourceConfig::Kafka(kafka) = source;
            if let Some(first) = names.insert(kafka.name.as_str(), i) {
                return Err(FieldError::new(
                    format!("{at}.Kafka.name"),
                    format!(
                        "source name `{}` is also used by sources[{first}]",
                        kafka.name
                    ),
                ));
            }
            // Port 0 picks a free port, so those never clash.
            let clash = (!kafka.listen_addr.ends_with(":0"))
                .then(|| listen.insert(kafka.listen_addr.as_str(), i))
                .flatten();
            if let Some(first) = clash {
                return Err(FieldError::new(
                    format!("{at}.Kafka.listen_addr"),
                    format!(
                        "`{}` is also the listen_addr of sources[{first}]",
                        kafka.listen_addr
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One source. Only Kafka sources exist.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub enum SourceConfig {
    /// A Kafka listener.
    Kafka(KafkaSourceConfig),
}

impl SourceConfig {
    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        match self {
            Self::Kafka(k) => k.check(checks).map_err(|e| e.within("Kafka")),
        }
    }
}

/// A Kafka listener and its chain.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// Name for logs and metrics.
    pub name: String,
    /// `host:port` to listen on.
    pub listen_addr: String,
    /// Maximum concurrent client connections (default [`DEFAULT_CONNECTION_LIMIT`]).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_CONNECTION_LIMIT))]
    pub connection_limit: Option<usize>,
    /// At the limit: `true` accepts and closes new connections at once, `false`
    /// (default) stops accepting until a slot frees up.
    #[serde(default)]
    #[schemars(extend("x-default" = false))]
    pub hard_connection_limit: Option<bool>,
    /// TLS (and mTLS when `certificate_authority_path` is set) for clients.
    #[serde(default)]
    pub tls: Option<TlsAcceptorConfig>,
    /// Idle timeout in seconds: a client connection with no request and
    /// nothing in flight for this long is closed. shotover's name: `timeout`.
    #[serde(default, rename = "timeout", alias = "idle_timeout_secs")]
    pub idle_timeout_secs: Option<u64>,
    /// Largest frame accepted from a client (default [`DEFAULT_MAX_FRAME_BYTES`]).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_MAX_FRAME_BYTES))]
    pub max_frame_bytes: Option<usize>,
    /// Seconds a client owed responses may go without accepting a byte of
    /// them before it is closed (default `DEFAULT_WRITE_TIMEOUT_SECS`).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_WRITE_TIMEOUT_SECS))]
    pub write_timeout_secs: Option<u64>,
    /// Largest frame accepted before the client has authenticated (default
    /// `DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES`).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES))]
    pub max_unauthenticated_frame_bytes: Option<usize>,
    /// Seconds from connecting by which a client must have authenticated
    /// (default `DEFAULT_AUTHENTICATION_TIMEOUT_SECS`).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_AUTHENTICATION_TIMEOUT_SECS))]
    pub authentication_timeout_secs: Option<u64>,
    /// Connections not yet authenticated held at once; the excess is accepted
    /// and closed (default `DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT`).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT))]
    pub unauthenticated_connection_limit: Option<usize>,
    /// Of those, how many one client IP address may hold at once; the
    /// excess is accepted and closed (default
    /// `DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT_PER_ADDRESS`).
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT_PER_ADDRESS))]
    pub unauthenticated_connection_limit_per_address: Option<usize>,
    /// Bytes one client connection may hold (default
    /// `DEFAULT_CONNECTION_MEMORY_BUDGET_BYTES`); at the limit Sluice stops
    /// reading from that client until its responses drain, and clamps its
    /// Fetch `max_bytes` to the room left.
    #[serde(default)]
    #[schemars(extend("x-default" = DEFAULT_CONNECTION_MEMORY_BUDGET_BYTES))]
    pub connection_memory_budget_bytes: Option<usize>,
    /// Transforms, ending in a sink.
    pub chain: Vec<TransformConfig>,
}

impl KafkaSourceConfig {
    /// `connection_limit`, or its default.
    #[cfg(test)]
    pub(crate) fn connection_limit_or_default(&self) -> usize {
        self.connection_limit.unwrap_or(DEFAULT_CONNECTION_LIMIT)
    }

    /// `hard_connection_limit`, or its default (false).
    #[cfg(test)]
    pub(crate) fn hard_connection_limit_or_default(&self) -> bool {
        self.hard_connection_limit.unwrap_or(false)
    }

    /// `max_frame_bytes`, or its default.
    pub fn max_frame_bytes_or_default(&self) -> usize {
        self.max_frame_bytes.unwrap_or(DEFAULT_MAX_FRAME_BYTES)
    }

    /// The idle timeout, if any.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout_secs.map(Duration::from_secs)
    }

    /// The write timeout, or its default.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_secs(
            self.write_timeout_secs
                .unwrap_or(DEFAULT_WRITE_TIMEOUT_SECS),
        )
    }

    /// `max_unauthenticated_frame_bytes`, or its default (never above
    /// `max_frame_bytes`).
    pub fn max_unauthenticated_frame_bytes_or_default(&self) -> usize {
        self.max_unauthenticated_frame_bytes
            .unwrap_or(DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES)
            .min(self.max_frame_bytes_or_default())
    }

    /// The authentication timeout, or its default.
    pub fn authentication_timeout(&self) -> Duration {
        Duration::from_secs(
            self.authentication_timeout_secs
                .unwrap_or(DEFAULT_AUTHENTICATION_TIMEOUT_SECS),
        )
    }

    /// `unauthenticated_connection_limit`, or its default.
    pub fn unauthenticated_connection_limit_or_default(&self) -> usize {
        self.unauthenticated_connection_limit
            .unwrap_or(DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT)
    }

    /// `unauthenticated_connection_limit_per_address`, or its default.
    pub fn unauthenticated_connection_limit_per_address_or_default(&self) -> usize {
        self.unauthenticated_connection_limit_per_address
            .unwrap_or(DEFAULT_UNAUTHENTICATED_CONNECTION_LIMIT_PER_ADDRESS)
    }

    /// `connection_memory_budget_bytes`, or its default.
    pub fn connection_memory_budget_bytes_or_default(&self) -> usize {
        self.connection_memory_budget_bytes
            .unwrap_or(DEFAULT_CONNECTION_MEMORY_BUDGET_BYTES)
    }

    /// The chain's sink: its last element (present once validated).
    pub fn sink(&self) -> Option<&TransformConfig> {
        self.chain.last().filter(|t| t.is_sink())
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        validate::non_empty("name", &self.name)?;
        validate::address("listen_addr", &self.listen_addr, true)?;
        if self.connection_limit == Some(0) {
            return Err(FieldError::new(
                "connection_limit",
                "must be greater than 0",
            ));
        }
        let frame_range = MIN_MAX_FRAME_BYTES..=MAX_MAX_FRAME_BYTES;
        if let Some(max) = self.max_frame_bytes.filter(|m| !frame_range.contains(m)) {
            return Err(FieldError::new(
                "max_frame_bytes",
                format!(
                    "{max} is out of range: must be from {MIN_MAX_FRAME_BYTES} to \
                     {MAX_MAX_FRAME_BYTES}"
                ),
            ));
        }
        validate::positive("timeout", self.idle_timeout_secs)?;
        validate::positive("write_timeout_secs", self.write_timeout_secs)?;
        validate::positive(
            "authentication_timeout_secs",
            self.authentication_timeout_secs,
        )?;
        if self.unauthenticated_connection_limit == Some(0) {
            return Err(FieldError::new(
                "unauthenticated_connection_limit",
                "must be greater than 0",
            ));
        }
        if self.unauthenticated_connection_limit_per_address == Some(0) {
            return Err(FieldError::new(
                "unauthenticated_connection_limit_per_address",
                "must be greater than 0",
            ));
        }
        let max = self.max_frame_bytes_or_default();
        let pre_auth = MIN_MAX_UNAUTHENTICATED_FRAME_BYTES..=max;
        if let Some(n) = self
            .max_unauthenticated_frame_bytes
            .filter(|n| !pre_auth.contains(n))
        {
            return Err(FieldError::new(
                "max_unauthenticated_frame_bytes",
                format!(
                    "{n} is out of range: must be from {MIN_MAX_UNAUTHENTICATED_FRAME_BYTES} to \
                     max_frame_bytes ({max})"
                ),
            ));
        }
        validate::at_least(
            "connection_memory_budget_bytes",
            self.connection_memory_budget_bytes,
            MIN_MEMORY_BUDGET_BYTES,
        )?;
        if let Some(tls) = &self.tls {
            tls.check(checks).map_err(|e| e.within("tls"))?;
        }
        chain::check_chain(&self.chain, checks).map_err(|e| e.within("chain"))
    }
}

#[cfg(test)]
mod tests;
