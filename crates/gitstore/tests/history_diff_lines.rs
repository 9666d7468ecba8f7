//! S-9: the history index's added and removed lines (`GitStore::history_commit`) are git's,
//! line for line: on histories where several minimal diffs exist (moved, repeated, swapped
//! and duplicated lines, rewrites large enough for git's cost cut-offs), every commit's lines
//! equal the `+`/`-` lines `git show` prints (same paths, line numbers, text and order), and
//! the commits whose lines contain a string are exactly `git log -G`'s.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid, git_raw};
use gitstore::{CommitChanges, LineSide};
use std::time::{Duration, Instant};

/// A small deterministic generator (no seed from the environment: failures reproduce).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// C-like lines with few distinct values, so most lines repeat (braces, blanks, returns).
const CODE: &[&str] = &[
    "{",
    "}",
    "",
    "    return 0;",
    "    if (x) {",
    "    }",
    "        free(p);",
    "        x++;",
    "int f(void)",
    "int g(void)",
    "    zmalloc_used_memory();",
    "\tdictAdd(d, k, v);",
    "/* comment */",
];

fn random_line(rng: &mut Lcg, alphabet: usize) -> String {
    if rng.below(4) == 0 {
        CODE[rng.below(CODE.len())].to_owned()
    } else {
        format!("line {}", rng.below(alphabet))
    }
}

/// One random edit of `lines`: a moved block, two swapped blocks, a duplicated block,
/// inserted or deleted lines, or a replaced line.
fn edit(rng: &mut Lcg, lines: &mut Vec<String>, alphabet: usize) {
    let n = lines.len();
    match rng.below(7) {
        0 | 1 if n > 2 => {
            // Move a block elsewhere.
            let start = rng.below(n);
            let len = 1 + rng.below((n - start).min(6));
            let block: Vec<String> = lines.drain(start..start + len).collect();
            let at = rng.below(lines.len() + 1);
            for (k, l) in block.into_iter().enumerate() {
                lines.insert(at + k, l);
            }
        }
        2 if n > 4 => {
            // Swap two adjacent blocks.
            let start = rng.below(n - 2);
            let a = 1 + rng.below(((n - start) / 2).min(5));
            let b = 1 + rng.below((n - start - a).min(5));
            let mut block: Vec<String> = lines[start..start + a + b].to_vec();
            block.rotate_left(a);
            lines.splice(start..start + a + b, block);
        }
        3 if n > 0 => {
            // Duplicate a block.
            let start = rng.below(n);
            let len = 1 + rng.below((n - start).min(4));
            let block: Vec<String> = lines[start..start + len].to_vec();
            let at = rng.below(n + 1);
            lines.splice(at..at, block);
        }
        4 if n > 0 => {
            let start = rng.below(n);
            let len = 1 + rng.below((n - start).min(4));
            lines.drain(start..start + len);
        }
        5 if n > 0 => {
            let at = rng.below(n);
            lines[at] = random_line(rng, alphabet);
        }
        _ => {
            let at = rng.below(n + 1);
            for _ in 0..1 + rng.below(4) {
                lines.insert(at, random_line(rng, alphabet));
            }
        }
    }
}

fn join(lines: &[String], final_newline: bool) -> Vec<u8> {
    let mut text = lines.join("\n");
    if final_newline && !lines.is_empty() {
        text.push('\n');
    }
    text.into_bytes()
}

/// The commits built: hand-made cases first, then random edits of three files, then a large
/// rewrite past git's cost cut-off (`xdl_split`'s heuristics and its `mxcost` limit).
fn build(f: &Fixture) {
    let lines = |s: &str| s.as_bytes().to_vec();
    // A line moved up past a block: the redis case (6b297cd), where another minimal diff
    // keeps the moved line in place.
    f.commit(
        &[(
            "moved.c",
            &lines("int f(void)\n{\n    a();\n    if (x) {\n        b();\n    }\n    c = rate(zmalloc_used_memory());\n    d();\n}\n"),
        )],
        "moved: base",
    );
    f.commit(
        &[(
            "moved.c",
            &lines("int f(void)\n{\n    a();\n    c = rate(zmalloc_used_memory());\n    if (x) {\n        b();\n        e();\n    }\n    d();\n}\n"),
        )],
        "moved: up",
    );
    // Swapped blocks, repeated braces and blank lines.
    f.commit(
        &[(
            "swap.c",
            &lines("int f(void)\n{\n    return 0;\n}\n\nint g(void)\n{\n    return 1;\n}\n\nint h(void)\n{\n    return 2;\n}\n"),
        )],
        "swap: base",
    );
    f.commit(
        &[(
            "swap.c",
            &lines("int h(void)\n{\n    return 2;\n}\n\nint g(void)\n{\n    return 1;\n}\n\nint f(void)\n{\n    return 0;\n}\n"),
        )],
        "swap: reversed",
    );
    // The indent heuristic's classic: a function added between two others.
    f.commit(
        &[(
            "swap.c",
            &lines("int h(void)\n{\n    return 2;\n}\n\nint k(void)\n{\n    return 2;\n}\n\nint g(void)\n{\n    return 1;\n}\n\nint f(void)\n{\n    return 0;\n}\n"),
        )],
        "swap: insert k",
    );
    // Last line without a newline, then with one.
    f.commit(&[("tail.txt", b"a\nb\nc")], "tail: no newline");
    f.commit(&[("tail.txt", b"a\nc\nb\nc\n")], "tail: newline");

    let mut rng = Lcg(0x5eed);
    let mut files: Vec<(String, Vec<String>, usize)> = vec![
        ("src/a.c".into(), Vec::new(), 8),
        ("src/b.txt".into(), Vec::new(), 4),
        ("c.txt".into(), Vec::new(), 30),
    ];
    for (_, lines, alphabet) in &mut files {
        for _ in 0..40 + rng.below(80) {
            lines.push(random_line(&mut rng, *alphabet));
        }
    }
    for round in 0..60 {
        let mut changed: Vec<(String, Vec<u8>)> = Vec::new();
        for (path, lines, alphabet) in &mut files {
            if round > 0 && rng.below(3) == 0 {
                continue;
            }
            for _ in 0..1 + rng.below(5) {
                edit(&mut rng, lines, *alphabet);
            }
            changed.push((path.clone(), join(lines, rng.below(8) != 0)));
        }
        let refs: Vec<(&str, &[u8])> = changed
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_slice()))
            .collect();
        f.commit(&refs, &format!("random {round}"));
    }

    // A 3,000-line file rewritten in a third of its lines: the edit cost passes git's
    // `mxcost` and snake heuristics, where git's diff is no longer minimal.
    let mut big: Vec<String> = (0..3000).map(|_| random_line(&mut rng, 40)).collect();
    f.commit(&[("big.txt", &join(&big, true))], "big: base");
    for round in 0..3 {
        for _ in 0..400 {
            edit(&mut rng, &mut big, 40);
        }
        f.commit(
            &[("big.txt", &join(&big, true))],
            &format!("big: rewrite {round}"),
        );
    }
    // Renamed with edits: removed lines under the old path, added under the new one.
    f.git(&["mv", "src/b.txt", "src/renamed.txt"]);
    let mut renamed = files[1].1.clone();
    edit(&mut rng, &mut renamed, 4);
    f.commit(&[("src/renamed.txt", &join(&renamed, true))], "rename b");
}

/// One `+`/`-` line: (path, added, 1-based line, text).
type Line = (String, bool, u32, String);

/// The `+`/`-` lines of `git show` for `commit` (default context and indent heuristic, the
/// Myers algorithm), parsed from its hunks.
fn git_show_lines(f: &Fixture, commit: &str) -> Vec<Line> {
    let out = git_raw(
        &f.src,
        &[
            "show",
            "--format=",
            "--no-color",
            "--no-ext-diff",
            "--no-prefix",
            "--diff-algorithm=myers",
            "--indent-heuristic",
            commit,
        ],
        None,
    );
    assert!(out.status.success());
    show_lines(&out.stdout)
}

/// The `+`/`-` lines of `git show`'s patch output (without prefixes), parsed from its hunks;
/// text lossily decoded, as the history index keeps it.
fn show_lines(patch: &[u8]) -> Vec<Line> {
    let text = String::from_utf8_lossy(patch);
    let mut lines = Vec::new();
    let (mut old_path, mut new_path) = (String::new(), String::new());
    let (mut old_line, mut new_line, mut old_left, mut new_left) = (0u32, 0u32, 0u32, 0u32);
    for l in text.split('\n') {
        if old_left > 0 || new_left > 0 {
            match l.as_bytes().first() {
                Some(b'-') => {
                    lines.push((old_path.clone(), false, old_line, l[1..].to_owned()));
                    old_line += 1;
                    old_left -= 1;
                }
                Some(b'+') => {
                    lines.push((new_path.clone(), true, new_line, l[1..].to_owned()));
                    new_line += 1;
                    new_left -= 1;
                }
                Some(b'\\') => {}
                _ => {
                    old_line += 1;
                    new_line += 1;
                    old_left -= 1;
                    new_left -= 1;
                }
            }
            continue;
        }
        if let Some(p) = l.strip_prefix("--- ") {
            old_path = p.trim_end_matches('\t').to_owned();
        } else if let Some(p) = l.strip_prefix("+++ ") {
            new_path = p.trim_end_matches('\t').to_owned();
            if old_path == "/dev/null" {
                old_path = new_path.clone();
            }
            if new_path == "/dev/null" {
                new_path = old_path.clone();
            }
        } else if let Some(header) = l.strip_prefix("@@ -") {
            let range = |r: &str| -> (u32, u32) {
                let (start, len) = r.split_once(',').unwrap_or((r, "1"));
                (start.parse().unwrap(), len.parse().unwrap())
            };
            let mut parts = header.split(' ');
            let (os, ol) = range(parts.next().unwrap());
            let (ns, nl) = range(parts.next().unwrap().trim_start_matches('+'));
            (old_line, old_left, new_line, new_left) = (os, ol, ns, nl);
        } else if l.starts_with("diff --git ") {
            (old_path, new_path) = (String::new(), String::new());
        }
    }
    lines
}

fn our_lines(changes: &CommitChanges) -> Vec<Line> {
    changes
        .lines
        .iter()
        .map(|l| {
            (
                l.path.clone(),
                l.side == LineSide::Added,
                l.line,
                l.text.clone(),
            )
        })
        .collect()
}

#[test]
fn s9_history_lines_equal_git_show_and_log_g() {
    let started = Instant::now();
    let f = Fixture::new();
    build(&f);
    f.register("");
    f.sync();
    let head = cid(&f.source.head());
    let commits = f.store.history_walk(&f.name, &head, 10_000).expect("walk");
    assert!(commits.len() > 60);
    let mut ours_by_commit = Vec::new();
    let mut differing = Vec::new();
    for commit in &commits {
        let (_, changes) = f
            .store
            .history_commit(&f.name, &head, commit)
            .expect("commit");
        let ours = our_lines(&changes);
        let theirs = git_show_lines(&f, &commit.to_string());
        differing.extend(difference(commit, &ours, &theirs));
        ours_by_commit.push((commit.to_string(), ours));
    }
    assert!(differing.is_empty(), "{differing:#?}");
    let total: usize = ours_by_commit.iter().map(|(_, l)| l.len()).sum();
    assert!(total > 5_000, "{total} lines");

    // `git log -G` with literal strings: the commits whose lines contain them.
    for needle in [
        "zmalloc_used_memory",
        "dictAdd",
        "return 0;",
        "line 3",
        "line 17",
        "free(p)",
        "}",
    ] {
        let ours: Vec<&str> = ours_by_commit
            .iter()
            .filter(|(_, lines)| lines.iter().any(|l| l.3.contains(needle)))
            .map(|(c, _)| c.as_str())
            .collect();
        let pattern = needle
            .replace('(', "\\(")
            .replace(')', "\\)")
            .replace('}', "\\}");
        let out = f.git(&["log", "-G", &pattern, "--format=%H"]);
        let theirs: Vec<&str> = out.lines().collect();
        assert_eq!(ours, theirs, "-G {needle:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "took {:?}",
        started.elapsed()
    );
}

/// The same comparison on a real repository (S-9's redis/redis):
/// `CSG_DIFF_LINES_REPO=/path/to/repo CSG_DIFF_LINES_DEPTH=3000 cargo test --release -p gitstore
/// --test history_diff_lines -- --ignored --nocapture` registers it in a temp directory and
/// compares every non-merge commit of the newest `depth` (and any full SHAs listed in
/// `CSG_DIFF_LINES_COMMITS`, comma-separated) with `git show`, and the commits whose lines
/// contain a few strings with `git log -G` over the same commits.
#[test]
#[ignore = "a probe over a large repository named by CSG_DIFF_LINES_REPO"]
fn s9_history_lines_equal_git_on_a_real_repository() {
    let Ok(repo) = std::env::var("CSG_DIFF_LINES_REPO") else {
        eprintln!("CSG_DIFF_LINES_REPO is not set: nothing to compare");
        return;
    };
    let depth: usize = std::env::var("CSG_DIFF_LINES_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(3000);
    let tmp = tempfile::tempdir().unwrap();
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: tmp.path().join("data"),
            retention: gitstore::DEFAULT_RETENTION,
        },
        std::sync::Arc::new(gitstore::SystemClock),
    )
    .unwrap();
    let name = gitstore::RepoName::parse("probe/lines").unwrap();
    store
        .register(gitstore::Registration {
            name: name.clone(),
            source: repo.clone(),
            registered_path: gitstore::RepoPath::root(),
            branch: None,
            private: None,
        })
        .unwrap();
    store.sync(&name).unwrap();
    let git = |args: &[&str]| -> Vec<u8> {
        let out = git_raw(std::path::Path::new(&repo), args, None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let head = String::from_utf8(git(&["rev-parse", "HEAD"])).unwrap();
    let head = cid(head.trim());
    let mut commits = store.history_walk(&name, &head, depth).unwrap();
    for extra in std::env::var("CSG_DIFF_LINES_COMMITS")
        .unwrap_or_default()
        .split(',')
    {
        if !extra.is_empty() && !commits.iter().any(|c| c.to_string() == extra) {
            commits.push(cid(extra));
        }
    }
    let (mut compared, mut ours_time, mut differing) = (0, Duration::ZERO, Vec::new());
    let mut by_commit = Vec::new();
    for commit in &commits {
        let t = Instant::now();
        let (head_info, changes) = store.history_commit(&name, &head, commit).unwrap();
        ours_time += t.elapsed();
        if head_info.parents.len() > 1 {
            continue;
        }
        compared += 1;
        let ours = our_lines(&changes);
        let theirs = show_lines(&git(&[
            "show",
            "--format=",
            "--no-color",
            "--no-ext-diff",
            "--no-prefix",
            "--diff-algorithm=myers",
            "--indent-heuristic",
            &commit.to_string(),
        ]));
        differing.extend(difference(commit, &ours, &theirs));
        by_commit.push((commit.to_string(), ours));
    }
    eprintln!(
        "{compared} commits compared with git show ({:?} in history_commit); {} differ",
        ours_time,
        differing.len()
    );
    for d in differing.iter().take(10) {
        eprintln!("  {d}");
    }
    let listed: std::collections::HashSet<&str> =
        by_commit.iter().map(|(c, _)| c.as_str()).collect();
    let mut g_differs = Vec::new();
    for needle in [
        "zmalloc_used_memory",
        "dictAdd",
        "serverLog(LL_WARNING",
        "deprecated",
    ] {
        let ours: Vec<&str> = by_commit
            .iter()
            .filter(|(_, lines)| lines.iter().any(|l| l.3.contains(needle)))
            .map(|(c, _)| c.as_str())
            .collect();
        let pattern = needle.replace('(', "\\(");
        let out = String::from_utf8(git(&["log", "-G", &pattern, "--format=%H", "HEAD"])).unwrap();
        let theirs: Vec<&str> = out.lines().filter(|c| listed.contains(c)).collect();
        eprintln!(
            "-G {needle:?}: ours {} commits, git's {}, same: {}",
            ours.len(),
            theirs.len(),
            ours == theirs
        );
        if ours != theirs {
            g_differs.push(needle);
        }
    }
    assert!(differing.is_empty() && g_differs.is_empty());
}

/// What tells `ours` from `theirs` (git's lines of `commit`), `None` when they are equal.
fn difference<T: PartialEq + std::fmt::Debug>(
    commit: impl std::fmt::Display,
    ours: &[T],
    theirs: &[T],
) -> Option<String> {
    (ours != theirs).then(|| {
        format!(
            "{commit}: ours {} lines, git's {}; first difference at {:?}",
            ours.len(),
            theirs.len(),
            ours.iter()
                .zip(theirs)
                .position(|(a, b)| a != b)
                .map(|i| (&ours[i], &theirs[i]))
        )
    })
}
