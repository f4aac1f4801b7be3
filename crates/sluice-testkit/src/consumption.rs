//! How consumers read, partition by partition and assignment by assignment,
//! from the JSON events of Kafka's `VerifiableConsumer` (and of
//! `tests/clients/python/tail_consumer.py`, which prints the same events).
//!
//! [`delivery`](crate::delivery) proves that every acknowledged record was
//! consumed by someone. This module checks how:
//!
//! - **Within an assignment.** While one consumer owns a partition (from the
//!   `partitions_assigned` event that gave it the partition to the
//!   `partitions_revoked` or `partitions_lost` that took it away), each poll
//!   of it must start right after the previous one ended: a gap is a skipped
//!   record, an overlap a duplicate (or stale data served again).
//! - **Across owners.** A record may be read again only if its earlier
//!   reading was never committed: the `offsets_committed` event after that
//!   poll failed, or the consumer stopped first. Two committed readings of
//!   one record mean the group's progress went backwards.
//! - **Records.** With `--verbose`, each record is printed (`record_data`):
//!   partition, offset, key and value, in the order the application got them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// A poll of one partition: `partition`, first and last offset.
type Range = (i32, i64, i64);

/// What one consumer read of one topic, per assignment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Per partition, each assignment's polls (first and last offset), in order.
    assignments: BTreeMap<i32, Vec<Vec<(i64, i64)>>>,
    /// Polls whose commit succeeded.
    committed: Vec<Range>,
    /// Polls of a partition the consumer did not own (none expected).
    pub unowned: Vec<Range>,
    /// Records read (sum of the polls' counts).
    pub records: u64,
}

/// A poll that did not start right after the previous poll of its
/// partition in the same assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Break {
    /// The partition.
    pub(crate) partition: i32,
    /// The last offset of the previous poll.
    pub(crate) previous: i64,
    /// The first offset of this poll (`previous + 1` was due).
    pub(crate) next: i64,
}

/// The `{topic, partition}` entries of an event's `partitions` naming `topic`.
fn partitions_of(event: &Value, topic: &str) -> impl Iterator<Item = Value> {
    let entries = event["partitions"].as_array().cloned().unwrap_or_default();
    let topic = topic.to_owned();
    entries
        .into_iter()
        .filter(move |p| p["topic"].as_str() == Some(topic.as_str()))
}

fn partition(entry: &Value) -> i32 {
    entry["partition"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(-1)
}

impl Reading {
    /// Reads one consumer's events about `topic`.
    pub fn from_events(events: &[Value], topic: &str) -> Self {
        let mut reading = Self::default();
        let mut owned = BTreeSet::new();
        let mut uncommitted: Vec<Range> = Vec::new();
        for event in events {
            match event["name"].as_str() {
                Some("partitions_assigned") => {
                    for p in partitions_of(event, topic).map(|e| partition(&e)) {
                        owned.insert(p);
                        reading.assignments.entry(p).or_default().push(Vec::new());
                    }
                }
                Some("partitions_revoked" | "partitions_lost") => {
                    for p in partitions_of(event, topic) {
                        owned.remove(&partition(&p));
                    }
                }
                Some("records_consumed") => {
                    for entry in partitions_of(event, topic) {
                        let (Some(min), Some(max)) =
                            (entry["minOffset"].as_i64(), entry["maxOffset"].as_i64())
                        else {
                            continue;
                        };
                        let p = partition(&entry);
                        reading.records += entry["count"].as_u64().unwrap_or(0);
                        uncommitted.push((p, min, max));
                        match reading.assignments.get_mut(&p).and_then(|a| a.last_mut()) {
                            Some(polls) if owned.contains(&p) => polls.push((min, max)),
                            _ => reading.unowned.push((p, min, max)),
                        }
                    }
                }
                Some("offsets_committed") => {
                    if event["success"].as_bool() == Some(true) {
                        reading.committed.append(&mut uncommitted);
                    } else {
                        uncommitted.clear();
                    }
                }
                _ => {}
            }
        }
        reading
    }

    /// The polls that did not start right after the previous poll of their
    /// partition in the same assignment (skips and repeats).
    pub fn breaks(&self) -> Vec<Break> {
        let mut breaks = Vec::new();
        for (partition, assignments) in &self.assignments {
            for polls in assignments {
                for pair in polls.windows(2) {
                    let ((_, previous), (next, _)) = (pair[0], pair[1]);
                    if next != previous + 1 {
                        breaks.push(Break {
                            partition: *partition,
                            previous,
                            next,
                        });
                    }
                }
            }
        }
        breaks
    }

    /// How many assignments of `partition` the consumer had.
    #[cfg(test)]
    pub(crate) fn assignments_of(&self, partition: i32) -> usize {
        self.assignments.get(&partition).map_or(0, Vec::len)
    }
}

/// The partitions of `topic` a consumer owns after the events it printed
/// so far (assigned and not revoked or lost since).
pub fn owned(events: &[Value], topic: &str) -> BTreeSet<i32> {
    let mut owned = BTreeSet::new();
    for event in events {
        match event["name"].as_str() {
            Some("partitions_assigned") => {
                owned.extend(partitions_of(event, topic).map(|e| partition(&e)));
            }
            Some("partitions_revoked" | "partitions_lost") => {
                for p in partitions_of(event, topic) {
                    owned.remove(&partition(&p));
                }
            }
            _ => {}
        }
    }
    owned
}

/// The records (partition, offset) that more than one of `readings` (or
/// one, twice) read and committed.
pub fn committed_twice(readings: &[Reading]) -> Vec<(i32, i64)> {
    let mut times: BTreeMap<(i32, i64), u32> = BTreeMap::new();
    for (p, min, max) in readings.iter().flat_map(|r| r.committed.iter()) {
        for offset in *min..=*max {
            *times.entry((*p, offset)).or_default() += 1;
        }
    }
    times
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(record, _)| record)
        .collect()
}

/// One record as a consumer printed it (`record_data`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    /// The partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its value (`None` for a null value).
    pub value: Option<String>,
}

/// The records of `topic` a consumer printed, in the order it got them.
pub fn records(events: &[Value], topic: &str) -> Vec<Record> {
    events
        .iter()
        .filter(|e| e["name"].as_str() == Some("record_data"))
        .filter(|e| e["topic"].as_str() == Some(topic))
        .filter_map(|e| {
            Some(Record {
                partition: i32::try_from(e["partition"].as_i64()?).ok()?,
                offset: e["offset"].as_i64()?,
                value: e["value"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::events;

    #[test]
    fn polls_are_checked_per_assignment_and_commits_across_consumers() {
        let first = events(
            r#"{"name":"partitions_assigned","partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}
{"name":"records_consumed","count":3,"partitions":[{"topic":"t","partition":0,"count":3,"minOffset":0,"maxOffset":2}]}
{"name":"offsets_committed","success":true}
{"name":"records_consumed","count":2,"partitions":[{"topic":"t","partition":0,"count":2,"minOffset":4,"maxOffset":5}]}
{"name":"offsets_committed","success":true}
{"name":"records_consumed","count":1,"partitions":[{"topic":"t","partition":1,"count":1,"minOffset":7,"maxOffset":7}]}
{"name":"offsets_committed","success":false}
{"name":"partitions_revoked","partitions":[{"topic":"t","partition":1}]}
{"name":"records_consumed","count":1,"partitions":[{"topic":"t","partition":1,"count":1,"minOffset":8,"maxOffset":8}]}"#,
        );
        let first = Reading::from_events(&first, "t");
        assert_eq!(
            first.breaks(),
            [Break {
                partition: 0,
                previous: 2,
                next: 4
            }]
        );
        assert_eq!(first.unowned, [(1, 8, 8)]);
        assert_eq!(first.records, 7);
        let second = events(
            r#"{"name":"partitions_assigned","partitions":[{"topic":"t","partition":1}]}
{"name":"records_consumed","count":1,"partitions":[{"topic":"t","partition":1,"count":1,"minOffset":7,"maxOffset":7}]}
{"name":"records_consumed","count":1,"partitions":[{"topic":"t","partition":0,"count":1,"minOffset":5,"maxOffset":5}]}
{"name":"offsets_committed","success":true}"#,
        );
        assert_eq!(owned(&second, "t"), BTreeSet::from([1]));
        let second = Reading::from_events(&second, "t");
        assert_eq!(second.assignments_of(1), 1);
        // Offset 7 was read twice, but its first commit failed.
        assert_eq!(committed_twice(&[first, second]), [(0, 5)]);
    }
}
