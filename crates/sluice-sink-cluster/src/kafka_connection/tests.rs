//! The state machine of [`KafkaConnection`] and the [`Draining`] list, on
//! paused tokio time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use tokio::sync::watch;
use tokio::time::Instant;

use super::*;

/// A stand-in connection whose outstanding count the test controls.
#[derive(Debug, Clone)]
struct FakeLink {
    name: &'static str,
    outstanding: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
}

impl FakeLink {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            outstanding: Arc::new(AtomicUsize::new(0)),
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn owe(&self, n: usize) {
        self.outstanding.store(n, Ordering::SeqCst);
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

impl Link for FakeLink {
    fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

const LIFETIME: Duration = Duration::from_secs(80);

/// A token created now, with [`LIFETIME`].
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
    let binding = TokenBinding::new(rx.clone());
    KafkaConnection::new(link, Auth::Token(binding), Instant::now(), None)
}

fn general(link: FakeLink, session: Option<Duration>) -> KafkaConnection<FakeLink> {
    KafkaConnection::new(link, Auth::General, Instant::now(), session)
}

fn names(draining: &Draining<FakeLink>) -> Vec<&'static str> {
    draining.links().iter().map(|l| l.name).collect()
}

#[tokio::test(start_paused = true)]
async fn a_token_connection_is_open_for_its_whole_token_until_a_successor_is_published() {
    let (tx, rx) = watch::channel(token(1));
    // Opened late in token 1's life: its age does not matter.
    tokio::time::advance(LIFETIME.mul_f64(0.45)).await;
    let conn = token_connection(FakeLink::new("a"), &rx);
    tokio::time::advance(LIFETIME.mul_f64(0.5)).await;
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::Open,
        "no timer from the connection's age: replacing it with the same token would not help"
    );
    tx.send(token(2)).unwrap();
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthExpiry
    );
    assert_eq!(conn.renewal_reason(), "token_at_risk");
}

#[tokio::test(start_paused = true)]
async fn the_successor_is_due_at_half_the_token_lifetime() {
    // The rule the at-risk time follows lives in the token task.
    let t = token(1);
    assert_eq!(t.rotate_at() - t.created, LIFETIME / 2);
}

#[tokio::test(start_paused = true)]
async fn a_connection_bound_before_a_token_is_published_is_at_risk_at_once() {
    let (tx, rx) = watch::channel(token(1));
    // The binding is made before authenticating; the successor lands while
    // the SASL exchange with token 1 runs.
    let binding = TokenBinding::new(rx.clone());
    tx.send(token(2)).unwrap();
    let conn = KafkaConnection::new(
        FakeLink::new("raced"),
        Auth::Token(binding),
        Instant::now(),
        None,
    );
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthExpiry
    );
    let fresh = token_connection(FakeLink::new("b"), &rx);
    assert_eq!(fresh.state(Instant::now()), ConnectionState::Open);
}

#[tokio::test(start_paused = true)]
async fn general_connections_follow_the_sasl_session_lifetime_only() {
    let plain = general(FakeLink::new("plain"), None);
    let sasl = general(FakeLink::new("sasl"), Some(Duration::from_secs(100)));
    tokio::time::advance(Duration::from_secs(84)).await;
    assert_eq!(plain.state(Instant::now()), ConnectionState::Open);
    assert_eq!(sasl.state(Instant::now()), ConnectionState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        sasl.state(Instant::now()),
        ConnectionState::AtRiskOfAuthExpiry,
        "renewed at 85% of the session"
    );
    assert_eq!(sasl.renewal_reason(), "session");
    assert_eq!(plain.state(Instant::now()), ConnectionState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_token_connection_also_follows_its_sasl_session() {
    let (_tx, rx) = watch::channel(token(1));
    let binding = TokenBinding::new(rx.clone());
    let conn = KafkaConnection::new(
        FakeLink::new("a"),
        Auth::Token(binding),
        Instant::now(),
        Some(Duration::from_secs(20)),
    );
    tokio::time::advance(Duration::from_secs(17)).await;
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthExpiry
    );
    assert_eq!(conn.renewal_reason(), "session");
}

#[tokio::test(start_paused = true)]
async fn the_clients_own_auth_connection_is_never_renewed_by_sluice() {
    let conn = KafkaConnection::new(
        FakeLink::new("auth"),
        Auth::ClientSasl,
        Instant::now(),
        None,
    );
    tokio::time::advance(Duration::from_secs(86_400)).await;
    assert_eq!(conn.state(Instant::now()), ConnectionState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_is_closed() {
    let link = FakeLink::new("a");
    let conn = general(link.clone(), None);
    link.close();
    assert_eq!(conn.state(Instant::now()), ConnectionState::Closed);
}

#[tokio::test(start_paused = true)]
async fn replacement_drains_the_old_connection_until_it_owes_nothing() {
    let (tx, rx) = watch::channel(token(1));
    let old = FakeLink::new("old");
    let mut conn = token_connection(old.clone(), &rx);
    let mut draining = Draining::default();
    old.owe(2);
    tx.send(token(2)).unwrap();

    let new = FakeLink::new("new");
    conn.replace(token_connection(new.clone(), &rx), &mut draining);
    assert_eq!(conn.link().name, "new", "new requests go to the new one");
    assert_eq!(names(&draining), ["old"]);
    assert_eq!(conn.state(Instant::now()), ConnectionState::Open);

    old.owe(1);
    draining.reap();
    assert_eq!(names(&draining), ["old"], "still owes one response");
    old.owe(0);
    draining.reap();
    assert_eq!(draining.len(), 0, "dropped once drained");
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_replaced_without_keeping_it() {
    let (_tx, rx) = watch::channel(token(1));
    let mut conn = token_connection(FakeLink::new("old"), &rx);
    let mut draining = Draining::default();
    conn.replace(token_connection(FakeLink::new("new"), &rx), &mut draining);
    assert_eq!(draining.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn replacing_again_while_an_earlier_one_drains_keeps_both_draining() {
    // A long-poll fetch or a JoinGroup can be owed on a replaced connection
    // when the next token arrives: no client is closed for that.
    let (tx, rx) = watch::channel(token(1));
    let first = FakeLink::new("first");
    let mut conn = token_connection(first.clone(), &rx);
    let mut draining = Draining::default();
    first.owe(1);
    tx.send(token(2)).unwrap();
    let second = FakeLink::new("second");
    conn.replace(token_connection(second.clone(), &rx), &mut draining);

    tokio::time::advance(LIFETIME / 2).await;
    second.owe(1);
    tx.send(token(3)).unwrap();
    assert_eq!(
        conn.state(Instant::now()),
        ConnectionState::AtRiskOfAuthExpiry
    );
    conn.replace(token_connection(FakeLink::new("third"), &rx), &mut draining);
    assert_eq!(conn.link().name, "third");
    assert_eq!(names(&draining), ["first", "second"]);

    first.close(); // failed what it owed (its read deadline)
    draining.reap();
    assert_eq!(names(&draining), ["second"]);
}

#[tokio::test(start_paused = true)]
async fn a_retired_connection_drains_and_a_closed_one_is_dropped() {
    let mut draining = Draining::default();
    let busy = FakeLink::new("busy");
    busy.owe(3);
    general(busy.clone(), None).retire(&mut draining);
    let closed = FakeLink::new("closed");
    closed.owe(3);
    closed.close();
    general(closed, None).retire(&mut draining);
    assert_eq!(names(&draining), ["busy"]);
}
