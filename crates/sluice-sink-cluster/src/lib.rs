//! `KafkaSinkCluster`: one client connection fans out to every broker it needs,
//! while the client believes the Sluice nodes are the whole cluster.
//!
//! This crate is the driver: it does the IO that the no-IO core
//! (`sluice-cluster`) decides on, and owns everything with a connection, a
//! task, a lock or a timer.
//!
//! Modules, bottom-up (each uses only those above it):
//!
//! - `target`: which of a client connection's broker connections a request
//!   goes out on.
//! - `health`: the per-broker health record shared by every client
//!   connection (down after failed connects, suspect after failed requests).
//! - `shared_view`: the cluster view, shared by every client connection.
//! - `close`: why a client connection is closed.
//! - `shared`: what every client connection of one sink shares (nodes,
//!   view, connect options, ApiVersions, health).
//! - `pending`: the responses a client connection is owed, in order, and
//!   the waits for their parts.
//! - `pool`: one client connection's broker connections: open, log in,
//!   renew before the token or SASL session ends, drain, and the one gate
//!   every send goes through.
//! - `peers`: health checks of the other Sluice nodes.
//! - `sink`: the sink driver ([`KafkaSinkClusterBuilder`],
//!   [`KafkaSinkCluster`]) that sends, waits and combines.

#![deny(missing_docs)]

mod close;
mod health;
mod peers;
mod pending;
mod pool;
mod shared;
mod shared_view;
mod sink;
mod target;

pub use sink::{KafkaSinkCluster, KafkaSinkClusterBuilder, Leave, SinkClusterError};
