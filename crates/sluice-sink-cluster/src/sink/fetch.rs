//! The sink's half of the consume path (see [`sluice_cluster::consume`]): a Fetch
//! goes out as the client's own bytes when one broker serves it all and
//! nothing is parked or stashed; else it is planned against the
//! connection's [`FetchState`](sluice_cluster::consume::FetchState), answered as soon
//! as its data is ready, and what is still out when it is answered is parked
//! for the next fetch. A connection's fetch state is made on its first
//! fetch ([`LazyFetchState`]): a client that never consumes does not carry it.

use std::ops::{Deref, DerefMut};

use futures::FutureExt;
use sluice_chain::ChainError;
use sluice_codec::kafka_protocol::messages::FetchRequest;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use sluice_metrics::names;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::finish::count_synthesized;
use super::leave::leaving_fetch_answer;
use super::send::Dest;
use super::{KafkaSinkCluster, now};
use crate::close::Invariant;
use crate::pending::{Combine, Part, PendingResponse};
use crate::target::Target;
use sluice_cluster::consume::{
    FetchCombine, FetchState, FetchStep, NewPart, Outcome, Parked, PartMeta, Planned, Prepared,
    ReadAhead, SentIn, SessionEvent, SessionReply, learn, passes_through, session_error_answer,
    session_error_name, unknown_partitions,
};
use sluice_cluster::error_codes::NOT_LEADER_OR_FOLLOWER;
use sluice_cluster::route::produce_fetch::fetch_has_rack_id;
use sluice_cluster::split::dispatch::SplitRequest;
use sluice_cluster::topology::BrokerId;

/// A client connection's [`FetchState`], made on its first use.
#[derive(Debug, Default)]
pub(super) struct LazyFetchState(Option<Box<FetchState<Part>>>);

impl LazyFetchState {
    /// The state, made now if this is its first use.
    fn get(&mut self) -> Counted<'_> {
        Counted(self.0.get_or_insert_with(Box::default))
    }

    /// Whether nothing is parked or stashed (see [`FetchState::is_idle`]).
    fn is_idle(&self) -> bool {
        self.0.as_ref().is_none_or(|state| state.is_idle())
    }

    /// What is kept for the client (see [`FetchState::kept_bytes`]).
    pub(super) fn kept_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |state| state.kept_bytes())
    }

    /// The parked parts, taken out (none before the first fetch).
    fn take_parked(&mut self) -> Vec<Parked<Part>> {
        self.0
            .as_mut()
            .map(|state| state.take_parked())
            .unwrap_or_default()
    }
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

impl KafkaSinkCluster {
    /// Routes a client's Fetch.
    pub(super) async fn send_fetch(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        // The client's max_wait_ms counts from here, not from after a
        // metadata refresh below.
        let received = Instant::now();
        self.harvest_parked();
        let version = request.api_version();
        let (applied, strip_rack, asked, max_wait_ms) = {
            let RequestKind::Fetch(fetch) = request.body()? else {
                return Err(Invariant::FetchWithoutBody.into());
            };
            let applied = self.fetch.get().sessions.apply(fetch, version);
            let asked = (fetch.session_id, fetch.session_epoch);
            let rack = fetch_has_rack_id(&fetch.rack_id);
            (applied, rack, asked, fetch.max_wait_ms)
        };
        let (full, session) = match applied {
            Ok(applied) => applied,
            Err(code) => {
                debug!(
                    session_id = asked.0,
                    epoch = asked.1,
                    "answering a fetch in a session sluice does not have with error {code}"
                );
                let answer = ResponseKind::Fetch(session_error_answer(code));
                return Ok(Some(PendingResponse::answering(&request, answer)));
            }
        };
        let full = full.map(RequestKind::Fetch);
        if self.shared.nodes.is_hidden() {
            let leaving = match &full {
                Some(full) => leaving_fetch_answer(&self.shared, &request, full),
                None => {
                    let body = request.body()?.clone();
                    leaving_fetch_answer(&self.shared, &request, &body)
                }
            };
            if leaving.is_some() {
                return Ok(leaving);
            }
        }
        let until = u64::try_from(max_wait_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(|ms| received + std::time::Duration::from_millis(ms));
        let split = match &full {
            Some(full) => self.split_fetch(full, version, until).await?,
            None => self.split_fetch(request.body()?, version, until).await?,
        };
        if passes_through(full.as_ref(), session, self.fetch.is_idle(), &split) {
            return self.send_split_parts(request, split, strip_rack, &[]).await;
        }
        self.send_planned(request, full, (session, received), split)
            .await
    }

    /// Splits a fetch, refreshing the metadata of partitions without a
    /// known leader first, but no longer than `until` (the fetch's
    /// `max_wait_ms` after it was read): the refresh goes to the least busy
    /// broker connection, which may be one where a parked part waits at its
    /// broker for its own `max_wait_ms`, and a client must not wait for that.
    /// Past `until` the fetch is split with what is known (the partitions
    /// still unroutable are answered with an error).
    async fn split_fetch(
        &mut self,
        body: &RequestKind,
        version: i16,
        until: Option<Instant>,
    ) -> Result<SplitRequest, ChainError> {
        let Some(until) = until else {
            return self.split_with_refresh(body, version, &[]).await;
        };
        match tokio::time::timeout_at(until, self.split_with_refresh(body, version, &[])).await {
            Ok(split) => split,
            Err(_) => {
                debug!(
                    "a fetch's metadata refresh outlasted its max wait; split with what is known"
                );
                self.split_now(body, version, &[])
            }
        }
    }

    /// Plans a fetch (`full`: the whole fetch a session stands for), read
    /// at `received`, and sends its new parts.
    async fn send_planned(
        &mut self,
        request: Request,
        full: Option<RequestKind>,
        (session, received): (SessionReply, Instant),
        split: SplitRequest,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let version = request.api_version();
        let unknown = unknown_partitions(&self.shared.view.read(), &split.unroutable, version);
        let routed: Vec<(BrokerId, FetchRequest)> = split
            .parts
            .into_iter()
            .filter_map(|(broker, body)| match body {
                RequestKind::Fetch(fetch) => Some((broker, fetch)),
                _ => None,
            })
            .collect();
        let correlation_id = request.correlation_id();
        let client_id = request.header().client_id.clone();
        let fetch = match full {
            Some(RequestKind::Fetch(full)) => full,
            _ => match request.into_body()? {
                RequestKind::Fetch(fetch) => fetch,
                _ => {
                    return Err(Invariant::FetchWithoutBody.into());
                }
            },
        };
        let Planned {
            mut combine,
            adopted,
            fresh,
        } = self.fetch.get().plan(
            &fetch,
            version,
            (client_id.clone(), session),
            &routed,
            received.into_std(),
        );
        if !unknown.is_empty() {
            combine.answer_unroutable(|key| {
                unknown.get(key).copied().unwrap_or(NOT_LEADER_OR_FOLLOWER)
            });
        }
        let mut parts = adopted;
        for NewPart {
            broker,
            request,
            mut claim,
        } in fresh
        {
            let header = (version, correlation_id, client_id.clone());
            let (part, sent_in) = self.send_fetch_part(broker, request, header).await?;
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
        let prepared = self
            .fetch
            .get()
            .upstream
            .prepare(broker, &mut body, version);
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
        broker: BrokerId,
        body: FetchRequest,
        (version, correlation_id, client_id): (i16, i32, Option<bytes::Bytes>),
    ) -> Result<(Part, SentIn), ChainError> {
        let (request, prepared) =
            self.part_request(broker, body, (version, correlation_id, client_id));
        let part = self.send_part(Dest::Broker(broker), request).await?;
        let sent_in = self.fetch.get().upstream.commit(prepared);
        let part = part.ok_or(Invariant::FetchPartWithoutAnswer)?;
        Ok((part, sent_in))
    }

    /// Whether the oldest entry is a fetch that must wait more (see
    /// [`FetchCombine::on_settled`]); the parts the core asks for are sent
    /// here. Cancel-safe: a new part is recorded once sent; one lost to a
    /// cancel is planned again.
    pub(super) async fn fetch_head_waits(&mut self) -> Result<bool, ChainError> {
        let (refetches, header) = {
            let Some(head) = self.pending.front_mut() else {
                return Ok(false);
            };
            let Combine::Fetch(fetch) = &mut head.combine else {
                return Ok(false);
            };
            let upstream = &mut self.fetch.get().upstream;
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
                .send_fetch_part(broker, request, header.clone())
                .await?;
            claim.sent_in(sent_in);
            if let Some(head) = self.pending.front_mut()
                && let Combine::Fetch(fetch) = &mut head.combine
            {
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
    fn send_ahead(&mut self, ahead: Vec<ReadAhead>) {
        if self.shared.nodes.is_hidden() {
            return;
        }
        for mut ahead in ahead {
            let idle = self
                .connections
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
            if let Some(part) = self.try_send_part(broker, request) {
                meta.sent_in = self.fetch.get().upstream.commit(prepared);
                self.room_bytes = self.room_bytes.saturating_sub(may_bring);
                metrics::counter!(names::FETCHES_READ_AHEAD).increment(1);
                self.fetch.get().park(Parked { part, meta });
            }
        }
    }

    /// Closes the fetch sessions the brokers may hold for the client, as
    /// it goes (see `consume/upstream.rs`): a final (S, -1) fetch of
    /// nothing per session, on connections ready now. The request is
    /// written after the sink is gone (a dropped connection writes what is
    /// queued); nobody reads its empty answer.
    pub(super) fn close_fetch_sessions(&mut self) {
        let Some(state) = self.fetch.0.as_ref() else {
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
            if self.try_send_part(broker, request).is_some() {
                debug!(broker = %broker.0, session_id = id, "closed a broker fetch session as the client goes");
            }
        }
    }

    /// Stashes the answers of parked parts that have arrived.
    fn harvest_parked(&mut self) {
        for mut parked in self.fetch.take_parked() {
            if parked.part.wait().now_or_never().is_none() {
                self.fetch.get().park(parked);
                continue;
            }
            let Parked { part, mut meta } = parked;
            let outcome = self.fetch_outcome(part, &mut meta);
            self.fetch.get().settle(&meta, outcome, now());
        }
    }

    /// A fetch part's outcome; a part still out is parked. A failed part is
    /// logged and its connection dropped.
    fn fetch_outcome(&mut self, mut part: Part, meta: &mut PartMeta) -> Outcome {
        learn(&mut part, meta, &mut self.fetch.get().upstream);
        let mut response = match part.take_result() {
            None => {
                self.fetch.get().park(Parked {
                    part,
                    meta: meta.clone(),
                });
                return Outcome::Parked;
            }
            Some(Ok(response)) => response,
            Some(Err(error)) => {
                self.part_failed(part.target, part.broker.as_ref(), ApiKey::Fetch, &error);
                count_synthesized(ApiKey::Fetch);
                return Outcome::failed();
            }
        };
        let frame_bytes = response.wire_len();
        let decoded = self
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
    pub(super) fn finish_fetch(
        &mut self,
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
            outcomes.push(self.fetch_outcome(part, &mut meta));
        }
        if outcomes.iter().any(|o| matches!(o, Outcome::Parked)) {
            metrics::counter!(names::FETCHES_ANSWERED_EARLY).increment(1);
        }
        let (body, ahead) = self.fetch.get().assemble(combine, outcomes, now());
        self.send_ahead(ahead);
        let mut response = Response::from_body(
            ApiKey::Fetch,
            version,
            correlation_id,
            ResponseKind::Fetch(body),
        );
        self.post_split(&mut response, false, None)?;
        Ok(response)
    }
}
