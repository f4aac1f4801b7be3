//! [`MtlsTokenCreator`]: creates delegation tokens on the real cluster, over
//! a super-user mTLS connection.
//!
//! One creation is:
//! 1. connect with mTLS to the first reachable `mtls_port_contact_points`
//!    entry (the client certificate maps to a super user, e.g.
//!    `CN=sluice-admin` → `User:sluice-admin`);
//! 2. Metadata, to learn every broker's address on this listener;
//! 3. CreateDelegationToken v3 with owner `User:<username>` (KIP-373), no
//!    renewers, `max_lifetime_ms` from the config;
//! 4. DescribeDelegationToken (owner `User:<username>`) on every broker, all
//!    at once, until each lists the token: each broker answers from its own
//!    cache, and a token used before a broker knows it fails authentication
//!    there. Only the brokers that answer are waited for: one that cannot be
//!    reached, or does not answer within the propagation timeout (down,
//!    hung, cut off), is logged and skipped, since it learns the token from
//!    the metadata log before it serves again. A broker that answers without
//!    listing the token by then fails the creation (retried by the token
//!    task), as does a creation no broker confirmed.
//!
//! These connections are private to the token task and closed after each
//! creation; no client request ever goes over them. Creations are rare (one
//! per user per half token lifetime), so a fresh connection each time keeps
//! things simple and recovers from broker restarts for free.

use std::time::Duration;

use async_trait::async_trait;
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerConnection};
use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::messages::create_delegation_token_request::CreateDelegationTokenRequest;
use sluice_codec::kafka_protocol::messages::describe_delegation_token_request::{
    DescribeDelegationTokenOwner, DescribeDelegationTokenRequest,
};
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequest;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_config::AuthorizeScramOverMtlsConfig;
use sluice_tls::SharedConnector;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{CreatedToken, TokenCreator};
use crate::AuthError;
use crate::request::{REQUEST_TIMEOUT, error_code};

/// CreateDelegationToken version: v3 carries the owner principal (KIP-373).
const CREATE_VERSION: i16 = 3;
/// DescribeDelegationToken version.
const DESCRIBE_VERSION: i16 = 3;
/// Metadata version used to list brokers.
const METADATA_VERSION: i16 = 12;
/// The principal type of token owners.
const USER: &str = "User";

/// How a [`MtlsTokenCreator`] connects and waits.
#[derive(Debug, Clone)]
pub(crate) struct MtlsTimeouts {
    /// TCP connect plus TLS handshake.
    pub(crate) connect: Duration,
    /// Waiting for one response.
    pub(crate) read: Duration,
    /// Waiting for every broker to know a new token.
    pub(crate) propagation: Duration,
    /// Pause between DescribeDelegationToken polls of one broker.
    pub(crate) poll_interval: Duration,
}

impl Default for MtlsTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(30),
            propagation: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
        }
    }
}

/// Creates tokens over mTLS (see the module docs).
pub(crate) struct MtlsTokenCreator {
    contact_points: Vec<BrokerAddress>,
    /// Reloadable: each connection takes the connector current then.
    connector: SharedConnector,
    max_lifetime_ms: i64,
    timeouts: MtlsTimeouts,
}

impl std::fmt::Debug for MtlsTokenCreator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MtlsTokenCreator")
            .field("contact_points", &self.contact_points)
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl MtlsTokenCreator {
    /// Parses the contact points; connects with `connector` (built from
    /// `cfg.tls`, see [`sluice_tls::reloadable_connector`]).
    pub(crate) fn new(
        cfg: &AuthorizeScramOverMtlsConfig,
        connector: SharedConnector,
    ) -> Result<Self, AuthError> {
        let contact_points = cfg
            .mtls_port_contact_points
            .iter()
            .map(|p| BrokerAddress::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        if contact_points.is_empty() {
            return Err(AuthError::NoContactPoint {
                reasons: "mtls_port_contact_points is empty".into(),
            });
        }
        let max_lifetime_ms =
            i64::try_from(cfg.delegation_token_lifetime().as_millis()).unwrap_or(i64::MAX);
        Ok(Self {
            contact_points,
            connector,
            max_lifetime_ms,
            timeouts: MtlsTimeouts::default(),
        })
    }

    /// An mTLS connection to `addr`.
    async fn connect(&self, addr: &BrokerAddress) -> Result<BrokerConnection, AuthError> {
        let mut opts = BrokerConnectOptions::new(self.timeouts.connect);
        opts.read_timeout = Some(self.timeouts.read);
        opts.tls = Some((
            self.connector.current(),
            sluice_tls::server_name(&addr.host)?,
        ));
        Ok(BrokerConnection::connect(addr.clone(), &opts).await?)
    }

    /// The first contact point that accepts an mTLS connection.
    async fn connect_any(&self) -> Result<BrokerConnection, AuthError> {
        let mut reasons = Vec::new();
        for addr in &self.contact_points {
            match self.connect(addr).await {
                Ok(conn) => return Ok(conn),
                Err(e) => {
                    debug!(error = %e, "mtls contact point unreachable");
                    reasons.push(e.to_string());
                }
            }
        }
        Err(AuthError::NoContactPoint {
            reasons: reasons.join("; "),
        })
    }
}

/// How one broker took a new token.
#[derive(Debug)]
enum Propagation {
    /// It lists the token.
    Known,
    /// It answered, but never listed the token by the deadline.
    NotKnown,
    /// It could not be reached, or did not answer by the deadline: it is
    /// down, hung or cut off, and learns the token from the metadata log
    /// when it is back (a broker serves only once it has caught up).
    Unreachable(String),
    /// It answered with an error.
    Failed(AuthError),
}

#[async_trait]
impl TokenCreator for MtlsTokenCreator {
    async fn create(&self, username: &str) -> Result<CreatedToken, AuthError> {
        let conn = self.connect_any().await?;
        let brokers = brokers(&conn).await?;
        let token = create_token(&conn, username, self.max_lifetime_ms).await?;
        let deadline = Instant::now() + self.timeouts.propagation;
        // Every broker at once, each bounded by the deadline: a broker that
        // is down or hung costs the deadline once, not a timeout in turn.
        let checks = brokers.iter().map(|broker| {
            let same = broker.host == conn.address().host && broker.port == conn.address().port;
            let (token_id, conn) = (&token.token_id, &conn);
            async move {
                let check = async {
                    if same {
                        return await_token(conn, username, token_id, deadline, &self.timeouts)
                            .await;
                    }
                    let other = self.connect(broker).await?;
                    await_token(&other, username, token_id, deadline, &self.timeouts).await
                };
                let outcome = match tokio::time::timeout_at(deadline, check).await {
                    Ok(Ok(true)) => Propagation::Known,
                    Ok(Ok(false)) => Propagation::NotKnown,
                    Ok(Err(e @ AuthError::Broker(_))) => Propagation::Unreachable(e.to_string()),
                    Ok(Err(e)) => Propagation::Failed(e),
                    Err(_) => Propagation::Unreachable("no answer before the deadline".into()),
                };
                (broker, outcome)
            }
        });
        let outcomes = futures::future::join_all(checks).await;
        let mut missing = Vec::new();
        let mut unreachable = Vec::new();
        for (broker, outcome) in outcomes {
            match outcome {
                Propagation::Failed(e) => return Err(e),
                Propagation::Known => {}
                Propagation::NotKnown => missing.push(broker.to_string()),
                Propagation::Unreachable(reason) => {
                    warn!(user = username, token_id = token.token_id, broker = %broker,
                        "cannot confirm a new delegation token on an unreachable broker; it learns it when it is back: {reason}");
                    unreachable.push(broker.to_string());
                }
            }
        }
        if !missing.is_empty() || unreachable.len() == brokers.len() {
            return Err(AuthError::NotPropagated {
                user: username.to_owned(),
                token_id: token.token_id,
                missing: missing
                    .into_iter()
                    .chain(unreachable)
                    .collect::<Vec<_>>()
                    .join(", "),
                timeout: self.timeouts.propagation,
            });
        }
        debug!(
            user = username,
            token_id = token.token_id,
            brokers = brokers.len(),
            unreachable = unreachable.len(),
            "delegation token known to every broker that answers"
        );
        Ok(token)
    }
}

/// Every broker of the cluster, at its address on this listener.
async fn brokers(conn: &BrokerConnection) -> Result<Vec<BrokerAddress>, AuthError> {
    let body = MetadataRequest::default().with_topics(Some(Vec::new()));
    let response = conn.call(METADATA_VERSION, body, REQUEST_TIMEOUT).await?;
    let mut brokers = Vec::with_capacity(response.brokers.len());
    for b in &response.brokers {
        let port = u16::try_from(b.port).map_err(|_| crate::AuthError::UnexpectedResponse {
            broker: conn.address().clone(),
            api: "Metadata",
            reason: format!("broker {} has port {}", b.node_id.0, b.port),
        })?;
        brokers.push(BrokerAddress::new(b.host.as_str(), port).with_id(b.node_id.0));
    }
    if brokers.is_empty() {
        return Err(AuthError::UnexpectedResponse {
            broker: conn.address().clone(),
            api: "Metadata",
            reason: "no brokers listed".into(),
        });
    }
    Ok(brokers)
}

/// CreateDelegationToken v3 for `User:<username>`.
async fn create_token(
    conn: &BrokerConnection,
    username: &str,
    max_lifetime_ms: i64,
) -> Result<CreatedToken, AuthError> {
    let api = ApiKey::CreateDelegationToken;
    let body = CreateDelegationTokenRequest::default()
        .with_owner_principal_type(Some(StrBytes::from_static_str(USER)))
        .with_owner_principal_name(Some(StrBytes::from_string(username.to_owned())))
        .with_renewers(Vec::new())
        .with_max_lifetime_ms(max_lifetime_ms);
    let response = conn.call(CREATE_VERSION, body, REQUEST_TIMEOUT).await?;
    if response.error_code != 0 {
        return Err(error_code(conn, api, response.error_code, None));
    }
    let unexpected = |reason: String| AuthError::UnexpectedResponse {
        broker: conn.address().clone(),
        api: "CreateDelegationToken",
        reason,
    };
    if response.principal_type.as_str() != USER || response.principal_name.as_str() != username {
        return Err(unexpected(format!(
            "the token is owned by {}:{}, not {USER}:{username}",
            response.principal_type.as_str(),
            response.principal_name.as_str()
        )));
    }
    if response.token_id.is_empty() || response.hmac.is_empty() {
        return Err(unexpected("the token id or hmac is empty".into()));
    }
    let lifetime_ms = response
        .expiry_timestamp_ms
        .saturating_sub(response.issue_timestamp_ms);
    let lifetime = u64::try_from(lifetime_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            unexpected(format!(
                "the token expires at {} but was issued at {}",
                response.expiry_timestamp_ms, response.issue_timestamp_ms
            ))
        })?;
    Ok(CreatedToken {
        token_id: response.token_id.to_string(),
        hmac: response.hmac.to_vec(),
        lifetime,
    })
}

/// Polls DescribeDelegationToken on `conn` until it lists `token_id`;
/// `false` when `deadline` passes first.
async fn await_token(
    conn: &BrokerConnection,
    username: &str,
    token_id: &str,
    deadline: Instant,
    timeouts: &MtlsTimeouts,
) -> Result<bool, AuthError> {
    let api = ApiKey::DescribeDelegationToken;
    loop {
        let owner = DescribeDelegationTokenOwner::default()
            .with_principal_type(StrBytes::from_static_str(USER))
            .with_principal_name(StrBytes::from_string(username.to_owned()));
        let body = DescribeDelegationTokenRequest::default().with_owners(Some(vec![owner]));
        let response = conn.call(DESCRIBE_VERSION, body, REQUEST_TIMEOUT).await?;
        if response.error_code != 0 {
            return Err(error_code(conn, api, response.error_code, None));
        }
        if response
            .tokens
            .iter()
            .any(|t| t.token_id.as_str() == token_id)
        {
            return Ok(true);
        }
        if Instant::now() + timeouts.poll_interval > deadline {
            return Ok(false);
        }
        tokio::time::sleep(timeouts.poll_interval).await;
    }
}
