//! `perf record` attached to the server for the measured calls only.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `perf record` attached to the server for the measured calls only.
pub(super) struct Perf {
    child: std::process::Child,
}

impl Perf {
    pub(super) async fn start(out: &Path, call_graph: &str, pid: u32) -> Result<Self> {
        let child = Command::new("perf")
            .args(["record", "-F", "999", "--call-graph", call_graph, "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(out)
            .stdin(Stdio::null())
            .spawn()
            .context("cannot run perf: install Debian's linux-perf")?;
        // perf needs a moment to attach before the first measured call.
        tokio::time::sleep(Duration::from_secs(1)).await;
        eprintln!(
            "perf is recording the server (pid {pid}) into {}; CPU figures of this run include its overhead",
            out.display()
        );
        Ok(Perf { child })
    }

    pub(super) fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on the pid of our own child, which we have not waited for yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.child.wait()?;
        Ok(())
    }
}
