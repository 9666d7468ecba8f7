//! `bench/abuse` (issue 42's proof, not run in CI): the real `csg serve` (release) under an
//! anonymous flood of every costly call the issue lists, while a plain `read` of a small
//! file is measured from another client address.
//!
//! Corpus (in a temp dir): redis (the mirror of this machine: `/work/.mirror/redis+redis`,
//! brought with the tools' `fetch`), a generated linear history of `--commits` commits
//! (`hot.txt` changes in every one, `rare.txt` every 50,000), and a repository with a
//! 44 KB raw-HTML README bomb, a `--big-mib` MiB text file and a 31 MiB one (added by its
//! second commit, whose diff is flooded too).
//!
//! The flood, all rows at once from 127.0.0.1 (one client: its per-client shares apply):
//! four visits of the README-bomb page; 16 blame pages of redis' `src/server.c`; 64 blame
//! calls abandoned after 1 s; `log` of a missing path, a rare path, `follow`, a forged
//! cursor, the site's history and blame pages of the long history; 16 500-line pages of the
//! big file and a `read_many` of 50 one-line items of it; 8 commit pages of the commit adding
//! it; 20 stalled `raw` downloads of the 31 MiB file; a read pinned to redis' root commit.
//! Meanwhile a small read (redis `README.md`, 20 lines) runs in a loop from 127.0.0.2.
//!
//! Prints the small read's p50/p99 idle and flooded (same run), the server's peak RSS
//! growth (VmHWM after `clear_refs`), every row's longest answer and its statuses, and the
//! server's CPU in the second after the flood's last answer, with PASS/MISS against the
//! issue's targets: flooded p99 ≤ max(10 × idle p99, 10 ms); RSS growth ≤ 512 MB; every
//! flood call answered (partial or busy) within its budget; CPU idle ≤ 1 s after.
//!
//! Run: `cargo build --release -p csg -p bench --bin csg --bin abuse && target/release/abuse`.

use anyhow::{Context, Result, bail};
use bench::{git, percentile};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testgit::fastimport::{Change, Stream};
use testgit::hostile::formatting_bomb;
use testgit::usage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USAGE: &str = "usage: abuse [--commits N] [--big-mib N] [--redis PATH] [--csg PATH] \
[--idle-reads N]
--commits: commits of the generated history (default 200000);
--big-mib: size of the big text file (default 100);
--redis: the redis repository (default /work/.mirror/redis+redis/repo);
--csg: the csg binary (default: the one beside this benchmark);
--idle-reads: small reads measured before the flood (default 300).";

/// The flood's calls are answered within this (every budget is below it), else MISS.
const ANSWER_BOUND: Duration = Duration::from_secs(35);

struct Options {
    commits: usize,
    big_mib: usize,
    redis: PathBuf,
    csg: PathBuf,
    idle_reads: usize,
}

fn options() -> Result<Options> {
    let mut options = Options {
        commits: 200_000,
        big_mib: 100,
        redis: PathBuf::from("/work/.mirror/redis+redis/repo"),
        csg: std::env::current_exe()?.with_file_name("csg"),
        idle_reads: 300,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--commits" => options.commits = value()?.parse()?,
            "--big-mib" => options.big_mib = value()?.parse()?,
            "--redis" => options.redis = value()?.into(),
            "--csg" => options.csg = value()?.into(),
            "--idle-reads" => options.idle_reads = value()?.parse()?,
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    Ok(options)
}

// ---- the corpus -------------------------------------------------------------------------------

/// A linear history: every commit changes `hot.txt`, every 50,000th `rare.txt` too (streamed
/// into git as it is generated; a failed import panics with git's error).
fn long_history(dir: &Path, commits: usize) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    git(dir, &["init", "--quiet", "--bare", "-b", "main"])?;
    let mut stream = Stream::importing(dir);
    for n in 0..commits as u64 {
        let mut changes = vec![Change::Write("hot.txt".into(), format!("hot {n}\n"))];
        if n % 50_000 == 0 {
            changes.push(Change::Write("rare.txt".into(), format!("rare {n}\n")));
        }
        stream.next(1_600_000_000 + n as i64 * 30, &changes);
    }
    stream.finish();
    Ok(())
}

/// `mib` MiB of text lines.
fn text_file(mib: usize, tag: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(mib << 20);
    let mut n = 0u64;
    while out.len() < mib << 20 {
        out.extend_from_slice(
            format!("{tag} line {n}: the quick brown fox jumps over the lazy dog {n:x}\n")
                .as_bytes(),
        );
        n += 1;
    }
    out
}

/// The big-file repository: a README bomb and a small file, then the big files. Answers the
/// second commit's SHA.
fn big_repo(dir: &Path, big_mib: usize) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    git(dir, &["init", "--quiet", "-b", "main"])?;
    // The README bomb: 2,000 unclosed formatting elements reopened in 2,000
    // paragraphs, about 44 KB.
    std::fs::write(dir.join("README.md"), formatting_bomb(2000, 2000))?;
    std::fs::write(dir.join("small.txt"), "small\n")?;
    git(dir, &["add", "."])?;
    git(dir, &["commit", "--quiet", "-m", "a README bomb"])?;
    std::fs::write(dir.join("big.txt"), text_file(big_mib, "big"))?;
    std::fs::write(dir.join("mid.txt"), text_file(31, "mid"))?;
    git(dir, &["add", "."])?;
    git(dir, &["commit", "--quiet", "-m", "big files"])?;
    git(dir, &["rev-parse", "HEAD"])
}

// ---- the server -------------------------------------------------------------------------------

struct Server {
    child: tokio::process::Child,
    pid: u32,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// CPU-seconds the server has used; 0 once it is gone.
fn cpu_seconds(pid: u32) -> f64 {
    usage::cpu_seconds(pid).unwrap_or(0.0)
}

async fn start(options: &Options, tmp: &Path, repos: &[(&str, &Path)]) -> Result<Server> {
    let log = tmp.join("server.log");
    let mut command = tokio::process::Command::new(&options.csg);
    command
        .arg("--data-dir")
        .arg(tmp.join("data"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--history-depth",
            "1000",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true);
    for (name, path) in repos {
        command
            .arg("--repo")
            .arg(format!("{name}={}", path.display()));
    }
    let mut child = command.spawn().context("csg serve starts")?;
    let pid = child.id().context("a pid")?;
    let stdout = child.stdout.take().context("stdout")?;
    let endpoint = bench::mcp_endpoint(stdout, Duration::from_secs(1800), &log).await?;
    let base = endpoint[..endpoint.find("/sourcegraph/").context("an endpoint")?].to_owned();
    Ok(Server { child, pid, base })
}

/// Waits until the server used under 0.05 CPU-seconds in one second (its indexing done).
async fn quiet(pid: u32) {
    let mut before = cpu_seconds(pid);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cpu_seconds(pid);
        if now - before < 0.05 {
            return;
        }
        before = now;
    }
}

// ---- the flood --------------------------------------------------------------------------------

/// What each row's calls answered: (latency, status or error).
type Results = Arc<Mutex<BTreeMap<&'static str, Vec<(Duration, String)>>>>;

fn record(results: &Results, row: &'static str, took: Duration, outcome: String) {
    results
        .lock()
        .expect("results")
        .entry(row)
        .or_default()
        .push((took, outcome));
}

/// One GET of `url` by `client`, recorded under `row`.
async fn get(client: reqwest::Client, url: String, row: &'static str, results: Results) {
    let started = Instant::now();
    let outcome = match client.get(&url).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(_) => status.to_string(),
                Err(_) => format!("{status} (body cut)"),
            }
        }
        Err(e) if e.is_timeout() => "abandoned".to_owned(),
        Err(e) => format!("error: {e}"),
    };
    record(&results, row, started.elapsed(), outcome);
}

/// A raw download that reads 4 KiB and then stalls for `stall` before closing.
async fn stalled_raw(addr: String, path: String, stall: Duration, results: Results) {
    let started = Instant::now();
    let outcome = async {
        let mut stream = tokio::net::TcpStream::connect(&addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut first = vec![0u8; 4096];
        let n = stream.read(&mut first).await?;
        let status = String::from_utf8_lossy(&first[..n.min(12)]).to_string();
        tokio::time::sleep(stall).await;
        anyhow::Ok(status)
    }
    .await
    .unwrap_or_else(|e| format!("error: {e}"));
    record(
        &results,
        "20 stalled raw (31 MiB)",
        started.elapsed(),
        outcome,
    );
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = options()?;
    if !options.csg.exists() {
        bail!(
            "no csg binary at {}: build it (`cargo build --release -p csg`) or pass --csg",
            options.csg.display()
        );
    }
    let tmp = tempfile::tempdir()?;
    let long = tmp.path().join("long.git");
    let big = tmp.path().join("big");
    let started = Instant::now();
    eprintln!("generating a history of {} commits", options.commits);
    long_history(&long, options.commits)?;
    eprintln!(
        "generating the big-file repository ({} MiB)",
        options.big_mib
    );
    let big_commit = big_repo(&big, options.big_mib)?;
    let redis_root = git(&options.redis, &["rev-list", "--max-parents=0", "HEAD"])?
        .lines()
        .last()
        .context("redis has a root commit")?
        .to_owned();
    eprintln!(
        "corpus ready in {:.0?}; starting csg serve",
        started.elapsed()
    );
    let server = start(
        &options,
        tmp.path(),
        &[
            ("bench/redis", options.redis.as_path()),
            ("bench/long", long.as_path()),
            ("bench/big", big.as_path()),
        ],
    )
    .await?;
    let (base, pid) = (server.base.clone(), server.pid);
    let addr = base.trim_start_matches("http://").to_owned();
    eprintln!("serving at {base}; waiting for the indexes");
    quiet(pid).await;
    let api = |tool: &str, query: &str| format!("{base}/sourcegraph/api/{tool}?{query}");
    let small = api(
        "read",
        "repo=bench/redis&path=README.md&start_line=1&end_line=20",
    );
    let reader = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .build()?;
    // Warm: the small file in the blob cache, as a repeated read would find it.
    reader.get(&small).send().await?.error_for_status()?;
    let mut idle = Vec::new();
    for _ in 0..options.idle_reads {
        let t = Instant::now();
        reader
            .get(&small)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        idle.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let idle_cpu_from = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_cpu = cpu_seconds(pid) - idle_cpu_from;

    // Peak RSS from here on: VmHWM reset to the current RSS.
    usage::reset_peak_of(pid);
    let rss_before = usage::status_bytes(pid, "VmRSS").unwrap_or(0);
    let results: Results = Arc::default();
    let flooder = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .timeout(ANSWER_BOUND)
        .build()?;
    let abandoning = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .timeout(Duration::from_secs(1))
        .build()?;
    let site = |path: &str| format!("{base}/sourcegraph/repos/{path}");
    let mut flood = tokio::task::JoinSet::new();
    let mut add = |client: &reqwest::Client, url: String, row: &'static str| {
        flood.spawn(get(client.clone(), url, row, results.clone()));
    };
    for _ in 0..4 {
        add(&flooder, site("bench/big"), "README bomb page ×4");
    }
    for _ in 0..16 {
        add(
            &flooder,
            site("bench/redis/-/blame/HEAD/src/server.c"),
            "16 blame pages",
        );
    }
    for _ in 0..64 {
        add(
            &abandoning,
            api(
                "blame",
                "repo=bench/redis&path=src/server.c&start_line=1&end_line=2000",
            ),
            "64 blame abandoned after 1 s",
        );
    }
    for _ in 0..2 {
        add(
            &flooder,
            api("log", "repo=bench/long&path=nope/missing.txt"),
            "log: missing path",
        );
        add(
            &flooder,
            api("log", "repo=bench/long&path=rare.txt"),
            "log: rare path",
        );
        add(
            &flooder,
            api("log", "repo=bench/long&path=rare.txt&follow=true"),
            "log: follow",
        );
        let forged = format!("repo=bench/long&cursor={}.{}", "0".repeat(40), 10_000_000);
        add(&flooder, api("log", &forged), "log: forged cursor");
        add(
            &flooder,
            site("bench/long/-/commits/main/rare.txt"),
            "site history page",
        );
        add(
            &flooder,
            site("bench/long/-/blame/main/hot.txt"),
            "site blame page",
        );
    }
    for i in 0..16 {
        let start = 1 + i * 50_000;
        let query = format!(
            "repo=bench/big&path=big.txt&start_line={start}&end_line={}",
            start + 499
        );
        add(
            &flooder,
            api("read", &query),
            "16 pages of the big file (over the cap)",
        );
    }
    for i in 0..16 {
        let start = 1 + i * 20_000;
        let query = format!(
            "repo=bench/big&path=mid.txt&start_line={start}&end_line={}",
            start + 499
        );
        add(&flooder, api("read", &query), "16 pages of the 31 MiB file");
    }
    let items: Vec<String> = (0..50)
        .map(|i| {
            format!(
                "{{\"path\":\"mid.txt\",\"start_line\":{0},\"end_line\":{0}}}",
                1 + i * 1000
            )
        })
        .collect();
    let files = format!("[{}]", items.join(","));
    add(
        &flooder,
        api(
            "read_many",
            &format!("repo=bench/big&files={}", urlencode(&files)),
        ),
        "read_many of 50 items (31 MiB file)",
    );
    for _ in 0..8 {
        add(
            &flooder,
            site(&format!("bench/big/-/commit/{big_commit}")),
            "8 commit pages",
        );
    }
    add(
        &flooder,
        api("list", &format!("repo=bench/redis&revision={redis_root}")),
        "list pinned to redis' root",
    );
    for _ in 0..20 {
        flood.spawn(stalled_raw(
            addr.clone(),
            "/sourcegraph/repos/bench/big/-/raw/main/mid.txt".to_owned(),
            Duration::from_secs(10),
            results.clone(),
        ));
    }
    // The small reads from another address while the flood lasts.
    let flooded = Arc::new(Mutex::new(Vec::new()));
    let measuring = {
        let (reader, small, flooded) = (reader.clone(), small.clone(), flooded.clone());
        tokio::spawn(async move {
            loop {
                let t = Instant::now();
                let ok = match reader.get(&small).send().await {
                    Ok(r) => r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                flooded.lock().expect("samples").push((t.elapsed(), ok));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let flood_started = Instant::now();
    let mut peak_rss = rss_before;
    let mut sampler = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            next = flood.join_next() => if next.is_none() { break },
            _ = sampler.tick() => {
                peak_rss = peak_rss.max(usage::status_bytes(pid, "VmRSS").unwrap_or(0));
            }
        }
    }
    let flood_took = flood_started.elapsed();
    measuring.abort();
    let cpu_from = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_after = cpu_seconds(pid) - cpu_from;
    let hwm = usage::status_bytes(pid, "VmHWM").unwrap_or(0).max(peak_rss);
    let growth_mib = mib(hwm.saturating_sub(rss_before));

    // ---- the report ----
    let mut idle_sorted = idle.clone();
    let (idle_p50, idle_p99) = (
        percentile(&mut idle_sorted, 0.5),
        percentile(&mut idle_sorted, 0.99),
    );
    let samples = flooded.lock().expect("samples").clone();
    let failed_small = samples.iter().filter(|(_, ok)| !ok).count();
    let mut flooded_times: Vec<Duration> = samples.iter().map(|(t, _)| *t).collect();
    if flooded_times.is_empty() {
        bail!("no small read finished during the flood");
    }
    let (flood_p50, flood_p99) = (
        percentile(&mut flooded_times, 0.5),
        percentile(&mut flooded_times, 0.99),
    );
    let target = (idle_p99 * 10).max(Duration::from_millis(10));
    let verdict = |pass: bool| if pass { "PASS" } else { "MISS" };
    println!(
        "bench/abuse: redis, {} commits, {} MiB file; flood {:.1?}",
        options.commits, options.big_mib, flood_took
    );
    println!(
        "small read (127.0.0.2): idle p50 {idle_p50:.2?} p99 {idle_p99:.2?} ({} reads); flooded \
         p50 {flood_p50:.2?} p99 {flood_p99:.2?} ({} reads, {failed_small} failed): target p99 \
         ≤ {target:.2?} {}",
        idle.len(),
        samples.len(),
        verdict(flood_p99 <= target && failed_small == 0)
    );
    println!(
        "server RSS: {:.0} MiB before the flood, peak {:.0} MiB: growth {growth_mib:.0} MiB, \
         target ≤ 512 MiB {}",
        mib(rss_before),
        mib(hwm),
        verdict(growth_mib <= 512.0)
    );
    println!(
        "server CPU: {idle_cpu:.2} s in a second idle; {cpu_after:.2} s in the second after the \
         flood's last answer {}",
        verdict(cpu_after <= 0.3)
    );
    let results = results.lock().expect("results");
    let mut every_answered = true;
    println!("{:<32} {:>6} {:>10}  statuses", "row", "calls", "longest");
    for (row, calls) in results.iter() {
        let longest = calls.iter().map(|(t, _)| *t).max().unwrap_or_default();
        let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, outcome) in calls {
            *statuses.entry(outcome.as_str()).or_default() += 1;
        }
        let errors = calls.iter().any(|(_, o)| o.starts_with("error"));
        every_answered &= !errors && longest < ANSWER_BOUND;
        println!(
            "{row:<32} {:>6} {:>10.2?}  {statuses:?}",
            calls.len(),
            longest
        );
    }
    println!(
        "every flood call answered within its budget: {}",
        verdict(every_answered)
    );
    drop(server);
    Ok(())
}

/// Percent-encodes a query value.
fn urlencode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
