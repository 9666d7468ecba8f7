//! `bench/soak` (issue 28; not run in CI): the real `csg serve` under a long mixed load while
//! the registry and the server plugins change underneath it.
//!
//! - The source is a clone (bare, `--shared`: the given repository is never written) of a real
//!   repository of 100 MB or more (default: the moby/moby mirror of this machine), plus one
//!   commit that places the committed repository-plugin fixtures in it: `echo` at the root and
//!   in the largest top directory (nearest-ancestor resolution), `related-content` in the
//!   second and `evidence-chain` in the third, each with its JSON.
//! - `csg serve` (the binary beside this one) runs on 127.0.0.1 with an ephemeral port, a
//!   temporary data directory, that clone registered, server plugins on (one small Python file
//!   with a table and an `on_read_result` hook) and an operator (a `--prepare` user and its
//!   token, made with `csg user|token` before the start).
//! - `--clients` MCP clients over Streamable HTTP (`?plugins=auto`), each in a loop for
//!   `--minutes`: `read` of a random text file of the head, `read_many` of 3-5, `availability`
//!   with `include_plugins`, now and then `search` of a common identifier. Every answer is
//!   checked (commit, path, start line, no item error, the attachments each plugin must add
//!   unless a `PluginDiagnostics` line names that plugin), every latency recorded.
//! - Meanwhile every 5 s a second, small repository (served by `git daemon` on 127.0.0.1) is
//!   registered through `POST /sourcegraph/api/repos` or removed with `csg repo remove` on the
//!   same data directory, alternately; every 7 s the server plugin file is rewritten and
//!   reloaded, alternately through `POST /sourcegraph/api/plugins/reload` and the MCP tool
//!   `reload_plugins`; every 10 s the server's VmRSS is sampled.
//!
//! At the end: calls, failures by tool and by error, latency percentiles per tool, calls over
//! 2 s, RSS after the warm-up against the end, registrations, removals and reloads, and
//! PASS/MISS lines; the exit status is non-zero on any MISS. The server and `git daemon` are
//! killed at the end, on error and on Ctrl-C (which ends the run early, with its report).

use anyhow::{Context, Result, bail};
use bench::{BIG_REPO_BYTES, BigClone, clone_big_repo, git, git_input, head_blobs};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USAGE: &str = "usage: bench/soak [--minutes N] [--clients N] [--repo PATH] [--debug] \
[--csg PATH] [--logs DIR] [--ready-timeout SECONDS]
--minutes: how long the load runs (default 10; fractions allowed);
--clients: concurrent MCP clients (default 64);
--repo: the source repository, cloned (bare, --shared) and never written (default: the
  moby/moby mirror at /work/.mirror/moby+moby/repo when present);
--debug (bench/soak only): a debug build of csg and of this benchmark, for quick trials;
--csg: the csg binary (default: the one beside this benchmark);
--logs DIR: keep the server's log there (default: in the temp dir, removed at the end);
--ready-timeout: how long to wait for the first index of the source (default 1800 s).";

const DEFAULT_REPO: &str = bench::DEFAULT_BIG_REPO;
/// The registered name of the big source repository.
const REPO: &str = "soak/source";
/// The small repository registered and removed every 5 s.
const SMALL: &str = "soak/small";
/// A call slower than this is a MISS.
const SLOW: Duration = Duration::from_secs(2);
/// A call without an answer after this is a failure (and the client goes on).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Registration (fetch + index of the small repository), removal and reload timeout.
const CHURN_TIMEOUT: Duration = Duration::from_secs(120);
const REGISTER_EVERY: Duration = Duration::from_secs(5);
const RELOAD_EVERY: Duration = Duration::from_secs(7);
const RSS_EVERY: Duration = Duration::from_secs(10);
/// RSS at the first sample after this much of the run (or half of a shorter run) is the
/// baseline the end is compared with.
const WARMUP: Duration = Duration::from_secs(60);
/// Files read by the clients: text (UTF-8, no NUL) of this size range.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
const TOOLS: [&str; 4] = ["read", "read_many", "availability", "search"];
const READ: usize = 0;
const READ_MANY: usize = 1;
const AVAILABILITY: usize = 2;
const SEARCH: usize = 3;
/// Failures and slow calls shown per group.
const EXAMPLES: usize = 5;

struct Options {
    minutes: f64,
    clients: usize,
    repo: PathBuf,
    csg: PathBuf,
    logs: Option<PathBuf>,
    ready_timeout: Duration,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut minutes = 10.0;
        let mut clients = 64;
        let mut repo = None;
        let mut csg = std::env::current_exe()?
            .parent()
            .context("the bench binary has a directory")?
            .join("csg");
        let mut logs = None;
        let mut ready_timeout = Duration::from_secs(1800);
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            if flag == "--debug" {
                // The wrapper script chose the build; nothing to do here.
                continue;
            }
            let value = args
                .next()
                .with_context(|| format!("{flag} takes a value\n{USAGE}"))?;
            let number = || -> Result<f64> {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n > 0.0)
                    .with_context(|| format!("{flag} takes a positive number\n{USAGE}"))
            };
            match flag.as_str() {
                "--minutes" => minutes = number()?,
                "--clients" => clients = number()?.round().max(1.0) as usize,
                "--ready-timeout" => ready_timeout = Duration::from_secs_f64(number()?),
                "--repo" => repo = Some(PathBuf::from(&value)),
                "--csg" => csg = PathBuf::from(&value),
                "--logs" => logs = Some(PathBuf::from(&value)),
                _ => bail!("unknown flag `{flag}`\n{USAGE}"),
            }
        }
        let repo = match repo {
            Some(repo) => repo,
            None if Path::new(DEFAULT_REPO).is_dir() => PathBuf::from(DEFAULT_REPO),
            None => bail!(
                "no repository: pass --repo PATH (a Git repository of 100 MB or more; {DEFAULT_REPO} is absent)\n{USAGE}"
            ),
        };
        if !csg.is_file() {
            bail!(
                "no csg binary at {}: bench/soak builds it (cargo build --release -p csg), or pass --csg",
                csg.display()
            );
        }
        Ok(Options {
            minutes,
            clients,
            repo,
            csg,
            logs,
            ready_timeout,
        })
    }
}

fn main() -> Result<()> {
    let options = Options::parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let passed = runtime.block_on(run(options))?;
    // The clients' transports may still hold tasks; do not wait for them.
    runtime.shutdown_timeout(Duration::from_secs(5));
    if !passed {
        std::process::exit(1);
    }
    Ok(())
}

// ---- the head ----------------------------------------------------------------------------------

/// A text file of the head the clients read.
struct SourceFile {
    path: String,
    lines: u64,
}

/// What the head of the clone holds: its text files and a few common identifiers.
struct Corpus {
    blobs: usize,
    bytes: u64,
    files: Vec<SourceFile>,
    identifiers: Vec<String>,
}

fn line_count(text: &[u8]) -> u64 {
    let newlines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with(b"\n"))
}

/// Lists the head's blobs (`ls-tree -r -l`), reads those of 1 byte to 1 MiB through one
/// `git cat-file --batch` and keeps the text ones (UTF-8, no NUL), with their line counts;
/// counts identifiers over a sample of them.
fn scan_head(dir: &Path) -> Result<Corpus> {
    let listing = head_blobs(dir)?;
    let (blobs, bytes) = (listing.len(), listing.iter().map(|b| b.size).sum::<u64>());
    let candidates: Vec<(String, String)> = listing
        .into_iter()
        .filter(|b| {
            (b.mode == "100644" || b.mode == "100755") && (1..=MAX_FILE_BYTES).contains(&b.size)
        })
        .map(|b| (b.id, b.path))
        .collect();
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("cat-file stdin")?;
    let input: String = candidates.iter().map(|(id, _)| format!("{id}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().context("cat-file stdout")?);
    let mut files = Vec::new();
    let mut documents: Vec<HashSet<String>> = Vec::new();
    let sample_every = (candidates.len() / 600).max(1);
    let (mut header, mut body) = (String::new(), Vec::new());
    for (index, (_, path)) in candidates.iter().enumerate() {
        bench::read_batch_object(&mut stdout, &mut header, &mut body)?;
        if body.contains(&0) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&body) else {
            continue;
        };
        files.push(SourceFile {
            path: path.clone(),
            lines: line_count(&body),
        });
        if index % sample_every == 0 {
            documents.push(identifiers_of(text));
        }
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the cat-file writer panicked"))??;
    child.wait()?;
    if files.is_empty() {
        bail!("the head of {} has no text file", dir.display());
    }
    Ok(Corpus {
        blobs,
        bytes,
        files,
        identifiers: common_identifiers(&documents),
    })
}

/// The code-like identifiers of 8 to 30 characters of one text.
fn identifiers_of(text: &str) -> HashSet<String> {
    // Code-like: camelCase/PascalCase or snake_case, not a plain word of prose.
    let code_like = |w: &str| {
        w.contains('_')
            || w.as_bytes()
                .windows(2)
                .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
    };
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| (8..=30).contains(&w.len()))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|w| code_like(w))
        .map(str::to_string)
        .collect()
}

/// Eight identifiers that occur in 2-8 % of the sampled files (common, but not every file's
/// boilerplate), the most frequent first; the most frequent ones when none is in that band.
fn common_identifiers(documents: &[HashSet<String>]) -> Vec<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for document in documents {
        for word in document {
            *counts.entry(word).or_default() += 1;
        }
    }
    let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let n = documents.len().max(1);
    let band: Vec<String> = ranked
        .iter()
        .filter(|(_, c)| *c * 50 >= n && *c * 100 <= n * 8 && *c >= 2)
        .take(8)
        .map(|(w, _)| w.to_string())
        .collect();
    if band.is_empty() {
        ranked.iter().take(8).map(|(w, _)| w.to_string()).collect()
    } else {
        band
    }
}

// ---- repository plugins ------------------------------------------------------------------------

/// Where the committed plugins are and what each read item must therefore carry.
struct Layout {
    /// Directories with `echo.sourcegraph.wasm`: `""` and the largest top directory.
    echo_dirs: Vec<String>,
    /// The directory with `related-content` (every file below it gets `related:`).
    related: Option<String>,
    /// The directory with `evidence-chain` and the paths (repository-relative) its
    /// `evidence.json` names (those get `references:`).
    evidence: Option<(String, HashSet<String>)>,
    /// Plugin artifacts committed (what `availability` must list).
    artifacts: usize,
}

impl Layout {
    /// The echo plugin that applies to `path` (the nearest ancestor): its directory and the
    /// path relative to it.
    fn echo_for<'a>(&self, path: &'a str) -> (&str, &'a str) {
        self.echo_dirs
            .iter()
            .filter_map(|dir| {
                if dir.is_empty() {
                    Some((dir.as_str(), path))
                } else {
                    path.strip_prefix(dir.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                        .map(|rest| (dir.as_str(), rest))
                }
            })
            .max_by_key(|(dir, _)| dir.len())
            .expect("the root echo applies to every path")
    }

    fn related_applies(&self, path: &str) -> bool {
        self.related
            .as_ref()
            .is_some_and(|dir| path.starts_with(&format!("{dir}/")))
    }

    fn evidence_applies(&self, path: &str) -> bool {
        self.evidence
            .as_ref()
            .is_some_and(|(_, keys)| keys.contains(path))
    }
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/wasmplugin/testdata")
}

/// Adds one commit to the bare clone `dir` with the plugins (plumbing only: no work tree).
fn commit_plugins(dir: &Path, tmp: &Path, files: &[SourceFile]) -> Result<Layout> {
    // Top directories by text files, largest first.
    let mut tops: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for file in files {
        if let Some((top, _)) = file.path.split_once('/') {
            tops.entry(top).or_default().push(&file.path);
        }
    }
    let mut tops: Vec<(&str, Vec<&str>)> = tops.into_iter().collect();
    tops.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let rel = |top: &str, path: &str| path[top.len() + 1..].to_string();
    let mut added: Vec<(String, Vec<u8>)> = Vec::new();
    let wasm = |name: &str| -> Result<Vec<u8>> {
        let path = testdata().join(format!("{name}.sourcegraph.wasm"));
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    added.push(("echo.sourcegraph.wasm".into(), wasm("echo")?));
    let mut layout = Layout {
        echo_dirs: vec![String::new()],
        related: None,
        evidence: None,
        artifacts: 1,
    };
    if let Some((top, _)) = tops.first() {
        added.push((format!("{top}/echo.sourcegraph.wasm"), wasm("echo")?));
        layout.echo_dirs.push(top.to_string());
        layout.artifacts += 1;
    }
    if let Some((top, paths)) = tops.get(1) {
        let related: Vec<String> = paths.iter().take(2).map(|p| rel(top, p)).collect();
        let json = serde_json::json!({ "**": related });
        added.push((
            format!("{top}/related-content.sourcegraph.wasm"),
            wasm("related-content")?,
        ));
        added.push((format!("{top}/related.json"), json.to_string().into_bytes()));
        layout.related = Some(top.to_string());
        layout.artifacts += 1;
    }
    if let Some((top, paths)) = tops.get(2) {
        let mut evidence = serde_json::Map::new();
        let mut keys = HashSet::new();
        // Every other file of the directory points at the next one.
        for pair in paths.chunks(2).take(200) {
            let target = pair.get(1).unwrap_or(&pair[0]);
            evidence.insert(
                rel(top, pair[0]),
                serde_json::json!([{"path": rel(top, target), "start_line": 1, "end_line": 3,
                    "note": "soak evidence"}]),
            );
            keys.insert(pair[0].to_string());
        }
        added.push((
            format!("{top}/evidence-chain.sourcegraph.wasm"),
            wasm("evidence-chain")?,
        ));
        added.push((
            format!("{top}/evidence.json"),
            serde_json::Value::Object(evidence).to_string().into_bytes(),
        ));
        layout.evidence = Some((top.to_string(), keys));
        layout.artifacts += 1;
    }
    let index = tmp.join("plugin-commit.index");
    let index = index.to_str().context("temp path is not UTF-8")?;
    let git_dir = dir.to_str().context("clone path is not UTF-8")?;
    let with_index = |args: &[&str]| -> Result<String> {
        let mut all = vec!["--git-dir", git_dir, "-c", "core.bare=false"];
        all.extend_from_slice(args);
        let out = Command::new("git")
            .current_dir(dir)
            .env("GIT_INDEX_FILE", index)
            .args(&all)
            .output()?;
        if !out.status.success() {
            bail!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    with_index(&["read-tree", "HEAD"])?;
    for (path, bytes) in &added {
        let id = git_input(dir, &["hash-object", "-w", "--stdin"], Some(bytes))?;
        with_index(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{id},{path}"),
        ])?;
    }
    let tree = with_index(&["write-tree"])?;
    let commit = git(
        dir,
        &[
            "commit-tree",
            &tree,
            "-p",
            "HEAD",
            "-m",
            "soak: repository plugins",
        ],
    )?;
    git(dir, &["update-ref", "HEAD", &commit])?;
    for (path, _) in &added {
        eprintln!("  + {path}");
    }
    Ok(layout)
}

// ---- child processes ---------------------------------------------------------------------------

/// A child process killed (with its process group when it has one of its own) when dropped:
/// at the end, on error and on panic.
struct Guard {
    name: &'static str,
    child: Option<tokio::process::Child>,
    pid: i32,
    own_group: bool,
}

impl Guard {
    fn new(name: &'static str, child: tokio::process::Child, own_group: bool) -> Result<Self> {
        let pid = child.id().context("the child has a pid")? as i32;
        Ok(Guard {
            name,
            child: Some(child),
            pid,
            own_group,
        })
    }

    fn signal(&self, signal: i32) {
        let target = if self.own_group { -self.pid } else { self.pid };
        // SAFETY: kill(2) on our own child (or its group), not yet reaped while `child` is held.
        unsafe { libc::kill(target, signal) };
    }

    /// SIGTERM, then SIGKILL after `grace`; answers how it ended and how long it took.
    async fn stop(&mut self, grace: Duration) -> String {
        let Some(mut child) = self.child.take() else {
            return "already stopped".into();
        };
        if let Ok(Some(status)) = child.try_wait() {
            return format!("had already exited ({status})");
        }
        let started = Instant::now();
        self.signal(libc::SIGTERM);
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(Ok(status)) => format!(
                "stopped by SIGTERM in {:.1} s ({status})",
                started.elapsed().as_secs_f64()
            ),
            _ => {
                self.signal(libc::SIGKILL);
                let _ = child.wait().await;
                format!("did not stop within {grace:?} of SIGTERM: killed")
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                eprintln!("soak: killing {} (pid {})", self.name, self.pid);
                self.signal(libc::SIGKILL);
            }
            let _ = child.start_kill();
        }
    }
}

/// Asks the kernel to kill the child when this thread (the main one, which runs the run)
/// ends, so a killed benchmark leaves no server behind.
fn die_with_parent(command: &mut tokio::process::Command) {
    // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn csg_cli(options: &Options, data: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(&options.csg)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", options.csg.display()))?;
    if !out.status.success() {
        bail!(
            "csg {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A free port on 127.0.0.1 (closed again: `git daemon` binds it a moment later).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The small repository (`small.git` under `root`) and `git daemon` serving it read-only.
async fn small_repo_daemon(tmp: &Path) -> Result<(Guard, String)> {
    let work = tmp.join("small-work");
    std::fs::create_dir_all(work.join("src"))?;
    std::fs::write(
        work.join("README.md"),
        "# Small\n\nRegistered and removed by bench/soak.\n",
    )?;
    std::fs::write(
        work.join("src/lib.rs"),
        "/// The answer.\npub fn answer() -> u32 {\n    42\n}\n",
    )?;
    git(&work, &["init", "-q", "-b", "main"])?;
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "small"])?;
    let root = tmp.join("daemon-root");
    std::fs::create_dir_all(&root)?;
    git(
        tmp,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().context("UTF-8 path")?,
            root.join("small.git").to_str().context("UTF-8 path")?,
        ],
    )?;
    let port = free_port()?;
    // `git-daemon` itself, not the `git` wrapper (which would leave it behind when killed).
    let exec_path = git(tmp, &["--exec-path"])?;
    let mut command = tokio::process::Command::new(Path::new(&exec_path).join("git-daemon"));
    command
        .arg("--reuseaddr")
        .arg("--export-all")
        .arg("--listen=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", root.display()))
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.join("git-daemon.log"))?)
        .process_group(0)
        .kill_on_drop(true);
    die_with_parent(&mut command);
    let guard = Guard::new("git daemon", command.spawn()?, true)?;
    let url = format!("git://127.0.0.1:{port}/small.git");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
            && git(tmp, &["ls-remote", &url]).is_ok()
        {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "git daemon did not serve {url} within 20 s; see {}",
                tmp.join("git-daemon.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((guard, url))
}

/// The server plugin file, version `n` (each reload sees a changed file).
fn server_plugin(n: u64) -> String {
    format!(
        "\"\"\"bench/soak's server plugin, version {n}: a query alias and a note on README reads.\"\"\"\n\
         \n\
         QUERY_ALIASES = {{\"soakalias\": \"TODO\"}}\n\
         \n\
         \n\
         def on_read_result(result):\n\
         \x20   if any(item[\"path\"].endswith(\"README.md\") for item in result[\"items\"]):\n\
         \x20       return {{\"notes\": result.get(\"notes\", []) + [\"soak note, version {n}\"]}}\n\
         \x20   return None\n"
    )
}

fn write_server_plugin(dir: &Path, n: u64) -> Result<()> {
    let staged = dir.with_extension("staged.py");
    std::fs::write(&staged, server_plugin(n))?;
    std::fs::rename(&staged, dir.join("10_soak.py"))?;
    Ok(())
}

// ---- HTTP --------------------------------------------------------------------------------------

/// One HTTP/1.1 request to the server over a fresh loopback connection (`Connection:
/// close`); answers the status and the body (chunked bodies decoded).
async fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = body.unwrap_or("");
    if method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, rest) = raw.split_once("\r\n\r\n").context("no HTTP header end")?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .context("no HTTP status")?
        .parse()?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 || after.len() < size {
                break;
            }
            out.push_str(&after[..size]);
            rest = after[size..].trim_start_matches("\r\n");
        }
        out
    } else {
        rest.to_string()
    };
    Ok((status, body))
}

// ---- MCP calls and their checks ----------------------------------------------------------------

fn call(name: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    let serde_json::Value::Object(map) = args else {
        unreachable!("a JSON object literal")
    };
    CallToolRequestParams::new(name).with_arguments(map)
}

fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    cut(line, 160)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// An `isError` result as a failure text.
fn tool_error(result: &CallToolResult) -> Option<String> {
    (result.is_error == Some(true)).then(|| {
        format!(
            "isError: {}",
            first_line(texts(result).first().copied().unwrap_or("(no text)"))
        )
    })
}

/// What the shared state of a run gives every client.
struct Shared {
    /// When the load started (set once the source is ready).
    started: std::sync::OnceLock<Instant>,
    files: Vec<SourceFile>,
    identifiers: Vec<String>,
    layout: Layout,
    head: String,
    stop: AtomicBool,
    calls: AtomicU64,
    failures: AtomicU64,
    slow: AtomicU64,
}

/// One client's record.
#[derive(Default)]
struct Record {
    latencies: [Vec<Duration>; 4],
    failed: [u64; 4],
    /// (tool, error) → (count, example arguments).
    errors: BTreeMap<(usize, String), (u64, String)>,
    /// (latency, time into the run it started at, tool, arguments) of calls over SLOW.
    slow: Vec<(Duration, Duration, usize, String)>,
    /// `code=… plugin=…` of PluginDiagnostics lines → count.
    diagnostics: BTreeMap<String, u64>,
    /// Reads whose answer carried an OperatorNotes block.
    notes: u64,
}

impl Record {
    fn merge(&mut self, other: Record) {
        for tool in 0..TOOLS.len() {
            self.latencies[tool].extend_from_slice(&other.latencies[tool]);
            self.failed[tool] += other.failed[tool];
        }
        for (key, (count, example)) in other.errors {
            let entry = self.errors.entry(key).or_insert((0, example));
            entry.0 += count;
        }
        self.slow.extend(other.slow);
        for (key, count) in other.diagnostics {
            *self.diagnostics.entry(key).or_default() += count;
        }
        self.notes += other.notes;
    }
}

/// xorshift64*: enough randomness for picking files, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random file and a start line: line 1 for two reads in three, else any line of it.
fn pick<'a>(shared: &'a Shared, rng: &mut Rng) -> (&'a SourceFile, u64) {
    let file = &shared.files[rng.below(shared.files.len())];
    let start = if rng.below(3) == 0 {
        1 + rng.next() % file.lines.max(1)
    } else {
        1
    };
    (file, start)
}

/// Checks the blocks of a `read`/`read_many` answer against the items asked: commit, path,
/// start line, no item error, and the attachment each applicable plugin adds (unless a
/// diagnostic names the plugin: those are counted, not failed).
fn check_read(
    shared: &Shared,
    result: &CallToolResult,
    items: &[(&SourceFile, u64)],
    record: &mut Record,
) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let blocks = texts(result);
    let mut diagnosed = HashSet::new();
    for block in &blocks {
        if let Some(lines) = block.strip_prefix("PluginDiagnostics:") {
            for line in lines.lines().filter_map(|l| l.strip_prefix("- ")) {
                let mut fields = line.split(' ');
                let code = fields.next().unwrap_or("").to_string();
                let plugin = fields.next().unwrap_or("").to_string();
                diagnosed.insert(plugin.trim_start_matches("plugin=").to_string());
                *record
                    .diagnostics
                    .entry(format!("{code} {plugin}"))
                    .or_default() += 1;
            }
        }
        if block.starts_with("OperatorNotes:") {
            record.notes += 1;
        }
    }
    for (i, (file, start)) in items.iter().enumerate() {
        let block = blocks
            .get(i)
            .ok_or_else(|| format!("{} blocks for {} items", blocks.len(), items.len()))?;
        let header = block.split("\n\n").next().unwrap_or("");
        if let Some(error) = header.lines().find(|l| l.starts_with("Error: ")) {
            return Err(format!("item error: {}", cut(error, 160)));
        }
        let expect = |field: &str, value: &str| -> Result<(), String> {
            if header.lines().any(|l| l == format!("{field}: {value}")) {
                Ok(())
            } else {
                Err(format!("item without `{field}: {}`", cut(value, 60)))
            }
        };
        expect("Commit", &shared.head)?;
        expect("Path", &file.path)?;
        expect("StartLine", &start.to_string())?;
        let (root, rel) = shared.layout.echo_for(&file.path);
        let echoed = block.contains(&format!("\necho read-{i} {rel} "))
            && block.contains(&format!(" root={root} op="));
        if !echoed && !diagnosed.contains("echo") {
            return Err(format!("no echo attachment (root `{root}`)"));
        }
        if shared.layout.related_applies(&file.path)
            && !block.contains("\nrelated:\n")
            && !diagnosed.contains("related-content")
        {
            return Err("no related-content attachment".into());
        }
        if shared.layout.evidence_applies(&file.path)
            && !block.contains("\nreferences:\n")
            && !diagnosed.contains("evidence-chain")
        {
            return Err("no evidence-chain attachment".into());
        }
    }
    Ok(())
}

fn check_availability(shared: &Shared, result: &CallToolResult) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let text = texts(result).join("\n");
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        format!("Commit: {}", shared.head),
        "Readable: true".to_string(),
        "Indexed: true".to_string(),
        format!("Plugins: {}", shared.layout.artifacts),
    ] {
        if !lines.contains(&want.as_str()) {
            let got = lines
                .iter()
                .find(|l| l.starts_with(want.split(':').next().unwrap_or("")))
                .copied()
                .unwrap_or("(none)");
            return Err(format!("expected `{want}`, got `{}`", cut(got, 120)));
        }
    }
    if let Some(line) = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Diagnostic: "))
    {
        return Err(format!("plugin diagnostic: {}", cut(line.trim(), 120)));
    }
    Ok(())
}

fn check_search(shared: &Shared, result: &CallToolResult) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let text = texts(result).join("\n");
    if text.contains(&format!("NotIndexed: {REPO} ")) {
        return Err(format!("{REPO} not indexed"));
    }
    if !text.contains(&format!("Repo: {REPO}\nCommit: {}\n", shared.head)) {
        return Err(format!("no hit in {REPO} at the head"));
    }
    Ok(())
}

/// One client: calls until `stop`, each checked and timed.
async fn client_loop(id: usize, peer: Peer<RoleClient>, shared: Arc<Shared>) -> Record {
    let mut record = Record::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x1000_0000_01B3));
    while !shared.stop.load(Ordering::Relaxed) {
        let roll = rng.below(100);
        let (tool, params, items) = if roll < 45 {
            let (file, start) = pick(&shared, &mut rng);
            let params = call(
                "read",
                serde_json::json!({"repo": REPO, "path": file.path, "start_line": start}),
            );
            (READ, params, vec![(file, start)])
        } else if roll < 70 {
            let items: Vec<(&SourceFile, u64)> = (0..3 + rng.below(3))
                .map(|_| pick(&shared, &mut rng))
                .collect();
            let files: Vec<serde_json::Value> = items
                .iter()
                .map(|(f, s)| serde_json::json!({"path": f.path, "start_line": s}))
                .collect();
            let params = call(
                "read_many",
                serde_json::json!({"repo": REPO, "files": files}),
            );
            (READ_MANY, params, items)
        } else if roll < 92 {
            let params = call(
                "availability",
                serde_json::json!({"repo": REPO, "include_plugins": true}),
            );
            (AVAILABILITY, params, Vec::new())
        } else {
            let query = &shared.identifiers[rng.below(shared.identifiers.len())];
            // Half over every repository (the churned one included), half over the source.
            let params = if rng.below(2) == 0 {
                call("search", serde_json::json!({"query": query}))
            } else {
                call("search", serde_json::json!({"query": query, "repo": REPO}))
            };
            (SEARCH, params, Vec::new())
        };
        let summary = cut(
            &serde_json::Value::Object(params.arguments.clone().unwrap_or_default()).to_string(),
            200,
        );
        let started = Instant::now();
        let outcome = tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(params)).await;
        let elapsed = started.elapsed();
        let verdict = match outcome {
            Err(_) => Err(format!("no answer within {} s", CALL_TIMEOUT.as_secs())),
            Ok(Err(error)) => Err(format!("transport: {}", cut(&error.to_string(), 160))),
            Ok(Ok(result)) => match tool {
                READ | READ_MANY => check_read(&shared, &result, &items, &mut record),
                AVAILABILITY => check_availability(&shared, &result),
                _ => check_search(&shared, &result),
            },
        };
        record.latencies[tool].push(elapsed);
        shared.calls.fetch_add(1, Ordering::Relaxed);
        if elapsed > SLOW {
            shared.slow.fetch_add(1, Ordering::Relaxed);
            let at = started.saturating_duration_since(*shared.started.get_or_init(Instant::now));
            record.slow.push((elapsed, at, tool, summary.clone()));
        }
        if let Err(error) = verdict {
            // A stop by Ctrl-C also stops the server: what fails after it is not counted.
            if shared.stop.load(Ordering::Relaxed) {
                record.latencies[tool].pop();
                break;
            }
            record.failed[tool] += 1;
            shared.failures.fetch_add(1, Ordering::Relaxed);
            record.errors.entry((tool, error)).or_insert((0, summary)).0 += 1;
        }
    }
    record
}

// ---- churn: registrations, removals, reloads ---------------------------------------------------

#[derive(Default)]
struct Churn {
    /// (action, latency, error) of every registration, removal or reload.
    actions: Vec<(&'static str, Duration, Option<String>)>,
}

impl Churn {
    fn push(&mut self, action: &'static str, elapsed: Duration, result: Result<()>) {
        let error = result.err().map(|e| cut(&format!("{e:#}"), 200));
        if let Some(error) = &error {
            eprintln!("soak: {action} failed after {elapsed:.1?}: {error}");
        }
        self.actions.push((action, elapsed, error));
    }
}

struct Server {
    addr: String,
    token: String,
    data: PathBuf,
    plugins: PathBuf,
}

/// Every REGISTER_EVERY: registers the small repository through the JSON API or removes it
/// with `csg repo remove`, alternately, until `stop`.
async fn registrations(
    options: Arc<Options>,
    server: Arc<Server>,
    small_url: String,
    operator: Peer<RoleClient>,
    shared: Arc<Shared>,
) -> Churn {
    let mut churn = Churn::default();
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + REGISTER_EVERY, REGISTER_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut registered = false;
    loop {
        tick.tick().await;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let started = Instant::now();
        if registered {
            let (options, data) = (options.clone(), server.data.clone());
            let removal = tokio::time::timeout(
                CHURN_TIMEOUT,
                tokio::task::spawn_blocking(move || {
                    csg_cli(&options, &data, &["repo", "remove", SMALL])
                }),
            )
            .await;
            let result = match removal {
                Err(_) => Err(anyhow::anyhow!("no end within {CHURN_TIMEOUT:?}")),
                Ok(joined) => joined
                    .map_err(anyhow::Error::from)
                    .and_then(|r| r)
                    .map(|_| ()),
            };
            registered = result.is_err();
            let result = match result {
                Ok(()) => small_visible(&operator, false).await,
                Err(error) => Err(error),
            };
            churn.push("removal", started.elapsed(), result);
        } else {
            let body = serde_json::json!({"name": SMALL, "source": small_url}).to_string();
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                http(
                    &server.addr,
                    "POST",
                    "/sourcegraph/api/repos",
                    Some(&server.token),
                    Some(&body),
                ),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error),
                Ok(Ok((201, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(anyhow::anyhow!("HTTP {status}: {}", body.trim())),
            };
            // A 200 (already registered) still leaves it registered: remove it next.
            registered = result.is_ok()
                || result
                    .as_ref()
                    .is_err_and(|e| e.to_string().starts_with("HTTP 200"));
            let result = match result {
                Ok(()) => small_visible(&operator, true).await,
                Err(error) => Err(error),
            };
            churn.push("registration", started.elapsed(), result);
        }
    }
    churn
}

/// Checks through MCP that the server sees the small repository registered (readable and
/// indexed: the registration fetched and indexed it) or removed (not visible).
async fn small_visible(operator: &Peer<RoleClient>, registered: bool) -> Result<()> {
    let answer = tokio::time::timeout(
        CALL_TIMEOUT,
        operator.call_tool(call("availability", serde_json::json!({"repo": SMALL}))),
    )
    .await
    .context("availability gave no answer")??;
    if let Some(error) = tool_error(&answer) {
        bail!("then availability: {error}");
    }
    let text = texts(&answer).join("\n");
    let lines: Vec<&str> = text.lines().collect();
    let wanted: &[&str] = if registered {
        &["Visible: true", "Readable: true", "Indexed: true"]
    } else {
        &["Visible: false"]
    };
    if let Some(missing) = wanted.iter().find(|w| !lines.contains(w)) {
        bail!(
            "then availability lacks `{missing}`: {}",
            cut(&lines.join(" | "), 200)
        );
    }
    Ok(())
}

/// Every RELOAD_EVERY: rewrites the server plugin file and reloads, alternately through the
/// JSON API and the MCP tool `reload_plugins` of the operator session, until `stop`.
async fn reloads(server: Arc<Server>, operator: Peer<RoleClient>, shared: Arc<Shared>) -> Churn {
    let mut churn = Churn::default();
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + RELOAD_EVERY, RELOAD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut version = 1u64;
    loop {
        tick.tick().await;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        version += 1;
        if let Err(error) = write_server_plugin(&server.plugins, version) {
            churn.push("reload (http)", Duration::ZERO, Err(error));
            continue;
        }
        let started = Instant::now();
        if version.is_multiple_of(2) {
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                http(
                    &server.addr,
                    "POST",
                    "/sourcegraph/api/plugins/reload",
                    Some(&server.token),
                    Some(""),
                ),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error),
                Ok(Ok((200, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(anyhow::anyhow!("HTTP {status}: {}", body.trim())),
            };
            churn.push("reload (http)", started.elapsed(), result);
        } else {
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                operator.call_tool(CallToolRequestParams::new("reload_plugins")),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error.into()),
                Ok(Ok(result)) => match tool_error(&result) {
                    Some(error) => Err(anyhow::anyhow!(error)),
                    None => Ok(()),
                },
            };
            churn.push("reload (mcp)", started.elapsed(), result);
        }
    }
    churn
}

/// VmRSS of `pid` in KiB; `None` when the process is gone (or a zombie).
/// A sample of the server's memory (KiB): resident, of it anonymous (heap) and file-backed
/// (mapped index files, the binary).
#[derive(Clone, Copy)]
struct Memory {
    at: Duration,
    rss: u64,
    anon: u64,
    file: u64,
}

fn memory(pid: i32, at: Duration) -> Option<Memory> {
    Some(Memory {
        at,
        rss: rss_kib(pid, "VmRSS:")?,
        anon: rss_kib(pid, "RssAnon:").unwrap_or(0),
        file: rss_kib(pid, "RssFile:").unwrap_or(0),
    })
}

/// utime + stime of a process (`self` or a pid) in seconds, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the C library; no pointers are involved.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(
        ticks as f64
            / if per_second > 0 {
                per_second as f64
            } else {
                100.0
            },
    )
}

fn rss_kib(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    if status
        .lines()
        .any(|l| l.starts_with("State:") && l.contains('Z'))
    {
        return None;
    }
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

// ---- the run -----------------------------------------------------------------------------------

async fn run(options: Options) -> Result<bool> {
    let options = Arc::new(options);
    let tmp = tempfile::Builder::new().prefix("csg-soak-").tempdir()?;
    let BigClone {
        dir: clone,
        source_head,
        missing,
    } = clone_big_repo(&options.repo, &tmp.path().join("source.git"), "soak")?;
    if missing > 0 {
        eprintln!(
            "soak: the history of {} lacks {missing} objects (a partial clone?): {REPO} is the tree of its head {} as one root commit",
            options.repo.display(),
            &source_head[..12]
        );
    }
    let corpus = scan_head(&clone)?;
    eprintln!(
        "soak: head has {} blobs, {:.1} MiB; {} text files to read; search identifiers: {}",
        corpus.blobs,
        corpus.bytes as f64 / 1048576.0,
        corpus.files.len(),
        corpus.identifiers.join(", ")
    );
    if corpus.bytes < BIG_REPO_BYTES {
        eprintln!(
            "soak: warning: the head holds {:.1} MiB, less than the 100 MB issue 28 asks for",
            corpus.bytes as f64 / 1048576.0
        );
    }
    eprintln!("soak: committing the repository plugins:");
    let layout = commit_plugins(&clone, tmp.path(), &corpus.files)?;
    let head = git(&clone, &["rev-parse", "HEAD"])?;

    let (mut daemon, small_url) = small_repo_daemon(tmp.path()).await?;
    eprintln!("soak: git daemon serves {small_url}");

    // The operator: a --prepare user and a token, made before the server starts.
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data)?;
    csg_cli(
        &options,
        &data,
        &["user", "add", "soak-operator", "--prepare"],
    )?;
    let created = csg_cli(&options, &data, &["token", "create", "soak-operator"])?;
    let token = created
        .split_whitespace()
        .find(|w| w.starts_with("csg_"))
        .with_context(|| format!("`csg token create` printed no token: {created}"))?
        .to_string();
    let plugins = tmp.path().join("server-plugins");
    std::fs::create_dir_all(&plugins)?;
    write_server_plugin(&plugins, 1)?;

    let log_dir = match &options.logs {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    let log = log_dir.join("csg-serve.log");
    let mut command = tokio::process::Command::new(&options.csg);
    command
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--listen", "127.0.0.1:0", "--repo"])
        .arg(format!("{REPO}={}", clone.display()))
        .env("SOURCEGRAPH_SERVER_PLUGINS_ENABLED", "true")
        .env("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", &plugins)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true);
    die_with_parent(&mut command);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {}", options.csg.display()))?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut server_guard = Guard::new("csg serve", child, false)?;
    let pid = server_guard.pid;
    let endpoint = bench::mcp_endpoint(stdout, Duration::from_secs(120), &log).await?;
    let url = if endpoint.contains('?') {
        endpoint.clone()
    } else {
        format!("{endpoint}?plugins=auto")
    };
    let addr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .context("the endpoint is not http://HOST:PORT/…")?
        .to_string();
    eprintln!(
        "soak: csg serve (pid {pid}) at {url}; log {}",
        log.display()
    );
    let server = Arc::new(Server {
        addr,
        token: token.clone(),
        data: data.clone(),
        plugins: plugins.clone(),
    });

    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token);
    let operator: RunningService<RoleClient, ()> = ()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .context("the operator's MCP session did not start")?;

    let shared = Arc::new(Shared {
        started: std::sync::OnceLock::new(),
        files: corpus.files,
        identifiers: corpus.identifiers,
        layout,
        head,
        stop: AtomicBool::new(false),
        calls: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        slow: AtomicU64::new(0),
    });

    // Ready: the head indexed and its plugins discovered.
    let waited = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let result = operator
            .peer()
            .call_tool(call(
                "availability",
                serde_json::json!({"repo": REPO, "include_plugins": true}),
            ))
            .await;
        let verdict = match &result {
            Ok(result) => check_availability(&shared, result),
            Err(error) => Err(error.to_string()),
        };
        match verdict {
            Ok(()) => break,
            Err(why) => {
                if rss_kib(pid, "VmRSS:").is_none() {
                    bail!("csg serve exited while starting; see {}", log.display());
                }
                let failed = format!("sync failed repo={REPO}");
                if let Some(line) = std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.contains(&failed))
                {
                    bail!("the first sync of {REPO} failed: {line}");
                }
                if waited.elapsed() > options.ready_timeout {
                    bail!(
                        "the source was not ready within {:?}: {why}",
                        options.ready_timeout
                    );
                }
                if last_print.elapsed() > Duration::from_secs(30) {
                    eprintln!(
                        "soak: waiting for the first index ({:.0} s): {why}",
                        waited.elapsed().as_secs_f64()
                    );
                    last_print = Instant::now();
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let ready_after = waited.elapsed();
    eprintln!(
        "soak: {REPO} indexed with {} plugins after {:.1} s; starting {} clients for {} min",
        shared.layout.artifacts,
        ready_after.as_secs_f64(),
        options.clients,
        options.minutes
    );

    let mut sessions = Vec::with_capacity(options.clients);
    for _ in 0..options.clients {
        sessions.push(
            ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
                .await
                .context("a client's MCP session did not start")?,
        );
    }

    let duration = Duration::from_secs_f64(options.minutes * 60.0);
    let started = Instant::now();
    let _ = shared.started.set(started);
    let cpu_before = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    let clients: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(id, session)| tokio::spawn(client_loop(id, session.peer().clone(), shared.clone())))
        .collect();
    let registering = tokio::spawn(registrations(
        options.clone(),
        server.clone(),
        small_url,
        operator.peer().clone(),
        shared.clone(),
    ));
    let reloading = tokio::spawn(reloads(
        server.clone(),
        operator.peer().clone(),
        shared.clone(),
    ));
    let rss: Arc<Mutex<Vec<Memory>>> = Arc::default();
    let server_gone = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (rss, shared, server_gone) = (rss.clone(), shared.clone(), server_gone.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RSS_EVERY);
            let mut n = 0u64;
            loop {
                tick.tick().await;
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Some(sample) = memory(pid, started.elapsed()) else {
                    eprintln!("soak: csg serve is gone: stopping the run");
                    server_gone.store(true, Ordering::Relaxed);
                    shared.stop.store(true, Ordering::Relaxed);
                    break;
                };
                rss.lock().expect("rss lock").push(sample);
                if n.is_multiple_of(3) {
                    eprintln!(
                        "soak: [{:>5.0} s] calls {} failed {} over 2 s {}; RSS {:.0} MiB",
                        started.elapsed().as_secs_f64(),
                        shared.calls.load(Ordering::Relaxed),
                        shared.failures.load(Ordering::Relaxed),
                        shared.slow.load(Ordering::Relaxed),
                        mib(sample.rss)
                    );
                }
                n += 1;
            }
        })
    };

    let mut interrupted = false;
    tokio::select! {
        _ = tokio::time::sleep(duration) => {}
        _ = tokio::signal::ctrl_c() => {
            eprintln!("soak: Ctrl-C: ending the run early");
            interrupted = true;
        }
        _ = async {
            while !server_gone.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        } => {}
    }
    shared.stop.store(true, Ordering::Relaxed);
    let ran = started.elapsed();
    let cpu_after = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    let cpu = match (cpu_before, cpu_after) {
        ((Some(s0), Some(c0)), (Some(s1), Some(c1))) => Some((s1 - s0, c1 - c0)),
        _ => None,
    };
    let peak_kib = rss_kib(pid, "VmHWM:");
    if let Some(sample) = memory(pid, ran) {
        rss.lock().expect("rss lock").push(sample);
    }

    // Clients finish their call in flight (each bounded by CALL_TIMEOUT).
    let mut record = Record::default();
    let mut unfinished = 0;
    let join_deadline = tokio::time::Instant::now() + CALL_TIMEOUT + Duration::from_secs(10);
    for client in clients {
        match tokio::time::timeout_at(join_deadline, client).await {
            Ok(Ok(r)) => record.merge(r),
            _ => unfinished += 1,
        }
    }
    let mut churn = Churn::default();
    for task in [registering, reloading] {
        match tokio::time::timeout_at(join_deadline + CHURN_TIMEOUT, task).await {
            Ok(Ok(c)) => churn.actions.extend(c.actions),
            _ => churn.push(
                "churn task",
                Duration::ZERO,
                Err(anyhow::anyhow!("did not finish")),
            ),
        }
    }
    let _ = sampler.await;
    let status = http(
        &server.addr,
        "GET",
        "/sourcegraph/api/plugins/status",
        None,
        None,
    )
    .await
    .map(|(_, body)| body)
    .unwrap_or_else(|e| format!("(no answer: {e})"));
    for session in sessions {
        let _ = tokio::time::timeout(Duration::from_secs(5), session.cancel()).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), operator.cancel()).await;
    let stopped = server_guard.stop(Duration::from_secs(30)).await;
    daemon.stop(Duration::from_secs(5)).await;

    let server_log = std::fs::read_to_string(&log).unwrap_or_default();
    let rss = rss.lock().expect("rss lock").clone();
    let passed = report(
        &options,
        &shared,
        &mut record,
        &churn,
        Facts {
            ran,
            ready_after,
            cpu,
            interrupted,
            server_gone: server_gone.load(Ordering::Relaxed),
            unfinished,
            rss,
            peak_kib,
            status,
            stopped,
            server_log,
            blobs: corpus.blobs,
            bytes: corpus.bytes,
            source_head,
            flattened: missing > 0,
        },
    );
    if let Some(dir) = &options.logs {
        eprintln!("soak: the server's log is kept in {}", dir.display());
    }
    Ok(passed)
}

/// What the report needs beside the records.
struct Facts {
    ran: Duration,
    ready_after: Duration,
    /// CPU seconds of the server and of this benchmark (the clients) during the load.
    cpu: Option<(f64, f64)>,
    interrupted: bool,
    server_gone: bool,
    unfinished: usize,
    rss: Vec<Memory>,
    peak_kib: Option<u64>,
    status: String,
    stopped: String,
    server_log: String,
    blobs: usize,
    bytes: u64,
    /// The given repository's head, and whether its history was left out (missing objects).
    source_head: String,
    flattened: bool,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn report(
    options: &Options,
    shared: &Shared,
    record: &mut Record,
    churn: &Churn,
    facts: Facts,
) -> bool {
    println!();
    println!(
        "soak: {:.1} min{} with {} clients over Streamable HTTP (?plugins=auto); {REPO} = {} of {} at {} \
         + the plugin commit {} ({} blobs, {:.1} MiB at the head, {} text files read), ready after {:.1} s; server {}",
        facts.ran.as_secs_f64() / 60.0,
        if facts.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        options.clients,
        if facts.flattened {
            "the head's tree (history left out)"
        } else {
            "a clone"
        },
        options.repo.display(),
        &facts.source_head[..12],
        &shared.head[..12],
        facts.blobs,
        facts.bytes as f64 / 1048576.0,
        shared.files.len(),
        facts.ready_after.as_secs_f64(),
        options.csg.display()
    );
    println!();
    println!(
        "{:<14} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "tool", "calls", "failed", "p50 ms", "p90 ms", "p99 ms", "max ms", ">2 s"
    );
    let mut all: Vec<Duration> = Vec::new();
    let row = |label: &str, times: &mut Vec<Duration>, failed: u64| {
        if times.is_empty() {
            println!("{label:<14} {:>9} {failed:>8}", 0);
            return;
        }
        let slow = times.iter().filter(|t| **t > SLOW).count();
        println!(
            "{label:<14} {:>9} {failed:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {slow:>6}",
            times.len(),
            ms(bench::percentile(times, 0.5)),
            ms(bench::percentile(times, 0.9)),
            ms(bench::percentile(times, 0.99)),
            ms(*times.iter().max().expect("not empty")),
        );
    };
    for (tool, name) in TOOLS.iter().enumerate() {
        all.extend_from_slice(&record.latencies[tool]);
        row(name, &mut record.latencies[tool], record.failed[tool]);
    }
    let total_failed: u64 = record.failed.iter().sum();
    row("all", &mut all, total_failed);
    let total = all.len();
    let seconds = facts.ran.as_secs_f64().max(0.001);
    println!(
        "{total} calls in {seconds:.1} s: {:.0} calls/s{}",
        total as f64 / seconds,
        match facts.cpu {
            Some((server, client)) => format!(
                "; CPU: server {server:.0} s ({:.2} cores), this benchmark's clients {client:.0} s ({:.2} cores), of {} cores",
                server / seconds,
                client / seconds,
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ),
            None => String::new(),
        }
    );

    if !record.errors.is_empty() {
        println!();
        println!("failures by tool and error (count, first call's arguments):");
        let mut errors: Vec<_> = record.errors.iter().collect();
        errors.sort_by_key(|e| std::cmp::Reverse(e.1.0));
        for ((tool, error), (count, example)) in errors.iter().take(4 * EXAMPLES) {
            println!("  {:<12} {count:>7}  {error}", TOOLS[*tool]);
            println!("  {:<12} {:>7}  e.g. {example}", "", "");
        }
        if errors.len() > 4 * EXAMPLES {
            println!("  … and {} more kinds", errors.len() - 4 * EXAMPLES);
        }
    }
    record.slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    println!();
    println!("calls over 2 s: {}", record.slow.len());
    for (elapsed, at, tool, args) in record.slow.iter().take(EXAMPLES) {
        println!(
            "  {:>9.1} ms at {:>6.1} s {:<12} {args}",
            ms(*elapsed),
            at.as_secs_f64(),
            TOOLS[*tool]
        );
    }
    println!();
    let diagnosed: u64 = record.diagnostics.values().sum();
    println!(
        "plugin diagnostics in read answers: {diagnosed}{}",
        if diagnosed == 0 {
            ""
        } else {
            " (by code and plugin):"
        }
    );
    for (key, count) in &record.diagnostics {
        println!("  {count:>7}  {key}");
    }
    println!(
        "reads with the server plugin's OperatorNotes (README files): {}",
        record.notes
    );

    println!();
    let baseline_at = if facts.ran >= WARMUP * 2 {
        WARMUP
    } else {
        facts.ran / 2
    };
    let baseline = facts.rss.iter().find(|m| m.at >= baseline_at);
    let max = facts.rss.iter().map(|m| m.rss).max().unwrap_or(0);
    match (baseline, facts.rss.last()) {
        (Some(base), Some(last)) => {
            println!(
                "server RSS: {:.0} MiB after warm-up ({:.0} s) -> {:.0} MiB at the end ({:.0} s), {:+.0} MiB; \
                 max sampled {:.0} MiB, peak (VmHWM) {}",
                mib(base.rss),
                base.at.as_secs_f64(),
                mib(last.rss),
                last.at.as_secs_f64(),
                mib(last.rss) - mib(base.rss),
                mib(max),
                facts
                    .peak_kib
                    .map_or("unknown".into(), |k| format!("{:.0} MiB", mib(k))),
            );
            println!(
                "  of it anonymous (heap) {:.0} -> {:.0} MiB ({:+.0}), file-backed (mapped indexes, binary) {:.0} -> {:.0} MiB ({:+.0})",
                mib(base.anon),
                mib(last.anon),
                mib(last.anon) - mib(base.anon),
                mib(base.file),
                mib(last.file),
                mib(last.file) - mib(base.file),
            );
        }
        _ => println!("server RSS: too few samples ({})", facts.rss.len()),
    }
    let samples: Vec<String> = facts
        .rss
        .iter()
        .map(|m| {
            format!(
                "{:.0}s:{:.0}/{:.0}",
                m.at.as_secs_f64(),
                mib(m.rss),
                mib(m.anon)
            )
        })
        .collect();
    println!(
        "  samples every {} s (s:RSS/anonymous MiB): {}",
        RSS_EVERY.as_secs(),
        samples.join(" ")
    );

    println!();
    let mut churn_failed = 0;
    for action in [
        "registration",
        "removal",
        "reload (http)",
        "reload (mcp)",
        "churn task",
    ] {
        let mut times: Vec<Duration> = Vec::new();
        let mut errors: Vec<&str> = Vec::new();
        for (name, elapsed, error) in &churn.actions {
            if *name == action {
                times.push(*elapsed);
                if let Some(error) = error {
                    errors.push(error);
                }
            }
        }
        churn_failed += errors.len();
        if times.is_empty() {
            continue;
        }
        println!(
            "{action:<14} {:>4} done, {:>3} failed; p50 {:>8.1} ms, max {:>8.1} ms",
            times.len(),
            errors.len(),
            ms(bench::percentile(&mut times, 0.5)),
            ms(*times.iter().max().expect("not empty"))
        );
        for error in errors.iter().take(EXAMPLES) {
            println!("  {error}");
        }
    }
    let status: String = facts
        .status
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    println!("server plugins at the end: {}", cut(&status, 400));
    println!("csg serve {}", facts.stopped);
    let warnings: Vec<&str> = facts
        .server_log
        .lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" WARN "))
        .collect();
    println!(
        "server log: {} lines, {} WARN/ERROR",
        facts.server_log.lines().count(),
        warnings.len()
    );
    for line in warnings.iter().take(EXAMPLES) {
        println!("  {}", cut(line, 300));
    }

    println!();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    let no_failures = total_failed == 0 && facts.unfinished == 0 && total > 0;
    println!(
        "{}  no failed call: {total_failed} of {total} failed{}",
        verdict(no_failures),
        if facts.unfinished > 0 {
            format!(", {} clients did not finish", facts.unfinished)
        } else {
            String::new()
        }
    );
    let max_call = all.iter().max().copied().unwrap_or_default();
    let no_slow = record.slow.is_empty();
    println!(
        "{}  no call over 2 s: {} over, the slowest {:.1} ms",
        verdict(no_slow),
        record.slow.len(),
        ms(max_call)
    );
    let churn_ok = churn_failed == 0 && !churn.actions.is_empty();
    println!(
        "{}  registrations, removals and reloads: {} done, {churn_failed} failed",
        verdict(churn_ok),
        churn.actions.len()
    );
    let alive = !facts.server_gone;
    println!("{}  the server stayed up for the whole run", verdict(alive));
    let whole = !facts.interrupted;
    println!(
        "{}  the planned {} min ran to the end{}",
        verdict(whole),
        options.minutes,
        if whole {
            ""
        } else {
            " (interrupted by Ctrl-C)"
        }
    );
    no_failures && no_slow && churn_ok && alive && whole
}
