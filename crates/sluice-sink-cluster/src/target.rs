//! [`Target`]: which of a client connection's broker connections a request
//! goes out on. The pool keeps one slot per target; an owed answer's parts
//! and the errors that name a connection refer to it.

use sluice_cluster::topology::BrokerId;

/// Which connection a request went out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// The connection to a broker known by id.
    Broker(BrokerId),
    /// The bootstrap connection, before its broker id was known.
    Bootstrap,
    /// The client's auth connection, before its authentication is decided.
    Auth,
}
