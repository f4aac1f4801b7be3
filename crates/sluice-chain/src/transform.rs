//! The [`Transform`] and [`Sink`] traits, and the [`Chain`] that joins them.
//!
//! Request phase: transforms in order, then the sink. Response phase: the sink
//! hands back responses in request order, then transforms in reverse order.
//! The sink decouples the phases so that a client can pipeline requests.

use std::sync::Arc;

use async_trait::async_trait;
use sluice_codec::{Request, Response};
use tokio_util::sync::CancellationToken;

use crate::readiness::Readiness;
use crate::{ChainError, ConnectionContext};
use sluice_tls::reload::Reload;

/// A synchronous rewrite of requests and responses.
pub trait Transform: Send {
    /// The transform's name, for logs and metrics.
    fn name(&self) -> &str;
    /// Called for every request, in order, before the sink sees it.
    fn on_request(
        &mut self,
        request: &mut Request,
        ctx: &ConnectionContext,
    ) -> Result<(), ChainError>;
    /// Called for every response, in request order, after the sink produced it.
    fn on_response(
        &mut self,
        response: &mut Response,
        ctx: &ConnectionContext,
    ) -> Result<(), ChainError>;
}

/// The end of a chain: sends requests to Kafka and yields responses.
#[async_trait]
pub trait Sink: Send {
    /// The sink's name, for logs and metrics.
    fn name(&self) -> &str;
    /// Hands a request to the sink. Returns once it is queued; waits only for
    /// backpressure, never for the response.
    async fn send(&mut self, request: Request, ctx: &ConnectionContext) -> Result<(), ChainError>;
    /// The response to the oldest request still owed one. Cancel-safe: it may
    /// be dropped in a `select!` and called again without losing anything.
    /// Pends forever while nothing is owed.
    async fn recv(&mut self, ctx: &ConnectionContext) -> Result<Response, ChainError>;
    /// How many responses are still owed.
    fn pending(&self) -> usize;
    /// Bytes the sink keeps for the client beyond the responses it owes
    /// (answers that came for requests already answered, kept to serve the
    /// next ones): the source counts them against the connection's memory
    /// budget. Sinks that keep nothing leave the default, 0.
    fn kept_bytes(&self) -> usize {
        0
    }
    /// The room the client's memory budgets (its connection's and the
    /// process's) have now, as the source sees it after each request and
    /// response: what the sink may take on ahead of the client's requests
    /// (and then reports in [`Sink::kept_bytes`]) must fit in it. Sinks that
    /// do nothing ahead keep the default, which ignores it.
    fn set_room_bytes(&mut self, _bytes: usize) {}
    /// Whether the client has authenticated, or is known to need no
    /// authentication. Until then the source holds it to its
    /// before-authentication limits (frame size, deadline, connection cap).
    /// Sinks that never authenticate clients keep the default: at once.
    fn authenticated(&self) -> bool {
        true
    }
}

/// Builds one [`Transform`] per client connection.
pub trait TransformBuilder: Send + Sync {
    /// Builds the transform for a new client connection.
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn Transform>;
}

/// Builds one [`Sink`] per client connection.
pub trait SinkBuilder: Send + Sync {
    /// Builds the sink for a new client connection.
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn Sink>;
    /// Whether this sink's connections may start unauthenticated (see
    /// [`Sink::authenticated`]). When false (the default) the source applies
    /// no before-authentication limit at all.
    fn authenticates_clients(&self) -> bool {
        false
    }
    /// The TLS settings of this sink that can be reloaded while it runs
    /// (see [`sluice_tls::reload`]).
    fn tls_reloads(&self) -> Vec<Arc<dyn Reload>> {
        Vec::new()
    }
    /// Starts the sink's readiness probe until `cancel` fires (see
    /// [`crate::readiness`]); `None` when the sink has none. Must be called
    /// inside a tokio runtime.
    fn start_readiness(&self, _cancel: &CancellationToken) -> Option<Arc<Readiness>> {
        None
    }
}

/// Transforms and a sink, shared by all connections of a source.
pub struct ChainBuilder {
    transforms: Vec<Box<dyn TransformBuilder>>,
    sink: Box<dyn SinkBuilder>,
}

impl std::fmt::Debug for ChainBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainBuilder")
            .field("transforms", &self.transforms.len())
            .finish_non_exhaustive()
    }
}

impl ChainBuilder {
    /// A chain of `transforms` ending in `sink`.
    pub fn new(transforms: Vec<Box<dyn TransformBuilder>>, sink: Box<dyn SinkBuilder>) -> Self {
        Self { transforms, sink }
    }

    /// Whether connections may start unauthenticated (see
    /// [`SinkBuilder::authenticates_clients`]).
    pub fn authenticates_clients(&self) -> bool {
        self.sink.authenticates_clients()
    }

    /// The sink's reloadable TLS settings (see [`SinkBuilder::tls_reloads`]).
    pub fn tls_reloads(&self) -> Vec<Arc<dyn Reload>> {
        self.sink.tls_reloads()
    }

    /// Starts the sink's readiness probe (see [`SinkBuilder::start_readiness`]).
    pub fn start_readiness(&self, cancel: &CancellationToken) -> Option<Arc<Readiness>> {
        self.sink.start_readiness(cancel)
    }

    /// Builds the chain for a new client connection.
    pub fn build(&self, ctx: &ConnectionContext) -> Chain {
        Chain {
            transforms: self.transforms.iter().map(|t| t.build(ctx)).collect(),
            sink: self.sink.build(ctx),
        }
    }
}

/// One client connection's chain.
pub struct Chain {
    transforms: Vec<Box<dyn Transform>>,
    sink: Box<dyn Sink>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("sink", &self.sink.name())
            .finish_non_exhaustive()
    }
}

impl Chain {
    /// Runs the request phase and hands the request to the sink.
    pub async fn send(
        &mut self,
        mut request: Request,
        ctx: &ConnectionContext,
    ) -> Result<(), ChainError> {
        for t in &mut self.transforms {
            t.on_request(&mut request, ctx)?;
        }
        self.sink.send(request, ctx).await
    }

    /// Waits for the next response (cancel-safe) and runs the response phase.
    pub async fn recv(&mut self, ctx: &ConnectionContext) -> Result<Response, ChainError> {
        let mut response = self.sink.recv(ctx).await?;
        for t in self.transforms.iter_mut().rev() {
            t.on_response(&mut response, ctx)?;
        }
        Ok(response)
    }

    /// How many responses the client is still owed.
    pub fn pending(&self) -> usize {
        self.sink.pending()
    }

    /// What the sink keeps for the client (see [`Sink::kept_bytes`]).
    pub fn kept_bytes(&self) -> usize {
        self.sink.kept_bytes()
    }

    /// Tells the sink the room the client's budgets have (see
    /// [`Sink::set_room_bytes`]).
    pub fn set_room_bytes(&mut self, bytes: usize) {
        self.sink.set_room_bytes(bytes);
    }

    /// Whether the client has authenticated (see [`Sink::authenticated`]).
    pub fn authenticated(&self) -> bool {
        self.sink.authenticated()
    }
}
