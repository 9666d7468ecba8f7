//! What a commit changed (issue 12) against `git diff --numstat --no-renames` of the same
//! commits: added, deleted, modified, binary, nested and no-newline files, and the registered
//! scope.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid};
use gitstore::ChangeKind;

fn numstat(f: &Fixture, commit: &str, scope: &str) -> Vec<String> {
    let parent = f.git(&["rev-list", "--max-count=1", "--skip=1", commit]);
    let base = if parent.is_empty() {
        // A root commit: against the empty tree.
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904".to_owned()
    } else {
        parent
    };
    let mut args = vec!["diff", "--numstat", "--no-renames", &base, commit];
    if !scope.is_empty() {
        args.extend(["--", scope]);
    }
    f.git(&args).lines().map(|l| l.replace('\t', " ")).collect()
}

fn ours(f: &Fixture, commit: &str) -> Vec<String> {
    let details = f.store.commit_details(&f.name, &cid(commit), 1000).unwrap();
    details
        .changes
        .iter()
        .map(|c| match c.lines {
            Some((added, removed)) => format!("{added} {removed} {}", c.path),
            None => format!("- - {}", c.path),
        })
        .collect()
}

#[test]
fn changes_match_git_numstat() {
    let f = Fixture::new();
    let mut commits = vec![f.commit(
        &[
            ("a.md", b"one\ntwo\nthree\n"),
            ("dir/sub/x.rs", b"fn x() {}\n"),
            ("a/b.md", b"nested\n"),
            ("bin.dat", b"\0\x01\x02"),
        ],
        "root",
    )];
    commits.push(f.commit(
        &[
            ("a.md", b"one\n2\nthree\nfour"),
            ("dir/sub/y.rs", b"fn y() {}\n"),
            ("bin.dat", b"\0\x03"),
        ],
        "edit",
    ));
    f.git(&["rm", "-q", "-r", "dir"]);
    commits.push(f.commit(&[("a.md.bak", b"x\n")], "remove dir"));
    f.register("");
    f.sync();
    for commit in &commits {
        assert_eq!(ours(&f, commit), numstat(&f, commit, ""), "{commit}");
    }
    let details = f
        .store
        .commit_details(&f.name, &cid(&commits[2]), 1000)
        .unwrap();
    assert_eq!(details.message, "remove dir\n");
    assert_eq!(details.total_changes, 3);
    let cut = f
        .store
        .commit_details(&f.name, &cid(&commits[0]), 2)
        .unwrap();
    assert_eq!((cut.changes.len(), cut.total_changes), (2, 4));
    let kinds: Vec<(String, ChangeKind)> = details
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("a.md.bak".to_owned(), ChangeKind::Added),
            ("dir/sub/x.rs".to_owned(), ChangeKind::Deleted),
            ("dir/sub/y.rs".to_owned(), ChangeKind::Deleted),
        ]
    );
}

/// G-2: a monorepo registration sees only the changes inside its directory.
#[test]
fn changes_stay_inside_the_registered_path() {
    let f = Fixture::new();
    f.commit(&[("docs/a.md", b"a\n"), ("src/b.rs", b"b\n")], "root");
    let commit = f.commit(&[("docs/a.md", b"a2\n"), ("src/b.rs", b"b2\n")], "both");
    f.register("docs");
    f.sync();
    assert_eq!(ours(&f, &commit), numstat(&f, &commit, "docs"));
    assert_eq!(ours(&f, &commit), ["1 1 docs/a.md"]);
}
