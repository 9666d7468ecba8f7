//! The log (issue 12) against `git log` on the same repository: order, paging, path
//! limiting with git's default history simplification across merges, the registered scope,
//! and the fields shown.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid, path};
use gitstore::RepoPath;
use testgit::SourceRepo;

/// main: a, b (docs), [side: c (docs), d (src)], e (src), merge of side, f (docs); a
/// multi-line subject on b.
fn history(repo: &SourceRepo) {
    repo.commit(&[("README.md", b"a\n")], "readme");
    repo.commit(
        &[("docs/guide.md", b"1\n")],
        "guide: first\nsecond line\n\nbody",
    );
    repo.git(&["checkout", "-q", "-b", "side"]);
    repo.commit(&[("docs/guide.md", b"2\n")], "guide on side");
    repo.commit(&[("src/lib.rs", b"fn a() {}\n")], "lib on side");
    repo.git(&["checkout", "-q", "main"]);
    repo.commit(&[("src/main.rs", b"fn main() {}\n")], "main.rs");
    repo.git(&["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
    repo.commit(&[("docs/other.md", b"x\n")], "other doc");
    // A merge that changes nothing under docs relative to its first parent.
    repo.git(&["checkout", "-q", "-b", "side2"]);
    repo.commit(&[("src/x.rs", b"x\n")], "x on side2");
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["merge", "-q", "--no-ff", "-m", "merge side2", "side2"]);
}

/// A store with [`history`] registered under `scope` and synced; answers it and the head.
fn synced(scope: &str) -> (Fixture, gitstore::CommitId) {
    let f = Fixture::new();
    history(&f.source);
    f.register(scope);
    f.sync();
    let head = cid(&f.source.head());
    (f, head)
}

fn git_log(repo: &SourceRepo, format: &str, path: Option<&str>) -> Vec<String> {
    let mut args = vec!["log".to_owned(), format!("--format={format}")];
    if let Some(path) = path {
        args.extend(["--".to_owned(), path.to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    repo.git(&args).lines().map(str::to_owned).collect()
}

#[test]
fn log_matches_git_log_with_and_without_a_path() {
    let (f, head) = synced("");
    let (repo, store, name) = (&f.source, &f.store, &f.name);
    for path in [
        None,
        Some("docs"),
        Some("docs/guide.md"),
        Some("src"),
        Some("missing"),
    ] {
        let (log, more) = store
            .log(name, &head, &common::path(path.unwrap_or("")), 0, 100)
            .unwrap();
        assert!(!more);
        let ids: Vec<String> = log.iter().map(|c| c.commit.to_string()).collect();
        assert_eq!(ids, git_log(repo, "%H", path), "{path:?}");
        let subjects: Vec<String> = log.iter().map(|c| c.subject.clone()).collect();
        assert_eq!(subjects, git_log(repo, "%s", path), "{path:?}");
        let authors: Vec<String> = log
            .iter()
            .map(|c| format!("{} <{}> {}", c.author, c.author_email, c.author_time))
            .collect();
        assert_eq!(authors, git_log(repo, "%an <%ae> %at", path), "{path:?}");
        let parents: Vec<String> = log
            .iter()
            .map(|c| {
                let ids: Vec<String> = c.parents.iter().map(|p| p.to_string()).collect();
                format!("parents: {}", ids.join(" "))
            })
            .collect();
        // A marker keeps the root's empty parent list from being trimmed away.
        let expected: Vec<String> = git_log(repo, "parents: %P", path)
            .into_iter()
            .map(|l| {
                if l == "parents:" {
                    "parents: ".into()
                } else {
                    l
                }
            })
            .collect();
        assert_eq!(parents, expected, "{path:?}");
    }

    // Pages: the same commits in order, `more` until the last.
    let all = git_log(repo, "%H", None);
    let mut paged = Vec::new();
    let mut skip = 0;
    loop {
        let (page, more) = store.log(name, &head, &RepoPath::root(), skip, 3).unwrap();
        skip += page.len();
        paged.extend(page.into_iter().map(|c| c.commit.to_string()));
        if !more {
            break;
        }
    }
    assert_eq!(paged, all);
}

/// G-2: a monorepo registration's log lists only the commits that changed its directory,
/// and a path outside it is refused.
#[test]
fn log_stays_inside_the_registered_path() {
    let (f, head) = synced("docs");
    let (log, _) = f
        .store
        .log(&f.name, &head, &RepoPath::root(), 0, 100)
        .unwrap();
    let ids: Vec<String> = log.iter().map(|c| c.commit.to_string()).collect();
    assert_eq!(ids, git_log(&f.source, "%H", Some("docs")));
    let outside = f.store.log(&f.name, &head, &path("src"), 0, 100);
    assert!(
        matches!(outside, Err(gitstore::Error::OutsideScope { .. })),
        "{outside:?}"
    );
}
