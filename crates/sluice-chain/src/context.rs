//! Per-client-connection context handed to every transform and sink.

use std::net::SocketAddr;
use std::sync::Arc;

/// What the chain knows about the client connection it serves.
#[derive(Debug, Clone)]
pub struct ConnectionContext {
    /// A process-unique id for logs.
    pub connection_id: u64,
    /// The source (listener) name from the topology.
    pub source_name: Arc<str>,
    /// The client's address.
    pub client_addr: SocketAddr,
    /// The address the client connected to.
    pub local_addr: SocketAddr,
    /// The client certificate's CN, when the listener uses mTLS.
    pub tls_principal: Option<String>,
}
