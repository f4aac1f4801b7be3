//! Configuration errors. Each names the file and, where known, the field.
//!
//! Validation works on one struct at a time and does not know which file it
//! came from, so it returns a [`FieldError`] whose field path is relative to
//! that struct. Each parent prefixes its own path ([`FieldError::within`]) and
//! the loader attaches the file ([`FieldError::in_file`]). Field paths use the
//! same notation as serde errors: `sources[0].Kafka.chain[1].KafkaSinkSingle.destination_port`.
//!
//! Every configuration error is the operator's to fix: none is retriable.

use std::path::{Path, PathBuf};

/// An invalid or unreadable configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not YAML, or its top level is not a mapping.
    #[error("{}: {message}", path.display())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column where known.
        message: String,
    },
    /// The YAML did not match the schema (unknown field, wrong type, missing field).
    #[error("{}: field `{field}`: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Path of the offending field, e.g. `sources[0].Kafka.listen_addr`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A value is well-formed YAML but not allowed.
    #[error("{}: field `{field}`: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Path of the offending field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// The file the error is about.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        match self {
            Self::Read { path, .. }
            | Self::Yaml { path, .. }
            | Self::Parse { path, .. }
            | Self::Invalid { path, .. } => path,
        }
    }

    /// The offending field's path, when the error is about one field.
    #[cfg(test)]
    pub(crate) fn field(&self) -> Option<&str> {
        match self {
            Self::Parse { field, .. } | Self::Invalid { field, .. } => Some(field),
            Self::Read { .. } | Self::Yaml { .. } => None,
        }
    }
}

/// A validation failure of one field, not yet tied to a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    /// Path of the offending field, relative to the struct that was validated.
    pub(crate) field: String,
    /// What is wrong with it.
    pub(crate) message: String,
}

impl FieldError {
    /// A failure of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same failure seen from the parent struct: `prefix` is the path of
    /// the validated struct within its parent (`chain[2]`, `tls`, ...).
    #[must_use]
    pub(crate) fn within(mut self, prefix: &str) -> Self {
        self.field = join_path(prefix, &self.field);
        self
    }

    /// Attaches the file the field came from.
    pub fn in_file(self, path: &Path) -> ConfigError {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            field: self.field,
            message: self.message,
        }
    }
}

/// Joins two field paths, without a dot before an index.
pub(crate) fn join_path(prefix: &str, rest: &str) -> String {
    if prefix.is_empty() {
        rest.to_owned()
    } else if rest.is_empty() {
        prefix.to_owned()
    } else if rest.starts_with('[') {
        format!("{prefix}{rest}")
    } else {
        format!("{prefix}.{rest}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn within_joins_paths_like_serde() {
        let e = FieldError::new("destination_port", "must not be 0")
            .within("KafkaSinkSingle")
            .within("[1]")
            .within("chain")
            .within("Kafka")
            .within("sources[0]");
        assert_eq!(
            e.field,
            "sources[0].Kafka.chain[1].KafkaSinkSingle.destination_port"
        );
    }

    #[test]
    fn in_file_names_file_and_field() {
        let e = FieldError::new("listen_addr", "missing port").in_file(Path::new("t.yaml"));
        assert_eq!(e.to_string(), "t.yaml: field `listen_addr`: missing port");
        assert_eq!(e.field(), Some("listen_addr"));
        assert_eq!(e.path(), Path::new("t.yaml"));
    }
}
