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

mod cat_file;
mod continuation;
mod corpus;
mod in_process;
mod keepalive;
mod mcp;
mod perf;
mod server;
mod table;

use anyhow::{Context, Result, bail};
use bench::cpu::tick_us;
use cat_file::cat_file;
use continuation::continuation;
use corpus::{build_corpus, pick_files};
use in_process::{in_process, prepare};
use keepalive::{Face, KeepAliveClient, ProtocolEra};
use mcp::{calls, run_calls};
use perf::Perf;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use server::Server;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use table::{measured, median_rounds, print_table};

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
        for (flag, value) in bench::flag_pairs(USAGE)? {
            let number = || -> Result<u64> { bench::flag_number(&flag, &value, USAGE) };
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
