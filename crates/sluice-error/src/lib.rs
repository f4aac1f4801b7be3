//! Error classification shared by the whole proxy.
//!
//! Every error is classified where it is raised: on which side it happened
//! ([`ErrorSide`]) and whether retrying can help. That classification decides
//! what the client gets: a retriable Kafka error code, a non-retriable one, or
//! a closed connection. It is a leaf crate, with no dependencies, so that
//! every crate can classify its errors without depending on another crate
//! for it: the client side (`sluice-source`) needs it and nothing of the
//! broker side.

#![deny(missing_docs)]

/// Where an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorSide {
    /// The client broke the protocol or sent something we refuse.
    Client,
    /// A broker failed, or its connection did.
    Broker,
    /// A bug or resource problem inside Sluice.
    Internal,
}

impl ErrorSide {
    /// A short label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorSide::Client => "client",
            ErrorSide::Broker => "broker",
            ErrorSide::Internal => "internal",
        }
    }
}

/// Classification of an error.
pub trait ErrorClass {
    /// Where the error comes from.
    fn side(&self) -> ErrorSide;
    /// Whether the same request may succeed if retried.
    fn retriable(&self) -> bool;
    /// Whether closing a client for this is routine, as a broker closes a
    /// client for it in normal operation (e.g. its SASL session ended): the
    /// close is then logged at INFO, not WARN.
    fn routine_close(&self) -> bool {
        false
    }
}
