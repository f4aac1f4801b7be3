//! The topology file: sources and their transform chains.

use serde::Deserialize;

/// The whole topology file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Listeners, each with its chain.
    pub sources: Vec<SourceConfig>,
}

/// One source. Only Kafka sources exist.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SourceConfig {
    /// A Kafka listener.
    Kafka(KafkaSourceConfig),
}

/// A Kafka listener and its chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// Name for logs and metrics.
    pub name: String,
    /// `host:port` to listen on.
    pub listen_addr: String,
    /// Maximum concurrent client connections (default 512).
    #[serde(default)]
    pub connection_limit: Option<usize>,
    /// At the limit: `true` accepts and closes new connections at once, `false`
    /// (default) stops accepting until a slot frees up.
    #[serde(default)]
    pub hard_connection_limit: Option<bool>,
    /// TLS (and mTLS when `certificate_authority_path` is set) for clients.
    #[serde(default)]
    pub tls: Option<TlsAcceptorConfig>,
    /// Idle timeout in seconds: a client connection with no request and
    /// nothing in flight for this long is closed. shotover's name: `timeout`.
    #[serde(default, rename = "timeout", alias = "idle_timeout_secs")]
    pub idle_timeout_secs: Option<u64>,
    /// Largest frame accepted from a client (default 100 MiB).
    #[serde(default)]
    pub max_frame_bytes: Option<usize>,
    /// Transforms, ending in a sink.
    pub chain: Vec<TransformConfig>,
}

/// TLS for a listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsAcceptorConfig {
    /// PEM certificate chain.
    pub certificate_path: String,
    /// PEM private key.
    pub private_key_path: String,
    /// PEM CA bundle; when set, clients must present a certificate it signed.
    #[serde(default)]
    pub certificate_authority_path: Option<String>,
}

/// TLS for connections to brokers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConnectorConfig {
    /// PEM CA bundle that signed the brokers' certificates.
    pub certificate_authority_path: String,
    /// PEM client certificate, for mTLS.
    #[serde(default)]
    pub certificate_path: Option<String>,
    /// PEM client key, for mTLS.
    #[serde(default)]
    pub private_key_path: Option<String>,
    /// Check that the broker certificate matches its address (default true).
    #[serde(default = "default_true")]
    pub verify_hostname: bool,
}

fn default_true() -> bool {
    true
}

/// One element of a chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum TransformConfig {
    /// Logs each request and response at debug level.
    DebugPrinter,
    /// One broker.
    KafkaSinkSingle(KafkaSinkSingleConfig),
    /// A whole cluster, hidden behind the Sluice nodes.
    KafkaSinkCluster(KafkaSinkClusterConfig),
}

/// `KafkaSinkSingle`: forwards to one broker.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkSingleConfig {
    /// Optional name for logs.
    #[serde(default)]
    pub name: Option<String>,
    /// Broker port on the same host as the listener (shotover's form).
    #[serde(default)]
    pub destination_port: Option<u16>,
    /// Broker `host:port` (Sluice's extension; exclusive with `destination_port`).
    #[serde(default)]
    pub destination_address: Option<String>,
    /// Connect timeout in milliseconds.
    pub connect_timeout_ms: u64,
    /// Seconds to wait for a response before failing the request.
    #[serde(default, rename = "read_timeout", alias = "read_timeout_secs")]
    pub read_timeout_secs: Option<u64>,
    /// TLS to the broker.
    #[serde(default)]
    pub tls: Option<TlsConnectorConfig>,
}

/// `KafkaSinkCluster`: the whole cluster behind the Sluice nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkClusterConfig {
    /// Optional name for logs.
    #[serde(default)]
    pub name: Option<String>,
    /// Broker `host:port`s to bootstrap from.
    pub first_contact_points: Vec<String>,
    /// Every Sluice instance of this deployment.
    pub shotover_nodes: Vec<ShotoverNodeConfig>,
    /// Which of `shotover_nodes` this instance is.
    pub local_shotover_broker_id: i32,
    /// Connect timeout in milliseconds.
    pub connect_timeout_ms: u64,
    /// Seconds to wait for a response before failing the request.
    #[serde(default, rename = "read_timeout", alias = "read_timeout_secs")]
    pub read_timeout_secs: Option<u64>,
    /// How often to check the other Sluice nodes, in milliseconds.
    #[serde(default)]
    pub check_shotover_peers_delay_ms: Option<u64>,
    /// TLS to the brokers.
    #[serde(default)]
    pub tls: Option<TlsConnectorConfig>,
    /// SCRAM from clients, delegation tokens to brokers.
    #[serde(default)]
    pub authorize_scram_over_mtls: Option<AuthorizeScramOverMtlsConfig>,
}

/// One Sluice instance as clients and peers see it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShotoverNodeConfig {
    /// `host:port` advertised to clients.
    pub address_for_clients: String,
    /// `host:port` other Sluice nodes use for health checks.
    pub address_for_peers: String,
    /// Rack advertised to clients.
    pub rack: String,
    /// Broker id advertised to clients.
    pub broker_id: i32,
}

/// `authorize_scram_over_mtls`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizeScramOverMtlsConfig {
    /// Broker `host:port`s of the mTLS listener.
    pub mtls_port_contact_points: Vec<String>,
    /// The super-user client certificate and CA.
    pub tls: TlsConnectorConfig,
    /// Lifetime of each delegation token, in seconds.
    pub delegation_token_lifetime_seconds: u64,
}
