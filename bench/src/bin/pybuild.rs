//! `bench/pybuild` (issue 29 point 12): does a long index build stall the call-scoped hooks of
//! server plugins? One embedded Python interpreter runs every hook, so a full rebuild, which
//! runs `on_source_file` once per text file, competes with the `on_read_result` of every read.
//!
//! - The source is a bare `--shared` clone of a repository of 100 MB or more (default: the
//!   moby/moby mirror of this machine; its head's tree as one root commit when its history has
//!   missing objects), registered and synced into a temporary data directory.
//! - Server plugins: `10_source.py` defines `on_source_file` (a Markdown file gets a line
//!   appended to its indexed text; any other file is left as it is, `None`) and `20_notes.py`
//!   defines `on_read_result` (one operator note naming the paths read).
//! - A: no build running: `--runs` reads of a fixed 200-line range through
//!   `Service::read_enriched` (the read path of the MCP tool, `on_read_result` included),
//!   timed one by one, interleaved with as many base reads (`Service::read`, no hook) for
//!   reference.
//! - C: a full rebuild (`prepare` with action `reindex`: every text file through
//!   `on_source_file`) with nothing else running: its wall time.
//! - B: the same rebuild again while one caller does the same reads back to back until it
//!   ends: their percentiles (over the whole build, and over its first phase, the documents,
//!   when `on_source_file` runs), how many answered without the note (answered as without
//!   server plugins), `interpreter_wait_timeouts` before and after, and the build's wall time
//!   against C's.
//!
//! At the end a search for the line `on_source_file` appends checks that the transform is in
//! the index.

use anyhow::{Context, Result, bail};
use bench::{BIG_REPO_BYTES, BigClone, clone_big_repo, git, head_blobs};
use service::{
    CallContext, PluginHost, PrepareAction, PrepareRequest, ReadRequest, SearchRequest, Service,
    ServiceConfig,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: bench/pybuild [--runs N] [--repo PATH] [--allow-small] [--path PATH] [--no-alone]
--runs: timed reads of the baseline (default 2000); during the build the reads go on until it ends;
--repo: the source repository, cloned (bare, --shared) and never written (default: the
  moby/moby mirror at /work/.mirror/moby+moby/repo);
--allow-small: accept a head tree under 100 MiB (refused otherwise);
--path: the file read, lines 1-200 (default: README.md when it has 200 lines, else the
  root's Markdown file with the most lines);
--no-alone: skip phase C (the rebuild without concurrent reads).";

/// The registered name of the source repository.
const REPO: &str = "pybuild/source";
/// Lines of one read.
const READ_LINES: u64 = 200;
/// Untimed reads before the baseline (blob cache, plugin epoch, code paths).
const WARMUP_READS: usize = 50;
/// The line `on_source_file` appends to Markdown files (what the final search looks for).
const MARKER: &str = "pybuild-on-source-file-marker";
/// The start of the note `on_read_result` adds.
const NOTE: &str = "pybuild note:";

/// The derived-state plugin: a small, realistic transform of Markdown files.
fn source_plugin() -> String {
    format!(
        "\
def on_source_file(file):\n\
\x20   if not file[\"path\"].endswith((\".md\", \".markdown\")):\n\
\x20       return None\n\
\x20   text = file[\"text\"]\n\
\x20   if not text.endswith(\"\\n\"):\n\
\x20       text += \"\\n\"\n\
\x20   return {{\"text\": text + \"{MARKER}: indexed through on_source_file\\n\"}}\n"
    )
}

/// The call-scoped plugin: one operator note per read answer.
fn notes_plugin() -> String {
    format!(
        "\
def on_read_result(result):\n\
\x20   paths = \", \".join(item[\"path\"] for item in result[\"items\"])\n\
\x20   note = \"{NOTE} \" + paths + \" at \" + result[\"commit\"][:12]\n\
\x20   return {{\"notes\": result.get(\"notes\", []) + [note]}}\n"
    )
}

struct Options {
    runs: usize,
    repo: PathBuf,
    allow_small: bool,
    path: Option<String>,
    alone: bool,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Options {
            runs: 2000,
            repo: PathBuf::from(bench::DEFAULT_BIG_REPO),
            allow_small: false,
            path: None,
            alone: true,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            match flag.as_str() {
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--allow-small" => options.allow_small = true,
                "--no-alone" => options.alone = false,
                "--runs" | "--repo" | "--path" => {
                    let value = args
                        .next()
                        .with_context(|| format!("{flag} takes a value\n{USAGE}"))?;
                    match flag.as_str() {
                        "--runs" => {
                            options.runs =
                                value.parse().ok().filter(|n| *n > 0).with_context(|| {
                                    format!("--runs takes a positive number\n{USAGE}")
                                })?
                        }
                        "--repo" => options.repo = PathBuf::from(value),
                        _ => options.path = Some(value),
                    }
                }
                _ => bail!("unknown flag `{flag}`\n{USAGE}"),
            }
        }
        if !options.repo.is_dir() {
            bail!(
                "no repository at {}: pass --repo PATH (a Git repository of 100 MB or more)\n{USAGE}",
                options.repo.display()
            );
        }
        Ok(options)
    }
}

fn main() -> Result<()> {
    let options = Options::parse()?;
    let command: Vec<String> = std::env::args().skip(1).collect();
    println!("$ bench/pybuild {}", command.join(" "));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(options))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

fn line_count(text: &str) -> u64 {
    text.lines().count() as u64
}

/// The file the reads ask for: `--path`, else README.md when it has `READ_LINES` lines, else
/// the root's Markdown file with the most lines. Answers the path and its line count.
fn read_target(
    clone: &Path,
    blobs: &[bench::HeadBlob],
    path: Option<&str>,
) -> Result<(String, u64)> {
    let lines_of = |path: &str| -> Result<u64> {
        Ok(line_count(&git(
            clone,
            &["cat-file", "-p", &format!("HEAD:{path}")],
        )?))
    };
    if let Some(path) = path {
        if !blobs.iter().any(|b| b.path == path) {
            bail!("--path {path}: no such file at the head");
        }
        return Ok((path.to_string(), lines_of(path)?));
    }
    let mut best: Option<(String, u64)> = None;
    for blob in blobs {
        let regular = blob.mode == "100644" || blob.mode == "100755";
        if !regular || blob.path.contains('/') || !blob.path.to_lowercase().ends_with(".md") {
            continue;
        }
        let lines = lines_of(&blob.path)?;
        if blob.path == "README.md" && lines >= READ_LINES {
            return Ok((blob.path.clone(), lines));
        }
        if best.as_ref().is_none_or(|(_, most)| lines > *most) {
            best = Some((blob.path.clone(), lines));
        }
    }
    best.context("the head has no Markdown file at its root: pass --path")
}

/// One timed read.
#[derive(Clone, Copy)]
struct Timed {
    /// When it started, since its phase began.
    at: Duration,
    latency: Duration,
    /// Its answer lacked the note (answered as without server plugins); `None`: a base read,
    /// which runs no hook.
    without_note: Option<bool>,
}

/// Reads timed one by one.
#[derive(Default)]
struct Reads(Vec<Timed>);

impl Reads {
    /// One read through the read path of the MCP tool (`on_read_result` included).
    async fn one(&mut self, service: &Service, req: &ReadRequest, since: Instant) -> Result<()> {
        let start = Instant::now();
        let (item, enrichment) = service
            .read_enriched(&CallContext::default(), req.clone())
            .await?;
        let elapsed = start.elapsed();
        if let Err(error) = &item.outcome {
            bail!("the read failed: {error}");
        }
        let noted = enrichment
            .operator_notes
            .iter()
            .any(|n| n.starts_with(NOTE));
        self.0.push(Timed {
            at: start - since,
            latency: elapsed,
            without_note: Some(!noted),
        });
        Ok(())
    }

    /// One base read (`Service::read`: no plugin, no hook), for reference.
    async fn base(&mut self, service: &Service, req: &ReadRequest, since: Instant) -> Result<()> {
        let start = Instant::now();
        let item = service.read(&CallContext::default(), req.clone()).await?;
        let elapsed = start.elapsed();
        if let Err(error) = &item.outcome {
            bail!("the read failed: {error}");
        }
        self.0.push(Timed {
            at: start - since,
            latency: elapsed,
            without_note: None,
        });
        Ok(())
    }

    fn without_note(&self) -> usize {
        self.0
            .iter()
            .filter(|t| t.without_note == Some(true))
            .count()
    }
}

/// One row of the table: reads, percentiles, slow ones, answers without the note.
fn row<'a>(label: &str, reads: impl IntoIterator<Item = &'a Timed>) -> Option<Duration> {
    let reads: Vec<&Timed> = reads.into_iter().collect();
    if reads.is_empty() {
        println!("{label:<44} {:>7}", 0);
        return None;
    }
    let without_note = if reads.iter().all(|t| t.without_note.is_none()) {
        "-".to_string()
    } else {
        let n = reads
            .iter()
            .filter(|t| t.without_note == Some(true))
            .count();
        n.to_string()
    };
    let mut times: Vec<Duration> = reads.iter().map(|t| t.latency).collect();
    let over = |limit: Duration| times.iter().filter(|t| **t > limit).count();
    let (over_100ms, over_1s) = (
        over(Duration::from_millis(100)),
        over(Duration::from_secs(1)),
    );
    let p50 = bench::percentile(&mut times, 0.5);
    let p90 = bench::percentile(&mut times, 0.9);
    let p99 = bench::percentile(&mut times, 0.99);
    println!(
        "{label:<44} {:>7} {:>8.1} {:>8.1} {:>8.1} {:>9.0} {over_100ms:>7} {over_1s:>5} {without_note:>8}",
        times.len(),
        us(p50),
        us(p90),
        us(p99),
        us(*times.iter().max().expect("not empty")),
    );
    Some(p99)
}

/// A full rebuild of the index, on the runtime; `documents_done` gets the milliseconds since
/// `started` at which every document was written (the end of `on_source_file`'s phase).
fn rebuild(
    service: &Service,
    started: Instant,
    documents_done: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Result<service::PrepareAnswer, service::ServiceError>> {
    let service = service.clone();
    tokio::spawn(async move {
        let request = PrepareRequest {
            repo: REPO.into(),
            action: PrepareAction::Reindex,
            revision: None,
        };
        service
            .prepare(&CallContext::default(), request, move |p| {
                if p.done == p.total {
                    let at = started.elapsed().as_millis() as u64;
                    let _ = documents_done.compare_exchange(
                        u64::MAX,
                        at,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            })
            .await
    })
}

/// What one rebuild did: its wall time, when its documents were done and its report.
struct Build {
    wall: Duration,
    documents_after: Option<Duration>,
    report: service::IndexReport,
}

impl Build {
    fn describe(&self) -> String {
        format!(
            "{} documents ({} read from Git, {} reused, {} path only), {:.1} s wall, documents done after {}",
            self.report.documents,
            self.report.read,
            self.report.reused,
            self.report.path_only,
            self.wall.as_secs_f64(),
            self.documents_after
                .map_or("?".into(), |d| format!("{:.1} s", d.as_secs_f64())),
        )
    }
}

async fn finish(
    handle: tokio::task::JoinHandle<Result<service::PrepareAnswer, service::ServiceError>>,
    started: Instant,
    documents_done: &AtomicU64,
) -> Result<Build> {
    let answer = handle.await?.context("the rebuild failed")?;
    let wall = started.elapsed();
    let report = answer
        .index
        .context("the rebuild answered no index report")?;
    let at = documents_done.load(Ordering::Relaxed);
    Ok(Build {
        wall,
        documents_after: (at != u64::MAX).then(|| Duration::from_millis(at)),
        report,
    })
}

async fn run(options: Options) -> Result<()> {
    let run_started = Instant::now();
    let tmp = tempfile::Builder::new().prefix("csg-pybuild-").tempdir()?;
    let BigClone {
        dir: clone,
        source_head,
        missing,
    } = clone_big_repo(&options.repo, &tmp.path().join("source.git"), "pybuild")?;
    let blobs = head_blobs(&clone)?;
    let bytes: u64 = blobs.iter().map(|b| b.size).sum();
    if bytes < BIG_REPO_BYTES && !options.allow_small {
        bail!(
            "the head of {} holds {:.1} MiB in {} blobs, less than the {} MiB issue 29 asks for; pass --allow-small to measure it anyway",
            options.repo.display(),
            mib(bytes),
            blobs.len(),
            BIG_REPO_BYTES / 1048576
        );
    }
    let markdown = blobs
        .iter()
        .filter(|b| b.path.ends_with(".md") || b.path.ends_with(".markdown"))
        .count();
    let (path, total_lines) = read_target(&clone, &blobs, options.path.as_deref())?;

    let plugins = tmp.path().join("server-plugins");
    std::fs::create_dir_all(&plugins)?;
    std::fs::write(plugins.join("10_source.py"), source_plugin())?;
    std::fs::write(plugins.join("20_notes.py"), notes_plugin())?;
    // Loading the plugins waits for the interpreter thread: not on the runtime's thread.
    let config = service::HostConfig::new(plugins.clone());
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config)).await?;
    let status = host.status();
    if status.files.len() != 2 || !status.rejected.is_empty() {
        bail!("the two plugin files did not load: {status:?}");
    }
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: tmp.path().join("data"),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )?;
    let service = Service::with_server_plugins(store, ServiceConfig::default(), host);
    service
        .register(service::RegisterRequest {
            name: REPO.into(),
            source: clone.to_string_lossy().into_owned(),
            registered_path: String::new(),
            branch: None,
            private: None,
        })
        .await?;
    let synced = Instant::now();
    let sync = service.sync(REPO.into()).await?;
    let synced = synced.elapsed();
    let head = sync.head.context("the sync found no head")?;

    println!(
        "bench/pybuild: {REPO} = {} of {} at {} ({} blobs, {:.1} MiB at the head, {markdown} Markdown files), head {}; synced in {:.1} s",
        if missing > 0 {
            "the head's tree (history left out: missing objects)"
        } else {
            "a clone"
        },
        options.repo.display(),
        &source_head[..12],
        blobs.len(),
        mib(bytes),
        &head[..12],
        synced.as_secs_f64(),
    );
    println!(
        "server plugins: 10_source.py (on_source_file: Markdown files get a line appended), \
         20_notes.py (on_read_result: one note); hook time limit {} ms; {} cores",
        status.hook_timeout_ms,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let read = ReadRequest {
        repo: REPO.into(),
        revision: None,
        path: path.clone(),
        start_line: Some(1),
        end_line: Some(READ_LINES),
        plugins: None,
    };
    println!(
        "reads: {path} lines 1-{} (of {total_lines}) through Service::read_enriched (on_read_result), one at a time",
        READ_LINES.min(total_lines)
    );

    // A: the baseline, no build running.
    let mut warm = Reads::default();
    for _ in 0..WARMUP_READS {
        warm.one(&service, &read, Instant::now()).await?;
    }
    if warm.without_note() > 0 {
        bail!("on_read_result added no note to the warm-up reads");
    }
    // Interleaved with as many base reads, so drift of the machine hits both alike.
    let (mut baseline, mut base) = (Reads::default(), Reads::default());
    let since = Instant::now();
    for _ in 0..options.runs {
        base.base(&service, &read, since).await?;
        baseline.one(&service, &read, since).await?;
    }

    // C: the rebuild alone.
    let alone = if options.alone {
        eprintln!("pybuild: phase C, the rebuild without reads …");
        let started = Instant::now();
        let done = Arc::new(AtomicU64::new(u64::MAX));
        let handle = rebuild(&service, started, done.clone());
        Some(finish(handle, started, &done).await?)
    } else {
        None
    };

    // B: the rebuild with reads back to back until it ends.
    eprintln!("pybuild: phase B, the rebuild with reads …");
    let timeouts_before = service.server_plugins().interpreter_wait_timeouts();
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(u64::MAX));
    let handle = rebuild(&service, started, done.clone());
    let mut during = Reads::default();
    while !handle.is_finished() {
        during.one(&service, &read, started).await?;
    }
    let with_reads = finish(handle, started, &done).await?;
    let timeouts_after = service.server_plugins().interpreter_wait_timeouts();

    // The transform is in the index: the appended line is found in the Markdown files.
    let found = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: MARKER.into(),
                repo: Some(REPO.into()),
                limit: Some(1),
                ..SearchRequest::default()
            },
        )
        .await?;

    println!();
    println!(
        "{:<44} {:>7} {:>8} {:>8} {:>8} {:>9} {:>7} {:>5} {:>8}",
        "reads", "count", "p50 µs", "p90 µs", "p99 µs", "max µs", ">100ms", ">1s", "no note"
    );
    row("A0 no build, base read (no hook)", &base.0);
    let base_p99 = row("A  no build (baseline)", &baseline.0);
    let during_p99 = row("B  during the rebuild", &during.0);
    if let Some(at) = with_reads.documents_after {
        row(
            "B    of them while documents are built",
            during.0.iter().filter(|t| t.at < at),
        );
        row(
            "B    of them after (symbols, publication)",
            during.0.iter().filter(|t| t.at >= at),
        );
    }
    println!();
    if let Some(alone) = &alone {
        println!("C  rebuild alone:      {}", alone.describe());
    }
    println!("B  rebuild with reads: {}", with_reads.describe());
    if let Some(alone) = &alone {
        println!(
            "   the reads cost the rebuild {:+.1} % wall time ({:.1} s against {:.1} s alone; C ran first; the reader, back to back, keeps a core busy)",
            (with_reads.wall.as_secs_f64() / alone.wall.as_secs_f64() - 1.0) * 100.0,
            with_reads.wall.as_secs_f64(),
            alone.wall.as_secs_f64()
        );
    }
    match (base_p99, during_p99) {
        (Some(base), Some(during)) => println!(
            "p99 during the rebuild / p99 without: {:.2} ms / {:.2} ms = {:.1}x",
            us(during) / 1000.0,
            us(base) / 1000.0,
            during.as_secs_f64() / base.as_secs_f64().max(1e-9)
        ),
        _ => println!("p99 during the rebuild / p99 without: no reads during the rebuild"),
    }
    println!(
        "reads answered without server plugins (no note) during the rebuild: {} of {}",
        during.without_note(),
        during.0.len()
    );
    println!(
        "interpreter_wait_timeouts: {timeouts_before} before B, {timeouts_after} after (+{})",
        timeouts_after - timeouts_before
    );
    println!(
        "on_source_file in the index: the appended line found in {} files (of {markdown} Markdown files at the head)",
        found.stats.total_hits
    );
    println!(
        "bench/pybuild took {:.0} s (clone, sync and the final search included)",
        run_started.elapsed().as_secs_f64()
    );
    Ok(())
}
