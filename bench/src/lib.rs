//! Shared parts of the benchmarks (each benchmark is a binary under `src/bin/`).

pub mod corpus;

use std::time::Duration;

/// The `p` quantile (0.0..=1.0) of `times`, nearest rank; sorts them. `times` must not be
/// empty.
pub fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort_unstable();
    times[((times.len() - 1) as f64 * p).round() as usize]
}

/// Reads a `csg serve` child's stdout until its `MCP endpoint: URL` line and answers the URL,
/// within `within`; then keeps draining stdout on a task of its own, so the server never
/// writes into a full pipe. `log` is named in the error when the child exits first.
pub async fn mcp_endpoint(
    stdout: tokio::process::ChildStdout,
    within: Duration,
    log: &std::path::Path,
) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(within, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("MCP endpoint: ") {
                return anyhow::Ok(url.trim().to_string());
            }
        }
        anyhow::bail!(
            "csg serve exited before printing its endpoint; see {}",
            log.display()
        )
    })
    .await
    .map_err(|_| anyhow::anyhow!("csg serve printed no endpoint within {within:?}"))??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(url)
}
