//! The client auth state machine without I/O: PLAIN and SCRAM message
//! parsing, the gate, mechanism filtering, and whole exchanges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::{
    MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest, SaslHandshakeResponse,
};

use std::cell::Cell;

use super::messages::MessageError;
use super::*;

thread_local! {
    /// The test's clock (each test runs on a thread of its own).
    static CLOCK: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The test clock's time.
pub(super) fn now() -> Instant {
    CLOCK.with(|c| {
        let at = c.get().unwrap_or_else(Instant::now);
        c.set(Some(at));
        at
    })
}

/// Moves the test clock on.
pub(super) fn advance(by: Duration) {
    let at = now() + by;
    CLOCK.with(|c| c.set(Some(at)));
}

pub(super) fn client_request(api: ApiKey, version: i16, body: RequestKind) -> Request {
    let mut buf = BytesMut::new();
    Request::from_body(api, version, 1, Some("test".into()), body)
        .encode(&mut buf)
        .unwrap();
    Request::parse(buf.split_off(4)).unwrap()
}

pub(super) fn handshake(mechanism: &str) -> Request {
    let body =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    client_request(ApiKey::SaslHandshake, 1, RequestKind::SaslHandshake(body))
}

pub(super) fn authenticate(bytes: &[u8]) -> Request {
    let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(bytes));
    client_request(
        ApiKey::SaslAuthenticate,
        2,
        RequestKind::SaslAuthenticate(body),
    )
}

pub(super) fn metadata() -> Request {
    let body = MetadataRequest::default().with_topics(None);
    client_request(ApiKey::Metadata, 12, RequestKind::Metadata(body))
}

pub(super) fn api_versions() -> Request {
    client_request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(Default::default()),
    )
}

pub(super) fn handshake_answer(code: i16, mechanisms: &[&str]) -> Response {
    let body = SaslHandshakeResponse::default()
        .with_error_code(code)
        .with_mechanisms(
            mechanisms
                .iter()
                .map(|m| StrBytes::from_string((*m).into()))
                .collect(),
        );
    Response::from_body(
        ApiKey::SaslHandshake,
        1,
        1,
        ResponseKind::SaslHandshake(body),
    )
}

pub(super) fn authenticate_answer(code: i16, lifetime_ms: i64) -> Response {
    let body = SaslAuthenticateResponse::default()
        .with_error_code(code)
        .with_session_lifetime_ms(lifetime_ms)
        .with_auth_bytes(Bytes::from_static(b"server-message"));
    Response::from_body(
        ApiKey::SaslAuthenticate,
        2,
        1,
        ResponseKind::SaslAuthenticate(body),
    )
}

pub(super) const BROKER_MECHANISMS: [&str; 4] =
    ["GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"];

pub(super) fn mechanisms(response: &mut Response) -> (i16, Vec<String>) {
    let ResponseKind::SaslHandshake(h) = response.body().unwrap() else {
        panic!("not a handshake answer");
    };
    (
        h.error_code,
        h.mechanisms.iter().map(|m| m.to_string()).collect(),
    )
}

pub(super) fn admitted_to_auth(admit: Result<Admit, GateError>) -> Option<SaslStep> {
    match admit.unwrap() {
        Admit::AuthConnection(step) => step,
        other => panic!("expected the auth connection, got {other:?}"),
    }
}

/// Runs a handshake for `mechanism` that the broker accepts.
pub(super) fn accepted_handshake(auth: &mut ClientAuth, mechanism: &str) {
    let step = admitted_to_auth(auth.admit(&mut handshake(mechanism), now()));
    assert_eq!(step, Some(SaslStep::Handshake));
    let mut answer = handshake_answer(0, &BROKER_MECHANISMS);
    let outcome = auth
        .on_answer(SaslStep::Handshake, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Continue), "{outcome:?}");
}

// --- PLAIN parsing ---

#[test]
fn plain_messages_parse_with_and_without_authzid() {
    let c = PlainCredentials::parse(b"\0alice\0s3cret").unwrap();
    assert_eq!((c.username(), c.password()), ("alice", "s3cret"));
    let c = PlainCredentials::parse(b"alice\0alice\0pw\0with=,odd").unwrap_err();
    assert!(matches!(c, MessageError::Plain(_)), "four fields: {c}");
    let c = PlainCredentials::parse(b"alice\0alice\0pw=,x").unwrap();
    assert_eq!((c.username(), c.password()), ("alice", "pw=,x"));
}

#[test]
fn malformed_plain_messages_are_refused_without_echoing_them() {
    for bad in [
        &b""[..],
        b"alice",
        b"\0alice",
        b"\0\0password-1",
        b"\0alice\0",
        b"bob\0alice\0password-1",
        b"\0al\xffice\0password-1",
    ] {
        let e = PlainCredentials::parse(bad).unwrap_err();
        assert!(!e.to_string().contains("password-1"), "{e}");
    }
}

#[test]
fn plain_credentials_debug_hides_the_password() {
    let c = PlainCredentials::parse(b"\0alice\0hunter2").unwrap();
    let shown = format!("{c:?}");
    assert!(
        shown.contains("alice") && !shown.contains("hunter2"),
        "{shown}"
    );
}

// --- SCRAM client-first parsing ---

#[test]
fn scram_username_is_read_and_unescaped() {
    let first = parse_scram_client_first(b"n,,n=alice,r=abc123").unwrap();
    assert_eq!(first.username, "alice");
    assert!(!first.tokenauth);
    let first = parse_scram_client_first(b"n,,n=a=2Cb=3Dc,r=abc").unwrap();
    assert_eq!(first.username, "a,b=c");
    let first = parse_scram_client_first(b"y,a=bob,n=bob,r=xyz").unwrap();
    assert_eq!(first.username, "bob");
    let first = parse_scram_client_first(b"n,,n=tok,r=abc,tokenauth=true").unwrap();
    assert!(first.tokenauth);
    let first = parse_scram_client_first(b"n,,n=u,r=abc,tokenauth=false").unwrap();
    assert!(!first.tokenauth);
}

#[test]
fn unusable_scram_first_messages_are_refused() {
    for bad in [
        &b""[..],
        b"n,,r=abc",
        b"n,,n=,r=abc",
        b"n,,n=alice",
        b"n,,n=alice,r=",
        b"n,,n=al=2Xice,r=abc",
        b"n,,n=alice=,r=abc",
        b"n,,m=ext,n=alice,r=abc",
        b"p=tls-unique,,n=alice,r=abc",
        b"n,a=bob,n=alice,r=abc",
        b"n,x,n=alice,r=abc",
        b"n,,n=al\xffice,r=abc",
    ] {
        assert!(
            parse_scram_client_first(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn saslname_escapes() {
    assert_eq!(unescape(""), Ok(String::new()));
    assert_eq!(unescape("=3D=2C"), Ok("=,".to_owned()));
    assert!(unescape("=").is_err());
    assert!(unescape("=3").is_err());
    assert!(unescape("=2c").is_err(), "escapes are upper case");
    assert!(unescape("é=").is_err());
}

fn unescape(s: &str) -> Result<String, MessageError> {
    messages::unescape_saslname(s)
}

// --- the gate ---

#[test]
fn with_scram_over_mtls_a_request_before_authentication_closes_the_client() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    assert_eq!(
        admitted_to_auth(auth.admit(&mut api_versions(), now())),
        None
    );
    let e = auth.admit(&mut metadata(), now()).unwrap_err();
    assert!(
        e.to_string().contains("requires SASL authentication"),
        "{e}"
    );
    assert!(!auth.decided());
}

#[test]
fn without_scram_over_mtls_a_client_may_skip_authentication() {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    assert_eq!(
        admitted_to_auth(auth.admit(&mut api_versions(), now())),
        None
    );
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::RouteWithoutAuth
    ));
    assert!(auth.decided());
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Route
    ));
    assert!(matches!(
        auth.admit(&mut api_versions(), now()).unwrap(),
        Admit::Route
    ));
    // SASL from a client without authentication goes through as before.
    assert!(matches!(
        auth.admit(&mut handshake("PLAIN"), now()).unwrap(),
        Admit::Route
    ));
}

#[test]
fn nothing_but_sasl_passes_during_the_exchange() {
    for mtls in [false, true] {
        let mut auth = ClientAuth::<ClientAuthError>::new(mtls);
        accepted_handshake(&mut auth, "PLAIN");
        let e = auth.admit(&mut metadata(), now()).unwrap_err();
        assert!(
            e.to_string().contains("before authentication completed"),
            "{e}"
        );
        let mut auth = ClientAuth::<ClientAuthError>::new(mtls);
        accepted_handshake(&mut auth, "PLAIN");
        assert_eq!(
            admitted_to_auth(auth.admit(&mut api_versions(), now())),
            None,
            "ApiVersions is allowed"
        );
    }
}

#[test]
fn authenticate_without_a_handshake_or_a_second_handshake_closes() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    assert!(auth.admit(&mut authenticate(b"\0a\0b"), now()).is_err());
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-256");
    assert!(auth.admit(&mut handshake("SCRAM-SHA-256"), now()).is_err());
}

#[test]
fn handshake_v0_is_refused() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    let body = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let mut request = client_request(ApiKey::SaslHandshake, 0, RequestKind::SaslHandshake(body));
    let e = auth.admit(&mut request, now()).unwrap_err();
    assert!(e.to_string().contains("v0"), "{e}");
}

// --- mechanism filtering ---

#[test]
fn without_scram_over_mtls_only_plain_is_offered() {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    admitted_to_auth(auth.admit(&mut handshake("PLAIN"), now()));
    let mut answer = handshake_answer(0, &BROKER_MECHANISMS);
    auth.on_answer(SaslStep::Handshake, &mut answer, now())
        .unwrap();
    assert_eq!(mechanisms(&mut answer), (0, vec!["PLAIN".to_owned()]));
    assert!(auth.closing().is_none());
}

#[test]
fn without_scram_over_mtls_a_scram_handshake_is_unsupported_and_closes() {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    admitted_to_auth(auth.admit(&mut handshake("SCRAM-SHA-512"), now()));
    let mut answer = handshake_answer(0, &BROKER_MECHANISMS);
    let outcome = auth
        .on_answer(SaslStep::Handshake, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed));
    assert_eq!(
        mechanisms(&mut answer),
        (UNSUPPORTED_SASL_MECHANISM.code(), vec!["PLAIN".to_owned()])
    );
    assert!(
        auth.closing()
            .unwrap()
            .to_string()
            .contains("SCRAM-SHA-512")
    );
    assert!(matches!(
        auth.admit(&mut authenticate(b"n,,n=a,r=b"), now()).unwrap(),
        Admit::Drop
    ));
}

#[test]
fn with_scram_over_mtls_scram_and_plain_are_offered_but_not_gssapi() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    admitted_to_auth(auth.admit(&mut handshake("GSSAPI"), now()));
    let mut answer = handshake_answer(0, &BROKER_MECHANISMS);
    auth.on_answer(SaslStep::Handshake, &mut answer, now())
        .unwrap();
    assert_eq!(
        mechanisms(&mut answer),
        (
            UNSUPPORTED_SASL_MECHANISM.code(),
            vec![
                "SCRAM-SHA-256".to_owned(),
                "SCRAM-SHA-512".to_owned(),
                "PLAIN".to_owned()
            ]
        )
    );
    assert!(auth.closing().is_some());
}

#[test]
fn a_handshake_the_broker_refuses_closes_after_the_answer() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    admitted_to_auth(auth.admit(&mut handshake("SCRAM-SHA-256"), now()));
    let mut answer = handshake_answer(UNSUPPORTED_SASL_MECHANISM.code(), &["PLAIN"]);
    let outcome = auth
        .on_answer(SaslStep::Handshake, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed));
    assert_eq!(mechanisms(&mut answer).0, UNSUPPORTED_SASL_MECHANISM);
}

// --- whole exchanges ---

#[test]
fn a_scram_exchange_authenticates_the_user_and_passes_the_session_lifetime_on() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-512");
    let step = admitted_to_auth(auth.admit(&mut authenticate(b"n,,n=bo=2Cb,r=nonce"), now()));
    assert_eq!(step, Some(SaslStep::Authenticate));
    let mut first = authenticate_answer(0, 0);
    let outcome = auth
        .on_answer(SaslStep::Authenticate, &mut first, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Continue));
    assert!(
        auth.admit(&mut metadata(), now()).is_err(),
        "not yet authenticated"
    );

    let mut auth2 = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth2, "SCRAM-SHA-512");
    admitted_to_auth(auth2.admit(&mut authenticate(b"n,,n=bo=2Cb,r=nonce"), now()));
    auth2
        .on_answer(
            SaslStep::Authenticate,
            &mut authenticate_answer(0, 0),
            now(),
        )
        .unwrap();
    admitted_to_auth(auth2.admit(&mut authenticate(b"c=biws,r=nonce+server,p=proof"), now()));
    let mut last = authenticate_answer(0, 60_000);
    let outcome = auth2
        .on_answer(SaslStep::Authenticate, &mut last, now())
        .unwrap();
    let Outcome::Authenticated {
        identity: Identity::Scram {
            username,
            mechanism,
        },
        session_lifetime,
    } = outcome
    else {
        panic!("not authenticated: {outcome:?}");
    };
    assert_eq!(&*username, "bo,b");
    assert_eq!(mechanism, ScramMechanism::Sha512);
    assert_eq!(session_lifetime, Some(Duration::from_secs(60)));
    let ResponseKind::SaslAuthenticate(a) = last.body().unwrap() else {
        panic!()
    };
    assert_eq!(
        a.session_lifetime_ms, 60_000,
        "the broker's session lifetime reaches the client"
    );
    assert!(auth2.decided());
    assert!(matches!(
        auth2.admit(&mut metadata(), now()).unwrap(),
        Admit::Route
    ));
}

#[test]
fn a_plain_exchange_keeps_the_credentials_for_replay() {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    accepted_handshake(&mut auth, "PLAIN");
    admitted_to_auth(auth.admit(&mut authenticate(b"\0alice\0alice-secret"), now()));
    let outcome = auth
        .on_answer(
            SaslStep::Authenticate,
            &mut authenticate_answer(0, 0),
            now(),
        )
        .unwrap();
    let Outcome::Authenticated {
        identity: Identity::Plain(credentials),
        session_lifetime: None,
    } = outcome
    else {
        panic!("not authenticated: {outcome:?}");
    };
    assert_eq!(credentials.username(), "alice");
    assert_eq!(credentials.password(), "alice-secret");
}

#[test]
fn a_failed_authentication_is_answered_then_closes() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-256");
    admitted_to_auth(auth.admit(&mut authenticate(b"n,,n=admin,r=nonce"), now()));
    let mut answer = authenticate_answer(SASL_AUTHENTICATION_FAILED.code(), 0);
    let outcome = auth
        .on_answer(SaslStep::Authenticate, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed));
    let reason = auth.closing().unwrap().to_string();
    assert!(
        reason.contains("error SASL_AUTHENTICATION_FAILED (58)"),
        "{reason}"
    );
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Drop
    ));
    assert!(!auth.decided());
}

#[test]
fn a_client_token_or_malformed_message_is_refused_by_sluice() {
    for message in [&b"n,,n=token-id,r=abc,tokenauth=true"[..], b"garbage"] {
        let mut auth = ClientAuth::<ClientAuthError>::new(true);
        accepted_handshake(&mut auth, "SCRAM-SHA-256");
        let Admit::Answer(body) = auth.admit(&mut authenticate(message), now()).unwrap() else {
            panic!("expected a local answer");
        };
        let ResponseKind::SaslAuthenticate(a) = *body else {
            panic!()
        };
        assert_eq!(a.error_code, SASL_AUTHENTICATION_FAILED);
        assert!(auth.closing().is_some());
    }
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    accepted_handshake(&mut auth, "PLAIN");
    let Admit::Answer(body) = auth.admit(&mut authenticate(b"\0alice\0"), now()).unwrap() else {
        panic!("expected a local answer");
    };
    let ResponseKind::SaslAuthenticate(a) = *body else {
        panic!()
    };
    let message = a.error_message.unwrap().to_string();
    assert!(message.starts_with("Authentication failed"), "{message}");
}
