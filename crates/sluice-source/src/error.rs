//! Errors that stop a source from starting.
//!
//! Only [`crate::KafkaSource::bind`] fails with a [`SourceError`]: once a
//! source runs, an error on one client connection closes that connection and
//! is logged and counted there, never returned, so one client cannot stop the
//! listener.

use std::io;

/// A source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The configuration holds a value the source cannot use.
    #[error("source {source_name}: {field}: {reason}")]
    InvalidConfig {
        /// The source name from the topology.
        source_name: String,
        /// The offending field.
        field: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The listen address could not be bound.
    #[error("source {source_name}: cannot listen on {addr}: {error}")]
    Bind {
        /// The source name from the topology.
        source_name: String,
        /// The configured `listen_addr`.
        addr: String,
        /// The operating system's error.
        error: io::Error,
    },
    /// The listener's TLS settings cannot be used.
    #[error("source {source_name}: tls: {error}")]
    Tls {
        /// The source name from the topology.
        source_name: String,
        /// What is wrong with them; it names the file.
        #[source]
        error: sluice_tls::TlsError,
    },
}
