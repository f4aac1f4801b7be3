//! [`BrokerAddress`]: which broker a connection talks to, for connecting,
//! logging and metric labels.
//!
//! Every log line and error about a broker connection names the broker the
//! same way (`broker 3 at 127.0.0.1:9192`), so that an operator can grep for
//! one broker across the whole proxy.

use std::fmt;

/// A broker's id (when known) and address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerAddress {
    /// The broker's node id, once known from metadata.
    pub id: Option<i32>,
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// A `host:port` string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid broker address `{input}`: expected host:port")]
pub struct AddressParseError {
    /// The text that was given.
    pub(crate) input: String,
}

impl BrokerAddress {
    /// An address with no known broker id.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            id: None,
            host: host.into(),
            port,
        }
    }

    /// The same address with a broker id.
    pub fn with_id(mut self, id: i32) -> Self {
        self.id = Some(id);
        self
    }

    /// Parses `host:port`, `ip:port` or `[ipv6]:port`.
    pub fn parse(input: &str) -> Result<Self, AddressParseError> {
        let err = || AddressParseError {
            input: input.to_owned(),
        };
        let (host, port) = input.trim().rsplit_once(':').ok_or_else(err)?;
        let port: u16 = port.parse().map_err(|_| err())?;
        let host = match host.strip_prefix('[') {
            Some(rest) => rest.strip_suffix(']').ok_or_else(err)?,
            None if host.contains(':') => return Err(err()),
            None => host,
        };
        if host.is_empty() {
            return Err(err());
        }
        Ok(Self::new(host, port))
    }

    /// The label used for this broker in metrics: its id when known, else
    /// `host:port`.
    pub fn metric_label(&self) -> String {
        match self.id {
            Some(id) => id.to_string(),
            None => HostPort(self).to_string(),
        }
    }

    /// `host:port`, with brackets around an IPv6 host.
    pub fn host_port(&self) -> impl fmt::Display + '_ {
        HostPort(self)
    }
}

struct HostPort<'a>(&'a BrokerAddress);

impl fmt::Display for HostPort<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        if a.host.contains(':') {
            write!(f, "[{}]:{}", a.host, a.port)
        } else {
            write!(f, "{}:{}", a.host, a.port)
        }
    }
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "broker {id} at {}", HostPort(self)),
            None => write!(f, "broker at {}", HostPort(self)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn displays_with_and_without_id() {
        let a = BrokerAddress::new("127.0.0.1", 9192);
        assert_eq!(a.to_string(), "broker at 127.0.0.1:9192");
        assert_eq!(a.metric_label(), "127.0.0.1:9192");
        let a = a.with_id(3);
        assert_eq!(a.to_string(), "broker 3 at 127.0.0.1:9192");
        assert_eq!(a.metric_label(), "3");
        assert_eq!(
            BrokerAddress::new("::1", 9092).to_string(),
            "broker at [::1]:9092"
        );
    }

    #[test]
    fn parses_host_port_forms() {
        assert_eq!(
            BrokerAddress::parse("kafka-1:9092").unwrap(),
            BrokerAddress::new("kafka-1", 9092)
        );
        assert_eq!(
            BrokerAddress::parse("[::1]:9092").unwrap(),
            BrokerAddress::new("::1", 9092)
        );
        for bad in [
            "kafka",
            "kafka:",
            ":9092",
            "::1:9092",
            "[::1:9092",
            "h:70000",
        ] {
            assert!(BrokerAddress::parse(bad).is_err(), "{bad} should not parse");
        }
    }
}
