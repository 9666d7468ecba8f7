//! What a process uses, from Linux's `/proc`: its resident memory, now and at its peak, and
//! its CPU time. Tests bound what a flood or a huge input holds with these; benchmarks watch a
//! server they started.

/// A size field of `/proc/<pid>/status` (`"VmRSS"`, `"VmHWM"`, `"RssAnon"`, …) in bytes;
/// `None` where the process or the field is not there.
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// This process's resident set (`VmRSS`), in bytes.
pub fn rss() -> u64 {
    status_bytes(std::process::id(), "VmRSS").expect("VmRSS in /proc/self/status")
}

/// This process's peak resident set (`VmHWM`) since it started or its last [`reset_peak`],
/// in bytes.
pub fn peak() -> u64 {
    status_bytes(std::process::id(), "VmHWM").expect("VmHWM in /proc/self/status")
}

/// Resets this process's peak resident set to its resident set now; false where the kernel
/// does not allow it.
pub fn reset_peak() -> bool {
    reset_peak_of(std::process::id())
}

/// Resets `pid`'s peak resident set (`VmHWM`) to its resident set now (`clear_refs` value 5);
/// false where the kernel does not allow it.
pub fn reset_peak_of(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// `work`'s result and how far this process's peak resident set rose above its resident set
/// when `work` started, in bytes. Panics where the peak cannot be reset (the figure would be
/// the process's whole past).
pub fn peak_growth<T>(work: impl FnOnce() -> T) -> (T, u64) {
    assert!(reset_peak(), "reset the peak resident set");
    let before = rss();
    let value = work();
    (value, peak().saturating_sub(before))
}

/// CPU-seconds (user and system) `pid` has used, from `/proc/<pid>/stat`; `None` where the
/// process is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // `/proc` counts in USER_HZ, which Linux fixes at 100 for user space.
    Some(ticks as f64 / 100.0)
}
