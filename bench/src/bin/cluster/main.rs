//! `bench/cluster`: what a read costs when a replica that does not own the repository forwards
//! it to one that does (issue 31, cluster mode), against the same read asked of the owner, in
//! the same run, on loopback.
//!
//! The setup is real and thrown away at the end: PostgreSQL started by `scripts/postgres.sh` in
//! a temp directory on a free loopback port, one repository registered through the admin
//! command (`csg --database … repo add`), then three `csg serve` replicas in cluster mode (the
//! release binary, each with its own data directory and port, `--sync-interval 1h` so no sync
//! runs while measuring). The benchmark waits until every replica sees three live members and
//! the same two owners, both owners hold the repository (`/readyz` counts it served, a read
//! there answers 200 without being forwarded) and every replica is idle (the owners' first
//! index build is over); the third replica is the non-owner.
//!
//! Rows, each on a keep-alive HTTP/1.1 connection of its own (hand-written client: what it
//! sends is exactly what is measured):
//!
//! - `GET /sourcegraph/api/read?repo=…&path=…&start_line=1&end_line=N` at the owner the
//!   non-owner forwards to, and the same requests at the non-owner (forwarded);
//! - MCP `tools/call read` POSTs (stateless Streamable HTTP) both ways (`--no-mcp` drops them);
//! - `GET /healthz` at the owner: one bare loopback HTTP exchange with `csg`, the floor of
//!   what a forwarding hop adds.
//!
//! Every file is read once per row before measuring, so every row finds the owner's caches in
//! the same state. Then `--rounds` rounds of `--reads` whole-file reads per row, the rows taking
//! turns every `--block` calls (each block starts one row later), so drift on a busy machine
//! hits every row alike. Every answer is checked (status, byte count, no more to read).
//! Server CPU per call is taken from each replica's CPU-time clock (`clock_getcpuclockid`) around
//! each block, outside the timed calls; the idle background (heartbeats) is shown beside it.
//! `/metrics` before and after prove the routing: the non-owner forwarded exactly the forwarded
//! rows' calls to one owner, the owners forwarded none.
//!
//! Everything started here stops by itself and the temp directory is removed, on success,
//! error, panic, SIGINT and SIGTERM (replicas get SIGTERM, then SIGKILL after 20 s; they also
//! get SIGTERM should this process die first).

mod http;
mod measure;
mod ownership;
mod postgres;
mod replicas;

use anyhow::{Context, Result, anyhow, bail};
use bench::TextFile as File;
use measure::measure;
use ownership::{Roles, settle, wait_idle};
use postgres::{Postgres, random_hex, register, source_head, tail};
use replicas::Replica;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const REPO: &str = "bench/cluster";
const REPLICAS: usize = 3;
/// Whole-file reads use files of this size range, like bench/read: real source of ~10 KB on
/// average.
const MIN_FILE_BYTES: u64 = 2 * 1024;
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// The `--small` corpus: sources from cargo's registry.
const SMALL_CORPUS_BYTES: u64 = 8 * 1024 * 1024;
/// Issue 31's bound on what forwarding may add at p50.
const TARGET_EXTRA_P50: Duration = Duration::from_millis(1);
/// No single call may take longer (a hung replica fails the run instead of hanging it).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// From exec to `/readyz` 200.
const REPLICA_START: Duration = Duration::from_secs(120);
/// How long the admin registration (a first sync into its own data directory) may take.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(1200);
/// How long a replica gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);
const MCP_PATH: &str = "/sourcegraph/mcp?plugins=auto";
/// Replica identity, which the cluster's own routes (`/_cluster/…`) answer.
const SECRET_HEADER: &str = "x-csg-replica-secret";

const USAGE: &str =
    "usage: bench/cluster [--reads N] [--rounds N] [--block N] [--repo PATH | --small] \
[--no-mcp] [--csg PATH] [--logs DIR] [--settle-secs N] [--sync-interval DURATION] [--allow-stale]

Starts PostgreSQL (scripts/postgres.sh) and three `csg serve` replicas in cluster mode on
127.0.0.1, registers one repository (2 owners of 3 replicas), and measures whole-file reads at
an owner against the same reads at the non-owner, which forwards them to that owner. Prints
p50/p99 per row, the p50 difference (forwarded - owner) against issue 31's target (<= 1 ms) and
the server CPU per call of each replica. Stops everything and removes its files at the end.

  --reads N          reads per row per round (default 1000; N distinct files where the corpus
                     has them, 2 to 64 KiB of UTF-8 text each)
  --rounds N         rounds (default 5); each row's p50 is over every round, and each round's
                     difference is shown too
  --block N          the rows take turns every N calls (default 20), each block starting one
                     row later
  --repo PATH        the repository whose head tree is served (default
                     /work/.mirror/moby+moby/repo), cloned bare and --shared (never written)
                     and committed as one root commit
  --small            instead of --repo: 8 MiB of sources from cargo's registry (a quick run)
  --no-mcp           JSON API rows only (no MCP tools/call rows)
  --csg PATH         the csg binary (default: csg beside this binary, target/release/csg);
                     refused when older than the workspace's sources, unless --allow-stale
  --logs DIR         keep the replicas' logs in DIR (default: in the temp dir, removed)
  --settle-secs N    how long the owners may take to hold the repository, and the replicas to
                     go idle afterwards (default 1200 each)
  --sync-interval D  the replicas' --sync-interval (default 1h: no sync while measuring)

quick run:  bench/cluster --small --reads 300 --rounds 3
full run:   bench/cluster            (the moby/moby head tree, 1000 reads x 5 rounds per row)";

struct Options {
    reads: usize,
    rounds: usize,
    block: usize,
    repo: PathBuf,
    small: bool,
    mcp: bool,
    csg: PathBuf,
    logs: Option<PathBuf>,
    settle: Duration,
    sync_interval: String,
    allow_stale: bool,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Options {
            reads: 1000,
            rounds: 5,
            block: 20,
            repo: PathBuf::from(bench::DEFAULT_BIG_REPO),
            small: false,
            mcp: true,
            csg: std::env::current_exe()?
                .parent()
                .context("the bench binary has a directory")?
                .join("csg"),
            logs: None,
            settle: Duration::from_secs(1200),
            sync_interval: "1h".into(),
            allow_stale: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            match flag.as_str() {
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--small" => {
                    options.small = true;
                    continue;
                }
                "--no-mcp" => {
                    options.mcp = false;
                    continue;
                }
                "--allow-stale" => {
                    options.allow_stale = true;
                    continue;
                }
                _ => {}
            }
            let value = args
                .next()
                .with_context(|| format!("{flag} takes a value\n{USAGE}"))?;
            let number = || -> Result<u64> {
                value
                    .parse()
                    .with_context(|| format!("{flag} takes a number, not `{value}`\n{USAGE}"))
            };
            match flag.as_str() {
                "--reads" => options.reads = number()?.max(1) as usize,
                "--rounds" => options.rounds = number()?.max(1) as usize,
                "--block" => options.block = number()?.max(1) as usize,
                "--repo" => options.repo = PathBuf::from(&value),
                "--csg" => options.csg = PathBuf::from(&value),
                "--logs" => options.logs = Some(PathBuf::from(&value)),
                "--settle-secs" => options.settle = Duration::from_secs(number()?),
                "--sync-interval" => options.sync_interval = value.clone(),
                _ => bail!("unknown flag `{flag}`\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

/// Everything this run started, stopped in this order when dropped (also on error, panic and
/// signal): replicas, PostgreSQL, then the temp directory.
#[derive(Default)]
struct Guards {
    replicas: Vec<Replica>,
    postgres: Option<Postgres>,
    tmp: Option<tempfile::TempDir>,
}

impl Guards {
    fn clean_up(&mut self) {
        // SIGTERM to all first, so they drain at the same time.
        for replica in &mut self.replicas {
            replica.ask_to_stop();
        }
        for replica in &mut self.replicas {
            replica.stop();
        }
        self.replicas.clear();
        drop(self.postgres.take());
        if let Some(tmp) = self.tmp.take() {
            let path = tmp.path().to_path_buf();
            if let Err(error) = tmp.close() {
                eprintln!(
                    "bench/cluster: could not remove {}: {error}",
                    path.display()
                );
            }
        }
    }
}

impl Drop for Guards {
    fn drop(&mut self) {
        self.clean_up();
    }
}

fn main() -> Result<()> {
    let options = Options::parse()?;
    check_csg(&options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut guards = Guards::default();
    let result = runtime.block_on(async {
        tokio::select! {
            result = run(&options, &mut guards) => result,
            signal = interrupted() => Err(anyhow!("interrupted by {signal}")),
        }
    });
    if result.is_err() {
        for replica in &guards.replicas {
            eprintln!(
                "--- the end of replica {}'s log ({}):\n{}",
                replica.number,
                replica.log.display(),
                tail(&replica.log, 15)
            );
        }
    }
    eprintln!("bench/cluster: stopping the replicas and PostgreSQL, removing the temp directory");
    guards.clean_up();
    drop(runtime);
    result
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

/// The workspace this benchmark was built in (scripts/postgres.sh, the sources a stale `csg`
/// is checked against).
fn workspace() -> PathBuf {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    bench.parent().unwrap_or(bench).to_path_buf()
}

/// Refuses a missing `csg`, and one of this workspace's `target/` older than the sources it
/// is built from: the figures would describe other code.
fn check_csg(options: &Options) -> Result<()> {
    let built = std::fs::metadata(&options.csg)
        .and_then(|m| m.modified())
        .with_context(|| {
            format!(
                "no csg binary at {}: build it with `cargo build --release -p csg`, or pass --csg",
                options.csg.display()
            )
        })?;
    let root = workspace();
    let csg = options.csg.canonicalize()?;
    if options.allow_stale || !csg.starts_with(root.join("target")) {
        return Ok(());
    }
    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    let mut dirs = Vec::new();
    for krate in std::fs::read_dir(root.join("crates"))?.flatten() {
        files.push(krate.path().join("Cargo.toml"));
        dirs.push(krate.path().join("src"));
        dirs.push(krate.path().join("assets"));
    }
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let newer = files
        .into_iter()
        .filter_map(|f| Some((std::fs::metadata(&f).ok()?.modified().ok()?, f)))
        .filter(|(modified, _)| *modified > built)
        .max();
    if let Some((_, file)) = newer {
        bail!(
            "{} is older than {}: rebuild it with `cargo build --release -p csg` (or pass --allow-stale)",
            options.csg.display(),
            file.strip_prefix(&root).unwrap_or(&file).display()
        );
    }
    Ok(())
}

async fn run(options: &Options, guards: &mut Guards) -> Result<()> {
    // Under /tmp, open to others for traversal: the `postgres` user the server runs as (when
    // this runs as root) must reach its directory.
    let tmp = tempfile::Builder::new()
        .prefix("csg-bench-cluster-")
        .tempdir_in("/tmp")?;
    let base = tmp.path().to_path_buf();
    guards.tmp = Some(tmp);
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o711))?;
    let logs = match &options.logs {
        Some(dir) => dir.clone(),
        None => base.join("logs"),
    };
    std::fs::create_dir_all(&logs)?;

    let (source, corpus) = if options.small {
        let dest = base.join("corpus");
        let corpus = bench::corpus::build_corpus(&dest, SMALL_CORPUS_BYTES)?;
        (
            dest.canonicalize()?,
            format!(
                "{} files, {:.1} MiB of sources from cargo's registry (--small)",
                corpus.files.len(),
                corpus.bytes as f64 / 1048576.0
            ),
        )
    } else {
        let dest = base.join("source.git");
        let clone = bench::clone_big_repo(&options.repo, &dest, "bench/cluster")?;
        (
            dest.canonicalize()?,
            format!(
                "the head tree of {} ({})",
                options.repo.display(),
                &clone.source_head[..clone.source_head.len().min(12)]
            ),
        )
    };
    let files = pick_files(&source, options.reads)?;

    eprintln!("bench/cluster: starting PostgreSQL (scripts/postgres.sh) …");
    let postgres = guards.postgres.insert(Postgres {
        script: workspace().join("scripts/postgres.sh"),
        dir: base.join("pg"),
    });
    let database = postgres.start().await?;

    eprintln!("bench/cluster: registering {REPO} (csg --database … repo add) …");
    let started = Instant::now();
    register(&options.csg, &base.join("admin"), &database, &source).await?;
    let head = source_head(&source)?;
    eprintln!(
        "bench/cluster: registered {REPO} ({head}) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let secret = random_hex(24)?;
    for number in 1..=REPLICAS {
        let replica = Replica::start(options, number, &base, &logs, &database, &secret)?;
        guards.replicas.push(replica);
    }
    for replica in &mut guards.replicas {
        replica.wait_ready().await?;
    }
    eprintln!("bench/cluster: {REPLICAS} replicas ready; waiting until both owners hold {REPO} …");
    let started = Instant::now();
    let roles = settle(options, &mut guards.replicas, &secret, &files[0]).await?;
    eprintln!(
        "bench/cluster: ownership settled in {:.1} s; waiting for the replicas to go idle (index builds) …",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    wait_idle(&mut guards.replicas, options.settle).await?;
    eprintln!(
        "bench/cluster: idle after {:.1} s more; measuring",
        started.elapsed().as_secs_f64()
    );
    let setup = Setup {
        corpus,
        head,
        roles,
        files,
    };
    measure(options, &mut guards.replicas, &setup).await
}

/// What the measurement needs to know about the setup.
struct Setup {
    corpus: String,
    head: String,
    roles: Roles,
    files: Vec<File>,
}

/// `count` text files of MIN_FILE_BYTES to MAX_FILE_BYTES from the head tree of `source`
/// (regular, no NUL, UTF-8), distinct where the corpus has enough, in a deterministic shuffle.
fn pick_files(source: &Path, count: usize) -> Result<Vec<File>> {
    let candidates = bench::text_files(source, MIN_FILE_BYTES..=MAX_FILE_BYTES, |_| true)?;
    if candidates.is_empty() {
        bail!("no text file of {MIN_FILE_BYTES} to {MAX_FILE_BYTES} bytes in the corpus");
    }
    Ok((0..count)
        .map(|k| candidates[k % candidates.len()].clone())
        .collect())
}
