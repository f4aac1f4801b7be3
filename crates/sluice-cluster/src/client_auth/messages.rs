//! The two client SASL messages Sluice must read: the PLAIN message (whose
//! credentials are replayed on every broker connection) and the SCRAM
//! client-first-message (whose username decides whose delegation token the
//! broker connections use).
//!
//! Both parsers are strict about structure and never echo the input in their
//! errors: the PLAIN message holds a password.

use std::fmt;

/// Why a client SASL message cannot be used. Never carries the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Not `[authzid] NUL user NUL password`.
    #[error("invalid PLAIN message: {0}")]
    Plain(&'static str),
    /// Not a SCRAM client-first-message Sluice can use.
    #[error("invalid SCRAM client-first-message: {0}")]
    ScramFirst(&'static str),
}

/// Credentials from a client's PLAIN message, kept in memory only to replay
/// them on the client's broker connections. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    username: String,
    password: String,
}

impl fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl PlainCredentials {
    /// Parses `[authzid] NUL authcid NUL passwd` (RFC 4616). Like Kafka's
    /// PLAIN server, a non-empty authzid must equal the username.
    pub fn parse(message: &[u8]) -> Result<Self, MessageError> {
        let mut parts = message.split(|b| *b == 0);
        let (Some(authzid), Some(user), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(MessageError::Plain("expected three NUL-separated fields"));
        };
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(str::to_owned)
                .map_err(|_| MessageError::Plain("not UTF-8"))
        };
        let (authzid, username, password) = (text(authzid)?, text(user)?, text(password)?);
        if username.is_empty() {
            return Err(MessageError::Plain("empty username"));
        }
        if password.is_empty() {
            return Err(MessageError::Plain("empty password"));
        }
        if !authzid.is_empty() && authzid != username {
            return Err(MessageError::Plain(
                "the authorization id differs from the username",
            ));
        }
        Ok(Self { username, password })
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password. Secret: never log it.
    pub fn password(&self) -> &str {
        &self.password
    }
}

/// What Sluice reads from a SCRAM client-first-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramFirst {
    /// The username, unescaped (`=2C` → `,`, `=3D` → `=`).
    pub username: String,
    /// Whether the client authenticates with a delegation token itself
    /// (`tokenauth=true` extension).
    pub tokenauth: bool,
}

/// Parses a client-first-message (RFC 5802 §7):
/// `gs2-header [reserved-mext ","] "n=" saslname "," "r=" nonce ["," extensions]`.
pub fn parse_scram_client_first(message: &[u8]) -> Result<ScramFirst, MessageError> {
    let err = MessageError::ScramFirst;
    let text = std::str::from_utf8(message).map_err(|_| err("not UTF-8"))?;
    let (flag, rest) = text.split_once(',').ok_or(err("no gs2 header"))?;
    if flag != "n" && flag != "y" {
        return Err(err("channel binding is not supported"));
    }
    let (authzid, bare) = rest.split_once(',').ok_or(err("no gs2 header"))?;
    let mut attributes = bare.split(',');
    let user = attributes.next().unwrap_or_default();
    if user.starts_with("m=") {
        return Err(err("mandatory extensions are not supported"));
    }
    let escaped = user.strip_prefix("n=").ok_or(err("no username"))?;
    let username = unescape_saslname(escaped)?;
    if username.is_empty() {
        return Err(err("empty username"));
    }
    if let Some(authzid) = authzid.strip_prefix("a=") {
        if unescape_saslname(authzid)? != username {
            return Err(err("the authorization id differs from the username"));
        }
    } else if !authzid.is_empty() {
        return Err(err("malformed authorization id"));
    }
    let nonce = attributes.next().unwrap_or_default();
    if nonce.strip_prefix("r=").is_none_or(str::is_empty) {
        return Err(err("no nonce"));
    }
    let tokenauth = attributes.any(|a| {
        a.split_once('=')
            .is_some_and(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"))
    });
    Ok(ScramFirst {
        username,
        tokenauth,
    })
}

/// Unescapes a SCRAM `saslname`: `=2C` is `,`, `=3D` is `=`, and any other
/// `=` is invalid.
pub fn unescape_saslname(escaped: &str) -> Result<String, MessageError> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3);
        match code {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return Err(MessageError::ScramFirst("invalid escape in username")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}
