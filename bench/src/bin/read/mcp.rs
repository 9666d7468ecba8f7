//! MCP `read` calls through rmcp's client, several in flight, each answer checked.

use super::REPO;
use anyhow::{Context, Result, bail};
use bench::TextFile as File;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::Peer;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The MCP `read` arguments for a whole file.
fn whole_file(file: &File) -> CallToolRequestParams {
    read_call(&file.path, 1, file.lines)
}

pub(super) fn read_call(path: &str, start: u64, end: u64) -> CallToolRequestParams {
    let args = serde_json::json!({
        "repo": REPO, "path": path, "start_line": start, "end_line": end,
    });
    let serde_json::Value::Object(map) = args else {
        unreachable!("a JSON object literal")
    };
    CallToolRequestParams::new("read").with_arguments(map)
}

/// The header lines of a read block that the benchmark checks.
pub(super) struct Block {
    pub(super) body_bytes: u64,
    pub(super) has_more: bool,
    pub(super) next_start_line: Option<u64>,
}

pub(super) fn parse_block(result: &CallToolResult) -> Result<Block> {
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .context("a read answered no text block")?;
    if result.is_error == Some(true) {
        bail!(
            "read failed: {}",
            text.chars().take(500).collect::<String>()
        );
    }
    let mut block = Block {
        body_bytes: 0,
        has_more: false,
        next_start_line: None,
    };
    for line in text.lines().take_while(|l| !l.is_empty()) {
        match line.split_once(": ") {
            Some(("BodyBytes", v)) => block.body_bytes = v.parse()?,
            Some(("HasMore", v)) => block.has_more = v == "true",
            Some(("NextStartLine", v)) => block.next_start_line = Some(v.parse()?),
            _ => {}
        }
    }
    Ok(block)
}

/// Whole-file reads of `files` over `peers`, each peer taking the next file when its last call
/// returned (one peer = sequential; the same peer several times = calls in flight on one
/// connection). Answers the latencies.
pub(super) async fn run_calls(
    peers: Vec<Peer<RoleClient>>,
    files: Arc<Vec<File>>,
) -> Result<Vec<Duration>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for peer in peers {
        let (next, files) = (next.clone(), files.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while let Some(file) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                let t = Instant::now();
                let result = peer.call_tool(whole_file(file)).await?;
                latencies.push(t.elapsed());
                let block = parse_block(&result)?;
                if block.body_bytes != file.bytes || block.has_more {
                    bail!(
                        "a whole-file read of {} answered {} of {} bytes",
                        file.path,
                        block.body_bytes,
                        file.bytes
                    );
                }
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(latencies)
}

pub(super) async fn calls(
    peers: Vec<Peer<RoleClient>>,
    files: Arc<Vec<File>>,
) -> Result<(Vec<Duration>, usize, ())> {
    let count = files.len();
    Ok((run_calls(peers, files).await?, count, ()))
}
