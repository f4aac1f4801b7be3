//! A sink for tests: answers every request with an ApiVersions response that
//! carries the request's correlation id, optionally holding responses back
//! until the test releases them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sluice_chain::{ChainError, ConnectionContext, Sink, SinkBuilder};
use sluice_codec::kafka_protocol::messages::ApiVersionsResponse;
use sluice_codec::{ApiKey, Request, Response, ResponseKind};
use tokio::sync::{Semaphore, watch};

use super::harness::WAIT;

/// A request whose client id is this makes the sink fail with a `ChainError`.
pub(crate) const FAILING_CLIENT_ID: &[u8] = b"fail";

/// A request whose client id is this makes the sink panic.
pub(crate) const PANIC_CLIENT_ID: &[u8] = b"panic";

/// With [`TestSinkBuilder::authenticates`], a request whose client id is
/// this authenticates the client.
pub(crate) const AUTH_CLIENT_ID: &[u8] = b"auth";

/// What the test can observe of the sinks built by a source.
#[derive(Debug)]
pub(crate) struct Probe {
    sent: watch::Sender<usize>,
    contexts: Mutex<Vec<ConnectionContext>>,
}

impl Probe {
    /// Waits until the sinks together received at least `n` requests.
    pub(crate) async fn wait_sent(&self, n: usize) {
        let mut rx = self.sent.subscribe();
        tokio::time::timeout(WAIT, rx.wait_for(|sent| *sent >= n))
            .await
            .unwrap_or_else(|_| panic!("the sink did not receive {n} requests in {WAIT:?}"))
            .unwrap();
    }

    /// The contexts of every connection a sink was built for, in order.
    pub(crate) fn contexts(&self) -> Vec<ConnectionContext> {
        self.contexts.lock().unwrap().clone()
    }
}

/// Builds [`TestSink`]s; `gate`, when set, holds each response until the test
/// adds a permit.
pub(crate) struct TestSinkBuilder {
    pub probe: Arc<Probe>,
    pub gate: Option<Arc<Semaphore>>,
    /// Clients start unauthenticated, until a request from [`AUTH_CLIENT_ID`].
    pub authenticates: bool,
}

impl TestSinkBuilder {
    pub(crate) fn new(gate: Option<Arc<Semaphore>>) -> Self {
        Self {
            probe: Arc::new(Probe {
                sent: watch::Sender::new(0),
                contexts: Mutex::new(Vec::new()),
            }),
            gate,
            authenticates: false,
        }
    }
}

impl SinkBuilder for TestSinkBuilder {
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn Sink> {
        self.probe.contexts.lock().unwrap().push(ctx.clone());
        Box::new(TestSink {
            owed: VecDeque::new(),
            probe: Arc::clone(&self.probe),
            gate: self.gate.clone(),
            authenticated: !self.authenticates,
        })
    }

    fn authenticates_clients(&self) -> bool {
        self.authenticates
    }
}

struct TestSink {
    /// (api version, correlation id) of each request still owed a response.
    owed: VecDeque<(i16, i32)>,
    probe: Arc<Probe>,
    gate: Option<Arc<Semaphore>>,
    authenticated: bool,
}

/// The test sink's own errors.
#[derive(Debug, thiserror::Error)]
enum TestSinkError {
    #[error("client request refused: the test sink refuses this client")]
    Refused,
    #[error("internal: nothing owed")]
    NothingOwed,
}

impl sluice_error::ErrorClass for TestSinkError {
    fn side(&self) -> sluice_error::ErrorSide {
        match self {
            TestSinkError::Refused => sluice_error::ErrorSide::Client,
            TestSinkError::NothingOwed => sluice_error::ErrorSide::Internal,
        }
    }

    fn retriable(&self) -> bool {
        false
    }
}

#[async_trait]
impl Sink for TestSink {
    fn name(&self) -> &str {
        "TestSink"
    }

    async fn send(&mut self, request: Request, _ctx: &ConnectionContext) -> Result<(), ChainError> {
        if request.header().client_id.as_deref() == Some(FAILING_CLIENT_ID) {
            return Err(ChainError::sink(TestSinkError::Refused));
        }
        if request.header().client_id.as_deref() == Some(PANIC_CLIENT_ID) {
            panic!("the test sink panics for this client");
        }
        if request.header().client_id.as_deref() == Some(AUTH_CLIENT_ID) {
            self.authenticated = true;
        }
        if request.expects_response() {
            self.owed
                .push_back((request.api_version(), request.correlation_id()));
        }
        self.probe.sent.send_modify(|n| *n += 1);
        Ok(())
    }

    async fn recv(&mut self, _ctx: &ConnectionContext) -> Result<Response, ChainError> {
        if self.owed.is_empty() {
            std::future::pending::<()>().await;
        }
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        let (version, correlation_id) = self
            .owed
            .pop_front()
            .ok_or_else(|| ChainError::sink(TestSinkError::NothingOwed))?;
        Ok(Response::from_body(
            ApiKey::ApiVersions,
            version,
            correlation_id,
            ResponseKind::ApiVersions(ApiVersionsResponse::default()),
        ))
    }

    fn pending(&self) -> usize {
        self.owed.len()
    }

    fn authenticated(&self) -> bool {
        self.authenticated
    }
}
