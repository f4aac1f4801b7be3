//! Re-authentication (KIP-368) through Sluice, against a real broker that
//! sets `connections.max.reauth.ms`: cluster `reauth` (1 node, 8 s sessions,
//! `cluster.sh start --reauth-ms`; the setting cannot be changed on a running
//! listener, so `trio` cannot be used). `scripts/test` starts that cluster
//! and runs these tests, `#[ignore]`d in the workspace run:
//! `cargo test -p sluice --test reauth -- --ignored`.
//!
//! A Java producer connected through Sluice re-authenticates transparently
//! and keeps working past several session lifetimes, with SCRAM over mTLS
//! and with PLAIN passthrough. With SCRAM over mTLS, once its user's
//! password is changed, that connected client loses access within the
//! window (its re-authentication is refused by the broker, its requests then
//! fail with an authentication error and it cannot reconnect with the old
//! password), while another user's client goes on unaffected. A broker that
//! is down when a client re-authenticates costs the client a reconnection
//! (NETWORK_EXCEPTION, retriable), never an authentication failure. A raw
//! SCRAM client that authenticates with SaslAuthenticate v0 (whose answers
//! carry no session lifetime) is cut off at the end of its session through
//! Sluice as directly, its password changed meanwhile.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use sluice_auth::scram::{ScramClient, ScramMechanism};
use sluice_codec::kafka_protocol::messages::{
    MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::cluster::{Cluster, REAUTH, REAUTH_MS};
use sluice_testkit::delivery::ToolProcess;
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{clients, free_port, unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

const LIFETIME: Duration = Duration::from_millis(REAUTH_MS);

/// One Sluice node in front of `cluster`'s SASL listener, with SCRAM over
/// mTLS (tokens of an hour) or PLAIN passthrough only.
fn start_sluice(cluster: &Cluster, scram_over_mtls: bool) -> (SluiceProcess, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let tokens = scram_over_mtls.then_some(3600);
    let topology = sluice_testkit::scram::sasl_topology(cluster, &listen, tokens, 60);
    let sluice = SluiceProcess::start(sluice_bin(), &topology, &[&listen]);
    (sluice, listen)
}

/// The client properties of a SASL login.
fn sasl_login(mechanism: &str, user: &str, password: &str) -> Vec<String> {
    let module = if mechanism == "PLAIN" {
        "org.apache.kafka.common.security.plain.PlainLoginModule"
    } else {
        "org.apache.kafka.common.security.scram.ScramLoginModule"
    };
    vec![
        "security.protocol=SASL_PLAINTEXT".into(),
        format!("sasl.mechanism={mechanism}"),
        format!(r#"sasl.jaas.config={module} required username="{user}" password="{password}";"#),
        "enable.idempotence=false".into(),
    ]
}

/// Sets `user`'s SCRAM-SHA-256 password on the cluster (creating the user).
fn set_scram_password(cluster: &Cluster, user: &str, password: &str) {
    let bootstrap = cluster.bootstrap("PLAINTEXT");
    let config = format!("SCRAM-SHA-256=[password={password}]");
    cluster
        .tool(
            sluice_testkit::scram::CONFIG_COMMAND,
            &[
                "--bootstrap-server",
                &bootstrap,
                "--alter",
                "--add-config",
                &config,
                "--entity-type",
                "users",
                "--entity-name",
                user,
            ],
            Duration::from_secs(60),
        )
        .assert_success("set a scram password");
}

/// Lets `user` write to `topic`.
fn grant_write(cluster: &Cluster, user: &str, topic: &str) {
    let bootstrap = cluster.bootstrap("PLAINTEXT");
    let principal = format!("User:{user}");
    cluster
        .tool(
            "org.apache.kafka.tools.AclCommand",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--add",
                "--allow-principal",
                &principal,
                "--topic",
                topic,
                "--operation",
                "Write",
                "--operation",
                "Describe",
            ],
            Duration::from_secs(60),
        )
        .assert_success("grant write");
}

/// A `SteadyProducer` through `listen`: one record every 200 ms.
fn steady_producer(cluster: &Cluster, listen: &str, topic: &str, login: &[String]) -> ToolProcess {
    let mut args = vec!["--bootstrap", listen, "--topic", topic];
    for property in login {
        args.extend(["-X", property.as_str()]);
    }
    ToolProcess::spawn(
        clients::java_program(cluster, "SteadyProducer.java", &args),
        "SteadyProducer",
    )
}

/// The `ms` of each event of kind `event` the producer printed.
fn times(producer: &ToolProcess, event: &str) -> Vec<u64> {
    producer
        .events()
        .iter()
        .filter(|e| e["event"] == event)
        .filter_map(|e| e["ms"].as_u64())
        .collect()
}

fn failures(producer: &ToolProcess) -> Vec<Value> {
    producer
        .events()
        .into_iter()
        .filter(|e| e["event"] == "failed")
        .collect()
}

/// How many times Sluice logged that a client of `user` re-authenticated.
fn reauths(sluice: &SluiceProcess, user: &str) -> usize {
    sluice
        .log()
        .lines()
        .filter(|l| l.contains("client re-authenticated") && l.contains(user))
        .count()
}

/// How long (ms) a producer has been acknowledged for: first to last.
fn sent_span(producer: &ToolProcess) -> u64 {
    let sent = times(producer, "sent");
    sent.last().unwrap_or(&0) - sent.first().unwrap_or(&0)
}

/// Waits until every client of `users` has re-authenticated `n` times
/// through `sluice` and every one of `producers` has been acknowledged for
/// more than `n` session lifetimes, and checks that none of them failed a
/// send meanwhile.
fn assert_transparent(
    sluice: &SluiceProcess,
    users: &[&str],
    producers: &mut [&mut ToolProcess],
    n: usize,
) {
    let bound = LIFETIME * u32::try_from(n + 4).unwrap();
    let lifetimes = REAUTH_MS * u64::try_from(n).unwrap();
    wait::until(bound, "every client to re-authenticate", || {
        for producer in producers.iter_mut() {
            producer.assert_running();
        }
        let counts: Vec<usize> = users.iter().map(|u| reauths(sluice, u)).collect();
        let spans: Vec<u64> = producers.iter().map(|p| sent_span(p)).collect();
        if counts.iter().all(|c| *c >= n) && spans.iter().all(|s| *s > lifetimes) {
            Ok(())
        } else {
            Err(format!(
                "re-authentications per user {users:?}: {counts:?}; acknowledged for {spans:?} ms"
            ))
        }
    });
    for producer in producers.iter() {
        let failed = failures(producer);
        assert!(
            failed.is_empty(),
            "failures across re-authentications: {failed:?}"
        );
    }
}

#[test]
#[ignore = "needs cluster `reauth` (scripts/test starts it)"]
fn scram_over_mtls_reauthenticates_and_a_password_change_ends_access_within_the_window() {
    let cluster = Cluster::get(REAUTH);
    let (victim, old, new) = (unique("reauth-user"), "old-secret", "new-secret");
    set_scram_password(&cluster, &victim, old);
    let topic = unique("reauth-scram");
    cluster.create_topic(&topic, 1, 1);
    grant_write(&cluster, &victim, &topic);
    let (sluice, listen) = start_sluice(&cluster, true);

    let login = sasl_login("SCRAM-SHA-256", &victim, old);
    let mut doomed = steady_producer(&cluster, &listen, &topic, &login);
    let login = sasl_login("SCRAM-SHA-512", "admin", "admin-secret");
    let mut bystander = steady_producer(&cluster, &listen, &topic, &login);
    assert_transparent(
        &sluice,
        &[&victim, "admin"],
        &mut [&mut doomed, &mut bystander],
        3,
    );

    set_scram_password(&cluster, &victim, new);
    let changed = Instant::now();
    let changed_ms = times(&doomed, "sent").last().copied().unwrap_or(0);
    // Its next re-authentication is due within one lifetime; the broker
    // refuses it, and Sluice closes the client after the refusal.
    let first_failure = wait::until(
        LIFETIME + Duration::from_secs(10),
        "the connected client to lose access",
        || {
            doomed.assert_running();
            failures(&doomed)
                .into_iter()
                .find(|f| f["auth"] == true)
                .ok_or_else(|| format!("failures: {:?}", failures(&doomed)))
        },
    );
    let lost_after = changed.elapsed();
    let failed_ms = first_failure["ms"].as_u64().unwrap();
    // It cannot get back in with the old password: nothing is acknowledged
    // after the failure, over two more lifetimes.
    let before = times(&bystander, "sent").len();
    wait::until(LIFETIME * 3, "the bystander to go on sending", || {
        let now = times(&bystander, "sent").len();
        let retries = times(&doomed, "failed").len();
        if now >= before + 40 && retries >= 3 {
            Ok(())
        } else {
            Err(format!(
                "bystander {} new records, victim {retries} failed sends",
                now - before
            ))
        }
    });
    let late: Vec<u64> = times(&doomed, "sent")
        .into_iter()
        .filter(|ms| *ms > failed_ms)
        .collect();
    assert!(
        late.is_empty(),
        "acknowledged after losing access: {late:?}"
    );
    let bystander_failures = failures(&bystander);
    assert!(
        bystander_failures.is_empty(),
        "another user's client is affected: {bystander_failures:?}"
    );
    let log = sluice.log();
    assert!(
        log.contains("re-authentication failed"),
        "sluice logs the refusal"
    );
    eprintln!(
        "access lost {lost_after:?} after the password change (last record acknowledged \
         at {changed_ms} ms, first failure at {failed_ms} ms: {first_failure})"
    );
    doomed.terminate(Duration::from_secs(10));
    bystander.terminate(Duration::from_secs(10));
}

#[test]
#[ignore = "needs cluster `reauth` (scripts/test starts it)"]
fn plain_passthrough_reauthenticates_transparently() {
    let cluster = Cluster::get(REAUTH);
    let topic = unique("reauth-plain");
    cluster.create_topic(&topic, 1, 1);
    let (sluice, listen) = start_sluice(&cluster, false);
    let login = sasl_login("PLAIN", "admin", "admin-secret");
    let mut producer = steady_producer(&cluster, &listen, &topic, &login);
    assert_transparent(&sluice, &["admin"], &mut [&mut producer], 3);
    producer.terminate(Duration::from_secs(10));
    assert!(
        !sluice.log().contains("session of user admin has expired"),
        "no session ran out"
    );
}

#[test]
#[ignore = "needs cluster `reauth` (scripts/test starts it); kills its broker"]
fn a_broker_down_during_reauthentication_is_retriable_for_the_client() {
    let cluster = Cluster::get(REAUTH);
    let topic = unique("reauth-down");
    cluster.create_topic(&topic, 1, 1);
    let (sluice, listen) = start_sluice(&cluster, false);
    let login = sasl_login("PLAIN", "admin", "admin-secret");
    let mut producer = steady_producer(&cluster, &listen, &topic, &login);
    assert_transparent(&sluice, &["admin"], &mut [&mut producer], 1);

    // The broker goes away; the client's next re-authentication cannot be
    // checked: it is answered NETWORK_EXCEPTION (the Java client logs it and
    // reconnects), not with an authentication failure.
    let killed = cluster.kill_node(1);
    wait::until(
        LIFETIME * 2 + Duration::from_secs(10),
        "a re-authentication no broker could check",
        || {
            producer.assert_running();
            let log = sluice.log();
            let answered = log.contains("closing the client after answering its re-authentication");
            let told = producer
                .stderr()
                .contains("re-authentication could not be checked");
            if answered && told {
                Ok(())
            } else {
                Err(format!("sluice answered: {answered}, client told: {told}"))
            }
        },
    );
    killed.restart();
    let before = times(&producer, "sent").len();
    wait::until(
        Duration::from_secs(60),
        "the client to be served again",
        || {
            producer.assert_running();
            let after = times(&producer, "sent").len() - before;
            if after >= 10 {
                Ok(())
            } else {
                Err(format!("{after} records acknowledged since the restart"))
            }
        },
    );
    let auth_failures: Vec<Value> = failures(&producer)
        .into_iter()
        .filter(|f| f["auth"] == true)
        .collect();
    assert!(
        auth_failures.is_empty(),
        "a broker outage is not an authentication failure: {auth_failures:?}"
    );
    producer.terminate(Duration::from_secs(10));
}

/// A raw SCRAM-SHA-256 login as `user` on `client`: SaslHandshake v1, then
/// both SaslAuthenticate rounds at `version` (v0 answers carry no session
/// lifetime). Panics unless the server accepts it.
fn raw_scram_login(client: &mut RawClient, user: &str, password: &str, version: i16) {
    let body = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_static_str(ScramMechanism::Sha256.name()));
    let ResponseKind::SaslHandshake(answer) =
        client.request(ApiKey::SaslHandshake, 1, RequestKind::SaslHandshake(body))
    else {
        panic!("not a SaslHandshake answer")
    };
    assert_eq!(answer.error_code, 0, "handshake: {answer:?}");
    let mut scram = ScramClient::new(ScramMechanism::Sha256, user, password, &[]).unwrap();
    let mut round = |bytes: Vec<u8>| {
        let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let ResponseKind::SaslAuthenticate(answer) = client.request(
            ApiKey::SaslAuthenticate,
            version,
            RequestKind::SaslAuthenticate(body),
        ) else {
            panic!("not a SaslAuthenticate answer")
        };
        assert_eq!(answer.error_code, 0, "authenticate: {answer:?}");
        assert_eq!(
            answer.session_lifetime_ms, 0,
            "v{version} carries no lifetime"
        );
        answer.auth_bytes
    };
    let server_first = round(scram.client_first());
    let client_final = scram.handle_server_first(&server_first).unwrap();
    let server_final = round(client_final);
    scram.handle_server_final(&server_final).unwrap();
}

/// Sends Metadata every 250 ms on `client` until the connection is closed;
/// returns how long after `since` that happened. Panics when it is still
/// served after `bound`.
fn served_until_closed(client: &mut RawClient, since: Instant, bound: Duration) -> Duration {
    loop {
        let body = RequestKind::Metadata(MetadataRequest::default().with_topics(None));
        match client.try_request(ApiKey::Metadata, 12, body) {
            Ok(ResponseKind::Metadata(_)) => {}
            Ok(other) => panic!("not a Metadata answer: {other:?}"),
            Err(_) => return since.elapsed(),
        }
        assert!(
            since.elapsed() < bound,
            "still served {:?} after authenticating (sessions last {LIFETIME:?})",
            since.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
#[ignore = "needs cluster `reauth` (scripts/test starts it)"]
fn a_saslauthenticate_v0_client_is_cut_off_at_its_session_end_as_a_direct_one_is() {
    let cluster = Cluster::get(REAUTH);
    let (user, old, new) = (unique("reauth-v0"), "old-secret", "new-secret");
    set_scram_password(&cluster, &user, old);
    let (sluice, listen) = start_sluice(&cluster, true);

    // Both authenticate with SaslAuthenticate v0 (which cannot learn, and so
    // never renews, its session); then the password changes.
    let direct_addr = cluster.bootstrap("SASL_PLAINTEXT");
    let direct_addr = direct_addr.split(',').next().unwrap();
    let mut direct = RawClient::connect(direct_addr);
    raw_scram_login(&mut direct, &user, old, 0);
    let direct_since = Instant::now();
    let mut proxied = RawClient::connect(&listen);
    raw_scram_login(&mut proxied, &user, old, 0);
    let proxied_since = Instant::now();
    set_scram_password(&cluster, &user, new);

    // Kafka closes the direct client at its session's end; Sluice must too,
    // within the same window (the broker's lifetime plus a request's
    // interval and scheduling slack).
    let bound = LIFETIME + Duration::from_secs(5);
    let (direct_after, proxied_after) = std::thread::scope(|s| {
        let direct = s.spawn(|| served_until_closed(&mut direct, direct_since, bound));
        let proxied = served_until_closed(&mut proxied, proxied_since, bound);
        (direct.join().expect("the direct client"), proxied)
    });
    eprintln!(
        "v0 clients closed {direct_after:?} (direct) and {proxied_after:?} (through sluice) \
         after authenticating; sessions last {LIFETIME:?}"
    );
    assert!(
        proxied_after >= LIFETIME - Duration::from_secs(1),
        "closed before its session ended: {proxied_after:?}"
    );
    // The close is logged as the connection ends, just after the client
    // saw it: a bounded wait for the line.
    let ended = format!("sasl session of user {user} has expired");
    wait::until(
        Duration::from_secs(10),
        "sluice to log the end of the session",
        || {
            sluice
                .log()
                .contains(&ended)
                .then_some(())
                .ok_or_else(|| "not logged yet".to_owned())
        },
    );
}
