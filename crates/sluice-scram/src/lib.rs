//! A SCRAM client (RFC 5802, with the SHA-256 and SHA-512 hashes of RFC 7677)
//! that supports SCRAM extensions.
//!
//! Sluice needs SCRAM in two places: to check a client's exchange against a
//! broker, and to authenticate its own broker connections with a delegation
//! token, which Kafka wants as `tokenauth=true` in the client-first-message
//! (KIP-48). No published crate does SCRAM-SHA-512 *and* extensions, so this
//! module implements the client side itself on top of `sha2`, `hmac` and
//! `pbkdf2`. It is small: one message out, one in, one out, one in.
//!
//! ```text
//! client-first  n,,n=<user>,r=<client nonce>[,<ext>=<value>...]
//! server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//! client-final  c=biws,r=<nonce>,p=<base64 ClientProof>
//! server-final  v=<base64 ServerSignature>   or   e=<error>
//! ```
//!
//! Like Kafka's own client, passwords are used as UTF-8 bytes without SASLprep
//! (Kafka's broker does not normalize either). The server's signature is
//! checked in constant time. Nothing here ever prints a password, a salted
//! password, a key or a proof: [`ScramError`] messages and `Debug` output are
//! safe to log.

#![deny(missing_docs)]

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256, Sha512};

#[cfg(test)]
mod tests;

/// The fewest PBKDF2 iterations accepted from a server. Kafka's minimum for
/// SCRAM-SHA-256 and SCRAM-SHA-512 (and what it uses for delegation tokens).
pub(crate) const MIN_ITERATIONS: u32 = 4096;
/// The most PBKDF2 iterations accepted: far above what Kafka uses (at most
/// 16384), low enough that a hostile server cannot make Sluice burn seconds of
/// CPU per connection.
pub(crate) const MAX_ITERATIONS: u32 = 100_000;

/// Length of the random client nonce, in alphanumeric characters.
const NONCE_LEN: usize = 32;
/// The GS2 header: no channel binding, no authorization identity.
const GS2_HEADER: &str = "n,,";
/// `base64(GS2_HEADER)`, the `c=` attribute of the client-final-message.
const GS2_HEADER_BASE64: &str = "biws";
/// Longest server error text kept in a [`ScramError::Server`].
const MAX_SERVER_ERROR_LEN: usize = 200;

/// A SCRAM mechanism: which hash the exchange uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (RFC 7677).
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

impl ScramMechanism {
    /// Both mechanisms.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name, as sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// `H(data)`.
    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, data)`.
    fn hmac(self, key: &[u8], data: &[u8]) -> Result<Vec<u8>, ScramError> {
        match self {
            ScramMechanism::Sha256 => Ok(new_mac::<Hmac<Sha256>>(key)?
                .chain_update(data)
                .finalize()
                .into_bytes()
                .to_vec()),
            ScramMechanism::Sha512 => Ok(new_mac::<Hmac<Sha512>>(key)?
                .chain_update(data)
                .finalize()
                .into_bytes()
                .to_vec()),
        }
    }

    /// Whether `HMAC(key, data) == expected`, compared in constant time.
    fn verify_hmac(self, key: &[u8], data: &[u8], expected: &[u8]) -> Result<bool, ScramError> {
        Ok(match self {
            ScramMechanism::Sha256 => new_mac::<Hmac<Sha256>>(key)?
                .chain_update(data)
                .verify_slice(expected)
                .is_ok(),
            ScramMechanism::Sha512 => new_mac::<Hmac<Sha512>>(key)?
                .chain_update(data)
                .verify_slice(expected)
                .is_ok(),
        })
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn new_mac<M: Mac + hmac::digest::KeyInit>(key: &[u8]) -> Result<M, ScramError> {
    // HMAC accepts keys of any length; this cannot fail.
    <M as Mac>::new_from_slice(key).map_err(|_| ScramError::Crypto)
}

/// A SCRAM exchange that failed, or a message that cannot be used. Never
/// carries a password, key or proof.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// An extension key or value that cannot be sent.
    #[error(
        "invalid scram extension `{key}`: keys must be letters and values printable ascii without `,` or `=`"
    )]
    InvalidExtension {
        /// The extension's key.
        key: String,
    },
    /// A server message is not UTF-8.
    #[error("scram {message} is not utf-8")]
    NotUtf8 {
        /// Which message.
        message: &'static str,
    },
    /// A server message lacks a required attribute.
    #[error("scram {message} lacks the `{attribute}=` attribute")]
    MissingAttribute {
        /// Which message.
        message: &'static str,
        /// The attribute's name.
        attribute: &'static str,
    },
    /// A server message is malformed.
    #[error("malformed scram {message}: {reason}")]
    Malformed {
        /// Which message.
        message: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An attribute is not valid base64.
    #[error("scram {message}: `{attribute}=` is not valid base64")]
    InvalidBase64 {
        /// Which message.
        message: &'static str,
        /// The attribute's name.
        attribute: &'static str,
    },
    /// The server's nonce does not extend the client's.
    #[error("scram server-first-message: the server nonce does not start with the client nonce")]
    NonceMismatch,
    /// The server asks for an iteration count outside the accepted range.
    #[error(
        "scram server-first-message: iteration count {count} is outside the accepted range {MIN_ITERATIONS}..={MAX_ITERATIONS}"
    )]
    IterationCount {
        /// The count the server asked for.
        count: u64,
    },
    /// The server requires an extension this client does not know (`m=`).
    #[error("scram server-first-message: the server requires an unsupported mandatory extension")]
    MandatoryExtension,
    /// The server ended the exchange with `e=`.
    #[error("scram server error: {message}")]
    Server {
        /// The server's `e=` value.
        message: String,
    },
    /// The server's signature is wrong: it does not know the password.
    #[error("scram server-final-message: the server signature does not verify")]
    ServerSignatureMismatch,
    /// A message was handled out of order.
    #[error("scram exchange: {step} called {reason}")]
    OutOfOrder {
        /// The step called.
        step: &'static str,
        /// Why it was out of order.
        reason: &'static str,
    },
    /// The HMAC implementation refused a key (cannot happen).
    #[error("scram: hmac key rejected")]
    Crypto,
}

/// Where an exchange stands.
enum State {
    /// client-first-message not answered yet.
    Initial,
    /// client-final-message sent; `ServerSignature` not checked yet.
    AwaitingServerFinal {
        server_key: Vec<u8>,
        auth_message: String,
    },
    /// The server's signature verified.
    Done,
    /// A message was rejected; the exchange cannot continue.
    Failed,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Initial => "initial",
            State::AwaitingServerFinal { .. } => "awaiting-server-final",
            State::Done => "done",
            State::Failed => "failed",
        }
    }
}

/// The client side of one SCRAM exchange.
///
/// ```text
/// let mut client = ScramClient::new(ScramMechanism::Sha512, "alice", "secret", &[])?;
/// send(client.client_first());
/// send(client.handle_server_first(&receive())?);
/// client.handle_server_final(&receive())?;
/// ```
pub struct ScramClient {
    mechanism: ScramMechanism,
    username: String,
    password: String,
    nonce: String,
    /// `n=<user>,r=<nonce>[,ext=value...]`, part of the AuthMessage.
    client_first_bare: String,
    state: State,
}

impl fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("state", &self.state.name())
            .finish()
    }
}

impl ScramClient {
    /// A client with a fresh random nonce. `extensions` go into the
    /// client-first-message, e.g. `[("tokenauth", "true")]` for a Kafka
    /// delegation token.
    pub fn new(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        extensions: &[(&str, &str)],
    ) -> Result<Self, ScramError> {
        let nonce = Alphanumeric.sample_string(&mut rand::rng(), NONCE_LEN);
        Self::with_nonce(mechanism, username, password, extensions, &nonce)
    }

    /// A client with a chosen nonce, for tests against known vectors. The
    /// nonce must be printable ASCII without `,`.
    pub fn with_nonce(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        extensions: &[(&str, &str)],
        nonce: &str,
    ) -> Result<Self, ScramError> {
        if nonce.is_empty() || !nonce.bytes().all(is_nonce_byte) {
            return Err(ScramError::Malformed {
                message: "client nonce",
                reason: "must be printable ascii without `,`".into(),
            });
        }
        let mut client_first_bare = format!("n={},r={nonce}", escape_username(username));
        for (key, value) in extensions {
            if !valid_extension(key, value) {
                return Err(ScramError::InvalidExtension {
                    key: (*key).to_owned(),
                });
            }
            client_first_bare.push_str(&format!(",{key}={value}"));
        }
        Ok(Self {
            mechanism,
            username: username.to_owned(),
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            client_first_bare,
            state: State::Initial,
        })
    }

    /// The mechanism this exchange uses.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The username (unescaped).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// Whether the server's signature has been verified.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The client-first-message: `n,,n=<user>,r=<nonce>[,ext=value...]`.
    pub fn client_first(&self) -> Vec<u8> {
        format!("{GS2_HEADER}{}", self.client_first_bare).into_bytes()
    }

    /// Checks the server-first-message and returns the client-final-message
    /// carrying the ClientProof.
    pub fn handle_server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.state, State::Initial) {
            return Err(ScramError::OutOfOrder {
                step: "handle_server_first",
                reason: "twice or after a failure",
            });
        }
        self.state = State::Failed;
        let server_first = std::str::from_utf8(message).map_err(|_| ScramError::NotUtf8 {
            message: "server-first-message",
        })?;
        let parsed = ServerFirst::parse(server_first, &self.nonce)?;

        let without_proof = format!("c={GS2_HEADER_BASE64},r={}", parsed.nonce);
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let mech = self.mechanism;
        let salted =
            mech.salted_password(self.password.as_bytes(), &parsed.salt, parsed.iterations);
        let client_key = mech.hmac(&salted, b"Client Key")?;
        let stored_key = mech.hash(&client_key);
        let client_signature = mech.hmac(&stored_key, auth_message.as_bytes())?;
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = mech.hmac(&salted, b"Server Key")?;

        self.state = State::AwaitingServerFinal {
            server_key,
            auth_message,
        };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final-message: `v=` must carry the ServerSignature
    /// (checked in constant time); `e=` is the server's error.
    pub fn handle_server_final(&mut self, message: &[u8]) -> Result<(), ScramError> {
        let State::AwaitingServerFinal {
            server_key,
            auth_message,
        } = std::mem::replace(&mut self.state, State::Failed)
        else {
            return Err(ScramError::OutOfOrder {
                step: "handle_server_final",
                reason: "before handle_server_first, twice or after a failure",
            });
        };
        const MSG: &str = "server-final-message";
        let text =
            std::str::from_utf8(message).map_err(|_| ScramError::NotUtf8 { message: MSG })?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(error) = first.strip_prefix("e=") {
            return Err(ScramError::Server {
                message: sanitize(error),
            });
        }
        let Some(signature) = first.strip_prefix("v=") else {
            return Err(ScramError::MissingAttribute {
                message: MSG,
                attribute: "v",
            });
        };
        let signature = BASE64
            .decode(signature)
            .map_err(|_| ScramError::InvalidBase64 {
                message: MSG,
                attribute: "v",
            })?;
        if !self
            .mechanism
            .verify_hmac(&server_key, auth_message.as_bytes(), &signature)?
        {
            return Err(ScramError::ServerSignatureMismatch);
        }
        self.state = State::Done;
        Ok(())
    }
}

/// The fields of a server-first-message that the client uses.
struct ServerFirst<'a> {
    nonce: &'a str,
    salt: Vec<u8>,
    iterations: u32,
}

impl<'a> ServerFirst<'a> {
    /// Parses `r=...,s=...,i=...[,extensions]`, in that order (RFC 5802).
    fn parse(text: &'a str, client_nonce: &str) -> Result<Self, ScramError> {
        const MSG: &str = "server-first-message";
        if text.starts_with("m=") {
            return Err(ScramError::MandatoryExtension);
        }
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramError::Server {
                message: sanitize(error),
            });
        }
        let mut attrs = text.split(',');
        let mut next = |name: &'static str| {
            attrs
                .next()
                .and_then(|a| a.strip_prefix(name)?.strip_prefix('='))
                .ok_or(ScramError::MissingAttribute {
                    message: MSG,
                    attribute: name,
                })
        };
        let (nonce, salt, iterations) = (next("r")?, next("s")?, next("i")?);

        if !nonce.bytes().all(is_nonce_byte) {
            return Err(ScramError::Malformed {
                message: MSG,
                reason: "the nonce holds characters that are not printable ascii".into(),
            });
        }
        if !nonce.starts_with(client_nonce) || nonce.len() == client_nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        let salt = BASE64.decode(salt).map_err(|_| ScramError::InvalidBase64 {
            message: MSG,
            attribute: "s",
        })?;
        if salt.is_empty() {
            return Err(ScramError::Malformed {
                message: MSG,
                reason: "the salt is empty".into(),
            });
        }
        if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ScramError::Malformed {
                message: MSG,
                reason: "the iteration count is not a number".into(),
            });
        }
        // Digits only: a parse failure is an overflow, i.e. far too large.
        let count: u64 = iterations.parse().unwrap_or(u64::MAX);
        let iterations = u32::try_from(count)
            .ok()
            .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
            .ok_or(ScramError::IterationCount { count })?;
        Ok(Self {
            nonce,
            salt,
            iterations,
        })
    }
}

/// RFC 5802 `saslname`: `=` becomes `=3D` and `,` becomes `=2C`.
fn escape_username(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// Printable ASCII except `,` (RFC 5802 `printable`).
fn is_nonce_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) && b != b','
}

/// Kafka's rules: key `[A-Za-z]+`, value `[\x01-\x7F]+` without `=` or `,`.
fn valid_extension(key: &str, value: &str) -> bool {
    !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_alphabetic())
        && !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x01..=0x7f).contains(&b) && b != b'=' && b != b',')
}

/// A server's error text, bounded and without control characters, for logs.
fn sanitize(text: &str) -> String {
    text.chars()
        .take(MAX_SERVER_ERROR_LEN)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
