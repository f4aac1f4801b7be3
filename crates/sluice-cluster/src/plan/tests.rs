//! The request-half decisions as data in, decisions out: which planner a
//! request goes to, when a lookup comes first, where the parts go, and
//! what a stall check finds, over real Kafka messages and a real view.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use sluice_codec::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use sluice_codec::kafka_protocol::messages::*;
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::stall::{Checked, RECHECK_EVERY, STALL_AFTER, StallClock, Watched, check};
use super::*;
use crate::error_codes::{COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR};
use crate::topology::SluiceNodes;
use crate::topology::fixtures::{metadata_response, name, sluice_nodes};

fn view() -> ClusterView {
    let mut view = ClusterView::default();
    view.apply_metadata(12, &metadata_response(5));
    view
}

/// `group`'s coordinator is broker `id` (a v3 answer, for the one key asked).
fn with_coordinator(view: &mut ClusterView, group: &'static str, id: i32) {
    let found = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(id))
        .with_host(StrBytes::from_static_str("kafka-x.internal.corp"))
        .with_port(19092);
    let key = StrBytes::from_static_str(group);
    view.apply_find_coordinator(3, CoordinatorKeyType::Group, Some(&key), &found);
}

fn produce(topic: &'static str, partitions: &[i32]) -> RequestKind {
    let data = partitions
        .iter()
        .map(|p| PartitionProduceData::default().with_index(*p))
        .collect();
    let topic = TopicProduceData::default()
        .with_name(name(topic))
        .with_partition_data(data);
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![topic]),
    )
}

/// One Sluice node, the local one: every leader is shown on it, so a
/// Produce's partitions go where the view says.
fn one_node() -> SluiceNodes {
    let mut nodes = sluice_nodes().snapshot();
    nodes.truncate(1);
    SluiceNodes::new(nodes, BrokerId(100)).unwrap()
}

fn plan_split(
    body: &RequestKind,
    view: &ClusterView,
    held: &[(TopicRef, i32)],
    refreshed: bool,
) -> Plan {
    let nodes = one_node();
    let known = Known {
        view,
        nodes: &nodes,
        usable: |_: BrokerId| true,
        now: Instant::now(),
    };
    split(body, 9, held, &known, refreshed).unwrap()
}

#[test]
fn each_family_goes_to_its_planner() {
    assert_eq!(route(ApiKey::Produce, 9), Route::Split);
    assert_eq!(route(ApiKey::Fetch, 12), Route::Fetch);
    assert_eq!(route(ApiKey::ListOffsets, 7), Route::Split);
    assert_eq!(
        route(ApiKey::JoinGroup, 5),
        Route::Coordinator(CoordinatorKeyType::Group)
    );
    // Below its split version, OffsetFetch names one group: whole to it.
    assert_eq!(
        route(ApiKey::OffsetFetch, 7),
        Route::Coordinator(CoordinatorKeyType::Group)
    );
    assert_eq!(route(ApiKey::OffsetFetch, 8), Route::Split);
    assert_eq!(route(ApiKey::ShareFetch, 1), Route::Share);
    assert!(matches!(route(ApiKey::Metadata, 12), Route::Meta(_)));
    assert!(matches!(route(ApiKey::CreateTopics, 7), Route::Admin(_)));
    assert_eq!(route(ApiKey::Produce, 2), Route::Unsupported);
}

#[test]
fn a_produce_to_one_leader_passes_through_without_a_lookup() {
    // orders/0 and orders/3 are both led by broker 1.
    let plan = plan_split(&produce("orders", &[0, 3]), &view(), &[], false);
    let Plan::Split(split) = plan else {
        panic!("a routable produce is split at once: {plan:?}");
    };
    assert_eq!(split.passthrough(), Some(BrokerId(1)));
    assert!(split.unroutable.is_empty());
}

#[test]
fn a_partition_without_a_leader_is_looked_up_once() {
    let body = produce("events", &[0, 1]);
    let Plan::Refresh(lookup) = plan_split(&body, &view(), &[], false) else {
        panic!("events/1 has no leader: its topic is looked up first");
    };
    assert_eq!(lookup, Lookup::topics(vec![TopicRef::Name(name("events"))]));
    // Planned again after the lookup: what is still unroutable is answered
    // with an error, never looked up a second time.
    let Plan::Split(split) = plan_split(&body, &view(), &[], true) else {
        panic!("after the lookup the produce goes out");
    };
    assert_eq!(split.parts.len(), 1);
    assert_eq!(split.unroutable.len(), 1);
}

#[test]
fn a_produce_for_a_leader_shown_on_another_node_is_looked_up_first() {
    // Six nodes: orders/0's leader is shown on another node than the local
    // one, so the local view is checked once before it is refused.
    let nodes = sluice_nodes();
    let view = view();
    let known = Known {
        view: &view,
        nodes: &nodes,
        usable: |_: BrokerId| true,
        now: Instant::now(),
    };
    let body = produce("orders", &[0, 1, 2]);
    let plan = split(&body, 9, &[], &known, false).unwrap();
    assert_eq!(
        plan.refresh(),
        Some(Lookup::topics(vec![TopicRef::Name(name("orders"))]))
    );
}

#[test]
fn a_held_partition_needs_no_lookup() {
    let body = produce("events", &[1]);
    let held = [(TopicRef::Name(name("events")), 1)];
    let Plan::Split(split) = plan_split(&body, &view(), &held, false) else {
        panic!("a held batch is answered unsent: nothing to look up");
    };
    assert!(split.parts.is_empty());
    assert_eq!(split.unroutable.len(), 1);
}

#[test]
fn an_unknown_coordinator_is_looked_up_then_answered_unavailable() {
    let body = RequestKind::Heartbeat(
        HeartbeatRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g1"))),
    );
    let mut view = view();
    assert_eq!(
        coordinator(&body, CoordinatorKeyType::Group, &view, false).refresh(),
        Some(Lookup::coordinators(
            CoordinatorKeyType::Group,
            vec!["g1".to_owned()]
        ))
    );
    assert!(matches!(
        coordinator(&body, CoordinatorKeyType::Group, &view, true),
        Plan::Fail(COORDINATOR_NOT_AVAILABLE)
    ));
    with_coordinator(&mut view, "g1", 2);
    let Plan::Whole(whole) = coordinator(&body, CoordinatorKeyType::Group, &view, false) else {
        panic!("a known coordinator gets the request whole");
    };
    assert_eq!(whole.dest, Dest::Broker(BrokerId(2)));
    assert_eq!(whole.on_failure, OnFailure::Synthesize(NOT_COORDINATOR));
}

#[test]
fn init_producer_id_without_a_transaction_goes_to_any_broker() {
    let body = RequestKind::InitProducerId(InitProducerIdRequest::default());
    let Plan::Whole(whole) = coordinator(&body, CoordinatorKeyType::Transaction, &view(), false)
    else {
        panic!("no key: any broker");
    };
    assert_eq!(whole.dest, Dest::Any);
    assert_eq!(
        whole.on_failure,
        OnFailure::RetryElsewhere(COORDINATOR_NOT_AVAILABLE)
    );
}

#[test]
fn several_groups_look_up_only_the_unknown_then_split_by_coordinator() {
    let groups = ["g1", "g2"].map(|g| GroupId(StrBytes::from_static_str(g)));
    let body = RequestKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeRequest::default().with_group_ids(groups.to_vec()),
    );
    let mut view = view();
    with_coordinator(&mut view, "g1", 1);
    assert_eq!(
        coordinator(&body, CoordinatorKeyType::Group, &view, false).refresh(),
        Some(Lookup::coordinators(
            CoordinatorKeyType::Group,
            vec!["g2".to_owned()]
        ))
    );
    with_coordinator(&mut view, "g2", 3);
    let Plan::Parts { parts, combine } =
        coordinator(&body, CoordinatorKeyType::Group, &view, false)
    else {
        panic!("two coordinators: one part each");
    };
    let brokers: Vec<BrokerId> = parts.iter().map(|(b, _)| *b).collect();
    assert_eq!(brokers, vec![BrokerId(1), BrokerId(3)]);
    assert!(matches!(combine, PartsCombine::Keyed(_)));
}

#[test]
fn a_sync_group_waits_as_long_as_the_longest_join() {
    let join =
        RequestKind::JoinGroup(JoinGroupRequest::default().with_rebalance_timeout_ms(90_000));
    let mut join = Request::from_body(ApiKey::JoinGroup, 5, 1, None, join);
    let sync = RequestKind::SyncGroup(SyncGroupRequest::default());
    let mut sync = Request::from_body(ApiKey::SyncGroup, 3, 2, None, sync);
    let mut longest = None;
    note_rebalance(&mut join, &mut longest);
    assert_eq!(longest, Some(Duration::from_secs(90)));
    note_rebalance(&mut sync, &mut longest);
    assert!(sync.broker_wait() >= Duration::from_secs(90));
}

/// A part as the stall check sees it: its clock, its broker, whether it
/// still waits.
struct Owed {
    clock: StallClock,
    broker: &'static str,
    waiting: bool,
}

impl Watched for Owed {
    type Broker = &'static str;

    fn check_at(&self) -> Option<Instant> {
        self.waiting.then_some(self.clock.check_at)
    }

    fn clock_mut(&mut self) -> Option<&mut StallClock> {
        Some(&mut self.clock)
    }

    fn broker(&self) -> Option<&&'static str> {
        Some(&self.broker)
    }
}

#[test]
fn a_quiet_broker_is_checked_then_suspect_once_its_wait_is_over() {
    let t0 = Instant::now();
    let clock = StallClock::of(ApiKey::Produce, Duration::from_secs(5), |own| t0 + own);
    // A Produce's wait for its replicas is not its own: checked at once
    // past STALL_AFTER, suspect only past its timeout too.
    assert_eq!(clock.check_at, t0 + STALL_AFTER);
    assert_eq!(
        clock.suspect_from,
        t0 + STALL_AFTER + Duration::from_secs(5)
    );
    let mut parts = [
        Owed {
            clock,
            broker: "b1",
            waiting: true,
        },
        Owed {
            clock,
            broker: "b2",
            waiting: false,
        },
    ];
    let due = |parts: &mut [Owed; 2], now| {
        check(parts.iter_mut().map(|p| (ApiKey::Produce, p)), now, |_| {
            true
        })
    };
    assert_eq!(
        due(&mut parts, t0),
        Checked {
            quiet: vec![],
            suspects: vec![],
            refresh: false
        },
        "not due yet"
    );
    let first = t0 + STALL_AFTER;
    assert_eq!(
        due(&mut parts, first),
        Checked {
            quiet: vec![("b1", ApiKey::Produce)],
            suspects: vec![],
            refresh: true
        },
        "the answered part's broker is not checked"
    );
    assert_eq!(parts[0].clock.check_at, first + RECHECK_EVERY);
    // Quiet again, but within the Produce's timeout: checked, not suspect.
    let again = due(&mut parts, first + RECHECK_EVERY);
    assert!(again.refresh && again.suspects.is_empty());
    let late = clock.suspect_from + RECHECK_EVERY;
    parts[0].clock.check_at = late;
    let late = due(&mut parts, late);
    assert_eq!(late.suspects, vec![("b1", ApiKey::Produce)]);
}

#[test]
fn a_broker_heard_from_elsewhere_is_not_stalled() {
    let t0 = Instant::now();
    let clock = StallClock::of(ApiKey::Fetch, Duration::from_secs(1), |own| t0 + own);
    assert_eq!(clock.check_at, t0 + Duration::from_secs(1) + STALL_AFTER);
    let mut parts = [Owed {
        clock,
        broker: "b1",
        waiting: true,
    }];
    let checked = check(
        parts.iter_mut().map(|p| (ApiKey::Fetch, p)),
        clock.check_at,
        |_| false,
    );
    assert!(!checked.refresh);
    assert_eq!(parts[0].clock.check_at, clock.check_at + RECHECK_EVERY);
}

impl Plan {
    /// The lookup this plan asks for, if that is what it is.
    fn refresh(self) -> Option<Lookup> {
        match self {
            Plan::Refresh(lookup) => Some(lookup),
            _ => None,
        }
    }
}

fn fetch_body(session_id: i32, epoch: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_max_wait_ms(max_wait_ms)
}

#[test]
fn a_fetch_in_a_session_sluice_does_not_have_is_refused_as_a_broker_would() {
    let mut state = crate::consume::FetchState::<crate::exchange::PartStatus>::default();
    let opened = fetch::open(&mut state, &fetch_body(77, 3, 500), 12, Instant::now());
    let fetch::Refused { code, asked } =
        opened.expect_err("a session Sluice never opened is refused");
    assert_eq!(code, crate::error_codes::FETCH_SESSION_ID_NOT_FOUND);
    assert_eq!(asked, (77, 3));
}

#[test]
fn a_sessionless_fetch_waits_its_max_wait_from_when_it_was_read() {
    let mut state = crate::consume::FetchState::<crate::exchange::PartStatus>::default();
    let received = Instant::now();
    let open = fetch::open(&mut state, &fetch_body(0, -1, 500), 12, received)
        .expect("a sessionless fetch goes on");
    assert!(open.full.is_none(), "its own body is what is split");
    assert!(!open.strip_rack);
    assert_eq!(open.until, Some(received + Duration::from_millis(500)));
    let open = fetch::open(&mut state, &fetch_body(0, -1, 0), 12, received)
        .expect("a sessionless fetch goes on");
    assert_eq!(open.until, None, "no wait: no deadline");
}
