//! Small checks shared by the `validate()` methods.
//!
//! Each returns a [`FieldError`] naming the field it was given, so callers
//! stay one line per rule.

use std::path::Path;

use crate::FieldError;
use crate::address::HostPort;

/// What validation may look at beyond the parsed values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checks {
    /// Check that referenced files (TLS certificates and keys) exist.
    pub(crate) files: bool,
}

impl Checks {
    /// Every check: what `load()` runs.
    pub(crate) const ALL: Self = Self { files: true };
}

/// `value` must be `host:port`; `port_zero` allows port 0 (listeners only).
pub(crate) fn address(field: &str, value: &str, port_zero: bool) -> Result<HostPort, FieldError> {
    let hp = HostPort::parse(value)
        .map_err(|e| FieldError::new(field, format!("invalid address `{value}`: {e}")))?;
    if hp.port == 0 && !port_zero {
        return Err(FieldError::new(
            field,
            format!("invalid address `{value}`: port 0 is not allowed here"),
        ));
    }
    Ok(hp)
}

/// `value` must be an address clients can connect to: `host:port` with a
/// non-zero port and a host that is not the unspecified address (`0.0.0.0`
/// or `::` binds every interface, but a client told to connect there reaches
/// only itself; Kafka refuses it in `advertised.listeners` for that reason).
pub(crate) fn advertised_address(field: &str, value: &str) -> Result<HostPort, FieldError> {
    let hp = address(field, value, false)?;
    if hp
        .host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(FieldError::new(
            field,
            format!(
                "invalid address `{value}`: clients cannot connect to an unspecified address; \
                 give the host or IP address clients reach this node at"
            ),
        ));
    }
    Ok(hp)
}

/// The log levels a filter directive may name (`tracing`'s, any case; it
/// also takes the numbers 0 (off) to 5 (trace)).
const LOG_LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Whether `level` is a level `tracing` reads as one: a name of
/// [`LOG_LEVELS`] in any case, or a number from 0 to 5.
fn is_log_level(level: &str) -> bool {
    LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level))
        || matches!(level, "0" | "1" | "2" | "3" | "4" | "5")
}

/// `value` must be a log filter whose every directive names a level:
/// `level` or `target=level`, comma-separated, e.g. `info,sluice=debug`.
/// `tracing`'s own parser reads a bare word such as `warning` as a target
/// with every level enabled, which silences everything else: an operator
/// who wrote `warning` would get no log at all.
pub(crate) fn log_filter(field: &str, value: &str) -> Result<(), FieldError> {
    non_empty(field, value)?;
    for directive in value.split(',') {
        let directive = directive.trim();
        if directive.is_empty() {
            return Err(FieldError::new(
                field,
                format!("empty directive in `{value}`"),
            ));
        }
        let level = directive
            .rsplit_once('=')
            .map_or(directive, |(_, level)| level);
        if !is_log_level(level) {
            return Err(FieldError::new(
                field,
                format!(
                    "`{directive}` names no log level: write `level` or `target=level`, \
                     with a level of {} (or 0 to 5)",
                    LOG_LEVELS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Each element of `values` must be `host:port` with a non-zero port.
pub(crate) fn addresses(field: &str, values: &[String]) -> Result<(), FieldError> {
    if values.is_empty() {
        return Err(FieldError::new(field, "must list at least one address"));
    }
    for (i, v) in values.iter().enumerate() {
        address(&format!("{field}[{i}]"), v, false)?;
    }
    Ok(())
}

/// `value` must be a readable regular file (when file checks are on).
pub(crate) fn file(field: &str, value: &str, checks: Checks) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if !checks.files {
        return Ok(());
    }
    match std::fs::metadata(Path::new(value)) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(FieldError::new(
            field,
            format!("`{value}` is not a regular file"),
        )),
        Err(e) => Err(FieldError::new(
            field,
            format!("cannot open `{value}`: {e}"),
        )),
    }
}

/// An optional duration-like number must be positive when present.
pub(crate) fn positive(field: &str, value: Option<u64>) -> Result<(), FieldError> {
    match value {
        Some(0) => Err(FieldError::new(field, "must be greater than 0")),
        _ => Ok(()),
    }
}

/// An optional size must be at least `min` when present.
pub(crate) fn at_least(field: &str, value: Option<usize>, min: usize) -> Result<(), FieldError> {
    match value {
        Some(n) if n < min => Err(FieldError::new(
            field,
            format!("{n} is too small: must be at least {min}"),
        )),
        _ => Ok(()),
    }
}

/// A name must not be empty or only whitespace.
pub(crate) fn non_empty(field: &str, value: &str) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        Err(FieldError::new(field, "must not be empty"))
    } else {
        Ok(())
    }
}
