//! The response half of the sink: does what the core decides for the
//! oldest owed answer ([`sluice_cluster::exchange`]).
//!
//! - Parts their failed connections never wrote are sent again, in place,
//!   on reopened connections to the same brokers; a whole read whose broker
//!   failed is sent to another broker. The oldest entry stays at the front
//!   meanwhile, so answers keep request order.
//! - The parts' results are taken out and handed to the core, which
//!   combines them; what it says is stale is forgotten from the view, the
//!   answers it synthesized are counted in
//!   `sluice_synthesized_error_responses_total`, and a whole answer is
//!   post-processed as its [`Post`] says (recorded in the view, rewritten,
//!   settled in the client's authentication).
//! - A failed part is logged with its broker (rate-limited, see
//!   `health.rs`) and its (closed) connection dropped. Where the API
//!   has no place for an error, the broker error is returned and the client
//!   connection closes with it as the logged reason.

use std::sync::Arc;

use sluice_broker::{BrokerAddress, BrokerError};
use sluice_chain::ChainError;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, CodecError, Response, ResponseKind};
use sluice_error::{ErrorClass, ErrorSide};
use sluice_metrics::names;
use tracing::{debug, warn};

use super::KafkaSinkCluster;
use crate::close::{CloseError, Invariant};
use crate::pending::{Combine, Part, PendingResponse, Post, SplitCombine, Whole};
use crate::pool::{ConnError, Target};
use sluice_cluster::exchange::{self, CombineError, Done, Event, NoAnswer, PartAnswer, Step};
use sluice_cluster::rewrite::RewriteError;
use sluice_cluster::route::{self, Stale};
use sluice_cluster::topology::BrokerId;

impl KafkaSinkCluster {
    /// Does what the core says once the oldest entry's parts stopped
    /// waiting: sends again, once each, the parts their failed connections
    /// never wrote (the broker never saw them, so they cannot apply twice),
    /// or sends a whole read whose broker failed to another broker. Returns
    /// true when the caller waits again. Cancel-safe: a part is replaced,
    /// and recorded as tried, only once its new request is queued. `Err`:
    /// the client cannot be served any more.
    pub(super) async fn try_head_again(&mut self) -> Result<bool, ChainError> {
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
            self.connections.discard(target);
            let connection = match target {
                Target::Broker(id) => self.connections.broker(id).await.map(|c| (target, c)),
                // The bootstrap connection serves what any broker can.
                Target::Bootstrap | Target::Auth => self.connections.any(None).await,
            };
            let part = match connection {
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
            };
            if let Some(slot) = self
                .pending
                .front_mut()
                .and_then(|head| head.parts.get_mut(index))
            {
                *slot = part;
            }
            self.tries.on(Event::<Part>::Resent(index));
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
            self.shared
                .health
                .log_failure(part.broker.as_ref(), api, what, error);
        }
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
        }
        self.tries.on(Event::<Part>::RetriedElsewhere);
        Ok(true)
    }

    /// The client's answer for a finished entry.
    pub(super) fn finish(&mut self, entry: PendingResponse) -> Result<Response, ChainError> {
        let PendingResponse {
            correlation_id,
            api_key,
            api_version,
            mut parts,
            combine,
        } = entry;
        let header = (api_key, api_version, correlation_id);
        let response = match combine {
            Combine::Ready(response) => *response,
            Combine::Whole(whole) => {
                let part = parts
                    .into_iter()
                    .next()
                    .ok_or_else(|| ChainError::from(Invariant::WholeWithoutPart(api_key)))?;
                self.finish_whole(*whole, part)?
            }
            Combine::Split(split) => self.finish_split(header, split, parts)?,
            Combine::Keyed(keyed) => {
                let answers = self.answers(api_key, &mut parts);
                let done = keyed
                    .merge(header, answers)
                    .map_err(|e| combine_error(api_key, e))?;
                self.done(api_key, done, &parts)
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

    fn finish_whole(&mut self, mut whole: Whole, mut part: Part) -> Result<Response, ChainError> {
        let api = whole.original.api_key();
        let error = match part.take_result() {
            Some(Ok(mut response)) => {
                // Only a part that was sent has an answer.
                let Some(broker) = &part.broker else {
                    return Err(Invariant::AnswerWithoutBroker(api).into());
                };
                self.post_process(&mut response, &mut whole, broker)?;
                return Ok(response);
            }
            Some(Err(error)) => error,
            // Combined only once every part is done, and only once.
            None => return Err(Invariant::PartNotDone(api).into()),
        };
        self.part_failed(part.target, part.broker.as_ref(), api, &error);
        match whole.failure() {
            Some(done) => Ok(self.done(api, done, &[])),
            None => Err(ChainError::Broker(error)),
        }
    }

    fn finish_split(
        &mut self,
        header: (ApiKey, i16, i32),
        split: SplitCombine,
        mut parts: Vec<Part>,
    ) -> Result<Response, ChainError> {
        let api = header.0;
        if split.passes_through(api, &parts)
            && let Some(Some(Ok(mut response))) = parts.first_mut().map(Part::take_result)
        {
            let broker = parts.first().and_then(|p| p.broker.clone());
            self.post_split(&mut response, true, broker.as_ref())?;
            return Ok(response);
        }
        let answers = self.answers(api, &mut parts);
        let done = split
            .merge(header, answers, |results| {
                let brokers: Vec<BrokerId> = parts.iter().map(part_broker).collect();
                self.shared.cut_fan_out(&brokers, results)
            })
            .map_err(|e| combine_error(api, e))?;
        let mut response = self.done(api, done, &parts);
        self.post_split(&mut response, false, None)?;
        Ok(response)
    }

    /// Takes each part's result out for the core to combine. A failed
    /// part is logged and its connection dropped.
    fn answers(&mut self, api: ApiKey, parts: &mut [Part]) -> Vec<PartAnswer> {
        parts
            .iter_mut()
            .map(|part| match part.take_result() {
                Some(Ok(response)) => Ok(response),
                Some(Err(error)) => {
                    self.part_failed(part.target, part.broker.as_ref(), api, &error);
                    Err(NoAnswer::Failed)
                }
                None => Err(NoAnswer::Missing),
            })
            .collect()
    }

    /// Does what the core's combined answer says: logs the parts it could
    /// not read, counts the answers it synthesized, forgets what is stale.
    fn done(&mut self, api: ApiKey, done: Done, parts: &[Part]) -> Response {
        for (index, e) in &done.unreadable {
            let broker = parts
                .get(*index)
                .map_or_else(String::new, Part::broker_label);
            warn!(broker = %broker, "undecodable {api:?} answer, answering its part with an error: {e}");
        }
        count_synthesized_n(api, done.synthesized);
        self.forget(&done.forget);
        done.response
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
        self.shared.health.log_failure(broker, api, what, e);
        self.connections.discard(target);
    }

    /// Records what a split API's answer says is stale and rewrites its
    /// leader hints when it carries a partition error (see
    /// [`exchange::split_facts`]). `raw`: the answer came through undecoded.
    pub(super) fn post_split(
        &mut self,
        response: &mut Response,
        raw: bool,
        broker: Option<&BrokerAddress>,
    ) -> Result<(), ChainError> {
        // A clean answer passed through (no partition error, no hint) has
        // nothing to record or rewrite: it is forwarded undecoded.
        if raw && !exchange::may_need_rewrite(response) {
            return Ok(());
        }
        let api = response.api_key();
        let decode_error = |e: CodecError| protocol_error(broker, api, e);
        if api == ApiKey::Fetch {
            self.shared
                .view
                .after_follower_fetch(response, broker)
                .map_err(decode_error)?;
        }
        let facts = exchange::split_facts(response).map_err(decode_error)?;
        if api == ApiKey::Produce
            && facts.partition_errors
            && tracing::enabled!(tracing::Level::DEBUG)
        {
            let errors = exchange::produce_errors(response);
            debug!(broker = ?broker.map(ToString::to_string), ?errors, "a broker answered a Produce with partition errors");
        }
        self.forget(&facts.stale);
        if facts.rewrite_hints {
            self.shared
                .rewrite_leader_hints(response)
                .map_err(|e| rewrite_error(broker, api, e))?;
        }
        Ok(())
    }

    /// Post-processes a whole request's answer as its [`Post`] says (the
    /// client's request: for admin answers merged with what Sluice refused).
    fn post_process(
        &mut self,
        response: &mut Response,
        whole: &mut Whole,
        broker: &BrokerAddress,
    ) -> Result<(), ChainError> {
        let (api, version) = (response.api_key(), response.api_version());
        let decode_error = |e: CodecError| protocol_error(Some(broker), api, e);
        let rewrite = |e: RewriteError| rewrite_error(Some(broker), api, e);
        match &whole.post {
            Post::None => Ok(()),
            Post::ApiVersions => {
                self.shared.answer_api_versions(response, broker);
                Ok(())
            }
            Post::Metadata => {
                if let ResponseKind::Metadata(m) = response.body().map_err(decode_error)? {
                    let applied = self.shared.view.write().apply_metadata(version, m);
                    super::log_applied(&applied);
                    self.connections.on_metadata(&applied);
                }
                self.shared.rewrite(response, None).map_err(rewrite)
            }
            Post::FindCoordinator { key_type, key } => {
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
                let key = key.as_ref().map(StrBytes::as_str);
                self.shared.rewrite(response, key).map_err(rewrite)
            }
            Post::DescribeCluster => self.shared.rewrite(response, None).map_err(rewrite),
            Post::Coordinator { key, .. } => {
                let stale = whole.post.stale(response).map_err(decode_error)?;
                if !stale.is_empty() {
                    debug!(key = %key, "the coordinator moved");
                }
                self.forget(&stale);
                Ok(())
            }
            Post::Sasl(step) => {
                self.settle_answer(*step, response);
                Ok(())
            }
            Post::Admin { .. } => {
                let stale = whole.post.stale(response).map_err(decode_error)?;
                self.forget(&stale);
                if sluice_cluster::api::describe(api).rewritten {
                    return self.shared.rewrite(response, None).map_err(rewrite);
                }
                let nodes = self.shared.nodes.snapshot();
                sluice_cluster::rewrite::rewrite_configs_answer(
                    response,
                    &mut whole.original,
                    &nodes,
                )
                .map(drop)
                .map_err(rewrite)
            }
        }
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

pub(super) fn count_synthesized(api: ApiKey) {
    count_synthesized_n(api, 1);
}

/// Counts `n` error answers Sluice synthesized for `api`.
fn count_synthesized_n(api: ApiKey, n: usize) {
    if n > 0 {
        metrics::counter!(names::SYNTHESIZED_ERROR_RESPONSES, "api" => format!("{api:?}"))
            .increment(n as u64);
    }
}

/// Why parts could not be combined, as the reason the client is closed.
fn combine_error(api: ApiKey, e: CombineError) -> ChainError {
    match e {
        CombineError::Merge(e) => CloseError::Merge(Arc::new(e)).into(),
        CombineError::Rewrite(e) => rewrite_error(None, api, e),
        CombineError::NotMergeableByKey(api) => Invariant::NotMergeableByKey(api).into(),
    }
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
