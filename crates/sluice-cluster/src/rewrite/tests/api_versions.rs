//! ApiVersions intersection, on responses decoded from the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use sluice_codec::kafka_protocol::messages::{ApiKey, ResponseKind};
use sluice_codec::kafka_protocol::protocol::{StrBytes, VersionRange};

use super::super::{codec_versions, intersect_api_versions};
use super::body;
use crate::api::describe;
use crate::topology::fixtures::{reparse, through_wire, wire_bytes};

fn api(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

/// A broker's ApiVersions v3 response, as decoded from the wire.
fn broker(apis: Vec<ApiVersion>) -> ApiVersionsResponse {
    let resp = ApiVersionsResponse::default()
        .with_api_keys(apis)
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str("transaction.version"))
                .with_min_version(0)
                .with_max_version(2),
        ])
        .with_finalized_features_epoch(77)
        .with_finalized_features(vec![
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str("transaction.version"))
                .with_min_version_level(2)
                .with_max_version_level(2),
        ]);
    let wire = through_wire(ApiKey::ApiVersions, 3, ResponseKind::ApiVersions(resp));
    body!(ApiVersions, wire.into_body().unwrap())
}

fn range_of(resp: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
    resp.api_keys
        .iter()
        .find(|a| a.api_key == key as i16)
        .map(|a| (a.min_version, a.max_version))
}

#[test]
fn intersects_brokers_and_sluice() {
    let brokers = [
        broker(vec![
            api(ApiKey::Produce, 3, 13),
            api(ApiKey::Fetch, 4, 17),
            api(ApiKey::Metadata, 0, 13),
            api(ApiKey::EndTxn, 0, 5),
            api(ApiKey::WriteTxnMarkers, 0, 1),
            api(ApiKey::DescribeQuorum, 0, 2),
            api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
            api(ApiKey::ApiVersions, 0, 4),
            ApiVersion::default().with_api_key(999).with_max_version(3),
        ]),
        broker(vec![
            api(ApiKey::ApiVersions, 0, 4),
            api(ApiKey::Produce, 3, 12),
            api(ApiKey::Fetch, 0, 18),
            api(ApiKey::Metadata, 1, 12),
            api(ApiKey::EndTxn, 0, 5),
            api(ApiKey::WriteTxnMarkers, 0, 1),
        ]),
        ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code()),
    ];
    let sluice = |key: ApiKey| match key {
        ApiKey::EndTxn => Some(VersionRange { min: 6, max: 9 }),
        other => codec_versions(other),
    };
    let merged = intersect_api_versions(&brokers, sluice);
    assert_eq!(range_of(&merged, ApiKey::Produce), Some((3, 12)));
    assert_eq!(range_of(&merged, ApiKey::Fetch), Some((4, 17)));
    assert_eq!(
        range_of(&merged, ApiKey::Metadata),
        Some((1, 12)),
        "old versions kept"
    );
    assert_eq!(range_of(&merged, ApiKey::ApiVersions), Some((0, 4)));
    assert_eq!(
        range_of(&merged, ApiKey::EndTxn),
        None,
        "empty intersection"
    );
    assert_eq!(
        range_of(&merged, ApiKey::WriteTxnMarkers),
        None,
        "inter-broker"
    );
    assert_eq!(range_of(&merged, ApiKey::DescribeQuorum), None, "hidden");
    assert_eq!(
        range_of(&merged, ApiKey::ConsumerGroupHeartbeat),
        None,
        "missing on a broker"
    );
    assert_eq!(merged.api_keys.len(), 4, "unknown api 999 dropped");
    assert_eq!(
        merged.api_keys[0].api_key,
        ApiKey::Produce as i16,
        "order kept"
    );
    // Features from the first broker.
    assert_eq!(merged.finalized_features_epoch, 77);
    assert_eq!(merged.finalized_features[0].min_version_level, 2);
    assert_eq!(&*merged.supported_features[0].name, "transaction.version");

    // It encodes for any ApiVersions version a client may use.
    for version in 0..=4 {
        let resp = through_wire(
            ApiKey::ApiVersions,
            version,
            ResponseKind::ApiVersions(merged.clone()),
        );
        let bytes = wire_bytes(&resp);
        match reparse(&bytes, ApiKey::ApiVersions, version).into_body() {
            Ok(ResponseKind::ApiVersions(r)) => assert_eq!(r.api_keys.len(), 4),
            other => panic!("v{version}: unexpected body {other:?}"),
        }
    }
}

#[test]
fn degenerate_inputs() {
    assert_eq!(
        intersect_api_versions(&[], codec_versions),
        ApiVersionsResponse::default()
    );
    let failed =
        ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code());
    let merged = intersect_api_versions(std::slice::from_ref(&failed), codec_versions);
    assert_eq!(merged, failed);
}

#[test]
fn client_facing_decisions() {
    for key in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::ApiVersions,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
        ApiKey::CreateDelegationToken,
        ApiKey::ConsumerGroupHeartbeat,
        ApiKey::ShareFetch,
        ApiKey::GetTelemetrySubscriptions,
        ApiKey::PushTelemetry,
        ApiKey::DescribeCluster,
        ApiKey::UpdateFeatures,
        ApiKey::DescribeTopicPartitions,
    ] {
        assert!(describe(key).is_client_facing(), "{key:?}");
    }
    for key in [
        ApiKey::WriteTxnMarkers,
        ApiKey::Vote,
        ApiKey::AlterPartition,
        ApiKey::Envelope,
        ApiKey::BrokerHeartbeat,
        ApiKey::AllocateProducerIds,
        ApiKey::ReadShareGroupState,
        ApiKey::DescribeQuorum,
    ] {
        assert!(!describe(key).is_client_facing(), "{key:?}");
    }
}
