//! A `csg` child process (`csg mcp` or `csg serve`): started, connected to, stopped.

use super::{Options, REPO};
use anyhow::{Context, Result};
use bench::cpu::proc_cpu;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `csg` child process.
pub(super) struct Server {
    child: tokio::process::Child,
    pub(super) pid: u32,
    /// The MCP client session: the measured one for stdio, a readiness-check one for HTTP.
    pub(super) client: RunningService<RoleClient, ()>,
    /// The MCP endpoint (HTTP only).
    pub(super) url: Option<String>,
}

fn csg_command(
    options: &Options,
    data: &Path,
    source: &Path,
    subcommand: &str,
    extra: &[String],
    log: &Path,
) -> Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(&options.csg);
    command
        .arg("--data-dir")
        .arg(data)
        .arg(subcommand)
        .arg("--repo")
        .arg(format!("{REPO}={}", source.display()))
        .args(["--sync-interval", "1h"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .kill_on_drop(true);
    Ok(command)
}

impl Server {
    /// `csg mcp` as a child, with an rmcp client session over its stdin/stdout (the same
    /// framing rmcp's `TokioChildProcess` uses, without the process-wrap dependency).
    pub(super) async fn stdio(
        options: &Options,
        data: &Path,
        source: &Path,
        extra: &[String],
        log: &Path,
    ) -> Result<Self> {
        let mut child = csg_command(options, data, source, "mcp", extra, log)?
            .spawn()
            .with_context(|| format!("cannot start {}", options.csg.display()))?;
        let pid = child.id().context("the child has a pid")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let client = tokio::time::timeout(Duration::from_secs(600), ().serve((stdout, stdin)))
            .await
            .context("csg mcp did not answer the MCP handshake within 10 minutes")?
            .with_context(|| format!("csg mcp did not start; see its log {}", log.display()))?;
        let server = Server {
            child,
            pid,
            client,
            url: None,
        };
        server.settle().await?;
        Ok(server)
    }

    /// `csg serve --listen 127.0.0.1:0` as a child; its endpoint from the start-up banner.
    pub(super) async fn http(
        options: &Options,
        data: &Path,
        source: &Path,
        log: &Path,
    ) -> Result<Self> {
        let extra = ["--listen".to_string(), "127.0.0.1:0".to_string()];
        let mut child = csg_command(options, data, source, "serve", &extra, log)?
            .spawn()
            .with_context(|| format!("cannot start {}", options.csg.display()))?;
        let pid = child.id().context("the child has a pid")?;
        let stdout = child.stdout.take().context("stdout")?;
        let url = bench::mcp_endpoint(stdout, Duration::from_secs(600), log).await?;
        // A session for the readiness checks only.
        let client = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await?;
        let server = Server {
            child,
            pid,
            client,
            url: Some(url),
        };
        server.settle().await?;
        Ok(server)
    }

    /// Waits until the first maintenance round is over (the index check and plugin
    /// preparation): discovery says the head is indexed and the process has used no CPU for
    /// three 200 ms intervals in a row.
    async fn settle(&self) -> Result<()> {
        let result = self
            .client
            .peer()
            .call_tool(CallToolRequestParams::new("discovery"))
            .await?;
        let text = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default();
        if !text.contains("Indexed: true") {
            eprintln!("warning: the server does not report the corpus indexed:\n{text}");
        }
        let pid = self.pid.to_string();
        let deadline = Instant::now() + Duration::from_secs(120);
        let (mut last, mut quiet) = (proc_cpu(&pid)?.own, 0);
        while quiet < 3 {
            if Instant::now() > deadline {
                eprintln!("warning: the server did not go idle within 120 s; measuring anyway");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = proc_cpu(&pid)?.own;
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
        Ok(())
    }

    /// Ends the session (stdin EOF for stdio, SIGTERM for serve) and waits for the exit.
    pub(super) async fn stop(mut self) -> Result<()> {
        let http = self.url.is_some();
        self.client.cancel().await?;
        if http {
            // SAFETY: kill(2) on the pid of our own child, which we have not waited for yet.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        }
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}
