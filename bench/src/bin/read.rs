//! `bench/read`: MCP `read` calls/s and p50/p99 latency over loopback for 1 and 8 concurrent
//! clients on 200-line ranges of real source, the service-side latency of the same reads, and
//! `git cat-file --batch` for the same blobs, all in one run; prints the ratios.
//!
//! The corpus is real Rust source: the crates in cargo's registry cache on this machine
//! (whatever this workspace's build downloaded), committed into a temp repository.

use anyhow::{Context, Result, bail};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use service::{CallContext, ReadRequest, Service, ServiceConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CORPUS_BYTES: u64 = 40 * 1024 * 1024;
const RANGE_LINES: u64 = 200;

fn main() -> Result<()> {
    let reads = parse_reads()?;
    let tmp = tempfile::tempdir()?;
    let source = tmp.path().join("corpus");
    let (files, bytes) = build_corpus(&source)?;
    eprintln!(
        "corpus: {files} files, {:.1} MiB of Rust source",
        bytes as f64 / 1048576.0
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(tmp.path(), &source, reads))
}

fn parse_reads() -> Result<usize> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(2000),
        [flag, n] if flag == "--reads" => n.parse().context("--reads takes a number"),
        _ => bail!("usage: bench/read [--reads N]"),
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    Ok(testgit::git(dir, args))
}

/// Copies `.rs` files from cargo's registry sources into `dest` (up to CORPUS_BYTES) and
/// commits them.
fn build_corpus(dest: &Path) -> Result<(usize, u64)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let mut stack = vec![home.join("registry/src")];
    let (mut files, mut bytes) = (0usize, 0u64);
    std::fs::create_dir_all(dest)?;
    let mut sources = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for path in entries.into_iter().rev() {
            if path.is_symlink() {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push(path);
            }
        }
    }
    let root = home.join("registry/src");
    for path in sources {
        if bytes >= CORPUS_BYTES {
            break;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(&root)?
            .components()
            .skip(1)
            .collect::<PathBuf>();
        let target = dest.join(rel);
        std::fs::create_dir_all(target.parent().context("file has a parent")?)?;
        std::fs::write(target, &text)?;
        files += 1;
        bytes += text.len() as u64;
    }
    if files == 0 {
        bail!(
            "no Rust sources in {}; build the workspace first so cargo fetches its dependencies",
            root.display()
        );
    }
    git(dest, &["init", "-q", "-b", "main"])?;
    git(dest, &["add", "-A"])?;
    git(dest, &["commit", "-q", "-m", "corpus"])?;
    git(dest, &["gc", "-q"])?;
    Ok((files, bytes))
}

/// Picks `count` 200-line ranges, deterministically, from files with at least that many lines.
fn pick_ranges(source: &Path, count: usize) -> Result<Vec<(String, u64)>> {
    let listing = git(source, &["ls-files"])?;
    let mut candidates = Vec::new();
    for path in listing.lines() {
        let lines = std::fs::read_to_string(source.join(path))
            .map(|t| t.lines().count() as u64)
            .unwrap_or(0);
        if lines >= RANGE_LINES {
            candidates.push((path.to_string(), lines));
        }
    }
    if candidates.is_empty() {
        bail!("no file with {RANGE_LINES} lines in the corpus");
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    Ok((0..count)
        .map(|_| {
            let (path, lines) = &candidates[(next() % candidates.len() as u64) as usize];
            let start = 1 + next() % (lines - RANGE_LINES + 1);
            (path.clone(), start)
        })
        .collect())
}

struct Figures {
    latencies: Vec<Duration>,
    elapsed: Duration,
    body_bytes: u64,
}

impl Figures {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn print(&self, label: &str) {
        println!(
            "{label:<34} {:>9.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs  {:>7.1} MiB/s",
            self.per_second(),
            self.percentile(0.5).as_secs_f64() * 1e6,
            self.percentile(0.99).as_secs_f64() * 1e6,
            self.body_bytes as f64 / 1048576.0 / self.elapsed.as_secs_f64(),
        );
    }
}

async fn run(tmp: &Path, source: &Path, reads: usize) -> Result<()> {
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: tmp.join("data"),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )?;
    let name = gitstore::RepoName::parse("bench/corpus")?;
    store.register(gitstore::Registration {
        name: name.clone(),
        source: source.to_string_lossy().into_owned(),
        registered_path: gitstore::RepoPath::root(),
        branch: None,
    })?;
    let head = store
        .sync(&name)?
        .head
        .context("the corpus has a head")?
        .to_string();
    let service = Service::new(store, ServiceConfig::default());
    let ranges = Arc::new(pick_ranges(source, reads)?);

    // Service side: the same reads, in process, no transport.
    let ctx = CallContext::default();
    let mut in_process = Figures {
        latencies: Vec::new(),
        elapsed: Duration::ZERO,
        body_bytes: 0,
    };
    for warm in [true, false] {
        in_process.latencies.clear();
        in_process.body_bytes = 0;
        let started = Instant::now();
        for (path, start) in ranges.iter() {
            let t = Instant::now();
            let item = service.read(&ctx, request(&head, path, *start)).await?;
            in_process.latencies.push(t.elapsed());
            in_process.body_bytes += item.outcome.map(|r| r.content.len() as u64).unwrap_or(0);
            if warm && in_process.latencies.len() >= 200 {
                break;
            }
        }
        in_process.elapsed = started.elapsed();
    }

    // MCP over loopback.
    let cancel = tokio_util::sync::CancellationToken::new();
    let mcp = mcpserver::http_service(
        service.clone(),
        mcpserver::McpConfig::default(),
        cancel.clone(),
    );
    let app = axum::Router::new().nest_service("/sourcegraph/mcp", mcp);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/sourcegraph/mcp", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut mcp_figures = Vec::new();
    for clients in [1usize, 8] {
        let client = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await?;
        let peer = client.peer().clone();
        // Warm-up.
        for (path, start) in ranges.iter().take(50) {
            peer.call_tool(call(&head, path, *start)).await?;
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..clients {
            let peer = peer.clone();
            let ranges = ranges.clone();
            let head = head.clone();
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut bytes = 0u64;
                for (path, start) in ranges.iter().skip(worker).step_by(clients) {
                    let t = Instant::now();
                    let result = peer.call_tool(call(&head, path, *start)).await?;
                    latencies.push(t.elapsed());
                    bytes += result
                        .content
                        .iter()
                        .filter_map(|c| c.as_text())
                        .map(|t| t.text.len() as u64)
                        .sum::<u64>();
                }
                anyhow::Ok((latencies, bytes))
            }));
        }
        let mut figures = Figures {
            latencies: Vec::new(),
            elapsed: Duration::ZERO,
            body_bytes: 0,
        };
        for task in tasks {
            let (latencies, bytes) = task.await??;
            figures.latencies.extend(latencies);
            figures.body_bytes += bytes;
        }
        figures.elapsed = started.elapsed();
        mcp_figures.push((clients, figures));
        client.cancel().await?;
    }
    cancel.cancel();

    // Baseline: git cat-file --batch for the same blobs, in the same order.
    let cat_file = cat_file_batch(source, &head, &ranges)?;

    println!(
        "bench/read: {} reads of {RANGE_LINES}-line ranges, {} distinct files",
        ranges.len(),
        {
            let mut paths: Vec<_> = ranges.iter().map(|(p, _)| p).collect();
            paths.sort();
            paths.dedup();
            paths.len()
        }
    );
    in_process.print("service read (in process)");
    for (clients, figures) in &mcp_figures {
        figures.print(&format!("MCP read over loopback, {clients} client(s)"));
    }
    println!(
        "{:<34} {:>9.0} blobs/s                                   {:>7.1} MiB/s",
        "git cat-file --batch (same blobs)",
        ranges.len() as f64 / cat_file.0.as_secs_f64(),
        cat_file.1 as f64 / 1048576.0 / cat_file.0.as_secs_f64()
    );
    let best_mcp = mcp_figures
        .iter()
        .map(|(_, f)| f.per_second())
        .fold(0.0, f64::max);
    let cat_rate = ranges.len() as f64 / cat_file.0.as_secs_f64();
    println!(
        "ratio: git cat-file blobs/s ÷ best MCP reads/s = {:.2} (target ≤ 5); service p50 {:.1} µs (target < 1000 µs)",
        cat_rate / best_mcp,
        in_process.percentile(0.5).as_secs_f64() * 1e6
    );
    Ok(())
}

fn request(head: &str, path: &str, start: u64) -> ReadRequest {
    ReadRequest {
        repo: "bench/corpus".into(),
        revision: Some(head.into()),
        path: path.into(),
        start_line: Some(start),
        end_line: Some(start + RANGE_LINES - 1),
        plugins: None,
    }
}

fn call(head: &str, path: &str, start: u64) -> CallToolRequestParams {
    let args = serde_json::json!({
        "repo": "bench/corpus", "revision": head, "path": path,
        "start_line": start, "end_line": start + RANGE_LINES - 1,
    });
    let serde_json::Value::Object(map) = args else {
        unreachable!("a JSON object literal")
    };
    CallToolRequestParams::new("read").with_arguments(map)
}

/// Streams `<sha>:<path>` for every read through one `git cat-file --batch`; answers the
/// elapsed time and the blob bytes.
fn cat_file_batch(source: &Path, head: &str, ranges: &[(String, u64)]) -> Result<(Duration, u64)> {
    let started = Instant::now();
    let mut child = Command::new("git")
        .current_dir(source)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let input: String = ranges
        .iter()
        .map(|(path, _)| format!("{head}:{path}\n"))
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    let mut total = 0u64;
    let mut header = String::new();
    for _ in ranges {
        header.clear();
        stdout.read_line(&mut header)?;
        let size: u64 = header
            .split_whitespace()
            .nth(2)
            .context("cat-file header")?
            .parse()?;
        let mut body = vec![0u8; size as usize + 1];
        stdout.read_exact(&mut body)?;
        total += size;
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    child.wait()?;
    Ok((started.elapsed(), total))
}
