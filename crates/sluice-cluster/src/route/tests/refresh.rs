//! What the view must learn before a split with unroutable parts is tried
//! once more.

use super::*;
use crate::route::{MetadataRefresh, Refresh};
use crate::split::Unroutable;
use crate::topology::TopicRef;

fn partition(topic: &'static str, partition: i32) -> Unroutable {
    Unroutable::Partition {
        topic: TopicRef::Name(name(topic)),
        partition,
    }
}

#[test]
fn unknown_leaders_refresh_their_topics_once_and_unknown_groups_their_coordinators() {
    let unroutable = [
        partition("a", 0),
        partition("a", 1),
        partition("b", 4),
        Unroutable::Group {
            group_id: group("g"),
        },
        Unroutable::NoBroker,
    ];
    let refresh = Refresh::for_unroutable(&unroutable, &[]);
    assert_eq!(
        refresh.metadata,
        Some(MetadataRefresh::Topics(vec![
            TopicRef::Name(name("a")),
            TopicRef::Name(name("b")),
        ])),
        "the topics' refresh lists the brokers too"
    );
    assert_eq!(refresh.groups, ["g"]);
}

#[test]
fn a_held_partition_needs_nothing_and_no_broker_needs_the_broker_list() {
    let held = [(TopicRef::Name(name("a")), 0)];
    assert_eq!(
        Refresh::for_unroutable(&[partition("a", 0)], &held),
        Refresh::default()
    );
    let refresh = Refresh::for_unroutable(&[Unroutable::NoBroker], &held);
    assert_eq!(refresh.metadata, Some(MetadataRefresh::Brokers));
}
