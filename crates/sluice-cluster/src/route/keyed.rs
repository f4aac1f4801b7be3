//! ConsumerGroupDescribe, StreamsGroupDescribe, ShareGroupDescribe,
//! DescribeShareGroupOffsets and DescribeTransactions:
//! requests naming several keys that may live on different coordinators,
//! split by coordinator here.
//!
//! A Java admin client batches these by the node FindCoordinator named. Behind
//! Sluice one node stands in for many real coordinators, so one batch can
//! hold keys of several brokers; sent whole, the keys of the other brokers
//! would answer NOT_COORDINATOR forever. So the request is cut into one part
//! per coordinator (keys in request order), and the answers are concatenated
//! in request order with the largest throttle time. Keys without a known
//! coordinator, and the keys of a failed part, get `code` (NOT_COORDINATOR
//! or COORDINATOR_NOT_AVAILABLE), which makes the client look them up again.

use sluice_codec::kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
use sluice_codec::kafka_protocol::messages::describe_transactions_response::TransactionState;
use sluice_codec::kafka_protocol::messages::share_group_describe_response::DescribedGroup as DescribedShareGroup;
use sluice_codec::kafka_protocol::messages::streams_group_describe_response::DescribedGroup as DescribedStreamsGroup;
use sluice_codec::kafka_protocol::messages::{
    ConsumerGroupDescribeResponse, DescribeShareGroupOffsetsResponse, DescribeTransactionsResponse,
    GroupId, ProducerId, RequestKind, ResponseKind, ShareGroupDescribeResponse,
    StreamsGroupDescribeResponse, TransactionalId,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::Stale;
use crate::error_codes::ErrorCode;
use crate::split::Coordinators;
use crate::topology::{BrokerId, CoordinatorKeyType, Staleness, staleness};

/// The keys of a multi-key coordinator request, or `None` for other APIs.
pub fn keys(request: &RequestKind) -> Option<(CoordinatorKeyType, Vec<String>)> {
    match request {
        RequestKind::ConsumerGroupDescribe(r) => Some((
            CoordinatorKeyType::Group,
            r.group_ids.iter().map(|g| g.0.to_string()).collect(),
        )),
        RequestKind::StreamsGroupDescribe(r) => Some((
            CoordinatorKeyType::Group,
            r.group_ids.iter().map(|g| g.0.to_string()).collect(),
        )),
        RequestKind::ShareGroupDescribe(r) => Some((
            CoordinatorKeyType::Group,
            r.group_ids.iter().map(|g| g.0.to_string()).collect(),
        )),
        RequestKind::DescribeShareGroupOffsets(r) => Some((
            CoordinatorKeyType::Group,
            r.groups.iter().map(|g| g.group_id.0.to_string()).collect(),
        )),
        RequestKind::DescribeTransactions(r) => Some((
            CoordinatorKeyType::Transaction,
            r.transactional_ids
                .iter()
                .map(|t| t.0.to_string())
                .collect(),
        )),
        _ => None,
    }
}

/// A copy of `request` asking only about `keys`.
pub fn with_keys(request: &RequestKind, keys: &[String]) -> RequestKind {
    let str = |k: &String| StrBytes::from_string(k.clone());
    match request {
        RequestKind::ConsumerGroupDescribe(r) => RequestKind::ConsumerGroupDescribe(
            r.clone()
                .with_group_ids(keys.iter().map(|k| GroupId(str(k))).collect()),
        ),
        RequestKind::StreamsGroupDescribe(r) => RequestKind::StreamsGroupDescribe(
            r.clone()
                .with_group_ids(keys.iter().map(|k| GroupId(str(k))).collect()),
        ),
        RequestKind::ShareGroupDescribe(r) => RequestKind::ShareGroupDescribe(
            r.clone()
                .with_group_ids(keys.iter().map(|k| GroupId(str(k))).collect()),
        ),
        RequestKind::DescribeShareGroupOffsets(r) => {
            let groups = keys
                .iter()
                .filter_map(|k| r.groups.iter().find(|g| g.group_id.0.as_str() == k))
                .cloned()
                .collect();
            RequestKind::DescribeShareGroupOffsets(r.clone().with_groups(groups))
        }
        RequestKind::DescribeTransactions(r) => RequestKind::DescribeTransactions(
            r.clone()
                .with_transactional_ids(keys.iter().map(|k| TransactionalId(str(k))).collect()),
        ),
        other => other.clone(),
    }
}

/// `keys` grouped by their coordinator in `view` (`None`: unknown), in
/// first-use order: one part per coordinator.
pub fn by_coordinator<C: Coordinators + ?Sized>(
    view: &C,
    key_type: CoordinatorKeyType,
    keys: &[String],
) -> Vec<(Option<BrokerId>, Vec<String>)> {
    let mut groups: Vec<(Option<BrokerId>, Vec<String>)> = Vec::new();
    for key in keys {
        let coordinator = view.coordinator(key_type, key);
        match groups.iter_mut().find(|(c, _)| *c == coordinator) {
            Some((_, group)) => group.push(key.clone()),
            None => groups.push((coordinator, vec![key.clone()])),
        }
    }
    groups
}

/// One part's outcome: its answer, or the keys it asked about and the
/// error code to give them.
// Short-lived, a handful per admin request: no point boxing the answer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum KeyedResult {
    /// The coordinator answered.
    Answer(ResponseKind),
    /// No answer for these keys.
    Failed(Vec<String>, ErrorCode),
}

/// Merges the parts' outcomes into one answer, entries in the order of
/// `order` (the request's keys). `None` when `request` is not a multi-key
/// API.
pub fn merge(
    request: &RequestKind,
    results: Vec<KeyedResult>,
    order: &[String],
) -> Option<ResponseKind> {
    match request {
        RequestKind::ConsumerGroupDescribe(_) => {
            let (throttle, groups) = gather(
                results,
                order,
                |answer| match answer {
                    ResponseKind::ConsumerGroupDescribe(r) => Some((r.throttle_time_ms, r.groups)),
                    _ => None,
                },
                |key, code| {
                    DescribedGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(key.to_owned())))
                        .with_error_code(code.code())
                },
                |g| g.group_id.0.as_str(),
            );
            Some(ResponseKind::ConsumerGroupDescribe(
                ConsumerGroupDescribeResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_groups(groups),
            ))
        }
        RequestKind::StreamsGroupDescribe(_) => {
            let (throttle, groups) = gather(
                results,
                order,
                |answer| match answer {
                    ResponseKind::StreamsGroupDescribe(r) => Some((r.throttle_time_ms, r.groups)),
                    _ => None,
                },
                |key, code| {
                    DescribedStreamsGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(key.to_owned())))
                        .with_error_code(code.code())
                },
                |g| g.group_id.0.as_str(),
            );
            Some(ResponseKind::StreamsGroupDescribe(
                StreamsGroupDescribeResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_groups(groups),
            ))
        }
        RequestKind::ShareGroupDescribe(_) => {
            let (throttle, groups) = gather(
                results,
                order,
                |answer| match answer {
                    ResponseKind::ShareGroupDescribe(r) => Some((r.throttle_time_ms, r.groups)),
                    _ => None,
                },
                |key, code| {
                    DescribedShareGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(key.to_owned())))
                        .with_error_code(code.code())
                },
                |g| g.group_id.0.as_str(),
            );
            Some(ResponseKind::ShareGroupDescribe(
                ShareGroupDescribeResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_groups(groups),
            ))
        }
        RequestKind::DescribeShareGroupOffsets(_) => {
            let (throttle, groups) = gather(
                results,
                order,
                |answer| match answer {
                    ResponseKind::DescribeShareGroupOffsets(r) => {
                        Some((r.throttle_time_ms, r.groups))
                    }
                    _ => None,
                },
                |key, code| {
                    DescribeShareGroupOffsetsResponseGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(key.to_owned())))
                        .with_error_code(code.code())
                },
                |g| g.group_id.0.as_str(),
            );
            Some(ResponseKind::DescribeShareGroupOffsets(
                DescribeShareGroupOffsetsResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_groups(groups),
            ))
        }
        RequestKind::DescribeTransactions(_) => {
            let (throttle, states) = gather(
                results,
                order,
                |answer| match answer {
                    ResponseKind::DescribeTransactions(r) => {
                        Some((r.throttle_time_ms, r.transaction_states))
                    }
                    _ => None,
                },
                |key, code| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(
                            key.to_owned(),
                        )))
                        .with_error_code(code.code())
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1)
                },
                |s| s.transactional_id.0.as_str(),
            );
            Some(ResponseKind::DescribeTransactions(
                DescribeTransactionsResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_transaction_states(states),
            ))
        }
        _ => None,
    }
}

/// The entries of every part's answer (`entries` takes them out of an
/// answer of the right API) and an entry with the part's error code for
/// each key of a failed part (`failed`), in the order of `order` (by
/// `key_of`), with the largest throttle time of the answers.
fn gather<E>(
    results: Vec<KeyedResult>,
    order: &[String],
    entries: impl Fn(ResponseKind) -> Option<(i32, Vec<E>)>,
    failed: impl Fn(&str, ErrorCode) -> E,
    key_of: impl Fn(&E) -> &str,
) -> (i32, Vec<E>) {
    let mut throttle = 0;
    let mut all = Vec::new();
    for result in results {
        match result {
            KeyedResult::Answer(answer) => {
                if let Some((t, e)) = entries(answer) {
                    throttle = throttle.max(t);
                    all.extend(e);
                }
            }
            KeyedResult::Failed(keys, code) => all.extend(keys.iter().map(|k| failed(k, code))),
        }
    }
    let rank = |key: &str| order.iter().position(|k| k == key).unwrap_or(usize::MAX);
    all.sort_by_key(|e| rank(key_of(e)));
    (throttle, all)
}

/// The keys whose coordinator moved, from a merged answer.
pub fn stale(response: &ResponseKind) -> Vec<Stale> {
    let entries: Vec<(CoordinatorKeyType, &str, i16)> = match response {
        ResponseKind::ConsumerGroupDescribe(r) => r
            .groups
            .iter()
            .map(|g| {
                (
                    CoordinatorKeyType::Group,
                    g.group_id.0.as_str(),
                    g.error_code,
                )
            })
            .collect(),
        ResponseKind::StreamsGroupDescribe(r) => r
            .groups
            .iter()
            .map(|g| {
                (
                    CoordinatorKeyType::Group,
                    g.group_id.0.as_str(),
                    g.error_code,
                )
            })
            .collect(),
        ResponseKind::ShareGroupDescribe(r) => r
            .groups
            .iter()
            .map(|g| {
                (
                    CoordinatorKeyType::Group,
                    g.group_id.0.as_str(),
                    g.error_code,
                )
            })
            .collect(),
        ResponseKind::DescribeShareGroupOffsets(r) => r
            .groups
            .iter()
            .map(|g| {
                (
                    CoordinatorKeyType::Group,
                    g.group_id.0.as_str(),
                    g.error_code,
                )
            })
            .collect(),
        ResponseKind::DescribeTransactions(r) => r
            .transaction_states
            .iter()
            .map(|t| {
                let id = t.transactional_id.0.as_str();
                (CoordinatorKeyType::Transaction, id, t.error_code)
            })
            .collect(),
        _ => Vec::new(),
    };
    entries
        .into_iter()
        .filter(|(_, _, code)| {
            staleness(ErrorCode::from_wire(*code)) == Some(Staleness::Coordinator)
        })
        .map(|(kind, key, _)| Stale::Coordinator(kind, key.to_owned()))
        .collect()
}
