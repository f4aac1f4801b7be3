//! Transaction APIs: each goes to the coordinator of its transactional id.
//!
//! - InitProducerId with a transactional id goes to its coordinator; without
//!   one (an idempotent producer) any broker serves it.
//! - AddPartitionsToTxn v0–3 carries one transactional id. v4+ batches
//!   transactions, but only brokers send it (transaction verification,
//!   KIP-890); Sluice sends it whole to the coordinator of its first
//!   transaction, which answers for the others with NOT_COORDINATOR if they
//!   belong elsewhere.
//! - AddOffsetsToTxn and EndTxn go to the transaction coordinator (the group
//!   half of a transactional offset commit, TxnOffsetCommit, is a group API).
//! - DescribeTransactions may name several ids: when they live on one
//!   coordinator it goes there whole, else it is split (see [`super::keyed`]).

use crate::api::failure::FailureAnswer;
use crate::error_codes::ErrorCode;
use sluice_codec::ApiKey;
use sluice_codec::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use sluice_codec::kafka_protocol::messages::describe_transactions_response::TransactionState;
use sluice_codec::kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeTransactionsResponse, EndTxnResponse, InitProducerIdResponse, ProducerId, RequestKind,
    ResponseKind,
};

/// The transactional id a transaction API is about; `None` for other APIs
/// and for InitProducerId without one (null or empty).
pub fn transaction_key(request: &RequestKind) -> Option<String> {
    let id = match request {
        // Null (an idempotent producer) or empty (invalid; any broker says so).
        RequestKind::InitProducerId(r) => {
            r.transactional_id.as_ref().filter(|t| !t.0.is_empty())?
        }
        RequestKind::AddPartitionsToTxn(r) => add_partitions_key(r)?,
        RequestKind::AddOffsetsToTxn(r) => &r.transactional_id,
        RequestKind::EndTxn(r) => &r.transactional_id,
        RequestKind::DescribeTransactions(r) => r.transactional_ids.first()?,
        _ => return None,
    };
    Some(id.0.to_string())
}

/// v0–3 name one transaction in `v3_and_below_transactional_id`; v4+ list
/// them in `transactions` (that field is empty before v4).
fn add_partitions_key(
    r: &AddPartitionsToTxnRequest,
) -> Option<&sluice_codec::kafka_protocol::messages::TransactionalId> {
    match r.transactions.first() {
        Some(t) => Some(&t.transactional_id),
        None if !r.v3_and_below_transactional_id.0.is_empty() => {
            Some(&r.v3_and_below_transactional_id)
        }
        None => None,
    }
}

/// The failure answers of the transaction APIs (to the transaction
/// coordinator).
#[derive(Debug, Clone, Copy)]
pub struct TransactionAnswers;

impl FailureAnswer for TransactionAnswers {
    fn failure_answer(
        &self,
        _api: ApiKey,
        request: &RequestKind,
        _version: i16,
        code: ErrorCode,
    ) -> Option<ResponseKind> {
        error_response(request, code)
    }
}

/// A response to a transaction API where the transaction (or each of its
/// partitions or ids) carries `code`; `None` for other APIs.
fn error_response(request: &RequestKind, code: ErrorCode) -> Option<ResponseKind> {
    let code = code.code();
    Some(match request {
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_failed(r, code))
        }
        RequestKind::AddOffsetsToTxn(_) => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        RequestKind::EndTxn(_) => ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::DescribeTransactions(r) => {
            let states = r.transactional_ids.iter().map(|id| {
                TransactionState::default()
                    .with_transactional_id(id.clone())
                    .with_error_code(code)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            });
            ResponseKind::DescribeTransactions(
                DescribeTransactionsResponse::default().with_transaction_states(states.collect()),
            )
        }
        _ => return None,
    })
}

/// v0–3: every partition carries `code`; v4+: the top-level error does.
fn add_partitions_failed(r: &AddPartitionsToTxnRequest, code: i16) -> AddPartitionsToTxnResponse {
    if !r.transactions.is_empty() {
        return AddPartitionsToTxnResponse::default().with_error_code(code);
    }
    let topics = r.v3_and_below_topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*p)
                .with_partition_error_code(code)
        });
        AddPartitionsToTxnTopicResult::default()
            .with_name(t.name.clone())
            .with_results_by_partition(partitions.collect())
    });
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics.collect())
}

/// Every error code in an answer of a transaction API.
pub fn response_error_codes(response: &ResponseKind) -> Vec<i16> {
    match response {
        ResponseKind::InitProducerId(r) => vec![r.error_code],
        ResponseKind::AddPartitionsToTxn(r) => {
            let mut codes = vec![r.error_code];
            let topics = r.results_by_topic_v3_and_below.iter().chain(
                r.results_by_transaction
                    .iter()
                    .flat_map(|t| &t.topic_results),
            );
            codes.extend(topics.flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            }));
            codes
        }
        ResponseKind::AddOffsetsToTxn(r) => vec![r.error_code],
        ResponseKind::EndTxn(r) => vec![r.error_code],
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.iter().map(|t| t.error_code).collect()
        }
        _ => Vec::new(),
    }
}
