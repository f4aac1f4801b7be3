//! The two sinks' settings: `KafkaSinkSingle` (one broker) and
//! `KafkaSinkCluster` (a whole cluster behind the Sluice nodes), in shotover's
//! format plus a few Sluice extensions that shotover files never contain.

use std::collections::HashMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::tls::TlsConnectorConfig;
use crate::FieldError;
use crate::validate::{self, Checks};

/// Shortest delegation token lifetime accepted. Tokens are recreated at half
/// their lifetime; shorter than this and Sluice would spend its time on them.
pub const MIN_DELEGATION_TOKEN_LIFETIME_SECS: u64 = 10;

/// `KafkaSinkSingle`: forwards to one broker.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
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
    /// shotover's name: `read_timeout`.
    #[serde(default, rename = "read_timeout", alias = "read_timeout_secs")]
    pub read_timeout_secs: Option<u64>,
    /// TLS to the broker.
    #[serde(default)]
    pub tls: Option<TlsConnectorConfig>,
}

impl KafkaSinkSingleConfig {
    /// The connect timeout.
    #[cfg(test)]
    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// The response timeout, if any.
    #[cfg(test)]
    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout_secs.map(Duration::from_secs)
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        if let Some(name) = &self.name {
            validate::non_empty("name", name)?;
        }
        match (self.destination_port, &self.destination_address) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "destination_address",
                    "set only one of `destination_port` and `destination_address`",
                ));
            }
            (None, None) => {
                return Err(FieldError::new(
                    "destination_port",
                    "set `destination_port` (the broker's port on the listener's host) \
                     or `destination_address` (host:port)",
                ));
            }
            (Some(0), None) => {
                return Err(FieldError::new("destination_port", "must not be 0"));
            }
            (Some(_), None) => {}
            (None, Some(addr)) => {
                validate::address("destination_address", addr, false)?;
            }
        }
        validate::positive("connect_timeout_ms", Some(self.connect_timeout_ms))?;
        validate::positive("read_timeout", self.read_timeout_secs)?;
        if let Some(tls) = &self.tls {
            tls.check(checks).map_err(|e| e.within("tls"))?;
        }
        Ok(())
    }
}

/// `KafkaSinkCluster`: the whole cluster behind the Sluice nodes.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
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
    pub(crate) connect_timeout_ms: u64,
    /// Seconds to wait for a response before failing the request.
    /// shotover's name: `read_timeout`.
    #[serde(default, rename = "read_timeout", alias = "read_timeout_secs")]
    pub(crate) read_timeout_secs: Option<u64>,
    /// How often to check the other Sluice nodes, in milliseconds.
    #[serde(default)]
    pub check_shotover_peers_delay_ms: Option<u64>,
    /// TLS to the brokers.
    #[serde(default)]
    pub tls: Option<TlsConnectorConfig>,
    /// SCRAM from clients, delegation tokens to brokers.
    #[serde(default)]
    pub authorize_scram_over_mtls: Option<AuthorizeScramOverMtlsConfig>,
    /// The brokers' listeners require SASL: clients must authenticate
    /// before anything but ApiVersions and SASL reaches a broker, and the
    /// source's before-authentication limits apply from the first
    /// connection. Implied by `authorize_scram_over_mtls`; without it,
    /// learned from the first SaslHandshake a broker accepts.
    #[serde(default)]
    #[schemars(extend("x-default" = false))]
    pub require_authentication: Option<bool>,
}

impl KafkaSinkClusterConfig {
    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// Whether clients must authenticate from the start
    /// (`require_authentication`, or `authorize_scram_over_mtls`).
    pub fn requires_authentication(&self) -> bool {
        self.require_authentication.unwrap_or(false) || self.authorize_scram_over_mtls.is_some()
    }

    /// The response timeout, if any.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout_secs.map(Duration::from_secs)
    }

    /// This instance's entry in `shotover_nodes` (present once validated).
    pub fn local_node(&self) -> Option<&ShotoverNodeConfig> {
        self.shotover_nodes
            .iter()
            .find(|n| n.broker_id == self.local_shotover_broker_id)
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        if let Some(name) = &self.name {
            validate::non_empty("name", name)?;
        }
        validate::addresses("first_contact_points", &self.first_contact_points)?;
        self.check_nodes()?;
        validate::positive("connect_timeout_ms", Some(self.connect_timeout_ms))?;
        validate::positive("read_timeout", self.read_timeout_secs)?;
        validate::positive(
            "check_shotover_peers_delay_ms",
            self.check_shotover_peers_delay_ms,
        )?;
        if let Some(tls) = &self.tls {
            tls.check(checks).map_err(|e| e.within("tls"))?;
        }
        if let Some(scram) = &self.authorize_scram_over_mtls {
            scram
                .check(checks)
                .map_err(|e| e.within("authorize_scram_over_mtls"))?;
        }
        Ok(())
    }

    fn check_nodes(&self) -> Result<(), FieldError> {
        if self.shotover_nodes.is_empty() {
            return Err(FieldError::new(
                "shotover_nodes",
                "must list at least one node (this one)",
            ));
        }
        let mut seen = HashMap::new();
        for (i, node) in self.shotover_nodes.iter().enumerate() {
            let at = format!("shotover_nodes[{i}]");
            node.check().map_err(|e| e.within(&at))?;
            if let Some(first) = seen.insert(node.broker_id, i) {
                return Err(FieldError::new(
                    format!("{at}.broker_id"),
                    format!(
                        "broker id {} is also used by shotover_nodes[{first}]",
                        node.broker_id
                    ),
                ));
            }
        }
        if !seen.contains_key(&self.local_shotover_broker_id) {
            return Err(FieldError::new(
                "local_shotover_broker_id",
                format!(
                    "{} is not the broker_id of any entry in shotover_nodes",
                    self.local_shotover_broker_id
                ),
            ));
        }
        Ok(())
    }
}

/// One Sluice instance as clients and peers see it.
///
/// Older shotover files give one `address` for both; it is accepted and fills
/// both fields.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(try_from = "ShotoverNodeFile")]
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

/// [`ShotoverNodeConfig`] as written in the file.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShotoverNodeFile {
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    address_for_clients: Option<String>,
    #[serde(default)]
    address_for_peers: Option<String>,
    rack: String,
    broker_id: i32,
}

impl TryFrom<ShotoverNodeFile> for ShotoverNodeConfig {
    type Error = String;

    fn try_from(f: ShotoverNodeFile) -> Result<Self, String> {
        let (clients, peers) = match (f.address, f.address_for_clients, f.address_for_peers) {
            (None, Some(c), Some(p)) => (c, p),
            (Some(a), None, None) => (a.clone(), a),
            (Some(_), _, _) => {
                return Err(
                    "set either `address` or `address_for_clients` and `address_for_peers`, \
                     not both"
                        .to_owned(),
                );
            }
            (None, None, _) => return Err("missing field `address_for_clients`".to_owned()),
            (None, _, None) => return Err("missing field `address_for_peers`".to_owned()),
        };
        Ok(Self {
            address_for_clients: clients,
            address_for_peers: peers,
            rack: f.rack,
            broker_id: f.broker_id,
        })
    }
}

impl ShotoverNodeConfig {
    /// Checks both addresses, the rack and the broker id.
    fn check(&self) -> Result<(), FieldError> {
        validate::advertised_address("address_for_clients", &self.address_for_clients)?;
        validate::address("address_for_peers", &self.address_for_peers, false)?;
        validate::non_empty("rack", &self.rack)?;
        if self.broker_id < 0 {
            return Err(FieldError::new("broker_id", "must not be negative"));
        }
        Ok(())
    }
}

/// `authorize_scram_over_mtls`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizeScramOverMtlsConfig {
    /// Broker `host:port`s of the mTLS listener.
    pub mtls_port_contact_points: Vec<String>,
    /// The super-user client certificate and CA.
    pub tls: TlsConnectorConfig,
    /// Lifetime of each delegation token, in seconds.
    pub delegation_token_lifetime_seconds: u64,
}

impl AuthorizeScramOverMtlsConfig {
    /// The delegation token lifetime.
    pub fn delegation_token_lifetime(&self) -> Duration {
        Duration::from_secs(self.delegation_token_lifetime_seconds)
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        validate::addresses("mtls_port_contact_points", &self.mtls_port_contact_points)?;
        self.tls.check(checks).map_err(|e| e.within("tls"))?;
        if !self.tls.has_client_cert() {
            return Err(FieldError::new(
                "tls.certificate_path",
                "must be set, with `private_key_path`: tokens are created over mTLS",
            ));
        }
        if self.delegation_token_lifetime_seconds < MIN_DELEGATION_TOKEN_LIFETIME_SECS {
            return Err(FieldError::new(
                "delegation_token_lifetime_seconds",
                format!(
                    "{} is too short: must be at least {MIN_DELEGATION_TOKEN_LIFETIME_SECS}",
                    self.delegation_token_lifetime_seconds
                ),
            ));
        }
        Ok(())
    }
}
