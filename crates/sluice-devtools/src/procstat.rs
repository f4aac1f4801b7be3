//! What the load clients read about the processes they measure: CPU time
//! (`/proc/PID/stat`) and resident set (`/proc/PID/status`), sampled at the
//! exact edges of a measurement window so that the caller need not race
//! the client for them.

use anyhow::{Context, Result};

/// The summed utime+stime of `pids`, in clock ticks.
pub(crate) fn cpu_ticks(pids: &[u32]) -> Result<u64> {
    let mut total = 0;
    for pid in pids {
        let path = format!("/proc/{pid}/stat");
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        // The command name (field 2) may hold spaces: count from after its `)`.
        let after = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest)
            .with_context(|| format!("no command name in {path}"))?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        for i in [11, 12] {
            let ticks: u64 = fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .with_context(|| format!("no utime/stime in {path}"))?;
            total += ticks;
        }
    }
    Ok(total)
}

/// The summed VmRSS of `pids`, in KiB.
pub(crate) fn rss_kb(pids: &[u32]) -> Result<u64> {
    let mut total = 0;
    for pid in pids {
        let path = format!("/proc/{pid}/status");
        let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no VmRSS in {path}"))?;
        total += kb;
    }
    Ok(total)
}

/// The `q` quantile (nearest rank) of sorted `values`, or 0 without any.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // Nearest rank: the smallest value with at least q of them at or below it.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
