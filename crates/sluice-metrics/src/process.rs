//! The standard process metrics (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`,
//! `process_max_fds`), read at each scrape and appended to `/metrics`.
//!
//! They are read when Prometheus asks, as the official client libraries do,
//! rather than recorded through the `metrics` facade: its counters are
//! whole numbers, so CPU seconds would move in steps of one second (the
//! `metrics-process` crate truncates them so), and a gauge would put the
//! wrong type on a `_total` name. Reading them takes one `getrusage` and
//! `getrlimit` call, `/proc/self/status` and a listing of `/proc/self/fd`
//! (Linux, which is what Sluice runs on); a value that cannot be read is
//! left out of the scrape rather than shown as 0.

use std::fmt::Write;

use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage};

use crate::{catalog, names};

/// Appends the process metrics to `out`, in the Prometheus text format.
pub(crate) fn render(out: &mut String) {
    let values = [
        (names::PROCESS_CPU_SECONDS, cpu_seconds()),
        (names::PROCESS_RESIDENT_MEMORY, resident_bytes()),
        (names::PROCESS_OPEN_FDS, open_fds()),
        (names::PROCESS_MAX_FDS, max_fds()),
    ];
    for (name, value) in values {
        let (Some(value), Some(metric)) = (value, catalog::lookup(name)) else {
            continue;
        };
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "# HELP {name} {}\n# TYPE {name} {}\n{name} {value}\n\n",
            metric.help,
            metric.kind.as_str()
        );
    }
}

/// User plus system CPU time of every thread, in seconds (microsecond
/// resolution).
fn cpu_seconds() -> Option<f64> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(seconds(usage.user_time()) + seconds(usage.system_time()))
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_rss_bytes(&status).map(|b| b as f64)
}

fn vm_rss_bytes(status: &str) -> Option<u64> {
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// Entries of `/proc/self/fd`, less the one the listing itself holds open.
fn open_fds() -> Option<f64> {
    let listed = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(listed.saturating_sub(1) as f64)
}

/// The soft limit on open files.
fn max_fds() -> Option<f64> {
    let (soft, _hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    Some(soft as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\tsluice\nVmPeak:\t  20000 kB\nVmRSS:\t    7340 kB\nThreads:\t3\n";
        assert_eq!(vm_rss_bytes(status), Some(7340 * 1024));
        assert_eq!(vm_rss_bytes("Name:\tkthreadd\n"), None);
        assert_eq!(vm_rss_bytes("VmRSS:\tlots kB\n"), None);
    }

    /// Each metric has its HELP and TYPE lines and a plausible value for
    /// this test process.
    #[test]
    fn renders_the_process_metrics() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let mut text = String::new();
        render(&mut text);
        drop(file);
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} in {text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        for name in [
            names::PROCESS_CPU_SECONDS,
            names::PROCESS_RESIDENT_MEMORY,
            names::PROCESS_OPEN_FDS,
            names::PROCESS_MAX_FDS,
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{text}");
        }
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
        assert!(value(names::PROCESS_CPU_SECONDS) > 0.0);
        assert!(value(names::PROCESS_RESIDENT_MEMORY) > 1024.0 * 1024.0);
        // stdin, stdout, stderr and the file opened above at least.
        assert!(value(names::PROCESS_OPEN_FDS) >= 4.0, "{text}");
        assert!(value(names::PROCESS_MAX_FDS) >= value(names::PROCESS_OPEN_FDS));
    }
}
