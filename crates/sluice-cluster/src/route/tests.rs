//! Tests of the routing decisions, one file per API family under
//! `route/tests/`, sharing the fixtures here: [`name`], [`group`], the
//! encode-and-decode [`round_trip`] every synthesized answer must survive at
//! every version a client may use ([`client_versions`]).
//!
//! Here: the routing table itself (families, offered versions, failure
//! policies). `errors`: synthesized answers; `admin`: admin and inter-broker
//! APIs; `groups` and `keyed`: coordinator keys, multi-key splits;
//! `produce_fetch`: staleness and the Fetch header walk; `meta`: internal
//! requests and the versions offered to clients; `streams`: the Streams
//! group APIs (KIP-1071) and the audit of their answers' fields.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod errors;
mod failure;
mod groups;
mod keyed;
mod leaving;
mod meta;
mod produce_fetch;
mod refresh;
mod streams;

use bytes::BytesMut;
use sluice_codec::kafka_protocol::ResponseError;
use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Response, ResponseKind};

use crate::error_codes::{NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT};

/// The routing family of `api`, from the API table.
fn family(api: ApiKey) -> Family {
    crate::api::describe(api).family
}

/// The failure policy of `api`, from the API table.
fn on_failure(api: ApiKey) -> OnFailure {
    crate::api::describe(api).on_failure
}

use super::*;

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

fn group(s: &'static str) -> GroupId {
    GroupId(StrBytes::from_static_str(s))
}

/// Encodes `body` as the answer to `api`/`version` and decodes it back.
fn round_trip(api: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
    let mut buf = BytesMut::new();
    Response::from_body(api, version, 1, body)
        .encode(&mut buf)
        .unwrap_or_else(|e| panic!("{api:?} v{version} does not encode: {e}"));
    let frame = buf.split_off(4);
    Response::parse(frame, api, version)
        .unwrap()
        .into_body()
        .unwrap_or_else(|e| panic!("{api:?} v{version} does not decode: {e}"))
}

/// Every version of `api` a client could send through Sluice.
fn client_versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let range = offered_versions(api).unwrap_or_else(|| api.valid_versions());
    range.min..=range.max
}

/// The admin family with these flags.
fn admin_family(write: bool, marks_topics_stale: bool) -> Family {
    Family::Admin(Admin {
        write,
        marks_topics_stale,
    })
}

#[test]
fn families() {
    use ApiKey as K;
    let cases = [
        (K::ApiVersions, Family::Meta(Meta::ApiVersions)),
        (K::Metadata, Family::Meta(Meta::Metadata)),
        (K::FindCoordinator, Family::Meta(Meta::FindCoordinator)),
        (K::DescribeCluster, Family::Meta(Meta::DescribeCluster)),
        (K::Produce, Family::ByLeader),
        (K::Fetch, Family::ByLeader),
        (K::ListOffsets, Family::ByLeader),
        (K::OffsetForLeaderEpoch, Family::ByLeader),
        (K::DeleteRecords, Family::ByLeader),
        (K::DescribeProducers, Family::ByLeader),
        (K::OffsetFetch, Family::ByCoordinator),
        (K::DescribeGroups, Family::ByCoordinator),
        (K::DeleteGroups, Family::ByCoordinator),
        (K::JoinGroup, Family::Coordinator(CoordinatorKeyType::Group)),
        (
            K::TxnOffsetCommit,
            Family::Coordinator(CoordinatorKeyType::Group),
        ),
        (
            K::ConsumerGroupHeartbeat,
            Family::Coordinator(CoordinatorKeyType::Group),
        ),
        (
            K::EndTxn,
            Family::Coordinator(CoordinatorKeyType::Transaction),
        ),
        (
            K::InitProducerId,
            Family::Coordinator(CoordinatorKeyType::Transaction),
        ),
        (K::ListGroups, Family::FanOut),
        (K::ListTransactions, Family::FanOut),
        (K::DescribeLogDirs, Family::FanOut),
        (K::SaslHandshake, Family::Sasl),
        (K::SaslAuthenticate, Family::Sasl),
        (K::WriteTxnMarkers, Family::NotForClients),
        (K::Vote, Family::NotForClients),
        (K::DescribeQuorum, Family::NotForClients),
        (K::CreateTopics, admin_family(true, true)),
        (K::DescribeConfigs, admin_family(false, false)),
        (K::IncrementalAlterConfigs, admin_family(true, false)),
        // A read to any broker, retried elsewhere; its answer is rewritten.
        (K::DescribeTopicPartitions, admin_family(false, false)),
    ];
    for (api, want) in cases {
        assert_eq!(family(api), want, "{api:?}");
    }
    assert_eq!(
        on_failure(K::DescribeTopicPartitions),
        OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
    );
}

#[test]
fn offered_versions_clamp_to_what_sluice_decodes() {
    let produce = offered_versions(ApiKey::Produce).unwrap();
    assert_eq!((produce.min, produce.max), (3, 13));
    let init = offered_versions(ApiKey::InitProducerId).unwrap();
    assert_eq!(init.max, 5, "kafka-protocol overstates InitProducerId");
    let api_versions = offered_versions(ApiKey::ApiVersions).unwrap();
    assert_eq!(api_versions.max, 4, "v5 names a node id (KIP-1242)");
    // Admin APIs forwarded undecoded keep the codec's range.
    let partitions = offered_versions(ApiKey::CreatePartitions).unwrap();
    assert_eq!(partitions, ApiKey::CreatePartitions.valid_versions());
    assert!(offered_versions(ApiKey::IncrementalAlterConfigs).is_some());
    // Routed by their bodies, though not in the codec's DECODED table: every
    // version both sides decode, so that admin tools can use them.
    let routed_by_body = [
        ApiKey::DescribeProducers,
        ApiKey::DeleteGroups,
        ApiKey::OffsetDelete,
        ApiKey::DescribeTransactions,
        ApiKey::ListTransactions,
        ApiKey::DescribeLogDirs,
        ApiKey::ShareGroupHeartbeat,
        ApiKey::ShareGroupDescribe,
        ApiKey::ShareFetch,
        ApiKey::ShareAcknowledge,
        ApiKey::DescribeShareGroupOffsets,
        ApiKey::AlterShareGroupOffsets,
        ApiKey::DeleteShareGroupOffsets,
    ];
    // Admin APIs whose bodies Sluice decodes (to rewrite answers, or to
    // route broker config resources): the codec's range is what both sides
    // decode.
    let decoded_admin = [
        ApiKey::DescribeTopicPartitions,
        ApiKey::AlterConfigs,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::DescribeConfigs,
    ];
    for api in routed_by_body.into_iter().chain(decoded_admin) {
        let (min, max) = sluice_codec::guard::decodable_versions(api).unwrap();
        let range = offered_versions(api).unwrap_or_else(|| panic!("{api:?} not offered"));
        assert_eq!((range.min, range.max), (min, max), "{api:?}");
    }
    // Not for clients.
    for api in [
        ApiKey::InitializeShareGroupState,
        ApiKey::WriteTxnMarkers,
        ApiKey::DescribeQuorum,
    ] {
        assert_eq!(offered_versions(api), None, "{api:?}");
    }
}

#[test]
fn failure_policies() {
    use ApiKey as K;
    assert_eq!(
        on_failure(K::Produce),
        OnFailure::SplitError(NOT_LEADER_OR_FOLLOWER)
    );
    assert_eq!(
        on_failure(K::Fetch),
        OnFailure::SplitError(NOT_LEADER_OR_FOLLOWER)
    );
    assert_eq!(
        on_failure(K::OffsetFetch),
        OnFailure::SplitError(NOT_COORDINATOR)
    );
    assert_eq!(
        on_failure(K::JoinGroup),
        OnFailure::Synthesize(NOT_COORDINATOR)
    );
    assert_eq!(
        on_failure(K::EndTxn),
        OnFailure::Synthesize(NOT_COORDINATOR)
    );
    assert_eq!(
        on_failure(K::Metadata),
        OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
    );
    assert_eq!(
        on_failure(K::ApiVersions),
        OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
    );
    assert_eq!(
        on_failure(K::FindCoordinator),
        OnFailure::RetryElsewhere(crate::error_codes::COORDINATOR_NOT_AVAILABLE)
    );
    assert_eq!(
        on_failure(K::DescribeConfigs),
        OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)
    );
    assert_eq!(
        on_failure(K::CreateTopics),
        OnFailure::Synthesize(REQUEST_TIMED_OUT)
    );
    assert_eq!(
        on_failure(K::DeleteAcls),
        OnFailure::Synthesize(REQUEST_TIMED_OUT)
    );
    assert_eq!(on_failure(K::SaslAuthenticate), OnFailure::Close);
}

#[test]
fn client_software_is_checked_as_kafka_checks_it() {
    use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
    use sluice_codec::kafka_protocol::protocol::StrBytes;
    let named = |name: &'static str, version: &'static str| {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(name))
            .with_client_software_version(StrBytes::from_static_str(version))
    };
    let check = super::meta::valid_client_software;
    assert!(check(&named("apache-kafka-java", "4.1.1"), 3));
    assert!(check(&named("librdkafka", "2.16.0"), 4));
    assert!(!check(&named("", ""), 3), "empty at v3");
    assert!(check(&named("", ""), 2), "absent before v3");
    assert!(!check(&named("-bad", "1.0"), 3));
    assert!(!check(&named("bad name", "1.0"), 3));
    assert!(!check(&named("ok", "1.0."), 3));
}

#[test]
fn every_client_facing_api_is_offered() {
    let unoffered: Vec<ApiKey> = ApiKey::iter()
        .filter(|api| crate::api::describe(*api).is_client_facing())
        .filter(|api| offered_versions(*api).is_none())
        .collect();
    assert_eq!(
        unoffered,
        [],
        "a client sending one of these would be closed (sink/send.rs)"
    );
}
