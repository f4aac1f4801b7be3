//! A Sluice process started from a topology, for one test.
//!
//! The process runs the real `sluice` binary with its own config files in a
//! temporary directory, logs to a file there, and is killed when the handle is
//! dropped, so a failing test leaves nothing behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;
use wait_timeout::ChildExt;

use crate::wait;

/// A running Sluice process.
pub struct SluiceProcess {
    child: Option<Child>,
    dir: TempDir,
    /// Address of the Prometheus endpoint.
    pub(crate) metrics_addr: String,
}

impl SluiceProcess {
    /// Starts `binary` with `topology` (YAML text) and waits until every
    /// address in `wait_for` accepts TCP connections.
    pub fn start(binary: &Path, topology: &str, wait_for: &[&str]) -> Self {
        Self::start_with_flags(binary, topology, wait_for, &[])
    }

    /// Like [`start`](Self::start), with further command-line `flags`
    /// (e.g. `--leave-timeout-secs 4`).
    pub fn start_with_flags(
        binary: &Path,
        topology: &str,
        wait_for: &[&str],
        flags: &[&str],
    ) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sluice-it-")
            .tempdir()
            .expect("temp dir");
        let metrics_addr = format!("127.0.0.1:{}", crate::free_port());
        fs::write(dir.path().join("topology.yaml"), topology).expect("write topology");
        fs::write(
            dir.path().join("config.yaml"),
            format!(
                "main_log_level: \"info,sluice=debug\"\nobservability_interface: \"{metrics_addr}\"\n"
            ),
        )
        .expect("write config");
        let log = fs::File::create(dir.path().join("sluice.log")).expect("log file");
        let child = Command::new(binary)
            .arg("--topology-file")
            .arg(dir.path().join("topology.yaml"))
            .arg("--config-file")
            .arg(dir.path().join("config.yaml"))
            .arg("--drain-timeout-secs")
            .arg("20")
            .args(flags)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn sluice");
        let mut process = Self {
            child: Some(child),
            dir,
            metrics_addr,
        };
        for addr in wait_for {
            process.wait_listening(addr);
        }
        process
    }

    fn wait_listening(&mut self, addr: &str) {
        let what = format!("sluice to listen on {addr}");
        wait::until(Duration::from_secs(30), &what, || {
            if let Some(status) = self.try_status() {
                panic!("sluice exited early with {status}; log:\n{}", self.log());
            }
            std::net::TcpStream::connect(addr)
                .map(drop)
                .map_err(|e| e.to_string())
        });
    }

    fn try_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The log written so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Path of the log file.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.path().join("sluice.log")
    }

    /// Path of the config file it was started with (to change it before a
    /// SIGHUP).
    pub fn config_file(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    /// Path of the topology file it was started with.
    pub fn topology_file(&self) -> PathBuf {
        self.dir.path().join("topology.yaml")
    }

    /// Address of the observability endpoint (`host:port`).
    pub fn metrics_addr(&self) -> &str {
        &self.metrics_addr
    }

    /// Sends SIGTERM without waiting.
    pub fn send_sigterm(&self) {
        let child = self.child.as_ref().expect("sluice already stopped");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("send SIGTERM");
    }

    /// Waits (bounded) for the process to exit and returns its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("sluice already stopped");
        match child.wait_timeout(timeout).expect("wait for sluice") {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "sluice did not exit within {timeout:?}; log:\n{}",
                    self.log()
                );
            }
        }
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.send_sigterm();
        self.wait_exit(timeout)
    }

    /// Sends SIGHUP: Sluice reads its log level and TLS files again.
    pub fn send_sighup(&self) {
        let child = self.child.as_ref().expect("sluice already stopped");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGHUP).expect("send SIGHUP");
    }

    /// Kills the process at once (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The resident set size of the process in bytes (`VmRSS` in
    /// `/proc/<pid>/status`), while it runs.
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(kib * 1024)
    }

    /// Scrapes `/metrics` and returns the text.
    pub fn metrics(&self) -> String {
        http_get(&self.metrics_addr, "/metrics")
    }

    /// GETs `path` (`/health`, `/ready`) of the observability endpoint:
    /// the status code and the body.
    pub fn http(&self, path: &str) -> (u16, String) {
        let response = http_response(&self.metrics_addr, path);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response to {path}: {response:?}"));
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// Sum of every sample of `name` whose labels contain all of `labels`
    /// (e.g. `&["api=\"Produce\""]`).
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        sum_metric(&self.metrics(), name, labels)
    }
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("---- sluice log ----\n{}\n---- end ----", self.log());
        }
    }
}

/// Sums the samples of `name` in Prometheus text whose label sets contain all `labels`.
pub fn sum_metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            (metric == name && labels.iter().all(|want| label_text.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

fn http_get(addr: &str, path: &str) -> String {
    let response = http_response(addr, path);
    response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(response)
}

/// The whole HTTP/1.0 response to `GET path`.
fn http_response(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the observability endpoint");
    response
}
