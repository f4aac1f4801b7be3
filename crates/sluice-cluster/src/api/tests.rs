//! The API table against the rules it replaced and the code it feeds.

use sluice_codec::ApiKey;

use super::*;
use crate::error_codes::{COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR};

/// Every API the codec knows.
fn every_api() -> Vec<ApiKey> {
    (0..i16::MAX)
        .filter_map(|k| ApiKey::try_from(k).ok())
        .collect()
}

#[test]
fn the_split_families_are_exactly_the_apis_split_apis_types() {
    for api in every_api() {
        let d = describe(api);
        let split = matches!(
            d.family,
            Family::ByLeader | Family::ByCoordinator | Family::FanOut
        );
        let typed = crate::split::dispatch::unavailable_error(api);
        assert_eq!(split, typed.is_some(), "{api:?}: {d:?}");
        if let Some(code) = typed {
            assert_eq!(d.on_failure, OnFailure::SplitError(code), "{api:?}");
        }
    }
}

#[test]
fn failure_policies_follow_the_design_table() {
    use ApiKey as K;
    let expect = [
        (K::JoinGroup, OnFailure::Synthesize(NOT_COORDINATOR)),
        (K::EndTxn, OnFailure::Synthesize(NOT_COORDINATOR)),
        (
            K::FindCoordinator,
            OnFailure::RetryElsewhere(COORDINATOR_NOT_AVAILABLE),
        ),
        (K::Metadata, OnFailure::RetryElsewhere(REQUEST_TIMED_OUT)),
        (K::CreateTopics, OnFailure::Synthesize(REQUEST_TIMED_OUT)),
        (
            K::DescribeConfigs,
            OnFailure::RetryElsewhere(REQUEST_TIMED_OUT),
        ),
        (K::SaslAuthenticate, OnFailure::Close),
        (K::Vote, OnFailure::Close),
    ];
    for (api, policy) in expect {
        assert_eq!(describe(api).on_failure, policy, "{api:?}");
    }
}

#[test]
fn answers_naming_brokers_are_rewritten() {
    use ApiKey as K;
    for api in every_api() {
        let d = describe(api);
        let names_brokers = matches!(
            api,
            K::Metadata | K::FindCoordinator | K::DescribeCluster | K::DescribeTopicPartitions
        );
        assert_eq!(d.rewritten, names_brokers, "{api:?}");
        assert_eq!(
            d.filtered_after_fan_out,
            d.family == Family::FanOut,
            "{api:?}"
        );
    }
    assert!(describe(K::Produce).may_carry_leader_hints(10));
    assert!(!describe(K::Produce).may_carry_leader_hints(9));
    assert!(describe(K::Fetch).may_carry_leader_hints(11));
    assert!(!describe(K::Fetch).may_carry_leader_hints(10));
}

#[test]
fn admin_writes_are_never_retried_and_topic_writes_make_topics_stale() {
    use ApiKey as K;
    let family = |api| describe(api).family;
    assert_eq!(family(K::CreateTopics), Family::Admin(TOPIC_WRITE));
    assert_eq!(
        family(K::AlterPartitionReassignments),
        Family::Admin(TOPIC_WRITE)
    );
    assert_eq!(family(K::IncrementalAlterConfigs), Family::Admin(WRITE));
    assert_eq!(family(K::DescribeAcls), Family::Admin(READ));
    assert_eq!(
        family(K::PushTelemetry),
        Family::Admin(READ),
        "KIP-714 is client-facing"
    );
    assert_eq!(family(K::DescribeQuorum), Family::NotForClients);
}

#[test]
fn offset_fetch_is_split_from_v8_and_the_share_group_apis_are_routed() {
    assert_eq!(
        describe(ApiKey::OffsetFetch).split_since,
        OFFSET_FETCH_GROUPS_VERSION
    );
    assert_eq!(describe(ApiKey::DescribeGroups).split_since, 0);
    for api in [ApiKey::ShareFetch, ApiKey::ShareAcknowledge] {
        assert_eq!(describe(api).family, Family::ShareSession, "{api:?}");
        assert!(offered_versions(api).is_some(), "{api:?}");
    }
    for api in [
        ApiKey::ShareGroupHeartbeat,
        ApiKey::ShareGroupDescribe,
        ApiKey::DescribeShareGroupOffsets,
        ApiKey::AlterShareGroupOffsets,
        ApiKey::DeleteShareGroupOffsets,
    ] {
        assert_eq!(
            describe(api).family,
            Family::Coordinator(crate::topology::CoordinatorKeyType::Group),
            "{api:?}"
        );
        assert!(offered_versions(api).is_some(), "{api:?}");
    }
    for api in [
        ApiKey::InitializeShareGroupState,
        ApiKey::WriteShareGroupState,
    ] {
        assert_eq!(offered_versions(api), None, "{api:?}");
    }
    assert_eq!(
        offered_versions(ApiKey::DescribeAcls),
        Some(ApiKey::DescribeAcls.valid_versions())
    );
}

/// `a-b`, `a` when the range is one version, `-` for none.
fn shown(range: Option<VersionRange>) -> String {
    match range {
        None => "-".to_owned(),
        Some(r) if r.min == r.max => r.min.to_string(),
        Some(r) => format!("{}-{}", r.min, r.max),
    }
}

/// The rows of the table "Every API of Kafka 4.4" in docs/architecture.md:
/// (key, name, Sluice offers).
fn documented_apis() -> Vec<(i16, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let start = doc
        .find("\n## Every API of Kafka 4.4\n")
        .expect("docs/architecture.md has the table of every API");
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let key = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("bad key in {l}"));
            (key, cells[2].to_owned(), cells[4].to_owned())
        })
        .collect()
}

#[test]
fn the_documented_table_lists_every_api_as_offered() {
    let rows = documented_apis();
    let keys: Vec<i16> = rows.iter().map(|(k, _, _)| *k).collect();
    let every: Vec<i16> = (0..=keys.iter().copied().max().unwrap_or(0)).collect();
    assert_eq!(keys, every, "one row per key, in order, none missing");
    for (key, name, offered) in &rows {
        match ApiKey::try_from(*key) {
            Ok(api) => {
                assert_eq!(name, &format!("{api:?}"), "key {key}");
                assert_eq!(offered, &shown(offered_versions(api)), "{api:?}");
            }
            Err(()) => assert_eq!(offered, "-", "key {key} ({name}) is not in the codec"),
        }
    }
    for api in every_api() {
        assert!(keys.contains(&(api as i16)), "{api:?} has no row");
    }
}

#[test]
fn sluice_serves_offered_versions_api_versions_always_and_apis_clients_may_not_send() {
    let produce = offered_versions(ApiKey::Produce).expect("Produce is offered");
    assert!(serves(ApiKey::Produce, produce.min));
    assert!(serves(ApiKey::Produce, produce.max));
    assert!(
        !serves(ApiKey::Produce, produce.max + 1),
        "closes the client"
    );
    assert!(
        serves(ApiKey::ApiVersions, i16::MAX),
        "answered with the versions served"
    );
    let inter_broker = every_api()
        .into_iter()
        .find(|api| !describe(*api).is_client_facing() && offered_versions(*api).is_none());
    if let Some(api) = inter_broker {
        assert!(serves(api, 0), "{api:?} is answered with an error");
    }
}
