//! When a part owed by a broker is due for a stall check, on paused time.

use std::time::Duration;

use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerConnection};
use sluice_codec::kafka_protocol::messages::{FetchRequest, JoinGroupRequest};
use tokio::time::Instant;

use super::*;
use crate::sink::stalled::{STALL_AFTER, own_wait, stalls_at};

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

/// A connection to a broker that reads nothing and answers nothing.
async fn silent_broker() -> (BrokerConnection, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let options = BrokerConnectOptions::new(Duration::from_secs(5));
    let (conn, accepted) = tokio::join!(
        BrokerConnection::connect(BrokerAddress::new("127.0.0.1", port), &options),
        listener.accept()
    );
    (conn.unwrap(), accepted.unwrap().0)
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
        stalls_at(&join, &conn).check_at,
        t0 + Duration::from_secs(60) + STALL_AFTER,
        "nothing ahead of it"
    );
    conn.send(join).await.unwrap().expect("owed an answer");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        stalls_at(&metadata(3), &conn).check_at,
        t0 + Duration::from_secs(60) + STALL_AFTER,
        "a request with no wait of its own, behind the JoinGroup"
    );
    let _metadata = conn.send(metadata(3)).await.unwrap();
    assert_eq!(
        stalls_at(&long_fetch(4), &conn).check_at,
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
    let _ = stalls_at(&long_fetch(1), &conn);
    let t0 = Instant::now();
    assert_eq!(stalls_at(&metadata(2), &conn).check_at, t0 + STALL_AFTER);
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
    let clock = stalls_at(&produce(1, -1), &conn);
    assert_eq!(clock.check_at, t0 + STALL_AFTER);
    assert_eq!(
        clock.suspect_from,
        t0 + STALL_AFTER + Duration::from_secs(1)
    );
    let _ = conn.send(produce(1, -1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    let t1 = Instant::now();
    let clock = stalls_at(&metadata(2), &conn);
    assert_eq!(
        (clock.check_at, clock.suspect_from),
        (t1 + STALL_AFTER, t1 + STALL_AFTER),
        "a Metadata request has no wait of its own"
    );
}

/// A broker slow to get to one connection's request while it answers the
/// sink's other connections is alive: the stalled part is not a reason to
/// suspect it (nor to WARN), however long it waits, up to the connection's
/// read timeout.
#[tokio::test]
async fn a_broker_answering_other_connections_is_not_suspect() {
    let broker = FakeBroker::start().await;
    let builder = super::builder_with_read_timeout(broker.addr, 30);
    let ctx = ctx();
    let mut slow = builder.build_cluster(&ctx);
    let mut busy = builder.build_cluster(&ctx);
    exchange(&mut slow, &ctx, metadata(1), "metadata on the slow client").await;
    exchange(&mut busy, &ctx, metadata(1), "metadata on the busy client").await;

    // The broker stops reading the slow client's connection at its produce.
    broker.stall.next.store(true, Ordering::SeqCst);
    send(&mut slow, &ctx, produce(2, -1)).await;
    within(
        "the broker to stop reading",
        broker.stall.stalled.notified(),
    )
    .await;
    let t0 = Instant::now();

    // Past the first check (STALL_AFTER) and the second (one RECHECK_EVERY
    // on), where an unanswered part's broker becomes suspect, while the
    // other client's produces are answered every 250 ms.
    let watch = STALL_AFTER * 2 + Duration::from_secs(1);
    let (waited, ()) = tokio::join!(tokio::time::timeout(watch, slow.recv(&ctx)), async {
        let mut id = 10;
        while t0.elapsed() < watch {
            let answer = exchange(
                &mut busy,
                &ctx,
                produce(id, -1),
                "the busy client's produce",
            )
            .await;
            assert_eq!(produce_codes(answer), [(0, 0), (1, 0)]);
            id += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    assert!(waited.is_err(), "the stalled produce is still owed");
    let conn = slow
        .connections
        .get(crate::connections::Target::Broker(
            sluice_cluster::topology::BrokerId(1),
        ))
        .expect("the slow client's connection");
    assert!(conn.quiet_for(Instant::now()) >= watch - Duration::from_millis(500));
    assert!(
        !slow
            .shared
            .failures
            .is_suspect(conn.address(), Instant::now()),
        "broker 1 answered the busy client all along: it is not suspect"
    );
    broker.stall.release.notify_one();
}
