//! When a part owed by a broker is due for a stall check, on paused time.

use std::time::Duration;

use sluice_broker::test_support::FakeConn;
use sluice_broker::{BrokerConnectOptions, BrokerConnection};
use sluice_codec::kafka_protocol::messages::{FetchRequest, JoinGroupRequest};
use tokio::time::Instant;

use super::*;
use sluice_cluster::plan::stall::STALL_AFTER;

/// How long the broker may hold `request` itself.
fn own_wait(request: &Request) -> Duration {
    sluice_cluster::plan::stall::own_wait(request.api_key(), request.broker_wait())
}

/// A part's stall clock, on tokio's clock.
struct Clock {
    check_at: Instant,
    suspect_from: Instant,
}

/// The stall clock of `request`, about to be sent on a connection whose
/// `answer_due` is given.
fn stalls_at(request: &Request, answer_due: impl FnOnce(Duration) -> Instant) -> Clock {
    let clock = crate::sink::io::stall_clock(request, answer_due);
    Clock {
        check_at: Instant::from_std(clock.check_at),
        suspect_from: Instant::from_std(clock.suspect_from),
    }
}

fn join() -> Request {
    let join = JoinGroupRequest::default()
        .with_group_id(StrBytes::from_static_str("g").into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(60_000);
    client_request(ApiKey::JoinGroup, 9, 2, RequestKind::JoinGroup(join))
}

fn long_fetch(id: i32) -> Request {
    let fetch = FetchRequest::default()
        .with_max_wait_ms(5_000)
        .with_session_epoch(-1);
    client_request(ApiKey::Fetch, 12, id, RequestKind::Fetch(fetch))
}

#[test]
fn a_produce_waits_nothing_whatever_its_timeout_and_a_join_its_rebalance_wait() {
    // produce() asks the broker to wait up to 1 s for the replicas: a hung
    // leader is checked on after STALL_AFTER all the same.
    assert_eq!(own_wait(&produce(1, -1)), Duration::ZERO);
    assert_eq!(
        own_wait(&join()),
        Duration::from_secs(60),
        "a JoinGroup may wait its rebalance timeout at the coordinator"
    );
    assert_eq!(own_wait(&metadata(3)), Duration::ZERO);
}

/// A connection to a broker that reads nothing and answers nothing (a fake
/// broker played by hand that never reads), and the broker's side of it.
async fn silent_broker() -> (BrokerConnection, FakeConn) {
    let broker = FakeBroker::start().await;
    let options = BrokerConnectOptions::new(Duration::from_secs(5));
    let (conn, accepted) = tokio::join!(
        BrokerConnection::connect(broker.address(), &options),
        broker.accept()
    );
    (conn.unwrap(), accepted)
}

/// A broker serves one request of a connection at a time: what is queued
/// behind a JoinGroup or a long Fetch waits for it, and must not look
/// stalled while it does (a false alarm on healthy brokers).
#[tokio::test]
async fn a_request_queued_behind_long_waits_stalls_only_after_them() {
    let (conn, _socket) = silent_broker().await;
    tokio::time::pause();
    let t0 = Instant::now();
    let join = join();
    assert_eq!(
        stalls_at(&join, |w| conn.answer_due(w)).check_at,
        t0 + Duration::from_secs(60) + STALL_AFTER,
        "nothing ahead of it"
    );
    conn.send(join).await.unwrap().expect("owed an answer");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        stalls_at(&metadata(3), |w| conn.answer_due(w)).check_at,
        t0 + Duration::from_secs(60) + STALL_AFTER,
        "a request with no wait of its own, behind the JoinGroup"
    );
    let _metadata = conn.send(metadata(3)).await.unwrap();
    assert_eq!(
        stalls_at(&long_fetch(4), |w| conn.answer_due(w)).check_at,
        t0 + Duration::from_secs(65) + STALL_AFTER,
        "a fetch behind both may wait its own max_wait after them"
    );
}

/// Once the connection owes nothing, a request's stall time is its own
/// again, however long the waits of the requests before it were.
#[tokio::test]
async fn a_connection_that_owes_nothing_starts_at_once() {
    let (conn, _socket) = silent_broker().await;
    tokio::time::pause();
    // Queued, but never sent: a produce with acks=0 owes nothing.
    let _ = stalls_at(&long_fetch(1), |w| conn.answer_due(w));
    let t0 = Instant::now();
    assert_eq!(
        stalls_at(&metadata(2), |w| conn.answer_due(w)).check_at,
        t0 + STALL_AFTER
    );
}

/// A Produce's broker is checked on after [`STALL_AFTER`] (a hung leader is
/// fenced long before the Produce's `timeout_ms`, and the check finds it
/// gone), but suspect (a WARN) only once that timeout has passed too: a
/// loaded cluster may take seconds to replicate. Any other part's broker
/// is suspect from its first check on.
#[tokio::test]
async fn a_produce_makes_its_broker_suspect_only_after_its_timeout() {
    let (conn, _socket) = silent_broker().await;
    tokio::time::pause();
    let t0 = Instant::now();
    // produce() asks the broker to wait up to 1 s for its replicas.
    let clock = stalls_at(&produce(1, -1), |w| conn.answer_due(w));
    assert_eq!(clock.check_at, t0 + STALL_AFTER);
    assert_eq!(
        clock.suspect_from,
        t0 + STALL_AFTER + Duration::from_secs(1)
    );
    let _ = conn.send(produce(1, -1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    let t1 = Instant::now();
    let clock = stalls_at(&metadata(2), |w| conn.answer_due(w));
    assert_eq!(
        (clock.check_at, clock.suspect_from),
        (t1 + STALL_AFTER, t1 + STALL_AFTER),
        "a Metadata request has no wait of its own"
    );
}

/// A broker is stalled only if no connection of the process has heard from it
/// within the stall window: a part owed on one connection can wait behind a
/// loaded machine's scheduler while the broker answers the sink's other
/// connections, and that must not make the broker suspect (nor log the
/// stall WARN). Once every connection is quiet, it is suspect as before.
#[tokio::test]
async fn a_broker_answering_other_connections_of_the_sink_is_not_stalled() {
    let broker = fake_broker().await;
    // Reads may take longer than the whole test: only the stall check acts.
    let builder = builder_reading_within(broker.addr(), 60);
    let ctx = ctx();
    let (mut quiet, mut busy) = (builder.build_cluster(&ctx), builder.build_cluster(&ctx));
    exchange(
        &mut quiet,
        &ctx,
        metadata(1),
        "metadata on the first client",
    )
    .await;
    exchange(
        &mut busy,
        &ctx,
        metadata(1),
        "metadata on the second client",
    )
    .await;
    let address = broker.address();
    let suspect = || builder.shared.is_suspect(&address);

    tokio::time::pause();
    // The broker stops reading the first client's connection.
    broker.stall().next.store(true, Ordering::SeqCst);
    send(&mut quiet, &ctx, metadata(2)).await;
    within(
        "the broker to hold the request",
        broker.stall().stalled.notified(),
    )
    .await;

    // The second client is answered every second: checks at 2 s and 4 s.
    tokio::time::advance(Duration::from_millis(1500)).await;
    for k in 0..3 {
        exchange(
            &mut busy,
            &ctx,
            metadata(10 + k),
            "metadata on the second client",
        )
        .await;
        let answer = tokio::time::timeout(Duration::from_secs(1), quiet.recv(&ctx)).await;
        assert!(answer.is_err(), "the held request is still owed");
    }
    assert!(
        !suspect(),
        "the broker answered the sink's other connection within the stall window"
    );

    // Nobody hears from it any more: suspect at its second check.
    let answer = tokio::time::timeout(Duration::from_secs(5), quiet.recv(&ctx)).await;
    assert!(answer.is_err(), "the held request is still owed");
    assert!(suspect(), "no connection heard from the broker: suspect");
    broker.stall().release.notify_one();
}
