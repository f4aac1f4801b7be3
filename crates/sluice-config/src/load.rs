//! Reading a file and parsing it into a schema struct.
//!
//! Parsing goes through `serde_path_to_error`, so that a schema error names the
//! field it is about (`sources[0].Kafka.chain[0].KafkaSinkSingle.destination_portt`)
//! rather than only a line and column.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::ConfigError;
use crate::error::join_path;

/// Reads `path` as UTF-8 text.
pub(crate) fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Parses `text` (the contents of `path`) into `T`.
pub(crate) fn parse_yaml<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T, ConfigError> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(de, &mut track);
    // shotover writes enums as single-key maps (`- Kafka: {...}`), not YAML tags.
    let result = serde_yaml_ng::with::singleton_map_recursive::deserialize(tracked);
    result.map_err(|inner: serde_yaml_ng::Error| {
        let field = track.path().to_string();
        let location = inner
            .location()
            .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
            .unwrap_or_default();
        let message = strip_yaml_path(&inner.to_string());
        let message = strip_location(&message);
        // An unknown field's path ends at its parent; name the field itself.
        let field = match unknown_field_name(message) {
            Some(name) if !field.ends_with(name) => {
                join_path(if field == "." { "" } else { &field }, name)
            }
            _ => field,
        };
        if field == "." || field.is_empty() {
            ConfigError::Yaml {
                path: path.to_path_buf(),
                message: format!("{message}{location}"),
            }
        } else {
            ConfigError::Parse {
                path: path.to_path_buf(),
                field,
                message: format!("{message}{location}"),
            }
        }
    })
}

/// serde_yaml_ng prefixes some messages with its own `a.b[0]: ` path; ours is better.
fn strip_yaml_path(message: &str) -> String {
    match message.split_once(": ") {
        Some((prefix, rest))
            if !prefix.contains(' ') && !prefix.is_empty() && !prefix.contains('`') =>
        {
            rest.to_owned()
        }
        _ => message.to_owned(),
    }
}

/// Drops serde_yaml_ng's ` at line L column C`, which we print in our own words.
fn strip_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) if message[i..].contains(" column ") => &message[..i],
        _ => message,
    }
}

/// `unknown field `foo`, expected ...` → `foo`.
fn unknown_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(
            unknown_field_name("unknown field `portt`, expected one of `a`"),
            Some("portt")
        );
        assert_eq!(unknown_field_name("missing field `a`"), None);
        assert_eq!(strip_location("bad at line 3 column 7"), "bad");
        assert_eq!(strip_yaml_path("sources[0].Kafka: bad value"), "bad value");
        assert_eq!(
            strip_yaml_path("invalid type: string \"x\", expected u16"),
            "invalid type: string \"x\", expected u16"
        );
    }
}
