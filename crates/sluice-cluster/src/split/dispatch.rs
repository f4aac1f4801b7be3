//! The split apis behind one `RequestKind` / `ResponseKind` front, for a sink
//! driver that keeps every in-flight request in one queue.
//!
//! [`split_request`] says whether an api is split here at all; [`MergePlan`]
//! remembers which api a split was for, so that [`merge_responses`] needs no
//! type parameter; [`SplitAnswers`] builds the failure answer of any split
//! api.

use sluice_codec::kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteRecordsRequest, DescribeGroupsRequest,
    DescribeLogDirsRequest, DescribeProducersRequest, FetchRequest, ListGroupsRequest,
    ListOffsetsRequest, ListTransactionsRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, RequestKind, ResponseKind,
};

use crate::api::failure::FailureAnswer;
use crate::error_codes::ErrorCode;

use super::{BrokerId, PartResult, Plan, Routing, Split, SplitApi, SplitError, Unroutable};

/// A [`Split`] with its parts as `RequestKind`s.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    /// What to send where, at the client's api version (see [`Split::parts`]).
    pub parts: Vec<(BrokerId, RequestKind)>,
    /// What no broker can serve (see [`Split::unroutable`]).
    pub unroutable: Vec<Unroutable>,
    /// What [`merge_responses`] needs.
    pub plan: MergePlan,
    passthrough: Option<BrokerId>,
}

impl SplitRequest {
    /// See [`Split::passthrough`].
    pub fn passthrough(&self) -> Option<BrokerId> {
        self.passthrough
    }
}

macro_rules! split_apis {
    ($($api:ident: $req:ty,)*) => {
        /// The [`Plan`] of a split, tagged with its api.
        #[derive(Debug, Clone)]
        pub enum MergePlan {
            $(
                #[doc = concat!("A ", stringify!($api), " split.")]
                $api(Plan<$req>),
            )*
        }

        impl MergePlan {
            /// The api the plan merges.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(MergePlan::$api(_) => ApiKey::$api,)*
                }
            }

            /// The client's api version.
            pub fn version(&self) -> i16 {
                match self {
                    $(MergePlan::$api(plan) => plan.version(),)*
                }
            }

            /// How many results [`merge_responses`] expects.
            pub fn part_count(&self) -> usize {
                match self {
                    $(MergePlan::$api(plan) => plan.part_count(),)*
                }
            }
        }

        /// Splits `request` (decoded at `version`); `None` when its api is not
        /// split by this module (send it whole to the broker the sink picks).
        pub fn split_request<R: Routing + ?Sized>(
            request: &RequestKind,
            version: i16,
            routing: &R,
        ) -> Option<SplitRequest> {
            match request {
                $(RequestKind::$api(r) => Some(erase(r.split(version, routing), MergePlan::$api)),)*
                _ => None,
            }
        }

        /// Merges one result per part, in the order of `SplitRequest::parts`.
        pub fn merge_responses(
            plan: MergePlan,
            results: Vec<PartResult<ResponseKind>>,
        ) -> Result<ResponseKind, SplitError> {
            match plan {
                $(MergePlan::$api(plan) => {
                    let version = plan.version();
                    let typed = typed_results(results, ApiKey::$api, version, |kind| match kind {
                        ResponseKind::$api(r) => Ok(r),
                        other => Err(response_name(&other)),
                    })?;
                    <$req as SplitApi>::merge(plan, typed).map(ResponseKind::$api)
                })*
            }
        }

        /// The failure answers of the split apis: a full response to the
        /// request where every partition or group carries the code (see
        /// [`SplitApi::error_response_for`]); `None` for apis not split by
        /// this module.
        #[derive(Debug, Clone, Copy)]
        pub struct SplitAnswers;

        impl FailureAnswer for SplitAnswers {
            fn failure_answer(
                &self,
                _api: ApiKey,
                request: &RequestKind,
                version: i16,
                code: ErrorCode,
            ) -> Option<ResponseKind> {
                match request {
                    $(RequestKind::$api(r) => {
                        Some(ResponseKind::$api(r.error_response_for(version, code)))
                    })*
                    _ => None,
                }
            }
        }

        /// The error code to synthesize for parts of `api` that no broker
        /// serves or whose broker failed ([`SplitApi::UNAVAILABLE_ERROR`]);
        /// `None` for apis this module does not split.
        pub fn unavailable_error(api: ApiKey) -> Option<ErrorCode> {
            match api {
                $(ApiKey::$api => Some(<$req as SplitApi>::UNAVAILABLE_ERROR),)*
                _ => None,
            }
        }

        /// The name of a response's api, for error messages.
        fn response_name(response: &ResponseKind) -> &'static str {
            match response {
                $(ResponseKind::$api(_) => stringify!($api),)*
                _ => "other api's",
            }
        }
    };
}

split_apis! {
    Produce: ProduceRequest,
    Fetch: FetchRequest,
    ListOffsets: ListOffsetsRequest,
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest,
    DeleteRecords: DeleteRecordsRequest,
    DescribeProducers: DescribeProducersRequest,
    ListGroups: ListGroupsRequest,
    ListTransactions: ListTransactionsRequest,
    DescribeLogDirs: DescribeLogDirsRequest,
    OffsetFetch: OffsetFetchRequest,
    DescribeGroups: DescribeGroupsRequest,
    DeleteGroups: DeleteGroupsRequest,
}

/// Turns a typed split into a [`SplitRequest`].
fn erase<Req: SplitApi + Into<RequestKind>>(
    split: Split<Req>,
    tag: impl FnOnce(Plan<Req>) -> MergePlan,
) -> SplitRequest {
    let passthrough = split.passthrough();
    SplitRequest {
        parts: split
            .parts
            .into_iter()
            .map(|(broker, part)| (broker, part.into()))
            .collect(),
        unroutable: split.unroutable,
        plan: tag(split.plan),
        passthrough,
    }
}

/// Unwraps each result's `ResponseKind` into the api's response type.
fn typed_results<Resp>(
    results: Vec<PartResult<ResponseKind>>,
    api: ApiKey,
    version: i16,
    unwrap: impl Fn(ResponseKind) -> Result<Resp, &'static str>,
) -> Result<Vec<PartResult<Resp>>, SplitError> {
    results
        .into_iter()
        .enumerate()
        .map(|(part, result)| match result {
            PartResult::Response(kind) => {
                unwrap(kind)
                    .map(PartResult::Response)
                    .map_err(|got| SplitError::WrongResponse {
                        api,
                        version,
                        part,
                        got,
                    })
            }
            PartResult::Failed { error_code } => Ok(PartResult::Failed { error_code }),
        })
        .collect()
}
