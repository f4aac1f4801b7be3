//! The slot state machine ([`Slot::on`]) on paused tokio time, with a
//! stand-in connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use sluice_auth::token::DelegationToken;
use sluice_broker::BrokerAddress;
use tokio::sync::watch;
use tokio::time::Instant;

use super::*;

/// A stand-in connection whose outstanding count the test controls; its
/// `alive` count says how many handles (the slot's and the test's) exist.
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

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether a slot still holds this link (the test holds one handle).
    fn held(&self) -> bool {
        Arc::strong_count(&self.closed) > 1
    }
}

impl Link for FakeLink {
    fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    fn abort(&self, _error: BrokerError) {
        self.close();
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

fn slot_with(conn: KafkaConnection<FakeLink>) -> Slot<FakeLink> {
    let mut slot = Slot::default();
    assert!(matches!(slot.on(Event::Opened(conn)), Action::None));
    slot
}

fn check(slot: &mut Slot<FakeLink>) -> Action<FakeLink> {
    slot.on(Event::Check(Instant::now()))
}

fn name(slot: &Slot<FakeLink>) -> Option<&'static str> {
    slot.conn().map(|c| c.link().name)
}

#[tokio::test(start_paused = true)]
async fn a_token_connection_is_open_for_its_whole_token_until_a_successor_is_published() {
    let (tx, rx) = watch::channel(token(1));
    // Opened late in token 1's life: its age does not matter.
    tokio::time::advance(LIFETIME.mul_f64(0.45)).await;
    let mut slot = slot_with(token_connection(FakeLink::new("a"), &rx));
    tokio::time::advance(LIFETIME.mul_f64(0.5)).await;
    assert!(
        matches!(check(&mut slot), Action::Send),
        "no timer from the connection's age: replacing it with the same token would not help"
    );
    tx.send(token(2)).unwrap();
    assert!(matches!(
        check(&mut slot),
        Action::Renew(Renewal::TokenAtRisk)
    ));
    assert!(matches!(
        slot.state(),
        SlotState::AtRisk(_, Renewal::TokenAtRisk)
    ));
    assert_eq!(Renewal::TokenAtRisk.label(), "token_at_risk");
    assert!(
        matches!(check(&mut slot), Action::Renew(_)),
        "stays at risk until renewed"
    );
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
    let raced = KafkaConnection::new(
        FakeLink::new("raced"),
        Auth::Token(binding),
        Instant::now(),
        None,
    );
    assert!(matches!(check(&mut slot_with(raced)), Action::Renew(_)));
    let mut fresh = slot_with(token_connection(FakeLink::new("b"), &rx));
    assert!(matches!(check(&mut fresh), Action::Send));
}

#[tokio::test(start_paused = true)]
async fn general_connections_follow_the_sasl_session_lifetime_only() {
    let mut plain = slot_with(general(FakeLink::new("plain"), None));
    let mut sasl = slot_with(general(
        FakeLink::new("sasl"),
        Some(Duration::from_secs(100)),
    ));
    tokio::time::advance(Duration::from_secs(84)).await;
    assert!(matches!(check(&mut plain), Action::Send));
    assert!(matches!(check(&mut sasl), Action::Send));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(
        matches!(check(&mut sasl), Action::Renew(Renewal::Session)),
        "renewed at 85% of the session"
    );
    assert!(matches!(check(&mut plain), Action::Send));
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
    let mut slot = slot_with(conn);
    tokio::time::advance(Duration::from_secs(17)).await;
    assert!(matches!(check(&mut slot), Action::Renew(Renewal::Session)));
}

#[tokio::test(start_paused = true)]
async fn the_clients_own_auth_connection_is_never_renewed_by_sluice() {
    let conn = KafkaConnection::new(
        FakeLink::new("auth"),
        Auth::ClientSasl,
        Instant::now(),
        None,
    );
    let mut slot = slot_with(conn);
    tokio::time::advance(Duration::from_secs(86_400)).await;
    assert!(matches!(check(&mut slot), Action::Send));
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_is_dropped_and_its_reopening_is_a_recreation() {
    let link = FakeLink::new("a");
    let mut slot = slot_with(general(link.clone(), None));
    assert!(
        matches!(slot.on(Event::Discard), Action::None),
        "open: kept"
    );
    link.close();
    assert!(matches!(check(&mut slot), Action::Open));
    assert!(matches!(slot.state(), SlotState::Closed));
    assert!(!link.held(), "dropped: it failed what it owed");
    assert!(matches!(check(&mut slot), Action::Open), "until reopened");
    let reopened = general(FakeLink::new("b"), None);
    assert!(matches!(slot.on(Event::Opened(reopened)), Action::Reopened));
    assert_eq!(name(&slot), Some("b"));
    assert!(matches!(check(&mut Slot::default()), Action::Open));
}

#[tokio::test(start_paused = true)]
async fn renewal_puts_the_fresh_connection_in_place_and_drops_the_old_one_to_drain() {
    let (tx, rx) = watch::channel(token(1));
    let old = FakeLink::new("old");
    old.outstanding.store(2, Ordering::SeqCst);
    let mut slot = slot_with(token_connection(old.clone(), &rx));
    tx.send(token(2)).unwrap();
    assert!(matches!(check(&mut slot), Action::Renew(_)));
    // Still the old one while the new one opens.
    assert_eq!(name(&slot), Some("old"));

    let next = token_connection(FakeLink::new("new"), &rx);
    assert!(matches!(
        slot.on(Event::Opened(next)),
        Action::Renewed(Renewal::TokenAtRisk)
    ));
    assert_eq!(name(&slot), Some("new"), "new requests go to the new one");
    assert!(
        !old.held(),
        "the old one is dropped: a dropped connection drains what it owes"
    );
    assert!(matches!(check(&mut slot), Action::Send));
}

#[tokio::test(start_paused = true)]
async fn retire_take_and_abort() {
    let busy = FakeLink::new("busy");
    busy.outstanding.store(3, Ordering::SeqCst);
    let mut slot = slot_with(general(busy.clone(), None));
    assert!(matches!(slot.on(Event::Retire), Action::None));
    assert!(matches!(slot.state(), SlotState::Unopened));
    assert!(!busy.held(), "retired: dropped, it drains");

    let moved = FakeLink::new("moved");
    let mut slot = slot_with(general(moved.clone(), None));
    let Action::Taken(conn) = slot.on(Event::Take) else {
        panic!("taken");
    };
    assert_eq!(conn.link().name, "moved");
    assert!(matches!(slot.state(), SlotState::Unopened));

    let hung = FakeLink::new("hung");
    let mut slot = slot_with(general(hung.clone(), None));
    let error = BrokerError::LeftCluster {
        broker: BrokerAddress::new("127.0.0.1", 9092),
    };
    assert!(matches!(slot.on(Event::Abort(error)), Action::Dropped));
    assert!(hung.is_closed(), "ended at once");
    assert!(matches!(slot.state(), SlotState::Closed));
}
