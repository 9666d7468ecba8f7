//! CPU time of a process: its CPU-time clock, or utime+stime from `/proc/<pid>/stat`.

use anyhow::{Context, Result};

/// CPU time of one process.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    /// utime + stime of the process itself (all its threads, live and exited), in clock
    /// ticks from `/proc/<pid>/stat`: coarse, used to tell whether it is idle.
    pub own: u64,
    /// The same in µs from the process's CPU-time clock (`clock_getcpuclockid`, nanosecond
    /// resolution), or from the ticks where that clock is not available.
    pub own_us: f64,
    /// cutime + cstime: children it has waited for (git subprocesses), in µs.
    pub children_us: f64,
}

/// The CPU time of process `pid` (`0`: this one) in µs from its CPU-time clock.
fn cpu_clock_us(pid: libc::pid_t) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: both calls only write the out-parameters we pass, which live on this stack.
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0
            || libc::clock_gettime(clock, &mut now) != 0
        {
            return None;
        }
    }
    Some(now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3)
}

pub fn proc_cpu(pid: &str) -> Result<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat: is this Linux?"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc stat")?
        .1
        .split_whitespace()
        .collect();
    // After ')': fields[0] is field 3 (state); utime is field 14, stime 15, cutime 16, cstime 17.
    let field = |i: usize| -> Result<u64> {
        let v: i64 = fields
            .get(i)
            .context("short /proc stat")?
            .parse()
            .context("malformed /proc stat field")?;
        Ok(v.max(0) as u64)
    };
    let own = field(11)? + field(12)?;
    let tick = tick_us();
    let clock_pid = if pid == "self" {
        Some(0)
    } else {
        pid.parse().ok()
    };
    Ok(Cpu {
        own,
        own_us: clock_pid
            .and_then(cpu_clock_us)
            .unwrap_or(own as f64 * tick),
        children_us: (field(13)? + field(14)?) as f64 * tick,
    })
}

/// Microseconds per clock tick (`sysconf(_SC_CLK_TCK)`, 100 Hz on most Linux systems).
pub fn tick_us() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; no pointers are involved.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1e6 / if ticks > 0 { ticks as f64 } else { 100.0 }
}
