//! Driver tests of client authentication against a fake SASL broker: PLAIN
//! is checked on one connection and replayed on the next, a connection whose
//! SASL session is about to end is replaced while the old one drains (and
//! answers keep request order), and a request pipelined behind a failed
//! SaslAuthenticate never reaches the broker. The client re-authenticates
//! (KIP-368) as its session runs out, each time on a fresh connection.

use super::*;

/// A one-broker cluster whose connections must authenticate with PLAIN as
/// alice/alice-secret. A successful authentication reports
/// `session_lifetime_ms`. It has no room for fetch sessions, and holds an
/// empty Fetch answer up to [`FETCH_HOLD_MS`]. While its produces are held
/// ([`FakeBroker::hold_produce`]), the first Produce on a connection is
/// answered only once they are not.
async fn sasl_broker(session_lifetime_ms: i64) -> FakeBroker {
    let script = Script::default()
        .with_plain("alice", "alice-secret", session_lifetime_ms)
        .without_fetch_sessions()
        .holding_fetches(Duration::from_millis(FETCH_HOLD_MS));
    FakeBroker::scripted(script).await
}

fn handshake(id: i32) -> Request {
    let body = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    client_request(
        ApiKey::SaslHandshake,
        1,
        id,
        RequestKind::SaslHandshake(body),
    )
}

fn authenticate(id: i32, message: &'static [u8]) -> Request {
    let body =
        SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from_static(message));
    client_request(
        ApiKey::SaslAuthenticate,
        2,
        id,
        RequestKind::SaslAuthenticate(body),
    )
}

fn api_versions(id: i32) -> Request {
    client_request(
        ApiKey::ApiVersions,
        3,
        id,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    )
}

/// Authenticates a new client with PLAIN through `sink`; returns the
/// authenticate answer's `session_lifetime_ms` as the client saw it.
async fn plain_login(sink: &mut dyn Sink, ctx: &ConnectionContext) -> i64 {
    exchange(sink, ctx, api_versions(1), "api versions").await;
    let mut answer = exchange(sink, ctx, handshake(2), "handshake").await;
    let ResponseKind::SaslHandshake(h) = answer.body().unwrap() else {
        panic!("not a handshake answer");
    };
    let offered: Vec<&str> = h.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        offered,
        ["PLAIN"],
        "SCRAM is not offered without scram over mtls"
    );
    let login = authenticate(3, b"\0alice\0alice-secret");
    let mut answer = exchange(sink, ctx, login, "authenticate").await;
    let ResponseKind::SaslAuthenticate(a) = answer.body().unwrap() else {
        panic!("not an authenticate answer");
    };
    assert_eq!(a.error_code, 0);
    a.session_lifetime_ms
}

/// A client logged in with PLAIN through a fresh sink of a [`sasl_broker`],
/// after one Metadata exchange; returns it with the session lifetime the
/// client was told.
async fn logged_in(broker: &FakeBroker) -> (Client, i64) {
    let (builder, mut sink, ctx) = client(broker.addr());
    let lifetime = plain_login(&mut *sink, &ctx).await;
    exchange(&mut *sink, &ctx, metadata(4), "metadata").await;
    ((builder, sink, ctx), lifetime)
}

/// With the broker holding produces, sends r5, lets the session of its
/// connection run past the 85% at which it is at risk (1500 ms sessions),
/// re-authenticates the client (r50, r51: its own session ends too), and
/// sends r6, which must go to a replacement connection.
async fn produce_across_a_replacement(
    broker: &FakeBroker,
    sink: &mut dyn Sink,
    ctx: &ConnectionContext,
) {
    broker.hold_produce(true);
    send(sink, ctx, produce(5, -1)).await;
    tokio::time::sleep(SESSION_AT_RISK).await;
    send_reauth(sink, ctx, 50).await;
    send(sink, ctx, produce(6, -1)).await;
}

/// Sends a re-authentication as alice: SaslHandshake `first_id` (answered
/// by Sluice) and SaslAuthenticate `first_id + 1` (checked by the broker on
/// a fresh connection). An expired session may still re-authenticate, so
/// this needs no timing.
async fn send_reauth(sink: &mut dyn Sink, ctx: &ConnectionContext, first_id: i32) {
    send(sink, ctx, handshake(first_id)).await;
    send(
        sink,
        ctx,
        authenticate(first_id + 1, b"\0alice\0alice-secret"),
    )
    .await;
}

/// Receives the answers to [`send_reauth`]`(first_id)`.
async fn recv_reauth(sink: &mut dyn Sink, ctx: &ConnectionContext, first_id: i32) {
    let answer = within("reauth handshake", sink.recv(ctx)).await.unwrap();
    assert_eq!(answer.correlation_id(), first_id);
    let mut answer = within("reauth authenticate", sink.recv(ctx)).await.unwrap();
    assert_eq!(answer.correlation_id(), first_id + 1);
    let ResponseKind::SaslAuthenticate(a) = answer.body().unwrap() else {
        panic!("not an authenticate answer");
    };
    assert_eq!(
        (a.error_code, a.session_lifetime_ms),
        (0, SESSION_MS),
        "re-authenticated, with the broker's lifetime"
    );
}

/// The fake broker's session lifetime, for clients and Sluice alike.
const SESSION_MS: i64 = 1500;

/// Longer than 85% of the fake broker's 1500 ms sessions: a connection
/// authenticated this long ago is at risk. (Not a synchronization: the
/// session's age is what the sink checks.)
const SESSION_AT_RISK: Duration = Duration::from_millis(1300);

#[tokio::test]
async fn plain_is_replayed_and_an_expiring_session_is_replaced_while_the_old_connection_drains() {
    let broker = sasl_broker(SESSION_MS).await;
    let ((_builder, mut sink, ctx), lifetime) = logged_in(&broker).await;
    assert_eq!(
        lifetime, SESSION_MS,
        "the broker's lifetime reaches the client"
    );

    // r5 goes on the authenticated auth connection, where the broker holds
    // it; the client re-authenticates on a connection of its own; r6 finds
    // the connection at risk: a new one is opened with the client's
    // credentials replayed, and r6 goes there.
    produce_across_a_replacement(&broker, &mut *sink, &ctx).await;
    assert_eq!(
        broker.seen(|s| s.logins.len()),
        3,
        "the re-authentication, then PLAIN replayed once"
    );
    assert_eq!(sink.pending(), 4);
    broker.hold_produce(false);
    let first = within("r5", sink.recv(&ctx)).await.unwrap();
    assert_eq!(
        first.correlation_id(),
        5,
        "the old connection's answer first"
    );
    assert_eq!(produce_codes(first), [(0, 0), (1, 0)]);
    recv_reauth(&mut *sink, &ctx, 50).await;
    let second = within("r6", sink.recv(&ctx)).await.unwrap();
    assert_eq!(second.correlation_id(), 6);
    assert_eq!(produce_codes(second), [(0, 0), (1, 0)]);
    broker.seen(|s| assert!(s.violations.is_empty(), "{:?}", s.violations));
}

#[tokio::test]
async fn a_request_pipelined_behind_a_failed_authentication_never_reaches_the_broker() {
    let broker = sasl_broker(0).await;
    let (_builder, mut sink, ctx) = client(broker.addr());
    send(&mut *sink, &ctx, handshake(1)).await;
    send(&mut *sink, &ctx, authenticate(2, b"\0alice\0wrong")).await;
    // Sent before any answer was read: waits for the verdict, then is dropped.
    send(&mut *sink, &ctx, metadata(3)).await;
    within("handshake", sink.recv(&ctx)).await.unwrap();
    let mut failed = within("authenticate", sink.recv(&ctx)).await.unwrap();
    assert_eq!(failed.correlation_id(), 2);
    let ResponseKind::SaslAuthenticate(a) = failed.body().unwrap() else {
        panic!("not an authenticate answer");
    };
    assert_eq!(a.error_code, 58, "the broker's error reaches the client");
    assert_eq!(sink.pending(), 1, "the close is owed");
    let close = within("close", sink.recv(&ctx)).await.unwrap_err();
    assert!(
        close.to_string().contains("authentication failed"),
        "{close}"
    );
    broker.seen(|s| {
        assert!(!s.requests.contains(&ApiKey::Metadata), "{:?}", s.requests);
        assert!(s.violations.is_empty());
    });
}

#[tokio::test]
async fn a_client_without_authentication_is_served_as_before() {
    let broker = fake_broker().await;
    let (_builder, mut sink, ctx) = client(broker.addr());
    exchange(&mut *sink, &ctx, api_versions(1), "api versions").await;
    exchange(&mut *sink, &ctx, metadata(2), "metadata").await;
    let answer = exchange(&mut *sink, &ctx, produce(3, -1), "produce").await;
    assert_eq!(produce_codes(answer), [(0, 0), (1, 0)]);
}

#[tokio::test]
async fn a_replacement_while_the_previous_one_still_drains_keeps_the_client() {
    let broker = sasl_broker(SESSION_MS).await;
    let ((_builder, mut sink, ctx), _) = logged_in(&broker).await;
    // r5 is held on connection A; A's session runs out; r6 goes to its
    // replacement B (and is held there too); then B's session runs out while
    // A still owes r5: r7 goes to a third connection, and A and B both drain.
    // The client re-authenticates before r6 and r7.
    produce_across_a_replacement(&broker, &mut *sink, &ctx).await;
    tokio::time::sleep(SESSION_AT_RISK).await;
    send_reauth(&mut *sink, &ctx, 60).await;
    within("send", sink.send(produce(7, -1), &ctx))
        .await
        .unwrap();
    assert_eq!(
        broker.seen(|s| s.logins.len()),
        5,
        "two re-authentications, PLAIN replayed twice"
    );
    assert_eq!(sink.pending(), 7);
    broker.hold_produce(false);
    for id in [5, 50, 6, 60, 7] {
        if id >= 50 {
            recv_reauth(&mut *sink, &ctx, id).await;
            continue;
        }
        let answer = within("answer", sink.recv(&ctx)).await.unwrap();
        assert_eq!(answer.correlation_id(), id, "answers in request order");
        assert_eq!(produce_codes(answer), [(0, 0), (1, 0)]);
    }
    broker.seen(|s| assert!(s.violations.is_empty(), "{:?}", s.violations));
}

#[tokio::test]
async fn a_refused_reauthentication_answers_the_brokers_error_then_closes() {
    let broker = sasl_broker(SESSION_MS).await;
    let ((_builder, mut sink, ctx), _) = logged_in(&broker).await;
    send(&mut *sink, &ctx, handshake(5)).await;
    send(&mut *sink, &ctx, authenticate(6, b"\0alice\0changed")).await;
    // Pipelined behind the final SaslAuthenticate: waits for its verdict.
    send(&mut *sink, &ctx, metadata(7)).await;
    let answer = within("handshake", sink.recv(&ctx)).await.unwrap();
    assert_eq!(answer.correlation_id(), 5);
    let mut failed = within("authenticate", sink.recv(&ctx)).await.unwrap();
    let ResponseKind::SaslAuthenticate(a) = failed.body().unwrap() else {
        panic!("not an authenticate answer");
    };
    assert_eq!(a.error_code, 58, "the broker's error reaches the client");
    let close = within("close", sink.recv(&ctx)).await.unwrap_err();
    assert!(
        close.to_string().contains("re-authentication failed"),
        "{close}"
    );
    broker.seen(|s| {
        let metadata = s.requests.iter().filter(|a| **a == ApiKey::Metadata);
        assert_eq!(metadata.count(), 1, "only the one before: {:?}", s.requests);
        assert!(s.violations.is_empty(), "{:?}", s.violations);
    });
}

/// How long the fake broker holds an empty fetch answer (at most its
/// `max_wait_ms`).
const FETCH_HOLD_MS: u64 = 500;

/// A client Fetch (v12) of both partitions of `t` opening a client session,
/// waiting up to `max_wait_ms` for one byte.
fn session_fetch(id: i32, max_wait_ms: i32) -> Request {
    let partitions = (0..2)
        .map(|p| {
            fetch_request::FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let body = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(0)
        .with_session_epoch(0)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic())
                .with_partitions(partitions),
        ]);
    client_request(ApiKey::Fetch, 12, id, RequestKind::Fetch(body))
}

/// The refetch of a waiting fetch goes out while the client's next request
/// can cancel it (the source stops waiting for an answer when the client
/// sends bytes). Cancelled while its connection is being replaced, it must
/// leave Sluice's fetch session with the broker as it was: this broker has
/// no room for sessions, so every part must ask it for one (epoch 0), and
/// none may go out sessionless for the rest of the connection's life.
#[tokio::test]
async fn a_refetch_cancelled_while_its_connection_is_replaced_leaves_the_broker_session_as_it_was()
{
    let broker = sasl_broker(SESSION_MS).await;
    let ((_builder, mut sink, ctx), _) = logged_in(&broker).await;
    // Sent 900 ms into the session, the fetch's first part is answered
    // empty 500 ms later, past the 85% at which its connection is at risk:
    // the refetch replaces the connection first, and the broker holds the
    // replacement's authentication.
    tokio::time::sleep(Duration::from_millis(900)).await;
    broker.auth_gate().next.store(true, Ordering::SeqCst);
    send(&mut *sink, &ctx, session_fetch(5, 3000)).await;
    within("the replacement's authentication", async {
        tokio::select! {
            answer = sink.recv(&ctx) => panic!("answered before the refetch: {answer:?}"),
            () = broker.auth_gate().stalled.notified() => {}
        }
    })
    .await;
    // The client sent a request: recv was dropped with the refetch.
    broker.auth_gate().release.notify_one();
    let answer = within("the fetch", sink.recv(&ctx)).await.unwrap();
    assert_eq!(answer.correlation_id(), 5);
    broker.seen(|s| {
        assert!(
            s.fetches.len() >= 2,
            "the fetch and a refetch after the cancel: {:?}",
            s.fetches
        );
        assert!(
            s.fetches.iter().all(|&f| f == (0, 0)),
            "every part asks for a new session, none goes out sessionless: {:?}",
            s.fetches
        );
    });
}
