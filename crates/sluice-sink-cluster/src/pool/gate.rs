//! [`Sendable`]: a broker connection that has just passed the pool's gate,
//! the only handle through which a request reaches a broker.
//!
//! Its field is private and only the pool makes one, after feeding the
//! slot [`Event::Check`](super::slot::Event::Check) and acting on it (open,
//! reopen, renew a connection whose token or SASL session is due, refuse a
//! broker marked down, check the connection belongs to the client's
//! login). A path that wants to send has no other way to a
//! [`BrokerConnection`]: no check can be skipped by a forgotten call.
//! It borrows the pool, so it cannot be kept past the next change there.

use std::time::Duration;

use sluice_broker::{
    BrokerAddress, BrokerConnection, BrokerError, Call, CallError, ResponseReceiver,
};
use sluice_codec::Request;
use tokio::time::Instant;

/// A connection cleared for sending now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sendable<'a> {
    conn: &'a BrokerConnection,
}

impl<'a> Sendable<'a> {
    /// Only the pool's gate clears a connection.
    pub(super) fn new(conn: &'a BrokerConnection) -> Self {
        Self { conn }
    }

    /// The broker it talks to.
    pub(crate) fn address(&self) -> &'a BrokerAddress {
        self.conn.address()
    }

    /// Requests sent on it that are still owed a response.
    pub(crate) fn outstanding(&self) -> usize {
        self.conn.outstanding()
    }

    /// When the broker may, by design, have answered a request queued now
    /// that it may itself hold for `wait` ([`BrokerConnection::answer_due`]).
    pub(crate) fn answer_due(&self, wait: Duration) -> Instant {
        self.conn.answer_due(wait)
    }

    /// Queues `request` ([`BrokerConnection::send`]).
    pub(crate) async fn send(
        &self,
        request: Request,
    ) -> Result<Option<ResponseReceiver>, BrokerError> {
        self.conn.send(request).await
    }

    /// Queues `request` only if there is room now ([`BrokerConnection::try_send`]).
    pub(crate) fn try_send(&self, request: Request) -> Option<ResponseReceiver> {
        self.conn.try_send(request)
    }

    /// Sluice's own typed request, awaited within `timeout`
    /// ([`BrokerConnection::call`]).
    pub(crate) async fn call<C: Call>(
        &self,
        version: i16,
        body: C,
        timeout: Duration,
    ) -> Result<C::Response, CallError> {
        self.conn.call(version, body, timeout).await
    }
}
