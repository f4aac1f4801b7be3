//! `KafkaSinkCluster`: one client connection fans out to every broker it needs,
//! while the client believes the Sluice nodes are the whole cluster.
//!
//! This crate is the driver: it does the IO that the no-IO core
//! (`sluice-cluster`) decides on, and owns everything with a connection, a
//! task, a lock or a timer.
//!
//! - `sink`: the sink driver ([`KafkaSinkClusterBuilder`],
//!   [`KafkaSinkCluster`]) that sends, waits and combines.
//! - `connections`: one client connection's broker connections.
//! - `kafka_connection`: a broker connection that knows when its token or
//!   SASL session forces a replacement, drains the one it replaced, and logs
//!   in for the client.
//! - `pending`: the responses a client connection is owed, in order, and
//!   the waits for their parts.
//! - `shared_view`: the cluster view, shared by every client connection.
//! - `peers`: health checks of the other Sluice nodes.
//! - `close`: why a client connection is closed.

#![deny(missing_docs)]

mod close;
mod connections;
mod kafka_connection;
mod peers;
mod pending;
mod shared_view;
mod sink;

pub use sink::{KafkaSinkCluster, KafkaSinkClusterBuilder, Leave, SinkClusterError};
