//! sluice-auth against the real 3-node test cluster (`trio`): the token task
//! over the brokers' mTLS listener, token authentication with both SCRAM
//! mechanisms on every broker, and direct SCRAM/PLAIN logins.
//!
//! Needs the cluster running (`scripts/test` starts it; see
//! `sluice_testkit::cluster`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::time::Duration;

use sluice_auth::{
    AuthError, ScramClient, ScramMechanism, TokenTask, authenticate_plain, authenticate_scram,
    authenticate_token, sasl_handshake,
};
use sluice_broker::{BrokerAddress, BrokerConnectOptions, BrokerConnection};
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequest;
use sluice_codec::{ApiKey, Request, ResponseKind};
use sluice_config::{AuthorizeScramOverMtlsConfig, TlsConnectorConfig};
use sluice_testkit::cluster::{Cluster, TRIO};
use tokio_util::sync::CancellationToken;

const STEP: Duration = Duration::from_secs(60);

/// Runs `f` with a bound, failing with what it was doing.
async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {STEP:?}"))
}

fn mtls_config(cluster: &Cluster, lifetime_seconds: u64) -> AuthorizeScramOverMtlsConfig {
    AuthorizeScramOverMtlsConfig {
        // Only node 1: the other brokers are found through Metadata.
        mtls_port_contact_points: vec![format!("127.0.0.1:{}", cluster.port(1, "SSL"))],
        tls: TlsConnectorConfig {
            certificate_authority_path: cluster.cert("ca.pem"),
            certificate_path: Some(cluster.cert("sluice-admin.pem")),
            private_key_path: Some(cluster.cert("sluice-admin-key.pem")),
            verify_hostname: true,
        },
        delegation_token_lifetime_seconds: lifetime_seconds,
    }
}

async fn sasl_connection(cluster: &Cluster, node: usize) -> BrokerConnection {
    let addr =
        BrokerAddress::new("127.0.0.1", cluster.port(node, "SASL_PLAINTEXT")).with_id(node as i32);
    let opts = BrokerConnectOptions::new(Duration::from_secs(10));
    BrokerConnection::connect(addr, &opts)
        .await
        .unwrap_or_else(|e| panic!("connect to node {node}: {e}"))
}

/// A Metadata request on an authenticated connection; returns the broker count.
async fn metadata(conn: &BrokerConnection) -> usize {
    let body = MetadataRequest::default().with_topics(Some(Vec::new()));
    let request = Request::from_body(ApiKey::Metadata, 12, 0, None, body.into());
    let response = conn
        .send(request)
        .await
        .expect("send Metadata")
        .expect("Metadata expects a response")
        .await
        .expect("response completed")
        .unwrap_or_else(|e| panic!("Metadata on {}: {e}", conn.address()));
    let ResponseKind::Metadata(body) = response.into_body().expect("decode Metadata") else {
        panic!("not a Metadata response");
    };
    body.brokers.len()
}

#[tokio::test]
async fn delegation_token_authenticates_on_every_broker_with_both_mechanisms() {
    let cluster = Cluster::get(TRIO);
    let shutdown = CancellationToken::new();
    let tokens = TokenTask::spawn(&mtls_config(&cluster, 3600), shutdown.clone()).unwrap();

    let rx = bounded("token for basic", tokens.token_for("basic"))
        .await
        .unwrap_or_else(|e| panic!("token for basic: {e}"));
    let token = rx.borrow().clone();
    assert_eq!(token.generation, 1);
    assert_eq!(tokens.cached_users(), 1);
    let again = bounded("token again", tokens.token_for("basic"))
        .await
        .unwrap();
    assert_eq!(again.borrow().token_id, token.token_id);

    for node in 1..=cluster.node_count() {
        for mechanism in ScramMechanism::ALL {
            let what = format!("token auth with {mechanism} on node {node}");
            let conn = sasl_connection(&cluster, node).await;
            let session = bounded(&what, authenticate_token(&conn, mechanism, &token))
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // A token session ends when the token expires.
            let lifetime = session.session_lifetime().expect("token sessions expire");
            assert!(
                lifetime <= Duration::from_secs(3600) && lifetime > Duration::from_secs(3000),
                "{what}: session lifetime {lifetime:?}"
            );
            assert_eq!(bounded(&what, metadata(&conn)).await, cluster.node_count());
        }
    }
    shutdown.cancel();
}

#[tokio::test]
async fn token_rotation_on_the_real_cluster() {
    let cluster = Cluster::get(TRIO);
    let shutdown = CancellationToken::new();
    // The broker caps the token at max_lifetime_ms: rotation after ~5 s.
    let tokens = TokenTask::spawn(&mtls_config(&cluster, 10), shutdown.clone()).unwrap();
    let mut rx = bounded("token for basic", tokens.token_for("basic"))
        .await
        .unwrap_or_else(|e| panic!("token for basic: {e}"));
    let first = rx.borrow_and_update().clone();
    assert!(first.lifetime() <= Duration::from_secs(10), "{first:?}");

    bounded("rotation", rx.changed())
        .await
        .expect("token task alive");
    let second = rx.borrow_and_update().clone();
    assert_eq!(second.generation, 2);
    assert_ne!(second.token_id, first.token_id);

    for token in [&first, &second] {
        let conn = sasl_connection(&cluster, 2).await;
        let session = bounded(
            "auth",
            authenticate_token(&conn, ScramMechanism::Sha512, token),
        )
        .await
        .unwrap_or_else(|e| panic!("generation {}: {e}", token.generation));
        let lifetime = session.session_lifetime().expect("token sessions expire");
        assert!(lifetime <= Duration::from_secs(10), "{lifetime:?}");
        assert_eq!(bounded("metadata", metadata(&conn)).await, 3);
    }
    shutdown.cancel();
}

#[tokio::test]
async fn direct_scram_and_plain_logins() {
    let cluster = Cluster::get(TRIO);
    for mechanism in ScramMechanism::ALL {
        let conn = sasl_connection(&cluster, 1).await;
        let client = ScramClient::new(mechanism, "admin", "admin-secret", &[]).unwrap();
        let session = bounded("scram admin", authenticate_scram(&conn, client))
            .await
            .unwrap_or_else(|e| panic!("{mechanism} admin: {e}"));
        // Without connections.max.reauth.ms, password sessions do not expire.
        assert_eq!(session.session_lifetime_ms, 0);
        assert_eq!(bounded("metadata", metadata(&conn)).await, 3);

        let conn = sasl_connection(&cluster, 1).await;
        let client = ScramClient::new(mechanism, "admin", "wrong-password", &[]).unwrap();
        let err = bounded("scram wrong password", authenticate_scram(&conn, client))
            .await
            .unwrap_err();
        assert_eq!(err.error_code(), Some(58), "{err}");
        assert!(!err.to_string().contains("wrong-password"), "{err}");
    }

    let conn = sasl_connection(&cluster, 3).await;
    bounded("plain", authenticate_plain(&conn, "basic", "basic-secret"))
        .await
        .unwrap_or_else(|e| panic!("plain basic: {e}"));
    assert_eq!(bounded("metadata", metadata(&conn)).await, 3);

    let conn = sasl_connection(&cluster, 3).await;
    let err = bounded("plain wrong", authenticate_plain(&conn, "basic", "nope"))
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), Some(58), "{err}");

    let conn = sasl_connection(&cluster, 2).await;
    let err = bounded("gssapi", sasl_handshake(&conn, "GSSAPI"))
        .await
        .unwrap_err();
    let AuthError::MechanismNotEnabled { offered, .. } = &err else {
        panic!("expected MechanismNotEnabled, got {err}");
    };
    assert!(offered.contains("SCRAM-SHA-512"), "{err}");
}

#[tokio::test]
async fn token_task_reports_unreachable_contact_points() {
    let cluster = Cluster::get(TRIO);
    let mut cfg = mtls_config(&cluster, 3600);
    // The PLAINTEXT port does not speak TLS; a closed port refuses.
    cfg.mtls_port_contact_points = vec![
        format!("127.0.0.1:{}", sluice_testkit::free_port()),
        format!("127.0.0.1:{}", cluster.port(1, "PLAINTEXT")),
    ];
    let tokens = TokenTask::spawn(&cfg, CancellationToken::new()).unwrap();
    let err = bounded("token", tokens.token_for("basic"))
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::NoContactPoint { .. }), "{err}");
    assert_eq!(tokens.cached_users(), 0);
}
