//! The delegation-token task behind "SCRAM over mTLS": one per sink, shared
//! by all of that sink's client connections.
//!
//! A client authenticates to Sluice with SCRAM as some user. Sluice then
//! authenticates its own broker connections for that client with a Kafka
//! delegation token owned by the user, which it creates over a private
//! super-user mTLS connection (see `kafka`). This module keeps those tokens:
//!
//! - **One token per user.** [`TokenTaskHandle::token_for`] creates the
//!   user's token on the first request; later calls, and concurrent first
//!   calls, share the same creation and the same token. A first creation that
//!   fails is reported to every caller that waited for it; the next call
//!   tries again.
//! - **Published on a `watch` channel**, so a connection can see at any time
//!   which token (and [`DelegationToken::generation`]) is current.
//! - **Rotation at half life.** Each user's token is recreated when half its
//!   lifetime has passed and published with `generation + 1`. The old token
//!   stays valid at the broker until its own expiry, so connections using it
//!   keep working while their owners replace them. A failed creation is
//!   logged, counted and retried with exponential backoff; the old token
//!   stays published meanwhile.
//! - **Idle users are dropped.** When a rotation falls due and no connection
//!   holds the user's receiver any more, the user is forgotten instead of
//!   rotated; a later `token_for` creates a fresh token.
//! - **Only for a user a broker vouches for.** Each client authentication
//!   and re-authentication (KIP-368) as the user, which a broker checked,
//!   vouches for the user until that client's session ends
//!   ([`TokenTaskHandle::vouch`]). A rotation that falls due when no session
//!   vouches any more (the password changed, or the user was deleted, and
//!   every client's re-authentication failed or never came) waits: no new
//!   token is minted until a client authenticates as the user again, or
//!   until nobody holds the token and the user is dropped. The current token
//!   stays published meanwhile and ends at its own expiry; a client that
//!   logs in after it expired waits in `token_for` for its successor. A user never
//!   vouched for, or vouched for by a session without end (the brokers set no
//!   `connections.max.reauth.ms`), is rotated as before.
//!
//! Token creation sits behind the [`TokenCreator`] trait and every timer is
//! `tokio::time`, so the rotation logic is tested with a fake creator and
//! paused time.

pub(crate) mod kafka;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sluice_config::AuthorizeScramOverMtlsConfig;
use sluice_metrics::names;
use sluice_tls::{self as tls, SharedConnector};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::AuthError;
use crate::scram::{ScramClient, ScramError, ScramMechanism};

/// A delegation token, as published to connections.
#[derive(Clone, PartialEq, Eq)]
pub struct DelegationToken {
    /// The token id: the SCRAM username for token authentication.
    pub token_id: String,
    /// The token's HMAC; base64 of it is the SCRAM password. Secret.
    pub hmac: Vec<u8>,
    /// When the broker expires the token (conservatively: measured from the
    /// moment Sluice asked for it). Connections authenticated with it are
    /// closed by the broker after this.
    pub expiry: Instant,
    /// When Sluice asked for the token.
    pub created: Instant,
    /// 1 for a user's first token, +1 on each rotation.
    pub generation: u64,
}

impl fmt::Debug for DelegationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationToken")
            .field("token_id", &self.token_id)
            .field("hmac", &"<redacted>")
            .field("expiry", &self.expiry)
            .field("created", &self.created)
            .field("generation", &self.generation)
            .finish()
    }
}

impl DelegationToken {
    /// The SCRAM password: base64 of the HMAC.
    pub(crate) fn password(&self) -> String {
        BASE64.encode(&self.hmac)
    }

    /// A SCRAM client authenticating with this token (`tokenauth=true`).
    pub(crate) fn scram_client(
        &self,
        mechanism: ScramMechanism,
    ) -> Result<ScramClient, ScramError> {
        ScramClient::new(
            mechanism,
            &self.token_id,
            &self.password(),
            &[("tokenauth", "true")],
        )
    }

    /// The token's total lifetime.
    pub fn lifetime(&self) -> Duration {
        self.expiry.saturating_duration_since(self.created)
    }

    /// When the token task replaces this token: half way through its life.
    pub fn rotate_at(&self) -> Instant {
        self.created + (self.lifetime() / 2).max(MIN_ROTATION_DELAY)
    }
}

/// A token as a [`TokenCreator`] returns it.
#[derive(Clone)]
pub struct CreatedToken {
    /// The token id.
    pub(crate) token_id: String,
    /// The token's HMAC. Secret.
    pub(crate) hmac: Vec<u8>,
    /// How long the token is valid from its issue: the broker's
    /// `expiry_timestamp_ms - issue_timestamp_ms`.
    pub(crate) lifetime: Duration,
}

impl fmt::Debug for CreatedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatedToken")
            .field("token_id", &self.token_id)
            .field("hmac", &"<redacted>")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

/// Creates a delegation token owned by a user, ready to use on every broker.
#[async_trait]
pub trait TokenCreator: Send + Sync + 'static {
    /// Creates a token owned by `User:<username>`; returns once every broker
    /// knows it.
    async fn create(&self, username: &str) -> Result<CreatedToken, AuthError>;
}

/// Timing of the token task.
#[derive(Debug, Clone)]
pub struct TokenSettings {
    /// The longest one creation (connect, create, wait for every broker) may take.
    pub(crate) creation_timeout: Duration,
    /// First wait before retrying a failed rotation.
    pub(crate) retry_initial: Duration,
    /// Longest wait between rotation retries.
    pub(crate) retry_max: Duration,
}

impl Default for TokenSettings {
    fn default() -> Self {
        Self {
            creation_timeout: Duration::from_secs(90),
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
        }
    }
}

/// How often a rotation waiting for a user to be vouched for checks again
/// whether anyone still holds the token (a vouching wakes it at once).
const VOUCH_RECHECK: Duration = Duration::from_secs(1);

/// Until when a broker has vouched for a user's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Vouched {
    /// Until this instant (the end of the latest client session).
    Until(Instant),
    /// For good: a session without end.
    Always,
}

/// Never rotate sooner than this after a creation, whatever the broker says
/// about the lifetime: a broken lifetime must not become a busy loop.
const MIN_ROTATION_DELAY: Duration = Duration::from_secs(1);

/// Starts token tasks.
#[derive(Debug)]
pub struct TokenTask;

impl TokenTask {
    /// The token task for a sink with `authorize_scram_over_mtls`: tokens are
    /// created over mTLS to `cfg.mtls_port_contact_points`. Stops when
    /// `shutdown` is cancelled. Fails only on configuration (TLS files,
    /// contact points); brokers are contacted on the first `token_for`.
    pub fn spawn(
        cfg: &AuthorizeScramOverMtlsConfig,
        shutdown: CancellationToken,
    ) -> Result<TokenTaskHandle, AuthError> {
        let connector = tls::reloadable_connector("authorize_scram_over_mtls", &cfg.tls)?;
        Self::spawn_over(cfg, connector, shutdown)
    }

    /// [`TokenTask::spawn`] over a connector the caller built from
    /// `cfg.tls` (and may reload: each mTLS connection takes the connector
    /// current when it opens).
    pub fn spawn_over(
        cfg: &AuthorizeScramOverMtlsConfig,
        connector: SharedConnector,
        shutdown: CancellationToken,
    ) -> Result<TokenTaskHandle, AuthError> {
        let creator = kafka::MtlsTokenCreator::new(cfg, connector)?;
        Ok(Self::spawn_with(
            Arc::new(creator),
            TokenSettings::default(),
            shutdown,
        ))
    }

    /// A token task with any creator (tests use a fake one).
    pub(crate) fn spawn_with(
        creator: Arc<dyn TokenCreator>,
        settings: TokenSettings,
        shutdown: CancellationToken,
    ) -> TokenTaskHandle {
        TokenTaskHandle {
            inner: Arc::new(Inner {
                creator,
                settings,
                shutdown,
                users: Mutex::new(HashMap::new()),
                vouched: Mutex::new(HashMap::new()),
                vouched_changed: tokio::sync::Notify::new(),
            }),
        }
    }
}

/// A handle to a token task; cheap to clone, one per client connection.
#[derive(Clone)]
pub struct TokenTaskHandle {
    inner: Arc<Inner>,
}

impl fmt::Debug for TokenTaskHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenTaskHandle")
            .field("cached_users", &self.cached_users())
            .field("shut_down", &self.inner.shutdown.is_cancelled())
            .finish()
    }
}

/// The receiver of a user's current token.
pub type TokenReceiver = watch::Receiver<Arc<DelegationToken>>;

/// What a waiter for a user's first token gets.
type FirstResult = Option<Result<TokenReceiver, AuthError>>;

/// A user's entry.
enum Slot {
    /// The first token is being created; waiters watch for the result.
    Creating(watch::Receiver<FirstResult>),
    /// The token exists and is kept fresh by the user's rotation task.
    Ready(TokenReceiver),
}

struct Inner {
    creator: Arc<dyn TokenCreator>,
    settings: TokenSettings,
    shutdown: CancellationToken,
    users: Mutex<HashMap<String, Slot>>,
    /// Until when each user is vouched for (see the module doc).
    vouched: Mutex<HashMap<String, Vouched>>,
    /// Wakes the rotations waiting for their user to be vouched for.
    vouched_changed: tokio::sync::Notify,
}

impl Inner {
    fn users(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.users.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn vouched(&self) -> MutexGuard<'_, HashMap<String, Vouched>> {
        self.vouched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `user` may get a new token at `now`.
    fn vouched_at(&self, user: &str, now: Instant) -> bool {
        match self.vouched().get(user) {
            None | Some(Vouched::Always) => true,
            Some(Vouched::Until(until)) => *until >= now,
        }
    }
}

impl TokenTaskHandle {
    /// The current token of `username`, kept fresh. Creates it on the first
    /// call for that user (concurrent first calls wait for the same
    /// creation); later calls return at once.
    pub async fn token_for(&self, username: &str) -> Result<TokenReceiver, AuthError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(AuthError::Shutdown);
        }
        let found = {
            let mut users = self.inner.users();
            match users.get(username) {
                Some(Slot::Ready(rx)) => Ok(rx.clone()),
                Some(Slot::Creating(rx)) => Err(rx.clone()),
                None => {
                    let (tx, rx) = watch::channel(None);
                    users.insert(username.to_owned(), Slot::Creating(rx.clone()));
                    tokio::spawn(user_task(self.inner.clone(), username.to_owned(), tx));
                    Err(rx)
                }
            }
        };
        let mut pending = match found {
            Ok(ready) => return self.unexpired(username, ready).await,
            Err(pending) => pending,
        };
        let result = pending
            .wait_for(Option::is_some)
            .await
            .map_err(|_| AuthError::Shutdown)?;
        match &*result {
            Some(result) => result.clone(),
            None => Err(AuthError::NoCreationResult),
        }
    }

    /// `rx` once its token has not expired: a rotation that waited for a
    /// broker to vouch for the user may have let it expire (see the module
    /// doc); the caller has just been vouched for, so its successor follows.
    async fn unexpired(
        &self,
        username: &str,
        mut rx: TokenReceiver,
    ) -> Result<TokenReceiver, AuthError> {
        if rx.borrow_and_update().expiry > Instant::now() {
            return Ok(rx);
        }
        self.inner.vouched_changed.notify_waiters();
        let timeout = self.inner.settings.creation_timeout;
        match tokio::time::timeout(timeout, rx.changed()).await {
            Ok(Ok(())) => Ok(rx),
            Ok(Err(_)) => Err(AuthError::Shutdown),
            Err(_) => Err(AuthError::Timeout {
                what: format!("renewing the expired delegation token of user {username}"),
                timeout,
            }),
        }
    }

    /// Records that a broker has just accepted a client's credentials for
    /// `username` (an authentication or a re-authentication), for a session
    /// that ends at `until` (`None`: never). Rotations of the user's token
    /// go on while some such session lasts.
    pub fn vouch(&self, username: &str, until: Option<Instant>) {
        let new = until.map_or(Vouched::Always, Vouched::Until);
        let mut vouched = self.inner.vouched();
        let entry = vouched.entry(username.to_owned()).or_insert(new);
        *entry = (*entry).max(new);
        drop(vouched);
        self.inner.vouched_changed.notify_waiters();
    }

    /// How many users have a token now.
    pub fn cached_users(&self) -> usize {
        self.inner
            .users()
            .values()
            .filter(|s| matches!(s, Slot::Ready(_)))
            .count()
    }
}

/// Creates a user's first token, then keeps rotating it.
async fn user_task(inner: Arc<Inner>, user: String, first: watch::Sender<FirstResult>) {
    let result = tokio::select! {
        _ = inner.shutdown.cancelled() => Err(AuthError::Shutdown),
        r = create(&inner, &user, 1) => r,
    };
    let tx = match result {
        Ok(token) => {
            info!(user, token_id = token.token_id, "delegation token created");
            let (tx, rx) = watch::channel(Arc::new(token));
            inner.users().insert(user.clone(), Slot::Ready(rx.clone()));
            first.send_replace(Some(Ok(rx)));
            tx
        }
        Err(e) => {
            warn!(user, error = %e, "cannot create a delegation token");
            inner.users().remove(&user);
            first.send_replace(Some(Err(e)));
            return;
        }
    };
    drop(first);
    // Several token tasks (one per sink) share the gauge: count up and down.
    let cached = metrics::gauge!(names::DELEGATION_TOKENS_CACHED);
    cached.increment(1.0);
    rotate(&inner, &user, tx).await;
    cached.decrement(1.0);
}

/// Rotates a user's token at half life until shutdown or until nobody uses it.
async fn rotate(inner: &Inner, user: &str, tx: watch::Sender<Arc<DelegationToken>>) {
    loop {
        let current = tx.borrow().clone();
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(current.rotate_at()) => {}
        }
        if drop_if_unused(inner, user, &tx, "the delegation token") {
            return;
        }
        if !wait_vouched(inner, user, &tx).await {
            return;
        }
        let Some(token) = create_with_retry(inner, user, &current).await else {
            return;
        };
        info!(
            user,
            token_id = token.token_id,
            generation = token.generation,
            "delegation token rotated"
        );
        tx.send_replace(Arc::new(token));
    }
}

/// Forgets `user` if no connection holds its token any more (only the
/// task's own receiver is left); says whether it did. `what` names the
/// token in the DEBUG line.
fn drop_if_unused(
    inner: &Inner,
    user: &str,
    tx: &watch::Sender<Arc<DelegationToken>>,
    what: &str,
) -> bool {
    // Under the lock, so that no `token_for` can clone the receiver between
    // the check and the removal.
    let mut users = inner.users();
    if tx.receiver_count() > 1 {
        return false;
    }
    users.remove(user);
    inner.vouched().remove(user);
    debug!(user, "no connection uses {what} any more: dropped");
    true
}

/// Waits until `user` is vouched for (see the module doc). `false`: stop
/// rotating (shutdown, or nobody holds the token any more: the user is
/// dropped).
async fn wait_vouched(inner: &Inner, user: &str, tx: &watch::Sender<Arc<DelegationToken>>) -> bool {
    let mut logged = false;
    while !inner.vouched_at(user, Instant::now()) {
        if !logged {
            info!(
                user,
                "no client session of the user is vouched for by a broker any more \
                 (re-authentication failed or did not come): the delegation token is not \
                 renewed until a client authenticates again"
            );
            logged = true;
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => return false,
            _ = inner.vouched_changed.notified() => {}
            _ = tokio::time::sleep(VOUCH_RECHECK) => {}
        }
        if drop_if_unused(inner, user, tx, "the unvouched delegation token") {
            return false;
        }
    }
    if logged {
        info!(
            user,
            "a client authenticated again: the delegation token is renewed"
        );
    }
    true
}

/// Creates the successor of `current`, retrying with backoff; `None` on shutdown.
async fn create_with_retry(
    inner: &Inner,
    user: &str,
    current: &DelegationToken,
) -> Option<DelegationToken> {
    let mut backoff = inner.settings.retry_initial;
    let mut attempt = 1u32;
    loop {
        let result = tokio::select! {
            _ = inner.shutdown.cancelled() => return None,
            r = create(inner, user, current.generation + 1) => r,
        };
        match result {
            Ok(token) => return Some(token),
            Err(e) => {
                let now = Instant::now();
                if now >= current.expiry {
                    error!(user, attempt, error = %e,
                        "cannot rotate the delegation token, and the current one has expired");
                } else {
                    warn!(user, attempt, error = %e,
                        valid_for_ms = (current.expiry - now).as_millis() as u64,
                        retry_in_ms = backoff.as_millis() as u64,
                        "cannot rotate the delegation token; the current one stays in use");
                }
            }
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(inner.settings.retry_max);
        attempt = attempt.saturating_add(1);
    }
}

/// One creation, bounded by the creation timeout and measured.
async fn create(inner: &Inner, user: &str, generation: u64) -> Result<DelegationToken, AuthError> {
    let created = Instant::now();
    let timeout = inner.settings.creation_timeout;
    let result = tokio::time::timeout(timeout, inner.creator.create(user))
        .await
        .unwrap_or_else(|_| {
            Err(AuthError::Timeout {
                what: format!("creating a delegation token for user {user}"),
                timeout,
            })
        });
    match result {
        Ok(token) => {
            metrics::histogram!(names::DELEGATION_TOKEN_CREATE_SECONDS)
                .record(created.elapsed().as_secs_f64());
            metrics::counter!(names::DELEGATION_TOKEN_CREATIONS).increment(1);
            Ok(DelegationToken {
                token_id: token.token_id,
                hmac: token.hmac,
                expiry: created + token.lifetime,
                created,
                generation,
            })
        }
        Err(e) => {
            metrics::counter!(names::DELEGATION_TOKEN_FAILURES).increment(1);
            Err(e)
        }
    }
}
