//! An owed answer's life as data: once the parts of the oldest answer a
//! client is owed stop waiting, what the driver does next ([`Tries::on`]),
//! and how the parts' answers become the client's answer ([`Done`]).
//!
//! ```text
//!   Settled ──┬─► Resend(parts)   parts their failed connection never wrote
//!             │                   (the broker never saw them): once each,
//!             │                   to the same broker
//!             ├─► RetryElsewhere  a whole request any broker can serve whose
//!             │                   broker failed: once, to another broker
//!             └─► Combine         Whole / SplitCombine / KeyedCombine ─► Done
//!   Resent(i), RetriedElsewhere ─► Wait   (recorded once the part is out)
//! ```
//!
//! - A whole request's answer is post-processed as its [`Post`] says; when
//!   its broker failed, the client gets the API's failure answer
//!   ([`Whole::failure`]), or, where the API has no place for an error, is
//!   closed with the broker's error.
//! - A split request's one clean part passes through undecoded
//!   ([`SplitCombine::passes_through`]); otherwise the answers are merged,
//!   a failed or unreadable part answered with the API's split error code.
//! - A request split by coordinator key answers a failed part's keys with
//!   NOT_COORDINATOR and its unroutable keys with COORDINATOR_NOT_AVAILABLE.
//! - What an answer says is stale in the view, and whether its leader hints
//!   need a rewrite, is read from the answer ([`split_facts`],
//!   [`Post::stale`]).
//! - Before any of it: how a request naming several coordinator keys goes
//!   out ([`KeyedCombine::plan`]), and what a whole answer is post-processed
//!   with ([`Post::of_meta`], [`Post::of_admin`]).
//!
//! The driver awaits the parts, sends what a [`Step`] says, forgets what a
//! [`Done`] names, and logs and counts what it reports.

use sluice_codec::header::response_body_offset;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, CodecError, Request, RequestKind, Response, ResponseKind};

use crate::api::{Admin, Family, Meta, OnFailure, describe};
use crate::client_auth::SaslStep;
use crate::error_codes::{self, ErrorCode};
use crate::rewrite::RewriteError;
use crate::route::keyed::KeyedResult;
use crate::route::{self, Stale, produce_fetch};
use crate::split::dispatch::{MergePlan, merge_responses};
use crate::split::{PartResult, SplitError};
use crate::topology::{BrokerId, CoordinatorKeyType, Staleness, TopicRef, staleness};

/// Where one part of an owed answer stands, as the driver saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartStatus {
    /// Its answer has not arrived.
    Waiting,
    /// The broker answered.
    Answered,
    /// It failed.
    Failed(Failure),
}

/// A part of an owed answer, as the driver holds it (with its receiver or
/// result): the core reads only where it stands.
pub trait OwedPart {
    /// Where the part stands.
    fn status(&self) -> PartStatus;
}

impl OwedPart for PartStatus {
    fn status(&self) -> PartStatus {
        *self
    }
}

/// How a part failed, as far as sending it again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Failure {
    /// Its connection failed before writing it, with a retriable error, and
    /// the request is at hand: the broker never saw it.
    pub unsent: bool,
    /// It went out on the client's own authentication connection, to which
    /// it belongs.
    pub pinned: bool,
}

/// What happened to the oldest owed answer.
#[derive(Debug)]
pub enum Event<'a, P: OwedPart = PartStatus> {
    /// Its parts stopped waiting: all of them, or, for a split fetch, as
    /// long as `consume` lets it wait.
    Settled {
        /// The client's request's API.
        api: ApiKey,
        /// Its parts, in order.
        parts: &'a [P],
        /// The failure policy of a request sent whole; `None` when split.
        whole: Option<OnFailure>,
    },
    /// Part `i` went out again, as [`Step::Resend`] said.
    Resent(usize),
    /// The whole request went out to another broker, as
    /// [`Step::RetryElsewhere`] said.
    RetriedElsewhere,
}

/// What the driver does next with the oldest owed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait for its parts.
    Wait,
    /// Send each of these parts again, to the broker it went to, on a
    /// reopened connection; then wait again.
    Resend(Vec<usize>),
    /// Send the client's request once more, to a broker other than the one
    /// that failed it; then wait again.
    RetryElsewhere,
    /// Nothing is left to try: combine the parts (a split fetch may still
    /// ask for more, see `consume`).
    Combine,
}

/// What was already tried for the oldest owed answer: each part is sent
/// again at most once, the whole request retried elsewhere at most once.
/// A new one starts with each owed answer.
#[derive(Debug, Default)]
pub struct Tries {
    resent: Vec<usize>,
    retried: bool,
}

impl Tries {
    /// The next step after `event`.
    pub fn on<P: OwedPart>(&mut self, event: Event<'_, P>) -> Step {
        match event {
            Event::Settled { api, parts, whole } => self.settled(api, parts, whole),
            Event::Resent(index) => {
                if !self.resent.contains(&index) {
                    self.resent.push(index);
                }
                Step::Wait
            }
            Event::RetriedElsewhere => {
                self.retried = true;
                Step::Wait
            }
        }
    }

    fn settled<P: OwedPart>(&self, api: ApiKey, parts: &[P], whole: Option<OnFailure>) -> Step {
        // Authentication requests belong to their connection.
        if !matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
            let unsent: Vec<usize> = parts
                .iter()
                .enumerate()
                .filter(|(index, part)| {
                    matches!(part.status(), PartStatus::Failed(f) if f.unsent && !f.pinned)
                        && !self.resent.contains(index)
                })
                .map(|(index, _)| index)
                .collect();
            if !unsent.is_empty() {
                return Step::Resend(unsent);
            }
        }
        let failed = matches!(parts.first().map(P::status), Some(PartStatus::Failed(_)));
        if failed && !self.retried && matches!(whole, Some(OnFailure::RetryElsewhere(_))) {
            return Step::RetryElsewhere;
        }
        Step::Combine
    }
}

/// One part's result, taken out to be combined: the broker's answer, or
/// why there is none.
pub type PartAnswer = Result<Response, NoAnswer>;

/// Why a part has no answer to combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAnswer {
    /// The part failed (the driver logs why).
    Failed,
    /// The part has no result.
    Missing,
}

/// The client's answer, and what the driver does with it.
#[derive(Debug)]
pub struct Done {
    /// The answer, before the client's correlation id and version are set.
    pub response: Response,
    /// What the answer says is out of date in the view.
    pub forget: Vec<Stale>,
    /// How many parts Sluice answered itself with an error (each counted as
    /// a synthesized error answer).
    pub synthesized: usize,
    /// The parts whose answers could not be decoded (answered as failed),
    /// for the log.
    pub unreadable: Vec<(usize, CodecError)>,
}

impl Done {
    fn new(response: Response) -> Self {
        Self {
            response,
            forget: Vec::new(),
            synthesized: 0,
            unreadable: Vec::new(),
        }
    }
}

/// Why parts could not be combined.
#[derive(Debug, thiserror::Error)]
pub enum CombineError {
    /// The split module could not merge the answers.
    #[error("merging the answers: {0}")]
    Merge(#[from] SplitError),
    /// The fan-out answers could not be cut down to the local node's.
    #[error("filtering the fan-out answers: {0}")]
    Rewrite(#[from] RewriteError),
    /// A request split by key that cannot be merged by key.
    #[error("{0:?} cannot be merged by key")]
    NotMergeableByKey(ApiKey),
}

/// A whole request sent to one broker.
#[derive(Debug)]
pub struct Whole {
    /// What to do with a successful answer.
    pub post: Post,
    /// What to answer when the broker fails.
    pub on_failure: OnFailure,
    /// The client's request (cheap: shares the frame), to retry it elsewhere
    /// or to build an error answer from.
    pub original: Request,
}

impl Whole {
    /// The client's answer when the broker failed the request: the API's
    /// failure answer, the coordinator forgotten for a coordinator's
    /// request. `None`: the API has no place for an error, and the client
    /// is closed with the broker's error.
    pub fn failure(&mut self) -> Option<Done> {
        let code = match self.on_failure {
            OnFailure::Synthesize(code)
            | OnFailure::RetryElsewhere(code)
            | OnFailure::SplitError(code) => code,
            OnFailure::Close => return None,
        };
        let (api, version) = (self.original.api_key(), self.original.api_version());
        let body = self
            .original
            .body()
            .ok()
            .and_then(|request| route::failure_answer(api, request, version, code))?;
        let response = Response::from_body(api, version, self.original.correlation_id(), body);
        let mut done = Done::new(response);
        done.synthesized = 1;
        if let Post::Coordinator { key_type, key } = &self.post {
            done.forget.push(Stale::Coordinator(*key_type, key.clone()));
        }
        Some(done)
    }
}

/// What to do with the answer of a whole request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Post {
    /// Nothing: the answer passes through as its raw bytes.
    None,
    /// Intersect with every broker's versions (and cache it).
    ApiVersions,
    /// Record in the view, then rewrite.
    Metadata,
    /// Record in the view, then rewrite.
    FindCoordinator {
        /// The request's key type, when known.
        key_type: Option<CoordinatorKeyType>,
        /// The v0–3 request's key.
        key: Option<StrBytes>,
    },
    /// Rewrite.
    DescribeCluster,
    /// Forget the coordinator if it answers that it no longer is one.
    Coordinator {
        /// Group or transaction.
        key_type: CoordinatorKeyType,
        /// The group id or transactional id.
        key: String,
    },
    /// Forget the topics an admin write changed.
    Admin {
        /// The topics the request named.
        stale_topics: Vec<TopicRef>,
    },
    /// Settle a SASL answer in the client's authentication state (once:
    /// settled entries become [`Post::None`]).
    Sasl(SaslStep),
}

impl Post {
    /// What the answer of a request about the cluster itself is
    /// post-processed with (for a v0–3 FindCoordinator, with its key).
    pub fn of_meta(meta: Meta, request: &mut Request) -> Result<Post, CodecError> {
        Ok(match meta {
            Meta::ApiVersions => Post::ApiVersions,
            Meta::Metadata => Post::Metadata,
            Meta::DescribeCluster => Post::DescribeCluster,
            Meta::FindCoordinator => {
                let version = request.api_version();
                let (key_type, key) = match request.body()? {
                    RequestKind::FindCoordinator(r) => {
                        route::meta::find_coordinator_key(r, version)
                    }
                    _ => (None, None),
                };
                Post::FindCoordinator { key_type, key }
            }
        })
    }

    /// What an admin request's answer is post-processed with: the topics it
    /// names are forgotten when it changes them.
    pub fn of_admin(admin: Admin, request: &mut Request) -> Result<Post, CodecError> {
        let stale_topics = if admin.marks_topics_stale {
            route::admin::stale_topics(request.body()?)
        } else {
            Vec::new()
        };
        Ok(Post::Admin { stale_topics })
    }

    /// What a whole request's answer says is out of date in the view: a
    /// coordinator that answered it no longer is one; the topics an admin
    /// write named, and what its top-level error says.
    pub fn stale(&self, response: &mut Response) -> Result<Vec<Stale>, CodecError> {
        match self {
            Post::Coordinator { key_type, key } => {
                let moved = route::groups::response_error_codes(response.body()?)
                    .into_iter()
                    .any(|code| {
                        staleness(ErrorCode::from_wire(code)) == Some(Staleness::Coordinator)
                    });
                Ok(if moved {
                    vec![Stale::Coordinator(*key_type, key.clone())]
                } else {
                    Vec::new()
                })
            }
            Post::Admin { stale_topics } => {
                let mut stale: Vec<Stale> =
                    stale_topics.iter().cloned().map(Stale::Topic).collect();
                if route::admin::has_top_level_error(response.api_key()) {
                    let code = route::admin::top_level_error(response.body()?).unwrap_or(0);
                    stale.extend(route::top_level_staleness(ErrorCode::from_wire(code)));
                }
                Ok(stale)
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// The parts of a split request.
#[derive(Debug)]
pub struct SplitCombine {
    /// The split module's merge plan.
    pub plan: MergePlan,
    /// Exactly one part and nothing unroutable: the part's answer is the
    /// client's answer as it came (no decode, no merge).
    pub single: bool,
}

impl SplitCombine {
    /// Whether the one part's answer is the client's answer as it came: no
    /// decode, no merge, no cut of a fan-out answer.
    pub fn passes_through<P: OwedPart>(&self, api: ApiKey, parts: &[P]) -> bool {
        self.single
            && !describe(api).filtered_after_fan_out
            && matches!(parts, [part] if part.status() == PartStatus::Answered)
    }

    /// Merges the parts' answers (`answers[i]` is part `i`'s) into the
    /// client's answer to `api`/`version`. A failed or unreadable part is
    /// answered with the API's split error code. For the fan-out APIs whose
    /// answers are cut down to what the local node is shown to own,
    /// `fan_out` does that first (see `rewrite/fan_out.rs`).
    pub fn merge(
        self,
        (api, version, correlation_id): (ApiKey, i16, i32),
        answers: Vec<PartAnswer>,
        fan_out: impl FnOnce(&mut [PartResult<ResponseKind>]) -> Result<(), RewriteError>,
    ) -> Result<Done, CombineError> {
        let descriptor = describe(api);
        let code = match descriptor.on_failure {
            OnFailure::SplitError(code) => code,
            _ => error_codes::REQUEST_TIMED_OUT,
        };
        let (mut synthesized, mut unreadable) = (0, Vec::new());
        let mut results = Vec::with_capacity(answers.len());
        for (index, answer) in answers.into_iter().enumerate() {
            results.push(match answer {
                Ok(response) => match response.into_body() {
                    Ok(body) => PartResult::Response(body),
                    Err(e) => {
                        synthesized += 1;
                        unreadable.push((index, e));
                        PartResult::Failed { error_code: code }
                    }
                },
                Err(NoAnswer::Failed) => {
                    synthesized += 1;
                    PartResult::Failed { error_code: code }
                }
                Err(NoAnswer::Missing) => PartResult::Failed { error_code: code },
            });
        }
        if descriptor.filtered_after_fan_out {
            fan_out(&mut results)?;
        }
        let merged = merge_responses(self.plan, results)?;
        let mut done = Done::new(Response::from_body(api, version, correlation_id, merged));
        done.synthesized = synthesized;
        done.unreadable = unreadable;
        Ok(done)
    }
}

/// The parts of a multi-key request split by coordinator.
#[derive(Debug)]
pub struct KeyedCombine {
    /// The client's request, decoded (the merge dispatches on it).
    pub request: RequestKind,
    /// Its keys, in request order.
    pub order: Vec<String>,
    /// The keys each part asked about, parallel to the entry's parts.
    pub part_keys: Vec<Vec<String>>,
    /// Keys no coordinator could be found for.
    pub unroutable: Vec<String>,
}

impl KeyedCombine {
    /// Merges the parts' answers (`answers[i]` is part `i`'s) into the
    /// client's answer, in key order; forgets the coordinators that answer
    /// they no longer are.
    pub fn merge(
        self,
        (api, version, correlation_id): (ApiKey, i16, i32),
        answers: Vec<PartAnswer>,
    ) -> Result<Done, CombineError> {
        let KeyedCombine {
            request,
            order,
            part_keys,
            unroutable,
        } = self;
        let (mut synthesized, mut unreadable) = (0, Vec::new());
        let mut results = Vec::with_capacity(answers.len() + 1);
        for (index, (answer, keys)) in answers.into_iter().zip(part_keys).enumerate() {
            let body = match answer {
                Ok(response) => response.into_body().map_err(Some),
                Err(NoAnswer::Failed | NoAnswer::Missing) => Err(None),
            };
            results.push(match body {
                Ok(body) => KeyedResult::Answer(body),
                Err(e) => {
                    synthesized += 1;
                    unreadable.extend(e.map(|e| (index, e)));
                    KeyedResult::Failed(keys, error_codes::NOT_COORDINATOR)
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
            .ok_or(CombineError::NotMergeableByKey(api))?;
        let forget = route::keyed::stale(&merged);
        let mut done = Done::new(Response::from_body(api, version, correlation_id, merged));
        done.forget = forget;
        done.synthesized = synthesized;
        done.unreadable = unreadable;
        Ok(done)
    }
}

/// How a request naming several coordinator keys goes out, their
/// coordinators looked up as far as they could be.
#[derive(Debug)]
pub enum KeyedPlan {
    /// Every key has the same coordinator: the request goes to it whole.
    Whole {
        /// The coordinator.
        coordinator: BrokerId,
        /// Its answer's post-processing (the coordinator forgotten when it
        /// answers it no longer is one).
        post: Post,
        /// What a failure is answered with.
        on_failure: OnFailure,
    },
    /// One part per known coordinator, with the keys it coordinates; the
    /// keys without one are answered COORDINATOR_NOT_AVAILABLE.
    Parts {
        /// Each part's coordinator and body (parallel to `combine.part_keys`).
        parts: Vec<(BrokerId, RequestKind)>,
        /// How their answers merge (boxed: it holds the decoded request,
        /// which goes into the owed answer as it is).
        combine: Box<KeyedCombine>,
    },
}

impl KeyedCombine {
    /// How `request`, naming `keys` of `key_type` (grouped by coordinator:
    /// `by_coordinator`, see `route::keyed::by_coordinator`), goes out.
    pub fn plan(
        request: &RequestKind,
        key_type: CoordinatorKeyType,
        keys: Vec<String>,
        by_coordinator: Vec<(Option<BrokerId>, Vec<String>)>,
    ) -> KeyedPlan {
        if let [(Some(coordinator), _)] = by_coordinator.as_slice() {
            return KeyedPlan::Whole {
                coordinator: *coordinator,
                post: Post::Coordinator {
                    key_type,
                    key: keys.first().cloned().unwrap_or_default(),
                },
                on_failure: OnFailure::Synthesize(error_codes::NOT_COORDINATOR),
            };
        }
        let mut parts = Vec::new();
        let mut part_keys = Vec::new();
        let mut unroutable = Vec::new();
        for (coordinator, group) in by_coordinator {
            let Some(coordinator) = coordinator else {
                unroutable.extend(group);
                continue;
            };
            parts.push((coordinator, route::keyed::with_keys(request, &group)));
            part_keys.push(group);
        }
        let combine = Box::new(KeyedCombine {
            request: request.clone(),
            order: keys,
            part_keys,
            unroutable,
        });
        KeyedPlan::Parts { parts, combine }
    }
}

/// What a split API's answer says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// What is out of date in the view.
    pub stale: Vec<Stale>,
    /// A Produce or Fetch answer carries a partition error (or a leader
    /// hint).
    pub partition_errors: bool,
    /// Its leader hints name brokers, to be rewritten to Sluice nodes.
    pub rewrite_hints: bool,
}

/// Whether an answer passed through undecoded may carry something to
/// record or rewrite: for Produce and Fetch, what a walk of the body's
/// header says (a clean answer is forwarded as its bytes); for other APIs,
/// and for an answer already decoded, yes.
pub fn may_need_rewrite(response: &Response) -> bool {
    let scan = match response.api_key() {
        ApiKey::Fetch => produce_fetch::fetch_may_need_rewrite as fn(&[u8], i16) -> bool,
        ApiKey::Produce => produce_fetch::produce_may_need_rewrite,
        _ => return true,
    };
    let Some(frame) = response.raw_frame() else {
        return true;
    };
    let (api, version) = (response.api_key(), response.api_version());
    match response_body_offset(frame, api, version) {
        Ok(offset) => scan(frame.get(offset..).unwrap_or_default(), version),
        Err(_) => true,
    }
}

/// What a split API's answer says (decoding it where its family records
/// anything): the stale leaders, topics or coordinators, and whether its
/// leader hints need a rewrite.
pub fn split_facts(response: &mut Response) -> Result<Facts, CodecError> {
    let (api, version) = (response.api_key(), response.api_version());
    let descriptor = describe(api);
    let (stale, partition_errors) = match descriptor.family {
        Family::ByLeader => {
            let body = response.body()?;
            let errors = match body {
                ResponseKind::Produce(p) => produce_fetch::produce_needs_rewrite(p),
                ResponseKind::Fetch(f) => produce_fetch::fetch_needs_rewrite(f),
                _ => false,
            };
            (produce_fetch::stale_partitions(body, version), errors)
        }
        Family::ByCoordinator => (route::groups::stale_groups(response.body()?), false),
        _ => (Vec::new(), false),
    };
    Ok(Facts {
        stale,
        partition_errors,
        rewrite_hints: partition_errors && descriptor.may_carry_leader_hints(version),
    })
}

/// The partitions a decoded Produce answer failed, as (topic, partition,
/// error code), for the log.
pub fn produce_errors(response: &mut Response) -> Vec<(String, i32, i16)> {
    let Ok(ResponseKind::Produce(p)) = response.body() else {
        return Vec::new();
    };
    p.responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| (t.name.to_string(), p.index, p.error_code))
        })
        .collect()
}

#[cfg(test)]
mod tests;
