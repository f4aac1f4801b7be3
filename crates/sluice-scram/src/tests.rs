//! SCRAM client tests: the RFC 7677 vector, SHA-512 vectors computed
//! independently, extensions, and hostile server messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;

const RFC_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

/// What a rejected message's error must look like.
type Check = fn(&ScramError) -> bool;

fn client(mechanism: ScramMechanism) -> ScramClient {
    ScramClient::with_nonce(mechanism, "user", "pencil", &[], RFC_NONCE).unwrap()
}

/// Runs a client through server-first and returns it with its client-final.
fn after_first(mechanism: ScramMechanism) -> (ScramClient, String) {
    let mut c = client(mechanism);
    let final_msg = c.handle_server_first(RFC_SERVER_FIRST.as_bytes()).unwrap();
    (c, String::from_utf8(final_msg).unwrap())
}

#[test]
fn rfc7677_sha256_vector() {
    let mut c = client(ScramMechanism::Sha256);
    assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let client_final = c.handle_server_first(RFC_SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(
        String::from_utf8(client_final).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    assert!(!c.is_complete());
    c.handle_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        .unwrap();
    assert!(c.is_complete());
}

// The SHA-512 vectors were computed with Python's hashlib/hmac, independently
// of this crate, following RFC 5802 section 3 step by step:
//
//   bare   = "n=<user>,r=<cnonce>" + extensions
//   auth   = bare + "," + server_first + "," + "c=biws,r=<cnonce><snonce>"
//   salted = hashlib.pbkdf2_hmac("sha512", password, b64decode(salt), i)
//   ck     = hmac(salted, b"Client Key", sha512); sk = sha512(ck)
//   proof  = ck XOR hmac(sk, auth, sha512)
//   v      = hmac(hmac(salted, b"Server Key", sha512), auth, sha512)
//
// The same script reproduces the RFC 7677 SHA-256 vector above.

#[test]
fn sha512_vector_from_python() {
    let (mut c, client_final) = after_first(ScramMechanism::Sha512);
    assert_eq!(
        client_final,
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
    );
    c.handle_server_final(
        b"v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
    )
    .unwrap();
    assert!(c.is_complete());
}

#[test]
fn sha512_with_tokenauth_extension_from_python() {
    let mut c = ScramClient::with_nonce(
        ScramMechanism::Sha512,
        "tokenid123",
        "aG1hYw==",
        &[("tokenauth", "true")],
        "abcDEF123",
    )
    .unwrap();
    assert_eq!(
        c.client_first(),
        b"n,,n=tokenid123,r=abcDEF123,tokenauth=true"
    );
    let client_final = c
        .handle_server_first(b"r=abcDEF123srvNONCE,s=c2FsdHNhbHQ=,i=4096")
        .unwrap();
    assert_eq!(
        String::from_utf8(client_final).unwrap(),
        "c=biws,r=abcDEF123srvNONCE,\
         p=sr2LIFi8Ov4YFfJKNxSv/WZ/TQugOdwdA58m5fP/bX6OATzg2SJGgIGEjGHR/ksXtPYnuNpyXmowPzbbfUBxVA=="
    );
    c.handle_server_final(
        b"v=TBH6dZtMZAxrWURnM7gdRvXmnZq53bvDPDr+EMRuqMBLxlX7U5u5gPbNW5+NLcRLypoMRJblucXKLSmk2kkmmQ==",
    )
    .unwrap();
}

#[test]
fn mechanism_names() {
    assert_eq!(ScramMechanism::Sha256.name(), "SCRAM-SHA-256");
    assert_eq!(ScramMechanism::Sha512.to_string(), "SCRAM-SHA-512");
}

#[test]
fn random_nonces_differ_and_usernames_are_escaped() {
    let a = ScramClient::new(ScramMechanism::Sha256, "a=b,c", "p", &[]).unwrap();
    let b = ScramClient::new(ScramMechanism::Sha256, "a=b,c", "p", &[]).unwrap();
    let (a, b) = (
        String::from_utf8(a.client_first()).unwrap(),
        String::from_utf8(b.client_first()).unwrap(),
    );
    assert!(a.starts_with("n,,n=a=3Db=2Cc,r="), "{a}");
    assert_ne!(a, b);
    let nonce = a.rsplit_once("r=").unwrap().1;
    assert_eq!(nonce.len(), 32);
    assert!(nonce.bytes().all(|b| b.is_ascii_alphanumeric()));
}

#[test]
fn invalid_extensions_are_refused() {
    for (key, value) in [
        ("", "x"),
        ("token-auth", "true"),
        ("tokenauth", ""),
        ("tokenauth", "a,b"),
        ("tokenauth", "a=b"),
        ("tokenauth", "é"),
    ] {
        let err = ScramClient::new(ScramMechanism::Sha256, "u", "p", &[(key, value)]).unwrap_err();
        assert!(
            matches!(err, ScramError::InvalidExtension { .. }),
            "{key}={value}"
        );
    }
}

#[test]
fn debug_and_errors_never_show_the_password() {
    let (c, _) = after_first(ScramMechanism::Sha256);
    let debug = format!("{c:?}");
    assert!(!debug.contains("pencil"), "{debug}");
    assert!(debug.contains("<redacted>"));
}

#[test]
fn wrong_server_signature_is_rejected() {
    let (mut c, _) = after_first(ScramMechanism::Sha256);
    let err = c
        .handle_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        .unwrap_err();
    assert_eq!(err, ScramError::ServerSignatureMismatch);
    assert!(!c.is_complete());
    // The exchange is over after a failure.
    assert!(matches!(
        c.handle_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        Err(ScramError::OutOfOrder { .. })
    ));
}

#[test]
fn server_final_errors_are_surfaced() {
    let (mut c, _) = after_first(ScramMechanism::Sha512);
    let err = c.handle_server_final(b"e=invalid-proof").unwrap_err();
    assert_eq!(
        err,
        ScramError::Server {
            message: "invalid-proof".into()
        }
    );
    assert_eq!(err.to_string(), "scram server error: invalid-proof");
}

#[test]
fn malformed_server_final_messages() {
    let cases: [(&[u8], Check); 5] = [
        (b"", |e| matches!(e, ScramError::MissingAttribute { .. })),
        (b"x=abc", |e| {
            matches!(e, ScramError::MissingAttribute { .. })
        }),
        (b"v=***", |e| matches!(e, ScramError::InvalidBase64 { .. })),
        (b"v=", |e| *e == ScramError::ServerSignatureMismatch),
        (b"v=\xff\xfe", |e| matches!(e, ScramError::NotUtf8 { .. })),
    ];
    for (message, check) in cases {
        let (mut c, _) = after_first(ScramMechanism::Sha256);
        let err = c.handle_server_final(message).unwrap_err();
        assert!(
            check(&err),
            "{:?}: {err:?}",
            String::from_utf8_lossy(message)
        );
    }
}

#[test]
fn malformed_server_first_messages() {
    let n = RFC_NONCE;
    let cases: Vec<(String, Check)> = vec![
        (String::new(), |e| {
            matches!(e, ScramError::MissingAttribute { attribute: "r", .. })
        }),
        (format!("r={n}xyz"), |e| {
            matches!(e, ScramError::MissingAttribute { attribute: "s", .. })
        }),
        (format!("r={n}xyz,s=c2FsdA=="), |e| {
            matches!(e, ScramError::MissingAttribute { attribute: "i", .. })
        }),
        (format!("s=c2FsdA==,r={n}xyz,i=4096"), |e| {
            matches!(e, ScramError::MissingAttribute { attribute: "r", .. })
        }),
        (format!("r={n}xyz,s=!!notbase64,i=4096"), |e| {
            matches!(e, ScramError::InvalidBase64 { attribute: "s", .. })
        }),
        (format!("r={n}xyz,s=,i=4096"), |e| {
            matches!(e, ScramError::Malformed { .. })
        }),
        ("r=someoneelse,s=c2FsdA==,i=4096".into(), |e| {
            *e == ScramError::NonceMismatch
        }),
        (format!("r={n},s=c2FsdA==,i=4096"), |e| {
            *e == ScramError::NonceMismatch
        }),
        (format!("r={},s=c2FsdA==,i=4096", &n[..5]), |e| {
            *e == ScramError::NonceMismatch
        }),
        (format!("r={n}xyz,s=c2FsdA==,i=4095"), |e| {
            *e == ScramError::IterationCount { count: 4095 }
        }),
        (format!("r={n}xyz,s=c2FsdA==,i=0"), |e| {
            *e == ScramError::IterationCount { count: 0 }
        }),
        (format!("r={n}xyz,s=c2FsdA==,i=100001"), |e| {
            *e == ScramError::IterationCount { count: 100_001 }
        }),
        (
            format!("r={n}xyz,s=c2FsdA==,i=99999999999999999999999"),
            |e| matches!(e, ScramError::IterationCount { .. }),
        ),
        (format!("r={n}xyz,s=c2FsdA==,i=-4096"), |e| {
            matches!(e, ScramError::Malformed { .. })
        }),
        (format!("r={n}xyz,s=c2FsdA==,i="), |e| {
            matches!(e, ScramError::Malformed { .. })
        }),
        (format!("r={n}x y,s=c2FsdA==,i=4096"), |e| {
            matches!(e, ScramError::Malformed { .. })
        }),
        (format!("m=ext,r={n}xyz,s=c2FsdA==,i=4096"), |e| {
            *e == ScramError::MandatoryExtension
        }),
        ("e=unknown-user".into(), |e| {
            matches!(e, ScramError::Server { .. })
        }),
        (format!("r={n}xyz,s=c2Fs"), |e| {
            matches!(e, ScramError::MissingAttribute { attribute: "i", .. })
        }),
    ];
    for (message, check) in cases {
        let mut c = client(ScramMechanism::Sha256);
        let err = c.handle_server_first(message.as_bytes()).unwrap_err();
        assert!(check(&err), "{message}: {err:?}");
        // Nothing the server sends ends up in a message with secrets.
        assert!(!err.to_string().contains("pencil"));
    }
    let mut c = client(ScramMechanism::Sha256);
    assert!(matches!(
        c.handle_server_first(b"r=\xff\xfe,s=c2FsdA==,i=4096"),
        Err(ScramError::NotUtf8 { .. })
    ));
}

#[test]
fn iteration_bounds_are_inclusive_and_extensions_after_i_are_ignored() {
    for i in [MIN_ITERATIONS, 16384] {
        let mut c = client(ScramMechanism::Sha256);
        let msg = format!("r={RFC_NONCE}abc,s=c2FsdA==,i={i},x=ext");
        c.handle_server_first(msg.as_bytes()).unwrap();
    }
}

#[test]
fn steps_out_of_order_are_refused() {
    let mut c = client(ScramMechanism::Sha256);
    assert!(matches!(
        c.handle_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        Err(ScramError::OutOfOrder { .. })
    ));
    let (mut c, _) = after_first(ScramMechanism::Sha256);
    assert!(matches!(
        c.handle_server_first(RFC_SERVER_FIRST.as_bytes()),
        Err(ScramError::OutOfOrder { .. })
    ));
}

#[test]
fn server_error_text_is_bounded_and_printable() {
    let (mut c, _) = after_first(ScramMechanism::Sha256);
    let long = format!("e=bad\n{}", "x".repeat(1000));
    let ScramError::Server { message } = c.handle_server_final(long.as_bytes()).unwrap_err() else {
        panic!("expected a server error");
    };
    assert!(message.starts_with("bad?x"));
    assert_eq!(message.chars().count(), MAX_SERVER_ERROR_LEN);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_server_first_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut c = client(ScramMechanism::Sha512);
        let _ = c.handle_server_first(&bytes);
    }

    #[test]
    fn structured_server_first_never_panics(
        suffix in "[ -~]{0,20}",
        salt in "[A-Za-z0-9+/=]{0,24}",
        iterations in "[0-9-]{0,12}",
        tail in "[ -~]{0,20}",
    ) {
        // Mostly valid shapes, so that the parser's later stages are reached
        // (iteration counts are capped to keep the test fast).
        let iterations = if iterations.parse::<u32>().is_ok_and(|i| i > 8192) {
            "4096".to_owned()
        } else {
            iterations
        };
        let msg = format!("r={RFC_NONCE}{suffix},s={salt},i={iterations}{tail}");
        let mut c = client(ScramMechanism::Sha256);
        let _ = c.handle_server_first(msg.as_bytes());
    }

}

proptest! {
    // Each case derives a key (4096 PBKDF2 rounds): fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_server_final_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let (mut c, _) = after_first(ScramMechanism::Sha256);
        prop_assert!(c.handle_server_final(&bytes).is_err());
    }
}
