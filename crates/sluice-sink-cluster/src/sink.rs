//! The `KafkaSinkCluster` sink: the driver of the core
//! ([`sluice_cluster`]) for one client connection. The core decides; the
//! driver does the IO it decides on and owns everything with a
//! connection, a task or a timer.
//!
//! [`KafkaSinkClusterBuilder`] owns what all client connections of a source
//! share ([`Shared`]): the config, the Sluice nodes and their health checks,
//! the [`ClusterView`](sluice_cluster::topology::ClusterView) Sluice routes by, the
//! connect options (TLS), and each broker's ApiVersions. Each client
//! connection gets a [`KafkaSinkCluster`]: its own broker connections
//! ([`crate::pool`], behind [`io::Io`]) and its queue of owed responses
//! ([`crate::pending`]).
//!
//! `send` passes a request through the client's authentication gate, asks
//! the core for a plan ([`sluice_cluster::plan`]) and does it (`send.rs`):
//! answers now, fills the view first (a Metadata refresh, FindCoordinator)
//! and plans once more, or sends the request whole or in parts and queues
//! what the client is owed. `recv` waits for the oldest owed answer's parts
//! and does what [`sluice_cluster::exchange`] decides: a part its
//! connection never wrote is sent once more, in place, on a reopened
//! connection; a whole read whose broker failed goes to another broker;
//! the parts' answers are combined by the core (`finish.rs`). While it
//! waits, a broker owing anything past its wait is checked on
//! ([`sluice_cluster::plan::stall`]).
//!
//! When `send` waits: the source awaits `send` to completion before it
//! reads the client's next request, and writes no answer meanwhile. `send`
//! returns once the request is written to its broker connections' queues,
//! but first it may wait for:
//! - the SASL answers in flight, settled before the next request is
//!   admitted (`auth.rs`), each within the request timeout;
//! - the lookups a plan asks for (a Metadata refresh, FindCoordinator),
//!   each within the request timeout, and for a Fetch no longer than its
//!   `max_wait_ms`;
//! - ApiVersions of brokers whose versions are not cached yet;
//! - connecting and logging in to a broker the request goes to, within the
//!   connect timeout;
//! - room in a broker connection's queue.
//!
//! Every client request ends in exactly one of three ways: a broker answer, a
//! synthesized Kafka error (a failed broker's part is answered with a
//! retriable error, counted in `sluice_synthesized_error_responses_total`), or
//! a closed client connection with a logged reason (when the API has no place
//! for an error, e.g. Metadata before v13 after its retry failed too).

mod auth;
mod builder;
mod error;
mod fetch;
mod finish;
mod io;
mod leave;
mod ready;
mod send;
mod share;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use async_trait::async_trait;
use sluice_auth::AuthError;
use sluice_broker::BrokerError;
use sluice_chain::ChainError;
use sluice_chain::{ConnectionContext, Sink};
use sluice_codec::{ApiKey, Request, Response};
use tracing::{debug, info, warn};

pub(crate) use crate::shared::Shared;
pub use builder::KafkaSinkClusterBuilder;
pub(crate) use error::InternalRequestError;
pub use error::SinkClusterError;
pub use leave::Leave;

use crate::close::{CloseError, gate_error};
use crate::health::Verdict;
use crate::pending::{Combine, PartState, PendingResponse, Post};
use crate::pool::Login;
use auth::{Authn, sasl_step};
use fetch::Consume;
use io::{Io, plan_error};
use send::{planned, send_meta, send_split};
use sluice_cluster::client_auth::{Admit, Mechanism, SaslStep};
use sluice_cluster::exchange::{Event, Step, Tries};
use sluice_cluster::plan::stall::{self, RECHECK_EVERY, STALL_AFTER};
use sluice_cluster::plan::{self, Dest, Route};
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::route::{self, Meta, OnFailure};
use sluice_cluster::topology::BrokerId;

/// One client connection's sink: its broker connections, the responses it
/// is owed, in request order, and where its authentication stands.
pub struct KafkaSinkCluster {
    /// The shared state and the client's broker connections.
    io: Io,
    connection_id: u64,
    /// Boxed, so that the queue of an idle connection is a few pointers.
    pending: VecDeque<Box<PendingResponse>>,
    /// The client's authentication, and its SASL answers not settled yet.
    auth: Authn,
    /// What was already tried for the oldest pending entry (see
    /// [`sluice_cluster::exchange`]).
    tries: Tries,
    /// The consume path: fetch parts still out after their fetch was
    /// answered, and their answers, for the client's next fetch (see
    /// [`sluice_cluster::consume`]); made on the first fetch.
    fetch: Consume,
    /// The client's share sessions with Sluice and Sluice's with the
    /// brokers (see [`sluice_cluster::route::share`]).
    share: ShareSessions,
    /// The longest rebalance timeout of the client's JoinGroups: how long a
    /// SyncGroup may wait at the coordinator for the group's leader, which
    /// its own body does not say (see `sluice_codec::wait`).
    rebalance_wait: Option<Duration>,
    /// The partitions whose idempotent batches were failed unsent, whose
    /// later batches are held back until the client resends from the gap
    /// (see [`sluice_cluster::route::produce_order`]).
    produce_gaps: ProduceGaps,
}

impl Drop for KafkaSinkCluster {
    fn drop(&mut self) {
        self.fetch.close_sessions(&mut self.io);
    }
}

impl std::fmt::Debug for KafkaSinkCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkCluster")
            .field("name", &self.io.shared.name)
            .field("connection_id", &self.connection_id)
            .field("connections", &self.io.pool)
            .field("pending", &self.pending.len())
            .field("auth", &self.auth.gate)
            .finish()
    }
}

impl KafkaSinkCluster {
    /// Passes `request` through the gate, then routes it.
    async fn admit(&mut self, mut request: Request) -> Result<Option<PendingResponse>, ChainError> {
        let client_version = request.api_version();
        let admit = self
            .auth
            .gate
            .admit(&mut request, now())
            .map_err(gate_error)
            .inspect_err(|e| {
                warn!(api = ?request.api_key(), "closing the client: {e}");
            })?;
        // The gate may have raised a SaslAuthenticate round's version; the
        // client's answer goes out at the version it asked for.
        let entry = self.admitted(request, admit).await?;
        Ok(entry.map(|mut entry| {
            if entry.api_key == ApiKey::SaslAuthenticate {
                entry.api_version = client_version;
            }
            entry
        }))
    }

    /// Carries out the gate's decision on `request`.
    async fn admitted(
        &mut self,
        mut request: Request,
        admit: Admit,
    ) -> Result<Option<PendingResponse>, ChainError> {
        match admit {
            Admit::Route => self.route(request).await,
            Admit::RouteWithoutAuth => {
                debug!("the client does not authenticate");
                self.io.pool.decide(Login::None, None);
                self.route(request).await
            }
            Admit::AuthConnection(None) => {
                send_meta(&mut self.io, request, Meta::ApiVersions, Dest::Auth).await
            }
            Admit::AuthConnection(Some(step)) => {
                let entry = self.io.send_whole(request, sasl(Dest::Auth, step)).await?;
                self.auth.in_flight += usize::from(entry.is_some());
                Ok(entry)
            }
            Admit::Answer(body) => Ok(Some(PendingResponse::answering(&request, *body))),
            Admit::Reauthenticate {
                mechanism,
                first_round,
            } => self.reauthenticate(request, mechanism, first_round).await,
            Admit::Refuse(code) => {
                let reason = self.auth.gate.closing().map(ToString::to_string);
                info!(
                    reason = reason.unwrap_or_default(),
                    "closing the client after answering its request with error {code}"
                );
                let (api, version) = (request.api_key(), request.api_version());
                let body = request
                    .body()
                    .ok()
                    .and_then(|body| route::failure_answer(api, body, version, code));
                Ok(body.map(|body| PendingResponse::answering(&request, body)))
            }
            // Logged once, at INFO, when the source closes the client
            // (`routine_close`).
            Admit::Expired => Ok(None),
            Admit::Drop => {
                debug!(
                    api = ?request.api_key(),
                    reason = %self.auth.gate.closing().map(ToString::to_string).unwrap_or_default(),
                    "dropping a request: the client is being closed"
                );
                Ok(None)
            }
        }
    }

    /// Sends one round of the client's re-authentication; the first opens
    /// its connection. No broker to send it to: answered NETWORK_EXCEPTION
    /// (or the broker's refusal of the mechanism), then the client closes.
    async fn reauthenticate(
        &mut self,
        request: Request,
        mechanism: Mechanism,
        first_round: bool,
    ) -> Result<Option<PendingResponse>, ChainError> {
        if first_round && let Err(e) = self.io.pool.open_reauth(mechanism.name()).await {
            let body = self.auth.reauth_unchecked(&mut self.io, e);
            return Ok(Some(PendingResponse::answering(&request, body)));
        }
        let whole = sasl(Dest::Reauth, SaslStep::Reauthenticate);
        let entry = self.io.send_whole(request, whole).await?;
        self.auth.in_flight += usize::from(entry.is_some());
        Ok(entry)
    }

    /// Waits for every SASL answer in flight and settles it, in order.
    async fn settle_sasl(&mut self) -> Result<(), ChainError> {
        if self.auth.in_flight == 0 {
            return Ok(());
        }
        let timeout = self.io.shared.request_timeout;
        for index in 0..self.pending.len() {
            let Some(step) = self.pending.get(index).and_then(|e| sasl_step(e)) else {
                continue;
            };
            let Some(entry) = self.pending.get_mut(index) else {
                continue;
            };
            if tokio::time::timeout(timeout, entry.wait_parts())
                .await
                .is_err()
            {
                let reason = CloseError::SaslAnswerTimeout {
                    api: entry.api_key,
                    timeout,
                };
                warn!("closing the client: {reason}");
                return Err(reason.into());
            }
            let result = entry.parts.first_mut().and_then(|p| p.take_result());
            let settled = match result {
                Some(Ok(mut response)) => {
                    self.auth.settle_answer(&mut self.io, step, &mut response);
                    Some(Ok(response))
                }
                Some(Err(error)) if step == SaslStep::Reauthenticate => {
                    self.auth.in_flight = self.auth.in_flight.saturating_sub(1);
                    let body = self
                        .auth
                        .reauth_unchecked(&mut self.io, AuthError::Broker(error));
                    self.pending.get(index).map(|entry| {
                        Ok(Response::from_body(
                            entry.api_key,
                            entry.api_version,
                            entry.correlation_id,
                            body,
                        ))
                    })
                }
                Some(Err(error)) => {
                    self.auth
                        .gate
                        .fail(CloseError::BrokerDuringAuthentication(error.clone()));
                    Some(Err(error))
                }
                None => None,
            };
            if let Some(entry) = self.pending.get_mut(index) {
                if let (Some(result), Some(part)) = (settled, entry.parts.first_mut()) {
                    part.state = PartState::Done(result);
                }
                if let Combine::Whole(whole) = &mut entry.combine {
                    whole.post = Post::None;
                }
            }
        }
        self.auth.in_flight = 0;
        Ok(())
    }

    /// Routes one client request as the core plans it; returns what the
    /// client is owed, if anything.
    async fn route(&mut self, mut request: Request) -> Result<Option<PendingResponse>, ChainError> {
        let (api, version) = (request.api_key(), request.api_version());
        plan::note_rebalance(&mut request, &mut self.rebalance_wait);
        let route = plan::route(api, version);
        if route == Route::Unsupported {
            return Err(ChainError::UnsupportedVersion { api, version });
        }
        if let Some(answer) = leave::leaving_answer(&self.io.shared, &mut request)? {
            return Ok(Some(answer));
        }
        let io = &mut self.io;
        match route {
            Route::Unsupported | Route::CloseNotForClients => {
                Err(CloseError::NotForClients { api }.into())
            }
            Route::NotForClients(body) => {
                debug!("answering {api:?} v{version}, an api clients may not send, with an error");
                Ok(Some(PendingResponse::answering(&request, *body)))
            }
            Route::Meta(meta) => send_meta(io, request, meta, Dest::Any).await,
            Route::Coordinator(key_type) => {
                planned(io, request, |request, shared, refreshed| {
                    let body = request.body()?;
                    Ok(plan::coordinator(
                        body,
                        key_type,
                        &shared.view.read(),
                        refreshed,
                    ))
                })
                .await
            }
            Route::Fetch => self.fetch.send(io, request).await,
            Route::Split => send_split(io, &mut self.produce_gaps, request).await,
            Route::Share => {
                let sessions = &mut self.share;
                planned(io, request, |request, shared, refreshed| {
                    let body = request.body()?;
                    let view = shared.view.read();
                    plan::share::plan(sessions, api, body, &*view, refreshed).map_err(plan_error)
                })
                .await
            }
            Route::Admin(admin) => {
                planned(io, request, |request, shared, refreshed| {
                    let view = shared.view.read();
                    let nodes = || shared.nodes.snapshot();
                    plan::admin(request, admin, &view, nodes, refreshed).map_err(plan_error)
                })
                .await
            }
            // Only a client that does not authenticate gets here (see
            // sluice_cluster::client_auth).
            Route::Sasl => {
                let whole = plan::Whole {
                    dest: Dest::Any,
                    post: Post::None,
                    on_failure: OnFailure::Close,
                };
                io.send_whole(request, whole).await
            }
        }
    }

    /// Does what the core says once the oldest entry's parts stopped
    /// waiting: sends again, once each, the parts their failed connections
    /// never wrote (the broker never saw them, so they cannot apply twice),
    /// or sends a whole read whose broker failed to another broker. Returns
    /// true when the caller waits again. Cancel-safe: a part is replaced,
    /// and recorded as tried, only once its new request is queued. `Err`:
    /// the client cannot be served any more.
    async fn try_head_again(&mut self) -> Result<bool, ChainError> {
        let Some(head) = self.pending.front() else {
            return Ok(false);
        };
        let (api, whole) = (head.api_key, head.whole_policy());
        let parts = head.parts.as_slice();
        let indices = match self.tries.on(Event::Settled { api, parts, whole }) {
            Step::Resend(indices) => indices,
            Step::RetryElsewhere => return self.retry_head_elsewhere(api).await,
            Step::Wait | Step::Combine => return Ok(false),
        };
        for index in indices {
            let unsent = self.pending.front().and_then(|head| {
                let part = head.parts.get(index)?;
                Some((part.target, part.error()?.unsent_request()?))
            });
            let Some((target, mut request)) = unsent else {
                continue;
            };
            self.produce_gaps.resending(&mut request);
            let part = self.io.send_again(target, request).await?;
            if let Some(slot) = self
                .pending
                .front_mut()
                .and_then(|head| head.parts.get_mut(index))
            {
                *slot = part;
            }
            self.tries.on(Event::<crate::pending::Part>::Resent(index));
        }
        Ok(true)
    }

    /// Sends the oldest entry, a whole request whose broker failed it, to
    /// another broker; true when it went out (the caller waits again).
    async fn retry_head_elsewhere(&mut self, api: ApiKey) -> Result<bool, ChainError> {
        let Some(head) = self.pending.front() else {
            return Ok(false);
        };
        let (Combine::Whole(whole), Some(part)) = (&head.combine, head.parts.first()) else {
            return Ok(false);
        };
        let failed = part.target;
        if let Some(error) = part.error() {
            let what =
                "broker failed a request any broker can serve, retrying it on another broker";
            self.io
                .shared
                .health
                .log_failure(part.broker.as_ref(), api, what, error);
        }
        let request = whole.original.clone();
        let Some(part) = self.io.send_elsewhere(failed, request).await? else {
            return Ok(false);
        };
        if let Some(head) = self.pending.front_mut() {
            head.parts = vec![part];
        }
        self.tries
            .on(Event::<crate::pending::Part>::RetriedElsewhere);
        Ok(true)
    }

    /// Checks on the brokers whose parts have stalled, as the core decides
    /// ([`stall::check`]); parts owed by a broker that left the cluster
    /// metadata are failed and their connections ended.
    async fn check_stalled(&mut self) {
        let now = tokio::time::Instant::now();
        let pool = &self.io.pool;
        let parts = self.pending.iter_mut().flat_map(|e| {
            let api = e.api_key;
            e.parts.iter_mut().map(move |part| {
                // Answered, but behind an answer the client has not taken yet.
                part.settle_if_answered();
                (api, part)
            })
        });
        let checked = stall::check(parts, now.into_std(), |part| {
            pool.quiet_for(part.target, now) >= STALL_AFTER
        });
        for (broker, api) in &checked.quiet {
            debug!(broker = %broker, api = ?api, "a broker has not answered a request within its wait; checking whether it left the cluster");
        }
        if !checked.refresh {
            return;
        }
        // Only a broker still quiet when checked again is suspect: a false
        // alarm costs the one Metadata request below.
        for (broker, api) in &checked.suspects {
            if let Verdict::Warn { quieted } = self.io.shared.health.failed(broker, now) {
                warn!(
                    broker = %broker,
                    api = ?api,
                    quieted,
                    "a broker has not answered a request within its wait, nor since; checking whether it left the cluster"
                );
            }
        }
        // The Metadata request may queue behind a long wait on the
        // connection it goes out on: the client's answers do not wait for it
        // longer than until the next check. A failure is logged inside; the
        // parts keep waiting and are checked again at their next stall time.
        match tokio::time::timeout(RECHECK_EVERY, self.io.refresh_metadata(None)).await {
            // Parts of brokers no longer listed fail; their connections end
            // (nothing unread reaches a resumed broker, nothing queues behind).
            Ok(Ok(())) => {
                let listed: BTreeSet<BrokerId> =
                    self.io.shared.view.read().brokers().map(|b| b.id).collect();
                let mut departed = Vec::new();
                for entry in &mut self.pending {
                    entry.abandon_departed(&listed, &mut departed);
                }
                for (target, broker) in departed {
                    let error = BrokerError::LeftCluster { broker };
                    self.io.pool.abort(target, error);
                }
            }
            Ok(Err(_)) => {}
            Err(_) => {
                debug!("no metadata within {RECHECK_EVERY:?}; the stalled parts are checked again")
            }
        }
    }

    /// The client's answer for a finished entry.
    fn finish(&mut self, entry: PendingResponse) -> Result<Response, ChainError> {
        let PendingResponse {
            correlation_id,
            api_key,
            api_version,
            parts,
            combine,
        } = entry;
        let header = (api_key, api_version, correlation_id);
        let io = &mut self.io;
        let response = match combine {
            Combine::Ready(response) => *response,
            Combine::Whole(whole) => {
                let part = parts.into_iter().next().ok_or_else(|| {
                    ChainError::from(crate::close::Invariant::WholeWithoutPart(api_key))
                })?;
                let (mut response, settle) = finish::finish_whole(io, *whole, part)?;
                if let Some(step) = settle {
                    self.auth.settle_answer(io, step, &mut response);
                }
                response
            }
            Combine::Split(split) => finish::finish_split(io, header, split, parts)?,
            Combine::Keyed(keyed) => finish::finish_keyed(io, header, *keyed, parts)?,
            Combine::Fetch(fetch) => {
                self.fetch
                    .finish(io, api_version, correlation_id, *fetch, parts)?
            }
            Combine::Share(share) => share::finish(io, &mut self.share, header, *share, parts)?,
        };
        let mut response = sluice_cluster::client_auth::in_client_version(response, api_version)?;
        response.set_correlation_id(correlation_id);
        Ok(response)
    }
}

#[async_trait]
impl Sink for KafkaSinkCluster {
    fn name(&self) -> &str {
        &self.io.shared.name
    }

    async fn send(&mut self, request: Request, _ctx: &ConnectionContext) -> Result<(), ChainError> {
        self.settle_sasl().await?;
        if let Some(entry) = self.admit(request).await? {
            self.pending.push_back(Box::new(entry));
        }
        Ok(())
    }

    async fn recv(&mut self, _ctx: &ConnectionContext) -> Result<Response, ChainError> {
        loop {
            let stall_check = self.pending.iter().filter_map(|e| e.stall_check_at()).min();
            let Some(head) = self.pending.front_mut() else {
                if let Some(reason) = self.auth.gate.closing() {
                    return Err(reason.clone().into());
                }
                return std::future::pending().await;
            };
            // Cancel-safe: each part keeps its receiver until its result is
            // stored. Meanwhile, a broker owing anything past its wait is
            // checked on (see `sluice_cluster::plan::stall`).
            if let Some(at) = stall_check {
                let stalled = tokio::select! {
                    () = head.wait_parts() => false,
                    () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => true,
                };
                if stalled {
                    self.check_stalled().await;
                    continue;
                }
            } else {
                head.wait_parts().await;
            }
            if self.try_head_again().await? {
                continue;
            }
            let head = self.pending.front_mut().map(|head| &mut **head);
            if self.fetch.head_waits(&mut self.io, head).await? {
                continue;
            }
            let Some(entry) = self.pending.pop_front() else {
                continue;
            };
            self.tries = Tries::default();
            return self.finish(*entry);
        }
    }

    fn pending(&self) -> usize {
        // A client being closed is owed the close, after its answers.
        self.pending.len() + usize::from(self.auth.gate.closing().is_some())
    }

    /// The consume path's parked parts and stashed answers
    /// (`consume/kept.rs`), and the client's share sessions.
    fn kept_bytes(&self) -> usize {
        self.fetch.kept_bytes() + self.share.kept_bytes()
    }

    fn set_room_bytes(&mut self, bytes: usize) {
        self.fetch.room_bytes = bytes;
    }

    /// Where authentication is required: authenticated (the gate closes a
    /// client that tries anything else). Otherwise: at once (see
    /// `authenticates_clients`).
    fn authenticated(&self) -> bool {
        !self.auth.gate.required() || self.auth.gate.decided()
    }
}

/// A whole SASL request to `dest`, settled as `step` once answered; a
/// failed broker closes the client.
fn sasl(dest: Dest, step: SaslStep) -> plan::Whole {
    plan::Whole {
        dest,
        post: Post::Sasl(step),
        on_failure: OnFailure::Close,
    }
}

/// The time the core's decisions are taken at: tokio's clock (paused in the
/// timer tests) as a `std` instant, which is what the core takes.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
