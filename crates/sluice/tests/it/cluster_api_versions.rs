//! What a client may send through KafkaSinkCluster in front of the suite's
//! brokers (`trio`, Kafka 4.4, PLAINTEXT).
//!
//! Kafka 4.4 finalizes `share.version` 2 and `streams.version` 1 by default,
//! so its brokers offer the share-group APIs (KIP-932) and the streams-group
//! APIs (KIP-1071). Sluice routes both (the group APIs to the group's
//! coordinator, ShareFetch and ShareAcknowledge by partition leader within
//! the share sessions it holds) and offers them, with no version a broker
//! lacks, and leaves the inter-broker ones out. A describe of groups that do
//! not exist is answered by their coordinators, on an open connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, ShareGroupDescribeRequest, StreamsGroupDescribeRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted;
use sluice_testkit::raw::RawClient;
use sluice_testkit::wait;

/// The share-group apis a client sends (KIP-932).
const SHARE_GROUP_APIS: [i16; 7] = [76, 77, 78, 79, 90, 91, 92];
/// StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071).
const STREAMS_GROUP_APIS: [i16; 2] = [88, 89];
/// GROUP_ID_NOT_FOUND.
const GROUP_ID_NOT_FOUND: i16 = 69;
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
const RETRIABLE: [i16; 3] = [14, 15, 16];

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

fn api_versions(client: &mut RawClient) -> ApiVersionsResponse {
    let ResponseKind::ApiVersions(versions) = client.request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("api-versions-test"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
    ) else {
        panic!("not an ApiVersions answer");
    };
    assert_eq!(versions.error_code, 0, "ApiVersions error");
    versions
}

/// api key -> (min, max).
fn offered(versions: &ApiVersionsResponse) -> BTreeMap<i16, (i16, i16)> {
    versions
        .api_keys
        .iter()
        .map(|a| (a.api_key, (a.min_version, a.max_version)))
        .collect()
}

#[test]
fn the_streams_and_share_group_apis_of_kafka_4_4_are_offered() {
    let cluster = Cluster::get(TRIO);
    let brokers: Vec<BTreeMap<i16, (i16, i16)>> = (1..=cluster.node_count())
        .map(|id| {
            let addr = format!("127.0.0.1:{}", cluster.port(id, "PLAINTEXT"));
            offered(&api_versions(&mut RawClient::connect(&addr)))
        })
        .collect();
    for api in SHARE_GROUP_APIS.iter().chain(&STREAMS_GROUP_APIS) {
        assert!(
            brokers[0].contains_key(api),
            "the brokers (Kafka {}) do not offer api key {api}: this test expects Kafka 4.4, \
             which offers the share-group and streams-group apis",
            cluster.kafka_version()
        );
    }

    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 1);
    let through = api_versions(&mut RawClient::connect(&nodes[0]));
    let shown = offered(&through);
    assert!(
        shown.contains_key(&(ApiKey::Produce as i16))
            && shown.contains_key(&(ApiKey::Fetch as i16)),
        "Produce and Fetch are offered: {shown:?}"
    );
    for api in STREAMS_GROUP_APIS.iter().chain(&SHARE_GROUP_APIS) {
        assert!(
            shown.contains_key(api),
            "Sluice routes api key {api} but does not offer it: {shown:?}"
        );
    }
    for (api, (min, max)) in &shown {
        let known = ApiKey::try_from(*api)
            .unwrap_or_else(|()| panic!("Sluice offers api key {api}, unknown to its codec"));
        assert_ne!(
            known,
            ApiKey::DescribeQuorum,
            "an inter-broker api is offered"
        );
        for (i, broker) in brokers.iter().enumerate() {
            let (bmin, bmax) = broker
                .get(api)
                .unwrap_or_else(|| panic!("{known:?} offered, but broker {} lacks it", i + 1));
            assert!(
                bmin <= min && max <= bmax && min <= max,
                "{known:?}: Sluice offers {min}..={max}, broker {} {bmin}..={bmax}",
                i + 1
            );
        }
    }
    // The feature levels are the brokers': clients decide on protocol
    // behaviour from them (transactions v2 needs transaction.version 2).
    let finalized = |v: &ApiVersionsResponse, name: &str| {
        v.finalized_features
            .iter()
            .find(|f| f.name.as_str() == name)
            .map(|f| f.max_version_level)
    };
    assert_eq!(finalized(&through, "transaction.version"), Some(2));
}

/// ShareGroupDescribe reaches the groups' coordinators: groups that do not
/// exist are answered GROUP_ID_NOT_FOUND by them, on an open connection
/// (after retriable errors while a fresh cluster loads its coordinators).
#[test]
fn share_group_describe_is_answered_by_the_coordinator() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 1);
    let mut client = RawClient::connect(&nodes[0]);
    api_versions(&mut client);
    let groups = ["no-such-share-group-1", "no-such-share-group-2"];
    let request = ShareGroupDescribeRequest::default().with_group_ids(
        groups
            .iter()
            .map(|g| StrBytes::from_static_str(g).into())
            .collect(),
    );
    wait::until(
        Duration::from_secs(60),
        "ShareGroupDescribe answered by the coordinators",
        || {
            let ResponseKind::ShareGroupDescribe(answer) = client.request(
                ApiKey::ShareGroupDescribe,
                1,
                RequestKind::ShareGroupDescribe(request.clone()),
            ) else {
                panic!("not a ShareGroupDescribe answer");
            };
            let got: Vec<(&str, i16)> = answer
                .groups
                .iter()
                .map(|g| (g.group_id.0.as_str(), g.error_code))
                .collect();
            if got == groups.map(|g| (g, GROUP_ID_NOT_FOUND)) {
                return Ok(());
            }
            assert!(
                got.iter().all(|(_, code)| RETRIABLE.contains(code)),
                "each group answered by its coordinator or retriable: {got:?}"
            );
            Err(format!("{got:?}"))
        },
    );
    // The same connection serves the next request.
    api_versions(&mut client);
}

/// StreamsGroupDescribe reaches the groups' coordinators: groups that do
/// not exist are answered GROUP_ID_NOT_FOUND by them, on an open connection
/// (after COORDINATOR_NOT_AVAILABLE while a fresh cluster creates its
/// offsets topic, which a client retries).
#[test]
fn streams_group_describe_is_answered_by_the_coordinator() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, nodes) = fronted::start_nodes(sluice_bin(), &cluster, 1);
    let mut client = RawClient::connect(&nodes[0]);
    api_versions(&mut client);
    let groups = ["no-such-streams-app-1", "no-such-streams-app-2"];
    let request = StreamsGroupDescribeRequest::default().with_group_ids(
        groups
            .iter()
            .map(|g| StrBytes::from_static_str(g).into())
            .collect(),
    );
    wait::until(
        Duration::from_secs(60),
        "StreamsGroupDescribe answered by the coordinators",
        || {
            let ResponseKind::StreamsGroupDescribe(answer) = client.request(
                ApiKey::StreamsGroupDescribe,
                1,
                RequestKind::StreamsGroupDescribe(request.clone()),
            ) else {
                panic!("not a StreamsGroupDescribe answer");
            };
            let got: Vec<(&str, i16)> = answer
                .groups
                .iter()
                .map(|g| (g.group_id.0.as_str(), g.error_code))
                .collect();
            if got == groups.map(|g| (g, GROUP_ID_NOT_FOUND)) {
                return Ok(());
            }
            assert!(
                got.iter().all(|(_, code)| RETRIABLE.contains(code)),
                "each group answered by its coordinator or retriable: {got:?}"
            );
            Err(format!("{got:?}"))
        },
    );
    // The same connection serves the next request.
    api_versions(&mut client);
}
