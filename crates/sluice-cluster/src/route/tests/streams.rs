//! The Streams group APIs (KIP-1071): routed to the group's coordinator like
//! the consumer-group APIs, answered NOT_COORDINATOR when it fails, and
//! passed back unrewritten because their answers name no broker, which
//! [`answers_name_no_broker`] checks against Kafka's own message specs.

use std::collections::BTreeSet;

use super::*;
use crate::route::{groups, keyed};

const STREAMS_APIS: [ApiKey; 3] = [
    ApiKey::StreamsGroupHeartbeat,
    ApiKey::StreamsGroupDescribe,
    ApiKey::StreamsGroupTopologyDescriptionUpdate,
];

#[test]
fn streams_group_apis_go_to_the_group_coordinator() {
    for api in STREAMS_APIS {
        let row = crate::api::describe(api);
        assert_eq!(
            row.family,
            Family::Coordinator(CoordinatorKeyType::Group),
            "{api:?}"
        );
        assert_eq!(row.on_failure, OnFailure::Synthesize(NOT_COORDINATOR));
        assert!(!row.rewritten, "{api:?}: its answer names no broker");
        assert!(!row.may_carry_leader_hints(i16::MAX), "{api:?}");
        assert!(row.is_client_facing(), "{api:?}");
    }
    // Offered in every version both sides decode (Kafka 4.4: 0-1, 0-1, 0).
    let offered = |api| offered_versions(api).map(|r| (r.min, r.max));
    assert_eq!(offered(ApiKey::StreamsGroupHeartbeat), Some((0, 1)));
    assert_eq!(offered(ApiKey::StreamsGroupDescribe), Some((0, 1)));
    assert_eq!(
        offered(ApiKey::StreamsGroupTopologyDescriptionUpdate),
        Some((0, 0))
    );
    // Removes a controller from the quorum by its real id: hidden.
    assert_eq!(family(ApiKey::UnregisterController), Family::NotForClients);
    assert_eq!(offered(ApiKey::UnregisterController), None);
}

#[test]
fn streams_group_requests_are_keyed_by_their_group() {
    let heartbeat = RequestKind::StreamsGroupHeartbeat(
        StreamsGroupHeartbeatRequest::default().with_group_id(group("app-1")),
    );
    assert_eq!(
        groups::coordinator_key(&heartbeat),
        Some((CoordinatorKeyType::Group, "app-1".to_owned()))
    );
    let update = RequestKind::StreamsGroupTopologyDescriptionUpdate(
        StreamsGroupTopologyDescriptionUpdateRequest::default().with_group_id(group("app-2")),
    );
    assert_eq!(groups::group_key(&update).as_deref(), Some("app-2"));
    let describe_one = RequestKind::StreamsGroupDescribe(
        StreamsGroupDescribeRequest::default().with_group_ids(vec![group("app-3")]),
    );
    assert_eq!(groups::group_key(&describe_one).as_deref(), Some("app-3"));
    let describe_none = RequestKind::StreamsGroupDescribe(StreamsGroupDescribeRequest::default());
    assert_eq!(groups::group_key(&describe_none), None, "no group named");
}

#[test]
fn a_failed_coordinator_answers_not_coordinator_where_the_client_reads_it() {
    let heartbeat = RequestKind::StreamsGroupHeartbeat(
        StreamsGroupHeartbeatRequest::default().with_group_id(group("app")),
    );
    for version in client_versions(ApiKey::StreamsGroupHeartbeat) {
        let body = failure_answer(
            ApiKey::StreamsGroupHeartbeat,
            &heartbeat,
            version,
            NOT_COORDINATOR,
        )
        .unwrap();
        let answer = round_trip(ApiKey::StreamsGroupHeartbeat, version, body);
        assert_eq!(groups::response_error_codes(&answer), [NOT_COORDINATOR]);
    }
    let describe = RequestKind::StreamsGroupDescribe(
        StreamsGroupDescribeRequest::default().with_group_ids(vec![group("a"), group("b")]),
    );
    let body = failure_answer(ApiKey::StreamsGroupDescribe, &describe, 1, NOT_COORDINATOR);
    let ResponseKind::StreamsGroupDescribe(r) =
        round_trip(ApiKey::StreamsGroupDescribe, 1, body.unwrap())
    else {
        panic!("not a StreamsGroupDescribe answer")
    };
    let got: Vec<(&str, i16)> = r
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code))
        .collect();
    assert_eq!(
        got,
        [("a", NOT_COORDINATOR.code()), ("b", NOT_COORDINATOR.code())]
    );
    let update = RequestKind::StreamsGroupTopologyDescriptionUpdate(Default::default());
    let api = ApiKey::StreamsGroupTopologyDescriptionUpdate;
    let body = failure_answer(api, &update, 0, NOT_COORDINATOR).unwrap();
    let answer = round_trip(api, 0, body);
    assert_eq!(groups::response_error_codes(&answer), [NOT_COORDINATOR]);
}

#[test]
fn streams_group_describe_of_several_coordinators_is_split_and_merged() {
    let request = RequestKind::StreamsGroupDescribe(
        StreamsGroupDescribeRequest::default()
            .with_group_ids(vec![group("a"), group("b"), group("c")])
            .with_include_topology_description(true),
    );
    let (kind, keys) = keyed::keys(&request).unwrap();
    assert_eq!(
        (kind, keys.as_slice()),
        (
            CoordinatorKeyType::Group,
            &["a", "b", "c"].map(String::from)[..]
        )
    );
    let RequestKind::StreamsGroupDescribe(part) =
        keyed::with_keys(&request, &["c".to_owned(), "a".to_owned()])
    else {
        panic!("not a StreamsGroupDescribe request")
    };
    assert_eq!(part.group_ids, [group("c"), group("a")]);
    assert!(part.include_topology_description, "other fields are kept");

    let described = |id, code| {
        streams_group_describe_response::DescribedGroup::default()
            .with_group_id(group(id))
            .with_error_code(code)
    };
    let answer = StreamsGroupDescribeResponse::default()
        .with_throttle_time_ms(7)
        .with_groups(vec![
            described("c", 0),
            described("a", NOT_COORDINATOR.code()),
        ]);
    let merged = keyed::merge(
        &request,
        vec![
            keyed::KeyedResult::Answer(ResponseKind::StreamsGroupDescribe(answer)),
            keyed::KeyedResult::Failed(vec!["b".to_owned()], NOT_COORDINATOR),
        ],
        &keys,
    )
    .unwrap();
    let stale = keyed::stale(&merged);
    let ResponseKind::StreamsGroupDescribe(m) = round_trip(ApiKey::StreamsGroupDescribe, 1, merged)
    else {
        panic!("not a StreamsGroupDescribe answer")
    };
    let got: Vec<(&str, i16)> = m
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code))
        .collect();
    assert_eq!(got, [("a", 16), ("b", 16), ("c", 0)], "request order");
    assert_eq!(m.throttle_time_ms, 7);
    assert_eq!(
        stale,
        [
            Stale::Coordinator(CoordinatorKeyType::Group, "a".into()),
            Stale::Coordinator(CoordinatorKeyType::Group, "b".into())
        ]
    );
}

/// Name fragments of fields that could carry a broker's identity or address.
const SUSPECT: [&str; 10] = [
    "host",
    "port",
    "node",
    "leader",
    "coordinator",
    "endpoint",
    "broker",
    "controller",
    "rack",
    "listener",
];

/// Every field or struct of the Streams group answers whose name looks like
/// it could name a broker, and what it really holds. Each was read in Kafka
/// 4.4's specs; a regenerated codec with a field not listed fails the test
/// until someone reads it too.
const AUDITED: [(&str, &str); 11] = [
    (
        "UserEndpoint",
        "a Streams member's own `application.server` (host and port of the \
         application, for interactive queries), sent by the member in its \
         heartbeat; the coordinator only echoes it",
    ),
    (
        "PartitionsByUserEndpoint",
        "the members' user endpoints with the partitions each serves",
    ),
    ("Endpoint", "the struct of a user endpoint"),
    ("Host", "a user endpoint's host"),
    ("Port", "a user endpoint's port"),
    (
        "ClientHost",
        "the address the coordinator saw the member connect from: a Sluice \
         node's, as in ConsumerGroupDescribe and DescribeGroups",
    ),
    ("RackId", "the member's `client.rack`, not a broker's rack"),
    (
        "TopologyDescriptionNode",
        "a processing node of the Streams topology (source, processor, sink)",
    ),
    ("Nodes", "the processing nodes of a subtopology"),
    (
        "NodeType",
        "a topology node's kind: source, processor or sink",
    ),
    (
        "EndpointInformationEpoch",
        "the epoch of the user endpoints the coordinator holds, a number",
    ),
];

/// The `"name"` values of a Kafka JSON message spec (fields and structs),
/// comment lines left out.
fn spec_names(file: &str) -> BTreeSet<String> {
    let path = format!(
        "{}/../../vendor/kafka-message-specs/4.4.0/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("\"name\"") {
            rest = &rest[at + "\"name\"".len()..];
            let value = rest.trim_start().trim_start_matches(':').trim_start();
            if let Some(value) = value.strip_prefix('"') {
                let end = value.find('"').unwrap();
                names.insert(value[..end].to_owned());
            }
        }
    }
    names
}

#[test]
fn answers_name_no_broker() {
    let audited: BTreeSet<&str> = AUDITED.iter().map(|(name, _)| *name).collect();
    let mut seen = BTreeSet::new();
    for file in [
        "StreamsGroupHeartbeatResponse.json",
        "StreamsGroupDescribeResponse.json",
        "StreamsGroupTopologyDescriptionUpdateResponse.json",
    ] {
        let names = spec_names(file);
        assert!(names.len() > 2, "{file}: no fields read");
        for name in names {
            let lower = name.to_lowercase();
            if !SUSPECT.iter().any(|s| lower.contains(s)) {
                continue;
            }
            assert!(
                audited.contains(name.as_str()),
                "{file}: field {name} may name a broker; read what it holds, then \
                 rewrite it or add it to AUDITED"
            );
            seen.insert(name);
        }
    }
    let unused: Vec<_> = audited.iter().filter(|a| !seen.contains(**a)).collect();
    assert!(
        unused.is_empty(),
        "AUDITED lists fields the specs lack: {unused:?}"
    );
}
