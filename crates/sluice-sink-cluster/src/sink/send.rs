//! The request half of the driver: does what the core's [`Plan`] says
//! ([`sluice_cluster::plan`]): fills the view first where the plan asks,
//! then plans once more; sends the request whole, or its parts; queues what
//! the client is owed.
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
use tracing::debug;

use super::io::Io;
use super::{Shared, now};
use crate::close::Invariant;
use crate::pending::{Combine, Part, PendingResponse, Post, SplitCombine};
use sluice_chain::ChainError;
use sluice_cluster::error_codes::ErrorCode;
use sluice_cluster::exchange::KeyedCombine;
use sluice_cluster::plan::share::ShareCombine;
use sluice_cluster::plan::{self, Dest, PartsCombine, Plan};
use sluice_cluster::route::produce_order::{BatchHead, ProduceGaps, idempotent_heads};
use sluice_cluster::route::{self, Meta};
use sluice_cluster::split::dispatch::SplitRequest;
use sluice_cluster::topology::{BrokerId, TopicRef};

/// Plans `request` with `planner` (given whether the view was filled for
/// it already), fills the view once if the plan asks, and does what the
/// plan says.
pub(super) async fn planned(
    io: &mut Io,
    mut request: Request,
    mut planner: impl FnMut(&mut Request, &Shared, bool) -> Result<Plan, ChainError>,
) -> Result<Option<PendingResponse>, ChainError> {
    for refreshed in [false, true] {
        match planner(&mut request, &io.shared, refreshed)? {
            Plan::Refresh(_) if refreshed => break,
            Plan::Refresh(lookup) => io.look_up(&lookup).await?,
            plan => return execute(io, request, plan).await,
        }
    }
    Err(Invariant::LookedUpTwice(request.api_key()).into())
}

/// Does what `plan` (anything but a lookup) says with `request`.
async fn execute(
    io: &mut Io,
    mut request: Request,
    plan: Plan,
) -> Result<Option<PendingResponse>, ChainError> {
    match plan {
        Plan::Answer(body) => {
            debug!(api = ?request.api_key(), "answering a request with sluice's own answer");
            Ok(Some(PendingResponse::answering(&request, body)))
        }
        Plan::Fail(code) => Ok(Some(synthesized(&mut request, code)?)),
        Plan::Whole(whole) => io.send_whole(request, whole).await,
        Plan::Instead {
            dest,
            body,
            post,
            on_failure,
        } => {
            let (api, version) = (request.api_key(), request.api_version());
            if let Dest::Broker(real) = dest {
                debug!(
                    "{api:?}: a sluice node's broker resources go to broker {}",
                    real.0
                );
            }
            let client_id = request.header().client_id.clone();
            let part = Request::from_body(api, version, request.correlation_id(), client_id, body);
            let Some(part) = io.send_part(dest, part).await? else {
                return Ok(None);
            };
            let whole = plan::Whole {
                dest,
                post,
                on_failure,
            };
            Ok(Some(PendingResponse::whole(request, part, whole)))
        }
        Plan::Split(split) => send_split_parts(io, None, request, split, false).await,
        Plan::Parts { parts, combine } => match combine {
            PartsCombine::Keyed(combine) => send_keyed(io, &request, parts, combine).await,
            PartsCombine::Share(combine) => send_share(io, &request, parts, *combine).await,
        },
        Plan::Refresh(_) => Err(Invariant::LookedUpTwice(request.api_key()).into()),
    }
}

/// The parts of a request naming keys of several coordinators; a part that
/// could not be sent leaves its keys out of the merge.
async fn send_keyed(
    io: &mut Io,
    request: &Request,
    parts: Vec<(BrokerId, RequestKind)>,
    mut combine: Box<KeyedCombine>,
) -> Result<Option<PendingResponse>, ChainError> {
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
        if let Some(part) = io.send_part(Dest::Broker(coordinator), part).await? {
            sent.push(part);
            part_keys.push(keys);
        }
    }
    combine.part_keys = part_keys;
    Ok(Some(owed(request, sent, Combine::Keyed(combine))))
}

/// The parts of a ShareFetch or ShareAcknowledge, in the share sessions.
async fn send_share(
    io: &mut Io,
    request: &Request,
    parts: Vec<(BrokerId, RequestKind)>,
    combine: ShareCombine,
) -> Result<Option<PendingResponse>, ChainError> {
    let (api, version) = (request.api_key(), request.api_version());
    let correlation_id = request.correlation_id();
    let client_id = request.header().client_id.clone();
    let mut sent = Vec::with_capacity(parts.len());
    for (broker, body) in parts {
        let part = Request::from_body(api, version, correlation_id, client_id.clone(), body);
        let Some(part) = io.send_part(Dest::Broker(broker), part).await? else {
            return Err(Invariant::SharePartWithoutAnswer(api).into());
        };
        sent.push(part);
    }
    Ok(Some(owed(request, sent, Combine::Share(Box::new(combine)))))
}

/// ApiVersions, Metadata, FindCoordinator, DescribeCluster: any broker
/// (`dest`: [`Dest::Auth`] for ApiVersions before the client's
/// authentication is decided). ApiVersions is answered from the cached
/// versions of every broker while they are fresh.
pub(super) async fn send_meta(
    io: &mut Io,
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
            io.learn_every_api_versions().await?;
            let cached = match request.body()? {
                // A name Kafka refuses gets the broker's own answer.
                RequestKind::ApiVersions(r) if route::meta::valid_client_software(r, version) => {
                    io.shared.cached_client_api_versions()
                }
                _ => None,
            };
            if let Some(body) = cached {
                return Ok(Some(PendingResponse::answering(
                    &request,
                    ResponseKind::ApiVersions(body),
                )));
            }
            Post::ApiVersions
        }
        _ => Post::of_meta(meta, &mut request)?,
    };
    let on_failure = sluice_cluster::api::describe(request.api_key()).on_failure;
    let whole = plan::Whole {
        dest,
        post,
        on_failure,
    };
    io.send_whole(request, whole).await
}

/// The split APIs: by leader, by coordinator, or to every broker; the
/// idempotent batches behind a gap held back (see
/// [`sluice_cluster::route::produce_order`]).
pub(super) async fn send_split(
    io: &mut Io,
    gaps: &mut ProduceGaps,
    mut request: Request,
) -> Result<Option<PendingResponse>, ChainError> {
    let version = request.api_version();
    let (split, heads) = {
        let body = request.body()?;
        let heads = idempotent_heads(body, version);
        let held = gaps.held(&heads, now());
        (io.split(body, version, &held).await?, heads)
    };
    if heads.is_empty() {
        return send_split_parts(io, None, request, split, false).await;
    }
    for (topic, partition, head) in gaps.after_split(&heads, &split.unroutable, now()) {
        debug!(
            ?topic,
            partition,
            ?head,
            "an idempotent batch answered unsent: later ones wait for its resend"
        );
    }
    send_split_parts(io, Some((gaps, &heads)), request, split, false).await
}

/// The produce gaps of a client, and the idempotent batches of the
/// request being sent.
pub(super) type Gaps<'a> = (&'a mut ProduceGaps, &'a [(TopicRef, i32, BatchHead)]);

/// Sends the parts of `split` (the client's own bytes when it passes
/// through; `strip_rack`: a Fetch whose `rack_id` must be cleared never
/// does). `gaps`: where a part with idempotent batches (`heads`) that
/// fails unsent opens a gap.
pub(super) async fn send_split_parts(
    io: &mut Io,
    mut gaps: Option<Gaps<'_>>,
    request: Request,
    split: SplitRequest,
    strip_rack: bool,
) -> Result<Option<PendingResponse>, ChainError> {
    let (api, version) = (request.api_key(), request.api_version());
    let correlation_id = request.correlation_id();
    let expects_response = request.expects_response();
    let single = split.parts.len() == 1 && split.unroutable.is_empty();
    if !split.unroutable.is_empty() {
        debug!(api = ?api, correlation_id, unroutable = ?split.unroutable, "answering what no broker is routed for with an error");
    }
    let mut parts = Vec::with_capacity(split.parts.len());
    let client_id = request.header().client_id.clone();
    match split.passthrough().filter(|_| !strip_rack) {
        Some(broker) => {
            let part = io.send_part(Dest::Broker(broker), request).await?;
            if let Some((gaps, heads)) = &mut gaps {
                note_unsent(gaps, part.as_ref(), heads);
            }
            parts.extend(part);
        }
        None => {
            for (broker, mut body) in split.parts {
                if let RequestKind::Fetch(fetch) = &mut body {
                    fetch.rack_id = StrBytes::default();
                }
                let part_heads = match &gaps {
                    Some(_) => idempotent_heads(&body, version),
                    None => Vec::new(),
                };
                let part =
                    Request::from_body(api, version, correlation_id, client_id.clone(), body);
                let part = io.send_part(Dest::Broker(broker), part).await?;
                if let Some((gaps, _)) = &mut gaps {
                    note_unsent(gaps, part.as_ref(), &part_heads);
                }
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

/// Opens a gap for the idempotent batches (`heads`) of a part that failed
/// before any broker could have read it.
fn note_unsent(gaps: &mut ProduceGaps, part: Option<&Part>, heads: &[(TopicRef, i32, BatchHead)]) {
    let unsent = part
        .and_then(Part::error)
        .is_some_and(|e| !e.request_may_have_been_sent());
    if !unsent {
        return;
    }
    let now = now();
    for (topic, partition, head) in heads {
        debug!(
            ?topic,
            partition,
            ?head,
            "an idempotent batch failed unsent: later ones wait for its resend"
        );
        gaps.failed_unsent(topic, *partition, *head, now);
    }
}

/// What `request` is owed: its `parts`, combined as `combine` says.
fn owed(request: &Request, parts: Vec<Part>, combine: Combine) -> PendingResponse {
    PendingResponse {
        correlation_id: request.correlation_id(),
        api_key: request.api_key(),
        api_version: request.api_version(),
        parts,
        combine,
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
