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

use gitstore::{CommitId, GitStore, RepoName, RepoPath, StoreConfig, SystemClock};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// A bare repository with a linear history of `commits` commits on `main`.
fn generate(dir: &Path, commits: usize) {
    git(dir, &["init", "-q", "--bare", "-b", "main"]);
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import runs");
    let mut stdin = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
    for n in 0..commits {
        let body = format!("line {n}\n");
        let message = format!("commit {n}\n");
        write!(
            stdin,
            "commit refs/heads/main\nmark :{}\ncommitter bench <bench@example.com> {} +0000\ndata {}\n{}",
            n + 1,
            1_600_000_000 + n,
            message.len(),
            message
        )
        .expect("write");
        if n > 0 {
            writeln!(stdin, "from :{n}").expect("write");
        }
        write!(
            stdin,
            "M 644 inline file.txt\ndata {}\n{}\n",
            body.len(),
            body
        )
        .expect("write");
    }
    drop(stdin);
    assert!(child.wait().expect("fast-import ends").success());
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let source = args.next().filter(|a| !a.is_empty());
    let commits: usize = args
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

    let store = GitStore::open(
        StoreConfig {
            data_dir: tmp.path().join("data"),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(SystemClock),
    )
    .expect("store opens");
    let name = RepoName::parse("bench/history").expect("name");
    store
        .register(gitstore::Registration {
            name: name.clone(),
            source: src.to_string_lossy().into_owned(),
            registered_path: RepoPath::root(),
            branch: Some(branch.clone()),
            private: None,
        })
        .expect("register");
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
