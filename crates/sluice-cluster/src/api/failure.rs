//! The answer a client gets when its request (or one part of it) fails:
//! one trait, [`FailureAnswer`], implemented once per API family.
//!
//! Which implementation answers an API is read from its row in the table:
//! [`ApiDescriptor::family`](super::ApiDescriptor::family) picks the family
//! (`route::answers_of`), and
//! [`ApiDescriptor::failure_answer_since`](super::ApiDescriptor::failure_answer_since)
//! says from which version the API's answer has a place for an error at
//! all. The code the answer carries comes from the same row
//! ([`OnFailure`](super::OnFailure)).
//!
//! | family | implementation | the error goes |
//! |---|---|---|
//! | split by leader or coordinator, fan-out | `split::dispatch::SplitAnswers` | into every partition or group of the request (the top level where the protocol has no finer place) |
//! | group coordinator | `route::groups::GroupAnswers` | into the group, or each of its partitions or groups |
//! | transaction coordinator | `route::transactions::TransactionAnswers` | into the transaction, or each of its partitions or ids |
//! | meta | `route::meta::MetaAnswers` | into each FindCoordinator key, or the top level |
//! | admin, not for clients | `route::admin::AdminAnswers` | into each item (topic, resource, ACL), else the top level |
//! | SASL | none | nowhere: a failure closes the client |

use sluice_codec::{ApiKey, RequestKind, ResponseKind};

use crate::error_codes::ErrorCode;

/// Builds the answer to a failed request from the request itself.
pub trait FailureAnswer: Sync {
    /// The answer to `request` (of `api`, decoded at `version`) where every
    /// place the response has for an error carries `code`; `None` when
    /// `api` is not of this family or its response has no place for one
    /// (the caller then closes the client connection).
    fn failure_answer(
        &self,
        api: ApiKey,
        request: &RequestKind,
        version: i16,
        code: ErrorCode,
    ) -> Option<ResponseKind>;
}

/// The family whose answers have no place for an error (SASL).
#[derive(Debug, Clone, Copy)]
pub struct NoAnswer;

impl FailureAnswer for NoAnswer {
    fn failure_answer(
        &self,
        _api: ApiKey,
        _request: &RequestKind,
        _version: i16,
        _code: ErrorCode,
    ) -> Option<ResponseKind> {
        None
    }
}
