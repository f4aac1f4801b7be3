//! `host:port` addresses as they appear in the files.
//!
//! Addresses stay strings in the schema (shotover's format, and a hostname may
//! only resolve at connect time), but validation parses each one here so that a
//! typo fails at startup rather than at the first connection.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

/// A parsed `host:port`. `host` is an IP address or a DNS name; IPv6 addresses
/// are written `[addr]:port` in the file and stored without brackets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// IP address or DNS name.
    pub(crate) host: String,
    /// TCP port.
    pub(crate) port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl HostPort {
    /// Parses `host:port`, `a.b.c.d:port` or `[v6]:port`. The message on error
    /// says what is wrong, in lowercase, without repeating the input.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Self {
                host: addr.ip().to_string(),
                port: addr.port(),
            });
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err("expected host:port, found no port".to_owned());
        };
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("invalid port `{port}`: expected a number from 0 to 65535"))?;
        check_host(host)?;
        Ok(Self {
            host: host.to_owned(),
            port,
        })
    }
}

fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("expected host:port, found no host".to_owned());
    }
    if host.contains(':') || host.starts_with('[') {
        return Err(format!(
            "invalid IPv6 address `{host}`: write it as [address]:port"
        ));
    }
    if host.chars().all(|c| c.is_ascii_digit() || c == '.') && host.parse::<Ipv4Addr>().is_err() {
        return Err(format!("invalid IPv4 address `{host}`"));
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if host.len() > 253 || !host.trim_end_matches('.').split('.').all(label_ok) {
        return Err(format!("invalid host name `{host}`"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ok(s: &str) -> HostPort {
        match HostPort::parse(s) {
            Ok(hp) => hp,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn parses_ips_and_names() {
        assert_eq!(
            ok("127.0.0.1:9192"),
            HostPort {
                host: "127.0.0.1".into(),
                port: 9192
            }
        );
        assert_eq!(ok("[::1]:9092").host, "::1");
        assert_eq!(ok("[::1]:9092").to_string(), "[::1]:9092");
        assert_eq!(ok("kafka-0.kafka.svc.cluster.local:9092").port, 9092);
        assert_eq!(ok("localhost:0").port, 0);
    }

    #[test]
    fn rejects_bad_addresses() {
        for bad in [
            "127.0.0.1",
            "127.0.0.1:",
            "127.0.0.1:99999",
            ":9092",
            "::1:9092",
            "300.0.0.1:9092",
            "not an address:9092",
            "host:port",
            "-bad-.example:1",
        ] {
            assert!(HostPort::parse(bad).is_err(), "{bad} should be rejected");
        }
    }
}
