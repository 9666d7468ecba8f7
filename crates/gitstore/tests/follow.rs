//! Issue 34 points 3 and 4: a file's history across renames (`git log --follow`) and a
//! commit's changed files with renames detected (`git show --numstat`), both against real
//! `git` on repositories built here: renames with and without edits, a copy, a file renamed
//! twice, a deletion, a merge, and paging.
#![allow(dead_code, unused_imports)]

mod common;

use budget::Budget;
use common::{Fixture, cid, path};
use gitstore::{FileStatus, FollowStatus, PageLimits};
use testgit::SourceRepo;

/// Forty distinct lines: enough that a small edit keeps a rename above 50%.
fn body(tag: &str) -> Vec<u8> {
    (1..=40)
        .map(|i| format!("{tag} line {i} of the text\n"))
        .collect::<String>()
        .into_bytes()
}

fn edited(tag: &str, extra: &str) -> Vec<u8> {
    let mut b = body(tag);
    b.extend_from_slice(extra.as_bytes());
    b
}

/// a.txt added; edited; renamed to b.txt unchanged; b.txt renamed to dir/c.txt with an
/// edit (renamed twice); copy.txt copied (with an edit) from dir/c.txt; an unrelated file
/// deleted and another renamed away beside it; a side branch editing dir/c.txt merged back.
fn build(repo: &SourceRepo) {
    repo.commit(&[("a.txt", &body("a")), ("other.txt", b"x\n")], "add a");
    repo.commit(&[("a.txt", &edited("a", "one more\n"))], "edit a");
    repo.git(&["mv", "a.txt", "b.txt"]);
    repo.commit_index("rename a to b");
    repo.git(&["mv", "b.txt", "c.txt"]);
    std::fs::create_dir_all(repo.path().join("dir")).unwrap();
    repo.git(&["mv", "c.txt", "dir/c.txt"]);
    repo.commit(
        &[("dir/c.txt", &edited("a", "one more\nand another\n"))],
        "rename b to dir/c with an edit",
    );
    repo.commit(
        &[("copy.txt", &edited("a", "one more\nand another\ncopied\n"))],
        "copy c",
    );
    repo.git(&["rm", "-q", "other.txt"]);
    repo.commit(&[("unrelated.md", b"u\n")], "drop other");
    repo.git(&["checkout", "-q", "-b", "side"]);
    repo.commit(
        &[("dir/c.txt", &edited("a", "one more\nand another\nside\n"))],
        "side edit",
    );
    repo.git(&["checkout", "-q", "main"]);
    repo.commit(&[("unrelated.md", b"u2\n")], "main edit");
    repo.git(&["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
    repo.commit(
        &[(
            "copy.txt",
            &edited("a", "one more\nand another\ncopied\nagain\n"),
        )],
        "edit copy",
    );
}

/// The repository of [`build`], registered whole and synced.
fn synced() -> Fixture {
    let f = Fixture::new();
    build(&f.source);
    f.register("");
    f.sync();
    f
}

/// `git log --follow --name-status` as (sha, status letter, old path, new path) per commit.
fn git_follow(repo: &SourceRepo, file: &str) -> Vec<(String, char, Option<String>, String)> {
    let out = repo.git(&[
        "log",
        "--follow",
        "--name-status",
        "--format=@%H",
        "--",
        file,
    ]);
    let mut rows = Vec::new();
    let mut sha = String::new();
    for line in out.lines().filter(|l| !l.is_empty()) {
        if let Some(s) = line.strip_prefix('@') {
            sha = s.to_owned();
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let letter = fields[0].chars().next().unwrap();
        let (old, new) = match fields.len() {
            3 => (Some(fields[1].to_owned()), fields[2].to_owned()),
            _ => (None, fields[1].to_owned()),
        };
        rows.push((sha.clone(), letter, old, new));
    }
    rows
}

/// Every page of the followed log of `file`, `limit` commits a page, concatenated.
fn follow_all(
    f: &Fixture,
    head: &gitstore::CommitId,
    file: &str,
    limit: usize,
) -> Vec<gitstore::FollowedCommit> {
    let unlimited = Budget::unlimited();
    let limits = PageLimits {
        limit,
        walk: u64::MAX,
        budget: &unlimited,
    };
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let page = f
            .store
            .log_follow_page(&f.name, head, &path(file), cursor.as_ref(), limits)
            .unwrap();
        assert!(!page.partial);
        all.extend(page.commits);
        let Some(next) = page.next_cursor else {
            return all;
        };
        cursor = Some(
            f.store
                .log_cursor(&f.name, &path(file), true, &next)
                .unwrap(),
        );
    }
}

fn letter(status: FollowStatus) -> char {
    match status {
        FollowStatus::Added => 'A',
        FollowStatus::Modified => 'M',
        FollowStatus::Deleted => 'D',
        FollowStatus::Renamed => 'R',
        FollowStatus::Copied => 'C',
    }
}

/// Issue 34 point 3: `log_follow` lists the commits, statuses and paths `git log --follow`
/// lists, for a file renamed twice (with and without edits), a copy, and across a merge.
#[test]
fn issue34_follow_matches_git_log_follow() {
    let f = synced();
    let head = cid(&f.source.head());
    for file in ["dir/c.txt", "copy.txt", "unrelated.md"] {
        let git = git_follow(&f.source, file);
        let ours = follow_all(&f, &head, file, 100);
        let ours: Vec<(String, char, Option<String>, String)> = ours
            .iter()
            .map(|c| {
                (
                    c.commit.commit.to_string(),
                    letter(c.status),
                    c.previous_path.clone(),
                    c.path.clone(),
                )
            })
            .collect();
        assert_eq!(ours, git, "{file}");
    }
    // The chain really was followed: the copy's history reaches the first commit via two
    // renames.
    let copy = git_follow(&f.source, "copy.txt");
    assert!(copy.iter().any(|r| r.1 == 'C'), "{copy:?}");
    assert!(copy.iter().filter(|r| r.1 == 'R').count() >= 2, "{copy:?}");
    // One rename is exact (R100), one has edits (below 100%).
    let statuses = f.source.git(&[
        "log",
        "--follow",
        "--name-status",
        "--format=",
        "--",
        "dir/c.txt",
    ]);
    assert!(
        statuses.lines().any(|l| l.starts_with("R100")),
        "{statuses}"
    );
    assert!(
        statuses
            .lines()
            .any(|l| l.starts_with('R') && !l.starts_with("R100")),
        "{statuses}"
    );

    // Paging: pages of 1 and 2 make up the whole list.
    let all = follow_all(&f, &head, "copy.txt", 100);
    assert_eq!(follow_all(&f, &head, "copy.txt", 2), all);
    assert_eq!(follow_all(&f, &head, "copy.txt", 1), all);

    // A directory or a missing file is refused with what was wrong.
    let unlimited = Budget::unlimited();
    let limits = PageLimits {
        limit: 10,
        walk: u64::MAX,
        budget: &unlimited,
    };
    let dir = f
        .store
        .log_follow_page(&f.name, &head, &path("dir"), None, limits)
        .unwrap_err();
    assert!(dir.to_string().contains("is a directory"), "{dir}");
    let missing = f
        .store
        .log_follow_page(&f.name, &head, &path("nope.txt"), None, limits)
        .unwrap_err();
    assert!(
        missing.to_string().contains("no file `nope.txt`"),
        "{missing}"
    );
}

/// Issue 34 point 4: `commit_files` lists what `git show --numstat` (renames detected by
/// default) lists for every commit: paths, old paths of renames and the counts.
#[test]
fn issue34_commit_files_match_git_show_numstat() {
    let f = synced();
    let shas = f.source.git(&["rev-list", "--no-merges", "HEAD"]);
    for sha in shas.lines() {
        let git = f.source.git(&["show", "--numstat", "-z", "--format=", sha]);
        // -z: `added\tremoved\tpath\0` or, for a rename, `added\tremoved\t\0old\0new\0`.
        let mut expected = Vec::new();
        let mut fields = git
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_start_matches('\n'));
        while let Some(head) = fields.next() {
            let parts: Vec<&str> = head.splitn(3, '\t').collect();
            let (a, r) = (parts[0].to_owned(), parts[1].to_owned());
            if parts[2].is_empty() {
                let old = fields.next().unwrap().to_owned();
                let new = fields.next().unwrap().to_owned();
                expected.push((a, r, Some(old), new));
            } else {
                expected.push((a, r, None, parts[2].to_owned()));
            }
        }
        let files = f
            .store
            .commit_files(&f.name, &cid(sha), 1000, &Budget::unlimited())
            .unwrap();
        let ours: Vec<(String, String, Option<String>, String)> = files
            .files
            .iter()
            .map(|c| {
                let (a, r) = c.lines.map_or(("-".to_owned(), "-".to_owned()), |(a, r)| {
                    (a.to_string(), r.to_string())
                });
                (a, r, c.old_path.clone(), c.path.clone())
            })
            .collect();
        assert_eq!(ours, expected, "commit {sha}");
        assert_eq!(files.total_files, expected.len());
        for c in &files.files {
            assert_eq!(c.old_path.is_some(), c.status == FileStatus::Renamed);
        }
    }
}

/// The commit of each line as `git blame --porcelain` finds it.
fn git_blame(f: &Fixture, file: &str) -> Vec<String> {
    let porcelain = f.git(&["blame", "--porcelain", "HEAD", "--", file]);
    let mut owners = Vec::new();
    for line in porcelain.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() >= 3
            && fields[0].len() == 40
            && fields[0].bytes().all(|b| b.is_ascii_hexdigit())
            && fields[1].parse::<u64>().is_ok()
        {
            let final_line: usize = fields[2].parse().unwrap();
            if owners.len() < final_line {
                owners.resize(final_line, String::new());
            }
            owners[final_line - 1] = fields[0].to_owned();
        }
    }
    owners
}

/// Issue 34 point 2: blame follows a file across renames (with and without edits, twice) as
/// `git blame` does; a copy is not followed (git blame without `-C`).
#[test]
fn issue34_blame_follows_renames_as_git_blame() {
    let f = synced();
    let head = cid(&f.source.head());
    for file in ["dir/c.txt", "copy.txt"] {
        let (ranges, total) = f.store.blame(&f.name, &head, &path(file), 1, 1000).unwrap();
        let mut ours = Vec::new();
        for r in &ranges {
            for _ in r.start_line..=r.end_line {
                ours.push(r.commit.commit.to_string());
            }
        }
        assert_eq!(ours.len() as u64, total);
        assert_eq!(ours, git_blame(&f, file), "{file}");
    }
    // The first commit still owns most of the twice-renamed file.
    let first = f.source.git(&["rev-list", "--max-parents=0", "HEAD"]);
    assert!(
        git_blame(&f, "dir/c.txt")
            .iter()
            .filter(|c| **c == first.trim())
            .count()
            >= 40
    );
}

/// Issue 34 point 4: a commit's own diff is `git show`'s (renames detected, their similarity
/// and headers; a root commit against nothing); small pages answer too.
#[test]
fn issue34_commit_diff_matches_git_show() {
    let f = synced();
    let shas = f.source.git(&["rev-list", "--no-merges", "HEAD"]);
    for sha in shas.lines() {
        let out = testgit::git_raw(
            f.source.path(),
            &["show", "--format=", "--full-index", sha],
            None,
        );
        let git: String = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| match l.strip_prefix("@@ ") {
                Some(rest) => format!("@@ {} @@", rest.split(" @@").next().unwrap()),
                None => l.to_owned(),
            })
            .map(|l| l + "\n")
            .collect();
        for budget in [1 << 20, 200] {
            let mut text = String::new();
            let mut skip = 0;
            loop {
                let page = f
                    .store
                    .commit_diff(&f.name, &cid(sha), skip, budget)
                    .unwrap();
                for file in &page.files {
                    if !file.truncated {
                        text.push_str(&file.text);
                    }
                }
                match page.next_file {
                    Some(next) => skip = next,
                    None => break,
                }
            }
            if budget > 1000 {
                assert_eq!(text, git, "commit {sha}");
            }
        }
    }
}

/// Issue 34 point 4 (compare `BASE...HEAD`): the merge base is `git merge-base`'s, for
/// diverged branches, an ancestor and the same commit.
#[test]
fn issue34_merge_base_matches_git() {
    let f = synced();
    let side = f.source.git(&["rev-parse", "side"]).trim().to_owned();
    let before_merge = f.source.git(&["rev-parse", "HEAD~1^1"]).trim().to_owned();
    let head = f.source.head();
    let root = f
        .source
        .git(&["rev-list", "--max-parents=0", "HEAD"])
        .trim()
        .to_owned();
    for (a, b) in [
        (&before_merge, &side),
        (&side, &before_merge),
        (&root, &head),
        (&head, &side),
        (&side, &side),
    ] {
        let git = f.source.git(&["merge-base", a, b]).trim().to_owned();
        let ours = f.store.merge_base(&f.name, &cid(a), &cid(b)).unwrap();
        assert_eq!(ours.map(|c| c.to_string()), Some(git), "{a} {b}");
    }
}
