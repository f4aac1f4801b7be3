//! Tests of splitting and merging, over real encoded messages.
//!
//! Each test builds a request with kafka-protocol builders, encodes it as a
//! client would (`Request::from_body(..).encode`), reads it back through
//! `FrameCodec` and `Request::parse`, splits it over a fake cluster of three
//! brokers, checks and encodes every part, answers each part as a broker
//! would (again through the codec), merges, and checks the merged response,
//! which must encode at the client's version too.
//!
//! The fake cluster: topic `alpha` partitions 0, 1, 2 led by brokers 1, 2, 3;
//! `beta` partition 0 by broker 2 and 1 by broker 1; `gamma` partition 0 has
//! no known leader. Groups `g-one`, `g-two`, `g-three` are coordinated by
//! brokers 1, 2, 3; `g-lost` has no known coordinator.

mod cluster_view;
mod dispatch;
mod fan_out;
mod fetch;
mod groups;
mod order;
mod partitions;
mod produce;

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteGroupsRequest, DeleteRecordsRequest, DescribeGroupsRequest,
    DescribeLogDirsRequest, DescribeProducersRequest, FetchRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, ListTransactionsRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{FrameCodec, Request, Response};

use super::order::TopicEntry;
use super::{
    CoordinatorKeyType, Coordinators, PartResult, PartitionLeaders, Routing, Split, SplitApi,
    TopicId, TopicRef, Unroutable,
};
use crate::error_codes::ErrorCode;

/// Unwraps one variant of a `RequestKind` / `ResponseKind`.
macro_rules! kind {
    ($variant:path, $value:expr) => {
        match $value {
            $variant(inner) => inner,
            other => panic!("expected {}, got {other:?}", stringify!($variant)),
        }
    };
}
pub(super) use kind;

/// Parses a topic UUID literal into whatever type a builder wants.
macro_rules! uuid {
    ($text:expr) => {
        $text.parse().expect("valid uuid literal")
    };
}
pub(super) use uuid;

/// The test topics: name, id (as text and as `as_u128`), partitions in request order.
pub(super) const TOPICS: [(&str, &str, u128, &[i32]); 3] = [
    (
        "alpha",
        "00000000-0000-0000-0000-0000000000a1",
        0xa1,
        &[0, 1, 2],
    ),
    (
        "beta",
        "00000000-0000-0000-0000-0000000000b2",
        0xb2,
        &[0, 1],
    ),
    ("gamma", "00000000-0000-0000-0000-0000000000c3", 0xc3, &[0]),
];

/// The groups, in request order; `g-lost` has no coordinator.
pub(super) const GROUPS: [&str; 4] = ["g-two", "g-lost", "g-one", "g-three"];

pub(super) fn name(text: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(text))
}

pub(super) fn group(text: &'static str) -> GroupId {
    GroupId(StrBytes::from_static_str(text))
}

pub(super) fn broker(id: i32) -> BrokerId {
    BrokerId(id)
}

/// What broker `to` puts in partition `partition`'s answer (an offset, a
/// watermark...): `to * 1000 + partition`, so that a merge that mixed up
/// answers shows.
pub(super) fn mark(to: BrokerId, partition: i32) -> i64 {
    i64::from(to.0) * 1000 + i64::from(partition)
}

/// How the test request names a topic at `version`.
pub(super) fn topic_ref(topic: usize, by_id: bool) -> TopicRef {
    let (text, _, id, _) = TOPICS[topic];
    if by_id {
        TopicRef::Id(TopicId(id))
    } else {
        TopicRef::Name(name(text))
    }
}

/// Every (topic, partition) of the test request, in request order.
pub(super) fn request_order(by_id: bool) -> Vec<(TopicRef, i32)> {
    (0..TOPICS.len())
        .flat_map(|t| TOPICS[t].3.iter().map(move |p| (topic_ref(t, by_id), *p)))
        .collect()
}

/// A cluster of three brokers with known leaders and coordinators.
#[derive(Debug, Clone)]
pub(super) struct FakeCluster {
    leaders: HashMap<(TopicRef, i32), BrokerId>,
    coordinators: HashMap<String, BrokerId>,
    brokers: Vec<BrokerId>,
}

impl FakeCluster {
    /// The layout described in the module docs.
    pub(super) fn three_brokers() -> Self {
        let layout = [(0, 0, 1), (0, 1, 2), (0, 2, 3), (1, 0, 2), (1, 1, 1)];
        Self::with_layout(&layout, vec![broker(1), broker(2), broker(3)])
    }

    /// Every routable partition and group on broker 1.
    pub(super) fn single_broker() -> Self {
        let layout = [(0, 0, 1), (0, 1, 1), (0, 2, 1), (1, 0, 1), (1, 1, 1)];
        let mut cluster = Self::with_layout(&layout, vec![broker(1)]);
        for id in cluster.coordinators.values_mut() {
            *id = broker(1);
        }
        cluster
    }

    /// Makes `leader` the leader of `partition` of `topic` (as named).
    pub(super) fn set_leader(&mut self, topic: TopicRef, partition: i32, leader: BrokerId) {
        self.leaders.insert((topic, partition), leader);
    }

    /// No broker, leader or coordinator known.
    pub(super) fn empty() -> Self {
        Self {
            leaders: HashMap::new(),
            coordinators: HashMap::new(),
            brokers: Vec::new(),
        }
    }

    fn with_layout(layout: &[(usize, i32, i32)], brokers: Vec<BrokerId>) -> Self {
        let mut leaders = HashMap::new();
        for (topic, partition, leader) in layout {
            for by_id in [false, true] {
                leaders.insert((topic_ref(*topic, by_id), *partition), broker(*leader));
            }
        }
        let coordinators = [("g-one", 1), ("g-two", 2), ("g-three", 3)]
            .into_iter()
            .map(|(g, b)| (g.to_owned(), broker(b)))
            .collect();
        Self {
            leaders,
            coordinators,
            brokers,
        }
    }
}

impl PartitionLeaders for FakeCluster {
    fn leader(&self, topic: &TopicRef, partition: i32) -> Option<BrokerId> {
        self.leaders.get(&(topic.clone(), partition)).copied()
    }
}

impl Coordinators for FakeCluster {
    fn coordinator(&self, key_type: CoordinatorKeyType, key: &str) -> Option<BrokerId> {
        assert_eq!(key_type, CoordinatorKeyType::Group);
        self.coordinators.get(key).copied()
    }
}

impl Routing for FakeCluster {
    fn brokers(&self) -> Vec<BrokerId> {
        self.brokers.clone()
    }
}

/// Encodes a request as a client would and parses it back as Sluice does.
pub(super) fn client_roundtrip(
    api: ApiKey,
    version: i16,
    body: impl Into<RequestKind>,
) -> RequestKind {
    let client_id = Some(Bytes::from_static(b"split-test"));
    let mut wire = BytesMut::new();
    Request::from_body(api, version, 41, client_id, body.into())
        .encode(&mut wire)
        .unwrap_or_else(|e| panic!("{api:?} v{version} request encodes: {e}"));
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    assert!(wire.is_empty(), "one frame");
    let request = Request::parse(frame).unwrap();
    assert_eq!((request.api_key(), request.api_version()), (api, version));
    request.into_body().unwrap()
}

/// Checks that a part encodes at the client's version and reads back equal.
pub(super) fn assert_part_encodes(api: ApiKey, version: i16, part: impl Into<RequestKind>) {
    let part = part.into();
    let back = client_roundtrip(api, version, part.clone());
    assert_eq!(back, part, "{api:?} v{version} part survives encoding");
}

/// Encodes a response as a broker would and parses it back as Sluice does.
pub(super) fn broker_roundtrip(
    api: ApiKey,
    version: i16,
    body: impl Into<ResponseKind>,
) -> ResponseKind {
    let mut wire = BytesMut::new();
    Response::from_body(api, version, 41, body.into())
        .encode(&mut wire)
        .unwrap_or_else(|e| panic!("{api:?} v{version} response encodes: {e}"));
    let frame = FrameCodec::default()
        .decode_frame(&mut wire)
        .unwrap()
        .unwrap();
    let response = Response::parse(frame, api, version).unwrap();
    assert_eq!(response.correlation_id(), 41);
    response.into_body().unwrap()
}

/// A request type the tests split, and the way its request and its response
/// come back out of the codec's `RequestKind` and `ResponseKind`.
pub(super) trait Wire: SplitApi + Into<RequestKind> {
    /// The request encoded as a client would and parsed back as Sluice does.
    fn through_client(self, version: i16) -> Self;
    /// A response encoded as a broker would and parsed back as Sluice does.
    fn through_broker(version: i16, response: Self::Response) -> Self::Response;
    /// Checks that a merged response encodes at `version` and reads back equal.
    fn assert_merged_encodes(version: i16, merged: &Self::Response);
}

/// Implements [`Wire`] for each `ApiKey variant: request type`.
macro_rules! wire {
    ($($variant:ident: $request:ty),* $(,)?) => {$(
        impl Wire for $request {
            fn through_client(self, version: i16) -> Self {
                let api = ApiKey::$variant;
                kind!(RequestKind::$variant, client_roundtrip(api, version, self))
            }

            fn through_broker(version: i16, response: Self::Response) -> Self::Response {
                let api = ApiKey::$variant;
                kind!(ResponseKind::$variant, broker_roundtrip(api, version, response))
            }

            fn assert_merged_encodes(version: i16, merged: &Self::Response) {
                let back = Self::through_broker(version, merged.clone());
                let api = ApiKey::$variant;
                assert_eq!(&back, merged, "{api:?} v{version}: merged response encodes");
            }
        }
    )*};
}

wire!(
    Produce: ProduceRequest,
    Fetch: FetchRequest,
    ListOffsets: ListOffsetsRequest,
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest,
    DeleteRecords: DeleteRecordsRequest,
    DescribeProducers: DescribeProducersRequest,
    OffsetFetch: OffsetFetchRequest,
    DescribeGroups: DescribeGroupsRequest,
    DeleteGroups: DeleteGroupsRequest,
    ListGroups: ListGroupsRequest,
    ListTransactions: ListTransactionsRequest,
    DescribeLogDirs: DescribeLogDirsRequest,
);

/// Checks that every part of `split` encodes at `version`, answers each as
/// `answer` says (through the codec, as a broker would) and merges.
pub(super) fn merge_answers<R: Wire>(
    version: i16,
    split: Split<R>,
    answer: impl FnMut(BrokerId, &R) -> R::Response,
) -> R::Response {
    merge_with_failure(version, split, None, answer)
}

/// Like [`merge_answers`], except that the part of broker `failed.0`, if
/// any, gets no response: the merge must answer it with error `failed.1`.
pub(super) fn merge_with_failure<R: Wire>(
    version: i16,
    split: Split<R>,
    failed: Option<(i32, ErrorCode)>,
    mut answer: impl FnMut(BrokerId, &R) -> R::Response,
) -> R::Response {
    let mut results = Vec::new();
    for (to, part) in &split.parts {
        assert_part_encodes(R::API_KEY, version, part.clone());
        results.push(match failed {
            Some((broker, error_code)) if broker == to.0 => PartResult::Failed { error_code },
            _ => PartResult::Response(R::through_broker(version, answer(*to, part))),
        });
    }
    R::merge(split.plan, results).unwrap()
}

/// `request` through the client codec, split over
/// [`FakeCluster::three_brokers`] and checked by [`check_leader_split`].
pub(super) fn leader_split<R: Wire, T: TopicEntry>(
    request: R,
    version: i16,
    by_id: bool,
    topics: impl Fn(&R) -> &[T],
) -> (R, Split<R>) {
    let cluster = FakeCluster::three_brokers();
    let request = request.through_client(version);
    let split = request.split(version, &cluster);
    check_leader_split(&split, topics, version, by_id, &cluster);
    (request, split)
}

/// Every (topic, partition) of some topic entries, in order.
pub(super) fn flatten<T: TopicEntry>(topics: &[T], version: i16) -> Vec<(TopicRef, i32)> {
    topics
        .iter()
        .flat_map(|t| {
            let key = t.topic_ref(version);
            t.partitions()
                .iter()
                .map(move |p| (key.clone(), T::partition_index(p)))
        })
        .collect()
}

/// Checks that merged `topics` hold every partition of the test request in
/// the client's order, then each partition as `check` says, given its leader
/// in [`FakeCluster::three_brokers`] (`None`: it was unroutable).
pub(super) fn check_merged<T: TopicEntry>(
    topics: &[T],
    version: i16,
    by_id: bool,
    mut check: impl FnMut(&TopicRef, &T::Partition, Option<BrokerId>),
) {
    assert_eq!(
        flatten(topics, version),
        request_order(by_id),
        "v{version}: client order"
    );
    let cluster = FakeCluster::three_brokers();
    for topic in topics {
        let key = topic.topic_ref(version);
        for p in topic.partitions() {
            check(&key, p, cluster.leader(&key, T::partition_index(p)));
        }
    }
}

/// How many times each (topic, partition) occurs.
fn count(items: Vec<(TopicRef, i32)>) -> HashMap<(TopicRef, i32), usize> {
    let mut counts = HashMap::new();
    for item in items {
        *counts.entry(item).or_insert(0) += 1;
    }
    counts
}

/// Checks a split by partition leader against the fake cluster: every part
/// holds only partitions its broker leads, and every partition of the request
/// is in exactly one part or reported unroutable.
pub(super) fn check_leader_split<Req, T: TopicEntry>(
    split: &Split<Req>,
    topics: impl Fn(&Req) -> &[T],
    version: i16,
    by_id: bool,
    cluster: &FakeCluster,
) {
    let mut seen = Vec::new();
    for (to, part) in &split.parts {
        for (topic, partition) in flatten(topics(part), version) {
            assert_eq!(
                cluster.leader(&topic, partition),
                Some(*to),
                "{topic:?} {partition}"
            );
            seen.push((topic, partition));
        }
    }
    for unroutable in &split.unroutable {
        match unroutable {
            Unroutable::Partition { topic, partition } => seen.push((topic.clone(), *partition)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        count(seen),
        count(request_order(by_id)),
        "every partition exactly once"
    );
    assert_eq!(
        split.unroutable,
        vec![Unroutable::Partition {
            topic: topic_ref(2, by_id),
            partition: 0
        }]
    );
    let brokers: Vec<i32> = split.parts.iter().map(|(b, _)| b.0).collect();
    assert_eq!(brokers, [1, 2, 3], "parts in order of first use");
}
