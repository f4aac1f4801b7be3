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
//! (NETWORK_EXCEPTION, retriable), never an authentication failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_testkit::cluster::{Cluster, REAUTH, REAUTH_MS};
use sluice_testkit::delivery::ToolProcess;
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
