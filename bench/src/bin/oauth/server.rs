//! The `csg serve` child: its data directory (a user and an API token made with the `csg`
//! commands), started with the identity provider, waited for, stopped; and its CPU time.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The user the static API token belongs to.
const USER: &str = "bench";

/// `csg --data-dir DATA ARGS`, run to the end; its stdout.
fn csg(csg: &Path, data: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(csg)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", csg.display()))?;
    if !out.status.success() {
        bail!(
            "csg {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `csg user add bench` and `csg token create bench`: the static API token it prints.
pub(super) fn static_token(csg_path: &Path, data: &Path) -> Result<String> {
    csg(csg_path, data, &["user", "add", USER])?;
    let printed = csg(
        csg_path,
        data,
        &["token", "create", USER, "--name", "bench-oauth"],
    )?;
    printed
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("csg_"))
        .map(str::to_owned)
        .with_context(|| format!("`csg token create` printed no csg_… token: {printed:?}"))
}

/// A free loopback port: `--public-url` must name it before the server binds it.
pub(super) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A running `csg serve`.
pub(super) struct Server {
    child: tokio::process::Child,
    pub(super) pid: u32,
    /// `127.0.0.1:PORT`.
    pub(super) authority: String,
}

/// How `csg serve` is started.
pub(super) struct Launch<'a> {
    pub(super) csg: &'a Path,
    pub(super) data: &'a Path,
    pub(super) port: u16,
    pub(super) issuer: &'a str,
    /// `NAME=PATH` of the repository read.
    pub(super) repo: &'a str,
    pub(super) log: PathBuf,
}

impl Server {
    /// Starts `csg serve` with the identity provider and waits until it is ready: its
    /// endpoint printed, `/readyz` 200, then no CPU used for three 200 ms intervals in a
    /// row (the first maintenance round, which syncs and indexes the repository, is over).
    pub(super) async fn start(launch: &Launch<'_>) -> Result<Self> {
        let authority = format!("127.0.0.1:{}", launch.port);
        let mut command = tokio::process::Command::new(launch.csg);
        command
            .arg("--data-dir")
            .arg(launch.data)
            .arg("serve")
            .args(["--listen", &authority])
            .args(["--public-url", &format!("http://{authority}")])
            .args(["--oauth-issuer", launch.issuer])
            .args(["--repo", launch.repo])
            .args(["--sync-interval", "1h"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&launch.log)?)
            .kill_on_drop(true);
        // SAFETY: prctl(2) only, between fork and exec. The child is spawned from the thread
        // that runs the benchmark to its end (a current-thread runtime), so it is killed when
        // this process ends, also by a signal; kill_on_drop covers every error return.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", launch.csg.display()))?;
        let pid = child.id().context("the child has a pid")?;
        let stdout = child.stdout.take().context("stdout")?;
        bench::mcp_endpoint(stdout, Duration::from_secs(120), &launch.log).await?;
        let server = Server {
            child,
            pid,
            authority,
        };
        server.ready(&launch.log).await?;
        server.settle().await?;
        Ok(server)
    }

    async fn ready(&self, log: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let request = format!(
            "GET /readyz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.authority
        );
        loop {
            let mut conn = bench::KeepAlive::connect(&self.authority).await?;
            if conn.exchange(request.as_bytes()).await?.status == 200 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "csg serve was not ready within 120 s; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn settle(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let (mut last, mut quiet) = (self.cpu()?.ticks, 0);
        while quiet < 3 {
            if Instant::now() > deadline {
                eprintln!("warning: the server did not go idle within 120 s; measuring anyway");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = self.cpu()?.ticks;
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
        Ok(())
    }

    /// The server's CPU time now.
    pub(super) fn cpu(&self) -> Result<Cpu> {
        Cpu::of(self.pid)
    }

    /// SIGTERM, and the exit within 20 s (else SIGKILL).
    pub(super) async fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on the pid of our own child, which we have not waited for yet.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}

/// CPU time of a process (all its threads, live and exited).
#[derive(Debug, Clone, Copy)]
pub(super) struct Cpu {
    /// utime + stime from `/proc/<pid>/stat`, in clock ticks.
    pub(super) ticks: u64,
    /// The process's CPU-time clock (`clock_getcpuclockid`), µs at ns resolution.
    pub(super) clock_us: f64,
}

impl Cpu {
    fn of(pid: u32) -> Result<Self> {
        let cpu = bench::cpu::proc_cpu(&pid.to_string())?;
        Ok(Self {
            ticks: cpu.own,
            clock_us: cpu.own_us,
        })
    }
}
