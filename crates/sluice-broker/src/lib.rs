//! Connections from Sluice to Kafka brokers.
//!
//! Every sink talks to brokers through this crate; it knows nothing of
//! clients, chains or routing.
//!
//! - `connection`: [`BrokerConnection`], one connection to one broker: a
//!   writer task and a reader task, Sluice's own correlation ids, and the
//!   rule that no failure to receive is ever silently ignored.
//! - `call`: [`BrokerConnection::call`], one typed request Sluice makes for
//!   itself ([`Call`]) and its decoded answer, or a [`CallError`].
//! - `address`: [`BrokerAddress`], how every log line, error and metric
//!   label names a broker.
//! - `error`: [`BrokerError`], everything that can go wrong on a broker
//!   connection, classified.
//! - `test_support` (feature `test-support`): a fake broker and request
//!   builders for unit tests, here and in the crates above.

#![deny(missing_docs)]

mod address;
mod call;
mod connection;
mod error;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;

pub use address::{AddressParseError, BrokerAddress};
pub use call::{Call, CallError};
pub use connection::{BrokerConnectOptions, BrokerConnection, Heard, ResponseReceiver};
pub use error::{BrokerError, ErrorTarget, Unaddressed, UnsentRequest};
