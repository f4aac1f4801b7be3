//! Codec tests: round trips of every request and response kind Sluice
//! decodes, raw forwarding, `expects_response`, and malformed input (which
//! must produce errors, never panics or huge allocations).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod codec {
    mod expects_response;
    mod fetch_limit;
    mod fuzz;
    mod malformed;
    pub(crate) mod messages;
    mod raw;
    mod roundtrip;
}
