//! Listener tests without a Kafka broker: a tiny in-test sink answers each
//! request with an ApiVersions response carrying the client's correlation id,
//! so these tests exercise only the listener and the connection task.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub(crate) mod certs;
    pub(crate) mod client;
    pub(crate) mod harness;
    pub(crate) mod metrics;
    pub(crate) mod sink;
}

mod cases {
    mod framing;
    mod limits;
    mod metrics;
    mod pre_auth;
    mod shutdown;
    mod tls;
}
