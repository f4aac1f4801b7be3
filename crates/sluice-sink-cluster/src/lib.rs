//! `KafkaSinkCluster`: one client connection fans out to every broker it needs,
//! while the client believes the Sluice nodes are the whole cluster.
//!
//! This crate is the driver: it does the IO that the no-IO core
//! (`sluice-cluster`) decides on, and owns everything with a connection, a
//! task, a lock or a timer.
//!
//! - `sink`: the sink driver ([`KafkaSinkClusterBuilder`],
//!   [`KafkaSinkCluster`]) that sends, waits and combines.
//! - `pool`: one client connection's broker connections: open, log in,
//!   renew before the token or SASL session ends, drain, and the one gate
//!   every send goes through; with the per-broker health record shared by
//!   all client connections.
//! - `pending`: the responses a client connection is owed, in order, and
//!   the waits for their parts.
//! - `shared_view`: the cluster view, shared by every client connection.
//! - `peers`: health checks of the other Sluice nodes.
//! - `close`: why a client connection is closed.

#![deny(missing_docs)]

mod close;
mod peers;
mod pending;
mod pool;
mod shared_view;
mod sink;

pub use sink::{KafkaSinkCluster, KafkaSinkClusterBuilder, Leave, SinkClusterError};
