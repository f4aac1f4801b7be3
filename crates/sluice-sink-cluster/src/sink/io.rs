//! The driver's hands: what every client connection of the sink shares
//! ([`Shared`]: the view, the Sluice nodes, health) and this client's broker
//! connections ([`Pool`]). [`Io`] sends what the core planned and the
//! requests that fill the view (a Metadata refresh, FindCoordinator), each
//! awaited within the request timeout; a failed one is logged, and the
//! request is planned again with what is known.

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_broker::{BrokerError, Call};
use sluice_chain::ChainError;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Request, RequestKind};
use sluice_metrics::names;
use tracing::{debug, warn};

use super::{InternalRequestError, Shared, now};
use crate::close::Invariant;
use crate::pending::{Part, PendingResponse};
use crate::pool::{ConnError, Pool, Target};
use sluice_cluster::plan::stall::StallClock;
use sluice_cluster::plan::{self, Dest, Known, Lookup, PlanError};
use sluice_cluster::route::meta::{find_coordinator_requests, metadata_request};
use sluice_cluster::route::{BATCHED_FIND_COORDINATOR_VERSION, InternalVersions, MetadataRefresh};
use sluice_cluster::split::dispatch::SplitRequest;
use sluice_cluster::topology::ClusterView;
use sluice_cluster::topology::{BrokerId, CoordinatorKeyType, MetadataApplied, TopicRef};

/// The shared state and the client's broker connections.
#[derive(Debug)]
pub(crate) struct Io {
    pub(crate) shared: Arc<Shared>,
    /// Its broker connections: the only way a request reaches a broker.
    pub(crate) pool: Pool,
}

impl Io {
    /// Sends an internal request, built from the chosen broker's versions, to
    /// any broker and waits, within the request timeout, for its answer.
    /// Returns the version used and the answer.
    async fn internal_request<C: Call>(
        &mut self,
        build: impl FnOnce(InternalVersions) -> (i16, C),
    ) -> Result<(i16, C::Response), InternalRequestError> {
        let api = C::API;
        let (_, conn) = self.pool.any(None).await.map_err(|e| match e {
            ConnError::Broker(source) => InternalRequestError::Broker { api, source },
            ConnError::Fatal(source) => InternalRequestError::Fatal { api, source },
        })?;
        let versions =
            InternalVersions::choose(self.shared.api_versions_of(conn.address()).as_deref());
        let (version, body) = build(versions);
        let answer = conn
            .call(version, body, self.shared.request_timeout)
            .await?;
        Ok((version, answer))
    }

    /// Refreshes `topics` (or only the broker list, for `None`) from any
    /// broker into the view.
    pub(crate) async fn refresh_metadata(
        &mut self,
        topics: Option<&[TopicRef]>,
    ) -> Result<(), InternalRequestError> {
        let view = self.shared.view.clone();
        let result = self
            .internal_request(|versions| {
                let request = metadata_request(topics, versions.metadata, &view.read());
                (versions.metadata, request)
            })
            .await;
        let (version, metadata) = result.inspect_err(|e| warn!("metadata refresh failed: {e}"))?;
        let applied = self.shared.view.write().apply_metadata(version, &metadata);
        log_applied(&applied);
        self.pool.on_metadata(&applied);
        debug!(
            topics = metadata.topics.len(),
            brokers = metadata.brokers.len(),
            "metadata refreshed"
        );
        Ok(())
    }

    /// Looks up the coordinators of `keys` into the view: one batched
    /// request where the broker supports it (v4+), else one per key.
    async fn find_coordinators(
        &mut self,
        key_type: CoordinatorKeyType,
        keys: &[String],
    ) -> Result<(), InternalRequestError> {
        let mut remaining: VecDeque<String> = keys.iter().cloned().collect();
        while !remaining.is_empty() {
            let mut asked: Vec<String> = Vec::new();
            let result = self
                .internal_request(|versions| {
                    let v = versions.find_coordinator;
                    asked = if v >= BATCHED_FIND_COORDINATOR_VERSION {
                        remaining.drain(..).collect()
                    } else {
                        remaining.pop_front().into_iter().collect()
                    };
                    let request = find_coordinator_requests(key_type, &asked, v)
                        .pop()
                        .unwrap_or_default();
                    (v, request)
                })
                .await;
            let (version, found) =
                result.inspect_err(|e| warn!("coordinator lookup failed: {e}"))?;
            // v0-3 answer for the one key asked, which they do not repeat.
            let key = (version < BATCHED_FIND_COORDINATOR_VERSION)
                .then(|| asked.first().map(|k| StrBytes::from_string(k.clone())))
                .flatten();
            self.shared.view.write().apply_find_coordinator(
                version,
                key_type,
                key.as_ref(),
                &found,
            );
        }
        Ok(())
    }

    /// Fills the view as `lookup` says. A failed request is only logged
    /// (the request is planned again with what is known), unless it is
    /// fatal to the client.
    pub(crate) async fn look_up(&mut self, lookup: &Lookup) -> Result<(), ChainError> {
        match &lookup.metadata {
            Some(MetadataRefresh::Topics(topics)) => {
                fatal_only(self.refresh_metadata(Some(topics)).await)?;
            }
            Some(MetadataRefresh::Brokers) => fatal_only(self.refresh_metadata(None).await)?,
            None => {}
        }
        if let Some((key_type, keys)) = &lookup.coordinators {
            fatal_only(self.find_coordinators(*key_type, keys).await)?;
        }
        Ok(())
    }

    /// What the core plans a split with: `view` (its read guard held by
    /// the caller), the Sluice nodes, which brokers are not suspect, now.
    fn known<'a>(&'a self, view: &'a ClusterView) -> Known<'a, impl Fn(BrokerId) -> bool + 'a> {
        Known {
            view,
            nodes: &self.shared.nodes,
            usable: move |id: BrokerId| !self.shared.is_suspect_id(view, id),
            now: now(),
        }
    }

    /// Splits `body` by the view as it is now (see [`plan::split_now`]).
    pub(crate) fn split_now(
        &self,
        body: &RequestKind,
        version: i16,
        held: &[(TopicRef, i32)],
    ) -> Result<SplitRequest, ChainError> {
        let view = self.shared.view.read();
        plan::split_now(body, version, held, &self.known(&view)).map_err(plan_error)
    }

    /// Splits `body`, filling the view first (once) where something is
    /// unroutable (see [`plan::split`]).
    pub(crate) async fn split(
        &mut self,
        body: &RequestKind,
        version: i16,
        held: &[(TopicRef, i32)],
    ) -> Result<SplitRequest, ChainError> {
        let mut refreshed = false;
        loop {
            let planned = {
                let view = self.shared.view.read();
                plan::split(body, version, held, &self.known(&view), refreshed)
                    .map_err(plan_error)?
            };
            match planned {
                plan::Plan::Refresh(lookup) => self.look_up(&lookup).await?,
                plan::Plan::Split(split) => return Ok(split),
                _ => return Err(Invariant::NotSplittable.into()),
            }
            refreshed = true;
        }
    }

    /// Sends `request` on the connection for `dest`. `None` when it expects
    /// no response (Produce with acks=0); a part that could not be sent is
    /// returned failed, to be answered like any failed part. `Err` when the
    /// client cannot be served any more (e.g. its broker connection cannot be
    /// authenticated): the client is closed with it.
    pub(crate) async fn send_part(
        &mut self,
        dest: Dest,
        request: Request,
    ) -> Result<Option<Part>, ChainError> {
        let expects_response = request.expects_response();
        let connection = match dest {
            Dest::Broker(id) => self.pool.broker(id).await.map(|c| (Target::Broker(id), c)),
            Dest::Any => self.pool.any(None).await,
            Dest::Auth => self.pool.auth_connection().await.map(|c| (Target::Auth, c)),
            Dest::Reauth => self.pool.reauth_connection().map(|c| (Target::Auth, c)),
        };
        let fallback = match dest {
            Dest::Broker(id) => Target::Broker(id),
            Dest::Any => Target::Bootstrap,
            Dest::Auth | Dest::Reauth => Target::Auth,
        };
        let (target, conn) = match connection {
            Ok(found) => found,
            Err(ConnError::Broker(e)) => {
                debug!(broker = %e.target(), "cannot send {:?}: {e}", request.api_key());
                return Ok(expects_response.then(|| Part::failed(fallback, e)));
            }
            Err(ConnError::Fatal(e)) => {
                warn!(api = ?request.api_key(), "closing the client: {e}");
                return Err(e);
            }
        };
        let broker = conn.address().clone();
        count_out_of_rack(&self.shared, target, request.api_key());
        let clock = stall_clock(&request, |wait| conn.answer_due(wait));
        Ok(match conn.send(request).await {
            Ok(Some(receiver)) => Some(Part::sent(target, broker, receiver).stalling_at(clock)),
            Ok(None) => None,
            Err(e) => expects_response.then(|| Part::failed(target, e)),
        })
    }

    /// Sends `request` to broker `id` without waiting: only on a connection
    /// already open that needs no replacing (its token or SASL session not
    /// at risk: see [`Pool::ready`]), only if its queue has room now. For
    /// work that may as well be skipped (a fetch read ahead:
    /// `sluice_cluster::consume::ahead`).
    pub(crate) fn try_send_part(&mut self, id: BrokerId, request: Request) -> Option<Part> {
        let target = Target::Broker(id);
        let conn = self.pool.ready(target)?;
        let broker = conn.address().clone();
        let clock = stall_clock(&request, |wait| conn.answer_due(wait));
        let api = request.api_key();
        let receiver = conn.try_send(request)?;
        count_out_of_rack(&self.shared, target, api);
        Some(Part::sent(target, broker, receiver).stalling_at(clock))
    }

    /// Sends a whole request as `whole` says, keeping a copy to retry it or
    /// to build an error answer from.
    pub(crate) async fn send_whole(
        &mut self,
        request: Request,
        whole: plan::Whole,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let original = request.clone();
        let Some(part) = self.send_part(whole.dest, request).await? else {
            return Ok(None);
        };
        Ok(Some(PendingResponse::whole(original, part, whole)))
    }

    /// Sends `request` again to the broker behind `target` (any broker for
    /// the bootstrap or auth connection) on a fresh connection: a request
    /// its failed connection never wrote. `Err`: the client cannot be
    /// served any more.
    pub(crate) async fn send_again(
        &mut self,
        target: Target,
        request: Request,
    ) -> Result<Part, ChainError> {
        let api = request.api_key();
        self.pool.discard(target);
        let connection = match target {
            Target::Broker(id) => self.pool.broker(id).await.map(|c| (target, c)),
            // The bootstrap connection serves what any broker can.
            Target::Bootstrap | Target::Auth => self.pool.any(None).await,
        };
        Ok(match connection {
            Ok((target, conn)) => {
                let broker = conn.address().clone();
                debug!(broker = %broker, api = ?api, "sending again a request its failed broker connection never wrote");
                match conn.send(request).await {
                    Ok(Some(receiver)) => Part::sent(target, broker, receiver),
                    // A request that expects no answer is never pending.
                    Ok(None) => Part::failed(target, BrokerError::Shutdown { broker }),
                    Err(e) => Part::failed(target, e),
                }
            }
            Err(ConnError::Broker(e)) => Part::failed(target, e),
            Err(ConnError::Fatal(e)) => {
                warn!(api = ?api, "closing the client: {e}");
                return Err(e);
            }
        })
    }

    /// Sends `request`, which broker `failed` failed, to another broker.
    /// `None` when it expects no answer.
    pub(crate) async fn send_elsewhere(
        &mut self,
        failed: Target,
        request: Request,
    ) -> Result<Option<Part>, ChainError> {
        self.pool.discard(failed);
        Ok(Some(match self.pool.any(Some(failed)).await {
            Ok((target, conn)) => {
                let broker = conn.address().clone();
                match conn.send(request).await {
                    Ok(Some(receiver)) => Part::sent(target, broker, receiver),
                    Ok(None) => return Ok(None),
                    Err(e) => Part::failed(target, e),
                }
            }
            Err(ConnError::Broker(e)) => Part::failed(failed, e),
            Err(ConnError::Fatal(e)) => return Err(e),
        }))
    }

    /// Before answering ApiVersions, makes sure every known broker's versions
    /// are cached (only the first client connections pay for it), so that the
    /// intersection covers the whole cluster. Before the client's
    /// authentication is decided no Metadata may be sent, so only brokers
    /// already known are asked.
    pub(crate) async fn learn_every_api_versions(&mut self) -> Result<(), ChainError> {
        if self.pool.decided() && self.shared.view.read().brokers().next().is_none() {
            fatal_only(self.refresh_metadata(None).await)?;
        }
        for id in self.shared.brokers_to_ask_api_versions() {
            match self.pool.learn_api_versions(id).await {
                Ok(()) => {}
                Err(ConnError::Broker(e)) => {
                    debug!(broker = %e.target(), "cannot learn api versions: {e}");
                }
                Err(ConnError::Fatal(e)) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The stall clock of `request`, about to be sent on a connection whose
/// `answer_due` counts what is queued ahead of it (see
/// [`sluice_cluster::plan::stall`]).
pub(crate) fn stall_clock(
    request: &Request,
    answer_due: impl FnOnce(std::time::Duration) -> tokio::time::Instant,
) -> StallClock {
    StallClock::of(request.api_key(), request.broker_wait(), |own| {
        answer_due(own).into_std()
    })
}

/// Counts a client request (or part) sent to a broker outside the local
/// Sluice node's rack, when both racks are known.
fn count_out_of_rack(shared: &Shared, target: Target, api: ApiKey) {
    let Target::Broker(id) = target else {
        return;
    };
    if shared.out_of_rack(&shared.view.read(), id) {
        metrics::counter!(names::OUT_OF_RACK_REQUESTS, "api" => format!("{api:?}")).increment(1);
    }
}

/// A failed internal request is only logged (routing goes on with what is
/// known), unless it is fatal to the client.
pub(crate) fn fatal_only(result: Result<(), InternalRequestError>) -> Result<(), ChainError> {
    match result.map_err(InternalRequestError::into_fatal) {
        Err(Some(fatal)) => Err(fatal),
        _ => Ok(()),
    }
}

/// Why a request could not be planned, as the reason the client is closed.
pub(crate) fn plan_error(e: PlanError) -> ChainError {
    match e {
        PlanError::Codec(e) => e.into(),
        PlanError::NotSplittable => Invariant::NotSplittable.into(),
        PlanError::NoAnswerForRefused(api) => Invariant::NoAnswerForRefused(api).into(),
        PlanError::ShareWithoutBody(api) => Invariant::ShareWithoutBody(api).into(),
    }
}

/// Logs what applying a Metadata response left out of the view.
pub(crate) fn log_applied(applied: &MetadataApplied) {
    for older in &applied.older_epochs_ignored {
        debug!(
            topic = %older.topic.0,
            partition = older.partition,
            old_epoch = older.kept,
            new_epoch = older.ignored,
            "ignoring partition metadata older than the view"
        );
    }
}
