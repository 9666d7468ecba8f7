//! `bench/search_history`: commit and diff search (issue 33 points 6 and 7, SPEC S-9) next to
//! `git log --grep` and `git log -G` on the same repository, in one run.
//!
//! Usage: `bench/search_history [--repo PATH] [--runs N] [--git-runs N] [--first-behind N]`
//!
//! 1. **Registration over the production path.** The repository (default the redis/redis
//!    mirror `/work/.mirror/redis+redis/repo`, ~12k commits) is cloned bare (`--shared`,
//!    default branch only), its branch set `--first-behind` (default 200) first-parent commits
//!    back, registered in a `gitstore::GitStore` and synced; `Service::index` (code) and
//!    `Service::index_history` (the history of the default branch) run: the **first history
//!    build**. Then the branch goes back to its head, the service syncs again and
//!    `Service::index_history` adds the new commits: the **incremental build**. (A history
//!    that misses objects, as a partial clone's does, is registered as a linear history of the
//!    same trees, its last 2,000 first-parent commits.)
//! 2. **Diff search.** For each query, `Service::search` with `type: "diff"`: the first page
//!    (limit 50), `--runs` (default 3) times, every kept search answer dropped before each run
//!    (`Service::clear_search_cache`), the first run being the query's first in the process;
//!    beside `git log -G PATTERN --format=%H HEAD` in the service's mirror (`--git-runs`,
//!    default 1: it reads every commit's diff). Then all our pages to the end: the set of the
//!    hits' commits must equal git's (the order, newest first, is shown too).
//! 3. **Commit search.** The same for `type: "commit"` against `git log --grep=PATTERN`
//!    (`-F` for literals, `-E` for regexes, `-i` unless case-sensitive).
//!
//! Targets with PASS/MISS: the diff search's cold first page ≤ 100 ms; the commit sets
//! identical to git's. Timings are printed, never asserted.

use anyhow::{Context, Result, bail};
use bench::corpus::{
    Harness, Pattern, clone_history, git, git_command, median, ms, timed, verdict,
};
use service::SearchKind;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const DEFAULT_REPO: &str = "/work/.mirror/redis+redis/repo";
const REPO: &str = "bench/history";

struct Args {
    repo: PathBuf,
    runs: usize,
    git_runs: usize,
    first_behind: usize,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        repo: PathBuf::from(DEFAULT_REPO),
        runs: 3,
        git_runs: 1,
        first_behind: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next();
        let number = |v: Option<String>, what: &str| -> Result<usize> {
            v.context("a value")?
                .parse()
                .with_context(|| format!("{what} takes a number"))
        };
        match flag.as_str() {
            "--repo" => args.repo = value.context("--repo takes a path")?.into(),
            "--runs" => args.runs = number(value, "--runs")?,
            "--git-runs" => args.git_runs = number(value, "--git-runs")?,
            "--first-behind" => args.first_behind = number(value, "--first-behind")?,
            _ => bail!(
                "usage: bench/search_history [--repo PATH] [--runs N] [--git-runs N] [--first-behind N]"
            ),
        }
    }
    if args.runs == 0 || args.git_runs == 0 {
        bail!("--runs and --git-runs must be at least 1");
    }
    if !args.repo.is_dir() {
        bail!(
            "{} is not a repository here; pass --repo with the path of a Git repository with a long history (e.g. a bare mirror of redis/redis)",
            args.repo.display()
        );
    }
    Ok(args)
}

/// One history query: what it looks for and how `git log` is asked the same.
struct HistoryQuery {
    kind: SearchKind,
    pattern: Pattern,
}

impl HistoryQuery {
    fn diff(pattern: Pattern) -> Self {
        HistoryQuery {
            kind: SearchKind::Diff,
            pattern,
        }
    }

    fn commit(pattern: Pattern) -> Self {
        HistoryQuery {
            kind: SearchKind::Commit,
            pattern,
        }
    }

    fn label(&self) -> String {
        format!("{} {}", self.kind.name(), self.pattern.label())
    }

    fn request(&self, limit: usize) -> service::SearchRequest {
        service::SearchRequest {
            kind: self.kind,
            ..self.pattern.request(REPO, limit)
        }
    }

    /// `git log … --format=%H TIP`: `-G` (a POSIX extended regex; a literal is quoted) for
    /// diff, `--grep` with `-F`/`-E` for commit; `-i` unless case-sensitive.
    fn git_args(&self, tip: &str) -> Vec<String> {
        let mut args: Vec<String> = vec!["log".into(), "--format=%H".into()];
        if !self.pattern.case_sensitive {
            args.push("-i".into());
        }
        match self.kind {
            SearchKind::Diff => {
                let regex = if self.pattern.regex {
                    self.pattern.text.clone()
                } else {
                    quote_ere(&self.pattern.text)
                };
                args.push(format!("-G{regex}"));
            }
            _ => {
                args.push(if self.pattern.regex { "-E" } else { "-F" }.into());
                args.push(format!("--grep={}", self.pattern.text));
            }
        }
        args.push(tip.into());
        args
    }
}

/// `text` as a POSIX extended regex matching it literally.
fn quote_ere(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if r"\.[]()*+?{}|^$".contains(c) {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted
}

fn queries() -> Vec<HistoryQuery> {
    vec![
        HistoryQuery::diff(Pattern::literal("zmalloc_usable")),
        HistoryQuery::diff(Pattern::regex("lpGet(Integer|Value)")),
        HistoryQuery::diff(Pattern::literal("serverAssert")),
        HistoryQuery::commit(Pattern::literal_i("memory leak")),
        HistoryQuery::commit(Pattern::regex("Fix(ed)? .*crash")),
        HistoryQuery::commit(Pattern::literal("SIGSEGV")),
    ]
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let total = Instant::now();
    let tmp = tempfile::tempdir()?;
    let t = Instant::now();
    let clone = clone_history(&args.repo, &tmp.path().join("source.git"), 2000)?;
    let branch = git(&clone.dir, &["symbolic-ref", "HEAD"])?;
    let tip = git(&clone.dir, &["rev-parse", "HEAD"])?;
    let commits = git(&clone.dir, &["rev-list", "--count", "HEAD"])?;
    println!(
        "{}: clone (bare, --shared, default branch) {:.1} s, head {tip}, {commits} commits{}",
        args.repo.display(),
        t.elapsed().as_secs_f64(),
        match clone.linearized {
            Some(n) => format!(
                " (its history misses objects: the last {n} first-parent commits as a linear history of the same trees)"
            ),
            None => String::new(),
        }
    );
    let first = git(
        &clone.dir,
        &["rev-parse", &format!("HEAD~{}", args.first_behind)],
    )?;
    git(&clone.dir, &["update-ref", &branch, &first])?;
    let h = Harness::register(
        &tmp.path().join("data"),
        REPO,
        &clone.dir,
        service::IndexConfig::default(),
    )?;
    println!(
        "register + sync at {first} ({} first-parent commits behind the head): {:.1} s",
        args.first_behind,
        h.sync_time.as_secs_f64()
    );
    let (stats, wall) = h.index()?;
    println!(
        "code index of that commit (Service::index): {:.1} s, {} documents",
        wall.as_secs_f64(),
        stats.documents
    );
    let full = index_history(&h, "first history build")?;

    git(&clone.dir, &["update-ref", &branch, &tip])?;
    let t = Instant::now();
    let synced = h.runtime.block_on(h.service.sync(REPO.to_owned()))?;
    if synced.head.as_deref() != Some(tip.as_str()) {
        bail!("the sync fetched {:?}, not the head {tip}", synced.head);
    }
    println!("sync to the head {tip}: {:.1} s", t.elapsed().as_secs_f64());
    let (_, wall) = h.index()?;
    println!("code index of the head: {:.1} s", wall.as_secs_f64());
    let incremental = index_history(&h, "incremental history build")?;

    let mut summary = vec![format!(
        "info history index build: first {:.1} s ({} commits), incremental {:.2} s ({} commits more)",
        full.0.as_secs_f64(),
        full.1,
        incremental.0.as_secs_f64(),
        incremental.1
    )];
    println!(
        "\nmedian of {} runs; ours = Service::search, first page (limit 50), every kept answer dropped before each run (\"first\" = the query's first run in the process); git log on the head in the service's mirror, {} run(s) after a warm-up",
        args.runs, args.git_runs
    );
    println!(
        "| query | ours first ms | ours cold ms | git log ms | git÷cold | commits ours/git | same set | same order |"
    );
    println!("|---|---:|---:|---:|---:|---|---|---|");
    for query in queries() {
        summary.extend(measure(&h, &query, &tip, &args)?);
    }
    println!("\nsummary:");
    for line in summary {
        println!("  {line}");
    }
    println!("\ntotal bench time {:.0} s", total.elapsed().as_secs_f64());
    Ok(())
}

/// `Service::index_history`: its wall time and the commits it added.
fn index_history(h: &Harness, what: &str) -> Result<(Duration, u64)> {
    let t = Instant::now();
    let stats = h
        .runtime
        .block_on(h.service.index_history(REPO.to_owned()))?;
    let wall = t.elapsed();
    println!(
        "{what} (Service::index_history): {:.2} s wall ({:.2} s inside), {} commits in the history, {} added, {} diff lines added{}",
        wall.as_secs_f64(),
        stats.elapsed.as_secs_f64(),
        stats.commits,
        stats.added,
        stats.lines,
        if stats.merged {
            ", segments merged"
        } else {
            ""
        }
    );
    Ok((wall, stats.added))
}

fn measure(h: &Harness, query: &HistoryQuery, tip: &str, args: &Args) -> Result<Vec<String>> {
    let label = query.label();
    let mut times = Vec::new();
    let mut failure = None;
    for _ in 0..args.runs {
        h.service.clear_search_cache();
        let t = Instant::now();
        match h.search(query.request(50)) {
            Ok(_) => times.push(t.elapsed()),
            Err(error) => {
                failure = Some(format!("{error:#}"));
                break;
            }
        }
    }
    let git_args = query.git_args(tip);
    let run_git = || -> Result<(Duration, Vec<u8>)> {
        let mut cmd = git_command(&h.mirror);
        cmd.args(&git_args);
        timed(cmd)
    };
    let (_, out) = run_git()?;
    let git_order: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_owned)
        .collect();
    let mut git_times = Vec::new();
    for _ in 0..args.git_runs {
        git_times.push(run_git()?.0);
    }
    let git_time = median(&git_times);
    let git_set: BTreeSet<String> = git_order.iter().cloned().collect();
    if let Some(error) = failure {
        println!(
            "| `{}` | error: {error} | | {:.0} | | -/{} | | |",
            label.replace('|', "\\|"),
            ms(git_time),
            git_set.len()
        );
        return Ok(vec![format!(
            "MISS {label}: the service answered: {error} (git log {:.0} ms, {} commits)",
            ms(git_time),
            git_set.len()
        )]);
    }
    let cold = median(&times);
    let all = h.all_pages(query.request(search::MAX_LIMIT))?;
    let ours_set: BTreeSet<String> = all.hit_commits.iter().cloned().collect();
    let same_set = ours_set == git_set;
    let same_order = all.hit_commits == git_order;
    println!(
        "| `{}` | {:.1} | {:.1} | {:.0} | {:.0}x | {}/{} | {} | {} |",
        label.replace('|', "\\|"),
        ms(times[0]),
        ms(cold),
        ms(git_time),
        git_time.as_secs_f64() / cold.as_secs_f64(),
        ours_set.len(),
        git_set.len(),
        if same_set { "yes" } else { "NO" },
        if same_order { "yes" } else { "no" }
    );
    let mut lines = Vec::new();
    if query.kind == SearchKind::Diff {
        lines.push(format!(
            "{} {label}: cold first page <= 100 ms: {:.1} ms (first run {:.1} ms; git log -G {:.0} ms = {:.0}x)",
            verdict(cold <= Duration::from_millis(100)),
            ms(cold),
            ms(times[0]),
            ms(git_time),
            git_time.as_secs_f64() / cold.as_secs_f64()
        ));
    } else {
        lines.push(format!(
            "info {label}: cold first page {:.1} ms vs git log --grep {:.0} ms = {:.0}x",
            ms(cold),
            ms(git_time),
            git_time.as_secs_f64() / cold.as_secs_f64()
        ));
    }
    lines.push(format!(
        "{} {label}: the same commits as git log ({} ours in {} page(s), {} git's{}){}",
        verdict(same_set),
        ours_set.len(),
        all.pages,
        git_set.len(),
        if same_set {
            String::new()
        } else {
            bench::corpus::difference(&ours_set, &git_set)
        },
        if same_order {
            "; same order"
        } else {
            "; order differs"
        }
    ));
    Ok(lines)
}
