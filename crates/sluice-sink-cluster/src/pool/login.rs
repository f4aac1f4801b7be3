//! How the broker connections Sluice opens for an authenticated client
//! authenticate: with nothing, with the client's PLAIN credentials, or with
//! the client's user's delegation token (SCRAM over mTLS).
//!
//! A token connection is bound ([`TokenBinding`]) to the user's token
//! channel, so that it is replaced when a newer token is published, and so
//! that the driver can check that a connection it routes a client's request
//! to was opened with *that client's user's* token.

use std::sync::Arc;

use sluice_auth::scram::ScramMechanism;
use sluice_auth::token::{TokenReceiver, TokenTaskHandle};
use sluice_auth::{AuthError, authenticate_plain, authenticate_token};
use sluice_broker::{BrokerConnection, BrokerError};
use sluice_chain::ChainError;
use sluice_error::{ErrorClass, ErrorSide};
use tokio::time::Instant;

use super::slot::{Auth, KafkaConnection, TokenBinding};
use crate::close::CloseError;
use sluice_cluster::client_auth::{Identity, PlainCredentials};

/// How a client's new broker connections authenticate.
#[derive(Debug)]
pub(crate) enum Login {
    /// Not at all: the client does not authenticate.
    None,
    /// With the client's PLAIN credentials.
    Plain(Arc<PlainCredentials>),
    /// With the client's user's delegation token.
    Token(TokenLogin),
}

/// The delegation token of one user, as a client connection uses it.
#[derive(Debug)]
pub(crate) struct TokenLogin {
    tokens: TokenTaskHandle,
    username: Arc<str>,
    mechanism: ScramMechanism,
    /// The user's token channel, once the token exists.
    current: Option<TokenReceiver>,
}

/// Why a broker connection could not be had for a client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    /// The broker is unreachable or failed: answered like any failed broker.
    #[error("{0}")]
    Broker(#[from] BrokerError),
    /// The client cannot be served any more: close it with this.
    #[error("{0}")]
    Fatal(ChainError),
}

impl Login {
    /// The login for an authenticated `identity`. A SCRAM identity needs the
    /// sink's token task (`None`: SCRAM was not offered, which cannot happen).
    pub(crate) fn for_identity(
        identity: Identity,
        tokens: Option<&TokenTaskHandle>,
    ) -> Option<Self> {
        match identity {
            Identity::Plain(credentials) => Some(Login::Plain(credentials)),
            Identity::Scram {
                username,
                mechanism,
            } => Some(Login::Token(TokenLogin {
                tokens: tokens?.clone(),
                username,
                mechanism,
                current: None,
            })),
        }
    }

    /// Authenticates `conn` (fresh, nothing sent on it but ApiVersions) and
    /// wraps it. `opened_at` starts its session clock.
    pub(crate) async fn authenticate(
        &mut self,
        conn: BrokerConnection,
        opened_at: Instant,
    ) -> Result<KafkaConnection, ConnError> {
        match self {
            Login::None => Ok(KafkaConnection::new(conn, Auth::General, opened_at, None)),
            Login::Plain(credentials) => {
                let session =
                    authenticate_plain(&conn, credentials.username(), credentials.password())
                        .await
                        .map_err(|e| plain_failed(&conn, e))?;
                Ok(KafkaConnection::new(
                    conn,
                    Auth::General,
                    opened_at,
                    session.session_lifetime(),
                ))
            }
            Login::Token(login) => {
                let current = login.receiver().await?;
                // Bound before authenticating: a token published meanwhile
                // puts this connection at risk at once.
                let binding = TokenBinding::new(current.clone());
                let token = current.borrow().clone();
                let session = authenticate_token(&conn, login.mechanism, &token)
                    .await
                    .map_err(|e| token_failed(&conn, &token.token_id, e))?;
                Ok(KafkaConnection::new(
                    conn,
                    Auth::Token(binding),
                    opened_at,
                    session.session_lifetime(),
                ))
            }
        }
    }

    /// Whether `conn` is of the kind this login opens, and, for a token
    /// connection, bound to this user's token channel.
    pub(crate) fn owns(&self, conn: &KafkaConnection) -> bool {
        match (self, conn.auth()) {
            (Login::None | Login::Plain(_), Auth::General) => true,
            (Login::Token(login), Auth::Token(token)) => login
                .current
                .as_ref()
                .is_some_and(|mine| token.same_channel(mine)),
            _ => false,
        }
    }
}

impl TokenLogin {
    /// The user's token channel; asks the token task the first time (which
    /// creates the token if the user has none yet).
    async fn receiver(&mut self) -> Result<TokenReceiver, ConnError> {
        if let Some(current) = &self.current {
            return Ok(current.clone());
        }
        let current = self.tokens.token_for(&self.username).await.map_err(|e| {
            ConnError::Fatal(
                CloseError::NoToken {
                    user: Arc::clone(&self.username),
                    source: Arc::new(e),
                }
                .into(),
            )
        })?;
        self.current = Some(current.clone());
        Ok(current)
    }
}

/// A failure to replay the client's PLAIN credentials on a new connection.
fn plain_failed(conn: &BrokerConnection, e: AuthError) -> ConnError {
    match e {
        AuthError::Broker(b) => ConnError::Broker(b),
        e if e.side() == ErrorSide::Client => ConnError::Fatal(
            CloseError::CredentialsRejected {
                broker: conn.address().clone(),
                source: Arc::new(e),
            }
            .into(),
        ),
        e => ConnError::Fatal(ChainError::Broker(BrokerError::Connect {
            broker: conn.address().clone(),
            reason: format!("PLAIN authentication failed: {e}"),
        })),
    }
}

/// A failure to authenticate a new connection with the user's token.
fn token_failed(conn: &BrokerConnection, token_id: &str, e: AuthError) -> ConnError {
    match e {
        AuthError::Broker(b) => ConnError::Broker(b),
        e => ConnError::Fatal(ChainError::Broker(BrokerError::Connect {
            broker: conn.address().clone(),
            reason: format!("authentication with delegation token {token_id} failed: {e}"),
        })),
    }
}
