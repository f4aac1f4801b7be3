//! Apis every broker answers for itself: ListGroups (v0–v5), ListTransactions
//! (v0–v2) and DescribeLogDirs (v1–v4).
//!
//! A client asks each node it knows; behind Sluice the answer must cover every
//! broker, so the request goes unchanged to all of them ([`Routing::brokers`]).
//! Since the client asks every Sluice node too, the sink first cuts each
//! broker's answer down to what the local Sluice node is shown to own (the
//! coordinator of a group or transactional id, the leader of a partition; see
//! `rewrite::fan_out`), so that each entry is listed by one Sluice node only.
//! The merge then concatenates the answers, in broker order:
//! - ListGroups: groups deduplicated by group id, the first non-zero error code;
//! - ListTransactions: transactions deduplicated by transactional id,
//!   `unknown_state_filters` as a union, the first non-zero error code;
//! - DescribeLogDirs: results concatenated (log dir names may repeat across
//!   brokers), the first non-zero top-level error code (v3+).
//!
//! A DescribeLogDirs request that names its topics reports, as
//! [`Unroutable::Partition`], the named partitions whose leader the view does
//! not know: the sink then refreshes their metadata before sending, so that
//! the filter knows which broker's copy to keep. They are still asked of every
//! broker, and the merge answers nothing for them (DescribeLogDirs has no
//! per-partition error): the filter places what is still unknown on its own.
//!
//! Throttle time is the largest. A failed broker makes the merged response
//! carry its error code, so that the client retries rather than trusting a
//! partial list (DescribeLogDirs v1–v2 has no error field: the failed
//! broker's directories are simply missing). With no broker known at all, the
//! response is the api's [`SplitApi::UNAVAILABLE_ERROR`].

use sluice_codec::kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, ListGroupsRequest, ListGroupsResponse,
    ListTransactionsRequest, ListTransactionsResponse,
};

use super::order::dedup_by_key;
use super::route;
use super::{PartResult, Plan, Routing, Split, SplitApi, SplitError, TopicRef, Unroutable};
use crate::error_codes::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ErrorCode, NETWORK_EXCEPTION,
};

/// The first DescribeLogDirs version with a top-level error code.
const LOG_DIRS_ERROR_CODE_VERSION: i16 = 3;

impl SplitApi for ListGroupsRequest {
    type Response = ListGroupsResponse;
    const API_KEY: ApiKey = ApiKey::ListGroups;
    const UNAVAILABLE_ERROR: ErrorCode = COORDINATOR_NOT_AVAILABLE;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        route::to_all(self, version, routing.brokers())
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<ListGroupsResponse>>,
    ) -> Result<ListGroupsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        let merged = ListGroupsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_error_code(resolved.error(|r| r.error_code));
        let mut groups: Vec<_> = resolved
            .responses
            .into_iter()
            .flat_map(|r| r.groups)
            .collect();
        dedup_by_key(&mut groups, |g| &g.group_id);
        Ok(merged.with_groups(groups))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> ListGroupsResponse {
        ListGroupsResponse::default().with_error_code(error_code.code())
    }
}

impl SplitApi for ListTransactionsRequest {
    type Response = ListTransactionsResponse;
    const API_KEY: ApiKey = ApiKey::ListTransactions;
    const UNAVAILABLE_ERROR: ErrorCode = COORDINATOR_LOAD_IN_PROGRESS;

    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        route::to_all(self, version, routing.brokers())
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<ListTransactionsResponse>>,
    ) -> Result<ListTransactionsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        let merged = ListTransactionsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_error_code(resolved.error(|r| r.error_code));
        let mut unknown_state_filters = Vec::new();
        let mut transaction_states = Vec::new();
        for response in resolved.responses {
            unknown_state_filters.extend(response.unknown_state_filters);
            transaction_states.extend(response.transaction_states);
        }
        dedup_by_key(&mut unknown_state_filters, |s| s);
        dedup_by_key(&mut transaction_states, |t| &t.transactional_id);
        Ok(merged
            .with_unknown_state_filters(unknown_state_filters)
            .with_transaction_states(transaction_states))
    }

    fn error_response_for(&self, _version: i16, error_code: ErrorCode) -> ListTransactionsResponse {
        ListTransactionsResponse::default().with_error_code(error_code.code())
    }
}

impl SplitApi for DescribeLogDirsRequest {
    type Response = DescribeLogDirsResponse;
    const API_KEY: ApiKey = ApiKey::DescribeLogDirs;
    const UNAVAILABLE_ERROR: ErrorCode = NETWORK_EXCEPTION;

    /// To every broker; named partitions without a known leader are also
    /// reported as unroutable, so that the sink refreshes them first.
    fn split<R: Routing + ?Sized>(&self, version: i16, routing: &R) -> Split<Self> {
        let mut split = route::to_all(self, version, routing.brokers());
        let named = self.topics.iter().flatten();
        for topic in named {
            let topic_ref = TopicRef::Name(topic.topic.clone());
            for &partition in &topic.partitions {
                if routing.leader(&topic_ref, partition).is_none() {
                    split.unroutable.push(Unroutable::Partition {
                        topic: topic_ref.clone(),
                        partition,
                    });
                }
            }
        }
        split
    }

    fn merge(
        plan: Plan<Self>,
        results: Vec<PartResult<DescribeLogDirsResponse>>,
    ) -> Result<DescribeLogDirsResponse, SplitError> {
        let resolved = plan.resolve(results)?;
        let merged = DescribeLogDirsResponse::default()
            .with_throttle_time_ms(resolved.throttle(|r| r.throttle_time_ms))
            .with_error_code(resolved.error(|r| r.error_code));
        Ok(merged.with_results(
            resolved
                .responses
                .into_iter()
                .flat_map(|r| r.results)
                .collect(),
        ))
    }

    /// From v3 the top-level error code carries `error_code`; v1–v2 cannot say
    /// it, and answer with no log dirs.
    fn error_response_for(&self, version: i16, error_code: ErrorCode) -> DescribeLogDirsResponse {
        let response = DescribeLogDirsResponse::default();
        if version >= LOG_DIRS_ERROR_CODE_VERSION {
            response.with_error_code(error_code.code())
        } else {
            response
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use sluice_codec::kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;

    use super::super::tests::{FakeCluster, name};
    use super::*;

    #[test]
    fn named_log_dir_partitions_without_a_leader_ask_for_a_refresh() {
        let topic = |t: &'static str, partitions: Vec<i32>| {
            DescribableLogDirTopic::default()
                .with_topic(name(t))
                .with_partitions(partitions)
        };
        // alpha 0–2 have leaders; gamma 0 has none; delta is unknown.
        let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
            topic("alpha", vec![0, 2]),
            topic("gamma", vec![0]),
            topic("delta", vec![3]),
        ]));
        let split = request.split(4, &FakeCluster::three_brokers());
        let brokers: Vec<i32> = split.parts.iter().map(|(b, _)| b.0).collect();
        assert_eq!(brokers, [1, 2, 3], "still asked of every broker");
        assert!(split.parts.iter().all(|(_, part)| *part == request));
        let unroutable = |t: &'static str, partition| Unroutable::Partition {
            topic: TopicRef::Name(name(t)),
            partition,
        };
        assert_eq!(
            split.unroutable,
            vec![unroutable("gamma", 0), unroutable("delta", 3)]
        );
        // The merge answers nothing for them: DescribeLogDirs has no place.
        let results = vec![PartResult::Response(DescribeLogDirsResponse::default()); 3];
        let merged = DescribeLogDirsRequest::merge(split.plan, results).unwrap();
        assert_eq!(merged, DescribeLogDirsResponse::default());

        // Every topic (null): nothing to refresh by name.
        let all = DescribeLogDirsRequest::default().with_topics(None);
        assert!(
            all.split(4, &FakeCluster::three_brokers())
                .unroutable
                .is_empty()
        );
    }
}
