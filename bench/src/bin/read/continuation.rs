//! The continuation read: a 5 MiB file in 200-line steps over `csg mcp` stdio, without and
//! with the decoded-blob cache.

use super::cat_file::cat_file;
use super::corpus::pick_files;
use super::mcp::{parse_block, read_call, run_calls};
use super::server::Server;
use super::table::measured;
use super::{BIG_FILE, BLOB_CACHE_FLAG, Options, STEP_LINES};
use anyhow::{Result, bail};
use bench::line_count;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// The 5 MiB file read in 200-line steps over `csg mcp` stdio, following `NextStartLine`,
/// without the decoded-blob cache and, when `csg` has the setting, with it.
pub(super) async fn continuation(
    options: &Options,
    data: &Path,
    source: &Path,
    logs: &Path,
) -> Result<()> {
    let text = std::fs::read(source.join(BIG_FILE))?;
    let (bytes, lines) = (text.len() as u64, line_count(&text));
    let help = Command::new(&options.csg)
        .args(["mcp", "--help"])
        .output()?;
    let has_cache = String::from_utf8_lossy(&help.stdout).contains(BLOB_CACHE_FLAG);
    println!();
    println!(
        "continuation: {BIG_FILE}, {:.2} MiB, {lines} lines, read in {STEP_LINES}-line steps following NextStartLine over csg mcp stdio",
        bytes as f64 / 1048576.0
    );
    println!(
        "{:<44} {:>6} {:>14} {:>14} {:>10}",
        "", "steps", "server CPU ms", "µs per step", "wall s"
    );
    let mut runs: Vec<(String, Option<Vec<String>>)> = Vec::new();
    if has_cache {
        runs.push((
            format!("no blob cache ({BLOB_CACHE_FLAG} 0)"),
            Some(vec![BLOB_CACHE_FLAG.into(), "0".into()]),
        ));
        runs.push((
            format!(
                "with blob cache ({BLOB_CACHE_FLAG} {})",
                options.blob_cache_bytes
            ),
            Some(vec![
                BLOB_CACHE_FLAG.into(),
                options.blob_cache_bytes.to_string(),
            ]),
        ));
    } else {
        runs.push(("no blob cache (csg has none yet)".into(), Some(Vec::new())));
        runs.push((
            format!(
                "with blob cache ({BLOB_CACHE_FLAG} {})",
                options.blob_cache_bytes
            ),
            None,
        ));
    }
    for (index, (label, extra)) in runs.into_iter().enumerate() {
        let Some(extra) = extra else {
            println!(
                "{label:<44} not measured: `csg mcp --help` has no {BLOB_CACHE_FLAG}; the bench passes it once csg does"
            );
            continue;
        };
        let log = logs.join(format!("continuation-{index}.log"));
        let server = match Server::stdio(options, data, source, &extra, &log).await {
            Ok(server) => server,
            Err(error) => {
                println!("{label:<44} failed to start csg: {error:#}");
                continue;
            }
        };
        let peer = server.client.peer().clone();
        // Warm the process up on small files only: the big blob's first inflate is measured.
        let (warm, _) = pick_files(source, 20, 0)?;
        run_calls(vec![peer.clone()], Arc::new(warm)).await?;
        let (row, steps) = measured(&label, server.pid, Some(&log), async {
            let (mut start, mut steps, mut body) = (1u64, 0usize, 0u64);
            let mut latencies = Vec::new();
            loop {
                let t = Instant::now();
                let result = peer
                    .call_tool(read_call(BIG_FILE, start, start + STEP_LINES - 1))
                    .await?;
                latencies.push(t.elapsed());
                let block = parse_block(&result)?;
                steps += 1;
                body += block.body_bytes;
                match block.next_start_line {
                    Some(next) if block.has_more && next > start => start = next,
                    _ => break,
                }
            }
            if body != bytes {
                bail!("the continuation read {body} bytes of {bytes}");
            }
            anyhow::Ok((latencies, steps, steps))
        })
        .await?;
        println!(
            "{label:<44} {steps:>6} {:>14.1} {:>14.1} {:>10.2}",
            row.server_us / 1000.0,
            row.per_call(row.server_us),
            row.elapsed.as_secs_f64()
        );
        server.stop().await?;
    }
    // Floor: git inflating the same blob, once per read.
    let (source, repeats) = (source.to_path_buf(), 20usize);
    let big = vec![BIG_FILE.to_string(); repeats];
    let floor =
        tokio::task::spawn_blocking(move || cat_file("", &source, &big[..1], &big, |p| p.as_str()))
            .await??;
    println!(
        "{:<44} git cat-file --batch of the same blob: {:.0} µs CPU per whole read ({repeats} reads)",
        "floor",
        floor.per_call(floor.server_us)
    );
    Ok(())
}
