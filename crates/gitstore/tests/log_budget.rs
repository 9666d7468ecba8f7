//! Log pages under a budget (O-9, issue 42 points 2 and 4): a page walks until it has its
//! commits or its walk or time budget runs out, answers what it found with a cursor carrying
//! the walk's frontier, and the pages together are exactly `git log [--follow] -- path`, on
//! generated histories with merges, renames and equal commit dates, and on a long linear
//! history where a path changes rarely or never. Blame and walks stop when their budget is
//! cancelled or runs out.
#![allow(dead_code, unused_imports)]

mod common;

use budget::{Budget, Stop};
use common::{Fixture, cid, path};
use gitstore::{CommitId, Error, LogPage, PageLimits};
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use testgit::fastimport::{Change, Stream};

/// A small deterministic generator (an LCG): the same seed, the same history.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

const BASE_TIME: i64 = 1_700_000_000;

/// Names the followed file takes, one rename after another.
const FOLLOW_NAMES: [&str; 4] = ["f.txt", "g/f.txt", "h.txt", "g/h/f.txt"];

/// A history of `steps` commits on `main` and two side branches, merged both ways: `hot.txt`
/// changed by most commits, `rare.txt` by few, `g/...` a directory, and one followed file
/// renamed (with small edits) now and then; every third commit shares its date with the one
/// before. Answers the followed file's name at `main`'s head.
fn generated(f: &Fixture, seed: u64, steps: u64) -> String {
    #[derive(Clone)]
    struct Branch {
        tip: Option<u64>,
        files: std::collections::BTreeMap<String, String>,
        follow: String,
    }
    let mut rng = Rng(seed);
    let mut stream = Stream::default();
    let body: String = (0..24)
        .map(|i| format!("line {i} of the followed file\n"))
        .collect();
    let first = Branch {
        tip: None,
        files: [
            ("hot.txt".to_owned(), "0\n".to_owned()),
            ("rare.txt".to_owned(), "r\n".to_owned()),
            ("f.txt".to_owned(), body),
        ]
        .into(),
        follow: "f.txt".to_owned(),
    };
    let changes = |files: &std::collections::BTreeMap<String, String>| -> Vec<Change> {
        files
            .iter()
            .map(|(p, c)| Change::Write(p.clone(), c.clone()))
            .collect()
    };
    let mut branches = vec![first.clone(), first.clone(), first];
    let root = stream.commit("main", BASE_TIME, None, &[], &changes(&branches[0].files));
    for b in &mut branches {
        b.tip = Some(root);
    }
    for step in 1..steps {
        let time = BASE_TIME + (step as i64) * 2 / 3;
        let which = rng.below(100);
        let b = rng.below(3) as usize;
        let name = ["main", "side1", "side2"][b];
        if which < 55 {
            // An ordinary commit: hot.txt, sometimes rare.txt or the followed file.
            let branch = &mut branches[b];
            let mut edits = vec![("hot.txt".to_owned(), format!("{step}\n"))];
            if rng.below(12) == 0 {
                edits.push(("rare.txt".to_owned(), format!("rare {step}\n")));
            }
            if rng.below(6) == 0 {
                let followed = branch.follow.clone();
                let mut content = branch.files[&followed].clone();
                let _ = writeln!(content, "edit {step}");
                edits.push((followed, content));
            }
            if rng.below(10) == 0 {
                edits.push((format!("g/d{}.txt", rng.below(3)), format!("{step}\n")));
            }
            let mut out = Vec::new();
            for (p, c) in edits {
                branch.files.insert(p.clone(), c.clone());
                out.push(Change::Write(p, c));
            }
            branch.tip = Some(stream.commit(name, time, branch.tip, &[], &out));
        } else if which < 63 {
            // A rename of the followed file, with a small edit half the time.
            let branch = &mut branches[b];
            let old = branch.follow.clone();
            let new = FOLLOW_NAMES
                [(FOLLOW_NAMES.iter().position(|n| *n == old).unwrap_or(0) + 1) % 4]
                .to_owned();
            if branch
                .files
                .keys()
                .any(|p| p.starts_with(&format!("{new}/")))
            {
                continue;
            }
            let mut content = branch.files.remove(&old).unwrap_or_default();
            if rng.below(2) == 0 {
                let _ = writeln!(content, "renamed at {step}");
            }
            branch.files.insert(new.clone(), content.clone());
            branch.follow = new.clone();
            branch.tip = Some(stream.commit(
                name,
                time,
                branch.tip,
                &[],
                &[Change::Delete(old), Change::Write(new, content)],
            ));
        } else if which < 72 && b != 0 {
            // A side branch starts again from main.
            branches[b] = branches[0].clone();
        } else {
            // A merge of another branch into this one: its hot.txt (and rare.txt) taken.
            let other = (b + 1 + rng.below(2) as usize) % 3;
            let (theirs_tip, theirs_files) = (branches[other].tip, branches[other].files.clone());
            if theirs_tip == branches[b].tip {
                continue;
            }
            let branch = &mut branches[b];
            let mut out = Vec::new();
            for p in ["hot.txt", "rare.txt"] {
                if rng.below(2) == 0
                    && let Some(c) = theirs_files.get(p)
                {
                    branch.files.insert(p.to_owned(), c.clone());
                    out.push(Change::Write(p.to_owned(), c.clone()));
                }
            }
            let merges: Vec<u64> = theirs_tip.into_iter().collect();
            branch.tip = Some(stream.commit(name, time, branch.tip, &merges, &out));
        }
    }
    let follow = branches[0].follow.clone();
    stream.import(&f.src);
    follow
}

/// `git log --format=%H [--follow] [-- path]` in the source repository.
fn git_log(f: &Fixture, path: Option<&str>, follow: bool) -> Vec<String> {
    let mut args = vec!["log", "--format=%H"];
    if follow {
        args.push("--follow");
    }
    if let Some(path) = path {
        args.extend(["--", path]);
    }
    f.git(&args).lines().map(str::to_owned).collect()
}

/// Every page of a log, `limits` each (a fresh budget of `budget()` per page), as commit
/// SHAs with their followed paths; and the pages themselves.
fn all_pages(
    f: &Fixture,
    head: &CommitId,
    file: &str,
    follow: bool,
    limit: usize,
    walk: u64,
    budget: impl Fn() -> Budget,
) -> (Vec<String>, Vec<LogPage<String>>) {
    let mut commits = Vec::new();
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let budget = budget();
        let limits = PageLimits {
            limit,
            walk,
            budget: &budget,
        };
        let page: LogPage<String> = if follow {
            let page = f
                .store
                .log_follow_page(&f.name, head, &path(file), cursor.as_ref(), limits)
                .unwrap();
            LogPage {
                commits: page
                    .commits
                    .into_iter()
                    .map(|c| format!("{} {}", c.commit.commit, c.path))
                    .collect(),
                next_cursor: page.next_cursor,
                partial: page.partial,
                walked: page.walked,
            }
        } else {
            let page = f
                .store
                .log_page(&f.name, head, &path(file), cursor.as_ref(), limits)
                .unwrap();
            LogPage {
                commits: page
                    .commits
                    .into_iter()
                    .map(|c| c.commit.to_string())
                    .collect(),
                next_cursor: page.next_cursor,
                partial: page.partial,
                walked: page.walked,
            }
        };
        assert!(page.commits.len() <= limit);
        commits.extend(page.commits.iter().cloned());
        let next = page.next_cursor.clone();
        pages.push(page);
        let Some(next) = next else {
            return (commits, pages);
        };
        cursor = Some(
            f.store
                .log_cursor(&f.name, &path(file), follow, &next)
                .unwrap(),
        );
        assert!(pages.len() < 100_000, "the pages never end");
    }
}

fn shas(commits: &[String]) -> Vec<String> {
    commits
        .iter()
        .map(|c| c.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

/// Issue 42 point 4: on generated histories with merges both ways, renames and equal commit
/// dates, the pages of a log — of every path kind, followed or not, cut by page size or by
/// the walk budget at many points — are exactly `git log [--follow] -- path`.
#[test]
fn issue42_paged_logs_of_generated_histories_equal_git_log() {
    for seed in 1..=4u64 {
        let f = Fixture::new();
        let followed = generated(&f, seed, 260);
        f.register("");
        f.sync();
        let head = cid(&f.source.head());
        let unlimited = Budget::unlimited;
        for file in [
            None,
            Some("hot.txt"),
            Some("rare.txt"),
            Some("g"),
            Some("missing.txt"),
        ] {
            let git = git_log(&f, file, false);
            for (limit, walk) in [(500, u64::MAX), (1, u64::MAX), (3, 1), (7, 40)] {
                let (ours, _) =
                    all_pages(&f, &head, file.unwrap_or(""), false, limit, walk, unlimited);
                assert_eq!(
                    ours, git,
                    "seed {seed}, {file:?}, limit {limit}, walk {walk}"
                );
            }
        }
        let git = git_log(&f, Some(&followed), true);
        let (whole, _) = all_pages(&f, &head, &followed, true, 500, u64::MAX, unlimited);
        assert_eq!(shas(&whole), git, "seed {seed}: follow {followed}");
        for (limit, walk) in [(1, u64::MAX), (2, 1), (5, 30)] {
            let (paged, _) = all_pages(&f, &head, &followed, true, limit, walk, unlimited);
            assert_eq!(
                paged, whole,
                "seed {seed}: follow {followed}, {limit}/{walk}"
            );
        }
    }
}

/// Commits of the long linear history.
const LONG: u64 = 20_000;
/// Where `rare.txt` changes, and where the followed file is added, renamed and edited.
const RARE_AT: [u64; 4] = [1, 5_000, 12_000, 19_000];
const FOLLOW_ADDED: u64 = 2;
const FOLLOW_RENAMED: u64 = 10_000;
const FOLLOW_EDITED: u64 = 15_000;

/// A linear history of [`LONG`] commits made with `git fast-import`: every commit changes
/// `hot.txt`; `rare.txt` changes at [`RARE_AT`]; `stable.txt` never changes after the first
/// commit; `old/name.txt` is added, renamed to `new/name.txt` and edited. Made once.
fn long() -> &'static Fixture {
    static LONG_HISTORY: OnceLock<Fixture> = OnceLock::new();
    LONG_HISTORY.get_or_init(|| {
        let f = Fixture::new();
        let mut stream = Stream::default();
        let stable: String = (0..200).map(|i| format!("stable line {i}\n")).collect();
        let named: String = (0..30).map(|i| format!("named line {i}\n")).collect();
        let mut tip = None;
        for n in 0..LONG {
            let mut changes = vec![Change::Write("hot.txt".into(), format!("{n}\n"))];
            if n == 0 {
                changes.push(Change::Write("stable.txt".into(), stable.clone()));
            }
            if RARE_AT.contains(&n) {
                changes.push(Change::Write("rare.txt".into(), format!("rare {n}\n")));
            }
            match n {
                FOLLOW_ADDED => changes.push(Change::Write("old/name.txt".into(), named.clone())),
                FOLLOW_RENAMED => {
                    changes.push(Change::Delete("old/name.txt".into()));
                    changes.push(Change::Write("new/name.txt".into(), named.clone()));
                }
                FOLLOW_EDITED => changes.push(Change::Write(
                    "new/name.txt".into(),
                    format!("{named}edited\n"),
                )),
                _ => {}
            }
            // Two commits a second: pauses land between commits of one date too.
            let time = BASE_TIME + (n / 2) as i64;
            tip = Some(stream.commit("main", time, tip, &[], &changes));
        }
        stream.import(&f.src);
        f.register("");
        f.sync();
        f
    })
}

/// Issue 42 points 2 and 4: in a long history, the log of a path that never changed and of
/// one that changed four times answers partial pages at the walk budget — with the commits
/// found so far, none for the missing path, and a cursor — and the pages together are exactly `git log -- path`; so does the
/// followed log across a rename.
#[test]
fn issue42_rare_and_missing_paths_page_partially_and_equal_git_log() {
    let f = long();
    let head = cid(&f.source.head());
    for file in ["missing.txt", "rare.txt"] {
        let (ours, pages) = all_pages(f, &head, file, false, 50, 2_000, Budget::unlimited);
        assert_eq!(ours, git_log(f, Some(file), false), "{file}");
        assert!(
            pages.len() >= (LONG / 2_000) as usize,
            "{file}: {} pages",
            pages.len()
        );
        // The first 2,000 commits walked (19,999 down to 18,000) hold rare.txt's change at
        // 19,000 only, and no change of missing.txt.
        let found = usize::from(file == "rare.txt");
        assert_eq!(pages[0].commits.len(), found, "{file}");
        assert!(pages[0].partial, "{file}");
        assert!(pages[0].next_cursor.is_some(), "{file}");
        assert!(pages.iter().all(|p| p.walked <= 2_000), "{file}");
        let cursor = pages[0].next_cursor.as_deref().unwrap_or("");
        assert!(cursor.len() < 200, "a linear frontier is small: {cursor}");
    }
    let (ours, pages) = all_pages(f, &head, "new/name.txt", true, 50, 2_000, Budget::unlimited);
    assert_eq!(shas(&ours), git_log(f, Some("new/name.txt"), true));
    assert_eq!(ours.len(), 3, "{ours:?}");
    assert!(ours[2].ends_with(" old/name.txt"), "{ours:?}");
    assert!(pages.len() >= (LONG / 2_000) as usize);
}

/// Issue 42 point 4: a page stops at its soft deadline and answers what it found with a
/// cursor (here: nothing yet), well before its hard deadline; the next pages go on.
#[test]
fn issue42_a_page_wraps_up_at_its_soft_deadline() {
    let f = long();
    let head = cid(&f.source.head());
    let budget = || {
        let now = Instant::now();
        Budget::new(
            now + Duration::from_secs(30),
            now + Duration::from_millis(20),
        )
    };
    let started = Instant::now();
    let first = budget();
    let limits = PageLimits {
        limit: 50,
        walk: u64::MAX,
        budget: &first,
    };
    let page = f
        .store
        .log_page(&f.name, &head, &path("missing.txt"), None, limits)
        .unwrap();
    let took = started.elapsed();
    assert!(page.partial && page.commits.is_empty(), "{page:?}");
    assert!(page.next_cursor.is_some());
    assert!(page.walked < LONG, "stopped early: walked {}", page.walked);
    assert!(
        took < Duration::from_secs(10),
        "answered at its soft deadline: {took:?}"
    );
    // Pages of 20 ms each get through the whole history, and agree with git.
    let (ours, pages) = all_pages(f, &head, "rare.txt", false, 50, u64::MAX, budget);
    assert_eq!(ours, git_log(f, Some("rare.txt"), false));
    assert!(pages.len() > 1, "the soft deadline cut the walk");
}

/// Runs `work` on a thread with a budget, cancels the budget 30 ms in, and asserts that the
/// work answered `Stopped(Cancelled)` within 2 s of the cancel (bound generously: a hang or a
/// walk to the end fails); prints how long it took.
fn stops_when_cancelled<T: std::fmt::Debug + PartialEq + Send + 'static>(
    label: &str,
    work: impl FnOnce(Budget) -> Result<T, Error> + Send + 'static,
) {
    let budget = Budget::unlimited();
    let inner = budget.clone();
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = tx.send(work(inner));
    });
    std::thread::sleep(Duration::from_millis(30));
    budget.cancel();
    let cancelled_at = Instant::now();
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the cancelled work ended");
    let took = cancelled_at.elapsed();
    thread.join().expect("no panic");
    assert_eq!(result, Err(Error::Stopped(Stop::Cancelled)), "{label}");
    assert!(
        took < Duration::from_secs(2),
        "{label} stopped {took:?} after the cancel"
    );
    eprintln!("{label} stopped {took:?} after the cancel");
}

/// Issue 42 point 3: a cancelled budget stops a log walk, a followed walk and a blame within
/// about 100 ms.
#[test]
fn issue42_a_cancelled_budget_stops_walks_and_blame() {
    let f = long();
    let head = cid(&f.source.head());
    for (label, follow, file) in [
        ("log of a missing path", false, "missing.txt"),
        ("follow", true, "stable.txt"),
    ] {
        let (store, name, at) = (f.store.clone(), f.name.clone(), head.clone());
        stops_when_cancelled(label, move |budget| {
            let limits = PageLimits {
                limit: 50,
                walk: u64::MAX,
                budget: &budget,
            };
            if follow {
                store
                    .log_follow_page(&name, &at, &path(file), None, limits)
                    .map(|page| page.walked)
            } else {
                store
                    .log_page(&name, &at, &path(file), None, limits)
                    .map(|page| page.walked)
            }
        });
    }
    let (store, name, at) = (f.store.clone(), f.name.clone(), head);
    stops_when_cancelled("blame", move |budget| {
        store
            .blame_within(&name, &at, &path("stable.txt"), 1, 200, &budget)
            .map(|(ranges, _)| ranges.len())
    });
}

/// Issue 42 point 2: blame past its hard deadline stops with `Stopped(Deadline)`; within its
/// budget it answers what `git blame` does.
#[test]
fn issue42_blame_stops_at_its_deadline() {
    let f = long();
    let head = cid(&f.source.head());
    let tiny = Budget::lasting(Duration::from_millis(5), 1.0);
    std::thread::sleep(Duration::from_millis(10));
    let error = f
        .store
        .blame_within(&f.name, &head, &path("stable.txt"), 1, 200, &tiny)
        .unwrap_err();
    assert_eq!(error, Error::Stopped(Stop::Deadline));
    let (ranges, total) = f
        .store
        .blame_within(
            &f.name,
            &head,
            &path("rare.txt"),
            1,
            1,
            &Budget::unlimited(),
        )
        .unwrap();
    assert_eq!(total, 1);
    let git = f.git(&["log", "-1", "--format=%H", "--", "rare.txt"]);
    assert_eq!(ranges[0].commit.commit.to_string(), git);
}

/// Issue 42 point 3: a commit that deletes and adds more files than git's rename limit
/// (1,000 × 1,000 pairs) gets no inexact rename detection, as `git show` does, and says so;
/// an exact rename is still found; a cancelled budget stops the detection.
#[test]
fn issue42_rename_detection_stops_at_git_rename_limit() {
    let f = Fixture::new();
    let mut stream = Stream::default();
    let text = |i: usize| -> String { (0..8).map(|l| format!("file {i} line {l}\n")).collect() };
    let mut files: Vec<Change> = (0..1_001)
        .map(|i| Change::Write(format!("old/{i}.txt"), text(i)))
        .collect();
    files.push(Change::Write("keep/0.txt".into(), "exact\n".into()));
    let first = stream.commit("main", BASE_TIME, None, &[], &files);
    // New base names: git (2.33 on) pairs files of one base name before its limit applies.
    let mut moved: Vec<Change> = (0..1_001)
        .flat_map(|i| {
            [
                Change::Delete(format!("old/{i}.txt")),
                Change::Write(format!("new/n{i}.txt"), format!("{}edited\n", text(i))),
            ]
        })
        .collect();
    moved.push(Change::Delete("keep/0.txt".into()));
    moved.push(Change::Write("same/0.txt".into(), "exact\n".into()));
    stream.commit("main", BASE_TIME + 1, Some(first), &[], &moved);
    stream.import(&f.src);
    f.register("");
    f.sync();
    let head = cid(&f.source.head());
    let files = f
        .store
        .commit_files(&f.name, &head, 5_000, &Budget::unlimited())
        .unwrap();
    assert!(files.renames_skipped);
    assert_eq!(files.total_files, 2_003);
    let renamed: Vec<_> = files
        .files
        .iter()
        .filter(|c| c.old_path.is_some())
        .collect();
    assert_eq!(renamed.len(), 1, "only the exact rename");
    assert_eq!(renamed[0].path, "same/0.txt");
    let git = f.git(&["show", "--numstat", "--format=", "HEAD"]);
    assert_eq!(git.lines().count(), 2_003, "git lists as many");
    assert_eq!(git.lines().filter(|l| l.contains("=>")).count(), 1, "{git}");
    // The budget reaches rename detection and the tree walk.
    let gone = Budget::unlimited();
    gone.cancel();
    let error = f
        .store
        .commit_files(&f.name, &head, 5_000, &gone)
        .unwrap_err();
    assert_eq!(error, Error::Stopped(Stop::Cancelled));
}

/// Issue 42 point 4: a walk whose queue grows wide (a merge of 1,100 branches) ends its
/// page at the frontier bound, with a cursor that holds the whole frontier; the pages
/// together are still `git log`.
#[test]
fn issue42_a_wide_frontier_ends_the_page() {
    let f = Fixture::new();
    let mut stream = Stream::default();
    let root = stream.commit(
        "main",
        BASE_TIME,
        None,
        &[],
        &[Change::Write("a.txt".into(), "root\n".into())],
    );
    let branches: Vec<u64> = (0..1_100)
        .map(|i| {
            stream.commit(
                &format!("b{i}"),
                BASE_TIME + 1 + i as i64,
                Some(root),
                &[],
                &[Change::Write(format!("b/{i}.txt"), format!("{i}\n"))],
            )
        })
        .collect();
    stream.commit(
        "main",
        BASE_TIME + 5_000,
        Some(branches[0]),
        &branches[1..],
        &[],
    );
    stream.import(&f.src);
    f.register("");
    f.sync();
    let head = cid(&f.source.head());
    let (ours, pages) = all_pages(&f, &head, "", false, 500, u64::MAX, Budget::unlimited);
    assert_eq!(ours, git_log(&f, None, false));
    assert!(pages[0].partial, "the frontier bound ended the first page");
    assert!(pages[0].commits.len() < 500, "{}", pages[0].commits.len());
    let cursor = pages[0].next_cursor.as_deref().unwrap_or("");
    assert!(
        cursor.len() > 1_000 * 20,
        "the cursor holds the frontier: {}",
        cursor.len()
    );
}
