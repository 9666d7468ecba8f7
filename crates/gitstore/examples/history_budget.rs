//! Measures the history calls of issue 42 (points 2 and 4) on a long history, under the
//! budgets the `log` and `blame` tools state (6 s; a log page wraps up after 3 s or 100,000
//! commits walked): the first page of the log of a missing path, of a rarely changed path,
//! of a followed file, a page deep in the history from its cursor, a forged cursor, and a
//! blame of lines unchanged since the first commit; and, for comparison, the unbounded walk
//! the log of a missing path was before (`GitStore::log`, no budget).
//!
//! ```text
//! cargo run --release -p gitstore --example history_budget -- [COMMITS] [--no-before]
//! ```
//!
//! A linear history of `COMMITS` commits (default 800000) is generated with `git
//! fast-import`: every commit changes `hot.txt`; `rare.txt` changes every 100,000 commits;
//! `stable.txt` (200 lines) only in the first. Prints what each call took and answered;
//! nothing here is a pass/fail target.

use budget::Budget;
use gitstore::{CommitId, LogPage, PageLimits, RepoName, RepoPath, SystemClock};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::fastimport::{Change, Stream};
use testgit::git;

/// The `log` tool's cost: 6 s, partial after 50% or 100,000 commits.
const LOG_TIME: Duration = Duration::from_secs(6);
const LOG_WALK: u64 = 100_000;
/// The `blame` tool's cost: 6 s.
const BLAME_TIME: Duration = Duration::from_secs(6);

/// A bare repository with the history the calls are measured on, streamed into git.
fn generate(dir: &Path, commits: u64) {
    git(dir, &["init", "-q", "--bare", "-b", "main"]);
    let mut stream = Stream::importing(dir);
    let stable: String = (0..200).map(|i| format!("stable line {i}\n")).collect();
    for n in 0..commits {
        let mut changes = vec![Change::Write("hot.txt".into(), format!("{n}\n"))];
        if n == 0 {
            changes.push(Change::Write("stable.txt".into(), stable.clone()));
        }
        if n % 100_000 == 0 {
            changes.push(Change::Write("rare.txt".into(), format!("rare {n}\n")));
        }
        stream.next(1_600_000_000 + n as i64, &changes);
    }
    stream.finish();
}

/// What a page of either log answered: commits found, its cursor, whether it is partial,
/// commits walked.
fn summary<T>(page: LogPage<T>) -> (usize, Option<String>, bool, u64) {
    (
        page.commits.len(),
        page.next_cursor,
        page.partial,
        page.walked,
    )
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    let mut commits = 800_000u64;
    let mut before = true;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--no-before" => before = false,
            n => commits = n.parse().expect("COMMITS is a number"),
        }
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src.git");
    std::fs::create_dir_all(&src).expect("mkdir");
    let started = Instant::now();
    generate(&src, commits);
    println!("generated {commits} commits in {}", secs(started.elapsed()));

    let store = testgit::registered_store(
        tmp.path().join("data"),
        "bench/history",
        &src.to_string_lossy(),
        "",
        Arc::new(SystemClock),
    );
    let name = RepoName::parse("bench/history").expect("name");
    let started = Instant::now();
    store.sync(&name).expect("sync");
    println!("first sync: {}", secs(started.elapsed()));
    let head = CommitId::parse(&git(&src, &["rev-parse", "main"])).expect("sha");
    let path = |p: &str| RepoPath::parse(p).expect("path");

    let log_budget = || Budget::lasting(LOG_TIME, 0.5);
    let page = |label: &str, file: &str, follow: bool, cursor: Option<&gitstore::LogCursor>| {
        let budget = log_budget();
        let limits = PageLimits {
            limit: 50,
            walk: LOG_WALK,
            budget: &budget,
        };
        let started = Instant::now();
        let (found, next, partial, walked) = if follow {
            summary(
                store
                    .log_follow_page(&name, &head, &path(file), cursor, limits)
                    .expect("follow page"),
            )
        } else {
            summary(
                store
                    .log_page(&name, &head, &path(file), cursor, limits)
                    .expect("log page"),
            )
        };
        println!(
            "{label}: {} ({found} commits, {walked} walked, partial {partial}, cursor {} bytes)",
            secs(started.elapsed()),
            next.as_ref().map_or(0, String::len)
        );
        next
    };

    page(
        "log of a missing path, first page",
        "missing.txt",
        false,
        None,
    );
    page("log of a rare path, first page", "rare.txt", false, None);
    page("follow of a rare file, first page", "rare.txt", true, None);
    // Deep pages: each from the previous page's cursor, to the end of the history.
    let mut cursor = None;
    let mut text = None;
    for n in 2.. {
        let next = page(
            &format!("  page {n}"),
            "missing.txt",
            false,
            cursor.as_ref(),
        );
        let Some(next) = next else { break };
        cursor = Some(
            store
                .log_cursor(&name, &path("missing.txt"), false, &next)
                .expect("cursor"),
        );
        text = Some(next);
    }
    // The last cursor handed out, one character changed: still base64url, not signed.
    let mut forged: Vec<char> = text.unwrap_or_default().chars().collect();
    if let Some(c) = forged.get_mut(12) {
        *c = if *c == 'A' { 'B' } else { 'A' };
    }
    let forged: String = forged.into_iter().collect();
    let started = Instant::now();
    let refused = store.log_cursor(&name, &path("missing.txt"), false, &forged);
    println!(
        "forged deep cursor: {} ({})",
        secs(started.elapsed()),
        refused
            .err()
            .map_or("accepted?".to_owned(), |e| e.to_string())
    );
    let started = Instant::now();
    let old = store.log_cursor(
        &name,
        &path("missing.txt"),
        false,
        &format!("{head}.700000"),
    );
    println!(
        "old-form deep cursor: {} ({})",
        secs(started.elapsed()),
        old.err().map_or("accepted?".to_owned(), |e| e.to_string())
    );

    let budget = Budget::lasting(BLAME_TIME, 1.0);
    let started = Instant::now();
    let blamed = store.blame_within(&name, &head, &path("stable.txt"), 1, 200, &budget);
    println!(
        "blame of 200 lines unchanged since the first commit: {} ({})",
        secs(started.elapsed()),
        match blamed {
            Ok((ranges, _)) => format!("answered, {} ranges", ranges.len()),
            Err(e) => format!("refused: {e}"),
        }
    );

    if before {
        let started = Instant::now();
        let (found, _) = store
            .log(&name, &head, &path("missing.txt"), 0, 50)
            .expect("log");
        println!(
            "before (unbounded walk, as every call was): log of a missing path {} ({} commits)",
            secs(started.elapsed()),
            found.len()
        );
        let started = Instant::now();
        let blamed = store.blame(&name, &head, &path("stable.txt"), 1, 200);
        println!(
            "before (unbounded): blame of stable.txt {} ({})",
            secs(started.elapsed()),
            if blamed.is_ok() { "answered" } else { "failed" }
        );
    }
}
