//! Child processes: a guard that kills them, `csg` commands on the data directory, and the
//! small repository served by `git daemon`.

use super::Options;
use anyhow::{Context, Result, bail};
use bench::git;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (with its process group when it has one of its own) when dropped:
/// at the end, on error and on panic.
pub(super) struct Guard {
    name: &'static str,
    child: Option<tokio::process::Child>,
    pub(super) pid: i32,
    own_group: bool,
}

impl Guard {
    pub(super) fn new(
        name: &'static str,
        child: tokio::process::Child,
        own_group: bool,
    ) -> Result<Self> {
        let pid = child.id().context("the child has a pid")? as i32;
        Ok(Guard {
            name,
            child: Some(child),
            pid,
            own_group,
        })
    }

    fn signal(&self, signal: i32) {
        let target = if self.own_group { -self.pid } else { self.pid };
        // SAFETY: kill(2) on our own child (or its group), not yet reaped while `child` is held.
        unsafe { libc::kill(target, signal) };
    }

    /// SIGTERM, then SIGKILL after `grace`; answers how it ended and how long it took.
    pub(super) async fn stop(&mut self, grace: Duration) -> String {
        let Some(mut child) = self.child.take() else {
            return "already stopped".into();
        };
        if let Ok(Some(status)) = child.try_wait() {
            return format!("had already exited ({status})");
        }
        let started = Instant::now();
        self.signal(libc::SIGTERM);
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(Ok(status)) => format!(
                "stopped by SIGTERM in {:.1} s ({status})",
                started.elapsed().as_secs_f64()
            ),
            _ => {
                self.signal(libc::SIGKILL);
                let _ = child.wait().await;
                format!("did not stop within {grace:?} of SIGTERM: killed")
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                eprintln!("soak: killing {} (pid {})", self.name, self.pid);
                self.signal(libc::SIGKILL);
            }
            let _ = child.start_kill();
        }
    }
}

/// Asks the kernel to kill the child when this thread (the main one, which runs the run)
/// ends, so a killed benchmark leaves no server behind.
pub(super) fn die_with_parent(command: &mut tokio::process::Command) {
    // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

pub(super) fn csg_cli(options: &Options, data: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(&options.csg)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", options.csg.display()))?;
    if !out.status.success() {
        bail!(
            "csg {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A free port on 127.0.0.1 (closed again: `git daemon` binds it a moment later).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The small repository (`small.git` under `root`) and `git daemon` serving it read-only.
pub(super) async fn small_repo_daemon(tmp: &Path) -> Result<(Guard, String)> {
    let work = tmp.join("small-work");
    std::fs::create_dir_all(work.join("src"))?;
    std::fs::write(
        work.join("README.md"),
        "# Small\n\nRegistered and removed by bench/soak.\n",
    )?;
    std::fs::write(
        work.join("src/lib.rs"),
        "/// The answer.\npub fn answer() -> u32 {\n    42\n}\n",
    )?;
    git(&work, &["init", "-q", "-b", "main"])?;
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "small"])?;
    let root = tmp.join("daemon-root");
    std::fs::create_dir_all(&root)?;
    git(
        tmp,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().context("UTF-8 path")?,
            root.join("small.git").to_str().context("UTF-8 path")?,
        ],
    )?;
    let port = free_port()?;
    // `git-daemon` itself, not the `git` wrapper (which would leave it behind when killed).
    let exec_path = git(tmp, &["--exec-path"])?;
    let mut command = tokio::process::Command::new(Path::new(&exec_path).join("git-daemon"));
    command
        .arg("--reuseaddr")
        .arg("--export-all")
        .arg("--listen=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", root.display()))
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.join("git-daemon.log"))?)
        .process_group(0)
        .kill_on_drop(true);
    die_with_parent(&mut command);
    let guard = Guard::new("git daemon", command.spawn()?, true)?;
    let url = format!("git://127.0.0.1:{port}/small.git");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
            && git(tmp, &["ls-remote", &url]).is_ok()
        {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "git daemon did not serve {url} within 20 s; see {}",
                tmp.join("git-daemon.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((guard, url))
}
