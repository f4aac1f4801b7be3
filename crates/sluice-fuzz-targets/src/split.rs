//! Target `split`: a client request split over a fake cluster, its parts
//! encoded, and the merge of parts that all failed.
//!
//! Input: byte 0 picks the error code the failed parts report, and the rest
//! is one request frame without its length prefix, as `FrameCodec` hands it
//! over. The frame is parsed and decoded as Sluice does; a request of an api
//! that `split::dispatch::split_request` handles is split over
//! [`FakeRouting`] (three brokers, some partitions and groups without a
//! leader or coordinator). Every part must encode at the client's version
//! unless the request itself does not; then `merge_responses` gets one
//! `PartResult::Failed` per part, and must give a response (also encoded),
//! while a wrong number of results must be an error, not a panic.
//! `SplitAnswers::failure_answer` (the whole request failed) is encoded too.

use bytes::{Bytes, BytesMut};
use sluice_cluster::api::failure::FailureAnswer;
use sluice_cluster::error_codes::ErrorCode;
use sluice_cluster::{PartResult, SplitAnswers, merge_responses, split_request};
use sluice_codec::kafka_protocol::messages::{RequestKind, ResponseKind};
use sluice_codec::{Request, Response};

use crate::fixtures::FakeRouting;

/// Error codes a failed part may report: none, UNKNOWN_SERVER_ERROR,
/// NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE, LEADER_NOT_AVAILABLE,
/// REQUEST_TIMED_OUT, and then whatever byte 0 says.
const ERROR_CODES: [i16; 6] = [0, -1, 6, 15, 5, 7];

/// The error code byte 0 stands for.
pub(crate) fn error_code(byte: u8) -> i16 {
    ERROR_CODES
        .get(usize::from(byte))
        .copied()
        .unwrap_or(i16::from(byte as i8))
}

/// The target (see the module docs).
pub fn split(data: &[u8]) {
    let [code, frame @ ..] = data else {
        return;
    };
    let error_code = ErrorCode::from_wire(error_code(*code));
    let Ok(request) = Request::parse(BytesMut::from(frame)) else {
        return;
    };
    let (api, version) = (request.api_key(), request.api_version());
    let Ok(body) = request.into_body() else {
        return;
    };
    let whole_encodes = encodes(&body, api, version);

    if let Some(failed) = SplitAnswers.failure_answer(api, &body, version, error_code) {
        response_encodes(failed, api, version);
    }

    let Some(split) = split_request(&body, version, &FakeRouting) else {
        return;
    };
    let passthrough = split.passthrough();
    let plan = split.plan;
    assert_eq!(plan.api_key(), api);
    assert_eq!(plan.version(), version);
    assert_eq!(plan.part_count(), split.parts.len());
    let mut brokers: Vec<_> = split.parts.iter().map(|(broker, _)| *broker).collect();
    brokers.sort_unstable();
    brokers.dedup();
    assert_eq!(brokers.len(), split.parts.len(), "a broker gets one part");
    if passthrough.is_some() {
        assert_eq!(split.parts.len(), 1, "a passthrough has one part");
    }
    for (_, part) in &split.parts {
        let part_encodes = encodes(part, api, version);
        if whole_encodes {
            assert!(part_encodes, "{api:?} v{version}: a part does not encode");
        }
    }

    let too_few = (0..plan.part_count().saturating_sub(1))
        .map(|_| PartResult::Failed { error_code })
        .collect();
    let too_many = (0..=plan.part_count())
        .map(|_| PartResult::Failed { error_code })
        .collect();
    if plan.part_count() > 0 {
        assert!(merge_responses(plan.clone(), too_few).is_err());
    }
    assert!(merge_responses(plan.clone(), too_many).is_err());

    let results = (0..plan.part_count())
        .map(|_| PartResult::Failed { error_code })
        .collect();
    let merged = merge_responses(plan, results);
    let Ok(merged) = merged else {
        panic!("{api:?} v{version}: merging failed parts: {merged:?}");
    };
    response_encodes(merged, api, version);
}

/// Whether `body` encodes as a request of `api` at `version`.
fn encodes(body: &RequestKind, api: sluice_codec::ApiKey, version: i16) -> bool {
    let client = Some(Bytes::from_static(b"fuzz"));
    let request = Request::from_body(api, version, 1, client, body.clone());
    request.encode(&mut BytesMut::new()).is_ok()
}

/// Encodes a synthesized response; it may fail (a field the version cannot
/// carry) but must not panic.
fn response_encodes(body: ResponseKind, api: sluice_codec::ApiKey, version: i16) {
    let _ = Response::from_body(api, version, 1, body).encode(&mut BytesMut::new());
}
