//! Re-authentication and session expiry on the test clock: the client's
//! session lifetime, the end of a session, and each KIP-368 rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_codec::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};

use super::super::tests::{
    accepted_handshake, admitted_to_auth, advance, authenticate, authenticate_answer,
    client_request, handshake, mechanisms, metadata, now,
};
use super::*;
use crate::client_auth::SaslStep;
use sluice_error::ErrorClass;

const LIFETIME_MS: i64 = 10_000;

/// A client authenticated with PLAIN as alice, with a 10 s session.
fn plain_client(lifetime_ms: i64) -> ClientAuth {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    accepted_handshake(&mut auth, "PLAIN");
    admitted_to_auth(auth.admit(&mut authenticate(b"\0alice\0alice-secret"), now()));
    let mut answer = authenticate_answer(0, lifetime_ms);
    let outcome = auth
        .on_answer(SaslStep::Authenticate, &mut answer, now())
        .unwrap();
    assert!(
        matches!(outcome, Outcome::Authenticated { .. }),
        "{outcome:?}"
    );
    let ResponseKind::SaslAuthenticate(a) = answer.body().unwrap() else {
        panic!()
    };
    assert_eq!(a.session_lifetime_ms, lifetime_ms, "passed on unchanged");
    auth
}

/// Begins a re-authentication with `mechanism`; returns the handshake answer.
fn reauth_handshake(auth: &mut ClientAuth, mechanism: &str) -> (i16, Vec<String>) {
    let Admit::Answer(body) = auth.admit(&mut handshake(mechanism), now()).unwrap() else {
        panic!("a re-authentication handshake is answered by sluice");
    };
    let mut answer = Response::from_body(ApiKey::SaslHandshake, 1, 1, *body);
    mechanisms(&mut answer)
}

fn reauth_round(auth: &mut ClientAuth, message: &[u8]) -> bool {
    match auth.admit(&mut authenticate(message), now()).unwrap() {
        Admit::Reauthenticate { first_round, .. } => first_round,
        other => panic!("expected a re-authentication round, got {other:?}"),
    }
}

fn is_route(admit: Result<Admit, GateError>) -> bool {
    matches!(admit.unwrap(), Admit::Route)
}

#[test]
fn a_session_ends_after_its_lifetime_and_then_closes_the_client() {
    let mut auth = plain_client(LIFETIME_MS);
    assert!(auth.session_expiry().is_some());
    advance(Duration::from_millis(10_000));
    assert!(
        is_route(auth.admit(&mut metadata(), now())),
        "not after its end yet"
    );
    advance(Duration::from_millis(1));
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Expired
    ));
    assert!(
        auth.closing().unwrap().routine_close(),
        "logged at INFO, as brokers close it"
    );
    let reason = auth.closing().unwrap().to_string();
    assert!(
        reason.contains("expired") && reason.contains("alice"),
        "{reason}"
    );
    assert!(
        matches!(auth.admit(&mut metadata(), now()).unwrap(), Admit::Drop),
        "what follows is dropped: the close is logged once"
    );
}

#[test]
fn without_a_lifetime_the_session_never_ends_and_reauthentication_is_refused_like_kafka() {
    let mut auth = plain_client(0);
    assert_eq!(auth.session_expiry(), None);
    advance(Duration::from_secs(86_400));
    assert!(is_route(auth.admit(&mut metadata(), now())));
    assert_eq!(reauth_handshake(&mut auth, "PLAIN").0, ILLEGAL_SASL_STATE);
    let Admit::Answer(body) = auth.admit(&mut authenticate(b"\0alice\0x"), now()).unwrap() else {
        panic!()
    };
    let ResponseKind::SaslAuthenticate(a) = *body else {
        panic!()
    };
    assert_eq!(a.error_code, ILLEGAL_SASL_STATE);
    assert!(auth.closing().is_none(), "Kafka keeps the connection");
    assert!(is_route(auth.admit(&mut metadata(), now())));
}

#[test]
fn a_reauthentication_renews_the_session_and_the_replayed_password() {
    let mut auth = plain_client(LIFETIME_MS);
    advance(Duration::from_secs(9));
    assert_eq!(
        reauth_handshake(&mut auth, "PLAIN"),
        (0, vec!["PLAIN".into()])
    );
    assert!(reauth_round(&mut auth, b"\0alice\0new-secret"));
    advance(Duration::from_secs(2));
    let mut answer = authenticate_answer(0, LIFETIME_MS);
    let outcome = auth
        .on_answer(SaslStep::Reauthenticate, &mut answer, now())
        .unwrap();
    let Outcome::Reauthenticated {
        identity,
        session_lifetime,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(identity.plain().unwrap().password(), "new-secret");
    assert_eq!(session_lifetime, Some(Duration::from_secs(10)));
    // 11 s after the first authentication: past the old end, within the new.
    assert!(is_route(auth.admit(&mut metadata(), now())));
    advance(Duration::from_millis(10_001));
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Expired
    ));
}

#[test]
fn an_expired_session_may_still_reauthenticate() {
    let mut auth = plain_client(LIFETIME_MS);
    advance(Duration::from_secs(30));
    assert_eq!(reauth_handshake(&mut auth, "PLAIN").0, 0);
    assert!(reauth_round(&mut auth, b"\0alice\0alice-secret"));
    let outcome = auth
        .on_answer(
            SaslStep::Reauthenticate,
            &mut authenticate_answer(0, LIFETIME_MS),
            now(),
        )
        .unwrap();
    assert!(matches!(outcome, Outcome::Reauthenticated { .. }));
    assert!(is_route(auth.admit(&mut metadata(), now())));
}

#[test]
fn a_refused_reauthentication_is_answered_then_closes() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    reauth_round(&mut auth, b"\0alice\0old-secret");
    let mut answer = authenticate_answer(SASL_AUTHENTICATION_FAILED.code(), 0);
    let outcome = auth
        .on_answer(SaslStep::Reauthenticate, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed));
    let ResponseKind::SaslAuthenticate(a) = answer.body().unwrap() else {
        panic!()
    };
    assert_eq!(
        a.error_code, SASL_AUTHENTICATION_FAILED,
        "the broker's answer"
    );
    let reason = auth.closing().unwrap();
    assert!(
        reason.to_string().contains("re-authentication failed"),
        "{reason}"
    );
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Drop
    ));
}

#[test]
fn a_reauthentication_as_another_user_is_refused() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    reauth_round(&mut auth, b"\0mallory\0mallory-secret");
    let mut answer = authenticate_answer(0, LIFETIME_MS);
    let outcome = auth
        .on_answer(SaslStep::Reauthenticate, &mut answer, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed));
    let ResponseKind::SaslAuthenticate(a) = answer.body().unwrap() else {
        panic!()
    };
    assert_eq!(a.error_code, SASL_AUTHENTICATION_FAILED);
    let message = a.error_message.as_ref().unwrap().to_string();
    assert!(message.starts_with("Cannot change principals"), "{message}");
    assert!(auth.closing().is_some());
}

#[test]
fn another_mechanism_is_accepted_then_closes_before_its_exchange() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-256");
    admitted_to_auth(auth.admit(&mut authenticate(b"n,,n=alice,r=nonce"), now()));
    auth.on_answer(
        SaslStep::Authenticate,
        &mut authenticate_answer(0, 0),
        now(),
    )
    .unwrap();
    admitted_to_auth(auth.admit(&mut authenticate(b"c=biws,r=nonce+s,p=proof"), now()));
    auth.on_answer(
        SaslStep::Authenticate,
        &mut authenticate_answer(0, LIFETIME_MS),
        now(),
    )
    .unwrap();
    let (code, offered) = reauth_handshake(&mut auth, "SCRAM-SHA-512");
    assert_eq!(code, 0);
    assert_eq!(offered, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]);
    let reason = auth.closing().unwrap().to_string();
    assert!(
        reason.contains("SCRAM-SHA-512") && reason.contains("SCRAM-SHA-256"),
        "{reason}"
    );
    assert!(matches!(
        auth.admit(&mut authenticate(b"n,,n=alice,r=n2"), now())
            .unwrap(),
        Admit::Drop
    ));
}

#[test]
fn a_scram_reauthentication_takes_two_rounds_on_one_connection() {
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-256");
    admitted_to_auth(auth.admit(&mut authenticate(b"n,,n=alice,r=nonce"), now()));
    auth.on_answer(
        SaslStep::Authenticate,
        &mut authenticate_answer(0, 0),
        now(),
    )
    .unwrap();
    admitted_to_auth(auth.admit(&mut authenticate(b"c=biws,r=nonce+s,p=proof"), now()));
    auth.on_answer(
        SaslStep::Authenticate,
        &mut authenticate_answer(0, LIFETIME_MS),
        now(),
    )
    .unwrap();
    advance(Duration::from_secs(9));
    assert_eq!(reauth_handshake(&mut auth, "SCRAM-SHA-256").0, 0);
    assert!(reauth_round(&mut auth, b"n,,n=alice,r=again"));
    let outcome = auth
        .on_answer(
            SaslStep::Reauthenticate,
            &mut authenticate_answer(0, 0),
            now(),
        )
        .unwrap();
    assert!(matches!(outcome, Outcome::Continue));
    assert!(
        !reauth_round(&mut auth, b"c=biws,r=again+s,p=proof"),
        "same connection"
    );
    let outcome = auth
        .on_answer(
            SaslStep::Reauthenticate,
            &mut authenticate_answer(0, LIFETIME_MS),
            now(),
        )
        .unwrap();
    let Outcome::Reauthenticated { identity, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(identity.username(), "alice");
    advance(Duration::from_secs(5));
    assert!(is_route(auth.admit(&mut metadata(), now())));
}

#[test]
fn a_request_pipelined_during_reauthentication_is_refused_and_closes() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Refuse(ILLEGAL_SASL_STATE)
    ));
    let reason = auth.closing().unwrap().to_string();
    assert!(reason.contains("Metadata"), "{reason}");
}

/// A SaslAuthenticate answer as a broker writes it at `version` and Sluice
/// reads it back: v0 has no `session_lifetime_ms` field at all.
fn broker_answer(version: i16, lifetime_ms: i64) -> Response {
    let body = SaslAuthenticateResponse::default()
        .with_session_lifetime_ms(lifetime_ms)
        .with_auth_bytes(Bytes::from_static(b"server-message"));
    let mut frame = BytesMut::new();
    Response::from_body(
        ApiKey::SaslAuthenticate,
        version,
        7,
        ResponseKind::SaslAuthenticate(body),
    )
    .encode(&mut frame)
    .unwrap();
    Response::parse(frame.split_off(4), ApiKey::SaslAuthenticate, version).unwrap()
}

/// A PLAIN SaslAuthenticate of alice at `version`, as a client sends it.
fn plain_authenticate(version: i16) -> Request {
    let body = SaslAuthenticateRequest::default()
        .with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"));
    client_request(
        ApiKey::SaslAuthenticate,
        version,
        RequestKind::SaslAuthenticate(body),
    )
}

#[test]
fn a_real_v0_answer_carries_no_lifetime_and_never_starts_a_session() {
    let mut v0 = broker_answer(0, LIFETIME_MS);
    let ResponseKind::SaslAuthenticate(body) = v0.body().unwrap() else {
        panic!("not a SaslAuthenticate answer")
    };
    assert_eq!(body.session_lifetime_ms, 0, "v0 has no lifetime field");
    // Were one to reach the gate, it would fail the client rather than
    // start a session without an end.
    let mut auth = ClientAuth::<ClientAuthError>::new(true);
    accepted_handshake(&mut auth, "SCRAM-SHA-256");
    admitted_to_auth(auth.admit(&mut authenticate(b"n,,n=alice,r=nonce"), now()));
    let outcome = auth
        .on_answer(SaslStep::Authenticate, &mut v0, now())
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed), "{outcome:?}");
    assert!(auth.session_expiry().is_none() && auth.username().is_none());
    assert!(auth.closing().unwrap().to_string().contains("v0"));
}

#[test]
fn a_v0_client_is_authenticated_at_v1_and_its_session_ends_when_the_brokers_would() {
    let mut auth = ClientAuth::<ClientAuthError>::new(false);
    accepted_handshake(&mut auth, "PLAIN");
    let mut request = plain_authenticate(0);
    let step = admitted_to_auth(auth.admit(&mut request, now()));
    assert_eq!(step, Some(SaslStep::Authenticate));
    // The round leaves for the broker at v1, with the client's bytes.
    assert_eq!(request.api_version(), 1);
    let mut sent = BytesMut::new();
    request.encode(&mut sent).unwrap();
    let mut sent = Request::parse(sent.split_off(4)).unwrap();
    assert_eq!(sent.api_version(), 1);
    let RequestKind::SaslAuthenticate(body) = sent.body().unwrap() else {
        panic!("not a SaslAuthenticate request")
    };
    assert_eq!(&body.auth_bytes[..], b"\0alice\0alice-secret");

    // The broker's v1 answer tells the lifetime; the client's goes back at v0.
    let mut answer = broker_answer(1, LIFETIME_MS);
    let outcome = auth
        .on_answer(SaslStep::Authenticate, &mut answer, now())
        .unwrap();
    assert!(
        matches!(
            outcome,
            Outcome::Authenticated {
                session_lifetime: Some(l),
                ..
            } if l == Duration::from_millis(10_000)
        ),
        "{outcome:?}"
    );
    assert!(auth.session_expiry().is_some(), "the session has an end");
    let to_client = crate::client_auth::in_client_version(answer, 0).unwrap();
    let mut written = BytesMut::new();
    to_client.encode(&mut written).unwrap();
    let mut read = Response::parse(written.split_off(4), ApiKey::SaslAuthenticate, 0).unwrap();
    let ResponseKind::SaslAuthenticate(body) = read.body().unwrap() else {
        panic!("not a SaslAuthenticate answer")
    };
    assert_eq!(
        (body.error_code, &body.auth_bytes[..]),
        (0, &b"server-message"[..])
    );
    let v1_len = broker_answer(1, LIFETIME_MS).wire_len();
    assert_eq!(
        read.wire_len(),
        v1_len - 8,
        "written at v0: no lifetime field"
    );

    // It cannot re-authenticate (it never learned the lifetime); it is
    // closed on its first request after the end, as Kafka closes it.
    assert_eq!(reauth_handshake(&mut auth, "PLAIN").0, ILLEGAL_SASL_STATE);
    advance(Duration::from_millis(10_000));
    assert!(is_route(auth.admit(&mut metadata(), now())));
    advance(Duration::from_millis(1));
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Expired
    ));
}

#[test]
fn a_v0_reauthentication_renews_the_session_instead_of_ending_it() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    let mut round = plain_authenticate(0);
    assert!(matches!(
        auth.admit(&mut round, now()).unwrap(),
        Admit::Reauthenticate {
            first_round: true,
            ..
        }
    ));
    assert_eq!(round.api_version(), 1, "sent to the broker at v1");
    auth.on_answer(
        SaslStep::Reauthenticate,
        &mut broker_answer(1, LIFETIME_MS),
        now(),
    )
    .unwrap();
    assert!(
        auth.session_expiry().is_some(),
        "the expiry is renewed, not wiped"
    );
    advance(Duration::from_millis(10_001));
    assert!(matches!(
        auth.admit(&mut metadata(), now()).unwrap(),
        Admit::Expired
    ));
}

#[test]
fn reauthentication_is_at_most_once_a_second() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    reauth_round(&mut auth, b"\0alice\0alice-secret");
    auth.on_answer(
        SaslStep::Reauthenticate,
        &mut authenticate_answer(0, LIFETIME_MS),
        now(),
    )
    .unwrap();
    advance(Duration::from_millis(999));
    assert_eq!(reauth_handshake(&mut auth, "PLAIN").0, ILLEGAL_SASL_STATE);
    advance(Duration::from_millis(1));
    assert_eq!(reauth_handshake(&mut auth, "PLAIN").0, 0);
}

#[test]
fn an_unchecked_reauthentication_is_answered_with_a_retriable_error() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    reauth_round(&mut auth, b"\0alice\0alice-secret");
    let reason = ClientAuthError::UnexpectedSaslAnswer;
    let said = reason.to_string();
    let ResponseKind::SaslAuthenticate(a) = auth.reauth_unchecked(reason, None) else {
        panic!()
    };
    assert_eq!(a.error_code, NETWORK_EXCEPTION);
    let message = a.error_message.unwrap().to_string();
    assert!(message.contains(&said), "{message}");
    assert!(auth.closing().is_some());
}

#[test]
fn a_reauthentication_whose_mechanism_the_broker_refused_is_answered_with_its_code() {
    let mut auth = plain_client(LIFETIME_MS);
    reauth_handshake(&mut auth, "PLAIN");
    reauth_round(&mut auth, b"\0alice\0alice-secret");
    let reason = ClientAuthError::UnexpectedSaslAnswer;
    let refused = Some(UNSUPPORTED_SASL_MECHANISM);
    let ResponseKind::SaslAuthenticate(a) = auth.reauth_unchecked(reason, refused) else {
        panic!()
    };
    assert_eq!(a.error_code, UNSUPPORTED_SASL_MECHANISM);
    assert!(auth.closing().is_some());
}
