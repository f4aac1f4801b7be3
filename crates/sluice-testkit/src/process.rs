//! Running a client or tool process with a bounded wait, and what it
//! printed.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

/// Output of a client process.
#[derive(Debug)]
pub struct ClientOutput {
    /// Exit code (None if killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl ClientOutput {
    /// Panics with both streams unless the process succeeded.
    pub fn assert_success(&self, what: &str) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Standard output followed by standard error, for messages and searches.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `command` with optional stdin, killing it after `timeout`.
pub fn run(
    mut command: Command,
    stdin: Option<&str>,
    timeout: Duration,
    what: &str,
) -> ClientOutput {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what} ({:?}): {e}", command.get_program()));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    // Drain the pipes on threads so a chatty client cannot block on a full pipe.
    let out = child.stdout.take().expect("stdout pipe");
    let err = child.stderr.take().expect("stderr pipe");
    let out = std::thread::spawn(move || read_all(out));
    let err = std::thread::spawn(move || read_all(err));
    let status = match child.wait_timeout(timeout).expect("wait for client") {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let (stdout, stderr) = (
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            );
            panic!(
                "{what} did not finish within {timeout:?}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            );
        }
    };
    ClientOutput {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

fn read_all(mut r: impl std::io::Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}
