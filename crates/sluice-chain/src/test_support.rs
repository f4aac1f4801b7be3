//! Test helpers: the fake broker and message builders of
//! `sluice-broker`'s test support, and a client connection's context.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

pub(crate) use sluice_broker::test_support::{FakeBroker, FakeConn, Logs, request, within};

use crate::ConnectionContext;

/// A connection context for a client that connected to `local_addr`.
pub(crate) fn context(local_addr: SocketAddr) -> ConnectionContext {
    ConnectionContext {
        connection_id: 1,
        source_name: Arc::from("test"),
        client_addr: "127.0.0.1:50000".parse().unwrap(),
        local_addr,
        tls_principal: None,
    }
}
