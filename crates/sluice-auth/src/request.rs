//! One request, one decoded response, on a [`BrokerConnection`].
//!
//! The SASL helpers and the token task send a handful of requests that Sluice
//! builds itself and whose responses it must read. This module does the round
//! trip with a bounded wait, and turns every way it can fail into an
//! [`AuthError`] that names the broker.

use std::time::Duration;

use bytes::Bytes;
use sluice_broker::BrokerConnection;
use sluice_codec::{ApiKey, Request, RequestKind, ResponseKind};

use crate::AuthError;

/// Longest wait for one response, on top of the connection's own timeouts.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Client id on requests Sluice makes for itself.
const CLIENT_ID: &str = "sluice";

/// Sends `body` as `api` v`version` and returns the decoded response body.
pub(crate) async fn round_trip(
    conn: &BrokerConnection,
    api: ApiKey,
    version: i16,
    body: RequestKind,
) -> Result<ResponseKind, AuthError> {
    let broker = conn.address().clone();
    let request = Request::from_body(
        api,
        version,
        0,
        Some(Bytes::from_static(CLIENT_ID.as_bytes())),
        body,
    );
    let exchange = async {
        let receiver = conn.send(request).await?.ok_or_else(|| {
            AuthError::Internal(format!("{api:?} request unexpectedly expects no response"))
        })?;
        let response = receiver.await.map_err(|_| {
            AuthError::Internal(format!(
                "{broker}: {api:?} response dropped without a result"
            ))
        })??;
        Ok::<_, AuthError>(response)
    };
    let response = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| AuthError::Timeout {
            what: format!("{broker}: {api:?} request"),
            timeout: REQUEST_TIMEOUT,
        })??;
    response
        .into_body()
        .map_err(|e| AuthError::UnexpectedResponse {
            broker,
            api: api_name(api),
            reason: e.to_string(),
        })
}

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

/// The error for a response of the wrong kind (cannot happen: the codec
/// decodes a response as the kind of its request).
pub(crate) fn wrong_kind(conn: &BrokerConnection, api: ApiKey) -> AuthError {
    AuthError::UnexpectedResponse {
        broker: conn.address().clone(),
        api: api_name(api),
        reason: "the response is of another api".into(),
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
