//! Meta APIs: the versions of Sluice's own requests, Metadata refreshes,
//! FindCoordinator batching, and the ApiVersions answer clients get.

use super::*;
use crate::route::meta;
use crate::topology::{TopicId, fixtures};

fn broker_versions(entries: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        entries
            .iter()
            .map(|&(api, min, max)| {
                ApiVersion::default()
                    .with_api_key(api as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

#[test]
fn internal_versions_follow_the_broker() {
    let modern = broker_versions(&[(ApiKey::Metadata, 0, 13), (ApiKey::FindCoordinator, 0, 6)]);
    let v = InternalVersions::choose(Some(&modern));
    assert_eq!((v.metadata, v.find_coordinator), (12, 6));
    let old = broker_versions(&[(ApiKey::Metadata, 0, 9), (ApiKey::FindCoordinator, 0, 3)]);
    let v = InternalVersions::choose(Some(&old));
    assert_eq!((v.metadata, v.find_coordinator), (9, 3));
    let unknown = InternalVersions::choose(None);
    assert_eq!((unknown.metadata, unknown.find_coordinator), (12, 6));
}

#[test]
fn metadata_refresh_requests() {
    let mut view = crate::topology::ClusterView::new();
    view.apply_metadata(12, &fixtures::metadata_response(1));
    let orders_id = view.topic_id(&name("orders")).unwrap();
    let brokers_only = meta::metadata_request(None, 12, &view);
    assert_eq!(brokers_only.topics, Some(Vec::new()));
    assert!(!brokers_only.allow_auto_topic_creation);
    let unknown = TopicId(12345);
    let topics = [
        TopicRef::Name(name("a")),
        TopicRef::Id(orders_id),
        TopicRef::Name(name("a")),
        TopicRef::Id(unknown),
    ];
    let req = meta::metadata_request(Some(&topics), 12, &view);
    let listed: Vec<(Option<String>, u128)> = req
        .topics
        .unwrap()
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()),
                t.topic_id.as_u128(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (Some("a".to_owned()), 0),
            (Some("orders".to_owned()), 0),
            (None, 12345)
        ],
        "known ids by name, unknown ids by id, no duplicates"
    );
    let old = meta::metadata_request(Some(&topics), 9, &view);
    assert_eq!(old.topics, None, "an unknown id before v12: every topic");
}

#[test]
fn find_coordinator_requests_batch_from_v4() {
    let keys = ["a".to_owned(), "b".to_owned()];
    let batched = meta::find_coordinator_requests(CoordinatorKeyType::Transaction, &keys, 4);
    assert_eq!(batched.len(), 1);
    assert_eq!(batched[0].coordinator_keys.len(), 2);
    assert_eq!(batched[0].key_type, 1);
    let single = meta::find_coordinator_requests(CoordinatorKeyType::Group, &keys, 3);
    assert_eq!(single.len(), 2);
    assert_eq!(single[1].key.as_str(), "b");
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("g"))
        .with_key_type(0);
    assert_eq!(
        meta::find_coordinator_key(&request, 3),
        (
            Some(CoordinatorKeyType::Group),
            Some(StrBytes::from_static_str("g"))
        )
    );
    assert_eq!(meta::find_coordinator_key(&request, 4).1, None);
}

#[test]
fn client_api_versions_intersect_every_broker() {
    let a = broker_versions(&[
        (ApiKey::Produce, 0, 13),
        (ApiKey::Fetch, 4, 17),
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::ShareFetch, 0, 1),
        (ApiKey::DescribeTopicPartitions, 0, 0),
        (ApiKey::WriteTxnMarkers, 0, 1),
    ]);
    let b = broker_versions(&[
        (ApiKey::Produce, 3, 12),
        (ApiKey::Fetch, 4, 18),
        (ApiKey::CreatePartitions, 0, 3),
    ]);
    let answer = meta::client_api_versions(&a, &[std::sync::Arc::new(b)]);
    let got: Vec<(i16, i16, i16)> = answer
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert_eq!(
        got,
        [
            (ApiKey::Produce as i16, 3, 12),
            (ApiKey::Fetch as i16, 4, 17),
            (ApiKey::CreatePartitions as i16, 0, 3),
        ]
    );
    let unsupported = meta::unsupported_api_versions();
    assert_eq!(unsupported.error_code, UNSUPPORTED_VERSION);
    round_trip(
        ApiKey::ApiVersions,
        0,
        ResponseKind::ApiVersions(unsupported),
    );
    assert!(meta::api_versions_decodable(3) && !meta::api_versions_decodable(5));
}
