//! SASL authentication of a fresh broker connection: SaslHandshake, then
//! SaslAuthenticate rounds (KIP-152), with SCRAM or PLAIN.
//!
//! These helpers run on a [`BrokerConnection`] before any other request is
//! sent on it. They return the broker's `session_lifetime_ms` from the final
//! SaslAuthenticate response (KIP-368): a connection authenticated with a
//! delegation token expires with the token, and its owner must replace or
//! re-authenticate it before then. A broker that refuses (wrong password,
//! mechanism not enabled, ...) yields an [`AuthError`] carrying its error code
//! and message.
//!
//! The PBKDF2 step of SCRAM (thousands of HMACs) runs on tokio's blocking
//! pool, so that many connections authenticating at once do not stall the
//! runtime.

use std::time::Duration;

use bytes::Bytes;
use sluice_broker::BrokerConnection;
use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use tracing::debug;

use crate::AuthError;
use crate::request::{REQUEST_TIMEOUT, error_code};
use crate::scram::{ScramClient, ScramMechanism};
use crate::token::DelegationToken;

/// SaslHandshake version sent: v1 means SaslAuthenticate requests follow.
pub(crate) const SASL_HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate version sent: v1+ carries `session_lifetime_ms`.
pub(crate) const SASL_AUTHENTICATE_VERSION: i16 = 2;
/// Kafka's `UNSUPPORTED_SASL_MECHANISM`.
const UNSUPPORTED_SASL_MECHANISM: i16 = ResponseError::UnsupportedSaslMechanism.code();

/// A connection that authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaslSession {
    /// What the broker reported in the final SaslAuthenticate response: how
    /// long the session is valid, in milliseconds from then; 0 when the
    /// broker does not limit it.
    pub session_lifetime_ms: i64,
}

impl SaslSession {
    /// The session's lifetime, or `None` when the broker does not limit it.
    pub fn session_lifetime(&self) -> Option<Duration> {
        u64::try_from(self.session_lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
    }
}

/// One SaslAuthenticate answer that was not an error.
#[derive(Debug, Clone)]
pub struct SaslReply {
    /// The mechanism's bytes (e.g. a SCRAM server message).
    pub(crate) auth_bytes: Bytes,
    /// `session_lifetime_ms` from the response.
    pub(crate) session_lifetime_ms: i64,
}

/// Sends SaslHandshake v1 for `mechanism`. Fails with
/// [`AuthError::MechanismNotEnabled`] (listing what the broker offers) or
/// the broker's error code.
pub async fn sasl_handshake(conn: &BrokerConnection, mechanism: &str) -> Result<(), AuthError> {
    let api = ApiKey::SaslHandshake;
    let body =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    let response = conn
        .call(SASL_HANDSHAKE_VERSION, body, REQUEST_TIMEOUT)
        .await?;
    match response.error_code {
        0 => Ok(()),
        UNSUPPORTED_SASL_MECHANISM => Err(AuthError::MechanismNotEnabled {
            broker: conn.address().clone(),
            mechanism: mechanism.to_owned(),
            offered: response
                .mechanisms
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
        code => Err(error_code(conn, api, code, None)),
    }
}

/// Sends one SaslAuthenticate v2 round. A non-zero error code becomes
/// [`AuthError::ErrorCode`] with the broker's message.
pub async fn sasl_authenticate(
    conn: &BrokerConnection,
    auth_bytes: Vec<u8>,
) -> Result<SaslReply, AuthError> {
    let api = ApiKey::SaslAuthenticate;
    let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(auth_bytes));
    let response = conn
        .call(SASL_AUTHENTICATE_VERSION, body, REQUEST_TIMEOUT)
        .await?;
    if response.error_code != 0 {
        let message = response.error_message.map(|m| m.to_string());
        return Err(error_code(conn, api, response.error_code, message));
    }
    Ok(SaslReply {
        auth_bytes: response.auth_bytes,
        session_lifetime_ms: response.session_lifetime_ms,
    })
}

/// Authenticates with SCRAM: handshake for the client's mechanism, then the
/// two SCRAM rounds; the server's signature is verified.
pub async fn authenticate_scram(
    conn: &BrokerConnection,
    client: ScramClient,
) -> Result<SaslSession, AuthError> {
    let broker = conn.address().clone();
    let scram_err = |source| AuthError::Scram {
        broker: broker.clone(),
        source,
    };
    sasl_handshake(conn, client.mechanism().name()).await?;
    let server_first = sasl_authenticate(conn, client.client_first()).await?;

    let (mut client, client_final) = tokio::task::spawn_blocking(move || {
        let mut client = client;
        let result = client.handle_server_first(&server_first.auth_bytes);
        (client, result)
    })
    .await
    .map_err(|e| AuthError::ProofTask(std::sync::Arc::new(e)))?;
    let client_final = client_final.map_err(scram_err)?;

    let server_final = sasl_authenticate(conn, client_final).await?;
    client
        .handle_server_final(&server_final.auth_bytes)
        .map_err(scram_err)?;
    debug!(
        broker = %broker,
        mechanism = client.mechanism().name(),
        user = client.username(),
        session_lifetime_ms = server_final.session_lifetime_ms,
        "broker connection authenticated with scram"
    );
    Ok(SaslSession {
        session_lifetime_ms: server_final.session_lifetime_ms,
    })
}

/// Authenticates with a delegation token: SCRAM with username = token id,
/// password = base64 of the HMAC and the `tokenauth=true` extension. Works
/// with either mechanism; the proof matches the one sent in SaslHandshake.
pub async fn authenticate_token(
    conn: &BrokerConnection,
    mechanism: ScramMechanism,
    token: &DelegationToken,
) -> Result<SaslSession, AuthError> {
    let client = token
        .scram_client(mechanism)
        .map_err(|source| AuthError::Scram {
            broker: conn.address().clone(),
            source,
        })?;
    authenticate_scram(conn, client).await
}

/// Authenticates with SASL PLAIN (`\0user\0password`, RFC 4616).
pub async fn authenticate_plain(
    conn: &BrokerConnection,
    username: &str,
    password: &str,
) -> Result<SaslSession, AuthError> {
    sasl_handshake(conn, "PLAIN").await?;
    let mut message = Vec::with_capacity(2 + username.len() + password.len());
    message.push(0);
    message.extend_from_slice(username.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    let reply = sasl_authenticate(conn, message).await?;
    debug!(broker = %conn.address(), user = username, "broker connection authenticated with plain");
    Ok(SaslSession {
        session_lifetime_ms: reply.session_lifetime_ms,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn session_lifetime_zero_means_unlimited() {
        let s = SaslSession {
            session_lifetime_ms: 0,
        };
        assert_eq!(s.session_lifetime(), None);
        let s = SaslSession {
            session_lifetime_ms: 1500,
        };
        assert_eq!(s.session_lifetime(), Some(Duration::from_millis(1500)));
        let s = SaslSession {
            session_lifetime_ms: -1,
        };
        assert_eq!(s.session_lifetime(), None);
    }
}
