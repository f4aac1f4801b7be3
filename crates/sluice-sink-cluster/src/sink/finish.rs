//! The response half of the sink: turn the oldest entry's parts into the
//! client's answer.
//!
//! - A whole request's answer is post-processed (recorded in the view and
//!   rewritten for the meta APIs; the coordinator forgotten on
//!   NOT_COORDINATOR; stale topics forgotten after admin writes). A read whose
//!   broker failed is sent once more to another broker first (see
//!   [`KafkaSinkCluster::retry_head_elsewhere`]).
//! - A split request's answers are merged by the split module; a single
//!   part's answer passes through undecoded (Fetch: unless the header walk
//!   finds a partition error). Leader hints are rewritten only when the answer
//!   carries a partition error; staleness is recorded from the error codes.
//!   Fan-out answers (ListGroups, ListTransactions, DescribeLogDirs) are
//!   always decoded: each broker's is first cut down to what the local node
//!   is shown to own (`rewrite/fan_out.rs`), then merged.
//! - A part that failed before its connection wrote it (the broker never saw
//!   it: [`BrokerError::NotSent`]) is sent once more on a reopened connection
//!   to the same broker, awaited in place (the oldest entry stays at the
//!   front, so answers keep request order); see
//!   [`KafkaSinkCluster::resend_unsent_parts`].
//! - A failed part is logged with its broker, its connection is dropped (it
//!   closed), and it is answered with the API's retriable error, counted in
//!   `sluice_synthesized_error_responses_total`. Where the API has no place
//!   for an error, the broker error is returned and the client connection
//!   closes with it as the logged reason.

use sluice_broker::{BrokerAddress, BrokerError};
use sluice_chain::ChainError;
use sluice_codec::header::response_body_offset;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, CodecError, Request, RequestKind, Response, ResponseKind};
use sluice_error::{ErrorClass, ErrorSide};
use sluice_metrics::names;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::KafkaSinkCluster;
use crate::close::{CloseError, Invariant};
use crate::pending::{Combine, KeyedCombine, Part, PendingResponse, Post, SplitCombine, Whole};
use crate::pool::health::Verdict;
use crate::pool::{ConnError, Target};
use sluice_cluster::api::{Family, describe};
use sluice_cluster::error_codes::{self, ErrorCode};
use sluice_cluster::rewrite::{RewriteError, Rewriter};
use sluice_cluster::route::keyed::KeyedResult;
use sluice_cluster::route::{self, OnFailure, Stale, produce_fetch, produce_order};
use sluice_cluster::split::PartResult;
use sluice_cluster::split::dispatch::merge_responses;
use sluice_cluster::topology::{BrokerId, Staleness, staleness};

impl KafkaSinkCluster {
    /// Sends again, once each, the parts of the oldest entry that failed
    /// before their connection wrote them (the connection had failed: the
    /// broker never saw them, so sending them again cannot apply them
    /// twice), on a reopened connection to the same broker. Returns true when
    /// one was sent again (the caller waits again). Authentication requests
    /// are never sent again: they belong to their connection. Cancel-safe:
    /// a part is replaced only once its new request is queued, and recorded
    /// as resent then. `Err`: the client cannot be served any more.
    pub(super) async fn resend_unsent_parts(&mut self) -> Result<bool, ChainError> {
        let Some(head) = self.pending.front() else {
            return Ok(false);
        };
        if matches!(
            head.api_key,
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        ) {
            return Ok(false);
        }
        let unsent: Vec<(usize, Target, Request)> = head
            .parts
            .iter()
            .enumerate()
            .filter(|(index, part)| {
                part.target != Target::Auth && !self.head_resent.contains(index)
            })
            .filter_map(|(index, part)| {
                let error = part.error()?;
                let resendable = !error.request_may_have_been_sent() && error.retriable();
                let request = error.unsent_request().filter(|_| resendable)?;
                Some((index, part.target, request))
            })
            .collect();
        if unsent.is_empty() {
            return Ok(false);
        }
        for (index, target, mut request) in unsent {
            // A resent batch is the one its partition's gap waits for.
            let version = request.api_version();
            if request.api_key() == ApiKey::Produce
                && let Ok(RequestKind::Produce(p)) = request.body()
            {
                for (topic, partition, _) in produce_order::produce_heads(p, version) {
                    self.produce_gaps.forwarded(&topic, partition);
                }
            }
            let part = self.resend(target, request).await?;
            if let Some(slot) = self
                .pending
                .front_mut()
                .and_then(|head| head.parts.get_mut(index))
            {
                *slot = part;
            }
            self.head_resent.push(index);
        }
        Ok(true)
    }

    /// Sends `request`, which its connection to `target` never wrote, on a
    /// reopened connection there (for the bootstrap connection, which serves
    /// requests any broker can serve: on any connection).
    async fn resend(&mut self, target: Target, request: Request) -> Result<Part, ChainError> {
        let api = request.api_key();
        self.connections.discard(target);
        let connection = match target {
            Target::Broker(id) => self.connections.broker(id).await.map(|c| (target, c)),
            Target::Bootstrap | Target::Auth => self.connections.any(None).await,
        };
        let (target, conn) = match connection {
            Ok(found) => found,
            Err(ConnError::Broker(e)) => return Ok(Part::failed(target, e)),
            Err(ConnError::Fatal(e)) => {
                warn!(api = ?api, "closing the client: {e}");
                return Err(e);
            }
        };
        let broker = conn.address().clone();
        debug!(
            broker = %broker,
            api = ?api,
            "sending again a request its failed broker connection never wrote"
        );
        Ok(match conn.send(request).await {
            Ok(Some(receiver)) => Part::sent(target, broker, receiver),
            // A request that expects no answer is never pending.
            Ok(None) => Part::failed(target, BrokerError::Shutdown { broker }),
            Err(e) => Part::failed(target, e),
        })
    }

    /// If the oldest entry is a read whose broker failed and that was not
    /// retried yet, sends it once more to another broker and returns true
    /// (the caller waits again). Cancel-safe: the entry changes only once the
    /// new request is queued. `Err`: the client cannot be served any more.
    pub(super) async fn retry_head_elsewhere(&mut self) -> Result<bool, ChainError> {
        let Some(head) = self.pending.front() else {
            return Ok(false);
        };
        let Combine::Whole(whole) = &head.combine else {
            return Ok(false);
        };
        let retriable = !whole.retried && matches!(whole.on_failure, OnFailure::RetryElsewhere(_));
        let Some((part, error)) = head.parts.first().and_then(|p| Some((p, p.error()?))) else {
            return Ok(false);
        };
        if !retriable {
            return Ok(false);
        }
        let failed = part.target;
        let what = "broker failed a request any broker can serve, retrying it on another broker";
        self.log_failure(part.broker.as_ref(), head.api_key, what, error);
        let request = whole.original.clone();
        self.connections.discard(failed);
        let part = match self.connections.any(Some(failed)).await {
            Ok((target, conn)) => {
                let broker = conn.address().clone();
                match conn.send(request).await {
                    Ok(Some(receiver)) => Part::sent(target, broker, receiver),
                    Ok(None) => return Ok(false),
                    Err(e) => Part::failed(target, e),
                }
            }
            Err(ConnError::Broker(e)) => Part::failed(failed, e),
            Err(ConnError::Fatal(e)) => return Err(e),
        };
        if let Some(head) = self.pending.front_mut() {
            head.parts = vec![part];
            if let Combine::Whole(whole) = &mut head.combine {
                whole.retried = true;
            }
        }
        Ok(true)
    }

    /// The client's answer for a finished entry.
    pub(super) fn finish(&mut self, entry: PendingResponse) -> Result<Response, ChainError> {
        let PendingResponse {
            correlation_id,
            api_key,
            api_version,
            parts,
            combine,
        } = entry;
        let response = match combine {
            Combine::Ready(response) => *response,
            Combine::Whole(whole) => {
                let part = parts
                    .into_iter()
                    .next()
                    .ok_or_else(|| ChainError::from(Invariant::WholeWithoutPart(api_key)))?;
                self.finish_whole(*whole, part)?
            }
            Combine::Split(split) => {
                self.finish_split(api_key, api_version, correlation_id, split, parts)?
            }
            Combine::Keyed(keyed) => {
                self.finish_keyed(api_key, api_version, correlation_id, *keyed, parts)?
            }
            Combine::Fetch(fetch) => {
                self.finish_fetch(api_version, correlation_id, *fetch, parts)?
            }
            Combine::Share(share) => {
                self.finish_share(api_key, api_version, correlation_id, *share, parts)?
            }
        };
        let mut response = sluice_cluster::client_auth::in_client_version(response, api_version)?;
        response.set_correlation_id(correlation_id);
        Ok(response)
    }

    fn finish_whole(&mut self, whole: Whole, mut part: Part) -> Result<Response, ChainError> {
        let Whole {
            post,
            on_failure,
            mut original,
            ..
        } = whole;
        let error = match part.take_result() {
            Some(Ok(mut response)) => {
                // Only a part that was sent has an answer.
                let Some(broker) = &part.broker else {
                    return Err(Invariant::AnswerWithoutBroker(original.api_key()).into());
                };
                self.post_process(&mut response, &post, broker, &mut original)?;
                return Ok(response);
            }
            Some(Err(error)) => error,
            // Combined only once every part is done, and only once.
            None => return Err(Invariant::PartNotDone(original.api_key()).into()),
        };
        let (api, version) = (original.api_key(), original.api_version());
        self.part_failed(part.target, part.broker.as_ref(), api, &error);
        let code = match on_failure {
            OnFailure::Synthesize(code)
            | OnFailure::RetryElsewhere(code)
            | OnFailure::SplitError(code) => code,
            OnFailure::Close => return Err(ChainError::Broker(error)),
        };
        let body = original
            .body()
            .ok()
            .and_then(|request| route::failure_answer(api, request, version, code));
        let Some(body) = body else {
            return Err(ChainError::Broker(error));
        };
        count_synthesized(api);
        if let Post::Coordinator { key_type, key } = &post {
            self.forget(&[Stale::Coordinator(*key_type, key.clone())]);
        }
        Ok(Response::from_body(
            api,
            version,
            original.correlation_id(),
            body,
        ))
    }

    fn finish_split(
        &mut self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        split: SplitCombine,
        mut parts: Vec<Part>,
    ) -> Result<Response, ChainError> {
        let SplitCombine { plan, single } = split;
        let descriptor = describe(api);
        let filtered = descriptor.filtered_after_fan_out;
        if single && !filtered && parts.len() == 1 && parts.iter().all(|p| p.error().is_none()) {
            let part = parts.first_mut();
            if let Some(Some(Ok(mut response))) = part.map(Part::take_result) {
                let broker = parts.first().and_then(|p| p.broker.clone());
                self.post_split(&mut response, true, broker.as_ref())?;
                return Ok(response);
            }
        }
        let code = match descriptor.on_failure {
            OnFailure::SplitError(code) => code,
            _ => error_codes::REQUEST_TIMED_OUT,
        };
        let mut results = Vec::with_capacity(parts.len());
        let brokers: Vec<BrokerId> = parts.iter().map(part_broker).collect();
        for mut part in parts {
            let result = match part.take_result() {
                Some(Ok(response)) => match response.into_body() {
                    Ok(body) => PartResult::Response(body),
                    Err(e) => {
                        warn!(broker = %part.broker_label(), "undecodable {api:?} answer, answering its part with error {code}: {e}");
                        count_synthesized(api);
                        PartResult::Failed { error_code: code }
                    }
                },
                Some(Err(error)) => {
                    self.part_failed(part.target, part.broker.as_ref(), api, &error);
                    count_synthesized(api);
                    PartResult::Failed { error_code: code }
                }
                None => PartResult::Failed { error_code: code },
            };
            results.push(result);
        }
        if filtered {
            self.filter_fan_out(api, &brokers, &mut results)?;
        }
        let merged = merge_responses(plan, results)
            .map_err(|e| CloseError::Merge(std::sync::Arc::new(e)))?;
        let mut response = Response::from_body(api, version, correlation_id, merged);
        self.post_split(&mut response, false, None)?;
        Ok(response)
    }

    fn finish_keyed(
        &mut self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        keyed: KeyedCombine,
        parts: Vec<Part>,
    ) -> Result<Response, ChainError> {
        let KeyedCombine {
            request,
            order,
            part_keys,
            unroutable,
        } = keyed;
        let mut results = Vec::with_capacity(parts.len() + 1);
        for (mut part, keys) in parts.into_iter().zip(part_keys) {
            let failed = |e: String| {
                (
                    e,
                    KeyedResult::Failed(keys.clone(), error_codes::NOT_COORDINATOR),
                )
            };
            let outcome = match part.take_result() {
                Some(Ok(response)) => match response.into_body() {
                    Ok(body) => Ok(KeyedResult::Answer(body)),
                    Err(e) => Err(failed(e.to_string())),
                },
                Some(Err(error)) => {
                    self.part_failed(part.target, part.broker.as_ref(), api, &error);
                    Err(failed(error.to_string()))
                }
                None => Err(failed("no answer".into())),
            };
            results.push(match outcome {
                Ok(result) => result,
                Err((reason, result)) => {
                    debug!(broker = %part.broker_label(), "{api:?} part failed: {reason}");
                    count_synthesized(api);
                    result
                }
            });
        }
        if !unroutable.is_empty() {
            results.push(KeyedResult::Failed(
                unroutable,
                error_codes::COORDINATOR_NOT_AVAILABLE,
            ));
        }
        let merged = route::keyed::merge(&request, results, &order)
            .ok_or(Invariant::NotMergeableByKey(api))?;
        self.forget(&route::keyed::stale(&merged));
        Ok(Response::from_body(api, version, correlation_id, merged))
    }

    /// Logs a failed part (rate-limited per broker) and drops its (closed)
    /// connection.
    pub(super) fn part_failed(
        &mut self,
        target: Target,
        broker: Option<&BrokerAddress>,
        api: ApiKey,
        e: &BrokerError,
    ) {
        let what = "broker request failed, answering it with a retriable error";
        self.log_failure(broker, api, what, e);
        self.connections.discard(target);
    }

    /// Logs a failed request: at WARN at most once per broker per
    /// `WARN_EVERY` (saying how many were logged at DEBUG in between), else
    /// at DEBUG (see `pool/health.rs`).
    /// `broker`: `None` when the request found no broker address (the
    /// error says what it looked for).
    fn log_failure(
        &self,
        broker: Option<&BrokerAddress>,
        api: ApiKey,
        what: &str,
        e: &BrokerError,
    ) {
        let now = Instant::now();
        let (verdict, shown, broker_id) = match broker {
            Some(broker) => (
                self.shared.health.failed(broker, now),
                broker.to_string(),
                broker.id,
            ),
            None => {
                let target = e.target().to_string();
                let id = e.unaddressed().and_then(|u| u.broker_id());
                (
                    self.shared.health.failed_unaddressed(target.clone(), now),
                    target,
                    id,
                )
            }
        };
        match verdict {
            Verdict::Warn { quieted: 0 } => {
                warn!(broker = %shown, broker_id, api = ?api, "{what}: {e}");
            }
            Verdict::Warn { quieted } => warn!(
                broker = %shown,
                broker_id,
                api = ?api,
                quieted,
                "{what}: {e} ({quieted} more failed request(s) to this broker since its last warning, logged at debug)"
            ),
            Verdict::Quiet => {
                debug!(broker = %shown, broker_id, api = ?api, "{what}: {e}");
            }
        }
    }

    /// Records staleness from a split API's answer and rewrites leader hints
    /// when it carries a partition error. `raw`: the answer came through
    /// undecoded.
    pub(super) fn post_split(
        &mut self,
        response: &mut Response,
        raw: bool,
        broker: Option<&BrokerAddress>,
    ) -> Result<(), ChainError> {
        let (api, version) = (response.api_key(), response.api_version());
        // A clean answer passed through (no partition error, no hint) has
        // nothing to record or rewrite: it is forwarded undecoded.
        let scan = match api {
            ApiKey::Fetch => Some(produce_fetch::fetch_may_need_rewrite as fn(&[u8], i16) -> bool),
            ApiKey::Produce => {
                Some(produce_fetch::produce_may_need_rewrite as fn(&[u8], i16) -> bool)
            }
            _ => None,
        };
        if let Some(scan) = scan.filter(|_| raw)
            && !raw_may_need_rewrite(response, scan)
        {
            return Ok(());
        }
        let decode_error = |e: CodecError| protocol_error(broker, api, e);
        if api == ApiKey::Fetch {
            self.post_follower_fetch(response, broker)
                .map_err(decode_error)?;
        }
        let descriptor = describe(api);
        let (stale, needs_rewrite) = match descriptor.family {
            Family::ByLeader => {
                let body = response.body().map_err(decode_error)?;
                let needs = match body {
                    ResponseKind::Produce(p) => {
                        let needs = produce_fetch::produce_needs_rewrite(p);
                        if needs && tracing::enabled!(tracing::Level::DEBUG) {
                            let errors: Vec<(String, i32, i16)> = p
                                .responses
                                .iter()
                                .flat_map(|t| {
                                    t.partition_responses
                                        .iter()
                                        .filter(|p| p.error_code != 0)
                                        .map(move |p| (t.name.to_string(), p.index, p.error_code))
                                })
                                .collect();
                            debug!(broker = ?broker.map(ToString::to_string), ?errors, "a broker answered a Produce with partition errors");
                        }
                        needs
                    }
                    ResponseKind::Fetch(f) => produce_fetch::fetch_needs_rewrite(f),
                    _ => false,
                };
                (produce_fetch::stale_partitions(body, version), needs)
            }
            Family::ByCoordinator => {
                let body = response.body().map_err(decode_error)?;
                (route::groups::stale_groups(body), false)
            }
            _ => (Vec::new(), false),
        };
        self.forget(&stale);
        if needs_rewrite && descriptor.may_carry_leader_hints(version) {
            let nodes = self.shared.nodes.snapshot();
            let view = self.shared.view.read();
            Rewriter::new(&view, &nodes)
                .and_then(|r| r.rewrite_leader_hints(response))
                .map_err(|e| rewrite_error(broker, api, e))?;
        }
        Ok(())
    }

    /// Cuts each broker's fan-out answer down to what the local node is
    /// shown to own (see `rewrite/fan_out.rs`): `results[i]` is `brokers[i]`'s.
    fn filter_fan_out(
        &self,
        api: ApiKey,
        brokers: &[BrokerId],
        results: &mut [PartResult<ResponseKind>],
    ) -> Result<(), ChainError> {
        let nodes = self.shared.nodes.snapshot();
        let view = self.shared.view.read();
        let rewriter = Rewriter::new(&view, &nodes).map_err(|e| rewrite_error(None, api, e))?;
        rewriter.fan_out(self.shared.nodes.local_id(), brokers, results);
        Ok(())
    }

    /// Post-processes a whole request's answer (`original`: the client's
    /// request, for admin answers merged with what Sluice refused).
    fn post_process(
        &mut self,
        response: &mut Response,
        post: &Post,
        broker: &BrokerAddress,
        original: &mut Request,
    ) -> Result<(), ChainError> {
        let api = response.api_key();
        let decode_error = |e: CodecError| protocol_error(Some(broker), api, e);
        match post {
            Post::None => Ok(()),
            Post::ApiVersions => self.post_api_versions(response, broker),
            Post::Metadata => {
                let version = response.api_version();
                if let ResponseKind::Metadata(m) = response.body().map_err(decode_error)? {
                    let applied = self.shared.view.write().apply_metadata(version, m);
                    super::internal::log_applied(&applied);
                    self.connections.on_metadata(&applied);
                }
                self.rewrite(response, None, broker)
            }
            Post::FindCoordinator { key_type, key } => {
                let version = response.api_version();
                if let (Some(key_type), ResponseKind::FindCoordinator(f)) =
                    (key_type, response.body().map_err(decode_error)?)
                {
                    self.shared.view.write().apply_find_coordinator(
                        version,
                        *key_type,
                        key.as_ref(),
                        f,
                    );
                }
                self.rewrite(response, key.as_ref().map(StrBytes::as_str), broker)
            }
            Post::DescribeCluster => self.rewrite(response, None, broker),
            Post::Coordinator { key_type, key } => {
                let body = response.body().map_err(decode_error)?;
                let moved = route::groups::response_error_codes(body)
                    .into_iter()
                    .any(|code| {
                        staleness(ErrorCode::from_wire(code)) == Some(Staleness::Coordinator)
                    });
                if moved {
                    debug!(key = %key, "the coordinator moved");
                    self.forget(&[Stale::Coordinator(*key_type, key.clone())]);
                }
                Ok(())
            }
            Post::Sasl(step) => {
                self.settle_answer(*step, response);
                Ok(())
            }
            Post::Admin { stale_topics } => {
                let mut stale: Vec<Stale> =
                    stale_topics.iter().cloned().map(Stale::Topic).collect();
                if route::admin::has_top_level_error(api) {
                    let body = response.body().map_err(decode_error)?;
                    let code = route::admin::top_level_error(body).unwrap_or(0);
                    stale.extend(route::top_level_staleness(ErrorCode::from_wire(code)));
                }
                self.forget(&stale);
                if describe(api).rewritten {
                    return self.rewrite(response, None, broker);
                }
                let nodes = self.shared.nodes.snapshot();
                sluice_cluster::rewrite::rewrite_configs_answer(response, original, &nodes)
                    .map(drop)
                    .map_err(|e| rewrite_error(Some(broker), api, e))
            }
        }
    }

    /// Replaces a broker's ApiVersions answer with the cluster-wide one.
    fn post_api_versions(
        &mut self,
        response: &mut Response,
        broker: &BrokerAddress,
    ) -> Result<(), ChainError> {
        let (api, version) = (response.api_key(), response.api_version());
        let fresh = match response.body() {
            Ok(ResponseKind::ApiVersions(v)) if v.error_code == 0 => v.clone(),
            // An error answer (or one Sluice cannot read) goes back as it came.
            _ => return Ok(()),
        };
        let others = self.shared.api_versions_of_others(broker);
        let answer = route::meta::client_api_versions(&fresh, &others);
        self.shared.remember_api_versions(broker, fresh);
        *response = Response::from_body(
            api,
            version,
            response.correlation_id(),
            ResponseKind::ApiVersions(answer),
        );
        Ok(())
    }

    /// Rewrites a Metadata, FindCoordinator or DescribeCluster answer.
    fn rewrite(
        &self,
        response: &mut Response,
        key: Option<&str>,
        broker: &BrokerAddress,
    ) -> Result<(), ChainError> {
        let nodes = self.shared.nodes.snapshot();
        let view = self.shared.view.read();
        Rewriter::new(&view, &nodes)
            .and_then(|r| r.rewrite_response(response, key))
            .map(drop)
            .map_err(|e| rewrite_error(Some(broker), response.api_key(), e))
    }

    /// Forgets what `stale` names from the view.
    pub(super) fn forget(&self, stale: &[Stale]) {
        if stale.is_empty() {
            return;
        }
        let forgotten = route::forget(&mut self.shared.view.write(), stale);
        if forgotten.rebootstrap_required {
            warn!(
                "a broker answered REBOOTSTRAP_REQUIRED; topics are refreshed as clients touch them"
            );
        }
        if forgotten.entries > 0 {
            debug!(
                forgotten = forgotten.entries,
                "forgot stale routing entries"
            );
        }
    }
}

/// The broker a split part went to (-1, which no view names, if unknown).
fn part_broker(part: &Part) -> BrokerId {
    match part.target {
        Target::Broker(id) => id,
        Target::Bootstrap | Target::Auth => {
            BrokerId(part.broker.as_ref().and_then(|b| b.id).unwrap_or(-1))
        }
    }
}

/// Whether an undecoded Fetch or Produce answer may carry something to
/// rewrite or record, as `scan` (the api's walk of the body) says.
fn raw_may_need_rewrite(response: &Response, scan: fn(&[u8], i16) -> bool) -> bool {
    let Some(frame) = response.raw_frame() else {
        return true;
    };
    let (api, version) = (response.api_key(), response.api_version());
    match response_body_offset(frame, api, version) {
        Ok(offset) => scan(frame.get(offset..).unwrap_or_default(), version),
        Err(_) => true,
    }
}

pub(super) fn count_synthesized(api: ApiKey) {
    metrics::counter!(names::SYNTHESIZED_ERROR_RESPONSES, "api" => format!("{api:?}")).increment(1);
}

/// An answer that cannot be decoded or rewritten: a protocol error of the
/// broker that sent it, or, when Sluice merged it from several brokers'
/// answers (`broker` is `None`), of that merged answer.
fn protocol_error(broker: Option<&BrokerAddress>, api: ApiKey, source: CodecError) -> ChainError {
    match broker {
        Some(broker) => ChainError::Broker(BrokerError::Protocol {
            broker: broker.clone(),
            reason: format!("{api:?} answer: {source}"),
        }),
        None => ChainError::sink(MergedAnswerError { api, source }),
    }
}

/// An answer Sluice merged from several brokers' answers that cannot be
/// decoded or rewritten: no one broker sent it. Classified as the broker
/// protocol error it stands for.
#[derive(Debug, thiserror::Error)]
#[error("{api:?} answer merged from several brokers: {source}")]
struct MergedAnswerError {
    api: ApiKey,
    source: CodecError,
}

impl ErrorClass for MergedAnswerError {
    fn side(&self) -> ErrorSide {
        ErrorSide::Broker
    }

    fn retriable(&self) -> bool {
        false
    }
}

pub(super) fn rewrite_error(
    broker: Option<&BrokerAddress>,
    api: ApiKey,
    e: RewriteError,
) -> ChainError {
    match e {
        RewriteError::NoSluiceNodeUp => CloseError::NoSluiceNodeUp.into(),
        RewriteError::Codec(c) => protocol_error(broker, api, c),
    }
}
