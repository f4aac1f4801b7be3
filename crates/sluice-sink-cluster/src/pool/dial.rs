//! Opening a broker connection: connect (and TLS) unless the broker is
//! marked down ([`Health`](crate::health::Health)), learn the broker's
//! ApiVersions the first time Sluice talks to it, then authenticate with the
//! client's [`Login`]. Every connection a client connection opens is made
//! here, so the health record watches every one of them.
//!
//! The ApiVersions are asked once per broker (v3, before authenticating,
//! which Kafka allows) and cached in the sink's shared state: they decide
//! the versions of Sluice's own requests and feed the ApiVersions
//! intersection shown to clients.

use sluice_broker::{BrokerAddress, BrokerConnection, BrokerError, CallError};
use sluice_codec::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use tracing::debug;

use super::login::{ConnError, Login};
use super::slot::KafkaConnection;
use crate::close::Invariant;
use crate::shared::Shared;

/// The ApiVersions version Sluice asks brokers with.
const INTERNAL_API_VERSIONS_VERSION: i16 = 3;

/// Why a broker's ApiVersions could not be learned (logged; the broker is
/// asked again with its next connection).
#[derive(Debug, thiserror::Error)]
enum ApiVersionsError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("error code {0}")]
    Refused(i16),
}

/// Opens a connection to `addr` and authenticates it with `login`; refused
/// while the client's authentication is undecided (`None`): before that,
/// only the auth connection may exist.
pub(crate) async fn open_with(
    shared: &Shared,
    login: Option<&mut Login>,
    addr: BrokerAddress,
) -> Result<KafkaConnection, ConnError> {
    let Some(login) = login else {
        return Err(ConnError::Fatal(
            Invariant::ConnectionBeforeLogin(addr).into(),
        ));
    };
    let conn = open(shared, addr).await?;
    login.authenticate(conn, Instant::now()).await
}

/// Opens a connection to `addr` and nothing else (at once refused while the
/// broker is marked down after a failed connect): for the auth connection,
/// which carries only the client's requests (a broker's SASL listener
/// accepts a single ApiVersions before SaslHandshake, and it is the
/// client's).
pub(crate) async fn connect(
    shared: &Shared,
    addr: BrokerAddress,
) -> Result<BrokerConnection, BrokerError> {
    shared.health.check_down(&addr, Instant::now())?;
    let options = shared.options_for(&addr)?;
    let result = BrokerConnection::connect(addr.clone(), &options).await;
    let heard = result.as_ref().ok().map(BrokerConnection::heard);
    shared.health.connected(&addr, heard, Instant::now());
    result
}

/// Opens a connection to `addr` and, the first time Sluice talks to that
/// broker, learns its ApiVersions.
pub(crate) async fn open(
    shared: &Shared,
    addr: BrokerAddress,
) -> Result<BrokerConnection, BrokerError> {
    let conn = connect(shared, addr).await?;
    if shared.api_versions_of(conn.address()).is_none() {
        match fetch_api_versions(shared, &conn).await {
            Ok(versions) => shared.remember_api_versions(conn.address(), versions),
            Err(reason) => {
                debug!(broker = %conn.address(), "cannot learn the broker's api versions: {reason}");
            }
        }
    }
    Ok(conn)
}

/// Asks a broker for its ApiVersions (v3), bounded by the request timeout.
async fn fetch_api_versions(
    shared: &Shared,
    conn: &BrokerConnection,
) -> Result<ApiVersionsResponse, ApiVersionsError> {
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let answer = conn
        .call(INTERNAL_API_VERSIONS_VERSION, body, shared.request_timeout)
        .await?;
    match answer.error_code {
        0 => Ok(answer),
        code => Err(ApiVersionsError::Refused(code)),
    }
}
