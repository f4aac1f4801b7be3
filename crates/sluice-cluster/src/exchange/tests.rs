//! The owed-answer decisions as data in, decisions out: the steps after the
//! parts settle, and the answers combined from real encoded Kafka messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Bytes, BytesMut};
use sluice_codec::FrameCodec;
use sluice_codec::kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::*;
use crate::error_codes::{
    COORDINATOR_NOT_AVAILABLE, NONE, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER,
};
use crate::split::dispatch::split_request;
use crate::topology::ClusterView;
use crate::topology::fixtures::{metadata_response, name, through_wire};

const FAILED_UNSENT: PartStatus = PartStatus::Failed(Failure {
    unsent: true,
    pinned: false,
});
const FAILED_SENT: PartStatus = PartStatus::Failed(Failure {
    unsent: false,
    pinned: false,
});

const RETRIED: Event<'static> = Event::RetriedElsewhere;

fn resent(index: usize) -> Event<'static> {
    Event::Resent(index)
}

fn settled(api: ApiKey, parts: &[PartStatus], whole: Option<OnFailure>) -> Event<'_> {
    Event::Settled { api, parts, whole }
}

/// `body` as a client would send it: encoded, framed and parsed back, its
/// body still undecoded.
fn client_request(api: ApiKey, version: i16, body: RequestKind) -> Request {
    let client_id = Some(Bytes::from_static(b"exchange-test"));
    let mut wire = BytesMut::new();
    Request::from_body(api, version, 41, client_id, body)
        .encode(&mut wire)
        .unwrap();
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    Request::parse(frame).unwrap()
}

#[test]
fn a_part_never_written_is_sent_again_once_then_combined() {
    let mut tries = Tries::default();
    let parts = [PartStatus::Answered, FAILED_UNSENT, FAILED_UNSENT];
    let step = tries.on(settled(ApiKey::Produce, &parts, None));
    assert_eq!(step, Step::Resend(vec![1, 2]));
    assert_eq!(tries.on(resent(1)), Step::Wait);
    // A resend cancelled before part 2 went out sends part 2 again.
    assert_eq!(
        tries.on(settled(ApiKey::Produce, &parts, None)),
        Step::Resend(vec![2])
    );
    assert_eq!(tries.on(resent(2)), Step::Wait);
    // Failed unsent again: not a third time.
    assert_eq!(
        tries.on(settled(ApiKey::Produce, &parts, None)),
        Step::Combine
    );
}

#[test]
fn a_part_the_broker_may_have_seen_is_not_sent_again() {
    let mut tries = Tries::default();
    let parts = [FAILED_SENT, PartStatus::Answered];
    assert_eq!(
        tries.on(settled(ApiKey::Produce, &parts, None)),
        Step::Combine
    );
}

#[test]
fn authentication_requests_stay_on_their_connection() {
    let mut tries = Tries::default();
    for api in [ApiKey::SaslHandshake, ApiKey::SaslAuthenticate] {
        let whole = Some(describe(api).on_failure);
        assert_eq!(
            tries.on(settled(api, &[FAILED_UNSENT], whole)),
            Step::Combine,
            "{api:?}"
        );
    }
    let pinned = PartStatus::Failed(Failure {
        unsent: true,
        pinned: true,
    });
    assert_eq!(
        tries.on(settled(
            ApiKey::ApiVersions,
            &[pinned],
            Some(OnFailure::Close)
        )),
        Step::Combine,
        "a part of the client's own authentication connection"
    );
}

#[test]
fn a_read_any_broker_serves_is_retried_elsewhere_once() {
    let on_failure = describe(ApiKey::Metadata).on_failure;
    assert!(matches!(on_failure, OnFailure::RetryElsewhere(_)));
    let mut tries = Tries::default();
    let step = tries.on(settled(ApiKey::Metadata, &[FAILED_SENT], Some(on_failure)));
    assert_eq!(step, Step::RetryElsewhere);
    assert_eq!(tries.on(RETRIED), Step::Wait);
    let step = tries.on(settled(ApiKey::Metadata, &[FAILED_SENT], Some(on_failure)));
    assert_eq!(step, Step::Combine, "retried once only");
}

#[test]
fn a_part_never_written_goes_back_to_its_broker_before_another_is_tried() {
    let on_failure = describe(ApiKey::Metadata).on_failure;
    let mut tries = Tries::default();
    let step = tries.on(settled(
        ApiKey::Metadata,
        &[FAILED_UNSENT],
        Some(on_failure),
    ));
    assert_eq!(step, Step::Resend(vec![0]));
    tries.on(resent(0));
    let step = tries.on(settled(
        ApiKey::Metadata,
        &[FAILED_UNSENT],
        Some(on_failure),
    ));
    assert_eq!(step, Step::RetryElsewhere);
}

#[test]
fn answered_or_synthesized_requests_are_not_retried() {
    let mut tries = Tries::default();
    let metadata = Some(describe(ApiKey::Metadata).on_failure);
    let step = tries.on(settled(ApiKey::Metadata, &[PartStatus::Answered], metadata));
    assert_eq!(step, Step::Combine);
    let heartbeat = describe(ApiKey::Heartbeat).on_failure;
    assert!(matches!(heartbeat, OnFailure::Synthesize(_)));
    let step = tries.on(settled(ApiKey::Heartbeat, &[FAILED_SENT], Some(heartbeat)));
    assert_eq!(step, Step::Combine);
}

fn heartbeat_whole(post: Post) -> Whole {
    let body = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("billing")))
        .with_generation_id(3)
        .with_member_id(StrBytes::from_static_str("m-1"));
    Whole {
        post,
        on_failure: describe(ApiKey::Heartbeat).on_failure,
        original: client_request(ApiKey::Heartbeat, 4, RequestKind::Heartbeat(body)),
    }
}

#[test]
fn a_failed_coordinator_request_is_answered_and_its_coordinator_forgotten() {
    let post = Post::Coordinator {
        key_type: CoordinatorKeyType::Group,
        key: "billing".into(),
    };
    let mut whole = heartbeat_whole(post);
    let OnFailure::Synthesize(code) = whole.on_failure else {
        panic!("Heartbeat synthesizes its failure answer");
    };
    let mut done = whole.failure().expect("Heartbeat has a place for an error");
    assert_eq!(done.synthesized, 1);
    assert_eq!(
        done.forget,
        vec![Stale::Coordinator(
            CoordinatorKeyType::Group,
            "billing".into()
        )]
    );
    assert_eq!(done.response.correlation_id(), 41);
    let Ok(ResponseKind::Heartbeat(answer)) = done.response.body() else {
        panic!("a Heartbeat answer");
    };
    assert_eq!(answer.error_code, code.code());
}

#[test]
fn a_failed_request_with_no_place_for_an_error_closes_the_client() {
    let mut whole = heartbeat_whole(Post::None);
    whole.on_failure = OnFailure::Close;
    assert!(whole.failure().is_none());
}

#[test]
fn a_coordinator_that_moved_is_forgotten() {
    let post = Post::Coordinator {
        key_type: CoordinatorKeyType::Group,
        key: "billing".into(),
    };
    let answer = |code: ErrorCode| {
        let body = HeartbeatResponse::default().with_error_code(code.code());
        through_wire(ApiKey::Heartbeat, 4, ResponseKind::Heartbeat(body))
    };
    assert_eq!(post.stale(&mut answer(NONE)).unwrap(), Vec::new());
    assert_eq!(
        post.stale(&mut answer(NOT_COORDINATOR)).unwrap(),
        vec![Stale::Coordinator(
            CoordinatorKeyType::Group,
            "billing".into()
        )]
    );
}

#[test]
fn an_admin_write_forgets_the_topics_it_named() {
    let orders = TopicRef::Name(name("orders"));
    let post = Post::Admin {
        stale_topics: vec![orders.clone()],
    };
    let body = CreateTopicsResponse::default();
    let mut answer = through_wire(ApiKey::CreateTopics, 7, ResponseKind::CreateTopics(body));
    assert_eq!(post.stale(&mut answer).unwrap(), vec![Stale::Topic(orders)]);
}

/// A Produce of `orders` partitions 0 (led by broker 1) and 1 (broker 2),
/// split by the view of the fixture cluster.
fn produce_split(version: i16) -> crate::split::dispatch::SplitRequest {
    let mut view = ClusterView::default();
    view.apply_metadata(12, &metadata_response(5));
    let partitions = (0..2)
        .map(|index| PartitionProduceData::default().with_index(index))
        .collect();
    let body = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1500)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name("orders"))
                .with_partition_data(partitions),
        ]);
    let request = RequestKind::Produce(body);
    split_request(&request, version, &view).expect("Produce splits")
}

fn produce_answer(version: i16, partition: i32, code: ErrorCode) -> Response {
    let body = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(name("orders"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(partition)
                    .with_error_code(code.code()),
            ]),
    ]);
    through_wire(ApiKey::Produce, version, ResponseKind::Produce(body))
}

fn partition_codes(response: &mut Response) -> Vec<(i32, i16)> {
    let Ok(ResponseKind::Produce(p)) = response.body() else {
        panic!("a Produce answer");
    };
    p.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| (p.index, p.error_code))
        .collect()
}

#[test]
fn a_failed_part_of_a_split_request_is_answered_with_the_split_error() {
    let version = 9;
    let split = produce_split(version);
    assert_eq!(split.parts.len(), 2);
    let combine = SplitCombine {
        plan: split.plan,
        single: false,
    };
    let statuses = [PartStatus::Answered, FAILED_SENT];
    assert!(!combine.passes_through(ApiKey::Produce, &statuses));
    let answers = vec![Ok(produce_answer(version, 0, NONE)), Err(NoAnswer::Failed)];
    let mut done = combine
        .merge((ApiKey::Produce, version, 41), answers, |_| {
            panic!("Produce answers are not cut")
        })
        .unwrap();
    let OnFailure::SplitError(code) = describe(ApiKey::Produce).on_failure else {
        panic!("Produce answers a failed part per partition");
    };
    assert_eq!(done.synthesized, 1);
    assert!(done.unreadable.is_empty());
    assert_eq!(done.response.correlation_id(), 41);
    assert_eq!(
        partition_codes(&mut done.response),
        vec![(0, 0), (1, code.code())]
    );
}

#[test]
fn an_unreadable_part_is_answered_as_failed_and_reported() {
    let version = 9;
    let split = produce_split(version);
    let combine = SplitCombine {
        plan: split.plan,
        single: false,
    };
    // A Fetch answer's bytes read as a Produce answer.
    let mut wire = BytesMut::new();
    Response::from_body(
        ApiKey::Fetch,
        12,
        42,
        ResponseKind::Fetch(FetchResponse::default().with_session_id(77)),
    )
    .encode(&mut wire)
    .unwrap();
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    let garbled = Response::parse(frame, ApiKey::Produce, version).unwrap();
    let answers = vec![Ok(garbled), Ok(produce_answer(version, 1, NONE))];
    let done = combine
        .merge((ApiKey::Produce, version, 41), answers, |_| Ok(()))
        .unwrap();
    assert_eq!(done.synthesized, 1);
    assert_eq!(
        done.unreadable.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![0]
    );
}

#[test]
fn a_part_with_no_result_is_answered_with_the_split_error_but_not_counted() {
    let version = 9;
    let split = produce_split(version);
    let combine = SplitCombine {
        plan: split.plan,
        single: false,
    };
    let answers = vec![Err(NoAnswer::Missing), Ok(produce_answer(version, 1, NONE))];
    let done = combine
        .merge((ApiKey::Produce, version, 41), answers, |_| Ok(()))
        .unwrap();
    assert_eq!(done.synthesized, 0);
}

#[test]
fn one_clean_part_passes_through_unless_its_answer_is_cut() {
    let version = 9;
    let combine = SplitCombine {
        plan: produce_split(version).plan,
        single: true,
    };
    assert!(combine.passes_through(ApiKey::Produce, &[PartStatus::Answered]));
    assert!(!combine.passes_through(ApiKey::Produce, &[FAILED_SENT]));
    assert!(!combine.passes_through(ApiKey::Produce, &[PartStatus::Waiting]));
    // Fan-out answers are always cut to what the local node owns.
    assert!(!combine.passes_through(ApiKey::ListGroups, &[PartStatus::Answered]));
}

#[test]
fn fan_out_answers_are_cut_before_they_are_merged() {
    let mut view = ClusterView::default();
    view.apply_metadata(12, &metadata_response(5));
    let request = RequestKind::ListGroups(ListGroupsRequest::default());
    let split = split_request(&request, 4, &view).expect("ListGroups fans out");
    let count = split.parts.len();
    let combine = SplitCombine {
        plan: split.plan,
        single: false,
    };
    let answers = (0..count)
        .map(|_| {
            let body = ListGroupsResponse::default();
            Ok(through_wire(
                ApiKey::ListGroups,
                4,
                ResponseKind::ListGroups(body),
            ))
        })
        .collect();
    let mut cut = 0;
    combine
        .merge((ApiKey::ListGroups, 4, 41), answers, |results| {
            cut = results.len();
            Ok(())
        })
        .unwrap();
    assert_eq!(cut, count);
}

fn described(group: &str, code: ErrorCode) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_error_code(code.code())
}

#[test]
fn a_keyed_request_answers_failed_and_unroutable_keys_in_key_order() {
    let version = 0;
    let groups = ["g1", "g2", "g3"];
    let body = ConsumerGroupDescribeRequest::default().with_group_ids(
        groups
            .iter()
            .map(|g| GroupId(StrBytes::from_static_str(g)))
            .collect(),
    );
    let keyed = KeyedCombine {
        request: RequestKind::ConsumerGroupDescribe(body),
        order: groups.iter().map(|g| (*g).to_owned()).collect(),
        part_keys: vec![vec!["g2".into()], vec!["g1".into()]],
        unroutable: vec!["g3".into()],
    };
    let g2 = ConsumerGroupDescribeResponse::default().with_groups(vec![described("g2", NONE)]);
    let answers = vec![
        Ok(through_wire(
            ApiKey::ConsumerGroupDescribe,
            version,
            ResponseKind::ConsumerGroupDescribe(g2),
        )),
        Err(NoAnswer::Failed),
    ];
    let mut done = keyed
        .merge((ApiKey::ConsumerGroupDescribe, version, 41), answers)
        .unwrap();
    assert_eq!(done.synthesized, 1);
    let Ok(ResponseKind::ConsumerGroupDescribe(merged)) = done.response.body() else {
        panic!("a ConsumerGroupDescribe answer");
    };
    let codes: Vec<(String, i16)> = merged
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("g1".into(), NOT_COORDINATOR.code()),
            ("g2".into(), 0),
            ("g3".into(), COORDINATOR_NOT_AVAILABLE.code()),
        ]
    );
    assert!(
        done.forget
            .contains(&Stale::Coordinator(CoordinatorKeyType::Group, "g1".into())),
        "{:?}",
        done.forget
    );
}

#[test]
fn a_clean_produce_answer_passes_through_unread() {
    let version = 9;
    let clean = produce_answer(version, 0, NONE);
    assert!(!may_need_rewrite(&clean));
    let failed = produce_answer(version, 0, NOT_LEADER_OR_FOLLOWER);
    assert!(may_need_rewrite(&failed));
    let heartbeat = through_wire(
        ApiKey::Heartbeat,
        4,
        ResponseKind::Heartbeat(HeartbeatResponse::default()),
    );
    assert!(
        may_need_rewrite(&heartbeat),
        "only Produce and Fetch are walked"
    );
}

#[test]
fn a_partition_error_names_the_stale_leader_and_hints_from_v10() {
    for (version, hints) in [(9, false), (10, true)] {
        let mut failed = produce_answer(version, 1, NOT_LEADER_OR_FOLLOWER);
        let facts = split_facts(&mut failed).unwrap();
        assert_eq!(
            facts.stale,
            vec![Stale::Leader(TopicRef::Name(name("orders")), 1)]
        );
        assert!(facts.partition_errors);
        assert_eq!(facts.rewrite_hints, hints, "v{version}");
        assert_eq!(
            produce_errors(&mut failed),
            vec![("orders".into(), 1, NOT_LEADER_OR_FOLLOWER.code())]
        );
    }
    let mut clean = produce_answer(10, 0, NONE);
    assert_eq!(split_facts(&mut clean).unwrap(), Facts::default());
}

fn describe_groups(groups: &[&'static str]) -> RequestKind {
    RequestKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeRequest::default().with_group_ids(
            groups
                .iter()
                .map(|g| GroupId(StrBytes::from_static_str(g)))
                .collect(),
        ),
    )
}

fn keys(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn keys_with_one_coordinator_go_whole_to_it() {
    let request = describe_groups(&["g1", "g2"]);
    let by = vec![(Some(crate::topology::BrokerId(2)), keys(&["g1", "g2"]))];
    let plan = KeyedCombine::plan(&request, CoordinatorKeyType::Group, keys(&["g1", "g2"]), by);
    let KeyedPlan::Whole {
        coordinator,
        post,
        on_failure,
    } = plan
    else {
        panic!("one coordinator: whole");
    };
    assert_eq!(coordinator.0, 2);
    assert_eq!(
        post,
        Post::Coordinator {
            key_type: CoordinatorKeyType::Group,
            key: "g1".into()
        }
    );
    assert_eq!(on_failure, OnFailure::Synthesize(NOT_COORDINATOR));
}

#[test]
fn keys_of_several_coordinators_go_one_part_each_and_the_unknown_wait_for_the_merge() {
    let request = describe_groups(&["g1", "g2", "g3"]);
    let by = vec![
        (Some(crate::topology::BrokerId(1)), keys(&["g1", "g3"])),
        (None, keys(&["g2"])),
    ];
    let order = keys(&["g1", "g2", "g3"]);
    let plan = KeyedCombine::plan(&request, CoordinatorKeyType::Group, order.clone(), by);
    let KeyedPlan::Parts { parts, combine } = plan else {
        panic!("a key without a coordinator: parts");
    };
    assert_eq!(parts.len(), 1);
    let (broker, RequestKind::ConsumerGroupDescribe(body)) = &parts[0] else {
        panic!("a ConsumerGroupDescribe part");
    };
    assert_eq!(broker.0, 1);
    let asked: Vec<&str> = body.group_ids.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(asked, ["g1", "g3"]);
    assert_eq!(combine.part_keys, vec![keys(&["g1", "g3"])]);
    assert_eq!(combine.unroutable, keys(&["g2"]));
    assert_eq!(combine.order, order);
}

#[test]
fn requests_about_the_cluster_and_admin_writes_say_their_post_processing() {
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("billing"))
        .with_key_type(0);
    let mut request = client_request(
        ApiKey::FindCoordinator,
        3,
        RequestKind::FindCoordinator(find),
    );
    let post = Post::of_meta(crate::api::Meta::FindCoordinator, &mut request).unwrap();
    assert_eq!(
        post,
        Post::FindCoordinator {
            key_type: Some(CoordinatorKeyType::Group),
            key: Some(StrBytes::from_static_str("billing")),
        },
        "a v0-3 answer does not repeat its key"
    );
    let mut metadata = client_request(
        ApiKey::Metadata,
        12,
        RequestKind::Metadata(MetadataRequest::default()),
    );
    assert_eq!(
        Post::of_meta(crate::api::Meta::Metadata, &mut metadata).unwrap(),
        Post::Metadata
    );
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("orders")]);
    let mut request = client_request(ApiKey::DeleteTopics, 5, RequestKind::DeleteTopics(delete));
    let crate::api::Family::Admin(admin) = describe(ApiKey::DeleteTopics).family else {
        panic!("DeleteTopics is an admin API");
    };
    assert_eq!(
        Post::of_admin(admin, &mut request).unwrap(),
        Post::Admin {
            stale_topics: vec![TopicRef::Name(name("orders"))]
        }
    );
}
