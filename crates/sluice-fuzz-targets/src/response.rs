//! Target `response`: a broker's answer, lazily decoded, rewritten and
//! written out both ways.
//!
//! Input: byte 0 picks the api among the ones Sluice decodes
//! (`sluice_codec::versions::DECODED`, and the split and rewritten apis it
//! does not list), byte 1 the version within its range,
//! and the rest is one response frame without its length prefix
//! (correlation id, header, body), as `FrameCodec` hands it over.
//!
//! Each step must not panic, and at each step `Response::encode` and
//! `Response::encode_into` (the vectored path, which for a re-encoded Fetch
//! lays the structure out around the shared record batches) must write the
//! same bytes. The rewrites are the public ones of `sluice-sink-cluster`:
//! `Rewriter::rewrite_response` (Metadata, FindCoordinator, DescribeCluster,
//! DescribeTopicPartitions), `Rewriter::rewrite_leader_hints` (Produce,
//! Fetch), `Rewriter::fan_out` (ListGroups, ListTransactions,
//! DescribeLogDirs), `rewrite_configs_answer` (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs) and `intersect_api_versions` (ApiVersions). The
//! helpers they call (`choose`, `metadata`, ...) are private and reached only
//! through these.

use bytes::BytesMut;
use sluice_cluster::{
    PartResult, Rewriter, codec_versions, intersect_api_versions, rewrite_configs_answer,
};
use sluice_codec::kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, BrokerId, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    RequestKind, ResponseKind, alter_configs_request, describe_configs_request,
    incremental_alter_configs_request,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::versions::DECODED;
use sluice_codec::{OutFrames, Request, Response};

use crate::fixtures::{cluster_view, sluice_nodes};
use crate::wire::drain;

/// Apis whose answers Sluice decodes (to split, merge or rewrite them) but
/// that `DECODED` does not list, with `kafka-protocol`'s version ranges.
const MORE_APIS: [ApiKey; 6] = [
    ApiKey::DescribeTopicPartitions,
    ApiKey::ListTransactions,
    ApiKey::DescribeLogDirs,
    ApiKey::DescribeProducers,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
];

/// Every api byte 0 may pick, with its version range: `DECODED`, then
/// [`MORE_APIS`].
fn apis() -> impl Iterator<Item = (ApiKey, i16, i16)> {
    let decoded = DECODED.iter().map(|r| (r.api_key, r.min, r.max));
    let more = MORE_APIS.iter().map(|api| {
        let range = api.valid_versions();
        (*api, range.min, range.max)
    });
    decoded.chain(more)
}

/// The api and version `data` starts with, and the frame after them.
pub(crate) fn pick(data: &[u8]) -> Option<(ApiKey, i16, &[u8])> {
    let [api, version, frame @ ..] = data else {
        return None;
    };
    let count = DECODED.len() + MORE_APIS.len();
    let (api, min, max) = apis().nth(usize::from(*api) % count)?;
    let span = u16::try_from(max - min + 1).ok()?;
    let offset = i16::try_from(u16::from(*version) % span).ok()?;
    Some((api, min + offset, frame))
}

/// The two bytes [`pick`] reads back as `api` at `version`, if it is one.
pub(crate) fn prefix(api: ApiKey, version: i16) -> Option<[u8; 2]> {
    let (index, (_, min, max)) = apis().enumerate().find(|(_, (a, _, _))| *a == api)?;
    if !(min..=max).contains(&version) {
        return None;
    }
    Some([u8::try_from(index).ok()?, u8::try_from(version - min).ok()?])
}

/// The target (see the module docs).
pub fn response(data: &[u8]) {
    let Some((api, version, frame)) = pick(data) else {
        return;
    };
    let Ok(raw) = Response::parse(BytesMut::from(frame), api, version) else {
        return;
    };
    assert_eq!((raw.api_key(), raw.api_version()), (api, version));
    let raw_out = check_out(&raw, "raw");
    if let Some(raw_out) = &raw_out {
        // Untouched, the frame leaves as it came.
        assert_eq!(&raw_out[4..], frame, "a raw frame leaves unchanged");
    }

    let mut read = raw.clone();
    if read.body().is_err() {
        return;
    }
    // Reading the body leaves the frame as it was.
    assert!(!read.is_dirty());
    assert_eq!(check_out(&read, "read"), raw_out);

    let mut edited = raw.clone();
    if edited.body_mut().is_ok() {
        check_out(&edited, "re-encoded");
    }

    rewrite(&raw, api, version);
}

/// Runs the public rewrites that apply to `raw` and writes the results out.
fn rewrite(raw: &Response, api: ApiKey, version: i16) {
    let view = cluster_view();
    let nodes = sluice_nodes();
    let Ok(rewriter) = Rewriter::new(&view, &nodes) else {
        return;
    };

    let mut resp = raw.clone();
    if rewriter
        .rewrite_response(&mut resp, Some("fuzz-group"))
        .is_ok_and(|done| done)
    {
        check_out(&resp, "rewritten");
    }
    let mut resp = raw.clone();
    if rewriter
        .rewrite_leader_hints(&mut resp)
        .is_ok_and(|done| done)
    {
        check_out(&resp, "leader hints rewritten");
    }

    if let Some(request) = config_request(api) {
        let mut request = Request::from_body(api, version, 7, None, request);
        let mut resp = raw.clone();
        if rewrite_configs_answer(&mut resp, &mut request, &nodes).is_ok_and(|done| done) {
            check_out(&resp, "configs rewritten");
        }
    }

    let Ok(body) = raw.clone().into_body() else {
        return;
    };
    match body {
        ResponseKind::ApiVersions(versions) => {
            let merged = intersect_api_versions(&[versions.clone(), versions], codec_versions);
            let built = Response::from_body(api, version, 7, ResponseKind::ApiVersions(merged));
            check_out(&built, "api versions intersected");
        }
        body @ (ResponseKind::ListGroups(_)
        | ResponseKind::ListTransactions(_)
        | ResponseKind::DescribeLogDirs(_)) => {
            let brokers = [BrokerId(1), BrokerId(2)];
            let mut results = vec![
                PartResult::Response(body.clone()),
                PartResult::Response(body),
            ];
            rewriter.fan_out(BrokerId(100), &brokers, &mut results);
            for result in results {
                if let PartResult::Response(body) = result {
                    check_out(&Response::from_body(api, version, 7, body), "fanned out");
                }
            }
        }
        _ => {}
    }
}

/// A config request of `api` naming brokers by Sluice node id (the local
/// node, another node, a real broker id) and a topic, for
/// `rewrite_configs_answer` to plan against.
fn config_request(api: ApiKey) -> Option<RequestKind> {
    let names = ["100", "101", "2", ""];
    let name = |n: &str| StrBytes::from_string(n.to_owned());
    Some(match api {
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(
                names
                    .iter()
                    .map(|n| {
                        describe_configs_request::DescribeConfigsResource::default()
                            .with_resource_type(4)
                            .with_resource_name(name(n))
                    })
                    .chain(
                        [describe_configs_request::DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(name("alpha"))],
                    )
                    .collect(),
            ),
        ),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(
            AlterConfigsRequest::default().with_resources(
                names
                    .iter()
                    .map(|n| {
                        alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(8)
                            .with_resource_name(name(n))
                    })
                    .collect(),
            ),
        ),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(
                names
                    .iter()
                    .map(|n| {
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(4)
                            .with_resource_name(name(n))
                    })
                    .collect(),
            ),
        ),
        _ => return None,
    })
}

/// Writes `resp` with `encode` and with `encode_into`, checks that they
/// agree (bytes on success, and failing together), and returns the bytes.
fn check_out(resp: &Response, what: &str) -> Option<Vec<u8>> {
    let mut flat = BytesMut::new();
    let flat_result = resp.encode(&mut flat);
    let mut out = OutFrames::default();
    out.buf_mut().extend_from_slice(b"before");
    let into_result = resp.encode_into(&mut out);
    let vectored = drain(&mut out);
    let (api, version) = (resp.api_key(), resp.api_version());
    match (flat_result, into_result) {
        (Ok(()), Ok(())) => {
            assert_eq!(
                &vectored[6..],
                &flat[..],
                "{what} {api:?} v{version}: encode_into and encode differ"
            );
            let len = i32::from_be_bytes([flat[0], flat[1], flat[2], flat[3]]);
            assert_eq!(
                usize::try_from(len).ok(),
                Some(flat.len() - 4),
                "{what}: length prefix"
            );
            Some(flat.to_vec())
        }
        (Err(_), Err(_)) => {
            // On error both leave their output as it was.
            assert!(flat.is_empty(), "{what}: encode left bytes behind");
            assert_eq!(vectored, b"before", "{what}: encode_into left bytes behind");
            None
        }
        (flat, into) => {
            panic!("{what} {api:?} v{version}: encode gave {flat:?} but encode_into {into:?}")
        }
    }
}
