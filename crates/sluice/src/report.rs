//! How `sluice` reports what it has to say outside its log: a configuration
//! that fails to load, `validate-config`'s verdict, or a failure before the
//! logger was installed.
//!
//! With `--log-format human` that is a plain line (`error: ...` on stderr,
//! `configuration OK` on stdout). With `--log-format json` it is one JSON
//! log line on stdout, where the log goes, in the logger's own format: a
//! collector that parses every line as JSON must not meet a plain-text one,
//! least of all the line saying why the process exited.

use tracing::Level;

use crate::cli::LogFormat;

/// Reports a failure that ends the process.
pub(crate) fn failure(format: LogFormat, message: &str) {
    match format {
        LogFormat::Human => eprintln!("error: {message}"),
        LogFormat::Json => json_line(Level::ERROR, message),
    }
}

/// Reports a success worth one line (`validate-config`'s verdict).
pub(crate) fn success(format: LogFormat, message: &str) {
    match format {
        LogFormat::Human => println!("{message}"),
        LogFormat::Json => json_line(Level::INFO, message),
    }
}

/// Writes one JSON log line through a subscriber that lives only for it:
/// the process-wide logger is not installed (its filter comes from the
/// config file, which may be the thing that failed), and this line must be
/// written whatever that filter would have said.
fn json_line(level: Level, message: &str) {
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(level)
        .with_writer(std::io::stdout)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        if level == Level::ERROR {
            tracing::error!("{message}");
        } else {
            tracing::info!("{message}");
        }
    });
}
