//! [`BrokerError`]: everything that can go wrong on a broker connection.
//!
//! Each variant names the broker (`broker 3 at 127.0.0.1:9192: ...`), or,
//! when Sluice had no address to connect to ([`Unaddressed`]), what it
//! looked for (`broker 3`, `any broker`, `the first contact points`); no
//! error carries an address that is not a broker's. Each is classified
//! through [`ErrorClass`], so that a sink can decide between
//! retrying elsewhere, synthesizing a Kafka error, or closing the client.
//! The error is `Clone` because one connection failure completes every
//! request that was in flight on it.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use sluice_codec::Request;

use crate::BrokerAddress;
use sluice_error::{ErrorClass, ErrorSide};

/// A broker connection failed, or a request on it could not be served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BrokerError {
    /// Resolving or connecting failed.
    #[error("{broker}: cannot connect: {reason}")]
    Connect {
        /// The broker.
        broker: BrokerAddress,
        /// What went wrong.
        reason: String,
    },
    /// Connecting (TCP and TLS handshake) took longer than the connect timeout.
    #[error("{broker}: connect timed out after {}ms", timeout.as_millis())]
    ConnectTimeout {
        /// The broker.
        broker: BrokerAddress,
        /// The connect timeout that passed.
        timeout: Duration,
    },
    /// The TLS handshake was refused (certificate, protocol version, ...).
    #[error("{broker}: tls handshake failed: {reason}")]
    TlsHandshake {
        /// The broker.
        broker: BrokerAddress,
        /// What went wrong.
        reason: String,
    },
    /// The broker closed the connection.
    #[error("{broker}: connection closed by the broker")]
    ClosedByBroker {
        /// The broker.
        broker: BrokerAddress,
    },
    /// Reading from or writing to the socket failed.
    #[error("{broker}: {op} failed: {reason}")]
    Io {
        /// The broker.
        broker: BrokerAddress,
        /// `receive` or `send`.
        op: &'static str,
        /// A short label for metrics: `reset`, `eof`, `tls` or `io`.
        kind: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The oldest request in flight waited longer than the read timeout.
    #[error("{broker}: no response within {}ms", timeout.as_millis())]
    ReadTimeout {
        /// The broker.
        broker: BrokerAddress,
        /// The read timeout that passed.
        timeout: Duration,
    },
    /// The broker sent bytes that break the protocol.
    #[error("{broker}: protocol error: {reason}")]
    Protocol {
        /// The broker.
        broker: BrokerAddress,
        /// What went wrong.
        reason: String,
    },
    /// Sluice could not encode a request it had rewritten.
    #[error("{broker}: cannot encode request: {reason}")]
    Encode {
        /// The broker.
        broker: BrokerAddress,
        /// What went wrong.
        reason: String,
    },
    /// Sluice closed the connection (the owner dropped it).
    #[error("{broker}: connection closed by sluice")]
    Shutdown {
        /// The broker.
        broker: BrokerAddress,
    },
    /// A connect to the broker failed moments ago: it is marked down and
    /// not tried again until the backoff window ends. The request was not
    /// sent.
    #[error("{broker}: marked down after a failed connect; next attempt in {}ms", retry_in.as_millis())]
    Down {
        /// The broker.
        broker: BrokerAddress,
        /// How long until the next connect attempt.
        retry_in: Duration,
    },
    /// The broker stopped answering and left the cluster's metadata (the
    /// controller fenced it): a request still owed there is answered as
    /// failed, so that the client retries where its partitions moved.
    #[error("{broker}: the broker stopped answering and left the cluster metadata")]
    LeftCluster {
        /// The broker.
        broker: BrokerAddress,
    },
    /// No connection could be attempted: Sluice has no address for what it
    /// looked for. Nothing was sent.
    #[error("{0}")]
    Unaddressed(Unaddressed),
    /// The connection had failed before this request was written, so the
    /// broker never saw it: retrying it cannot apply it twice.
    #[error("{cause}; the request was not sent")]
    NotSent {
        /// Why the connection had failed.
        cause: Box<BrokerError>,
        /// The request, handed back when the connection still had it, so
        /// that the owner can send it again (see [`BrokerError::unsent_request`]).
        request: Option<UnsentRequest>,
    },
}

/// What Sluice looked for when it had no broker address to connect to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unaddressed {
    /// Broker `id` is not in the cluster metadata.
    #[error("broker {id}: cannot connect: the broker is not in the cluster metadata")]
    NotInMetadata {
        /// The broker's id.
        id: i32,
    },
    /// Broker `id` is listed with a port that is not a TCP port.
    #[error("broker {id} at {host}: cannot connect: invalid port {port} in the cluster metadata")]
    InvalidPort {
        /// The broker's id.
        id: i32,
        /// Its host.
        host: String,
        /// The port listed.
        port: i32,
    },
    /// A request any broker serves found no broker to go to: none is known
    /// but the one it must avoid.
    #[error("any broker: cannot connect: no other broker is known")]
    NoOtherBroker,
    /// No broker is known yet and no first contact point is configured.
    #[error("the first contact points: cannot connect: no contact point configured")]
    NoContactPoint,
}

impl Unaddressed {
    /// The broker id it is about, when it is about one broker.
    pub fn broker_id(&self) -> Option<i32> {
        match self {
            Unaddressed::NotInMetadata { id } | Unaddressed::InvalidPort { id, .. } => Some(*id),
            Unaddressed::NoOtherBroker | Unaddressed::NoContactPoint => None,
        }
    }
}

/// What a [`BrokerError`] is about, for log lines: the broker, or what
/// Sluice looked for when it had no address ([`BrokerError::target`]).
#[derive(Debug, Clone, Copy)]
pub struct ErrorTarget<'a>(&'a BrokerError);

impl fmt::Display for ErrorTarget<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.unaddressed() {
            None => match self.0.broker() {
                Some(broker) => broker.fmt(f),
                None => f.write_str("no broker"),
            },
            Some(Unaddressed::NotInMetadata { id }) => write!(f, "broker {id}"),
            Some(Unaddressed::InvalidPort { id, host, .. }) => write!(f, "broker {id} at {host}"),
            Some(Unaddressed::NoOtherBroker) => f.write_str("any broker"),
            Some(Unaddressed::NoContactPoint) => f.write_str("the first contact points"),
        }
    }
}

/// A request a broker connection never wrote, handed back inside
/// [`BrokerError::NotSent`] (shared, because the error is `Clone`).
#[derive(Clone)]
pub struct UnsentRequest(Arc<Request>);

impl fmt::Debug for UnsentRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UnsentRequest({:?} v{})",
            self.0.api_key(),
            self.0.api_version()
        )
    }
}

impl BrokerError {
    /// A short label for what failed, as the `kind` metric label carries it.
    pub fn kind(&self) -> &'static str {
        match self {
            BrokerError::Connect { .. } => "connect",
            BrokerError::ConnectTimeout { .. } => "connect_timeout",
            BrokerError::TlsHandshake { .. } => "tls_handshake",
            BrokerError::ClosedByBroker { .. } => "eof",
            BrokerError::Io { kind, .. } => kind,
            BrokerError::ReadTimeout { .. } => "timeout",
            BrokerError::Protocol { .. } => "protocol",
            BrokerError::Encode { .. } => "encode",
            BrokerError::Shutdown { .. } => "shutdown",
            BrokerError::LeftCluster { .. } => "left_cluster",
            BrokerError::Down { .. } => "down",
            BrokerError::Unaddressed(_) => "unaddressed",
            BrokerError::NotSent { cause, .. } => cause.kind(),
        }
    }

    /// The broker this error is about; `None` when Sluice had no address
    /// to connect to ([`BrokerError::Unaddressed`]).
    pub fn broker(&self) -> Option<&BrokerAddress> {
        match self {
            BrokerError::Connect { broker, .. }
            | BrokerError::ConnectTimeout { broker, .. }
            | BrokerError::TlsHandshake { broker, .. }
            | BrokerError::ClosedByBroker { broker }
            | BrokerError::Io { broker, .. }
            | BrokerError::ReadTimeout { broker, .. }
            | BrokerError::Protocol { broker, .. }
            | BrokerError::Encode { broker, .. }
            | BrokerError::Shutdown { broker }
            | BrokerError::LeftCluster { broker }
            | BrokerError::Down { broker, .. } => Some(broker),
            BrokerError::Unaddressed(_) => None,
            BrokerError::NotSent { cause, .. } => cause.broker(),
        }
    }

    /// What Sluice looked for, when it had no broker address.
    pub fn unaddressed(&self) -> Option<&Unaddressed> {
        match self {
            BrokerError::Unaddressed(u) => Some(u),
            BrokerError::NotSent { cause, .. } => cause.unaddressed(),
            _ => None,
        }
    }

    /// What the error is about, for log lines: the broker, or what Sluice
    /// looked for when it had no address.
    pub fn target(&self) -> ErrorTarget<'_> {
        ErrorTarget(self)
    }

    /// Whether the broker may have seen the request. `false` only when it
    /// certainly did not (the connection was down before it was written, or
    /// it could not be encoded).
    pub fn request_may_have_been_sent(&self) -> bool {
        !matches!(
            self,
            BrokerError::NotSent { .. }
                | BrokerError::Down { .. }
                | BrokerError::Unaddressed(_)
                | BrokerError::Encode { .. }
                | BrokerError::Connect { .. }
                | BrokerError::ConnectTimeout { .. }
                | BrokerError::TlsHandshake { .. }
        )
    }

    /// A request the broker certainly never saw, handed back by the
    /// connection (with the client's correlation id) so that it can be sent
    /// again, on a new connection, without any risk of applying it twice.
    /// `None` for every other error.
    pub fn unsent_request(&self) -> Option<Request> {
        match self {
            BrokerError::NotSent {
                request: Some(UnsentRequest(request)),
                ..
            } => Some(Request::clone(request)),
            _ => None,
        }
    }

    /// Wraps the error of a failed connection for a request it never wrote.
    pub(crate) fn not_sent(cause: &BrokerError) -> BrokerError {
        match cause {
            BrokerError::NotSent { cause, .. } => BrokerError::NotSent {
                cause: cause.clone(),
                request: None,
            },
            other => BrokerError::NotSent {
                cause: Box::new(other.clone()),
                request: None,
            },
        }
    }

    /// [`BrokerError::not_sent`], handing `request` back to the owner.
    pub(crate) fn not_sent_returning(cause: &BrokerError, request: Request) -> BrokerError {
        match BrokerError::not_sent(cause) {
            BrokerError::NotSent { cause, .. } => BrokerError::NotSent {
                cause,
                request: Some(UnsentRequest(Arc::new(request))),
            },
            other => other,
        }
    }

    /// Classifies an I/O error on an established connection.
    pub(crate) fn io(broker: &BrokerAddress, op: &'static str, e: &io::Error) -> BrokerError {
        if e.kind() == io::ErrorKind::UnexpectedEof && op == "receive" {
            return BrokerError::ClosedByBroker {
                broker: broker.clone(),
            };
        }
        let kind = match e.kind() {
            _ if is_tls_error(e) => "tls",
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => "reset",
            io::ErrorKind::UnexpectedEof => "eof",
            _ => "io",
        };
        BrokerError::Io {
            broker: broker.clone(),
            op,
            kind,
            reason: describe_io(e),
        }
    }
}

impl ErrorClass for BrokerError {
    fn side(&self) -> ErrorSide {
        match self {
            BrokerError::Encode { .. } => ErrorSide::Internal,
            BrokerError::NotSent { cause, .. } => cause.side(),
            _ => ErrorSide::Broker,
        }
    }

    fn retriable(&self) -> bool {
        match self {
            BrokerError::Connect { .. }
            | BrokerError::ConnectTimeout { .. }
            | BrokerError::ClosedByBroker { .. }
            | BrokerError::Io { .. }
            | BrokerError::ReadTimeout { .. }
            | BrokerError::Shutdown { .. }
            | BrokerError::LeftCluster { .. }
            | BrokerError::Unaddressed(_)
            | BrokerError::Down { .. } => true,
            BrokerError::TlsHandshake { .. }
            | BrokerError::Protocol { .. }
            | BrokerError::Encode { .. } => false,
            // The broker never saw it; whether another try can work depends
            // on why the connection failed.
            BrokerError::NotSent { cause, .. } => cause.retriable(),
        }
    }
}

/// Whether an I/O error carries a rustls error (TLS alert, bad record, ...).
pub(crate) fn is_tls_error(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// An I/O error as a lowercase phrase: `connection reset by peer (os error 104)`.
pub(crate) fn describe_io(e: &io::Error) -> String {
    let text = e.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => format!("{:?}", e.kind()).to_lowercase(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn addr() -> BrokerAddress {
        BrokerAddress::new("127.0.0.1", 9192).with_id(3)
    }

    #[test]
    fn messages_name_the_broker() {
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "Connection reset by peer");
        let e = BrokerError::io(&addr(), "receive", &reset);
        assert_eq!(
            e.to_string(),
            "broker 3 at 127.0.0.1:9192: receive failed: connection reset by peer"
        );
        assert_eq!(e.kind(), "reset");
        assert!(e.retriable());
        assert_eq!(e.side(), ErrorSide::Broker);

        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        let e = BrokerError::io(&addr(), "receive", &eof);
        assert_eq!(
            e.to_string(),
            "broker 3 at 127.0.0.1:9192: connection closed by the broker"
        );
        let e = BrokerError::not_sent(&e);
        assert_eq!(
            e.to_string(),
            "broker 3 at 127.0.0.1:9192: connection closed by the broker; the request was not sent"
        );
        assert!(!e.request_may_have_been_sent());
        assert!(BrokerError::not_sent(&e).to_string().ends_with("not sent"));
    }

    #[test]
    fn protocol_errors_are_not_retriable() {
        let e = BrokerError::Protocol {
            broker: addr(),
            reason: "correlation id 7 does not match the expected 6".into(),
        };
        assert!(!e.retriable());
        assert_eq!(e.side(), ErrorSide::Broker);
        assert!(e.request_may_have_been_sent());
        let e = BrokerError::Encode {
            broker: addr(),
            reason: "x".into(),
        };
        assert_eq!(e.side(), ErrorSide::Internal);
    }

    #[test]
    fn an_unaddressed_error_names_what_sluice_looked_for_not_an_address() {
        let e = BrokerError::Unaddressed(Unaddressed::NotInMetadata { id: 4 });
        assert_eq!(
            e.to_string(),
            "broker 4: cannot connect: the broker is not in the cluster metadata"
        );
        assert_eq!(e.broker(), None);
        assert_eq!(e.target().to_string(), "broker 4");
        assert_eq!(e.unaddressed().and_then(Unaddressed::broker_id), Some(4));
        assert!(e.retriable());
        assert_eq!(e.side(), ErrorSide::Broker);
        assert!(!e.request_may_have_been_sent());
        let e = BrokerError::not_sent(&BrokerError::Unaddressed(Unaddressed::NoContactPoint));
        assert_eq!(e.target().to_string(), "the first contact points");
        assert!(e.to_string().ends_with("; the request was not sent"), "{e}");
        let e = BrokerError::Unaddressed(Unaddressed::InvalidPort {
            id: 2,
            host: "kafka-2".into(),
            port: 70_000,
        });
        assert_eq!(e.target().to_string(), "broker 2 at kafka-2");
        assert_eq!(
            BrokerError::Unaddressed(Unaddressed::NoOtherBroker)
                .target()
                .to_string(),
            "any broker"
        );
        assert_eq!(
            BrokerError::Shutdown { broker: addr() }
                .target()
                .to_string(),
            addr().to_string()
        );
    }
}
