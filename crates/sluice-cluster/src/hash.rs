//! The hash maps of the per-partition work: the consume path's maps and
//! sets keyed by partition, and the cluster view's topic tables.
//!
//! A fetch of a thousand-partition session looks each partition up in
//! several of them, and with the standard library's SipHash the hashing was
//! about half of such a fetch's instructions. These use foldhash instead:
//! a fraction of the cost on short keys (a topic id and a partition index,
//! or a topic name), still seeded at random per process, so that keys a
//! client chooses (topic names) cannot be made to collide on purpose.

use std::collections::{HashMap, HashSet};

/// The hasher of [`Map`] and [`Set`].
pub type Hasher = foldhash::fast::RandomState;

/// A hash map with the fast seeded hasher (make one with `Map::default()`).
pub type Map<K, V> = HashMap<K, V, Hasher>;

/// A hash set with the fast seeded hasher (make one with `Set::default()`).
pub type Set<K> = HashSet<K, Hasher>;
