//! PostgreSQL (`scripts/postgres.sh` in the temp directory) and the admin command that
//! registers the repository in it; with what starting the run's processes takes: a free
//! loopback port, a secret, the end of a log.

use super::{REGISTER_TIMEOUT, REPO};
use anyhow::{Context, Result, anyhow, bail};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A PostgreSQL cluster of `scripts/postgres.sh` in `dir`, stopped when dropped (stopping one
/// that never started is a no-op). Its URL carries a password: it is never printed.
pub(super) struct Postgres {
    pub(super) script: PathBuf,
    pub(super) dir: PathBuf,
}

impl Postgres {
    /// Starts the server on a free loopback port (another one if that port was taken
    /// meanwhile); answers its URL.
    pub(super) async fn start(&self) -> Result<String> {
        for attempt in 1..=3 {
            let port = free_port()?;
            let out = tokio::process::Command::new(&self.script)
                .arg("start")
                .arg(&self.dir)
                .arg(port.to_string())
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output()
                .await
                .with_context(|| format!("cannot run {}", self.script.display()))?;
            if out.status.success() {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let url = stdout.lines().last().unwrap_or("").trim().to_string();
                if !url.starts_with("postgres://") {
                    bail!("scripts/postgres.sh start printed no postgres:// URL as its last line");
                }
                return Ok(url);
            }
            let log = tail(&self.dir.join("server.log"), 10);
            if !log.contains("already in use") || attempt == 3 {
                bail!(
                    "scripts/postgres.sh start failed: {}\nserver.log:\n{log}\n(PostgreSQL missing? run scripts/postgres.sh install)",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        unreachable!("the last attempt returns")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        match Command::new(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "bench/cluster: stopping PostgreSQL failed: {}; stop it with `scripts/postgres.sh stop {}`",
                String::from_utf8_lossy(&out.stderr).trim(),
                self.dir.display()
            ),
            Err(error) => eprintln!("bench/cluster: cannot run scripts/postgres.sh stop: {error}"),
        }
    }
}

/// The commit the source's `HEAD` names: what every replica serves.
pub(super) fn source_head(source: &Path) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(source)
        .args(["rev-parse", "HEAD"])
        .output()?;
    if !out.status.success() {
        bail!(
            "git rev-parse HEAD in {} failed: {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `csg --data-dir ADMIN repo add --no-wait REPO SOURCE` against the shared database: the
/// registration is recorded, the owner replicas fetch it.
pub(super) async fn register(
    csg: &Path,
    admin: &Path,
    database: &str,
    source: &Path,
) -> Result<()> {
    let command = tokio::process::Command::new(csg)
        .arg("--data-dir")
        .arg(admin)
        // Recorded only: the replicas, started next, fetch it (the owners), so nothing waits
        // for an owner that does not run yet.
        .args(["repo", "add", "--no-wait", REPO])
        .arg(source)
        // From the environment, never a flag: the URL's password stays out of the process list.
        .env("CSG_DATABASE_URL", database)
        .env_remove("CSG_NODE_URL")
        .env_remove("CSG_CLUSTER_SECRET")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(REGISTER_TIMEOUT, command)
        .await
        .map_err(|_| anyhow!("csg repo add did not finish within {REGISTER_TIMEOUT:?}"))??;
    if !out.status.success() {
        bail!(
            "csg repo add failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub(super) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub(super) fn random_hex(bytes: usize) -> Result<String> {
    let mut raw = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// The last `lines` log records of `path` (lines starting with a timestamp: the start-up
/// banner's client configurations are left out).
pub(super) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("20") || l.starts_with("csg:"))
                .collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("({}: {error})", path.display()),
    }
}
