//! The response half of the driver: the answer to the oldest owed request
//! once the core ([`sluice_cluster::exchange`]) says to combine it.
//!
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

use super::Shared;
use super::io::{Io, log_applied};
use crate::close::{CloseError, Invariant};
use crate::pending::{KeyedCombine, Part, Post, SplitCombine, Whole};
use crate::pool::Target;
use sluice_cluster::client_auth::SaslStep;
use sluice_cluster::exchange::{self, CombineError, Done, NoAnswer, PartAnswer};
use sluice_cluster::rewrite::RewriteError;
use sluice_cluster::route::{self, Stale};
use sluice_cluster::topology::BrokerId;

/// The answer to a request sent whole, and the SASL step its answer
/// settles, if any (the caller settles it in the client's authentication).
pub(super) fn finish_whole(
    io: &mut Io,
    mut whole: Whole,
    mut part: Part,
) -> Result<(Response, Option<SaslStep>), ChainError> {
    let api = whole.original.api_key();
    let error = match part.take_result() {
        Some(Ok(mut response)) => {
            // Only a part that was sent has an answer.
            let Some(broker) = &part.broker else {
                return Err(Invariant::AnswerWithoutBroker(api).into());
            };
            let settle = post_process(io, &mut response, &mut whole, broker)?;
            return Ok((response, settle));
        }
        Some(Err(error)) => error,
        // Combined only once every part is done, and only once.
        None => return Err(Invariant::PartNotDone(api).into()),
    };
    part_failed(io, part.target, part.broker.as_ref(), api, &error);
    match whole.failure() {
        Some(done) => Ok((deliver(io, api, done, &[]), None)),
        None => Err(ChainError::Broker(error)),
    }
}

/// The answer to a split request: its one clean part passed through, or
/// the parts merged by the core.
pub(super) fn finish_split(
    io: &mut Io,
    header: (ApiKey, i16, i32),
    split: SplitCombine,
    mut parts: Vec<Part>,
) -> Result<Response, ChainError> {
    let api = header.0;
    if split.passes_through(api, &parts)
        && let Some(Some(Ok(mut response))) = parts.first_mut().map(Part::take_result)
    {
        let broker = parts.first().and_then(|p| p.broker.clone());
        post_split(io, &mut response, true, broker.as_ref())?;
        return Ok(response);
    }
    let answers = answers(io, api, &mut parts);
    let done = split
        .merge(header, answers, |results| {
            let brokers: Vec<BrokerId> = parts.iter().map(part_broker).collect();
            io.shared.cut_fan_out(&brokers, results)
        })
        .map_err(|e| combine_error(api, e))?;
    let mut response = deliver(io, api, done, &parts);
    post_split(io, &mut response, false, None)?;
    Ok(response)
}

/// The answer to a request split by coordinator key.
pub(super) fn finish_keyed(
    io: &mut Io,
    header: (ApiKey, i16, i32),
    keyed: KeyedCombine,
    mut parts: Vec<Part>,
) -> Result<Response, ChainError> {
    let api = header.0;
    let answers = answers(io, api, &mut parts);
    let done = keyed
        .merge(header, answers)
        .map_err(|e| combine_error(api, e))?;
    Ok(deliver(io, api, done, &parts))
}

/// Takes each part's result out for the core to combine. A failed
/// part is logged and its connection dropped.
pub(super) fn answers(io: &mut Io, api: ApiKey, parts: &mut [Part]) -> Vec<PartAnswer> {
    parts
        .iter_mut()
        .map(|part| match part.take_result() {
            Some(Ok(response)) => Ok(response),
            Some(Err(error)) => {
                part_failed(io, part.target, part.broker.as_ref(), api, &error);
                Err(NoAnswer::Failed)
            }
            None => Err(NoAnswer::Missing),
        })
        .collect()
}

/// Does what the core's combined answer says: logs the parts it could
/// not read, counts the answers it synthesized, forgets what is stale.
pub(super) fn deliver(io: &mut Io, api: ApiKey, done: Done, parts: &[Part]) -> Response {
    for (index, e) in &done.unreadable {
        let broker = parts
            .get(*index)
            .map_or_else(String::new, Part::broker_label);
        warn!(broker = %broker, "undecodable {api:?} answer, answering its part with an error: {e}");
    }
    count_synthesized_n(api, done.synthesized);
    forget(&io.shared, &done.forget);
    done.response
}

/// Logs a failed part (rate-limited per broker) and drops its (closed)
/// connection.
pub(super) fn part_failed(
    io: &mut Io,
    target: Target,
    broker: Option<&BrokerAddress>,
    api: ApiKey,
    e: &BrokerError,
) {
    let what = "broker request failed, answering it with a retriable error";
    io.shared.health.log_failure(broker, api, what, e);
    io.pool.discard(target);
}

/// Records what a split API's answer says is stale and rewrites its
/// leader hints when it carries a partition error (see
/// [`exchange::split_facts`]). `raw`: the answer came through undecoded.
pub(super) fn post_split(
    io: &mut Io,
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
        io.shared
            .view
            .after_follower_fetch(response, broker)
            .map_err(decode_error)?;
    }
    let facts = exchange::split_facts(response).map_err(decode_error)?;
    if api == ApiKey::Produce && facts.partition_errors && tracing::enabled!(tracing::Level::DEBUG)
    {
        let errors = exchange::produce_errors(response);
        debug!(broker = ?broker.map(ToString::to_string), ?errors, "a broker answered a Produce with partition errors");
    }
    forget(&io.shared, &facts.stale);
    if facts.rewrite_hints {
        io.shared
            .rewrite_leader_hints(response)
            .map_err(|e| rewrite_error(broker, api, e))?;
    }
    Ok(())
}

/// Post-processes a whole request's answer as its [`Post`] says (the
/// client's request: for admin answers merged with what Sluice refused).
fn post_process(
    io: &mut Io,
    response: &mut Response,
    whole: &mut Whole,
    broker: &BrokerAddress,
) -> Result<Option<SaslStep>, ChainError> {
    let (api, version) = (response.api_key(), response.api_version());
    let decode_error = |e: CodecError| protocol_error(Some(broker), api, e);
    let rewrite = |e: RewriteError| rewrite_error(Some(broker), api, e);
    let done = match &whole.post {
        Post::None => Ok(()),
        Post::ApiVersions => {
            io.shared.answer_api_versions(response, broker);
            Ok(())
        }
        Post::Metadata => {
            if let ResponseKind::Metadata(m) = response.body().map_err(decode_error)? {
                let applied = io.shared.view.write().apply_metadata(version, m);
                log_applied(&applied);
                io.pool.on_metadata(&applied);
            }
            io.shared.rewrite(response, None).map_err(rewrite)
        }
        Post::FindCoordinator { key_type, key } => {
            if let (Some(key_type), ResponseKind::FindCoordinator(f)) =
                (key_type, response.body().map_err(decode_error)?)
            {
                io.shared
                    .view
                    .write()
                    .apply_find_coordinator(version, *key_type, key.as_ref(), f);
            }
            let key = key.as_ref().map(StrBytes::as_str);
            io.shared.rewrite(response, key).map_err(rewrite)
        }
        Post::DescribeCluster => io.shared.rewrite(response, None).map_err(rewrite),
        Post::Coordinator { key, .. } => {
            let stale = whole.post.stale(response).map_err(decode_error)?;
            if !stale.is_empty() {
                debug!(key = %key, "the coordinator moved");
            }
            forget(&io.shared, &stale);
            Ok(())
        }
        Post::Sasl(step) => return Ok(Some(*step)),
        Post::Admin { .. } => {
            let stale = whole.post.stale(response).map_err(decode_error)?;
            forget(&io.shared, &stale);
            if sluice_cluster::api::describe(api).rewritten {
                io.shared.rewrite(response, None).map_err(rewrite)
            } else {
                let nodes = io.shared.nodes.snapshot();
                sluice_cluster::rewrite::rewrite_configs_answer(
                    response,
                    &mut whole.original,
                    &nodes,
                )
                .map(drop)
                .map_err(rewrite)
            }
        }
    };
    done.map(|()| None)
}

/// Forgets what `stale` names from the view.
pub(super) fn forget(shared: &Shared, stale: &[Stale]) {
    if stale.is_empty() {
        return;
    }
    let forgotten = route::forget(&mut shared.view.write(), stale);
    if forgotten.rebootstrap_required {
        warn!("a broker answered REBOOTSTRAP_REQUIRED; topics are refreshed as clients touch them");
    }
    if forgotten.entries > 0 {
        debug!(
            forgotten = forgotten.entries,
            "forgot stale routing entries"
        );
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
