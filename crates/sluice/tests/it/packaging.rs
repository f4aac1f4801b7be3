//! What the packages under `deploy/` install runs: the default files of the
//! `.deb` and tarball (`deploy/package/`) and of the container image
//! (`deploy/docker/config/`) pass the real `sluice validate-config`; both
//! Dockerfiles run Sluice as a numeric, non-root user; and the stop
//! timeouts that the systemd units and the Dockerfiles suggest cover the
//! leave, the drain and Sluice's own grace. (`scripts/check-deploy` runs
//! `systemd-analyze verify` on the units and holds the packaged unit to the
//! source one; `scripts/release` builds the packages.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Seconds Sluice may take past `--leave-timeout-secs` and
/// `--drain-timeout-secs` to exit (main.rs).
const SHUTDOWN_GRACE_SECS: u64 = 5;

fn read(path: &str) -> String {
    let root = sluice_testkit::repo_root();
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_packaged_default_files_pass_validate_config() {
    let root = sluice_testkit::repo_root();
    for dir in ["deploy/package", "deploy/docker/config"] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("validate-config")
            .arg("--topology-file")
            .arg(root.join(dir).join("topology.yaml"))
            .arg("--config-file")
            .arg(root.join(dir).join("config.yaml"))
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{dir}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The first `flag` followed by a number (comments name flags too).
fn secs(text: &str, flag: &str, file: &str) -> u64 {
    text.match_indices(flag)
        .find_map(|(at, _)| {
            let digits: String = text[at + flag.len()..]
                .trim_start_matches([' ', '='])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("{file}: no {flag} with a number"))
}

/// Each image's `USER` is numeric (`uid:gid`): the kubelet cannot check that
/// a user given by name is not root and refuses `runAsNonRoot` pods with
/// it. And `docker stop`'s suggested timeout covers the leave, the drain and
/// Sluice's grace that the systemd unit runs with, as the units'
/// `TimeoutStopSec` do.
#[test]
fn the_images_run_as_a_numeric_user_and_stop_in_time() {
    let unit_path = "deploy/systemd/sluice.service";
    let unit = read(unit_path);
    let needed = secs(&unit, "--leave-timeout-secs", unit_path)
        + secs(&unit, "--drain-timeout-secs", unit_path)
        + SHUTDOWN_GRACE_SECS;
    for path in [unit_path, "deploy/package/sluice.service"] {
        let systemd = secs(&read(path), "TimeoutStopSec", path);
        assert!(
            systemd > needed,
            "{path}: TimeoutStopSec {systemd} must exceed {needed}"
        );
    }
    for path in [
        "deploy/docker/Dockerfile",
        "deploy/docker/Dockerfile.binary",
    ] {
        let dockerfile = read(path);
        let user = dockerfile
            .lines()
            .find_map(|l| l.strip_prefix("USER "))
            .unwrap_or_else(|| panic!("{path} sets no USER"));
        assert!(
            user.split(':')
                .all(|id| id.trim().parse::<u32>().is_ok_and(|n| n > 0)),
            "{path}: USER must be numeric and not root, found `{user}`"
        );
        let docker = secs(&dockerfile, "--stop-timeout", path);
        assert!(
            docker > needed,
            "{path}: docker --stop-timeout {docker} must exceed {needed}"
        );
    }
}
