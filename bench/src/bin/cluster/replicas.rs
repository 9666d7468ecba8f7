//! The replicas: one `csg serve` in cluster mode each, started, waited for, stopped, and its
//! CPU time read.

use super::http::call;
use super::postgres::{free_port, tail};
use super::{Options, REPLICA_START, STOP_GRACE};
use anyhow::{Context, Result, bail};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One `csg serve` in cluster mode: SIGTERM, then SIGKILL after [`STOP_GRACE`], when dropped.
pub(super) struct Replica {
    pub(super) number: usize,
    /// `127.0.0.1:PORT`.
    pub(super) authority: String,
    /// Its node URL, `http://127.0.0.1:PORT`.
    pub(super) url: String,
    pub(super) log: PathBuf,
    child: std::process::Child,
    /// Its CPU-time clock, when the kernel gives one out.
    clock: Option<libc::clockid_t>,
}

impl Replica {
    pub(super) fn start(
        options: &Options,
        number: usize,
        base: &Path,
        logs: &Path,
        database: &str,
        secret: &str,
    ) -> Result<Self> {
        let port = free_port()?;
        let authority = format!("127.0.0.1:{port}");
        let url = format!("http://{authority}");
        let data = base.join(format!("replica{number}"));
        std::fs::create_dir_all(&data)?;
        let log = logs.join(format!("replica{number}.log"));
        let out = std::fs::File::create(&log)?;
        let mut command = Command::new(&options.csg);
        command
            .arg("--data-dir")
            .arg(&data)
            .arg("serve")
            .args(["--listen", &authority, "--node-url", &url])
            .args(["--sync-interval", &options.sync_interval])
            // The URL and the secret through the environment: a flag would show them in the
            // process list.
            .env("CSG_DATABASE_URL", database)
            .env("CSG_CLUSTER_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: only prctl(2), which is async-signal-safe, runs between fork and exec. The
        // replica gets SIGTERM should this process die without cleaning up (this runs on the
        // runtime's main thread, which lives as long as the process).
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGTERM as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", options.csg.display()))?;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: writes only the out-parameter, which lives on this stack.
        let clock = (unsafe { libc::clock_getcpuclockid(child.id() as libc::pid_t, &mut clock) }
            == 0)
            .then_some(clock);
        Ok(Replica {
            number,
            authority,
            url,
            log,
            child,
            clock,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails, with the end of its log, if the process has exited.
    pub(super) fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "replica {} ({}) exited with {status}:\n{}",
                self.number,
                self.url,
                tail(&self.log, 30)
            );
        }
        Ok(())
    }

    pub(super) async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + REPLICA_START;
        let mut last = String::new();
        while Instant::now() < deadline {
            self.check_running()?;
            match call(&self.authority, "GET", "/readyz", &[], None).await {
                Ok(answer) if answer.status == 200 => return Ok(()),
                Ok(answer) => last = format!("HTTP {}: {}", answer.status, answer.text()),
                Err(error) => last = format!("{error:#}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "replica {} not ready within {REPLICA_START:?} (last /readyz: {last}):\n{}",
            self.number,
            tail(&self.log, 30)
        )
    }

    /// Its CPU time so far (every thread), µs.
    pub(super) fn cpu_us(&self) -> f64 {
        if let Some(clock) = self.clock {
            let mut now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes only `now`, which lives on this stack.
            if unsafe { libc::clock_gettime(clock, &mut now) } == 0 {
                return now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3;
            }
        }
        proc_cpu_us(self.pid()).unwrap_or(0.0)
    }

    pub(super) fn ask_to_stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child, which has not been reaped (try_wait said so).
            unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) };
        }
    }

    pub(super) fn stop(&mut self) {
        self.ask_to_stop();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "bench/cluster: replica {} did not stop within {STOP_GRACE:?} of SIGTERM; killing it",
            self.number
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop();
    }
}

/// utime + stime of `pid` from `/proc/<pid>/stat`, µs (clock-tick resolution): the fallback
/// when the CPU-time clock is unavailable.
fn proc_cpu_us(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc stat")?
        .1
        .split_whitespace()
        .collect();
    let field = |i: usize| -> Result<f64> {
        Ok(fields.get(i).context("short /proc stat")?.parse::<f64>()?)
    };
    // SAFETY: sysconf reads a constant of the C library.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick_us = 1e6 / if ticks > 0 { ticks as f64 } else { 100.0 };
    Ok((field(11)? + field(12)?) * tick_us)
}
