//! HTTP on loopback, hand-written so that what is sent is exactly what is measured: one
//! answer, keep-alive connections, the JSON API and MCP read requests and their checks.

use super::{CALL_TIMEOUT, MCP_PATH, REPO};
use anyhow::{Context, Result, anyhow, bail};
use bench::TextFile as File;
use serde_json::Value;

/// One answer: status, content type, body.
pub(super) struct Answer {
    pub(super) status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(super) fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body)
            .with_context(|| format!("HTTP {}: the answer is not JSON", self.status))
    }
}

/// A keep-alive connection whose calls are bounded by CALL_TIMEOUT.
pub(super) struct Conn(bench::KeepAlive);

impl Conn {
    pub(super) async fn connect(authority: &str) -> Result<Self> {
        tokio::time::timeout(CALL_TIMEOUT, bench::KeepAlive::connect(authority))
            .await
            .map_err(|_| anyhow!("connecting to {authority} took over {CALL_TIMEOUT:?}"))?
            .map(Conn)
    }

    /// Sends `request` (a whole HTTP/1.1 request) and reads the answer, within CALL_TIMEOUT.
    pub(super) async fn exchange(&mut self, request: &[u8]) -> Result<Answer> {
        let answer = tokio::time::timeout(CALL_TIMEOUT, self.0.exchange(request))
            .await
            .map_err(|_| anyhow!("no answer within {CALL_TIMEOUT:?}"))??;
        Ok(Answer {
            status: answer.status,
            content_type: answer.content_type,
            body: answer.body,
        })
    }
}

/// A whole HTTP/1.1 request.
pub(super) fn request(
    method: &str,
    authority: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Vec<u8> {
    let mut text = format!("{method} {target} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    text.push_str("\r\n");
    if let Some(body) = body {
        text.push_str(body);
    }
    text.into_bytes()
}

/// One request on a connection of its own (probes).
pub(super) async fn call(
    authority: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Result<Answer> {
    let mut conn = Conn::connect(authority).await?;
    let mut all = headers.to_vec();
    all.push(("Connection", "close"));
    conn.exchange(&request(method, authority, target, &all, body))
        .await
}

/// `text` for a query string: unreserved characters and `/` as they are, the rest
/// percent-encoded.
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub(super) fn api_request(authority: &str, file: &File) -> Vec<u8> {
    let target = format!(
        "/sourcegraph/api/read?repo={}&path={}&start_line=1&end_line={}",
        query_value(REPO),
        query_value(&file.path),
        file.lines
    );
    request("GET", authority, &target, &[], None)
}

pub(super) fn mcp_request(authority: &str, file: &File, id: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read", "arguments": {
            "repo": REPO, "path": file.path, "start_line": 1, "end_line": file.lines,
        }},
    })
    .to_string();
    request(
        "POST",
        authority,
        MCP_PATH,
        &[
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        Some(&body),
    )
}

/// Which face a row reads through.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Face {
    /// `GET /sourcegraph/api/read`.
    Api,
    /// MCP `tools/call read`.
    Mcp,
    /// `GET /healthz`: no read at all.
    Healthz,
}

/// Checks that `answer` is a whole-file read of `file` (or a healthy `/healthz`).
pub(super) fn check(face: Face, answer: &Answer, file: &File) -> Result<()> {
    let short = || answer.text().chars().take(400).collect::<String>();
    if answer.status != 200 {
        bail!("HTTP {}: {}", answer.status, short());
    }
    let (body_bytes, has_more) = match face {
        Face::Healthz => return Ok(()),
        Face::Api => {
            let json = answer.json()?;
            (
                json["content"].as_str().map(|c| c.len() as u64),
                json["has_more"].as_bool(),
            )
        }
        Face::Mcp => {
            let json = if answer.content_type.starts_with("text/event-stream") {
                let text = answer.text();
                let data = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .rfind(|d| !d.is_empty())
                    .context("an event stream without data")?
                    .to_string();
                serde_json::from_str::<Value>(&data)?
            } else {
                answer.json()?
            };
            if json["result"]["isError"] == true {
                bail!("the read failed: {}", short());
            }
            let text = json["result"]["content"][0]["text"].as_str().unwrap_or("");
            let header = |name: &str| {
                text.lines()
                    .take_while(|l| !l.is_empty())
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::to_string)
            };
            (
                header("BodyBytes: ").and_then(|v| v.parse().ok()),
                header("HasMore: ").map(|v| v == "true"),
            )
        }
    };
    if body_bytes != Some(file.bytes) || has_more != Some(false) {
        bail!(
            "a whole-file read of {} ({} bytes) answered {body_bytes:?} bytes, has_more {has_more:?}: {}",
            file.path,
            file.bytes,
            short()
        );
    }
    Ok(())
}
