//! The queue of responses a client connection is owed, in request order.
//!
//! Kafka clients rely on responses coming back in the order of their
//! requests, while one client request may become several broker requests on
//! several connections. Each client request that expects an answer gets one
//! [`PendingResponse`], pushed at the back when it is sent; `recv` waits for
//! the front one's parts and combines them into the one answer.
//!
//! Waiting is cancel-safe: a part's receiver stays in the part until it
//! resolves, and the result is stored in the part as soon as it arrives
//! ([`Part::wait`]), so a `recv` dropped in a `select!` loses nothing and
//! the next one resumes where it stopped.

use std::collections::BTreeSet;

use sluice_broker::{BrokerAddress, BrokerError, ResponseReceiver};
use sluice_codec::{ApiKey, Request, Response, ResponseKind};
use sluice_error::ErrorClass;
use tokio::time::Instant;

use crate::target::Target;
use sluice_cluster::consume::{FetchCombine, FetchPart};
use sluice_cluster::exchange::{Failure, OwedPart, PartStatus};
pub(crate) use sluice_cluster::exchange::{KeyedCombine, Post, SplitCombine, Whole};
use sluice_cluster::plan;
use sluice_cluster::plan::share::ShareCombine;
pub(crate) use sluice_cluster::plan::stall::StallClock;
use sluice_cluster::plan::stall::Watched;
use sluice_cluster::route::OnFailure;
use sluice_cluster::topology::BrokerId;

/// One client request's answer-to-be.
#[derive(Debug)]
pub(crate) struct PendingResponse {
    /// The client's correlation id, written into the answer.
    pub(crate) correlation_id: i32,
    /// The api of the request.
    pub(crate) api_key: ApiKey,
    /// The client's version of it.
    pub(crate) api_version: i16,
    /// The broker requests it became (none when Sluice answers itself).
    pub(crate) parts: Vec<Part>,
    /// How the parts' answers become the client's answer.
    pub(crate) combine: Combine,
}

impl PendingResponse {
    /// `request` answered by Sluice right away with `body`.
    pub(crate) fn answering(request: &Request, body: ResponseKind) -> Self {
        Self::ready(Response::from_body(
            request.api_key(),
            request.api_version(),
            request.correlation_id(),
            body,
        ))
    }

    /// An answer Sluice already has (synthesized).
    pub(crate) fn ready(response: Response) -> Self {
        Self {
            correlation_id: response.correlation_id(),
            api_key: response.api_key(),
            api_version: response.api_version(),
            parts: Vec::new(),
            combine: Combine::Ready(Box::new(response)),
        }
    }

    /// The owed answer of `original`, sent whole as `part`.
    pub(crate) fn whole(original: Request, part: Part, whole: plan::Whole) -> Self {
        Self {
            correlation_id: original.correlation_id(),
            api_key: original.api_key(),
            api_version: original.api_version(),
            parts: vec![part],
            combine: Combine::Whole(Box::new(Whole {
                post: whole.post,
                on_failure: whole.on_failure,
                original,
            })),
        }
    }

    /// The failure policy of a request sent whole (`None`: split, or
    /// answered by Sluice).
    pub(crate) fn whole_policy(&self) -> Option<OnFailure> {
        match &self.combine {
            Combine::Whole(whole) => Some(whole.on_failure),
            _ => None,
        }
    }

    /// The earliest stall check due among its parts still waiting (see
    /// [`sluice_cluster::plan::stall`]).
    pub(crate) fn stall_check_at(&self) -> Option<std::time::Instant> {
        self.parts.iter().filter_map(Part::stall_check_at).min()
    }

    /// Fails each of its parts owed by a broker that `listed` no longer
    /// names ([`BrokerError::LeftCluster`]), adding each such connection
    /// and its broker to `departed` once.
    pub(crate) fn abandon_departed(
        &mut self,
        listed: &BTreeSet<BrokerId>,
        departed: &mut Vec<(Target, BrokerAddress)>,
    ) {
        for part in &mut self.parts {
            if let Target::Broker(id) = part.target
                && !listed.contains(&id)
                && let Some(broker) = part.broker.clone()
            {
                part.abandon(BrokerError::LeftCluster {
                    broker: broker.clone(),
                });
                if !departed.iter().any(|(t, _)| *t == part.target) {
                    departed.push((part.target, broker));
                }
            }
        }
    }

    /// Waits (cancel-safe) until every part has a result, or, for a split
    /// fetch, until it may be answered early or one more part has answered
    /// (see [`sluice_cluster::consume`]).
    pub(crate) async fn wait_parts(&mut self) {
        if let Combine::Fetch(fetch) = &self.combine {
            return wait_fetch(fetch, &mut self.parts).await;
        }
        for part in &mut self.parts {
            part.wait().await;
        }
    }
}

/// Waits (cancel-safe) until a split fetch's entry has waited enough (see
/// [`FetchCombine::next_look`]), or every part has answered, or one more
/// part has.
async fn wait_fetch(fetch: &FetchCombine, parts: &mut [Part]) {
    if parts.iter().all(|p| !p.is_waiting()) {
        return;
    }
    if !fetch.has_deadline() {
        for part in fetch.own_parts(parts) {
            part.wait().await;
        }
        return;
    }
    let Some(wake) = fetch.next_look(parts, Instant::now().into_std()) else {
        return;
    };
    let waiting: Vec<_> = parts
        .iter_mut()
        .filter(|p| p.is_waiting())
        .map(|p| Box::pin(p.wait()))
        .collect();
    tokio::select! {
        _ = futures::future::select_all(waiting) => {}
        () = tokio::time::sleep_until(Instant::from_std(wake)) => {}
    }
}

/// One broker request of a client request.
#[derive(Debug)]
pub(crate) struct Part {
    /// The connection it went out on.
    pub(crate) target: Target,
    /// The broker, for logs and the failure log; `None` for a part that
    /// found no broker address to go to.
    pub(crate) broker: Option<BrokerAddress>,
    /// Its receiver, or its result once it arrived.
    pub(crate) state: PartState,
    /// When the sink checks whether its broker is still in the cluster, and
    /// from when its silence makes the broker suspect (see
    /// [`sluice_cluster::plan::stall`]). `None`: never checked.
    pub(crate) stall: Option<StallClock>,
}

impl Watched for Part {
    type Broker = BrokerAddress;

    fn check_at(&self) -> Option<std::time::Instant> {
        self.stall_check_at()
    }

    fn clock_mut(&mut self) -> Option<&mut StallClock> {
        self.stall.as_mut()
    }

    fn broker(&self) -> Option<&BrokerAddress> {
        self.broker.as_ref()
    }
}

/// Where a part stands.
// Parts live in a short Vec per owed response; boxing the answer would cost
// an allocation per broker response on the hot path to save a few hundred
// bytes per in-flight request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum PartState {
    /// Sent; the answer has not arrived.
    Waiting(Sent),
    /// The broker's answer, or why there is none.
    Done(Result<Response, BrokerError>),
    /// Its result was taken out to be combined.
    Taken,
}

/// A part on its way: where its answer comes from.
#[derive(Debug)]
pub(crate) struct Sent {
    receiver: ResponseReceiver,
    /// The broker it went to: a reply dropped unanswered (which the
    /// connection never does) is that connection's shutdown.
    broker: BrokerAddress,
}

impl Sent {
    fn dropped(&self) -> BrokerError {
        BrokerError::Shutdown {
            broker: self.broker.clone(),
        }
    }
}

impl Part {
    /// A part sent on `target`.
    pub(crate) fn sent(target: Target, broker: BrokerAddress, receiver: ResponseReceiver) -> Self {
        Self {
            target,
            broker: Some(broker.clone()),
            state: PartState::Waiting(Sent { receiver, broker }),
            stall: None,
        }
    }

    /// The same part, checked for a stalled broker as `clock` says.
    pub(crate) fn stalling_at(mut self, clock: StallClock) -> Self {
        self.stall = Some(clock);
        self
    }

    /// When this part, still waiting, is due for a stall check.
    pub(crate) fn stall_check_at(&self) -> Option<std::time::Instant> {
        match self.state {
            PartState::Waiting(_) => self.stall.map(|s| s.check_at),
            PartState::Done(_) | PartState::Taken => None,
        }
    }

    /// Stores the part's result if it has already arrived, without
    /// waiting: an answer can sit in its channel while the client is slow
    /// to take what is ahead of it, and such a part is not stalled.
    pub(crate) fn settle_if_answered(&mut self) {
        let PartState::Waiting(sent) = &mut self.state else {
            return;
        };
        let result = match sent.receiver.try_recv() {
            Ok(result) => result,
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => return,
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => Err(sent.dropped()),
        };
        self.state = PartState::Done(result);
    }

    /// Gives up waiting: the part fails with `error` (a late answer is
    /// dropped by the connection). Nothing happens to a part already done.
    pub(crate) fn abandon(&mut self, error: BrokerError) {
        if let PartState::Waiting(_) = self.state {
            self.state = PartState::Done(Err(error));
        }
    }

    /// A part that could not be sent.
    pub(crate) fn failed(target: Target, error: BrokerError) -> Self {
        Self {
            target,
            broker: error.broker().cloned(),
            state: PartState::Done(Err(error)),
            stall: None,
        }
    }

    /// Waits for the part's result and stores it. Cancel-safe.
    pub(crate) async fn wait(&mut self) {
        if let PartState::Waiting(sent) = &mut self.state {
            let result = match (&mut sent.receiver).await {
                Ok(result) => result,
                // The connection always completes its replies; this is the
                // same failure seen from the other side.
                Err(_) => Err(sent.dropped()),
            };
            self.state = PartState::Done(result);
        }
    }

    /// Takes the result out (a part is combined once). `None` if still waiting.
    pub(crate) fn take_result(&mut self) -> Option<Result<Response, BrokerError>> {
        match std::mem::replace(&mut self.state, PartState::Taken) {
            PartState::Done(result) => Some(result),
            other => {
                self.state = other;
                None
            }
        }
    }

    /// The part's broker for log lines: its address, or `no broker` for a
    /// part that found no broker address to go to.
    pub(crate) fn broker_label(&self) -> String {
        match &self.broker {
            Some(broker) => broker.to_string(),
            None => "no broker".to_owned(),
        }
    }

    /// The error, if the part failed.
    pub(crate) fn error(&self) -> Option<&BrokerError> {
        match &self.state {
            PartState::Done(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether the part's answer has not arrived.
    pub(crate) fn is_waiting(&self) -> bool {
        matches!(self.state, PartState::Waiting(_))
    }
}

impl OwedPart for Part {
    fn status(&self) -> PartStatus {
        match &self.state {
            PartState::Done(Ok(_)) => PartStatus::Answered,
            PartState::Done(Err(e)) => PartStatus::Failed(Failure {
                unsent: !e.request_may_have_been_sent()
                    && e.retriable()
                    && e.unsent_request().is_some(),
                pinned: self.target == Target::Auth,
            }),
            // A part taken out is being combined: neither to wait for nor
            // to send again.
            PartState::Waiting(_) | PartState::Taken => PartStatus::Waiting,
        }
    }
}

impl FetchPart for Part {
    fn is_waiting(&self) -> bool {
        Part::is_waiting(self)
    }

    fn has_failed(&self) -> bool {
        self.error().is_some()
    }

    fn answer_mut(&mut self) -> Option<&mut Response> {
        match &mut self.state {
            PartState::Done(Ok(response)) => Some(response),
            _ => None,
        }
    }
}

/// How a client request's parts become its answer.
// One per in-flight client request, in a queue: the split plan stays inline
// rather than costing an allocation per Produce or Fetch.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Combine {
    /// Sluice answers itself (a synthesized error, an inter-broker API).
    Ready(Box<Response>),
    /// One part carrying the whole request.
    Whole(Box<Whole>),
    /// Parts of a split request, merged by the split module.
    Split(SplitCombine),
    /// Parts of a multi-key request split by coordinator (see
    /// [`sluice_cluster::route::keyed`]).
    Keyed(Box<KeyedCombine>),
    /// Parts of a fetch answered as soon as its data is ready (see
    /// [`sluice_cluster::consume`]).
    Fetch(Box<FetchCombine>),
    /// Parts of a ShareFetch or ShareAcknowledge, merged by the share
    /// sessions (see [`sluice_cluster::route::share`]).
    Share(Box<ShareCombine>),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use sluice_codec::kafka_protocol::messages::{ApiVersionsResponse, ResponseKind};
    use std::time::Duration;

    fn response() -> Response {
        Response::from_body(
            ApiKey::ApiVersions,
            3,
            7,
            ResponseKind::ApiVersions(ApiVersionsResponse::default()),
        )
    }

    #[tokio::test]
    async fn waiting_is_cancel_safe() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let broker = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
        let mut part = Part::sent(Target::Broker(1.into()), broker, rx);
        // A wait cancelled before the answer arrives loses nothing.
        let cancelled = tokio::time::timeout(Duration::from_millis(10), part.wait()).await;
        assert!(cancelled.is_err());
        assert!(part.take_result().is_none(), "still waiting");
        tx.send(Ok(response())).unwrap();
        tokio::time::timeout(Duration::from_secs(5), part.wait())
            .await
            .expect("the answer is there");
        let result = part.take_result().expect("done");
        assert_eq!(result.unwrap().correlation_id(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waiting_in_its_channel_is_not_a_stall() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let broker = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
        let at = Instant::now().into_std();
        let clock = StallClock::new(at, at);
        let mut part = Part::sent(Target::Broker(1.into()), broker, rx).stalling_at(clock);
        part.settle_if_answered();
        assert_eq!(
            part.stall_check_at(),
            Some(at),
            "nothing arrived: still due"
        );
        tx.send(Ok(response())).unwrap();
        assert_eq!(
            part.stall_check_at(),
            Some(at),
            "arrived, not yet looked at"
        );
        part.settle_if_answered();
        assert_eq!(part.stall_check_at(), None, "settled: nothing to check");
        assert_eq!(part.take_result().unwrap().unwrap().correlation_id(), 7);
    }

    #[tokio::test]
    async fn a_dropped_sender_is_a_failure() {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<Response, BrokerError>>();
        drop(tx);
        let broker = BrokerAddress::new("127.0.0.1", 9092).with_id(2);
        let mut part = Part::sent(Target::Broker(2.into()), broker, rx);
        part.wait().await;
        let error = part.error().expect("failed").to_string();
        assert!(error.contains("broker 2 at 127.0.0.1:9092"), "{error}");
    }

    #[test]
    fn ready_entries_keep_their_header() {
        let entry = PendingResponse::ready(response());
        assert_eq!(entry.correlation_id, 7);
        assert_eq!(entry.api_key, ApiKey::ApiVersions);
        assert!(entry.parts.is_empty());
    }
}
