//! What a scripted [`FakeBroker`](super::FakeBroker) answers: a one-broker
//! cluster (broker id 1) leading partitions 0 and 1 of topic [`TOPIC`],
//! optionally behind SASL/PLAIN, with a record of what it saw ([`Seen`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use sluice_codec::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, FetchResponse, MetadataResponse, ProduceResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse, TopicName, fetch_response,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use tokio::sync::watch;

use super::conn::{FakeConn, Stall};

/// What the connections of a scripted broker share: the script, the
/// switches the test flips, and what the broker saw.
pub(super) struct Shared {
    pub(super) addr: SocketAddr,
    pub(super) script: Script,
    pub(super) fail_produce: AtomicBool,
    pub(super) stall: Stall,
    pub(super) auth_gate: Stall,
    pub(super) hold: watch::Sender<bool>,
    pub(super) seen: Mutex<Seen>,
}

/// The topic whose partitions 0 and 1 the scripted broker leads.
pub const TOPIC: &str = "t";

/// The fetch session id a scripted broker gives a Fetch that opens one
/// (epoch 0), unless its script has no room for sessions.
pub const FETCH_SESSION: i32 = 7;

/// How a scripted broker plays its broker. The default: no authentication,
/// a fetch session ([`FETCH_SESSION`]) for every Fetch that asks for one,
/// and every Fetch answered (empty) at once.
#[derive(Clone, Debug)]
pub struct Script {
    /// The SASL/PLAIN login every connection must make before any request
    /// other than ApiVersions and SASL (a request before it ends the
    /// connection, as Kafka does); `None`: no authentication, and no SASL
    /// request is served.
    pub plain: Option<Plain>,
    /// The session id given to a Fetch opening a session (epoch 0); `None`:
    /// no room for sessions (session id 0, as Kafka answers when full).
    pub fetch_session: Option<i32>,
    /// How long an empty Fetch answer is held, at most its `max_wait_ms`, as
    /// by a broker with nothing new.
    pub fetch_hold: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            plain: None,
            fetch_session: Some(FETCH_SESSION),
            fetch_hold: Duration::ZERO,
        }
    }
}

impl Script {
    /// Connections must log in with PLAIN as `user`/`password`; a login
    /// reports `session_lifetime_ms`.
    pub fn with_plain(mut self, user: &str, password: &str, session_lifetime_ms: i64) -> Self {
        self.plain = Some(Plain {
            user: user.to_owned(),
            password: password.to_owned(),
            session_lifetime_ms,
        });
        self
    }

    /// No room for fetch sessions.
    pub fn without_fetch_sessions(mut self) -> Self {
        self.fetch_session = None;
        self
    }

    /// Empty Fetch answers are held up to `hold` (at most their `max_wait_ms`).
    pub fn holding_fetches(mut self, hold: Duration) -> Self {
        self.fetch_hold = hold;
        self
    }
}

/// The one SASL/PLAIN login a scripted broker accepts.
#[derive(Clone, Debug)]
pub struct Plain {
    /// The username.
    pub user: String,
    /// The password.
    pub password: String,
    /// The session lifetime a successful SaslAuthenticate reports (0 for
    /// none).
    pub session_lifetime_ms: i64,
}

/// What a scripted broker saw, over all its connections.
#[derive(Debug, Default)]
pub struct Seen {
    /// Usernames of successful PLAIN logins, one per login.
    pub logins: Vec<String>,
    /// Requests other than ApiVersions and SASL on connections not logged
    /// in (each ended its connection).
    pub violations: Vec<ApiKey>,
    /// Every request's api, in arrival order.
    pub requests: Vec<ApiKey>,
    /// The session id and epoch of every Fetch.
    pub fetches: Vec<(i32, i32)>,
}

/// Serves one connection of a scripted broker until the client closes it,
/// a switch drops it, or a request before the login ends it.
pub(super) async fn serve(mut conn: FakeConn, shared: Arc<Shared>) {
    let script = &shared.script;
    let mut hold = shared.hold.subscribe();
    let mut logged_in = script.plain.is_none();
    let mut held_once = false;
    while let Some(mut request) = conn.next_request(&shared.stall).await {
        let api = request.api_key();
        shared.seen.lock().unwrap().requests.push(api);
        let before_login = matches!(
            api,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        );
        if !logged_in && !before_login {
            // Like Kafka: a request before authentication ends the connection.
            shared.seen.lock().unwrap().violations.push(api);
            return;
        }
        if api == ApiKey::Produce && shared.fail_produce.load(Ordering::SeqCst) {
            return; // drops the connection with the request in flight
        }
        if api == ApiKey::SaslAuthenticate {
            shared.auth_gate.hold_if_armed().await;
        }
        let mut opens_session = false;
        if let Ok(RequestKind::Fetch(f)) = request.body() {
            shared
                .seen
                .lock()
                .unwrap()
                .fetches
                .push((f.session_id, f.session_epoch));
            opens_session = f.session_epoch == 0;
            let wait = Duration::from_millis(u64::try_from(f.max_wait_ms).unwrap_or(0));
            let hold = wait.min(script.fetch_hold);
            if !hold.is_zero() {
                tokio::time::sleep(hold).await;
            }
        }
        if api == ApiKey::Produce && !held_once {
            held_once = true;
            let _ = hold.wait_for(|hold| !*hold).await;
        }
        let mut body = match (&script.plain, request.body().unwrap()) {
            (Some(_), RequestKind::SaslHandshake(_)) => {
                ResponseKind::SaslHandshake(SaslHandshakeResponse::default().with_mechanisms(vec![
                    StrBytes::from_static_str("SCRAM-SHA-256"),
                    StrBytes::from_static_str("PLAIN"),
                ]))
            }
            (Some(plain), RequestKind::SaslAuthenticate(a)) => {
                let expected = format!("\0{}\0{}", plain.user, plain.password);
                let ok = a.auth_bytes[..] == *expected.as_bytes();
                if ok {
                    logged_in = true;
                    shared.seen.lock().unwrap().logins.push(plain.user.clone());
                }
                let answer = SaslAuthenticateResponse::default()
                    .with_error_code(if ok { 0 } else { 58 })
                    .with_session_lifetime_ms(if ok { plain.session_lifetime_ms } else { 0 });
                ResponseKind::SaslAuthenticate(answer)
            }
            (_, body) => answer(body, shared.addr),
        };
        if let (ResponseKind::Fetch(a), Some(session), true) =
            (&mut body, script.fetch_session, opens_session)
        {
            a.session_id = session;
        }
        if api == ApiKey::Produce && !request.expects_response() {
            continue;
        }
        if !conn.reply(&request, &body).await {
            return; // the client is gone
        }
    }
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// The one-broker cluster's answer to `request`.
fn answer(request: &RequestKind, addr: SocketAddr) -> ResponseKind {
    match request {
        RequestKind::ApiVersions(_) => {
            let keys = [
                (ApiKey::Produce, 3, 11),
                (ApiKey::Fetch, 4, 12),
                (ApiKey::Metadata, 0, 12),
                (ApiKey::ApiVersions, 0, 3),
            ];
            ResponseKind::ApiVersions(
                ApiVersionsResponse::default().with_api_keys(
                    keys.iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::Metadata(_) => {
            let partitions = (0..2)
                .map(|i| {
                    MetadataResponsePartition::default()
                        .with_partition_index(i)
                        .with_leader_id(BrokerId(1))
                        .with_replica_nodes(vec![BrokerId(1)])
                        .with_isr_nodes(vec![BrokerId(1)])
                })
                .collect();
            ResponseKind::Metadata(
                MetadataResponse::default()
                    .with_brokers(vec![
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_string(addr.ip().to_string()))
                            .with_port(i32::from(addr.port())),
                    ])
                    .with_controller_id(BrokerId(1))
                    .with_topics(vec![
                        MetadataResponseTopic::default()
                            .with_name(Some(topic()))
                            .with_partitions(partitions),
                    ]),
            )
        }
        RequestKind::Produce(p) => {
            let responses = p
                .topic_data
                .iter()
                .map(|t| {
                    TopicProduceResponse::default()
                        .with_name(t.name.clone())
                        .with_partition_responses(
                            t.partition_data
                                .iter()
                                .map(|d| {
                                    PartitionProduceResponse::default()
                                        .with_index(d.index)
                                        .with_base_offset(42)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
        }
        // Nothing to fetch.
        RequestKind::Fetch(f) => {
            let responses = f
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            fetch_response::PartitionData::default()
                                .with_partition_index(p.partition)
                                .with_high_watermark(0)
                        })
                        .collect();
                    fetch_response::FetchableTopicResponse::default()
                        .with_topic(t.topic.clone())
                        .with_topic_id(t.topic_id)
                        .with_partitions(partitions)
                })
                .collect();
            ResponseKind::Fetch(FetchResponse::default().with_responses(responses))
        }
        other => panic!("the fake broker does not serve {other:?}"),
    }
}
