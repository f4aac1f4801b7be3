//! What a SIGHUP changes in a running Sluice, in front of the real 1-node
//! cluster (`single`):
//!
//! - the config file's `main_log_level` is put in force without a restart:
//!   DEBUG lines stop when it goes to `info` and come back when it goes to
//!   `info,sluice=debug`; an invalid level is refused with an ERROR line
//!   naming the file and the field, and the level in force stays;
//! - a changed topology or `observability_interface` is reported as needing
//!   a restart and not applied; a topology file only reformatted is not;
//! - a client connection opened before all of it keeps working.
//!
//! Every wait is for a log line or an answer, bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
use sluice_codec::{ApiKey, RequestKind};
use sluice_testkit::cluster::{Cluster, SINGLE};
use sluice_testkit::raw::RawClient;
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{free_port, wait};

const WAIT: Duration = Duration::from_secs(30);

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

fn topology(listen: &str, broker_port: u16, connect_timeout_ms: u64) -> String {
    format!(
        "sources:\n  - Kafka:\n      name: \"kafka\"\n      listen_addr: \"{listen}\"\n      chain:\n        - KafkaSinkSingle:\n            destination_address: \"127.0.0.1:{broker_port}\"\n            connect_timeout_ms: {connect_timeout_ms}\n"
    )
}

fn write_config(sluice: &SluiceProcess, level: &str, endpoint: &str) {
    let text = format!("main_log_level: \"{level}\"\nobservability_interface: \"{endpoint}\"\n");
    std::fs::write(sluice.config_file(), text).unwrap();
}

/// A client that has had an answer: its connection task is past the point
/// where it logs "connected" (at DEBUG).
fn answered_client(listen: &str) -> RawClient {
    let mut client = RawClient::connect(listen);
    client.request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    client
}

/// Whether `log` holds the DEBUG line `client`'s connection logs when it
/// starts.
fn logged_connected(log: &str, client: &RawClient) -> bool {
    let who = format!("client {} (conn ", client.local_addr());
    log.lines()
        .any(|l| l.contains(&who) && l.ends_with("): connected"))
}

/// Sends SIGHUP and waits until it was handled: the TLS step, last, logs
/// one line per SIGHUP. Returns the log from this SIGHUP on.
fn hangup(sluice: &SluiceProcess) -> String {
    const DONE: &str = "SIGHUP: no TLS configured, nothing to reload";
    let before = sluice.log().matches(DONE).count();
    let from = sluice.log().len();
    sluice.send_sighup();
    wait::until(WAIT, "the SIGHUP to be handled", || {
        let log = sluice.log();
        if log.matches(DONE).count() > before {
            Ok(log[from..].to_owned())
        } else {
            Err(log[from..].to_owned())
        }
    })
}

#[test]
fn sighup_changes_the_log_level_and_reports_what_needs_a_restart() {
    let cluster = Cluster::get(SINGLE);
    let broker_port = cluster.port(1, "PLAINTEXT");
    let listen = format!("127.0.0.1:{}", free_port());
    // Started at `info,sluice=debug`.
    let sluice = SluiceProcess::start(
        sluice_bin(),
        &topology(&listen, broker_port, 3000),
        &[&listen],
    );
    let endpoint = sluice.metrics_addr().to_owned();
    let config = sluice.config_file().display().to_string();
    let mut kept = answered_client(&listen);
    wait::until(WAIT, "a DEBUG line at `info,sluice=debug`", || {
        let log = sluice.log();
        logged_connected(&log, &kept).then_some(()).ok_or(log)
    });

    write_config(&sluice, "info", &endpoint);
    let handled = hangup(&sluice);
    assert!(
        handled.contains("SIGHUP: log level now `info` (was `info,sluice=debug`), from ")
            && handled.contains(&config),
        "{handled}"
    );
    let quiet = answered_client(&listen);
    assert!(
        !logged_connected(&sluice.log(), &quiet),
        "no DEBUG line at `info`:\n{}",
        sluice.log()
    );

    write_config(&sluice, "info,sluice=loud", &endpoint);
    let handled = hangup(&sluice);
    let refusal = handled
        .lines()
        .find(|l| l.contains("ERROR"))
        .unwrap_or_else(|| panic!("an ERROR line for the refused level:\n{handled}"));
    for part in [
        config.as_str(),
        "main_log_level",
        "sluice=loud",
        "the log level in force stays: `info`",
    ] {
        assert!(refusal.contains(part), "{part:?} in {refusal}");
    }
    let still_quiet = answered_client(&listen);
    assert!(
        !logged_connected(&sluice.log(), &still_quiet),
        "the refused level is not in force:\n{}",
        sluice.log()
    );

    write_config(&sluice, "info,sluice=debug", &endpoint);
    let handled = hangup(&sluice);
    assert!(
        handled.contains("SIGHUP: log level now `info,sluice=debug` (was `info`)"),
        "{handled}"
    );
    let loud = answered_client(&listen);
    wait::until(WAIT, "DEBUG lines again", || {
        let log = sluice.log();
        logged_connected(&log, &loud).then_some(()).ok_or(log)
    });

    // Topology and endpoint changes need a restart: said, not applied.
    std::fs::write(sluice.topology_file(), topology(&listen, broker_port, 5000)).unwrap();
    let moved = format!("127.0.0.1:{}", free_port());
    write_config(&sluice, "info,sluice=debug", &moved);
    let handled = hangup(&sluice);
    let topology_file = sluice.topology_file().display().to_string();
    assert!(
        handled.contains(&format!(
            "SIGHUP: {topology_file} changed since startup; topology changes need a restart and were not applied"
        )),
        "{handled}"
    );
    assert!(
        handled.contains("field `observability_interface` changed to")
            && handled.contains("it needs a restart"),
        "{handled}"
    );
    assert_eq!(sluice.http("/health").0, 200, "the endpoint stays");

    // The same topology, reformatted with a comment: nothing to say.
    let same = format!(
        "# the file as it started\n{}",
        topology(&listen, broker_port, 3000)
    );
    std::fs::write(sluice.topology_file(), same).unwrap();
    write_config(&sluice, "info,sluice=debug", &endpoint);
    let handled = hangup(&sluice);
    assert!(!handled.contains("WARN"), "{handled}");
    assert!(
        handled.contains("SIGHUP: log level `info,sluice=debug` unchanged"),
        "{handled}"
    );

    // The connection opened first was never dropped.
    kept.request(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
}
