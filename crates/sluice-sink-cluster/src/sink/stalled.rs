//! Requests owed by a broker that stopped answering: when a part is due
//! for a check on its broker; the check itself is
//! `KafkaSinkCluster::check_stalled` (`sink.rs`).
//!
//! A broker that hangs (SIGSTOP, a stuck disk, a network partition) keeps
//! its TCP connections open, so nothing fails: every request owed there
//! just waits, and so does the client, until its own request timeout. The
//! controller fences such a broker after `broker.session.timeout.ms` and
//! moves its partitions' leadership to other replicas; a client talking to
//! the brokers directly still waits out its request timeout before it
//! notices.
//!
//! Sluice notices sooner. Each part sent to a broker carries a *stall time*:
//! when the broker may have answered it by design, plus [`STALL_AFTER`].
//! That is when it was sent plus the time the broker may legitimately hold
//! it (a Fetch's `max_wait_ms`, a JoinGroup's rebalance timeout, ...; not a
//! Produce's `timeout_ms`, see [`own_wait`]), counted from when the broker
//! can start on it: a broker serves one request of a connection at a time,
//! so a part queued behind a JoinGroup, a long Fetch or a client's other
//! pipelined requests on the same broker connection waits for them too
//! ([`BrokerConnection::answer_due`](sluice_broker::BrokerConnection::answer_due)). While the client's oldest owed answer
//! waits, the sink also watches for the earliest stall time of anything it
//! is owed. When one passes and the broker has answered nothing for
//! [`STALL_AFTER`], on that connection nor on any other connection of the
//! sink (the per-broker health record: a part can wait behind a loaded
//! machine's scheduler while the broker answers everyone else), the
//! broker list is refreshed from
//! another broker (one Metadata request, waited for at most
//! [`RECHECK_EVERY`]), and every part still owed by a broker that has left
//! the cluster metadata is answered as failed ([`BrokerError::LeftCluster`](sluice_broker::BrokerError::LeftCluster),
//! retriable): the client gets NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR or
//! the like, refreshes its metadata and retries where the partitions moved,
//! on the same Sluice connection. Idempotent producers make that retry
//! safe. A broker still listed is asked about again every
//! [`RECHECK_EVERY`]; one still quiet then, once the part's whole
//! legitimate wait is over, is marked suspect (requests any broker can
//! serve go elsewhere, and one WARN per broker says it does not answer). A
//! Produce with `acks=all` may legitimately wait up to its `timeout_ms` for
//! its replicas, which a loaded cluster can take seconds to give: it is
//! checked on after [`STALL_AFTER`] like any part (a hung leader is fenced
//! long before its timeout, and the check finds it gone), but its broker is
//! suspect only once its `timeout_ms` has passed too. A false alarm thus
//! costs Metadata requests while the part waits, and no WARN.
//!
//! The departed broker's connection is ended at the same moment, as a
//! direct client's is when its request times out. Left open, it would
//! deliver to the broker when it resumes every request queued on it, which
//! the client has already retried elsewhere, and it would carry the parts
//! routed there before the view learns the new leaders, behind those: each
//! waiting for the resumed broker's answer while every later answer of the
//! client waits behind it. Ended, it writes nothing more, the broker finds
//! it closed when it resumes (as after a direct client's timeout), and a
//! part routed to the broker fails at once, unsent (it has no address in
//! the view), so the client retries at the new leader.
//!
//! ```text
//! t=0    Produce sent to broker 2; broker 2 is SIGSTOPped
//! t=2s   stall: metadata from broker 1: broker 2 still listed
//! t=4s   checked again, still quiet: broker 2 suspect (WARN); every 2 s on
//! t≈9s   the controller fences broker 2 (broker.session.timeout.ms)
//! t≈10s  metadata no longer lists broker 2: the Produce is answered
//!        NOT_LEADER_OR_FOLLOWER and the connection to broker 2 is ended;
//!        the producer retries at the new leader, long before its 30 s
//!        request timeout
//! ```

use std::time::Duration;

use sluice_codec::{ApiKey, Request};
use tokio::time::Instant;

use crate::pending::StallClock;

/// How long past its legitimate wait a part may go unanswered before the
/// sink checks on its broker. A healthy broker answers in milliseconds; a
/// false alarm costs one Metadata request.
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(2);

/// How often a broker that stays stalled and listed is checked again.
pub(crate) const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// How long the broker may legitimately hold `request` itself. A Produce's
/// `timeout_ms` bounds its wait for the replicas, which a healthy cluster
/// meets in milliseconds: none (the check only fails the request if the
/// broker has left the cluster).
pub(crate) fn own_wait(request: &Request) -> Duration {
    match request.api_key() {
        ApiKey::Produce => Duration::ZERO,
        _ => request.broker_wait(),
    }
}

/// The stall clock of `request`, about to be sent on `conn`: checked
/// [`STALL_AFTER`] past the time the broker may have answered it by design,
/// which counts the waits of the requests queued ahead of it on the same
/// connection ([`BrokerConnection::answer_due`](sluice_broker::BrokerConnection::answer_due)): a Heartbeat behind a
/// JoinGroup, a Fetch behind a fetch part still out, a client's pipelined
/// requests. Its broker may be suspect only once the request's whole wait
/// ([`Request::broker_wait`], a Produce's `timeout_ms` included) is over.
/// `answer_due` is the connection's [`BrokerConnection::answer_due`](sluice_broker::BrokerConnection::answer_due).
pub(crate) fn stalls_at(
    request: &Request,
    answer_due: impl FnOnce(Duration) -> Instant,
) -> StallClock {
    let own = own_wait(request);
    let check_at = answer_due(own) + STALL_AFTER;
    StallClock::new(
        check_at,
        check_at + request.broker_wait().saturating_sub(own),
    )
}
