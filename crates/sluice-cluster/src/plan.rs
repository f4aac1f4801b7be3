//! The request half as data: given a client request and what is known (the
//! view, the Sluice nodes, the client's sessions, `now`), what the driver
//! does next with it ([`Plan`]).
//!
//! ```text
//!   request ─► route ─► family's plan ─┬─► Answer / Fail   answered by Sluice now
//!                                      ├─► Refresh(Lookup) Metadata / FindCoordinator
//!                                      │                   first, then plan again
//!                                      │                   (once: `refreshed`)
//!                                      ├─► Whole / Instead one request to one broker
//!                                      ├─► Split           parts by leader, coordinator
//!                                      │                   or to every broker
//!                                      └─► Parts           parts and how they combine
//! ```
//!
//! A plan borrows nothing: the driver takes the view's read guard for the
//! call and drops it before it awaits anything. A split that leaves
//! something unroutable asks for a [`Lookup`] once; planned again after it
//! (`refreshed`), it goes out with what is known and the unroutable parts
//! are answered with errors. A Produce or Fetch whose partitions have one
//! leader is planned as a [`SplitRequest`] that passes through: the driver
//! sends the client's own bytes, and the plan costs what the split costs.
//!
//! `stall` says when a part is due for a check on its broker and which
//! brokers a check finds quiet or suspect.

pub mod fetch;
pub mod share;
pub mod stall;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use sluice_codec::{ApiKey, CodecError, Request, RequestKind, ResponseKind};

use crate::api::{self, Admin, Family, OnFailure};
use crate::error_codes::{self, ErrorCode};
use crate::exchange::{KeyedCombine, KeyedPlan, Post};
use crate::rewrite::Rewriter;
use crate::route::produce_fetch::{ShownHere, goes_where_shown};
use crate::route::produce_order::Holding;
use crate::route::{self, MetadataRefresh, Refresh};
use crate::split::RackRouting;
use crate::split::dispatch::{SplitRequest, split_request};
use crate::topology::{BrokerId, ClusterView, CoordinatorKeyType, SluiceNodes, TopicRef};

/// Where a request sent whole goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// To this broker.
    Broker(BrokerId),
    /// To any broker.
    Any,
    /// To the client's auth connection (before its authentication is decided).
    Auth,
    /// To the connection of the client's re-authentication under way.
    Reauth,
}

/// What the view must learn before a request is planned again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    /// A Metadata refresh, if any.
    pub metadata: Option<MetadataRefresh>,
    /// Coordinators to look up (FindCoordinator), of this key type.
    pub coordinators: Option<(CoordinatorKeyType, Vec<String>)>,
}

impl Lookup {
    /// Only the broker list.
    pub fn brokers() -> Self {
        Self {
            metadata: Some(MetadataRefresh::Brokers),
            coordinators: None,
        }
    }

    /// These topics' partitions.
    pub fn topics(topics: Vec<TopicRef>) -> Self {
        Self {
            metadata: Some(MetadataRefresh::Topics(topics)),
            coordinators: None,
        }
    }

    /// The coordinators of `keys`.
    pub fn coordinators(key_type: CoordinatorKeyType, keys: Vec<String>) -> Self {
        Self {
            metadata: None,
            coordinators: Some((key_type, keys)),
        }
    }

    /// Whether there is nothing to learn.
    pub fn is_empty(&self) -> bool {
        self.metadata.is_none() && self.coordinators.is_none()
    }
}

impl From<Refresh> for Lookup {
    fn from(refresh: Refresh) -> Self {
        Self {
            metadata: refresh.metadata,
            coordinators: (!refresh.groups.is_empty())
                .then_some((CoordinatorKeyType::Group, refresh.groups)),
        }
    }
}

/// What to do next with a client request.
#[derive(Debug)]
pub enum Plan {
    /// Answer it now with this body, Sluice's own answer (a share session
    /// error, refused config resources).
    Answer(ResponseKind),
    /// Answer it now with the API's failure answer carrying this code
    /// (counted as synthesized).
    Fail(ErrorCode),
    /// Learn this first, then plan again.
    Refresh(Lookup),
    /// Send the client's request whole.
    Whole(Whole),
    /// Send `body`, built from the client's request, in its place; the
    /// client's request is kept to merge the answer with or to answer a
    /// failure from (config requests naming Sluice nodes).
    Instead {
        /// Its broker (any broker when the request names no Sluice node).
        dest: Dest,
        /// What goes out.
        body: RequestKind,
        /// Its answer's post-processing.
        post: Post,
        /// What a failure is answered with.
        on_failure: OnFailure,
    },
    /// Send the parts of a split (the client's own bytes when it passes
    /// through).
    Split(SplitRequest),
    /// Send these parts; their answers combine as `combine` says.
    Parts {
        /// Each part's broker and body.
        parts: Vec<(BrokerId, RequestKind)>,
        /// How their answers become the client's answer.
        combine: PartsCombine,
    },
}

/// A request sent whole: where, and what its answer and failure get.
#[derive(Debug, Clone, PartialEq)]
pub struct Whole {
    /// Where it goes.
    pub dest: Dest,
    /// Its answer's post-processing.
    pub post: Post,
    /// What a failure is answered with.
    pub on_failure: OnFailure,
}

/// How the answers of [`Plan::Parts`] combine.
#[derive(Debug)]
pub enum PartsCombine {
    /// Merged by coordinator key (parallel to its `part_keys`).
    Keyed(Box<KeyedCombine>),
    /// Merged by the client's share sessions.
    Share(Box<share::ShareCombine>),
}

/// Why a request cannot be planned: the client is closed with it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The body could not be read.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A split API's body that the splitter does not know.
    #[error("a request of a split api could not be split")]
    NotSplittable,
    /// A config request whose resources were all refused, with no answer
    /// to carry the refusal.
    #[error("no answer for the refused resources of {0:?}")]
    NoAnswerForRefused(ApiKey),
    /// A share request without its body.
    #[error("{0:?} without a share body")]
    ShareWithoutBody(ApiKey),
}

/// Which planner a request goes to, from its row of the API table.
#[derive(Debug, PartialEq)]
pub enum Route {
    /// Not served at this version: the client is closed.
    Unsupported,
    /// An API clients may not send, answered with this error body.
    NotForClients(Box<ResponseKind>),
    /// An API clients may not send, with no place for an error: the client
    /// is closed.
    CloseNotForClients,
    /// ApiVersions, Metadata, FindCoordinator, DescribeCluster.
    Meta(route::Meta),
    /// The coordinator of its key ([`coordinator`]).
    Coordinator(CoordinatorKeyType),
    /// A Fetch (the consume path).
    Fetch,
    /// Split by leader, by coordinator, or sent to every broker ([`split`]).
    Split,
    /// ShareFetch, ShareAcknowledge ([`share::plan`]).
    Share,
    /// Any broker ([`admin`]).
    Admin(Admin),
    /// SASL of a client that does not authenticate: any broker, closed
    /// when it fails.
    Sasl,
}

/// Which planner `api` at `version` goes to.
pub fn route(api: ApiKey, version: i16) -> Route {
    if !api::serves(api, version) {
        return Route::Unsupported;
    }
    let descriptor = api::describe(api);
    match descriptor.family {
        Family::NotForClients => match route::admin::not_for_clients(api, version) {
            Some(body) => Route::NotForClients(Box::new(body)),
            None => Route::CloseNotForClients,
        },
        Family::Meta(meta) => Route::Meta(meta),
        // Before its split version (OffsetFetch below v8: one group), a
        // split API goes whole to its coordinator.
        Family::ByCoordinator if version < descriptor.split_since => {
            Route::Coordinator(CoordinatorKeyType::Group)
        }
        Family::ByLeader if api == ApiKey::Fetch => Route::Fetch,
        Family::ByLeader | Family::ByCoordinator | Family::FanOut => Route::Split,
        Family::Coordinator(key_type) => Route::Coordinator(key_type),
        Family::ShareSession => Route::Share,
        Family::Admin(admin) => Route::Admin(admin),
        Family::Sasl => Route::Sasl,
    }
}

/// Notes a JoinGroup's rebalance timeout in `longest`, and lets a SyncGroup
/// wait at its coordinator as long as the longest one: how long it may
/// wait for the group's leader, which its own body does not say.
pub fn note_rebalance(request: &mut Request, longest: &mut Option<Duration>) {
    match request.api_key() {
        ApiKey::JoinGroup => {
            let wait = request.broker_wait();
            *longest = Some(longest.map_or(wait, |w| w.max(wait)));
        }
        ApiKey::SyncGroup => request
            .set_broker_wait_at_least(longest.unwrap_or(route::groups::DEFAULT_REBALANCE_WAIT)),
        _ => {}
    }
}

/// What a split is planned with: the view and the Sluice nodes as they are
/// `now`, and which brokers may serve fetches as followers.
#[derive(Debug)]
pub struct Known<'a, U> {
    /// The cluster view (its read guard held for the call).
    pub view: &'a ClusterView,
    /// The Sluice nodes.
    pub nodes: &'a SluiceNodes,
    /// Whether a broker may serve fetches as a follower (not suspect).
    pub usable: U,
    /// The time of the decision.
    pub now: Instant,
}

/// Plans a split API's request: the split, or first the [`Lookup`] its
/// unroutable parts need (not once `refreshed`). The partitions in `held`
/// are answered unsent (see [`route::produce_order`]) and need nothing.
pub fn split<U: Fn(BrokerId) -> bool>(
    body: &RequestKind,
    version: i16,
    held: &[(TopicRef, i32)],
    known: &Known<'_, U>,
    refreshed: bool,
) -> Result<Plan, PlanError> {
    let split = split_now(body, version, held, known)?;
    if refreshed || split.unroutable.is_empty() {
        return Ok(Plan::Split(split));
    }
    let lookup = Lookup::from(Refresh::for_unroutable(&split.unroutable, held));
    if lookup.is_empty() {
        return Ok(Plan::Split(split));
    }
    Ok(Plan::Refresh(lookup))
}

/// Splits `body` by what is known now (see [`split`]).
pub fn split_now<U: Fn(BrokerId) -> bool>(
    body: &RequestKind,
    version: i16,
    held: &[(TopicRef, i32)],
    known: &Known<'_, U>,
) -> Result<SplitRequest, PlanError> {
    let routing = RackRouting {
        view: known.view,
        rack: known.nodes.local_rack(),
        now: known.now,
        usable: &known.usable,
    };
    // With no node up (which cannot happen: the local node is up while
    // it is not leaving) the Rewriter fails and everything is forwarded.
    let leaving = known.nodes.leaving_for(known.now).is_some();
    let nodes = if goes_where_shown(body, leaving) {
        known.nodes.snapshot()
    } else {
        Vec::new()
    };
    let split = match Rewriter::new(known.view, &nodes) {
        Ok(shown) => {
            let here = ShownHere {
                routing: &routing,
                shown: &shown,
                local: known.nodes.local_id(),
            };
            let routing = Holding {
                routing: &here,
                held,
            };
            split_request(body, version, &routing)
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
    split.ok_or(PlanError::NotSplittable)
}

/// Plans a group or transaction request for the coordinator of its key
/// (`key_type`): whole to it; looked up first when unknown (not once
/// `refreshed`: then answered COORDINATOR_NOT_AVAILABLE); one part per
/// coordinator when it names several keys of several coordinators; any
/// broker when it has no key (InitProducerId without a transactional id).
pub fn coordinator(
    body: &RequestKind,
    key_type: CoordinatorKeyType,
    view: &ClusterView,
    refreshed: bool,
) -> Plan {
    if let Some((key_type, keys)) = route::keyed::keys(body)
        && keys.len() > 1
    {
        return keyed(body, key_type, keys, view, refreshed);
    }
    let key = route::groups::coordinator_key(body);
    let Some((key_type, key)) = key.filter(|(t, _)| *t == key_type) else {
        return Plan::Whole(Whole {
            dest: Dest::Any,
            post: Post::None,
            on_failure: OnFailure::RetryElsewhere(error_codes::COORDINATOR_NOT_AVAILABLE),
        });
    };
    match view.coordinator(key_type, &key) {
        Some(coordinator) => Plan::Whole(Whole {
            dest: Dest::Broker(coordinator),
            post: Post::Coordinator { key_type, key },
            on_failure: OnFailure::Synthesize(error_codes::NOT_COORDINATOR),
        }),
        None if refreshed => Plan::Fail(error_codes::COORDINATOR_NOT_AVAILABLE),
        None => Plan::Refresh(Lookup::coordinators(key_type, vec![key])),
    }
}

/// A request naming several keys (ConsumerGroupDescribe,
/// DescribeTransactions): whole to their coordinator when every key has
/// the same one, else one part per coordinator (see [`KeyedCombine::plan`]);
/// the unknown coordinators looked up first.
fn keyed(
    body: &RequestKind,
    key_type: CoordinatorKeyType,
    keys: Vec<String>,
    view: &ClusterView,
    refreshed: bool,
) -> Plan {
    if !refreshed {
        let unknown: Vec<String> = keys
            .iter()
            .filter(|k| view.coordinator(key_type, k).is_none())
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Plan::Refresh(Lookup::coordinators(key_type, unknown));
        }
    }
    let by_coordinator = route::keyed::by_coordinator(view, key_type, &keys);
    match KeyedCombine::plan(body, key_type, keys, by_coordinator) {
        KeyedPlan::Whole {
            coordinator,
            post,
            on_failure,
        } => Plan::Whole(Whole {
            dest: Dest::Broker(coordinator),
            post,
            on_failure,
        }),
        KeyedPlan::Parts { parts, combine } => Plan::Parts {
            parts,
            combine: PartsCombine::Keyed(combine),
        },
    }
}

/// Plans an admin request: any broker, its answer post-processed as
/// [`Post::of_admin`] says. A config request whose BROKER/BROKER_LOGGER
/// resources name Sluice nodes (see [`route::admin::configs`]) goes
/// [`Plan::Instead`]: the refused resources stay behind, a Sluice node's go
/// to the real broker standing for it under that broker's id (the broker
/// list looked up first when none is known; no broker: REQUEST_TIMED_OUT);
/// all refused, Sluice answers. `nodes`: the Sluice nodes, asked for only
/// when the API may name brokers.
pub fn admin(
    request: &mut Request,
    admin: Admin,
    view: &ClusterView,
    nodes: impl FnOnce() -> Vec<crate::topology::ShotoverNode>,
    refreshed: bool,
) -> Result<Plan, PlanError> {
    let api = request.api_key();
    if route::admin::configs::may_name_brokers(api) {
        let nodes = nodes();
        let body = request.body()?;
        if let Some(plan) = route::admin::configs::plan(body, &nodes) {
            let mut real = None;
            if let Some(node) = plan.node {
                if !refreshed && view.brokers().next().is_none() {
                    return Ok(Plan::Refresh(Lookup::brokers()));
                }
                real = route::admin::configs::real_broker(view, &nodes, node);
                if real.is_none() {
                    return Ok(Plan::Fail(error_codes::REQUEST_TIMED_OUT));
                }
            }
            let Some(forwarded) = route::admin::configs::forwarded(body, &plan, real) else {
                let answer = crate::rewrite::refused_answer(body, &plan)
                    .ok_or(PlanError::NoAnswerForRefused(api))?;
                return Ok(Plan::Answer(answer));
            };
            return Ok(Plan::Instead {
                dest: real.map_or(Dest::Any, Dest::Broker),
                body: forwarded,
                post: Post::Admin {
                    stale_topics: Vec::new(),
                },
                on_failure: OnFailure::Synthesize(error_codes::REQUEST_TIMED_OUT),
            });
        }
    }
    let post = Post::of_admin(admin, request)?;
    Ok(Plan::Whole(Whole {
        dest: Dest::Any,
        post,
        on_failure: api::describe(api).on_failure,
    }))
}
