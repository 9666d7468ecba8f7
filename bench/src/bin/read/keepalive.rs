//! A client of `csg serve` on one keep-alive HTTP/1.1 connection, for MCP (either protocol
//! era) or the JSON API.

use super::REPO;
use anyhow::{Context, Result, bail};
use bench::TextFile as File;
use std::time::{Duration, Instant};

/// Which face a [`KeepAliveClient`] reads through.
#[derive(Clone, Copy)]
pub(super) enum Face {
    /// MCP `tools/call` on the Streamable HTTP endpoint, statelessly.
    Mcp(ProtocolEra),
    /// `POST /sourcegraph/api/read`.
    Api,
}

/// The MCP revision a stateless request declares.
#[derive(Clone, Copy)]
pub(super) enum ProtocolEra {
    /// 2025-11-25: the `MCP-Protocol-Version` header alone (after an `initialize` elsewhere).
    Legacy,
    /// 2026-07-28: the header, `_meta` and the SEP-2243 `Mcp-Method`/`Mcp-Name` headers.
    Next,
}

/// A client of `csg serve` on one keep-alive HTTP/1.1 connection, as HTTP clients keep them
/// (hand-written: what it sends is exactly what is measured, and the benchmark needs no HTTP
/// client crate). rmcp's own client opens a connection per call, which the server pays for.
pub(super) struct KeepAliveClient {
    conn: bench::KeepAlive,
    authority: String,
    /// The MCP endpoint's path and query (`/sourcegraph/mcp?plugins=auto`).
    mcp_path: String,
    face: Face,
    next_id: u64,
}

impl KeepAliveClient {
    /// Connects to the host of `mcp_url` (`http://HOST:PORT/sourcegraph/mcp…`).
    pub(super) async fn connect(mcp_url: &str, face: Face) -> Result<Self> {
        let (authority, path) = mcp_url
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('/'))
            .with_context(|| format!("unexpected endpoint `{mcp_url}`"))?;
        Ok(Self {
            conn: bench::KeepAlive::connect(authority).await?,
            authority: authority.to_string(),
            mcp_path: format!("/{path}"),
            face,
            next_id: 1,
        })
    }

    /// One `POST path` with a JSON body and `headers`; answers the status and the body.
    async fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<(u16, Vec<u8>)> {
        use std::fmt::Write as _;
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.authority,
            body.len()
        );
        for (name, value) in headers {
            let _ = write!(request, "{name}: {value}\r\n");
        }
        request.push_str("\r\n");
        request.push_str(body);
        let answer = self.conn.exchange(request.as_bytes()).await?;
        Ok((answer.status, answer.body))
    }

    /// A whole-file read of `file`, checked.
    async fn read(&mut self, file: &File) -> Result<()> {
        let arguments = serde_json::json!({
            "repo": REPO, "path": file.path, "start_line": 1, "end_line": file.lines,
        });
        let (status, answer) = match self.face {
            Face::Api => {
                self.post("/sourcegraph/api/read", &[], &arguments.to_string())
                    .await?
            }
            Face::Mcp(era) => {
                let id = self.next_id;
                self.next_id += 1;
                let mut params = serde_json::json!({"name": "read", "arguments": arguments});
                let mut headers = vec![("Accept", "application/json, text/event-stream")];
                match era {
                    ProtocolEra::Legacy => headers.push(("MCP-Protocol-Version", "2025-11-25")),
                    ProtocolEra::Next => {
                        params["_meta"] = serde_json::json!({
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                        });
                        headers.extend([
                            ("MCP-Protocol-Version", "2026-07-28"),
                            ("Mcp-Method", "tools/call"),
                            ("Mcp-Name", "read"),
                        ]);
                    }
                }
                let body = serde_json::json!({
                    "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params,
                })
                .to_string();
                let path = self.mcp_path.clone();
                self.post(&path, &headers, &body).await?
            }
        };
        let answer: serde_json::Value = serde_json::from_slice(&answer)
            .with_context(|| format!("HTTP {status}: the answer is not JSON"))?;
        let (body_bytes, has_more) = match self.face {
            Face::Api => (
                answer["content"].as_str().map(|c| c.len() as u64),
                answer["has_more"].as_bool(),
            ),
            Face::Mcp(_) => {
                let text = answer["result"]["content"][0]["text"].as_str();
                let header = |name: &str| {
                    text.and_then(|t| {
                        t.lines()
                            .take_while(|l| !l.is_empty())
                            .find_map(|l| l.strip_prefix(name))
                            .map(str::to_string)
                    })
                };
                (
                    header("BodyBytes: ").and_then(|v| v.parse().ok()),
                    header("HasMore: ").map(|v| v == "true"),
                )
            }
        };
        if status != 200 || body_bytes != Some(file.bytes) || has_more != Some(false) {
            bail!(
                "a whole-file read of {} answered HTTP {status}: {}",
                file.path,
                answer.to_string().chars().take(500).collect::<String>()
            );
        }
        Ok(())
    }

    /// Whole-file reads of `files`, one after the other, each checked; answers the latencies.
    pub(super) async fn reads(&mut self, files: &[File]) -> Result<Vec<Duration>> {
        let mut latencies = Vec::with_capacity(files.len());
        for file in files {
            let t = Instant::now();
            self.read(file).await?;
            latencies.push(t.elapsed());
        }
        Ok(latencies)
    }
}
