//! Config requests naming brokers by Sluice node id: the routing plan
//! (`route::admin::configs`) on requests parsed from the wire, and the
//! broker's encoded answer put back in request order with node ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use sluice_codec::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use sluice_codec::kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, BrokerId, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    RequestKind, ResponseKind, alter_configs_request, alter_configs_response,
    incremental_alter_configs_request, incremental_alter_configs_response,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Request, Response};

use super::super::{refused_answer, rewrite_configs_answer};
use super::{body, view};
use crate::error_codes::INVALID_REQUEST;
use crate::route::admin::configs::{BROKER, BROKER_LOGGER, Resource, forwarded, plan, real_broker};
use crate::topology::fixtures::{self, reparse, through_wire, wire_bytes};
use crate::topology::{ClusterView, ShotoverNode};

const TOPIC: i8 = 2;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// `(resource type, name, error code)` of each of a config answer's
/// `results`, in order (every config answer's results have these fields).
macro_rules! outcomes {
    ($results:expr) => {
        $results
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str(), r.error_code))
            .collect::<Vec<_>>()
    };
}

fn nodes() -> Vec<ShotoverNode> {
    fixtures::sluice_nodes().snapshot()
}

/// Encodes `body` as a client would and parses it back, body undecoded.
fn client_request(api: ApiKey, version: i16, body: RequestKind) -> Request {
    let mut buf = BytesMut::new();
    let client_id = Some(Bytes::from_static(b"admin"));
    Request::from_body(api, version, 42, client_id, body)
        .encode(&mut buf)
        .unwrap();
    let request = Request::parse(buf.split_off(4)).unwrap();
    assert!(!request.is_dirty());
    request
}

fn describe(resources: &[(i8, &str)]) -> RequestKind {
    let resources = resources
        .iter()
        .map(|(t, n)| {
            DescribeConfigsResource::default()
                .with_resource_type(*t)
                .with_resource_name(s(n))
        })
        .collect();
    RequestKind::DescribeConfigs(
        DescribeConfigsRequest::default()
            .with_resources(resources)
            .with_include_synonyms(true),
    )
}

fn names(resources: &[(i8, StrBytes)]) -> Vec<(i8, &str)> {
    resources.iter().map(|(t, n)| (*t, n.as_str())).collect()
}

fn described(request: &RequestKind) -> Vec<(i8, StrBytes)> {
    let RequestKind::DescribeConfigs(r) = request else {
        panic!("not a DescribeConfigs request: {request:?}");
    };
    r.resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .collect()
}

fn result(t: i8, name: &str, config: &str) -> DescribeConfigsResult {
    DescribeConfigsResult::default()
        .with_resource_type(t)
        .with_resource_name(s(name))
        .with_configs(vec![
            DescribeConfigsResourceResult::default()
                .with_name(s(config))
                .with_value(Some(s("1"))),
        ])
}

/// The broker's answer to `request` through the wire, rewritten against the
/// client's request, through the wire again.
fn answer(request: &mut Request, body: impl Into<ResponseKind>) -> ResponseKind {
    let (api, version) = (request.api_key(), request.api_version());
    let mut response: Response = through_wire(api, version, body.into());
    assert!(rewrite_configs_answer(&mut response, request, &nodes()).unwrap());
    reparse(&wire_bytes(&response), api, version)
        .into_body()
        .unwrap()
}

#[test]
fn each_sluice_node_stands_for_a_real_broker_in_its_rack() {
    let view = view();
    let nodes = nodes();
    let real = |id: i32| real_broker(&view, &nodes, BrokerId(id)).map(|b| b.0);
    // rack-a → broker 1, rack-b → broker 2, rack-c → broker 3 (even for the
    // down node 105); rack-d has no broker: node 104 gets one of all three.
    assert_eq!(real(100), Some(1));
    assert_eq!(real(101), Some(1));
    assert_eq!(real(102), Some(2));
    assert_eq!(real(103), Some(2));
    assert_eq!(real(104), Some(1));
    assert_eq!(real(105), Some(3));
    assert_eq!(real(7), None, "not a sluice node");
    assert_eq!(
        real_broker(&ClusterView::new(), &nodes, BrokerId(100)),
        None
    );
    // Nodes of one rack spread over its brokers, deterministically.
    let mut flat = fixtures::metadata_response(1);
    for b in &mut flat.brokers {
        b.rack = None;
    }
    let mut no_racks = ClusterView::new();
    no_racks.apply_metadata(12, &flat);
    let spread: Vec<i32> = [100, 101, 102, 103]
        .iter()
        .map(|id| real_broker(&no_racks, &nodes, BrokerId(*id)).unwrap().0)
        .collect();
    assert_eq!(
        spread,
        [1, 2, 1, 2],
        "position in the rack picks the broker"
    );
}

#[test]
fn describe_of_a_sluice_node_goes_to_its_broker_renamed_and_back() {
    let body = describe(&[
        (TOPIC, "orders"),
        (BROKER, "102"),
        (BROKER_LOGGER, "102"),
        (BROKER, ""),
    ]);
    let mut request = client_request(ApiKey::DescribeConfigs, 4, body);
    let plan = plan(request.body().unwrap(), &nodes()).expect("names a broker");
    assert_eq!(plan.node, Some(BrokerId(102)));
    assert_eq!(
        plan.resources,
        [
            Resource::Forward,
            Resource::Node(BrokerId(102)),
            Resource::Node(BrokerId(102)),
            Resource::Forward,
        ]
    );
    let real = real_broker(&view(), &nodes(), BrokerId(102));
    assert_eq!(real, Some(BrokerId(2)));
    let sent = forwarded(request.body().unwrap(), &plan, real).unwrap();
    assert_eq!(
        names(&described(&sent)),
        [
            (TOPIC, "orders"),
            (BROKER, "2"),
            (BROKER_LOGGER, "2"),
            (BROKER, "")
        ],
        "the broker is asked under its own id"
    );
    let RequestKind::DescribeConfigs(sent) = sent else {
        unreachable!()
    };
    assert!(sent.include_synonyms, "the rest of the request is kept");

    // The broker lists its results in its own order.
    let broker = DescribeConfigsResponse::default()
        .with_throttle_time_ms(5)
        .with_results(vec![
            result(BROKER, "2", "log.cleaner.threads"),
            result(BROKER_LOGGER, "2", "root"),
            result(BROKER, "", "log.retention.hours"),
            result(TOPIC, "orders", "retention.ms"),
        ]);
    let d = body!(DescribeConfigs, answer(&mut request, broker));
    let got: Vec<(i8, &str, &str)> = d
        .results
        .iter()
        .map(|r| {
            (
                r.resource_type,
                r.resource_name.as_str(),
                r.configs[0].name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (TOPIC, "orders", "retention.ms"),
            (BROKER, "102", "log.cleaner.threads"),
            (BROKER_LOGGER, "102", "root"),
            (BROKER, "", "log.retention.hours"),
        ],
        "request order, node ids"
    );
    assert_eq!(d.throttle_time_ms, 5);
}

#[test]
fn unknown_ids_and_a_second_node_get_invalid_request() {
    let body = describe(&[
        (BROKER, "7"),
        (BROKER, "100"),
        (BROKER_LOGGER, "101"),
        (TOPIC, "t"),
        (BROKER_LOGGER, "x"),
        (BROKER_LOGGER, "100"),
    ]);
    let mut request = client_request(ApiKey::DescribeConfigs, 1, body);
    let plan = plan(request.body().unwrap(), &nodes()).unwrap();
    assert_eq!(plan.node, Some(BrokerId(100)));
    let real = real_broker(&view(), &nodes(), BrokerId(100));
    let sent = forwarded(request.body().unwrap(), &plan, real).unwrap();
    assert_eq!(
        names(&described(&sent)),
        [(BROKER, "1"), (TOPIC, "t"), (BROKER_LOGGER, "1")]
    );
    let broker = DescribeConfigsResponse::default().with_results(vec![
        result(TOPIC, "t", "cleanup.policy"),
        result(BROKER, "1", "num.io.threads"),
        result(BROKER_LOGGER, "1", "root"),
    ]);
    let d = body!(DescribeConfigs, answer(&mut request, broker));
    assert_eq!(
        outcomes!(d.results),
        [
            (BROKER, "7", INVALID_REQUEST.code()),
            (BROKER, "100", 0),
            (BROKER_LOGGER, "101", INVALID_REQUEST.code()),
            (TOPIC, "t", 0),
            (BROKER_LOGGER, "x", INVALID_REQUEST.code()),
            (BROKER_LOGGER, "100", 0),
        ]
    );
    let message = |i: usize| d.results[i].error_message.as_deref().unwrap_or_default();
    assert!(message(0).contains("Unknown broker id 7"), "{}", message(0));
    assert!(message(0).contains("100, 101, 102, 103, 104, 105"));
    assert!(
        message(2).contains("one broker per request"),
        "{}",
        message(2)
    );
    assert!(message(4).contains("Unknown broker id x"));
    assert!(d.results[2].configs.is_empty());
}

fn incremental(resources: &[(i8, &str)]) -> RequestKind {
    let resources = resources
        .iter()
        .map(|(t, n)| {
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(*t)
                .with_resource_name(s(n))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(s("log.cleaner.threads"))
                        .with_value(Some(s("2"))),
                ])
        })
        .collect();
    RequestKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsRequest::default().with_resources(resources),
    )
}

#[test]
fn alter_refuses_named_brokers_and_merges_the_rest_in_request_order() {
    let body = incremental(&[
        (TOPIC, "t1"),
        (BROKER, "100"),
        (BROKER, ""),
        (BROKER_LOGGER, "7"),
        (TOPIC, "t2"),
    ]);
    for version in 0..=1 {
        let mut request = client_request(ApiKey::IncrementalAlterConfigs, version, body.clone());
        let plan = plan(request.body().unwrap(), &nodes()).unwrap();
        assert_eq!(plan.node, None, "alter never goes to a node's broker");
        let sent = forwarded(request.body().unwrap(), &plan, None).unwrap();
        let RequestKind::IncrementalAlterConfigs(sent) = sent else {
            unreachable!()
        };
        let sent: Vec<(i8, &str)> = sent
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str()))
            .collect();
        assert_eq!(sent, [(TOPIC, "t1"), (BROKER, ""), (TOPIC, "t2")]);
        let ok = |t: i8, n: &str, code: i16| {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(t)
                .with_resource_name(s(n))
                .with_error_code(code)
        };
        let broker = IncrementalAlterConfigsResponse::default().with_responses(vec![
            ok(TOPIC, "t2", 3),
            ok(TOPIC, "t1", 0),
            ok(BROKER, "", 0),
        ]);
        let a = body!(IncrementalAlterConfigs, answer(&mut request, broker));
        assert_eq!(
            outcomes!(a.responses),
            [
                (TOPIC, "t1", 0),
                (BROKER, "100", INVALID_REQUEST.code()),
                (BROKER, "", 0),
                (BROKER_LOGGER, "7", INVALID_REQUEST.code()),
                (TOPIC, "t2", 3),
            ],
            "v{version}"
        );
        let message = a.responses[1].error_message.as_deref().unwrap();
        assert!(
            message.contains("Per-broker configs cannot be altered through Sluice"),
            "{message}"
        );
        assert!(message.contains("--entity-default"), "{message}");
        assert!(
            message.contains("connect to the broker directly"),
            "{message}"
        );
        assert!(message.contains("broker 100 is a Sluice node"), "{message}");
        let unknown = a.responses[3].error_message.as_deref().unwrap();
        assert!(
            unknown.contains("broker 7 is not a Sluice node"),
            "{unknown}"
        );
    }
}

#[test]
fn legacy_alter_configs_too() {
    let body = RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("101")),
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s("t")),
    ]));
    let mut request = client_request(ApiKey::AlterConfigs, 2, body);
    let plan = plan(request.body().unwrap(), &nodes()).unwrap();
    assert!(matches!(plan.resources[0], Resource::Refuse(_)));
    let broker = AlterConfigsResponse::default().with_responses(vec![
        alter_configs_response::AlterConfigsResourceResponse::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s("t")),
    ]);
    let a = body!(AlterConfigs, answer(&mut request, broker));
    let codes: Vec<i16> = a.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [INVALID_REQUEST.code(), 0]);
}

#[test]
fn a_request_refused_whole_never_leaves_sluice() {
    let cases = [
        (
            ApiKey::IncrementalAlterConfigs,
            incremental(&[(BROKER, "100"), (BROKER_LOGGER, "101")]),
        ),
        (
            ApiKey::DescribeConfigs,
            describe(&[(BROKER, "9"), (BROKER_LOGGER, "")]),
        ),
    ];
    for (api, body) in cases {
        let plan = plan(&body, &nodes()).unwrap();
        let to_send = forwarded(&body, &plan, None);
        if api == ApiKey::DescribeConfigs {
            // BROKER_LOGGER "" is forwarded: the broker refuses it itself.
            assert!(to_send.is_some());
            continue;
        }
        assert!(to_send.is_none(), "{api:?}: nothing to send");
        let answer = refused_answer(&body, &plan).unwrap();
        for version in sluice_codec::guard::decodable_versions(api)
            .map(|(a, b)| a..=b)
            .unwrap()
        {
            let wire = through_wire(api, version, answer.clone());
            let a = body!(IncrementalAlterConfigs, wire.into_body().unwrap());
            assert_eq!(a.responses.len(), 2);
            assert!(a.responses.iter().all(|r| r.error_code == INVALID_REQUEST));
        }
    }
    // A node is named but no broker is known: nothing is sent either.
    let body = describe(&[(BROKER, "100")]);
    let plan = plan(&body, &nodes()).unwrap();
    assert_eq!(forwarded(&body, &plan, None), None);
}

#[test]
fn requests_naming_no_broker_are_left_alone() {
    let body = describe(&[(TOPIC, "t"), (BROKER, ""), (BROKER_LOGGER, "")]);
    assert_eq!(plan(&body, &nodes()), None);
    let mut request = client_request(ApiKey::DescribeConfigs, 4, body);
    let broker = DescribeConfigsResponse::default().with_results(vec![result(TOPIC, "t", "a")]);
    let mut response = through_wire(
        ApiKey::DescribeConfigs,
        4,
        ResponseKind::DescribeConfigs(broker),
    );
    assert!(!rewrite_configs_answer(&mut response, &mut request, &nodes()).unwrap());
    assert!(!response.is_dirty(), "the answer stays undecoded");
    // Not a config request at all.
    let metadata = RequestKind::Metadata(Default::default());
    assert_eq!(plan(&metadata, &nodes()), None);
}
