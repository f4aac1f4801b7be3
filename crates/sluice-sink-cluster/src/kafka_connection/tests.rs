//! Timer and draining rules of [`KafkaConnection`], on paused tokio time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use sluice_chain::broker::BrokerAddress;
use tokio::sync::watch;
use tokio::time::Instant;

use super::*;

/// A stand-in connection whose outstanding count the test controls.
#[derive(Debug, Clone)]
struct FakeLink {
    name: &'static str,
    outstanding: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
    broker: BrokerAddress,
}

impl FakeLink {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            outstanding: Arc::new(AtomicUsize::new(0)),
            closed: Arc::new(AtomicBool::new(false)),
            broker: BrokerAddress::new("127.0.0.1", 29092).with_id(1),
        }
    }

    fn owe(&self, n: usize) {
        self.outstanding.store(n, Ordering::SeqCst);
    }
}

impl Link for FakeLink {
    fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    fn broker(&self) -> &BrokerAddress {
        &self.broker
    }
}

const LIFETIME: Duration = Duration::from_secs(80);

fn token(generation: u64) -> Arc<DelegationToken> {
    let now = Instant::now();
    Arc::new(DelegationToken {
        token_id: format!("token-{generation}"),
        hmac: vec![1, 2, 3],
        expiry: now + LIFETIME,
        created: now,
        generation,
    })
}

fn token_connection(
    link: FakeLink,
    rx: &watch::Receiver<Arc<DelegationToken>>,
) -> KafkaConnection<FakeLink> {
    KafkaConnection::scram_over_mtls(link, Instant::now(), None, TokenBinding::new(rx.clone()))
}

#[tokio::test(start_paused = true)]
async fn token_connection_is_at_risk_exactly_at_three_eighths_of_the_lifetime() {
    let (_tx, rx) = watch::channel(token(1));
    let conn = token_connection(FakeLink::new("a"), &rx);
    let threshold = LIFETIME.mul_f64(0.5 * 0.75); // 30 s of 80 s
    assert_eq!(threshold, Duration::from_secs(30));

    tokio::time::advance(threshold - Duration::from_millis(1)).await;
    assert_eq!(conn.state(Instant::now()), ConnectionState::Open);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthTokenExpiry
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_token_generation_puts_the_connection_at_risk_at_once() {
    let (tx, rx) = watch::channel(token(1));
    let conn = token_connection(FakeLink::new("a"), &rx);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(conn.state(Instant::now()), ConnectionState::Open);

    tx.send(token(2)).unwrap();
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthTokenExpiry,
        "the switch happens as soon as the new token exists, long before the timer"
    );

    // A connection opened with the new token is open again.
    let fresh = token_connection(FakeLink::new("b"), &rx);
    assert_eq!(fresh.state(Instant::now()), ConnectionState::Open);
}

#[tokio::test(start_paused = true)]
async fn general_connections_follow_the_sasl_session_lifetime_only() {
    let plain = KafkaConnection::general(FakeLink::new("plain"), Instant::now(), None);
    let sasl = KafkaConnection::general(
        FakeLink::new("sasl"),
        Instant::now(),
        Some(Duration::from_secs(100)),
    );
    tokio::time::advance(Duration::from_secs(84)).await;
    assert_eq!(plain.state(Instant::now()), ConnectionState::Open);
    assert_eq!(sasl.state(Instant::now()), ConnectionState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        sasl.state(Instant::now()),
        ConnectionState::AtRiskOfAuthTokenExpiry,
        "renewed at 85% of the session"
    );
    assert_eq!(plain.state(Instant::now()), ConnectionState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_is_unopened() {
    let link = FakeLink::new("a");
    let conn = KafkaConnection::general(link.clone(), Instant::now(), None);
    link.closed.store(true, Ordering::SeqCst);
    assert_eq!(conn.state(Instant::now()), ConnectionState::Unopened);
}

#[tokio::test(start_paused = true)]
async fn replacement_keeps_the_old_connection_until_it_has_drained() {
    let (tx, rx) = watch::channel(token(1));
    let old = FakeLink::new("old");
    let mut conn = token_connection(old.clone(), &rx);
    old.owe(2);
    tx.send(token(2)).unwrap();

    let new = FakeLink::new("new");
    conn.replace(token_connection(new.clone(), &rx)).unwrap();
    assert_eq!(
        conn.connection().name,
        "new",
        "new requests go to the new one"
    );
    assert_eq!(conn.old_connection().map(|c| c.name), Some("old"));
    assert_eq!(conn.state(Instant::now()), ConnectionState::Open);

    old.owe(1);
    conn.reap();
    assert!(conn.old_connection().is_some(), "still owes one response");
    old.owe(0);
    conn.reap();
    assert!(conn.old_connection().is_none(), "dropped once drained");
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_replaced_without_keeping_it() {
    let (_tx, rx) = watch::channel(token(1));
    let mut conn = token_connection(FakeLink::new("old"), &rx);
    conn.replace(token_connection(FakeLink::new("new"), &rx))
        .unwrap();
    assert!(conn.old_connection().is_none());
}

#[tokio::test(start_paused = true)]
async fn replacing_while_the_previous_one_still_drains_is_an_error() {
    let (tx, rx) = watch::channel(token(1));
    let first = FakeLink::new("first");
    let mut conn = token_connection(first.clone(), &rx);
    first.owe(1);
    tx.send(token(2)).unwrap();
    conn.replace(token_connection(FakeLink::new("second"), &rx))
        .unwrap();

    tokio::time::advance(LIFETIME).await;
    tx.send(token(3)).unwrap();
    let err = conn
        .replace(token_connection(FakeLink::new("third"), &rx))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("broker 1 at 127.0.0.1:29092")
            && message.contains("still owes 1 response")
            && message.contains("pending for longer than a token refresh interval"),
        "{message}"
    );
    assert_eq!(conn.connection().name, "second", "nothing was replaced");
}
