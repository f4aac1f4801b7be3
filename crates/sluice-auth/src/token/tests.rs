//! Rotation tests: a fake creator and paused tokio time, no broker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::*;

const LIFETIME: Duration = Duration::from_secs(100);
const CREATE_DELAY: Duration = Duration::from_millis(200);
/// Generous bound for any wait in virtual time.
const WAIT: Duration = Duration::from_secs(3600);

/// Creates numbered tokens after a short delay; can be told to fail.
struct FakeCreator {
    lifetime: Duration,
    fail: AtomicBool,
    next: AtomicU64,
    calls: mpsc::Sender<String>,
}

#[async_trait]
impl TokenCreator for FakeCreator {
    async fn create(&self, username: &str) -> Result<CreatedToken, AuthError> {
        self.calls.try_send(username.to_owned()).unwrap();
        tokio::time::sleep(CREATE_DELAY).await;
        if self.fail.load(Ordering::SeqCst) {
            return Err(AuthError::NoContactPoint {
                reasons: "fake broker down".into(),
            });
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        Ok(CreatedToken {
            token_id: format!("{username}-{n}"),
            hmac: vec![n as u8; 8],
            lifetime: self.lifetime,
        })
    }
}

struct Fixture {
    creator: Arc<FakeCreator>,
    calls: mpsc::Receiver<String>,
    handle: TokenTaskHandle,
    shutdown: CancellationToken,
}

impl Fixture {
    fn new() -> Self {
        let (tx, calls) = mpsc::channel(1000);
        let creator = Arc::new(FakeCreator {
            lifetime: LIFETIME,
            fail: AtomicBool::new(false),
            next: AtomicU64::new(1),
            calls: tx,
        });
        let shutdown = CancellationToken::new();
        let settings = TokenSettings {
            creation_timeout: Duration::from_secs(10),
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(4),
        };
        let handle = TokenTask::spawn_with(creator.clone(), settings, shutdown.clone());
        Self {
            creator,
            calls,
            handle,
            shutdown,
        }
    }

    /// Waits (in virtual time) for the creator's next call.
    async fn next_call(&mut self) -> String {
        tokio::time::timeout(WAIT, self.calls.recv())
            .await
            .expect("the creator was not called")
            .expect("creator gone")
    }

    /// Creator calls made so far, without waiting.
    fn drain_calls(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.calls.try_recv().ok()).collect()
    }

    fn set_failing(&self, fail: bool) {
        self.creator.fail.store(fail, Ordering::SeqCst);
    }
}

async fn changed(rx: &mut TokenReceiver) -> Arc<DelegationToken> {
    tokio::time::timeout(WAIT, rx.changed())
        .await
        .expect("no new token")
        .expect("token task gone");
    rx.borrow_and_update().clone()
}

#[tokio::test(start_paused = true)]
async fn one_token_per_user_shared_by_concurrent_callers() {
    let mut f = Fixture::new();
    let start = Instant::now();
    let alice = (0..10).map(|_| f.handle.token_for("alice"));
    let bob = f.handle.token_for("bob");
    let (alices, bob) = tokio::join!(futures::future::join_all(alice), bob);

    let first = alices[0].as_ref().unwrap().borrow().clone();
    assert_eq!(first.generation, 1);
    assert_eq!(first.created, start);
    assert_eq!(first.expiry, start + LIFETIME);
    for rx in &alices {
        assert!(Arc::ptr_eq(&rx.as_ref().unwrap().borrow(), &first));
    }
    let bob = bob.unwrap().borrow().clone();
    assert_ne!(bob.token_id, first.token_id);

    let mut calls = f.drain_calls();
    calls.sort();
    assert_eq!(calls, ["alice", "bob"]);
    assert_eq!(f.handle.cached_users(), 2);

    // Later calls return the same token at once, without a creation.
    let again = f.handle.token_for("alice").await.unwrap();
    assert!(Arc::ptr_eq(&again.borrow(), &first));
    assert!(f.drain_calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn rotates_at_half_lifetime_with_increasing_generation() {
    let f = Fixture::new();
    let mut rx = f.handle.token_for("alice").await.unwrap();
    let first = rx.borrow_and_update().clone();
    assert_eq!(first.rotate_at(), first.created + LIFETIME / 2);

    let second = changed(&mut rx).await;
    assert_eq!(second.generation, 2);
    assert_ne!(second.token_id, first.token_id);
    assert_eq!(second.created, first.created + LIFETIME / 2);
    assert_eq!(Instant::now(), second.created + CREATE_DELAY);
    // The old token is still valid when its successor is published.
    assert!(first.expiry > Instant::now());

    let third = changed(&mut rx).await;
    assert_eq!(third.generation, 3);
    assert_eq!(third.created, second.created + LIFETIME / 2);
    assert!(format!("{third:?}").contains("<redacted>"));
}

#[tokio::test(start_paused = true)]
async fn failed_rotation_keeps_the_old_token_and_retries_with_backoff() {
    let mut f = Fixture::new();
    let mut rx = f.handle.token_for("alice").await.unwrap();
    let first = rx.borrow_and_update().clone();
    assert_eq!(f.next_call().await, "alice");

    f.set_failing(true);
    // First attempt at half life, then retries after 1 s, 2 s, 4 s, 4 s.
    let mut attempts = Vec::new();
    for _ in 0..5 {
        f.next_call().await;
        attempts.push(Instant::now() - first.created);
    }
    let half = LIFETIME / 2;
    let step = CREATE_DELAY;
    let expected = [
        half,
        half + step + Duration::from_secs(1),
        half + step * 2 + Duration::from_secs(3),
        half + step * 3 + Duration::from_secs(7),
        half + step * 4 + Duration::from_secs(11),
    ];
    assert_eq!(attempts, expected);
    // The old token is still the one published.
    assert!(!rx.has_changed().unwrap());
    assert_eq!(rx.borrow().generation, 1);

    f.set_failing(false);
    let second = changed(&mut rx).await;
    assert_eq!(second.generation, 2);
    assert_ne!(second.token_id, first.token_id);
}

#[tokio::test(start_paused = true)]
async fn failed_first_creation_reaches_every_waiter_and_is_retried_later() {
    let mut f = Fixture::new();
    f.set_failing(true);
    let (a, b) = tokio::join!(f.handle.token_for("alice"), f.handle.token_for("alice"));
    for result in [a, b] {
        let err = result.unwrap_err();
        assert!(matches!(err, AuthError::NoContactPoint { .. }), "{err}");
    }
    assert_eq!(f.drain_calls(), ["alice"]);
    assert_eq!(f.handle.cached_users(), 0);

    f.set_failing(false);
    let rx = f.handle.token_for("alice").await.unwrap();
    assert_eq!(rx.borrow().generation, 1);
    assert_eq!(f.drain_calls(), ["alice"]);
}

#[tokio::test(start_paused = true)]
async fn unused_tokens_are_dropped_instead_of_rotated() {
    let mut f = Fixture::new();
    let rx = f.handle.token_for("alice").await.unwrap();
    let first = rx.borrow().clone();
    drop(rx);
    assert_eq!(f.handle.cached_users(), 1);

    tokio::time::sleep_until(first.rotate_at() + Duration::from_secs(1)).await;
    assert_eq!(f.handle.cached_users(), 0);
    assert_eq!(f.drain_calls(), ["alice"]);

    let rx = f.handle.token_for("alice").await.unwrap();
    assert_eq!(rx.borrow().generation, 1);
    assert_ne!(rx.borrow().token_id, first.token_id);
    assert_eq!(f.drain_calls(), ["alice"]);
}

#[tokio::test(start_paused = true)]
async fn creation_is_bounded_by_the_timeout() {
    struct Stuck;
    #[async_trait]
    impl TokenCreator for Stuck {
        async fn create(&self, _: &str) -> Result<CreatedToken, AuthError> {
            futures::future::pending().await
        }
    }
    let settings = TokenSettings {
        creation_timeout: Duration::from_secs(5),
        ..TokenSettings::default()
    };
    let handle = TokenTask::spawn_with(Arc::new(Stuck), settings, CancellationToken::new());
    let start = Instant::now();
    let err = handle.token_for("alice").await.unwrap_err();
    assert!(matches!(err, AuthError::Timeout { .. }), "{err}");
    assert_eq!(Instant::now() - start, Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_creation_and_rotation() {
    let mut f = Fixture::new();
    let mut rx = f.handle.token_for("alice").await.unwrap();
    assert_eq!(f.drain_calls(), ["alice"]);

    f.shutdown.cancel();
    let err = f.handle.token_for("bob").await.unwrap_err();
    assert!(matches!(err, AuthError::Shutdown));
    // The rotation task ends: the channel closes without a new token.
    let closed = tokio::time::timeout(WAIT, rx.changed()).await.unwrap();
    assert!(closed.is_err());
    assert!(f.drain_calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_first_creation_fails_the_waiters() {
    let f = Fixture::new();
    let waiting = f.handle.token_for("alice");
    let cancel = async {
        tokio::time::sleep(CREATE_DELAY / 2).await;
        f.shutdown.cancel();
    };
    let (result, ()) = tokio::join!(waiting, cancel);
    assert!(matches!(result, Err(AuthError::Shutdown)));
}

#[test]
fn token_debug_and_password() {
    let now = Instant::now();
    let token = DelegationToken {
        token_id: "tok".into(),
        hmac: b"secret-hmac".to_vec(),
        expiry: now + Duration::from_secs(10),
        created: now,
        generation: 1,
    };
    let debug = format!("{token:?}");
    assert!(!debug.contains("secret"), "{debug}");
    assert_eq!(token.password(), "c2VjcmV0LWhtYWM=");
    assert_eq!(token.lifetime(), Duration::from_secs(10));
    assert_eq!(token.rotate_at(), now + Duration::from_secs(5));
    let client = token.scram_client(ScramMechanism::Sha512).unwrap();
    let first = String::from_utf8(client.client_first()).unwrap();
    assert!(first.starts_with("n,,n=tok,r="), "{first}");
    assert!(first.ends_with(",tokenauth=true"), "{first}");
}

#[tokio::test(start_paused = true)]
async fn a_token_is_renewed_only_while_a_broker_vouches_for_the_user() {
    let mut f = Fixture::new();
    let start = Instant::now();
    // alice's one client authenticated with a 20 s session.
    f.handle
        .vouch("alice", Some(start + Duration::from_secs(20)));
    let mut rx = f.handle.token_for("alice").await.unwrap();
    assert_eq!(f.next_call().await, "alice");
    // The rotation at half life (50 s) finds no session vouching: none.
    tokio::time::sleep(Duration::from_secs(80)).await;
    assert!(f.drain_calls().is_empty(), "no token minted unvouched");
    assert_eq!(
        rx.borrow().generation,
        1,
        "the current token stays published"
    );
    // A client re-authenticates as alice: the rotation goes ahead.
    f.handle
        .vouch("alice", Some(Instant::now() + Duration::from_secs(20)));
    assert_eq!(f.next_call().await, "alice");
    assert_eq!(changed(&mut rx).await.generation, 2);
    // A later, shorter session does not shorten the vouching.
    f.handle.vouch("alice", Some(Instant::now()));
    assert!(
        f.handle
            .inner
            .vouched_at("alice", Instant::now() + Duration::from_secs(19))
    );
    // Unvouched, and then nobody holds the token: the user is dropped.
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(rx);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(f.handle.cached_users(), 0);
    assert!(f.drain_calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_session_without_end_vouches_for_good() {
    let mut f = Fixture::new();
    f.handle.vouch("bob", None);
    f.handle.vouch("bob", Some(Instant::now()));
    let mut rx = f.handle.token_for("bob").await.unwrap();
    f.next_call().await;
    assert_eq!(changed(&mut rx).await.generation, 2, "rotated at half life");
}

#[tokio::test(start_paused = true)]
async fn a_login_after_an_unvouched_token_expired_waits_for_its_successor() {
    let mut f = Fixture::new();
    f.handle
        .vouch("carol", Some(Instant::now() + Duration::from_secs(10)));
    let held = f.handle.token_for("carol").await.unwrap();
    f.next_call().await;
    // Unvouched at the rotation (50 s); the token expires (100 s) while held.
    tokio::time::sleep(Duration::from_secs(150)).await;
    assert!(f.drain_calls().is_empty());
    assert!(held.borrow().expiry <= Instant::now());
    // A client logs in again: vouched, and its token is not the expired one.
    f.handle
        .vouch("carol", Some(Instant::now() + Duration::from_secs(10)));
    let rx = f.handle.token_for("carol").await.unwrap();
    let token = rx.borrow().clone();
    assert_eq!(token.generation, 2);
    assert!(token.expiry > Instant::now());
}
