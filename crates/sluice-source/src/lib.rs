//! The Kafka listener: where client connections enter Sluice.
//!
//! A [`KafkaSource`] binds one `listen_addr` from the topology, accepts client
//! connections within the source's connection limit, terminates TLS (and
//! verifies client certificates for mTLS), and runs one task per client
//! connection. That task frames requests, hands them to the connection's
//! [`sluice_chain::Chain`] and writes the chain's responses back, in order.
//!
//! - `listener`: [`KafkaSource`], the accept loop and the connection limit;
//! - `tls`: the bounded TLS handshake (the acceptor is `sluice_tls`'s);
//! - `connection`: the client connection task;
//! - `principal`: the subject CN of a client certificate;
//! - `write`: the write deadline (a client must keep reading what it is owed);
//! - `budget`: [`MemoryBudget`], the bytes connections may hold, and each
//!   connection's share of it;
//! - `error`: [`SourceError`], why a source cannot start.

#![deny(missing_docs)]

mod address_shares;
mod budget;
mod connection;
mod error;
mod listener;
mod principal;
mod tls;
mod write;

pub use budget::MemoryBudget;
pub use error::SourceError;
pub use listener::{Connections, KafkaSource, SourceOptions};
