//! The server's memory and CPU, read from `/proc`.

use std::time::Duration;

/// VmRSS of `pid` in KiB; `None` when the process is gone (or a zombie).
/// A sample of the server's memory (KiB): resident, of it anonymous (heap) and file-backed
/// (mapped index files, the binary).
#[derive(Clone, Copy)]
pub(super) struct Memory {
    pub(super) at: Duration,
    pub(super) rss: u64,
    pub(super) anon: u64,
    pub(super) file: u64,
}

pub(super) fn memory(pid: i32, at: Duration) -> Option<Memory> {
    Some(Memory {
        at,
        rss: rss_kib(pid, "VmRSS:")?,
        anon: rss_kib(pid, "RssAnon:").unwrap_or(0),
        file: rss_kib(pid, "RssFile:").unwrap_or(0),
    })
}

/// utime + stime of a process (`self` or a pid) in seconds, from `/proc/<pid>/stat`.
pub(super) fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the C library; no pointers are involved.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(
        ticks as f64
            / if per_second > 0 {
                per_second as f64
            } else {
                100.0
            },
    )
}

pub(super) fn rss_kib(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    if status
        .lines()
        .any(|l| l.starts_with("State:") && l.contains('Z'))
    {
        return None;
    }
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
