//! Requests owed by a broker that stopped answering, as decisions: when a
//! part is due for a check on its broker ([`StallClock`]), and what a check
//! finds ([`check`]): which brokers are quiet, so that the broker list is
//! refreshed, and which are suspect. The driver refreshes the list, fails
//! the parts of brokers no longer listed and ends their connections.
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
//! (the broker connection's `answer_due`). While the client's oldest owed answer
//! waits, the sink also watches for the earliest stall time of anything it
//! is owed. When one passes and the broker has answered nothing for
//! [`STALL_AFTER`], on that connection nor on any other connection of the
//! sink (the per-broker health record: a part can wait behind a loaded
//! machine's scheduler while the broker answers everyone else), the
//! broker list is refreshed from
//! another broker (one Metadata request, waited for at most
//! [`RECHECK_EVERY`]), and every part still owed by a broker that has left
//! the cluster metadata is answered as failed (the broker error `LeftCluster`,
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

use std::time::{Duration, Instant};

use sluice_codec::ApiKey;

/// How long past its legitimate wait a part may go unanswered before its
/// broker is checked on. A healthy broker answers in milliseconds; a false
/// alarm costs one Metadata request.
pub const STALL_AFTER: Duration = Duration::from_secs(2);

/// How often a broker that stays stalled and listed is checked again.
pub const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// When a part owed by a broker is checked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallClock {
    /// The next check: a margin past when the broker may have answered by
    /// design, not counting a Produce's wait for its replicas; then again
    /// after each check that finds the broker still listed.
    pub check_at: Instant,
    /// From when a check that finds the broker quiet again makes it suspect
    /// (a WARN): a margin past the part's whole legitimate wait, a
    /// Produce's `timeout_ms` included, since a healthy but loaded cluster
    /// may take that long to replicate.
    pub suspect_from: Instant,
    /// Whether a check has already found the broker quiet once.
    pub checked: bool,
}

impl StallClock {
    /// First checked at `check_at`; suspect from `suspect_from` on.
    pub fn new(check_at: Instant, suspect_from: Instant) -> Self {
        Self {
            check_at,
            suspect_from: suspect_from.max(check_at),
            checked: false,
        }
    }

    /// The clock of a request of `api` the broker may hold for
    /// `broker_wait`, about to be sent on a connection whose `answer_due`
    /// says when an answer that may take a given wait is due (counting
    /// what is queued ahead of it): checked [`STALL_AFTER`] past that, its
    /// broker suspect only once the whole `broker_wait` is over too.
    pub fn of(
        api: ApiKey,
        broker_wait: Duration,
        answer_due: impl FnOnce(Duration) -> Instant,
    ) -> Self {
        let own = own_wait(api, broker_wait);
        let check_at = answer_due(own) + STALL_AFTER;
        Self::new(check_at, check_at + broker_wait.saturating_sub(own))
    }
}

/// How long the broker may legitimately hold a request of `api` whose
/// wait is `broker_wait`. A Produce's `timeout_ms` bounds its wait for the
/// replicas, which a healthy cluster meets in milliseconds: none (the check
/// only fails the request if the broker has left the cluster).
pub fn own_wait(api: ApiKey, broker_wait: Duration) -> Duration {
    match api {
        ApiKey::Produce => Duration::ZERO,
        _ => broker_wait,
    }
}

/// A part owed by a broker, as the stall check sees it.
pub trait Watched {
    /// How the part names its broker.
    type Broker: Clone + PartialEq;
    /// When the part, still waiting, is due for a check (`None`: answered,
    /// or never checked).
    fn check_at(&self) -> Option<Instant>;
    /// Its clock.
    fn clock_mut(&mut self) -> Option<&mut StallClock>;
    /// Its broker, if it found one.
    fn broker(&self) -> Option<&Self::Broker>;
}

/// What a check found.
#[derive(Debug, PartialEq, Eq)]
pub struct Checked<B> {
    /// Brokers found quiet for the first time by this check, with the API
    /// of the request waiting there (for the log).
    pub quiet: Vec<(B, ApiKey)>,
    /// Brokers found quiet again past a part's whole wait: suspect.
    pub suspects: Vec<(B, ApiKey)>,
    /// Whether any broker is quiet: the broker list is refreshed, and the
    /// parts of brokers it no longer lists fail.
    pub refresh: bool,
}

/// Checks the `parts` due at `now` (each with the API of its request);
/// `quiet` says whether nobody has heard from a part's broker for
/// [`STALL_AFTER`]. Each due part is checked again [`RECHECK_EVERY`] later.
pub fn check<'p, P: Watched + 'p>(
    parts: impl IntoIterator<Item = (ApiKey, &'p mut P)>,
    now: Instant,
    mut quiet: impl FnMut(&P) -> bool,
) -> Checked<P::Broker> {
    let mut quiet_brokers: Vec<P::Broker> = Vec::new();
    let mut checked = Checked {
        quiet: Vec::new(),
        suspects: Vec::new(),
        refresh: false,
    };
    for (api, part) in parts {
        if part.check_at().is_none_or(|at| at > now) {
            continue;
        }
        // A broker working through a long queue answers as it goes, and
        // one whose answers to other connections of the sink flow is
        // alive: only one that nobody has heard from lately is stalled.
        let is_quiet = quiet(part);
        let broker = part.broker().cloned();
        let Some(clock) = part.clock_mut() else {
            continue;
        };
        clock.check_at = now + RECHECK_EVERY;
        let (true, Some(broker)) = (is_quiet, broker) else {
            continue;
        };
        let first = !quiet_brokers.contains(&broker);
        if first {
            quiet_brokers.push(broker.clone());
        }
        let again = std::mem::replace(&mut clock.checked, true);
        let suspect = again && now >= clock.suspect_from;
        if suspect && !checked.suspects.iter().any(|(b, _)| *b == broker) {
            checked.suspects.push((broker, api));
        } else if first {
            checked.quiet.push((broker, api));
        }
    }
    checked.refresh = !quiet_brokers.is_empty();
    checked
}
