//! The order helpers: merging topic entries and restoring the client's order.

use sluice_codec::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};

use super::super::order::{Order, PartitionOrder, dedup_by_key, sort_by_key_order};
use super::*;

fn entry(topic: &'static str, partitions: &[i32]) -> ListOffsetsTopicResponse {
    let partitions = partitions
        .iter()
        .map(|p| ListOffsetsPartitionResponse::default().with_partition_index(*p));
    ListOffsetsTopicResponse::default()
        .with_name(name(topic))
        .with_partitions(partitions.collect())
}

fn shape(topics: &[ListOffsetsTopicResponse]) -> Vec<(String, Vec<i32>)> {
    topics
        .iter()
        .map(|t| {
            let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
            (t.name.0.to_string(), partitions)
        })
        .collect()
}

/// A request naming alpha 2, 0, then beta 0, then alpha 1 again.
fn request_order() -> PartitionOrder {
    let request = [
        entry("alpha", &[2, 0]),
        entry("beta", &[0]),
        entry("alpha", &[1]),
    ];
    PartitionOrder::of_topics(&request, 0)
}

#[test]
fn merge_topics_joins_entries_and_restores_request_order() {
    let order = request_order();
    let alpha = TopicRef::Name(name("alpha"));
    assert_eq!(order.topics()[0], (alpha, vec![2, 0, 1]));
    let from_parts = [
        entry("zeta", &[5]),
        entry("beta", &[0]),
        entry("alpha", &[1]),
        entry("alpha", &[0, 2, 9]),
    ];
    let merged = order.merge_topics(from_parts, 0);
    let expected = vec![
        ("alpha".to_owned(), vec![2, 0, 1, 9]),
        ("beta".to_owned(), vec![0]),
        ("zeta".to_owned(), vec![5]),
    ];
    assert_eq!(
        shape(&merged),
        expected,
        "unknown topics and partitions last"
    );
}

#[test]
fn unordered_merge_only_joins_entries() {
    let merged =
        Order::Unordered.merge_topics([entry("b", &[1]), entry("a", &[0]), entry("b", &[0])], 0);
    let expected = vec![("b".to_owned(), vec![1, 0]), ("a".to_owned(), vec![0])];
    assert_eq!(shape(&merged), expected);
}

#[test]
fn sort_by_key_order_is_stable_with_unknown_keys_last() {
    let mut items = vec![("x", 1), ("c", 2), ("a", 3), ("c", 4), ("b", 5)];
    sort_by_key_order(&mut items, &["a", "b", "c", "a"], |item| &item.0);
    assert_eq!(items, [("a", 3), ("b", 5), ("c", 2), ("c", 4), ("x", 1)]);
}

#[test]
fn dedup_by_key_keeps_the_first() {
    let mut items = vec![(1, "first"), (2, "x"), (1, "second")];
    dedup_by_key(&mut items, |item| &item.0);
    assert_eq!(items, [(1, "first"), (2, "x")]);
}
