//! Target `sasl`: the parsers of SASL messages, from clients and brokers.
//!
//! Input: byte 0 picks the parser, the rest is the message.
//! - 0: `PlainCredentials::parse`, a client's PLAIN message (RFC 4616);
//! - 1: `parse_scram_client_first`, a client's SCRAM client-first-message,
//!   and `unescape_saslname` of the same text;
//! - 2: `ScramClient::handle_server_first`, a broker's server-first-message,
//!   for the RFC 7677 client (SHA-256) and the same with SHA-512;
//! - 3: `ScramClient::handle_server_final`, a broker's server-final-message,
//!   after the RFC 7677 server-first-message.
//!
//! These are the public parsers; the server-first parser itself
//! (`ServerFirst::parse`) is private to `sluice-auth` and reached through
//! `handle_server_first`. A server-first-message that passes costs one
//! PBKDF2 (4096 to 100,000 iterations, the bounds `sluice-auth` accepts).

use sluice_cluster::{PlainCredentials, parse_scram_client_first, unescape_saslname};
use sluice_scram::{ScramClient, ScramMechanism};

/// The RFC 7677 client: user `user`, password `pencil`, this nonce.
pub(crate) const RFC_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
/// The RFC 7677 server-first-message.
pub(crate) const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
/// The RFC 7677 server-final-message.
pub(crate) const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
/// The RFC 7677 client-first-message.
pub(crate) const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";

/// The RFC 7677 client, before its first message is answered.
fn rfc_client(mechanism: ScramMechanism) -> Option<ScramClient> {
    ScramClient::with_nonce(mechanism, "user", "pencil", &[], RFC_NONCE).ok()
}

/// The target (see the module docs).
pub fn sasl(data: &[u8]) {
    let [parser, message @ ..] = data else {
        return;
    };
    match parser % 4 {
        0 => {
            if let Ok(credentials) = PlainCredentials::parse(message) {
                assert!(!credentials.username().is_empty());
                assert!(!credentials.password().is_empty());
            }
        }
        1 => {
            if let Ok(first) = parse_scram_client_first(message) {
                assert!(!first.username.is_empty());
            }
            if let Ok(text) = std::str::from_utf8(message) {
                let _ = unescape_saslname(text);
            }
        }
        2 => {
            for mechanism in ScramMechanism::ALL {
                if let Some(mut client) = rfc_client(mechanism) {
                    if let Ok(last) = client.handle_server_first(message) {
                        assert!(last.starts_with(b"c=biws,r="));
                        assert!(!client.is_complete());
                    }
                    // Out of order now, whatever happened.
                    assert!(client.handle_server_first(message).is_err());
                }
            }
        }
        _ => {
            let Some(mut client) = rfc_client(ScramMechanism::Sha256) else {
                return;
            };
            if client
                .handle_server_first(RFC_SERVER_FIRST.as_bytes())
                .is_err()
            {
                panic!("the RFC 7677 server-first-message is refused");
            }
            let done = client.handle_server_final(message).is_ok();
            assert_eq!(done, client.is_complete());
            assert!(client.handle_server_final(message).is_err());
        }
    }
}
