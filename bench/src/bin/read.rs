//! `bench/read`: the cost of a whole-file `read`, as server CPU per call and calls/s, on the
//! same files for every row of one run:
//!
//! - the service in process (no transport: what the transports add on top of it),
//! - `csg mcp` over stdio (the real release binary as a child, driven by rmcp's client over
//!   the child's stdin/stdout), 1 client and 8 calls in flight,
//! - `csg serve` over Streamable HTTP (the real binary as a child), 1 and 8 clients,
//! - `csg serve` over Streamable HTTP with JSON-RPC posted on one keep-alive connection, as
//!   a 2025-11-25 client and as a 2026-07-28 client (rmcp's client above opens a TCP
//!   connection per call, which the server pays for too),
//! - `csg serve`'s JSON API (`POST /sourcegraph/api/read`), 1 client on a keep-alive
//!   connection: the same process and HTTP stack without MCP (issue 30 point 6),
//! - `git cat-file --batch` on the same blobs (`HEAD:path`, so the path lookup is included):
//!   the floor every other row is divided by;
//!
//! plus a continuation read of a 5 MiB file in 200-line steps over stdio, without (and, once
//! `csg` has the setting, with) the decoded-blob cache of issue 13.
//!
//! Server CPU is utime+stime of the server process alone from `/proc/<pid>/stat`, taken before
//! and after the measured calls, after a warm-up; the index is built before any server starts
//! and the servers run with `--sync-interval 1h`, so no sync or index build runs meanwhile.
//!
//! The corpus is real Rust source: the crates in cargo's registry cache on this machine
//! (whatever this workspace's build downloaded), committed into a temp repository; or, with
//! `--repo PATH`, the head tree of a real repository (e.g. the moby/moby mirror), cloned bare
//! and `--shared` (PATH is never written) and committed as one root commit, so a partial
//! clone's missing history does not matter. Without the generated 5 MiB file the continuation
//! row is skipped then.

use anyhow::{Context, Result, bail};
use bench::git;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use service::{CallContext, ReadRequest, Service, ServiceConfig};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CORPUS_BYTES: u64 = 40 * 1024 * 1024;
/// Whole-file reads use files of this size range: real source of ~10 KB on average, like the
/// issue 13 workload (11.5 KB).
const MIN_FILE_BYTES: u64 = 2 * 1024;
const MAX_FILE_BYTES: u64 = 64 * 1024;
const BIG_FILE: &str = "bench-big/five-mib.rs";
const BIG_FILE_BYTES: u64 = 5 * 1024 * 1024;
const STEP_LINES: u64 = 200;
const REPO: &str = "bench/corpus";
/// The decoded-blob cache size the "with cache" continuation row asks for (issue 13: 64 MiB).
const DEFAULT_BLOB_CACHE_BYTES: u64 = 64 * 1024 * 1024;
/// The `csg` setting issue 13 is expected to add; detected from `csg mcp --help`.
const BLOB_CACHE_FLAG: &str = "--blob-cache-bytes";
const ROWS: &[&str] = &[
    "inprocess",
    "stdio",
    "stdio8",
    "http1",
    "http8",
    "mcp1",
    "mcp1n",
    "api1",
    "catfile",
    "continuation",
];

const STDIO_ROW: &str = "csg mcp, stdio, 1 client";
const HTTP_ROW: &str = "csg serve, HTTP, 1 client";
const MCP_ROW: &str = "MCP HTTP keep-alive 2025-11-25";
const MCP_NEXT_ROW: &str = "MCP HTTP keep-alive 2026-07-28";
const API_ROW: &str = "csg serve, JSON API, 1 client";

const USAGE: &str = "usage: bench/read [--reads N] [--warmup N] [--only ROW,ROW…] [--repo PATH] \
[--rounds N] [--blob-cache-bytes N] [--perf FILE] [--perf-call-graph fp|dwarf|lbr] [--csg PATH] [--logs DIR]
rows: inprocess, stdio, stdio8, http1, http8, mcp1, mcp1n, api1, catfile, continuation
http1/http8 use rmcp's client, which opens a TCP connection per call (it disables pooling);
mcp1 (2025-11-25) and mcp1n (2026-07-28) post JSON-RPC on one keep-alive connection, as
the JSON API row api1 does;
--rounds N runs the server rows N times, interleaved (row 1, row 2, …, then row 2, row 3, …, row 1:
each round starts one row later), and
shows each row's median round with every round's figure: on a busy machine drift then hits
every row alike;
--repo PATH reads the files of PATH's head tree (cloned bare and --shared, never written; e.g.
/work/.mirror/moby+moby/repo) instead of the cargo registry corpus, and skips continuation;
--perf FILE records `perf record --call-graph …` of the server of the first server row (stdio
unless --only says otherwise) during its measured calls only (the CPU figures of that run include perf's sampling overhead);
--logs DIR keeps the servers' logs (one file per row) in DIR.";

struct Options {
    reads: usize,
    warmup: usize,
    only: Option<Vec<String>>,
    blob_cache_bytes: u64,
    perf: Option<PathBuf>,
    perf_call_graph: String,
    csg: PathBuf,
    /// Where the servers' logs (stderr) go; default: the temp dir, removed at the end.
    logs: Option<PathBuf>,
    /// A real repository whose head tree is the corpus, instead of the registry sources.
    repo: Option<PathBuf>,
    /// How often the server rows run, interleaved; each row shows its median round.
    rounds: usize,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Options {
            reads: 2000,
            warmup: 200,
            only: None,
            blob_cache_bytes: DEFAULT_BLOB_CACHE_BYTES,
            perf: None,
            perf_call_graph: "dwarf".into(),
            csg: std::env::current_exe()?
                .parent()
                .context("the bench binary has a directory")?
                .join("csg"),
            logs: None,
            repo: None,
            rounds: 1,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            let value = args
                .next()
                .with_context(|| format!("{flag} takes a value\n{USAGE}"))?;
            let number = || -> Result<u64> {
                value
                    .parse()
                    .with_context(|| format!("{flag} takes a number\n{USAGE}"))
            };
            match flag.as_str() {
                "--reads" => options.reads = number()?.max(1) as usize,
                "--warmup" => options.warmup = number()? as usize,
                "--blob-cache-bytes" => options.blob_cache_bytes = number()?,
                "--perf" => options.perf = Some(PathBuf::from(&value)),
                "--perf-call-graph" => options.perf_call_graph = value.clone(),
                "--csg" => options.csg = PathBuf::from(&value),
                "--logs" => options.logs = Some(PathBuf::from(&value)),
                "--repo" => options.repo = Some(PathBuf::from(&value)),
                "--rounds" => options.rounds = number()?.max(1) as usize,
                "--only" => {
                    let rows: Vec<String> = value.split(',').map(str::to_string).collect();
                    if let Some(bad) = rows.iter().find(|r| !ROWS.contains(&r.as_str())) {
                        bail!("unknown row `{bad}`\n{USAGE}");
                    }
                    options.only = Some(rows);
                }
                _ => bail!("unknown flag `{flag}`\n{USAGE}"),
            }
        }
        Ok(options)
    }

    fn wants(&self, row: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|rows| rows.iter().any(|r| r == row))
    }

    fn wants_any(&self, rows: &[&str]) -> bool {
        rows.iter().any(|r| self.wants(r))
    }
}

fn main() -> Result<()> {
    let options = Options::parse()?;
    if options.wants_any(&[
        "stdio",
        "stdio8",
        "http1",
        "http8",
        "mcp1",
        "mcp1n",
        "api1",
        "continuation",
    ]) && !options.csg.is_file()
    {
        bail!(
            "no csg binary at {}: run `cargo build --locked --release -p csg -p bench` (bench/read does) or pass --csg",
            options.csg.display()
        );
    }
    let tmp = tempfile::tempdir()?;
    let source = match &options.repo {
        Some(repo) => {
            let source = tmp.path().join("source.git");
            let clone = bench::clone_big_repo(repo, &source, "bench/read")?;
            eprintln!(
                "corpus: the head tree of {} ({})",
                repo.display(),
                &clone.source_head[..clone.source_head.len().min(12)]
            );
            source.canonicalize()?
        }
        None => {
            let source = tmp.path().join("corpus");
            let (files, bytes) = build_corpus(&source)?;
            eprintln!(
                "corpus: {files} files, {:.1} MiB of Rust source, plus {BIG_FILE} ({:.1} MiB)",
                bytes as f64 / 1048576.0,
                BIG_FILE_BYTES as f64 / 1048576.0
            );
            source.canonicalize()?
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(&options, tmp.path(), &source))
}

/// Copies `.rs` files from cargo's registry sources into `dest` (up to CORPUS_BYTES), adds a
/// 5 MiB file made of those sources for the continuation read, and commits them.
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
    let mut big = Vec::with_capacity(BIG_FILE_BYTES as usize + MAX_FILE_BYTES as usize);
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
        if (big.len() as u64) < BIG_FILE_BYTES && std::str::from_utf8(&text).is_ok() {
            big.extend_from_slice(&text);
            if !big.ends_with(b"\n") {
                big.push(b'\n');
            }
        }
        files += 1;
        bytes += text.len() as u64;
    }
    if files == 0 {
        bail!(
            "no Rust sources in {}; build the workspace first so cargo fetches its dependencies",
            root.display()
        );
    }
    if (big.len() as u64) < BIG_FILE_BYTES {
        bail!("the corpus is too small to make a 5 MiB file");
    }
    // Cut at a line end at or after 5 MiB, so the file stays valid UTF-8 and whole lines.
    let cut = big[BIG_FILE_BYTES as usize..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(big.len(), |i| BIG_FILE_BYTES as usize + i + 1);
    big.truncate(cut);
    let target = dest.join(BIG_FILE);
    std::fs::create_dir_all(target.parent().context("file has a parent")?)?;
    std::fs::write(target, &big)?;
    git(dest, &["init", "-q", "-b", "main"])?;
    git(dest, &["add", "-A"])?;
    git(dest, &["commit", "-q", "-m", "corpus"])?;
    git(dest, &["gc", "-q"])?;
    Ok((files, bytes))
}

/// A file read whole.
use bench::{TextFile as File, line_count};

/// Text files of MIN_FILE_BYTES to MAX_FILE_BYTES from the corpus's head tree (regular files,
/// no NUL, valid UTF-8), in a deterministic shuffle: the first `warmup` for the warm-up, the
/// next `reads` measured (cycling if the corpus has fewer).
fn pick_files(source: &Path, warmup: usize, reads: usize) -> Result<(Vec<File>, Vec<File>)> {
    let candidates = bench::text_files(source, MIN_FILE_BYTES..=MAX_FILE_BYTES, |path| {
        path != BIG_FILE
    })?;
    if candidates.is_empty() {
        bail!("no text file of {MIN_FILE_BYTES} to {MAX_FILE_BYTES} bytes in the corpus");
    }
    let take = |from: usize, count: usize| -> Vec<File> {
        (0..count)
            .map(|k| candidates[(from + k) % candidates.len()].clone())
            .collect()
    };
    // The warm-up takes files from the end, so a measured read never hits a blob the warm-up
    // just read (unless the corpus is smaller than warm-up + reads).
    let warm = take(candidates.len() - warmup.min(candidates.len()), warmup);
    Ok((warm, take(0, reads)))
}

/// CPU time of one process.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    /// utime + stime of the process itself (all its threads, live and exited), in clock
    /// ticks from `/proc/<pid>/stat`: coarse, used to tell whether it is idle.
    own: u64,
    /// The same in µs from the process's CPU-time clock (`clock_getcpuclockid`, nanosecond
    /// resolution), or from the ticks where that clock is not available.
    own_us: f64,
    /// cutime + cstime: children it has waited for (git subprocesses), in µs.
    children_us: f64,
}

/// The CPU time of process `pid` (`0`: this one) in µs from its CPU-time clock.
fn cpu_clock_us(pid: libc::pid_t) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: both calls only write the out-parameters we pass, which live on this stack.
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0
            || libc::clock_gettime(clock, &mut now) != 0
        {
            return None;
        }
    }
    Some(now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3)
}

fn proc_cpu(pid: &str) -> Result<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat: is this Linux?"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc stat")?
        .1
        .split_whitespace()
        .collect();
    // After ')': fields[0] is field 3 (state); utime is field 14, stime 15, cutime 16, cstime 17.
    let field = |i: usize| -> Result<u64> {
        let v: i64 = fields
            .get(i)
            .context("short /proc stat")?
            .parse()
            .context("malformed /proc stat field")?;
        Ok(v.max(0) as u64)
    };
    let own = field(11)? + field(12)?;
    let tick = tick_us();
    let clock_pid = if pid == "self" {
        Some(0)
    } else {
        pid.parse().ok()
    };
    Ok(Cpu {
        own,
        own_us: clock_pid
            .and_then(cpu_clock_us)
            .unwrap_or(own as f64 * tick),
        children_us: (field(13)? + field(14)?) as f64 * tick,
    })
}

/// Microseconds per clock tick (`sysconf(_SC_CLK_TCK)`, 100 Hz on most Linux systems).
fn tick_us() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; no pointers are involved.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1e6 / if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// One row of the table.
struct Row {
    label: String,
    calls: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// Server CPU over the measured calls, µs.
    server_us: f64,
    /// CPU of this benchmark process (the client) meanwhile, µs; `None` when it is the server.
    client_us: Option<f64>,
    /// CPU of reaped child processes of the server meanwhile, µs.
    children_us: f64,
    /// Bytes the server wrote to its log (stderr) meanwhile.
    log_bytes: Option<u64>,
}

impl Row {
    fn per_call(&self, us: f64) -> f64 {
        us / self.calls as f64
    }

    fn percentile(&self, p: f64) -> Option<f64> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut sorted = self.latencies.clone();
        sorted.sort();
        Some(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6)
    }
}

/// Measures `calls` between two CPU samples of `server` (and of this process).
async fn measured<F, T>(label: &str, server: u32, log: Option<&Path>, work: F) -> Result<(Row, T)>
where
    F: std::future::Future<Output = Result<(Vec<Duration>, usize, T)>>,
{
    let pid = server.to_string();
    let own = server == std::process::id();
    let log_size =
        |log: Option<&Path>| log.and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len());
    let (log_before, me_before, before) = (log_size(log), proc_cpu("self")?, proc_cpu(&pid)?);
    let started = Instant::now();
    let (latencies, count, extra) = work.await?;
    let elapsed = started.elapsed();
    let (after, me_after, log_after) = (proc_cpu(&pid)?, proc_cpu("self")?, log_size(log));
    Ok((
        Row {
            label: label.to_string(),
            calls: count,
            elapsed,
            latencies,
            server_us: after.own_us - before.own_us,
            client_us: (!own).then_some(me_after.own_us - me_before.own_us),
            children_us: after.children_us - before.children_us,
            log_bytes: log_before.zip(log_after).map(|(b, a)| a.saturating_sub(b)),
        },
        extra,
    ))
}

async fn run(options: &Options, tmp: &Path, source: &Path) -> Result<()> {
    let data = tmp.join("data");
    let (warm, files) = pick_files(source, options.warmup, options.reads)?;
    let (warm, files) = (Arc::new(warm), Arc::new(files));
    let mean = files.iter().map(|f| f.bytes).sum::<u64>() as f64 / files.len() as f64;
    let mut distinct: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    distinct.sort();
    distinct.dedup();

    // The data directory, synced and indexed before any server starts: every server below
    // finds its index current (its first maintenance round is a no-op) and syncs again only
    // after an hour.
    eprintln!("preparing the data directory (register, sync, index) …");
    let service = prepare(&data, source).await?;
    let mut rows = Vec::new();
    if options.wants("inprocess") {
        rows.push(in_process(&service, &warm, &files).await?);
    }
    drop(service);

    let log_dir = options.logs.clone().unwrap_or_else(|| tmp.join("logs"));
    std::fs::create_dir_all(&log_dir)?;
    let mut profiled = false;
    let mut server_rows = Vec::new();
    // Every row gets a fresh server process, so no row reads blobs an earlier row left in the
    // server's caches; each warms up on other files first.
    let wanted: Vec<(&str, &str, usize)> = [
        ("stdio", STDIO_ROW, 1usize),
        ("stdio8", "csg mcp, stdio, 8 in flight", 8),
        ("http1", HTTP_ROW, 1),
        ("http8", "csg serve, HTTP, 8 clients", 8),
        ("mcp1", MCP_ROW, 1),
        ("mcp1n", MCP_NEXT_ROW, 1),
        ("api1", API_ROW, 1),
    ]
    .into_iter()
    .filter(|(row, _, _)| options.wants(row))
    .collect();
    // Each round starts one row later than the last, so no row always runs right after the
    // same neighbour (or first, on a machine still settling).
    for (row, label, clients) in (0..options.rounds).flat_map(|round| {
        let mut order = wanted.clone();
        order.rotate_left(round % wanted.len().max(1));
        order
    }) {
        let log = log_dir.join(format!("{row}.log"));
        let face = match row {
            "mcp1" => Some(Face::Mcp(ProtocolEra::Legacy)),
            "mcp1n" => Some(Face::Mcp(ProtocolEra::Next)),
            "api1" => Some(Face::Api),
            _ => None,
        };
        if let Some(face) = face {
            let server = Server::http(options, &data, source, &log).await?;
            let url = server.url.clone().context("serve printed its endpoint")?;
            let mut client = KeepAliveClient::connect(&url, face).await?;
            client.reads(&warm).await?;
            let perf = match &options.perf {
                Some(out) if !profiled => {
                    profiled = true;
                    Some(Perf::start(out, &options.perf_call_graph, server.pid).await?)
                }
                _ => None,
            };
            let (measured_row, ()) = measured(label, server.pid, Some(&log), async {
                let latencies = client.reads(&files).await?;
                anyhow::Ok((latencies, files.len(), ()))
            })
            .await?;
            if let Some(perf) = perf {
                perf.stop()?;
            }
            server_rows.push(measured_row);
            drop(client);
            server.stop().await?;
            continue;
        }
        let (server, peers, sessions) = if row.starts_with("stdio") {
            let server = Server::stdio(options, &data, source, &[], &log).await?;
            // Calls in flight on the one stdio connection.
            let peers = vec![server.client.peer().clone(); clients];
            (server, peers, Vec::new())
        } else {
            let server = Server::http(options, &data, source, &log).await?;
            let url = server.url.clone().context("serve printed its endpoint")?;
            let mut sessions = Vec::new();
            for _ in 0..clients {
                sessions.push(
                    ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
                        .await?,
                );
            }
            let peers = sessions.iter().map(|s| s.peer().clone()).collect();
            (server, peers, sessions)
        };
        run_calls(peers.clone(), warm.clone()).await?;
        // perf records the first server row of the run (`--only ROW` picks which).
        let perf = match &options.perf {
            Some(out) if !profiled => {
                profiled = true;
                Some(Perf::start(out, &options.perf_call_graph, server.pid).await?)
            }
            _ => None,
        };
        let (measured_row, ()) =
            measured(label, server.pid, Some(&log), calls(peers, files.clone())).await?;
        if let Some(perf) = perf {
            perf.stop()?;
        }
        server_rows.push(measured_row);
        for session in sessions {
            session.cancel().await?;
        }
        server.stop().await?;
    }
    let (medians, by_round) = median_rounds(server_rows);
    rows.extend(medians);
    if options.wants("catfile") {
        let (source, warm, files) = (source.to_path_buf(), warm.clone(), files.clone());
        let row = tokio::task::spawn_blocking(move || {
            cat_file(
                "git cat-file --batch (floor)",
                &source,
                &warm,
                &files,
                |f| f.path.as_str(),
            )
        })
        .await??;
        rows.push(row);
    }

    println!();
    println!(
        "bench/read: whole-file reads of {} files per row ({} distinct, mean {:.1} KiB, {} to {} KiB), after {} warm-up reads of other files",
        files.len(),
        distinct.len(),
        mean / 1024.0,
        MIN_FILE_BYTES / 1024,
        MAX_FILE_BYTES / 1024,
        warm.len()
    );
    println!(
        "server CPU = the server process's CPU-time clock (clock_getcpuclockid: every thread, ns resolution; /proc/<pid>/stat ticks of {:.0} µs where unavailable); index built before, --sync-interval 1h; revision omitted (default branch head), as a new user would",
        tick_us()
    );
    print_table(&rows);
    if !by_round.is_empty() {
        println!(
            "{} rounds, interleaved; each server row above is its median round. Server µs/call by round:",
            options.rounds
        );
        for line in by_round {
            println!("  {line}");
        }
    }

    if options.wants("continuation") {
        if options.repo.is_some() {
            println!();
            println!("continuation: skipped (--repo: the corpus has no generated {BIG_FILE})");
        } else {
            continuation(options, &data, source, &log_dir).await?;
        }
    }
    Ok(())
}

/// One row per label, in first-run order: the round with the median server CPU per call;
/// and, when there was more than one round, a line per label with every round's figure.
fn median_rounds(rows: Vec<Row>) -> (Vec<Row>, Vec<String>) {
    let mut labels: Vec<String> = Vec::new();
    for row in &rows {
        if !labels.contains(&row.label) {
            labels.push(row.label.clone());
        }
    }
    let mut rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    let (mut medians, mut by_round) = (Vec::new(), Vec::new());
    for label in labels {
        let mut rounds: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].as_ref().is_some_and(|r| r.label == label))
            .collect();
        let per_call = |i: usize| rows[i].as_ref().map_or(0.0, |r| r.per_call(r.server_us));
        if rounds.len() > 1 {
            by_round.push(format!(
                "{label}: {}",
                rounds
                    .iter()
                    .map(|&i| format!("{:.1}", per_call(i)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rounds.sort_by(|&a, &b| per_call(a).total_cmp(&per_call(b)));
        if let Some(row) = rounds
            .get(rounds.len() / 2)
            .and_then(|&median| rows[median].take())
        {
            medians.push(row);
        }
    }
    (medians, by_round)
}

fn print_table(rows: &[Row]) {
    let floor = rows
        .iter()
        .find(|r| r.label.starts_with("git cat-file"))
        .map(|r| r.per_call(r.server_us));
    println!();
    println!(
        "{:<30} {:>8} {:>9} {:>9} {:>15} {:>8} {:>15} {:>10}",
        "row",
        "calls/s",
        "p50 µs",
        "p99 µs",
        "server µs/call",
        "× floor",
        "client µs/call",
        "log B/call"
    );
    let dash = |v: Option<f64>, precision: usize| {
        v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
    };
    for row in rows {
        let server = row.per_call(row.server_us);
        println!(
            "{:<30} {:>8.0} {:>9} {:>9} {:>15.1} {:>8} {:>15} {:>10}",
            row.label,
            row.calls as f64 / row.elapsed.as_secs_f64(),
            dash(row.percentile(0.5), 1),
            dash(row.percentile(0.99), 1),
            server,
            dash(floor.filter(|f| *f > 0.0).map(|f| server / f), 2),
            dash(row.client_us.map(|c| row.per_call(c)), 1),
            dash(row.log_bytes.map(|b| b as f64 / row.calls as f64), 1),
        );
        if row.children_us > 0.0 {
            println!(
                "{:<30} note: the server's child processes used {:.0} µs meanwhile (not in the figure above)",
                "", row.children_us
            );
        }
    }
    let find = |label: &str| rows.iter().find(|r| r.label == label);
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    if let Some(stdio) = find(STDIO_ROW) {
        let stdio_us = stdio.per_call(stdio.server_us);
        for label in [MCP_ROW, MCP_NEXT_ROW] {
            if let Some(http) = find(label) {
                let ratio = http.per_call(http.server_us) / stdio_us;
                println!(
                    "issue 30 target: MCP over HTTP ≤ 1.2× stdio's server CPU per read ({label}): {ratio:.2}× {}",
                    verdict(ratio <= 1.2)
                );
            }
        }
        if let Some(http) = find(HTTP_ROW) {
            println!(
                "(rmcp's client, a TCP connection per call: {:.2}× stdio)",
                http.per_call(http.server_us) / stdio_us
            );
        }
        if let Some(api) = find(API_ROW) {
            let ratio = api.per_call(api.server_us) / stdio_us;
            println!(
                "issue 30 target: JSON API ≤ stdio's server CPU per read (1 client): {ratio:.2}× {}",
                verdict(ratio <= 1.0)
            );
        }
    }
    if let Some(stdio) = find(STDIO_ROW) {
        let per_call = stdio.per_call(stdio.server_us);
        println!(
            "issue 13 target: csg mcp stdio ≤ 100 µs server CPU per call: {per_call:.1} µs {}",
            verdict(per_call <= 100.0)
        );
    }
    if let Some(http) = find("csg serve, HTTP, 8 clients") {
        let rate = http.calls as f64 / http.elapsed.as_secs_f64();
        println!(
            "issue 13 target: csg serve HTTP ≥ 5000 calls/s with 8 clients: {rate:.0} calls/s {}",
            verdict(rate >= 5000.0)
        );
    }
}

/// Registers, syncs and indexes the corpus in `data` exactly as `csg --repo NAME=PATH` would
/// (same name, same canonical source), so the servers reuse the registration and the index.
async fn prepare(data: &Path, source: &Path) -> Result<Service> {
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: data.to_path_buf(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )?;
    let service = Service::new(store, ServiceConfig::default());
    service
        .register(service::RegisterRequest {
            name: REPO.into(),
            source: source.to_string_lossy().into_owned(),
            registered_path: String::new(),
            branch: None,
            private: None,
        })
        .await?;
    service.sync(REPO.into()).await?;
    service.index(REPO.into(), |_| {}).await?;
    Ok(service)
}

/// The service's own `read` path (with plugin enrichment, as the MCP tool calls it), in this
/// process: no transport, no JSON.
async fn in_process(service: &Service, warm: &[File], files: &[File]) -> Result<Row> {
    let ctx = CallContext::default();
    let read = |file: &File| {
        let service = service.clone();
        let ctx = ctx.clone();
        let request = ReadRequest {
            repo: REPO.into(),
            revision: None,
            path: file.path.clone(),
            start_line: Some(1),
            end_line: Some(file.lines),
            plugins: None,
        };
        let expect = file.bytes;
        async move {
            let (item, _) = service.read_enriched(&ctx, request).await?;
            let range = item
                .outcome
                .map_err(|e| anyhow::anyhow!("read failed: {e}"))?;
            if range.content.len() as u64 != expect || range.has_more {
                bail!(
                    "a whole-file read answered {} bytes, not {expect}",
                    range.content.len()
                );
            }
            Ok(())
        }
    };
    for file in warm {
        read(file).await?;
    }
    let (row, ()) = measured(
        "service in process (no I/O)",
        std::process::id(),
        None,
        async {
            let mut latencies = Vec::with_capacity(files.len());
            for file in files {
                let t = Instant::now();
                read(file).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok((latencies, files.len(), ()))
        },
    )
    .await?;
    Ok(row)
}

/// The MCP `read` arguments for a whole file.
fn whole_file(file: &File) -> CallToolRequestParams {
    read_call(&file.path, 1, file.lines)
}

fn read_call(path: &str, start: u64, end: u64) -> CallToolRequestParams {
    let args = serde_json::json!({
        "repo": REPO, "path": path, "start_line": start, "end_line": end,
    });
    let serde_json::Value::Object(map) = args else {
        unreachable!("a JSON object literal")
    };
    CallToolRequestParams::new("read").with_arguments(map)
}

/// The header lines of a read block that the benchmark checks.
struct Block {
    body_bytes: u64,
    has_more: bool,
    next_start_line: Option<u64>,
}

fn parse_block(result: &CallToolResult) -> Result<Block> {
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
async fn run_calls(peers: Vec<Peer<RoleClient>>, files: Arc<Vec<File>>) -> Result<Vec<Duration>> {
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

async fn calls(
    peers: Vec<Peer<RoleClient>>,
    files: Arc<Vec<File>>,
) -> Result<(Vec<Duration>, usize, ())> {
    let count = files.len();
    Ok((run_calls(peers, files).await?, count, ()))
}

/// Which face a [`KeepAliveClient`] reads through.
#[derive(Clone, Copy)]
enum Face {
    /// MCP `tools/call` on the Streamable HTTP endpoint, statelessly.
    Mcp(ProtocolEra),
    /// `POST /sourcegraph/api/read`.
    Api,
}

/// The MCP revision a stateless request declares.
#[derive(Clone, Copy)]
enum ProtocolEra {
    /// 2025-11-25: the `MCP-Protocol-Version` header alone (after an `initialize` elsewhere).
    Legacy,
    /// 2026-07-28: the header, `_meta` and the SEP-2243 `Mcp-Method`/`Mcp-Name` headers.
    Next,
}

/// A client of `csg serve` on one keep-alive HTTP/1.1 connection, as HTTP clients keep them
/// (hand-written: what it sends is exactly what is measured, and the benchmark needs no HTTP
/// client crate). rmcp's own client opens a connection per call, which the server pays for.
struct KeepAliveClient {
    conn: bench::KeepAlive,
    authority: String,
    /// The MCP endpoint's path and query (`/sourcegraph/mcp?plugins=auto`).
    mcp_path: String,
    face: Face,
    next_id: u64,
}

impl KeepAliveClient {
    /// Connects to the host of `mcp_url` (`http://HOST:PORT/sourcegraph/mcp…`).
    async fn connect(mcp_url: &str, face: Face) -> Result<Self> {
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
    async fn reads(&mut self, files: &[File]) -> Result<Vec<Duration>> {
        let mut latencies = Vec::with_capacity(files.len());
        for file in files {
            let t = Instant::now();
            self.read(file).await?;
            latencies.push(t.elapsed());
        }
        Ok(latencies)
    }
}

/// A `csg` child process.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    /// The MCP client session: the measured one for stdio, a readiness-check one for HTTP.
    client: RunningService<RoleClient, ()>,
    /// The MCP endpoint (HTTP only).
    url: Option<String>,
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
    async fn stdio(
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
    async fn http(options: &Options, data: &Path, source: &Path, log: &Path) -> Result<Self> {
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
    async fn stop(mut self) -> Result<()> {
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

/// `perf record` attached to the server for the measured calls only.
struct Perf {
    child: std::process::Child,
}

impl Perf {
    async fn start(out: &Path, call_graph: &str, pid: u32) -> Result<Self> {
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

    fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on the pid of our own child, which we have not waited for yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.child.wait()?;
        Ok(())
    }
}

/// Hands `input` to a `git cat-file --batch` stdin from a thread (its output must be read
/// meanwhile, or both sides block on full pipes); answers stdin back.
fn feed(
    mut stdin: ChildStdin,
    input: String,
) -> std::thread::JoinHandle<std::io::Result<ChildStdin>> {
    std::thread::spawn(move || {
        stdin.write_all(input.as_bytes())?;
        stdin.flush()?;
        Ok(stdin)
    })
}

fn read_blobs(stdout: &mut impl BufRead, count: usize) -> Result<u64> {
    let mut total = 0u64;
    let mut header = String::new();
    let mut body = Vec::new();
    for _ in 0..count {
        header.clear();
        stdout.read_line(&mut header)?;
        let size: u64 = header
            .split_whitespace()
            .nth(2)
            .with_context(|| format!("cat-file answered `{}`", header.trim()))?
            .parse()?;
        body.resize(size as usize + 1, 0);
        stdout.read_exact(&mut body)?;
        total += size;
    }
    Ok(total)
}

/// `HEAD:<path>` for every file through one `git cat-file --batch` (the floor: object lookup
/// by path, inflate, write), its own CPU from `/proc` around the measured part.
fn cat_file<T>(
    label: &str,
    source: &Path,
    warm: &[T],
    files: &[T],
    path: impl Fn(&T) -> &str,
) -> Result<Row> {
    let mut child = Command::new("git")
        .current_dir(source)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let pid = child.id().to_string();
    let input =
        |list: &[T]| -> String { list.iter().map(|f| format!("HEAD:{}\n", path(f))).collect() };
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    let writer = feed(child.stdin.take().context("stdin")?, input(warm));
    read_blobs(&mut stdout, warm.len())?;
    let stdin = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    let before = proc_cpu(&pid)?;
    let started = Instant::now();
    let writer = feed(stdin, input(files));
    read_blobs(&mut stdout, files.len())?;
    let elapsed = started.elapsed();
    let after = proc_cpu(&pid)?;
    drop(
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer thread panicked"))??,
    );
    child.wait()?;
    Ok(Row {
        label: label.to_string(),
        calls: files.len(),
        elapsed,
        latencies: Vec::new(),
        server_us: after.own_us - before.own_us,
        client_us: None,
        children_us: 0.0,
        log_bytes: None,
    })
}

/// The 5 MiB file read in 200-line steps over `csg mcp` stdio, following `NextStartLine`,
/// without the decoded-blob cache and, when `csg` has the setting, with it.
async fn continuation(options: &Options, data: &Path, source: &Path, logs: &Path) -> Result<()> {
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
