//! The request half of the sink: route each client request by its family
//! (see [`sluice_cluster::route`]), fill the view first where it lacks what routing
//! needs, send the parts and queue what the client is owed.
//!
//! The hot path: a Produce or Fetch whose partitions all have one leader goes
//! out as the client's original bytes (the body is decoded to find the
//! leaders, records stay as shared `Bytes`, nothing is re-encoded). A Fetch
//! goes out whole only when it is sessionless, all its partitions go to one
//! broker and nothing of the connection's is parked or stashed: as the
//! client's bytes, or re-encoded when it carries a `rack_id` to clear. Any
//! other is planned by the consume path (`sink/fetch.rs`), whose parts are
//! re-encoded (records still shared).

use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use sluice_metrics::names;
use tracing::{debug, warn};

use super::{InternalRequestError, KafkaSinkCluster, Shared};
use crate::close::{CloseError, Invariant};
use crate::pending::{Combine, KeyedCombine, Part, PendingResponse, Post, SplitCombine, Whole};
use crate::pool::{ConnError, Target};
use sluice_chain::ChainError;
use sluice_cluster::error_codes::{self, ErrorCode};
use sluice_cluster::exchange::KeyedPlan;
use sluice_cluster::rewrite::Rewriter;
use sluice_cluster::route::produce_fetch::{ShownHere, goes_where_shown};
use sluice_cluster::route::produce_order::{BatchHead, Holding, idempotent_heads};
use sluice_cluster::route::{self, Family, Meta, OnFailure};
use sluice_cluster::split::RackRouting;
use sluice_cluster::split::dispatch::{SplitRequest, split_request};
use sluice_cluster::topology::{BrokerId, CoordinatorKeyType, TopicRef};

/// Where a whole request goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Dest {
    /// To this broker.
    Broker(BrokerId),
    /// To any broker.
    Any,
    /// To the client's auth connection (before its authentication is decided).
    Auth,
    /// To the connection of the client's re-authentication under way.
    Reauth,
}

impl KafkaSinkCluster {
    /// Routes one client request; returns what the client is owed, if anything.
    pub(super) async fn route(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let (api, version) = (request.api_key(), request.api_version());
        match api {
            ApiKey::JoinGroup => {
                let wait = request.broker_wait();
                self.rebalance_wait = Some(self.rebalance_wait.map_or(wait, |w| w.max(wait)));
            }
            ApiKey::SyncGroup => request.set_broker_wait_at_least(
                self.rebalance_wait
                    .unwrap_or(route::groups::DEFAULT_REBALANCE_WAIT),
            ),
            _ => {}
        }
        if !sluice_cluster::api::serves(api, version) {
            return Err(ChainError::UnsupportedVersion { api, version });
        }
        let descriptor = sluice_cluster::api::describe(api);
        if let Some(answer) = super::leave::leaving_answer(&self.shared, &mut request)? {
            return Ok(Some(answer));
        }
        match descriptor.family {
            Family::NotForClients => {
                let Some(body) = route::admin::not_for_clients(api, version) else {
                    return Err(CloseError::NotForClients { api }.into());
                };
                debug!("answering {api:?} v{version}, an api clients may not send, with an error");
                Ok(Some(PendingResponse::answering(&request, body)))
            }
            Family::Meta(meta) => self.send_meta(request, meta, Dest::Any).await,
            // Before its split version (OffsetFetch below v8: one group), a
            // split API goes whole to its coordinator.
            Family::ByCoordinator if version < descriptor.split_since => {
                self.send_coordinator(request, CoordinatorKeyType::Group)
                    .await
            }
            Family::ByLeader if api == ApiKey::Fetch => self.send_fetch(request).await,
            Family::ByLeader | Family::ByCoordinator | Family::FanOut => {
                self.send_split(request).await
            }
            Family::Coordinator(key_type) => self.send_coordinator(request, key_type).await,
            Family::ShareSession => self.send_share(request).await,
            Family::Admin(admin) => self.send_admin(request, admin).await,
            // Only a client that does not authenticate gets here (see sluice_cluster::client_auth).
            Family::Sasl => {
                self.send_whole(request, Dest::Any, Post::None, OnFailure::Close)
                    .await
            }
        }
    }

    /// Sends `request` on the connection for `dest`. `None` when it expects
    /// no response (Produce with acks=0); a part that could not be sent is
    /// returned failed, to be answered like any failed part. `Err` when the
    /// client cannot be served any more (e.g. its broker connection cannot be
    /// authenticated): the client is closed with it.
    pub(super) async fn send_part(
        &mut self,
        dest: Dest,
        request: Request,
    ) -> Result<Option<Part>, ChainError> {
        let expects_response = request.expects_response();
        let connection = match dest {
            Dest::Broker(id) => self
                .connections
                .broker(id)
                .await
                .map(|c| (Target::Broker(id), c)),
            Dest::Any => self.connections.any(None).await,
            Dest::Auth => self
                .connections
                .auth_connection()
                .await
                .map(|c| (Target::Auth, c)),
            Dest::Reauth => self
                .connections
                .reauth_connection()
                .map(|c| (Target::Auth, c)),
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
        let stalls_at = super::stalled::stalls_at(&request, |wait| conn.answer_due(wait));
        Ok(match conn.send(request).await {
            Ok(Some(receiver)) => Some(Part::sent(target, broker, receiver).stalling_at(stalls_at)),
            Ok(None) => None,
            Err(e) => expects_response.then(|| Part::failed(target, e)),
        })
    }

    /// Sends `request` to broker `id` without waiting: only on a connection
    /// already open that needs no replacing (its token or SASL session not
    /// at risk: see [`crate::pool::Pool::ready`]), only if
    /// its queue has room now. For work that may as well be skipped (a
    /// fetch read ahead: `sluice_cluster::consume::ahead`).
    pub(super) fn try_send_part(&mut self, id: BrokerId, request: Request) -> Option<Part> {
        let target = Target::Broker(id);
        let conn = self.connections.ready(target)?;
        let broker = conn.address().clone();
        let stalls_at = super::stalled::stalls_at(&request, |wait| conn.answer_due(wait));
        let api = request.api_key();
        let receiver = conn.try_send(request)?;
        count_out_of_rack(&self.shared, target, api);
        Some(Part::sent(target, broker, receiver).stalling_at(stalls_at))
    }

    /// Sends a whole request to `dest`, keeping a copy to retry it or to
    /// build an error answer from.
    pub(super) async fn send_whole(
        &mut self,
        request: Request,
        dest: Dest,
        post: Post,
        on_failure: OnFailure,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let original = request.clone();
        let Some(part) = self.send_part(dest, request).await? else {
            return Ok(None);
        };
        Ok(Some(PendingResponse {
            correlation_id: original.correlation_id(),
            api_key: original.api_key(),
            api_version: original.api_version(),
            parts: vec![part],
            combine: Combine::Whole(Box::new(Whole {
                post,
                on_failure,
                original,
            })),
        }))
    }

    /// ApiVersions, Metadata, FindCoordinator, DescribeCluster: any broker
    /// (`dest`: [`Dest::Auth`] for ApiVersions before the client's
    /// authentication is decided).
    pub(super) async fn send_meta(
        &mut self,
        mut request: Request,
        meta: Meta,
        dest: Dest,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let version = request.api_version();
        let post = match meta {
            Meta::ApiVersions => {
                if !route::meta::api_versions_decodable(version) {
                    let body = route::meta::unsupported_api_versions();
                    let response = Response::from_body(
                        ApiKey::ApiVersions,
                        0,
                        request.correlation_id(),
                        ResponseKind::ApiVersions(body),
                    );
                    return Ok(Some(PendingResponse::ready(response)));
                }
                self.learn_every_api_versions().await?;
                let cached = match request.body()? {
                    // A name Kafka refuses gets the broker's own answer.
                    RequestKind::ApiVersions(r)
                        if route::meta::valid_client_software(r, version) =>
                    {
                        self.shared.cached_client_api_versions()
                    }
                    _ => None,
                };
                if let Some(body) = cached {
                    let response = Response::from_body(
                        ApiKey::ApiVersions,
                        version,
                        request.correlation_id(),
                        ResponseKind::ApiVersions(body),
                    );
                    return Ok(Some(PendingResponse::ready(response)));
                }
                Post::ApiVersions
            }
            _ => Post::of_meta(meta, &mut request)?,
        };
        let on_failure = sluice_cluster::api::describe(request.api_key()).on_failure;
        self.send_whole(request, dest, post, on_failure).await
    }

    /// Before answering ApiVersions, makes sure every known broker's versions
    /// are cached (only the first client connections pay for it), so that the
    /// intersection covers the whole cluster. Before the client's
    /// authentication is decided no Metadata may be sent, so only brokers
    /// already known are asked.
    async fn learn_every_api_versions(&mut self) -> Result<(), ChainError> {
        if self.connections.decided() && self.shared.view.read().brokers().next().is_none() {
            fatal_only(self.refresh_metadata(None).await)?;
        }
        for id in self.shared.brokers_to_ask_api_versions() {
            match self.connections.learn_api_versions(id).await {
                Ok(()) => {}
                Err(ConnError::Broker(e)) => {
                    debug!(broker = %e.target(), "cannot learn api versions: {e}");
                }
                Err(ConnError::Fatal(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Admin APIs: any broker; config requests naming brokers by Sluice node
    /// id go through [`Self::send_configs`].
    async fn send_admin(
        &mut self,
        mut request: Request,
        admin: route::Admin,
    ) -> Result<Option<PendingResponse>, ChainError> {
        if route::admin::configs::may_name_brokers(request.api_key()) {
            let nodes = self.shared.nodes.snapshot();
            if let Some(plan) = route::admin::configs::plan(request.body()?, &nodes) {
                return self.send_configs(request, plan, &nodes).await;
            }
        }
        let post = Post::of_admin(admin, &mut request)?;
        let on_failure = sluice_cluster::api::describe(request.api_key()).on_failure;
        self.send_whole(request, Dest::Any, post, on_failure).await
    }

    /// A config request whose BROKER/BROKER_LOGGER resources name brokers
    /// (see [`route::admin::configs`]): the refused resources stay behind, a
    /// Sluice node's go to the real broker standing for it under that
    /// broker's id (any broker when no node is named). The client's own
    /// request is kept as the entry's original, to merge the answer in
    /// request order (`rewrite/configs.rs`, from `finish.rs`) or to answer
    /// REQUEST_TIMED_OUT; it is never sent elsewhere.
    async fn send_configs(
        &mut self,
        mut request: Request,
        plan: route::admin::configs::Plan,
        nodes: &[sluice_cluster::topology::ShotoverNode],
    ) -> Result<Option<PendingResponse>, ChainError> {
        let mut real = None;
        if let Some(node) = plan.node {
            if self.shared.view.read().brokers().next().is_none() {
                fatal_only(self.refresh_metadata(None).await)?;
            }
            real = route::admin::configs::real_broker(&self.shared.view.read(), nodes, node);
            if real.is_none() {
                return Ok(Some(synthesized(
                    &mut request,
                    error_codes::REQUEST_TIMED_OUT,
                )?));
            }
        }
        let (api, version) = (request.api_key(), request.api_version());
        let correlation_id = request.correlation_id();
        let body = request.body()?;
        let Some(forwarded) = route::admin::configs::forwarded(body, &plan, real) else {
            let answer = sluice_cluster::rewrite::refused_answer(body, &plan)
                .ok_or(Invariant::NoAnswerForRefused(api))?;
            return Ok(Some(PendingResponse::answering(&request, answer)));
        };
        let client_id = request.header().client_id.clone();
        let part = Request::from_body(api, version, correlation_id, client_id, forwarded);
        let dest = real.map_or(Dest::Any, Dest::Broker);
        if let Some(real) = real {
            debug!(
                "{api:?}: a sluice node's broker resources go to broker {}",
                real.0
            );
        }
        let Some(part) = self.send_part(dest, part).await? else {
            return Ok(None);
        };
        Ok(Some(PendingResponse {
            correlation_id,
            api_key: api,
            api_version: version,
            parts: vec![part],
            combine: Combine::Whole(Box::new(Whole {
                post: Post::Admin {
                    stale_topics: Vec::new(),
                },
                on_failure: OnFailure::Synthesize(error_codes::REQUEST_TIMED_OUT),
                original: request,
            })),
        }))
    }

    /// Group and transaction APIs: the coordinator of their key, looked up
    /// first when unknown.
    async fn send_coordinator(
        &mut self,
        mut request: Request,
        key_type: CoordinatorKeyType,
    ) -> Result<Option<PendingResponse>, ChainError> {
        if let Some((key_type, keys)) = route::keyed::keys(request.body()?)
            && keys.len() > 1
        {
            return self.send_keyed(request, key_type, keys).await;
        }
        let key = route::groups::coordinator_key(request.body()?);
        let Some((key_type, key)) = key.filter(|(t, _)| *t == key_type) else {
            // InitProducerId without a transactional id: any broker.
            let on_failure = OnFailure::RetryElsewhere(error_codes::COORDINATOR_NOT_AVAILABLE);
            return self
                .send_whole(request, Dest::Any, Post::None, on_failure)
                .await;
        };
        let mut coordinator = self.shared.view.read().coordinator(key_type, &key);
        if coordinator.is_none() {
            let found = self
                .find_coordinators(key_type, std::slice::from_ref(&key))
                .await;
            fatal_only(found)?;
            coordinator = self.shared.view.read().coordinator(key_type, &key);
        }
        let Some(coordinator) = coordinator else {
            let code = error_codes::COORDINATOR_NOT_AVAILABLE;
            return Ok(Some(synthesized(&mut request, code)?));
        };
        let post = Post::Coordinator { key_type, key };
        let on_failure = OnFailure::Synthesize(error_codes::NOT_COORDINATOR);
        self.send_whole(request, Dest::Broker(coordinator), post, on_failure)
            .await
    }

    /// A multi-key request (ConsumerGroupDescribe, DescribeTransactions):
    /// whole to the coordinator when every key has the same one, else one
    /// part per coordinator.
    async fn send_keyed(
        &mut self,
        mut request: Request,
        key_type: CoordinatorKeyType,
        keys: Vec<String>,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let unknown: Vec<String> = {
            let view = self.shared.view.read();
            keys.iter()
                .filter(|k| view.coordinator(key_type, k).is_none())
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            fatal_only(self.find_coordinators(key_type, &unknown).await)?;
        }
        let by_coordinator =
            route::keyed::by_coordinator(&*self.shared.view.read(), key_type, &keys);
        let (parts, mut combine) =
            match KeyedCombine::plan(request.body()?, key_type, keys, by_coordinator) {
                KeyedPlan::Whole {
                    coordinator,
                    post,
                    on_failure,
                } => {
                    let dest = Dest::Broker(coordinator);
                    return self.send_whole(request, dest, post, on_failure).await;
                }
                KeyedPlan::Parts { parts, combine } => (parts, combine),
            };
        let (api, version) = (request.api_key(), request.api_version());
        let correlation_id = request.correlation_id();
        let client_id = request.header().client_id.clone();
        let mut sent = Vec::new();
        let mut part_keys = Vec::new();
        for ((coordinator, body), keys) in parts
            .into_iter()
            .zip(std::mem::take(&mut combine.part_keys))
        {
            let part = Request::from_body(api, version, correlation_id, client_id.clone(), body);
            if let Some(part) = self.send_part(Dest::Broker(coordinator), part).await? {
                sent.push(part);
                part_keys.push(keys);
            }
        }
        combine.part_keys = part_keys;
        Ok(Some(PendingResponse {
            correlation_id,
            api_key: api,
            api_version: version,
            parts: sent,
            combine: Combine::Keyed(combine),
        }))
    }

    /// The split APIs: by leader, by coordinator, or to every broker.
    async fn send_split(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let version = request.api_version();
        let (split, heads) = {
            let body = request.body()?;
            let heads = idempotent_heads(body, version);
            let held = self.produce_gaps.held(&heads, super::now());
            let split = self.split_with_refresh(body, version, &held).await?;
            (split, heads)
        };
        if !heads.is_empty() {
            let opened = self
                .produce_gaps
                .after_split(&heads, &split.unroutable, super::now());
            for (topic, partition, head) in opened {
                debug!(
                    ?topic,
                    partition,
                    ?head,
                    "an idempotent batch answered unsent: later ones wait for its resend"
                );
            }
        }
        self.send_split_parts(request, split, false, &heads).await
    }

    /// Opens a gap for the idempotent batches (`heads`) of a part that failed
    /// before any broker could have read it.
    fn note_unsent(&mut self, part: Option<&Part>, heads: &[(TopicRef, i32, BatchHead)]) {
        let unsent = part
            .and_then(Part::error)
            .is_some_and(|e| !e.request_may_have_been_sent());
        if !unsent {
            return;
        }
        let now = super::now();
        for (topic, partition, head) in heads {
            debug!(
                ?topic,
                partition,
                ?head,
                "an idempotent batch failed unsent: later ones wait for its resend"
            );
            self.produce_gaps
                .failed_unsent(topic, *partition, *head, now);
        }
    }

    /// Sends the parts of `split` (the client's own bytes when it passes
    /// through; `strip_rack`: a Fetch whose `rack_id` must be cleared never
    /// does).
    pub(super) async fn send_split_parts(
        &mut self,
        request: Request,
        split: SplitRequest,
        strip_rack: bool,
        heads: &[(TopicRef, i32, BatchHead)],
    ) -> Result<Option<PendingResponse>, ChainError> {
        let (api, version) = (request.api_key(), request.api_version());
        let correlation_id = request.correlation_id();
        let client_id = request.header().client_id.clone();
        let expects_response = request.expects_response();
        let single = split.parts.len() == 1 && split.unroutable.is_empty();
        if !split.unroutable.is_empty() {
            debug!(api = ?api, correlation_id, unroutable = ?split.unroutable, "answering what no broker is routed for with an error");
        }
        let mut parts = Vec::with_capacity(split.parts.len());
        match split.passthrough().filter(|_| !strip_rack) {
            Some(broker) => {
                let part = self.send_part(Dest::Broker(broker), request).await?;
                self.note_unsent(part.as_ref(), heads);
                parts.extend(part);
            }
            None => {
                for (broker, mut body) in split.parts {
                    if let RequestKind::Fetch(fetch) = &mut body {
                        fetch.rack_id = StrBytes::default();
                    }
                    let part_heads = if heads.is_empty() {
                        Vec::new()
                    } else {
                        idempotent_heads(&body, version)
                    };
                    let part =
                        Request::from_body(api, version, correlation_id, client_id.clone(), body);
                    let part = self.send_part(Dest::Broker(broker), part).await?;
                    self.note_unsent(part.as_ref(), &part_heads);
                    parts.extend(part);
                }
            }
        }
        if !expects_response {
            return Ok(None);
        }
        Ok(Some(PendingResponse {
            correlation_id,
            api_key: api,
            api_version: version,
            parts,
            combine: Combine::Split(SplitCombine {
                plan: split.plan,
                single,
            }),
        }))
    }

    /// Splits `body`; when something is unroutable, fills the view (Metadata
    /// for partitions without a leader or when no broker is known,
    /// FindCoordinator for groups) and splits once more.
    pub(super) async fn split_with_refresh(
        &mut self,
        body: &RequestKind,
        version: i16,
        held: &[(TopicRef, i32)],
    ) -> Result<SplitRequest, ChainError> {
        let split = self.split_now(body, version, held)?;
        if split.unroutable.is_empty() {
            return Ok(split);
        }
        let refresh = route::Refresh::for_unroutable(&split.unroutable, held);
        match &refresh.metadata {
            Some(route::MetadataRefresh::Topics(topics)) => {
                fatal_only(self.refresh_metadata(Some(topics)).await)?;
            }
            Some(route::MetadataRefresh::Brokers) => {
                fatal_only(self.refresh_metadata(None).await)?;
            }
            None => {}
        }
        if !refresh.groups.is_empty() {
            let found = self
                .find_coordinators(CoordinatorKeyType::Group, &refresh.groups)
                .await;
            fatal_only(found)?;
        }
        self.split_now(body, version, held)
    }

    /// Splits `body` by the view as it is, answering the partitions in
    /// `held` unsent (see [`sluice_cluster::route::produce_order`]).
    pub(super) fn split_now(
        &self,
        body: &RequestKind,
        version: i16,
        held: &[(TopicRef, i32)],
    ) -> Result<SplitRequest, ChainError> {
        let view = self.shared.view.read();
        let now = super::now();
        let routing = RackRouting {
            view: &view,
            rack: self.shared.nodes.local_rack(),
            now,
            usable: |id: BrokerId| !self.shared.is_suspect_id(&view, id),
        };
        // With no node up (which cannot happen: the local node is up while
        // it is not leaving) the Rewriter fails and everything is forwarded.
        let leaving = self.shared.nodes.leaving_for(now).is_some();
        let nodes = if goes_where_shown(body, leaving) {
            self.shared.nodes.snapshot()
        } else {
            Vec::new()
        };
        let split = match Rewriter::new(&view, &nodes) {
            Ok(shown) => {
                let here = ShownHere {
                    routing: &routing,
                    shown: &shown,
                    local: self.shared.nodes.local_id(),
                };
                split_request(
                    body,
                    version,
                    &Holding {
                        routing: &here,
                        held,
                    },
                )
            }
            Err(_) => split_request(
                body,
                version,
                &Holding {
                    routing: &routing,
                    held,
                },
            ),
        };
        split.ok_or_else(|| Invariant::NotSplittable.into())
    }
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
pub(super) fn fatal_only(result: Result<(), InternalRequestError>) -> Result<(), ChainError> {
    match result.map_err(InternalRequestError::into_fatal) {
        Err(Some(fatal)) => Err(fatal),
        _ => Ok(()),
    }
}

/// An entry answered by Sluice right away with an error built from the
/// request (e.g. no coordinator could be found), counted as synthesized.
fn synthesized(request: &mut Request, code: ErrorCode) -> Result<PendingResponse, ChainError> {
    let (api, version) = (request.api_key(), request.api_version());
    let body = route::failure_answer(api, request.body()?, version, code)
        .ok_or(Invariant::NoPlaceForError { api, version, code })?;
    metrics::counter!(names::SYNTHESIZED_ERROR_RESPONSES, "api" => format!("{api:?}")).increment(1);
    Ok(PendingResponse::answering(request, body))
}
