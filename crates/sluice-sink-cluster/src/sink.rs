//! The `KafkaSinkCluster` sink: routes every request of a client connection
//! to the broker (or brokers) that must serve it.
//!
//! [`KafkaSinkClusterBuilder`] owns what all client connections of a source
//! share ([`Shared`]): the config, the Sluice nodes and their health checks,
//! the [`ClusterView`](sluice_cluster::topology::ClusterView) Sluice routes by, the
//! connect options (TLS), and each broker's ApiVersions. Each client
//! connection gets a [`KafkaSinkCluster`]: its own broker connections
//! ([`crate::pool`]) and its queue of owed responses
//! ([`crate::pending`]).
//!
//! `send` routes a request ([`sluice_cluster::route`] decides, `send.rs` does it):
//! internal requests that fill the view (a Metadata refresh when a partition
//! has no known leader, FindCoordinator when a coordinator is unknown) are
//! sent and awaited there, before the client's request goes out. `recv` waits
//! for the oldest entry's parts and does what [`sluice_cluster::exchange`]
//! decides (`finish.rs`): a part its connection never wrote (the connection
//! failed first) is sent once more, in place, on a reopened connection; the
//! parts' answers are combined by the core and the answer post-processed.
//!
//! Every client request ends in exactly one of three ways: a broker answer, a
//! synthesized Kafka error (a failed broker's part is answered with a
//! retriable error, counted in `sluice_synthesized_error_responses_total`), or
//! a closed client connection with a logged reason (when the API has no place
//! for an error, e.g. Metadata before v13 after its retry failed too).
//!
//! Authentication ([`sluice_cluster::client_auth`]): until the client is authenticated (or
//! has shown it uses no authentication) only ApiVersions, SaslHandshake and
//! SaslAuthenticate leave Sluice, on the client's auth connection to a first
//! contact point. Every SASL answer is settled before the next request is
//! admitted: `send` waits for SASL answers in flight first (the source awaits
//! `send` to completion, so a request pipelined behind SaslAuthenticate
//! cannot overtake the broker's verdict). Then every broker connection opened
//! for the client authenticates like it: PLAIN credentials are replayed, and
//! a SCRAM user's connections use the user's delegation token from the
//! sink's one token task (`authorize_scram_over_mtls`). A failed
//! authentication answers the client with the broker's error, then closes
//! it: [`Sink::pending`] counts the close as owed, and `recv` returns it as
//! an error once every earlier answer has gone out.

mod auth;
mod builder;
mod error;
mod fetch;
mod finish;
mod internal;
mod leave;
mod ready;
mod send;
mod share;
mod stalled;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_chain::{ChainError, ConnectionContext, Sink};
use sluice_cluster::exchange::Tries;
use sluice_cluster::route::produce_order::ProduceGaps;
use sluice_codec::{Request, Response};

pub use builder::KafkaSinkClusterBuilder;
pub(crate) use builder::Shared;
pub(crate) use error::InternalRequestError;
pub use error::SinkClusterError;
use fetch::LazyFetchState;
pub use leave::Leave;
pub(crate) use share::ShareCombine;

use crate::close::CloseError;
use crate::pending::PendingResponse;
use crate::pool::Pool;
use sluice_cluster::client_auth::ClientAuth;
use sluice_cluster::route::share::ShareSessions;

/// One client connection's sink: its broker connections, the responses it
/// is owed, in request order, and where its authentication stands.
pub struct KafkaSinkCluster {
    shared: Arc<Shared>,
    connection_id: u64,
    /// Its broker connections: the only way a request reaches a broker.
    connections: Pool,
    /// Boxed, so that the queue of an idle connection is a few pointers.
    pending: VecDeque<Box<PendingResponse>>,
    auth: ClientAuth<CloseError>,
    /// SASL requests whose answers are not settled yet.
    sasl_in_flight: usize,
    /// What was already tried for the oldest pending entry (see
    /// [`sluice_cluster::exchange`]).
    tries: Tries,
    /// Fetch parts still out after their fetch was answered, and their
    /// answers, for the client's next fetch (see [`sluice_cluster::consume`]);
    /// made on the first fetch.
    fetch: LazyFetchState,
    /// The client's share sessions with Sluice and Sluice's with the
    /// brokers (see [`sluice_cluster::route::share`]).
    share: ShareSessions,
    /// The room the client's memory budgets have, as the source last told
    /// (see `Sink::set_room_bytes`): what is read ahead must fit in it.
    room_bytes: usize,
    /// The longest rebalance timeout of the client's JoinGroups: how long a
    /// SyncGroup may wait at the coordinator for the group's leader, which
    /// its own body does not say (see `sluice_codec::wait`).
    rebalance_wait: Option<Duration>,
    /// The partitions whose idempotent batches were failed unsent, whose
    /// later batches are held back until the client resends from the gap
    /// (see [`sluice_cluster::route::produce_order`]).
    produce_gaps: ProduceGaps,
}

impl Drop for KafkaSinkCluster {
    fn drop(&mut self) {
        self.close_fetch_sessions();
    }
}

impl std::fmt::Debug for KafkaSinkCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkCluster")
            .field("name", &self.shared.name)
            .field("connection_id", &self.connection_id)
            .field("connections", &self.connections)
            .field("pending", &self.pending.len())
            .field("auth", &self.auth)
            .finish()
    }
}

#[async_trait]
impl Sink for KafkaSinkCluster {
    fn name(&self) -> &str {
        &self.shared.name
    }

    async fn send(&mut self, request: Request, _ctx: &ConnectionContext) -> Result<(), ChainError> {
        self.settle_sasl().await?;
        if let Some(entry) = self.admit(request).await? {
            self.pending.push_back(Box::new(entry));
        }
        Ok(())
    }

    async fn recv(&mut self, _ctx: &ConnectionContext) -> Result<Response, ChainError> {
        loop {
            let stall_check = self.next_stall_check();
            let Some(head) = self.pending.front_mut() else {
                if let Some(reason) = self.auth.closing() {
                    return Err(reason.clone().into());
                }
                return std::future::pending().await;
            };
            // Cancel-safe: each part keeps its receiver until its result is
            // stored. Meanwhile, a broker owing anything past its wait is
            // checked on (see `sink/stalled.rs`).
            if let Some(at) = stall_check {
                let stalled = tokio::select! {
                    () = head.wait_parts() => false,
                    () = tokio::time::sleep_until(at) => true,
                };
                if stalled {
                    self.check_stalled().await;
                    continue;
                }
            } else {
                head.wait_parts().await;
            }
            if self.try_head_again().await? || self.fetch_head_waits().await? {
                continue;
            }
            let Some(entry) = self.pending.pop_front() else {
                continue;
            };
            self.tries = Tries::default();
            return self.finish(*entry);
        }
    }

    fn pending(&self) -> usize {
        // A client being closed is owed the close, after its answers.
        self.pending.len() + usize::from(self.auth.closing().is_some())
    }

    /// The consume path's parked parts and stashed answers
    /// (`consume/kept.rs`), and the client's share sessions.
    fn kept_bytes(&self) -> usize {
        self.fetch.kept_bytes() + self.share.kept_bytes()
    }

    fn set_room_bytes(&mut self, bytes: usize) {
        self.room_bytes = bytes;
    }

    /// Where authentication is required: authenticated (the gate closes a
    /// client that tries anything else). Otherwise: at once (see
    /// `authenticates_clients`).
    fn authenticated(&self) -> bool {
        !self.auth.required() || self.auth.decided()
    }
}

/// The time the core's decisions are taken at: tokio's clock (paused in the
/// timer tests) as a `std` instant, which is what the core takes.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
