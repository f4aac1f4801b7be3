//! [`BrokerConnection::call`]: one request Sluice makes for itself, and its
//! decoded answer.
//!
//! Sluice asks brokers a handful of questions of its own: ApiVersions when
//! it first meets a broker, Metadata and FindCoordinator to fill its view,
//! SaslHandshake and SaslAuthenticate to log a connection in, the
//! delegation-token requests, and the readiness probe's three requests.
//! Each is the same round trip: build the request from a `kafka_protocol`
//! message (client id `sluice`, unless the caller names another), send it, wait a bounded time for the
//! answer, decode it as the matching response type. [`Call`] pairs each
//! request message with its response type, so that a caller gets the
//! response it asked for, never a [`ResponseKind`] to match on; every way
//! the round trip fails is a [`CallError`], classified.
//!
//! Only the messages Sluice sends for itself implement [`Call`]; none of
//! them may go unanswered (as a Produce with `acks=0` does).

use std::time::Duration;

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, CreateDelegationTokenRequest,
    CreateDelegationTokenResponse, DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use sluice_codec::{ApiKey, CodecError, Request, RequestKind, ResponseKind};

use crate::{BrokerAddress, BrokerConnection, BrokerError};
use sluice_error::{ErrorClass, ErrorSide};

/// The client id of every request Sluice makes for itself.
const CLIENT_ID: &str = "sluice";

/// A request message Sluice sends for itself, paired with its response.
pub trait Call: Into<RequestKind> {
    /// The API of the request.
    const API: ApiKey;
    /// The decoded answer.
    type Response;
    /// The answer out of a decoded response, `None` when it is another
    /// API's (the codec decodes an answer as its request's API, so this
    /// does not happen).
    fn answer(response: ResponseKind) -> Option<Self::Response>;
}

/// Implements [`Call`] for request messages whose API, request and response
/// enum variants share one name.
macro_rules! calls {
    ($($api:ident: $request:ty => $response:ty;)*) => {$(
        impl Call for $request {
            const API: ApiKey = ApiKey::$api;
            type Response = $response;

            fn answer(response: ResponseKind) -> Option<$response> {
                match response {
                    ResponseKind::$api(answer) => Some(answer),
                    _ => None,
                }
            }
        }
    )*};
}

calls! {
    ApiVersions: ApiVersionsRequest => ApiVersionsResponse;
    Metadata: MetadataRequest => MetadataResponse;
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse;
    SaslHandshake: SaslHandshakeRequest => SaslHandshakeResponse;
    SaslAuthenticate: SaslAuthenticateRequest => SaslAuthenticateResponse;
    CreateDelegationToken: CreateDelegationTokenRequest => CreateDelegationTokenResponse;
    DescribeDelegationToken: DescribeDelegationTokenRequest => DescribeDelegationTokenResponse;
}

/// Why a [`BrokerConnection::call`] got no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The broker never saw the request: the connection had failed or was
    /// closed before it was written.
    #[error("{api:?}: {source}")]
    NotSent {
        /// The request's API.
        api: ApiKey,
        /// Why the connection could not take it.
        source: BrokerError,
    },
    /// No answer within the call's timeout.
    #[error("{api:?}: {broker}: no answer within {}ms", timeout.as_millis())]
    Timeout {
        /// The request's API.
        api: ApiKey,
        /// The broker asked.
        broker: BrokerAddress,
        /// How long Sluice waited.
        timeout: Duration,
    },
    /// The connection failed after the request may have been written.
    #[error("{api:?}: {source}")]
    Broker {
        /// The request's API.
        api: ApiKey,
        /// What failed.
        source: BrokerError,
    },
    /// The answer could not be decoded.
    #[error("{api:?}: {broker}: {source}")]
    Decode {
        /// The request's API.
        api: ApiKey,
        /// The broker that answered.
        broker: BrokerAddress,
        /// The decode error.
        source: CodecError,
    },
    /// The answer decoded as another API's response.
    #[error("{api:?}: {broker}: the answer is not a {api:?} response")]
    WrongKind {
        /// The request's API.
        api: ApiKey,
        /// The broker that answered.
        broker: BrokerAddress,
    },
}

impl CallError {
    /// The API of the request that failed.
    pub fn api(&self) -> ApiKey {
        match self {
            CallError::NotSent { api, .. }
            | CallError::Timeout { api, .. }
            | CallError::Broker { api, .. }
            | CallError::Decode { api, .. }
            | CallError::WrongKind { api, .. } => *api,
        }
    }

    /// The broker this error is about (`None`: the connection's error
    /// names none, see [`BrokerError::broker`]).
    pub fn broker(&self) -> Option<&BrokerAddress> {
        match self {
            CallError::NotSent { source, .. } | CallError::Broker { source, .. } => source.broker(),
            CallError::Timeout { broker, .. }
            | CallError::Decode { broker, .. }
            | CallError::WrongKind { broker, .. } => Some(broker),
        }
    }

    /// The connection's error, when the connection failed (or never took
    /// the request).
    pub fn broker_error(&self) -> Option<&BrokerError> {
        match self {
            CallError::NotSent { source, .. } | CallError::Broker { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Splits a connection error by whether the broker may have seen the
    /// request.
    fn from_broker(api: ApiKey, source: BrokerError) -> Self {
        if source.request_may_have_been_sent() {
            CallError::Broker { api, source }
        } else {
            CallError::NotSent { api, source }
        }
    }
}

impl ErrorClass for CallError {
    fn side(&self) -> ErrorSide {
        match self {
            CallError::NotSent { source, .. } | CallError::Broker { source, .. } => source.side(),
            CallError::Timeout { .. } | CallError::Decode { .. } | CallError::WrongKind { .. } => {
                ErrorSide::Broker
            }
        }
    }

    fn retriable(&self) -> bool {
        match self {
            CallError::NotSent { source, .. } | CallError::Broker { source, .. } => {
                source.retriable()
            }
            CallError::Timeout { .. } => true,
            CallError::Decode { .. } | CallError::WrongKind { .. } => false,
        }
    }
}

impl BrokerConnection {
    /// Sends `body` as its API at `version` (client id `sluice`) and waits
    /// at most `timeout`, queueing included, for the answer, decoded as the
    /// request's response type.
    pub async fn call<C: Call>(
        &self,
        version: i16,
        body: C,
        timeout: Duration,
    ) -> Result<C::Response, CallError> {
        self.call_as(CLIENT_ID, version, body, timeout).await
    }

    /// [`BrokerConnection::call`] with another client id (the readiness
    /// probe's, so that brokers tell its requests apart).
    pub async fn call_as<C: Call>(
        &self,
        client_id: &'static str,
        version: i16,
        body: C,
        timeout: Duration,
    ) -> Result<C::Response, CallError> {
        let api = C::API;
        let request = Request::from_body(
            api,
            version,
            0,
            Some(Bytes::from_static(client_id.as_bytes())),
            body.into(),
        );
        let exchange = async {
            let receiver = self
                .send(request)
                .await
                .map_err(|e| CallError::from_broker(api, e))?
                .ok_or_else(|| CallError::Broker {
                    api,
                    source: BrokerError::Protocol {
                        broker: self.address().clone(),
                        reason: format!("{api:?} v{version} expects no answer"),
                    },
                })?;
            match receiver.await {
                Ok(result) => result.map_err(|e| CallError::from_broker(api, e)),
                // Unreachable: a dropped reply completes with the
                // connection's failure (see `Reply`'s `Drop`).
                Err(_) => Err(CallError::Broker {
                    api,
                    source: BrokerError::Shutdown {
                        broker: self.address().clone(),
                    },
                }),
            }
        };
        let response = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| CallError::Timeout {
                api,
                broker: self.address().clone(),
                timeout,
            })??;
        let decoded = response.into_body().map_err(|source| CallError::Decode {
            api,
            broker: self.address().clone(),
            source,
        })?;
        C::answer(decoded).ok_or_else(|| CallError::WrongKind {
            api,
            broker: self.address().clone(),
        })
    }
}

#[cfg(test)]
mod tests;
