//! Broker connection tests against a fake broker on a local TCP listener.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, ProduceRequest,
};
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::test_support::{
    Counters, FakeBroker, FakeConn, Logs, raw_request, request, response_frame, within,
};
use sluice_error::ErrorClass;

fn api_versions(correlation_id: i32) -> Request {
    request(
        ApiKey::ApiVersions,
        3,
        correlation_id,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    )
}

/// An ApiVersions response told apart from others by its throttle time.
fn tagged_response(tag: i32) -> ResponseKind {
    ResponseKind::ApiVersions(ApiVersionsResponse::default().with_throttle_time_ms(tag))
}

fn tag_of(response: Response) -> i32 {
    match response.into_body().unwrap() {
        ResponseKind::ApiVersions(body) => body.throttle_time_ms,
        other => panic!("unexpected response {other:?}"),
    }
}

fn options() -> BrokerConnectOptions {
    BrokerConnectOptions::new(Duration::from_secs(5))
}

async fn connected(
    broker: &FakeBroker,
    opts: &BrokerConnectOptions,
) -> (BrokerConnection, FakeConn) {
    let (conn, fake) = tokio::join!(
        BrokerConnection::connect(broker.address(), opts),
        broker.accept()
    );
    (conn.unwrap(), fake)
}

async fn outcome(rx: ResponseReceiver) -> Result<Response, BrokerError> {
    within("a response or an error", rx)
        .await
        .expect("the response sender was dropped without an answer")
}

#[tokio::test]
async fn responses_return_in_order_with_the_clients_correlation_ids() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    // Clients may reuse ids; Sluice must not rely on them.
    let client_ids = [100, 7, 100];
    let mut receivers = Vec::new();
    for id in client_ids {
        receivers.push(conn.send(api_versions(id)).await.unwrap().unwrap());
    }
    let mut broker_ids = Vec::new();
    for _ in 0..3 {
        broker_ids.push(fake.read_request().await.correlation_id());
    }
    assert_eq!(broker_ids, [0, 1, 2]);
    for (tag, id) in broker_ids.iter().enumerate() {
        let frame = response_frame(ApiKey::ApiVersions, 3, *id, &tagged_response(tag as i32));
        fake.write(&frame).await;
    }
    for (tag, rx) in receivers.into_iter().enumerate() {
        let response = outcome(rx).await.unwrap();
        assert_eq!(response.correlation_id(), client_ids[tag]);
        let mut wire = BytesMut::new();
        response.encode(&mut wire).unwrap();
        assert_eq!(
            wire[4..8],
            client_ids[tag].to_be_bytes(),
            "raw bytes patched"
        );
        assert_eq!(tag_of(response), tag as i32);
    }
    assert_eq!(conn.outstanding(), 0);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn acks_zero_produce_has_no_receiver_and_does_not_shift_responses() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let produce = request(
        ApiKey::Produce,
        9,
        5,
        RequestKind::Produce(ProduceRequest::default().with_acks(0).with_timeout_ms(1000)),
    );
    assert!(conn.send(produce).await.unwrap().is_none());
    let rx = conn.send(api_versions(6)).await.unwrap().unwrap();

    let first = fake.read_request().await;
    assert_eq!(
        (first.api_key(), first.correlation_id()),
        (ApiKey::Produce, 0)
    );
    let second = fake.read_request().await;
    assert_eq!(
        (second.api_key(), second.correlation_id()),
        (ApiKey::ApiVersions, 1)
    );
    fake.respond(&second, &tagged_response(9)).await;

    let response = outcome(rx).await.unwrap();
    assert_eq!(response.correlation_id(), 6);
    assert_eq!(tag_of(response), 9);
    assert_eq!(conn.outstanding(), 0);
}

#[tokio::test]
async fn every_pending_request_fails_when_the_broker_closes() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let mut receivers = Vec::new();
    for id in 0..50 {
        receivers.push(conn.send(api_versions(id)).await.unwrap().unwrap());
    }
    for _ in 0..3 {
        fake.read_request().await;
    }
    // A FIN, not a close: closing with unread requests would send a reset.
    within("the broker to shut down its side", fake.stream.shutdown())
        .await
        .unwrap();

    for (i, rx) in receivers.into_iter().enumerate() {
        let err = outcome(rx).await.unwrap_err();
        assert_eq!(err.kind(), "eof", "request {i}: {err}");
        assert!(err.retriable());
        assert!(
            err.to_string().starts_with(&format!(
                "{}: connection closed by the broker",
                broker.address()
            )),
            "{err}"
        );
        if i < 3 {
            assert!(
                err.request_may_have_been_sent(),
                "request {i} was read by the broker"
            );
        }
    }
    assert!(conn.is_closed());
    assert_eq!(conn.outstanding(), 0);
    assert!(matches!(
        conn.failure(),
        Some(BrokerError::ClosedByBroker { .. })
    ));
    let err = conn.send(api_versions(99)).await.unwrap_err();
    assert!(matches!(err, BrokerError::NotSent { .. }), "{err}");
    assert!(!err.request_may_have_been_sent());
    let back = err.unsent_request().expect("the request is handed back");
    assert_eq!(
        (back.api_key(), back.correlation_id()),
        (ApiKey::ApiVersions, 99)
    );
    drop(fake);
}

#[tokio::test]
async fn a_request_queued_behind_a_failed_write_is_handed_back_unsent() {
    // Larger than loopback socket buffers: the writer stays in this write.
    const BIG: usize = 32 * 1024 * 1024;
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let big = conn
        .send(raw_request(ApiKey::ApiVersions, 0, 1, BIG))
        .await
        .unwrap()
        .unwrap();
    let queued = conn.send(api_versions(7)).await.unwrap().unwrap();
    // The first bytes of the big request arrived: it is being written, and
    // the small one waits in the queue behind it.
    let mut head = [0u8; 16];
    within(
        "the big request to start",
        fake.stream.read_exact(&mut head),
    )
    .await
    .unwrap();
    fake.reset();

    let err = outcome(big).await.unwrap_err();
    assert!(err.request_may_have_been_sent(), "{err}");
    assert!(err.unsent_request().is_none(), "{err}");
    let err = outcome(queued).await.unwrap_err();
    assert!(matches!(err, BrokerError::NotSent { .. }), "{err}");
    assert!(err.retriable(), "{err}");
    let back = err
        .unsent_request()
        .expect("the queued request is handed back");
    assert_eq!(
        (back.api_key(), back.correlation_id()),
        (ApiKey::ApiVersions, 7),
        "with the client's correlation id"
    );
}

#[tokio::test]
async fn a_reset_fails_pending_requests() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let a = conn.send(api_versions(1)).await.unwrap().unwrap();
    let b = conn.send(api_versions(2)).await.unwrap().unwrap();
    fake.read_request().await;
    fake.read_request().await;
    fake.reset();
    for rx in [a, b] {
        let err = outcome(rx).await.unwrap_err();
        assert_eq!(err.kind(), "reset", "{err}");
        assert!(
            err.to_string().contains("receive failed: connection reset"),
            "{err}"
        );
    }
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_correlation_mismatch_is_a_protocol_error_for_every_pending_request() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let a = conn.send(api_versions(1)).await.unwrap().unwrap();
    let b = conn.send(api_versions(2)).await.unwrap().unwrap();
    fake.read_request().await;
    let second = fake.read_request().await;
    fake.respond(&second, &tagged_response(0)).await; // answers 1 before 0
    for rx in [a, b] {
        let err = outcome(rx).await.unwrap_err();
        assert!(matches!(err, BrokerError::Protocol { .. }), "{err}");
        assert!(!err.retriable());
        assert!(
            err.to_string()
                .contains("correlation id 1 does not match 0"),
            "{err}"
        );
    }
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_response_to_nothing_is_a_protocol_error() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    fake.write(&response_frame(
        ApiKey::ApiVersions,
        3,
        5,
        &tagged_response(0),
    ))
    .await;
    // Whether the reader sees the stray frame before or after this request
    // is registered (id 0, so a mismatch), the request ends in a protocol error.
    let err = match conn.send(api_versions(1)).await {
        Ok(rx) => outcome(rx.unwrap()).await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.kind(), "protocol", "{err}");
}

#[tokio::test]
async fn the_read_timeout_fails_a_request_the_broker_never_answers() {
    let broker = FakeBroker::start().await;
    let mut opts = options();
    opts.read_timeout = Some(Duration::from_millis(300));
    let (conn, mut fake) = connected(&broker, &opts).await;
    let started = tokio::time::Instant::now();
    let rx = conn.send(api_versions(1)).await.unwrap().unwrap();
    fake.read_request().await;
    let err = outcome(rx).await.unwrap_err();
    assert!(matches!(err, BrokerError::ReadTimeout { .. }), "{err}");
    assert!(
        err.to_string().ends_with("no response within 300ms"),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(conn.is_closed());
    drop(fake);
}

/// Sends `request` (whose legitimate wait is 600 ms) with a 300 ms read
/// timeout to a broker that never answers: it must fail only after both.
async fn fails_only_after_its_wait_and_the_read_timeout(request: Request) {
    let api = request.api_key();
    let broker = FakeBroker::start().await;
    let mut opts = options();
    opts.read_timeout = Some(Duration::from_millis(300));
    let (conn, mut fake) = connected(&broker, &opts).await;
    let started = tokio::time::Instant::now();
    let rx = conn.send(request).await.unwrap().unwrap();
    fake.read_request().await;
    let err = outcome(rx).await.unwrap_err();
    assert!(matches!(err, BrokerError::ReadTimeout { .. }), "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{api:?} is failed only after its wait + read_timeout, not after {:?}",
        started.elapsed()
    );
    drop(fake);
}

#[tokio::test]
async fn a_fetch_may_wait_its_max_wait_on_top_of_the_read_timeout() {
    let fetch = sluice_codec::kafka_protocol::messages::FetchRequest::default()
        .with_max_wait_ms(600)
        .with_session_epoch(-1);
    let request = Request::from_body(ApiKey::Fetch, 12, 1, None, RequestKind::Fetch(fetch));
    fails_only_after_its_wait_and_the_read_timeout(request).await;
}

#[tokio::test]
async fn a_sync_group_and_an_admin_write_may_wait_their_waits_on_top_of_the_read_timeout() {
    use sluice_codec::kafka_protocol::messages::{CreateTopicsRequest, SyncGroupRequest};
    let mut sync = Request::from_body(
        ApiKey::SyncGroup,
        5,
        1,
        None,
        RequestKind::SyncGroup(SyncGroupRequest::default()),
    );
    sync.set_broker_wait_at_least(Duration::from_millis(600));
    fails_only_after_its_wait_and_the_read_timeout(sync).await;
    let create = Request::from_body(
        ApiKey::CreateTopics,
        7,
        1,
        None,
        RequestKind::CreateTopics(CreateTopicsRequest::default().with_timeout_ms(600)),
    );
    fails_only_after_its_wait_and_the_read_timeout(create).await;
}

#[tokio::test]
async fn dropping_the_connection_writes_what_is_queued_answers_what_is_owed_then_closes() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let owed = conn.send(api_versions(1)).await.unwrap().unwrap();
    let acks_zero = || {
        request(
            ApiKey::Produce,
            9,
            7,
            RequestKind::Produce(ProduceRequest::default().with_acks(0).with_timeout_ms(1000)),
        )
    };
    assert!(conn.send(acks_zero()).await.unwrap().is_none());
    assert!(conn.send(acks_zero()).await.unwrap().is_none());
    drop(conn);
    let first = fake.read_request().await;
    assert_eq!(first.api_key(), ApiKey::ApiVersions);
    for n in 1..=2 {
        let produce = fake.read_request().await;
        assert_eq!(
            produce.api_key(),
            ApiKey::Produce,
            "acks=0 produce {n} written, in order"
        );
    }
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(200), fake.stream.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "still open while an answer is owed: {early:?}"
    );
    fake.respond(&first, &tagged_response(3)).await;
    let answered = outcome(owed).await.unwrap();
    assert_eq!(tag_of(answered), 3, "the owed answer is delivered");
    let read = within("the broker to see the close", fake.stream.read(&mut byte)).await;
    assert_eq!(read.unwrap(), 0, "then the connection closes");
}

#[tokio::test]
async fn a_large_request_and_a_large_response_cross_without_deadlock() {
    const BIG: usize = 16 * 1024 * 1024;
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let small = conn
        .send(raw_request(ApiKey::ApiVersions, 0, 1, 0))
        .await
        .unwrap()
        .unwrap();
    let big = conn
        .send(raw_request(ApiKey::ApiVersions, 0, 2, BIG))
        .await
        .unwrap()
        .unwrap();
    // The broker writes a big response before reading the big request, as
    // a real broker may: only a connection that reads while it writes can
    // get through this.
    let first = fake.read_request().await;
    let mut frame = BytesMut::with_capacity(8 + BIG);
    frame.put_i32(i32::try_from(4 + BIG).unwrap());
    frame.put_i32(first.correlation_id());
    frame.put_bytes(7, BIG);
    fake.write(&frame).await;
    let second = fake.read_request().await;
    assert_eq!(second.wire_len(), 10 + BIG);
    fake.respond(
        &second,
        &ResponseKind::ApiVersions(ApiVersionsResponse::default()),
    )
    .await;

    let response = outcome(small).await.unwrap();
    assert_eq!(
        (response.correlation_id(), response.wire_len()),
        (1, 4 + BIG)
    );
    let response = outcome(big).await.unwrap();
    assert_eq!(response.correlation_id(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_a_retriable_connect_error() {
    let addr = FakeBroker::start().await.address(); // dropped: nothing listens
    let err = BrokerConnection::connect(addr.clone().with_id(4), &options())
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::Connect { .. }), "{err}");
    assert!(err.retriable());
    assert!(
        err.to_string().starts_with(&format!(
            "broker 4 at {}: cannot connect: connection refused",
            addr.host_port()
        )),
        "{err}"
    );
}

/// A failed connect is counted by broker and kind; the readiness probe's
/// are not (it reports what it found itself).
#[tokio::test]
async fn a_failed_connect_is_counted_by_broker_and_kind() {
    let counters = Counters::default();
    let _metrics = metrics::set_default_local_recorder(&counters);
    let addr = FakeBroker::start().await.address(); // dropped: nothing listens
    let failures = sluice_metrics::names::BROKER_CONNECT_FAILURES;
    for _ in 0..2 {
        BrokerConnection::connect(addr.clone().with_id(4), &options())
            .await
            .unwrap_err();
    }
    assert_eq!(
        counters.get(failures, &[("broker", "4"), ("kind", "connect")]),
        2
    );
    // A contact point, its id not known yet, is labelled host:port.
    BrokerConnection::connect(addr.clone(), &options())
        .await
        .unwrap_err();
    let label = addr.metric_label();
    assert_eq!(
        counters.get(failures, &[("broker", &label), ("kind", "connect")]),
        1
    );
    let mut probe = options();
    probe.probe = true;
    BrokerConnection::connect(addr.clone().with_id(4), &probe)
        .await
        .unwrap_err();
    assert_eq!(
        counters.get(failures, &[("broker", "4"), ("kind", "connect")]),
        2,
        "the probe's failures are not counted"
    );
}

/// Every answer is timed by api and broker; a connection to a contact
/// point is labelled with the broker's id once it learns it.
#[tokio::test]
async fn answers_are_timed_by_api_and_broker() {
    let counters = Counters::default();
    let _metrics = metrics::set_default_local_recorder(&counters);
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let answer = async |conn: &BrokerConnection, fake: &mut FakeConn, id: i32| {
        let rx = conn.send(api_versions(id)).await.unwrap().unwrap();
        let sent = fake.read_request().await;
        fake.respond(&sent, &tagged_response(id)).await;
        outcome(rx).await.unwrap();
    };
    answer(&conn, &mut fake, 1).await;
    answer(&conn, &mut fake, 2).await;
    let took = sluice_metrics::names::BROKER_REQUEST_DURATION;
    let label = broker.address().metric_label();
    let api = [("api", "ApiVersions"), ("broker", label.as_str())];
    assert_eq!(counters.get(took, &api), 2);
    assert!(conn.set_broker_id(7));
    answer(&conn, &mut fake, 3).await;
    assert_eq!(counters.get(took, &api), 2);
    assert_eq!(
        counters.get(took, &[("api", "ApiVersions"), ("broker", "7")]),
        1
    );
}

#[tokio::test]
async fn a_failure_with_requests_pending_is_logged_once_as_a_warning_and_counted() {
    let logs = Logs::global();
    let counters = Counters::default();
    let _metrics = metrics::set_default_local_recorder(&counters);

    let broker = FakeBroker::start().await;
    let addr = broker.address().with_id(3);
    let opts = options();
    let (conn, mut fake) = tokio::join!(
        BrokerConnection::connect(addr.clone(), &opts),
        broker.accept()
    );
    let conn = conn.unwrap();
    let rx = conn.send(api_versions(1)).await.unwrap().unwrap();
    fake.read_request().await;
    within("the broker to shut down its side", fake.stream.shutdown())
        .await
        .unwrap();
    outcome(rx).await.unwrap_err();

    // The reader reports before it fails the requests.
    let lines = logs.lines_with(&addr.to_string());
    let failures: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("failing its requests"))
        .collect();
    assert_eq!(failures.len(), 1, "{lines:#?}");
    assert!(failures[0].contains("WARN"), "{lines:#?}");
    assert!(
        failures[0].contains(&format!("{addr}: connection closed by the broker")),
        "{lines:#?}"
    );
    let names = sluice_metrics::names::BROKER_RECEIVE_ERRORS;
    assert_eq!(counters.get(names, &[("broker", "3"), ("kind", "eof")]), 1);
    let opened = sluice_metrics::names::BROKER_CONNECTIONS_OPENED;
    assert_eq!(counters.get(opened, &[("broker", "3")]), 1);
    drop(conn);
}

#[tokio::test]
async fn an_idle_close_by_the_broker_is_logged_at_debug_and_counted() {
    let logs = Logs::global();
    let counters = Counters::default();
    let _metrics = metrics::set_default_local_recorder(&counters);

    let broker = FakeBroker::start().await;
    let (conn, fake) = connected(&broker, &options()).await;
    drop(fake);
    // Closing and reporting happen in one step of the reader task, and this
    // runtime has one thread: once closed is seen, the report is written.
    within("the connection to close", async {
        while !conn.is_closed() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let lines = logs.lines_with(&broker.address().to_string());
    assert!(lines.iter().all(|l| !l.contains("WARN")), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("idle broker connection ended")),
        "{lines:#?}"
    );
    let label = broker.address().metric_label();
    let idle = sluice_metrics::names::BROKER_CONNECTIONS_IDLE_CLOSED;
    assert_eq!(
        counters.get(idle, &[("broker", &label), ("kind", "eof")]),
        1
    );
    // An idle close is routine: it is not a receive error.
    let errors = sluice_metrics::names::BROKER_RECEIVE_ERRORS;
    assert_eq!(
        counters.get(errors, &[("broker", &label), ("kind", "eof")]),
        0
    );
}

#[tokio::test]
async fn a_connection_named_after_connecting_reports_with_its_broker_id() {
    let logs = Logs::global();
    let counters = Counters::default();
    let _metrics = metrics::set_default_local_recorder(&counters);

    let broker = FakeBroker::start().await;
    let (conn, fake) = connected(&broker, &options()).await;
    assert_eq!(conn.address().id, None, "opened to a contact point");
    assert!(conn.set_broker_id(41));
    assert!(conn.set_broker_id(41), "the same id again is fine");
    assert!(!conn.set_broker_id(42), "a connection names one broker");
    let named = broker.address().with_id(41);
    assert_eq!(conn.address(), &named);

    drop(fake);
    within("the connection to close", async {
        while !conn.is_closed() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let lines = logs.lines_with(&named.to_string());
    assert!(
        lines
            .iter()
            .any(|l| l.contains("idle broker connection ended")),
        "the log names broker 41: {lines:#?}"
    );
    let idle = sluice_metrics::names::BROKER_CONNECTIONS_IDLE_CLOSED;
    assert_eq!(counters.get(idle, &[("broker", "41"), ("kind", "eof")]), 1);
    assert_eq!(
        conn.failure().and_then(|e| e.broker().cloned()),
        Some(named),
        "errors name it too"
    );
}

#[tokio::test]
async fn responses_arriving_in_pieces_after_an_idle_spell_arrive_whole() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    // One answered request: the reader then owes nothing and gives its
    // buffer back.
    for (tag, id) in [(1, 10), (2, 11)] {
        let rx = conn.send(api_versions(id)).await.unwrap().unwrap();
        let sent = fake.read_request().await;
        let frame = response_frame(
            ApiKey::ApiVersions,
            3,
            sent.correlation_id(),
            &tagged_response(tag),
        );
        // A few bytes at a time: the length prefix split, then the body.
        for piece in frame.chunks(3) {
            fake.write(piece).await;
        }
        let response = outcome(rx).await.unwrap();
        assert_eq!(response.correlation_id(), id);
        assert_eq!(tag_of(response), tag);
    }
    assert_eq!(conn.outstanding(), 0);
    assert!(!conn.is_closed());
}

/// A connection ended with `abort` fails what it owes with the given error
/// at once, without waiting for the broker, closes its socket (the broker
/// reads EOF) and takes no more requests; a dropped one would have waited.
#[tokio::test]
async fn an_aborted_connection_fails_what_it_owes_and_closes_at_once() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker, &options()).await;
    let rx = conn.send(api_versions(4)).await.unwrap().unwrap();
    fake.read_request().await;
    let left = BrokerError::LeftCluster {
        broker: conn.address().clone(),
    };
    conn.abort(left);
    let error = outcome(rx).await.unwrap_err();
    assert!(
        matches!(error, BrokerError::LeftCluster { .. }),
        "{error:?}"
    );
    assert!(conn.is_closed());
    let mut rest = Vec::new();
    let read = within("EOF at the broker", fake.stream.read_to_end(&mut rest)).await;
    assert_eq!(read.unwrap(), 0, "nothing more was written");
    let refused = conn.send(api_versions(5)).await.unwrap_err();
    assert!(
        matches!(refused, BrokerError::NotSent { .. }),
        "{refused:?}"
    );
}
