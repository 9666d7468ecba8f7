//! `bench/navigate`: history tools against git on the same commits, measured in the same run
//! (issue 12 targets: blame and log at least 2× faster than git). The corpus: a repository
//! made here with a 2,000-line file edited across 300 commits, beside other files.

use anyhow::{Result, bail};
use gitstore::{CommitId, RepoName, RepoPath};
use std::time::{Duration, Instant};

const LINES: usize = 2_000;
const COMMITS: usize = 300;

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<()> {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(20);
    let mut lines: Vec<String> = (0..LINES)
        .map(|n| format!("line {n} of the big file\n"))
        .collect();
    let source = testgit::SourceRepo::with_files(&[("big.txt", lines.concat().as_bytes())]);
    // A deterministic walk of edits: each commit rewrites a few lines and touches another file.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for c in 0..COMMITS {
        for _ in 0..5 {
            let at = (next() % LINES as u64) as usize;
            lines[at] = format!("line {at} edited in commit {c}\n");
        }
        let other = format!("notes {c}\n");
        source.commit(
            &[
                ("big.txt", lines.concat().as_bytes()),
                (&format!("other/{}.md", c % 20), other.as_bytes()),
            ],
            &format!("commit {c}"),
        );
    }
    let store = source.store("bench/navigate", "");
    let name = RepoName::parse("bench/navigate")?;
    let head = CommitId::parse(&source.head()).ok_or_else(|| anyhow::anyhow!("head"))?;
    let big = RepoPath::parse("big.txt")?;

    let (ranges, _) = store.blame(&name, &head, &big, 1, LINES as u64)?;
    if ranges.last().map(|r| r.end_line) != Some(LINES as u64) {
        bail!("blame did not cover the file");
    }
    let mut rows = Vec::new();
    let mut measure =
        |label: &str, ours: &mut dyn FnMut() -> Result<()>, git: &[&str]| -> Result<()> {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let t = Instant::now();
                ours()?;
                a.push(t.elapsed());
                let t = Instant::now();
                source.git(git);
                b.push(t.elapsed());
            }
            let (ours50, git50) = (percentile(&mut a, 0.5), percentile(&mut b, 0.5));
            rows.push((label.to_owned(), ours50, git50));
            Ok(())
        };
    measure(
        "blame of 2,000 lines",
        &mut || {
            store
                .blame(&name, &head, &big, 1, LINES as u64)
                .map(drop)
                .map_err(Into::into)
        },
        &["blame", "--porcelain", "HEAD", "--", "big.txt"],
    )?;
    measure(
        "log -- big.txt (301)",
        &mut || {
            store
                .log(&name, &head, &big, 0, 1000)
                .map(drop)
                .map_err(Into::into)
        },
        &["log", "--format=%H", "HEAD", "--", "big.txt"],
    )?;
    let other = RepoPath::parse("other/7.md")?;
    measure(
        "log -- other/7.md (15)",
        &mut || {
            store
                .log(&name, &head, &other, 0, 1000)
                .map(drop)
                .map_err(Into::into)
        },
        &["log", "--format=%H", "HEAD", "--", "other/7.md"],
    )?;
    println!("bench/navigate: {COMMITS} commits, a {LINES}-line file; p50 of {runs} runs each");
    println!("{:<26} {:>12} {:>12} {:>8}", "", "csg", "git", "git/csg");
    let mut ok = true;
    for (label, ours, git) in rows {
        let ratio = git.as_secs_f64() / ours.as_secs_f64();
        ok &= ratio >= 2.0;
        println!(
            "{label:<26} {:>10.2}ms {:>10.2}ms {ratio:>7.1}x",
            ours.as_secs_f64() * 1e3,
            git.as_secs_f64() * 1e3
        );
    }
    println!(
        "target: at least 2x faster than git: {}",
        if ok { "ok" } else { "FAIL" }
    );
    Ok(())
}
