//! A client's Fetch planned against its connection's [`FetchState`] (see
//! [`crate::consume`]): its fetch session applied first ([`open`]: refused
//! with the error a broker would give, or the whole fetch the session stands
//! for and how long the client lets it wait), then, once split, either
//! passed through as the client's own bytes or planned into parts
//! ([`parts`]: parked parts adopted, new parts to send, the partitions no
//! broker serves answered as Kafka answers them).

use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_codec::kafka_protocol::messages::FetchRequest;
use sluice_codec::{RequestKind, ResponseKind};

use crate::consume::{
    FetchState, Planned, SessionReply, passes_through, session_error_answer, unknown_partitions,
};
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};
use crate::route::produce_fetch::fetch_has_rack_id;
use crate::split::dispatch::SplitRequest;
use crate::topology::{BrokerId, ClusterView};

/// A Fetch refused at once: it names a session Sluice does not have, or
/// the wrong epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The session error.
    pub code: ErrorCode,
    /// The session id and epoch the client asked for (for the log).
    pub asked: (i32, i32),
}

impl Refused {
    /// The answer a broker gives: the session error, nothing else.
    pub fn answer(&self) -> ResponseKind {
        ResponseKind::Fetch(session_error_answer(self.code))
    }
}

/// A fetch whose session is applied.
#[derive(Debug)]
pub struct Open {
    /// The whole fetch its session stands for (`None`: the request's own
    /// body, which is then what is split).
    pub full: Option<RequestKind>,
    /// What the client's answer says of its session.
    pub session: SessionReply,
    /// It carries a `rack_id`, which brokers must not see: it never goes
    /// out as the client's bytes.
    pub strip_rack: bool,
    /// When its `max_wait_ms` is over, counted from when it was read: a
    /// lookup of the partitions without a leader is not waited for past it.
    pub until: Option<Instant>,
}

/// Applies the fetch session of `fetch` (read at `received`, at `version`):
/// the fetch goes on, or is refused as a broker would refuse it.
pub fn open<P>(
    state: &mut FetchState<P>,
    fetch: &FetchRequest,
    version: i16,
    received: Instant,
) -> Result<Open, Refused> {
    let (full, session) = match state.sessions.apply(fetch, version) {
        Ok(applied) => applied,
        Err(code) => {
            return Err(Refused {
                code,
                asked: (fetch.session_id, fetch.session_epoch),
            });
        }
    };
    let until = u64::try_from(fetch.max_wait_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(|ms| received + Duration::from_millis(ms));
    Ok(Open {
        full: full.map(RequestKind::Fetch),
        session,
        strip_rack: fetch_has_rack_id(&fetch.rack_id),
        until,
    })
}

impl Open {
    /// Whether the fetch goes out whole, as `split` says (see
    /// [`passes_through`]): sessionless, one broker serves it all, and
    /// nothing of the connection's is parked or stashed (`idle`).
    pub fn passes_through(&self, idle: bool, split: &SplitRequest) -> bool {
        passes_through(self.full.as_ref(), self.session, idle, split)
    }
}

/// Plans `fetch` (the whole fetch its session stands for, else the
/// client's own), split as `split` says, into the parked parts it adopts
/// and the new parts to send; its partitions no broker serves are answered
/// as Kafka answers them (an unknown topic or partition), else
/// NOT_LEADER_OR_FOLLOWER.
pub fn parts<P>(
    state: &mut FetchState<P>,
    view: &ClusterView,
    fetch: &FetchRequest,
    (version, client_id, session): (i16, Option<Bytes>, SessionReply),
    split: SplitRequest,
    received: Instant,
) -> Planned<P> {
    let unknown = unknown_partitions(view, &split.unroutable, version);
    let routed: Vec<(BrokerId, FetchRequest)> = split
        .parts
        .into_iter()
        .filter_map(|(broker, body)| match body {
            RequestKind::Fetch(fetch) => Some((broker, fetch)),
            _ => None,
        })
        .collect();
    let mut planned = state.plan(fetch, version, (client_id, session), &routed, received);
    if !unknown.is_empty() {
        planned
            .combine
            .answer_unroutable(|key| unknown.get(key).copied().unwrap_or(NOT_LEADER_OR_FOLLOWER));
    }
    planned
}
