//! ShareFetch and ShareAcknowledge planned against the client's share
//! sessions ([`ShareSessions`], see [`crate::route::share`]): which broker
//! gets what, at which epoch, after the leaders the view lacks are looked
//! up; and the parts' answers merged back by the same sessions.

use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use super::{Lookup, PartsCombine, Plan, PlanError};
use crate::error_codes::NOT_LEADER_OR_FOLLOWER;
use crate::route::Stale;
use crate::route::share::ShareSessions;
use crate::route::share::ack::{AckMerge, AckPlan};
use crate::route::share::fetch::{FetchMerge, FetchPlan};
use crate::split::{PartResult, PartitionLeaders};

/// What merging a share request's parts needs.
#[derive(Debug)]
pub enum ShareCombine {
    /// A ShareFetch's.
    Fetch(FetchMerge),
    /// A ShareAcknowledge's.
    Acknowledge(AckMerge),
}

/// Plans a ShareFetch or ShareAcknowledge: the leaders of its partitions
/// the view lacks looked up first (not once `refreshed`), then one part per
/// broker, or the session error a broker would answer.
pub fn plan(
    sessions: &mut ShareSessions,
    api: ApiKey,
    body: &RequestKind,
    leaders: &impl PartitionLeaders,
    refreshed: bool,
) -> Result<Plan, PlanError> {
    if !refreshed {
        let unknown = sessions.unknown_leaders(body, leaders);
        if !unknown.is_empty() {
            return Ok(Plan::Refresh(Lookup::topics(unknown)));
        }
    }
    Ok(match body {
        RequestKind::ShareFetch(f) => match sessions.plan_fetch(f, leaders) {
            FetchPlan::Refused(r) => Plan::Answer(ResponseKind::ShareFetch(r)),
            FetchPlan::Parts(parts, merge) => Plan::Parts {
                parts: parts
                    .into_iter()
                    .map(|(b, r)| (b, RequestKind::ShareFetch(r)))
                    .collect(),
                combine: PartsCombine::Share(Box::new(ShareCombine::Fetch(merge))),
            },
        },
        RequestKind::ShareAcknowledge(a) => match sessions.plan_acknowledge(a, leaders) {
            AckPlan::Refused(r) => Plan::Answer(ResponseKind::ShareAcknowledge(r)),
            AckPlan::Parts(parts, merge) => Plan::Parts {
                parts: parts
                    .into_iter()
                    .map(|(b, r)| (b, RequestKind::ShareAcknowledge(r)))
                    .collect(),
                combine: PartsCombine::Share(Box::new(ShareCombine::Acknowledge(merge))),
            },
        },
        _ => return Err(PlanError::ShareWithoutBody(api)),
    })
}

impl ShareCombine {
    /// The client's answer from the parts' `results` (a failed or
    /// unreadable part: NOT_LEADER_OR_FOLLOWER), and what the view forgets.
    pub fn merge(
        self,
        sessions: &mut ShareSessions,
        results: Vec<PartResult<ResponseKind>>,
    ) -> (ResponseKind, Vec<Stale>) {
        match self {
            ShareCombine::Fetch(merge) => {
                let results = results
                    .into_iter()
                    .map(|r| match r {
                        PartResult::Response(ResponseKind::ShareFetch(f)) => {
                            PartResult::Response(f)
                        }
                        _ => failed_part(),
                    })
                    .collect();
                let (merged, stale) = sessions.merge_fetch(merge, results);
                (ResponseKind::ShareFetch(merged), stale)
            }
            ShareCombine::Acknowledge(merge) => {
                let results = results
                    .into_iter()
                    .map(|r| match r {
                        PartResult::Response(ResponseKind::ShareAcknowledge(a)) => {
                            PartResult::Response(a)
                        }
                        _ => failed_part(),
                    })
                    .collect();
                let (merged, stale) = sessions.merge_acknowledge(merge, results);
                (ResponseKind::ShareAcknowledge(merged), stale)
            }
        }
    }
}

/// A part that failed or answered with something else.
fn failed_part<T>() -> PartResult<T> {
    PartResult::Failed {
        error_code: NOT_LEADER_OR_FOLLOWER,
    }
}
