//! Measures the retention check of a read pinned to an old commit right after a sync (issue
//! 42 point 7): the first lease of the root commit of a long history, then again after each of
//! a few syncs that each add one commit to the default branch.
//!
//! ```text
//! cargo run --release -p gitstore --example retention_walk -- [SOURCE] [COMMITS]
//! ```
//!
//! `SOURCE`: a Git repository to copy (a bare mirror of redis, say); without one, a linear
//! history of `COMMITS` commits (default 100000) is generated with `git fast-import`. Prints
//! the time of each lease; nothing here is a pass/fail target.

use gitstore::{CommitId, RepoName, SystemClock};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::{fastimport, git};

/// A bare repository with a linear history of `commits` commits on `main`.
fn generate(dir: &Path, commits: u64) {
    git(dir, &["init", "-q", "--bare", "-b", "main"]);
    fastimport::linear(dir, commits, "file.txt", |n| format!("line {n}\n"));
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let source = args.next().filter(|a| !a.is_empty());
    let commits: u64 = args
        .next()
        .map(|n| n.parse().expect("COMMITS is a number"))
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src.git");
    match &source {
        Some(path) => {
            git(
                tmp.path(),
                &["clone", "-q", "--bare", path, src.to_str().expect("utf-8")],
            );
        }
        None => {
            std::fs::create_dir_all(&src).expect("mkdir");
            let started = Instant::now();
            generate(&src, commits);
            println!("generated {commits} commits in {}", ms(started.elapsed()));
        }
    }
    let branch = git(&src, &["symbolic-ref", "--short", "HEAD"]);
    let root = git(&src, &["rev-list", "--max-parents=0", &branch]);
    let root = root.lines().last().expect("a root commit").to_string();
    let count = git(&src, &["rev-list", "--count", &branch]);
    println!("history: {count} commits on {branch}; root {root}");

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
    println!("first sync: {}", ms(started.elapsed()));
    let root_id = CommitId::parse(&root).expect("sha");

    let lease = |label: &str| {
        let started = Instant::now();
        let lease = store.lease(&name, &root_id).expect("the root is retained");
        let took = started.elapsed();
        drop(lease);
        println!("{label}: {}", ms(took));
        took
    };
    lease("first lease of the root after the first sync");
    lease("second lease of the root");
    let mut after_sync = Vec::new();
    for n in 0..5 {
        let tree = format!("{branch}^{{tree}}");
        let next = git(
            &src,
            &[
                "commit-tree",
                &tree,
                "-p",
                &branch,
                "-m",
                &format!("more {n}"),
            ],
        );
        git(
            &src,
            &["update-ref", &format!("refs/heads/{branch}"), &next],
        );
        let started = Instant::now();
        store.sync(&name).expect("sync");
        println!("sync {n}: {}", ms(started.elapsed()));
        after_sync.push(lease(&format!("first lease of the root after sync {n}")));
    }
    after_sync.sort();
    println!(
        "first lease of the root right after a sync: median {}, max {}",
        ms(after_sync[after_sync.len() / 2]),
        ms(after_sync[after_sync.len() - 1])
    );
}
