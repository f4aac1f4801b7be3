//! Configuration errors. Each names the file and, where known, the field.

use std::path::PathBuf;

/// An invalid or unreadable configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The YAML did not match the schema.
    #[error("{}: field `{field}`: {message}", path.display())]
    Parse {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A value is well-formed YAML but not allowed.
    #[error("{}: field `{field}`: {message}", path.display())]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}
