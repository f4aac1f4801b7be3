//! The sink's half of the consume path (see [`sluice_cluster::consume`]): a Fetch
//! goes out as the client's own bytes when one broker serves it all and
//! nothing is parked or stashed; else it is planned against the
//! connection's [`FetchState`](sluice_cluster::consume::FetchState), answered as soon
//! as its data is ready, and what is still out when it is answered is parked
//! for the next fetch. A connection's fetch state is made on its first
//! fetch ([`Consume`]): a client that never consumes does not carry it.

use std::ops::{Deref, DerefMut};

use futures::FutureExt;
use sluice_chain::ChainError;
use sluice_codec::kafka_protocol::messages::FetchRequest;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use sluice_metrics::names;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::finish::{count_synthesized, part_failed, post_split};
use super::io::Io;
use super::leave::leaving_fetch_answer;
use super::now;
use super::send::send_split_parts;
use crate::close::Invariant;
use crate::pending::{Combine, Part, PendingResponse};
use crate::target::Target;
use sluice_cluster::consume::{
    FetchCombine, FetchState, FetchStep, NewPart, Outcome, Parked, PartMeta, Planned, Prepared,
    ReadAhead, SentIn, SessionEvent, learn, session_error_name,
};
use sluice_cluster::plan::Dest;
use sluice_cluster::plan::fetch::{self, Open};
use sluice_cluster::split::dispatch::SplitRequest;
use sluice_cluster::topology::BrokerId;

/// A client connection's consume path: its [`FetchState`], made on its
/// first fetch (a client that never consumes does not carry it), and the
/// room its memory budgets have for what is read ahead.
#[derive(Debug, Default)]
pub(super) struct Consume {
    state: Option<Box<FetchState<Part>>>,
    /// The room the client's memory budgets have, as the source last told
    /// (see `Sink::set_room_bytes`): what is read ahead must fit in it.
    pub(super) room_bytes: usize,
}

/// The fetch state, borrowed: what its fetch sessions did meanwhile is
/// counted when the borrow ends.
struct Counted<'a>(&'a mut FetchState<Part>);

impl Deref for Counted<'_> {
    type Target = FetchState<Part>;

    fn deref(&self) -> &FetchState<Part> {
        self.0
    }
}

impl DerefMut for Counted<'_> {
    fn deref_mut(&mut self) -> &mut FetchState<Part> {
        self.0
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        for event in self.0.take_session_events() {
            count_session_event(event);
        }
    }
}

/// Counts what happened to a fetch session.
fn count_session_event(event: SessionEvent) {
    match event {
        SessionEvent::Opened(side) => {
            metrics::counter!(names::FETCH_SESSIONS_OPENED, "side" => side.name()).increment(1);
        }
        SessionEvent::Incremental(side) => {
            metrics::counter!(names::FETCH_INCREMENTAL, "side" => side.name()).increment(1);
        }
        SessionEvent::Error(side, code) => {
            let error = session_error_name(code);
            metrics::counter!(names::FETCH_SESSION_ERRORS, "side" => side.name(), "error" => error)
                .increment(1);
        }
    }
}

impl Consume {
    /// The state, made now if this is its first use.
    fn get(&mut self) -> Counted<'_> {
        Counted(self.state.get_or_insert_with(Box::default))
    }

    /// Whether nothing is parked or stashed (see [`FetchState::is_idle`]).
    fn is_idle(&self) -> bool {
        self.state.as_ref().is_none_or(|state| state.is_idle())
    }

    /// What is kept for the client (see [`FetchState::kept_bytes`]).
    pub(super) fn kept_bytes(&self) -> usize {
        self.state.as_ref().map_or(0, |state| state.kept_bytes())
    }

    /// The parked parts, taken out (none before the first fetch).
    fn take_parked(&mut self) -> Vec<Parked<Part>> {
        self.state
            .as_mut()
            .map(|state| state.take_parked())
            .unwrap_or_default()
    }

    /// Routes a client's Fetch as the core plans it ([`fetch::open`],
    /// then [`fetch::parts`] unless it passes through).
    pub(super) async fn send(
        &mut self,
        io: &mut Io,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        // The client's max_wait_ms counts from here, not from after a
        // metadata refresh below.
        let received = now();
        self.harvest_parked(io);
        let version = request.api_version();
        let opened = {
            let RequestKind::Fetch(body) = request.body()? else {
                return Err(Invariant::FetchWithoutBody.into());
            };
            fetch::open(&mut *self.get(), body, version, received)
        };
        let open = match opened {
            Ok(open) => open,
            Err(refused) => {
                debug!(
                    session_id = refused.asked.0,
                    epoch = refused.asked.1,
                    "answering a fetch in a session sluice does not have with error {}",
                    refused.code
                );
                return Ok(Some(PendingResponse::answering(&request, refused.answer())));
            }
        };
        if io.shared.nodes.is_hidden() {
            let leaving = match &open.full {
                Some(full) => leaving_fetch_answer(&io.shared, &request, full),
                None => {
                    let body = request.body()?.clone();
                    leaving_fetch_answer(&io.shared, &request, &body)
                }
            };
            if leaving.is_some() {
                return Ok(leaving);
            }
        }
        let until = open.until.map(Instant::from_std);
        let split = match &open.full {
            Some(full) => split_fetch(io, full, version, until).await?,
            None => split_fetch(io, request.body()?, version, until).await?,
        };
        if open.passes_through(self.is_idle(), &split) {
            return send_split_parts(io, None, request, split, open.strip_rack).await;
        }
        self.send_planned(io, request, open, received, split).await
    }

    /// Plans a fetch (see [`fetch::parts`]), read at `received`, and sends
    /// its new parts.
    async fn send_planned(
        &mut self,
        io: &mut Io,
        request: Request,
        open: Open,
        received: std::time::Instant,
        split: SplitRequest,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let version = request.api_version();
        let correlation_id = request.correlation_id();
        let client_id = request.header().client_id.clone();
        let body = match open.full {
            Some(RequestKind::Fetch(full)) => full,
            _ => match request.into_body()? {
                RequestKind::Fetch(body) => body,
                _ => return Err(Invariant::FetchWithoutBody.into()),
            },
        };
        let Planned {
            mut combine,
            adopted,
            fresh,
        } = {
            let view = io.shared.view.read();
            let header = (version, client_id.clone(), open.session);
            fetch::parts(&mut *self.get(), &view, &body, header, split, received)
        };
        let mut parts = adopted;
        for NewPart {
            broker,
            request,
            mut claim,
        } in fresh
        {
            let header = (version, correlation_id, client_id.clone());
            let (part, sent_in) = self.send_fetch_part(io, broker, request, header).await?;
            claim.sent_in(sent_in);
            parts.push(part);
            combine.commit(claim, now());
        }
        Ok(Some(PendingResponse {
            correlation_id,
            api_key: ApiKey::Fetch,
            api_version: version,
            parts,
            combine: Combine::Fetch(Box::new(combine)),
        }))
    }

    /// A fetch part for `broker`, in Sluice's session with it, with the
    /// client's header fields; the session moves on once it is sent
    /// ([`UpstreamSessions::commit`](sluice_cluster::consume::UpstreamSessions::commit)).
    fn part_request(
        &mut self,
        broker: BrokerId,
        mut body: FetchRequest,
        (version, correlation_id, client_id): (i16, i32, Option<bytes::Bytes>),
    ) -> (Request, Prepared) {
        let prepared = self.get().upstream.prepare(broker, &mut body, version);
        let request = Request::from_body(
            ApiKey::Fetch,
            version,
            correlation_id,
            client_id,
            RequestKind::Fetch(body),
        );
        (request, prepared)
    }

    /// Sends one fetch part with the client's header fields. Cancel-safe:
    /// dropped before the part is sent, it leaves the broker session as it
    /// was (nothing awaits between the send and the session's commit).
    async fn send_fetch_part(
        &mut self,
        io: &mut Io,
        broker: BrokerId,
        body: FetchRequest,
        (version, correlation_id, client_id): (i16, i32, Option<bytes::Bytes>),
    ) -> Result<(Part, SentIn), ChainError> {
        let (request, prepared) =
            self.part_request(broker, body, (version, correlation_id, client_id));
        let part = io.send_part(Dest::Broker(broker), request).await?;
        let sent_in = self.get().upstream.commit(prepared);
        let part = part.ok_or(Invariant::FetchPartWithoutAnswer)?;
        Ok((part, sent_in))
    }

    /// Whether the oldest entry is a fetch that must wait more (see
    /// [`FetchCombine::on_settled`]); the parts the core asks for are sent
    /// here. Cancel-safe: a new part is recorded once sent; one lost to a
    /// cancel is planned again.
    pub(super) async fn head_waits(
        &mut self,
        io: &mut Io,
        head: Option<&mut PendingResponse>,
    ) -> Result<bool, ChainError> {
        let Some(head) = head else {
            return Ok(false);
        };
        let (refetches, header) = {
            let Combine::Fetch(fetch) = &mut head.combine else {
                return Ok(false);
            };
            let upstream = &mut self.get().upstream;
            match fetch.on_settled(&mut head.parts, upstream, now()) {
                FetchStep::Answer => return Ok(false),
                FetchStep::Wait => return Ok(true),
                FetchStep::Refetch(refetches) => {
                    let header = (head.api_version, head.correlation_id, fetch.client_id());
                    (refetches, header)
                }
            }
        };
        for NewPart {
            broker,
            request,
            mut claim,
        } in refetches
        {
            let (part, sent_in) = self
                .send_fetch_part(io, broker, request, header.clone())
                .await?;
            claim.sent_in(sent_in);
            if let Combine::Fetch(fetch) = &mut head.combine {
                fetch.commit(claim, now());
                head.parts.push(part);
            }
        }
        Ok(true)
    }

    /// Sends the parts ahead of the client's next fetch (see
    /// `consume/ahead.rs`) to the brokers that owe the connection nothing,
    /// on connections already open and not at risk (a token or SASL
    /// session about to end: the client's next fetch goes out as a new
    /// part then, and replaces the connection), and parks them. Not while
    /// the node is leaving: its clients are moving elsewhere.
    fn send_ahead(&mut self, io: &mut Io, ahead: Vec<ReadAhead>) {
        if io.shared.nodes.is_hidden() {
            return;
        }
        for mut ahead in ahead {
            let idle = io
                .pool
                .ready(Target::Broker(ahead.broker))
                .is_some_and(|c| c.outstanding() == 0);
            if !idle {
                continue;
            }
            let Some(may_bring) = ahead.fit(self.room_bytes) else {
                return;
            };
            let ReadAhead {
                broker,
                request,
                mut meta,
                client_id,
            } = ahead;
            // Its answer goes to no client request: correlation id 0 (the
            // broker connection assigns its own anyway).
            let (request, prepared) =
                self.part_request(broker, request, (meta.version, 0, client_id));
            // Not sent: the broker session is as it was.
            if let Some(part) = io.try_send_part(broker, request) {
                meta.sent_in = self.get().upstream.commit(prepared);
                self.room_bytes = self.room_bytes.saturating_sub(may_bring);
                metrics::counter!(names::FETCHES_READ_AHEAD).increment(1);
                self.get().park(Parked { part, meta });
            }
        }
    }

    /// Closes the fetch sessions the brokers may hold for the client, as
    /// it goes (see `consume/upstream.rs`): a final (S, -1) fetch of
    /// nothing per session, on connections ready now. The request is
    /// written after the sink is gone (a dropped connection writes what is
    /// queued); nobody reads its empty answer.
    pub(super) fn close_sessions(&mut self, io: &mut Io) {
        let Some(state) = self.state.as_ref() else {
            return;
        };
        let version = state.upstream.version();
        let held: Vec<_> = state.upstream.held().collect();
        for (broker, id) in held {
            let close = FetchRequest::default()
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_session_id(id)
                .with_session_epoch(sluice_cluster::split::fetch::FINAL_EPOCH);
            let request =
                Request::from_body(ApiKey::Fetch, version, 0, None, RequestKind::Fetch(close));
            if io.try_send_part(broker, request).is_some() {
                debug!(broker = %broker.0, session_id = id, "closed a broker fetch session as the client goes");
            }
        }
    }

    /// Stashes the answers of parked parts that have arrived.
    fn harvest_parked(&mut self, io: &mut Io) {
        for mut parked in self.take_parked() {
            if parked.part.wait().now_or_never().is_none() {
                self.get().park(parked);
                continue;
            }
            let Parked { part, mut meta } = parked;
            let outcome = self.outcome(io, part, &mut meta);
            self.get().settle(&meta, outcome, now());
        }
    }

    /// A fetch part's outcome; a part still out is parked. A failed part is
    /// logged and its connection dropped.
    fn outcome(&mut self, io: &mut Io, mut part: Part, meta: &mut PartMeta) -> Outcome {
        learn(&mut part, meta, &mut self.get().upstream);
        let mut response = match part.take_result() {
            None => {
                self.get().park(Parked {
                    part,
                    meta: meta.clone(),
                });
                return Outcome::Parked;
            }
            Some(Ok(response)) => response,
            Some(Err(error)) => {
                part_failed(io, part.target, part.broker.as_ref(), ApiKey::Fetch, &error);
                count_synthesized(ApiKey::Fetch);
                return Outcome::failed();
            }
        };
        let frame_bytes = response.wire_len();
        let decoded = io
            .shared
            .view
            .after_follower_fetch(&mut response, part.broker.as_ref())
            .and_then(|()| response.into_body());
        match decoded {
            Ok(body) => Outcome::answered(body, frame_bytes),
            Err(e) => {
                warn!(broker = %part.broker_label(), "undecodable Fetch answer, answering its partitions with NOT_LEADER_OR_FOLLOWER: {e}");
                count_synthesized(ApiKey::Fetch);
                Outcome::failed()
            }
        }
    }

    /// The client's answer to a planned fetch: what has arrived, the rest
    /// parked.
    pub(super) fn finish(
        &mut self,
        io: &mut Io,
        version: i16,
        correlation_id: i32,
        combine: FetchCombine,
        parts: Vec<Part>,
    ) -> Result<Response, ChainError> {
        let mut outcomes = Vec::with_capacity(parts.len());
        for (index, part) in parts.into_iter().enumerate() {
            let Some(mut meta) = combine.meta(index).cloned() else {
                return Err(Invariant::FetchPartWithoutMeta(index).into());
            };
            outcomes.push(self.outcome(io, part, &mut meta));
        }
        if outcomes.iter().any(|o| matches!(o, Outcome::Parked)) {
            metrics::counter!(names::FETCHES_ANSWERED_EARLY).increment(1);
        }
        let (body, ahead) = self.get().assemble(combine, outcomes, now());
        self.send_ahead(io, ahead);
        let mut response = Response::from_body(
            ApiKey::Fetch,
            version,
            correlation_id,
            ResponseKind::Fetch(body),
        );
        post_split(io, &mut response, false, None)?;
        Ok(response)
    }
}

/// Splits a fetch, refreshing the metadata of partitions without a
/// known leader first, but no longer than `until` (the fetch's
/// `max_wait_ms` after it was read): the refresh goes to the least busy
/// broker connection, which may be one where a parked part waits at its
/// broker for its own `max_wait_ms`, and a client must not wait for that.
/// Past `until` the fetch is split with what is known (the partitions
/// still unroutable are answered with an error).
async fn split_fetch(
    io: &mut Io,
    body: &RequestKind,
    version: i16,
    until: Option<Instant>,
) -> Result<SplitRequest, ChainError> {
    let Some(until) = until else {
        return io.split(body, version, &[]).await;
    };
    match tokio::time::timeout_at(until, io.split(body, version, &[])).await {
        Ok(split) => split,
        Err(_) => {
            debug!("a fetch's metadata refresh outlasted its max wait; split with what is known");
            io.split_now(body, version, &[])
        }
    }
}
