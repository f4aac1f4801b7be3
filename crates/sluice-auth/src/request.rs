//! What the SASL helpers and the token task share about the requests they
//! make on a broker connection ([`BrokerConnection::call`](sluice_broker::BrokerConnection::call)):
//! the bounded wait, and the [`AuthError`] for a Kafka error code.

use std::time::Duration;

use sluice_broker::BrokerConnection;
use sluice_codec::ApiKey;

use crate::AuthError;

/// Longest wait for one response, on top of the connection's own timeouts.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The name used in errors for the APIs this crate sends.
pub(crate) fn api_name(api: ApiKey) -> &'static str {
    match api {
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::Metadata => "Metadata",
        ApiKey::CreateDelegationToken => "CreateDelegationToken",
        ApiKey::DescribeDelegationToken => "DescribeDelegationToken",
        _ => "request",
    }
}

/// The error for a Kafka error code in a response.
pub(crate) fn error_code(
    conn: &BrokerConnection,
    api: ApiKey,
    code: i16,
    message: Option<String>,
) -> AuthError {
    AuthError::ErrorCode {
        broker: conn.address().clone(),
        api: api_name(api),
        code,
        message,
    }
}
