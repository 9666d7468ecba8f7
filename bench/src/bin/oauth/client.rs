//! `GET /sourcegraph/api/read` on one keep-alive HTTP/1.1 connection, as one caller.

use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

/// One caller of the JSON API's `read`: its request, prepared once, on its own connection.
pub(super) struct Caller {
    conn: bench::KeepAlive,
    authority: String,
    request: Vec<u8>,
    /// The body length of its answer, from [`Caller::check`]: every measured answer must
    /// have it.
    body_len: Option<usize>,
}

impl Caller {
    /// A caller of `authority` (`127.0.0.1:PORT`) reading `path` of `repo`, presenting
    /// `token` (`None`: anonymous).
    pub(super) async fn connect(
        authority: &str,
        repo: &str,
        path: &str,
        token: Option<&str>,
    ) -> Result<Self> {
        let mut request = format!(
            "GET /sourcegraph/api/read?repo={repo}&path={path} HTTP/1.1\r\nHost: {authority}\r\n"
        );
        if let Some(token) = token {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        request.push_str("\r\n");
        Ok(Self {
            conn: bench::KeepAlive::connect(authority).await?,
            authority: authority.to_owned(),
            request: request.into_bytes(),
            body_len: None,
        })
    }

    /// A new connection (each round gets one: no connection sits idle through the other
    /// modes' rounds long enough to meet an idle timeout), with one untimed call on it.
    pub(super) async fn reconnect(&mut self) -> Result<()> {
        self.conn = bench::KeepAlive::connect(&self.authority).await?;
        self.calls(1).await?;
        Ok(())
    }

    /// One call: the status and the body.
    pub(super) async fn call(&mut self) -> Result<(u16, Vec<u8>)> {
        let answer = self.conn.exchange(&self.request).await?;
        Ok((answer.status, answer.body))
    }

    /// One call that must answer 200 with `content` as the file's text; retried on 503
    /// within `within` (the identity provider's keys are fetched in the background at
    /// start: its tokens are "try again" until then).
    pub(super) async fn check(&mut self, content: &str, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let (status, body) = self.call().await?;
            if status == 503 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            let text = String::from_utf8_lossy(&body);
            let answer: serde_json::Value = serde_json::from_slice(&body)
                .with_context(|| format!("HTTP {status}, not JSON: {text}"))?;
            if status != 200 || answer["content"].as_str() != Some(content) {
                bail!("the read answered HTTP {status}: {text}");
            }
            self.body_len = Some(body.len());
            return Ok(());
        }
    }

    /// `calls` calls one after the other, each answering 200 with the checked body length;
    /// their latencies.
    pub(super) async fn calls(&mut self, calls: usize) -> Result<Vec<Duration>> {
        let expected = self
            .body_len
            .context("a caller is checked before it is timed")?;
        let mut latencies = Vec::with_capacity(calls);
        for _ in 0..calls {
            let started = Instant::now();
            let (status, body) = self.call().await?;
            latencies.push(started.elapsed());
            if status != 200 || body.len() != expected {
                bail!(
                    "a read answered HTTP {status} with {} bytes, not 200 with {expected}: {}",
                    body.len(),
                    String::from_utf8_lossy(&body)
                );
            }
        }
        Ok(latencies)
    }
}
