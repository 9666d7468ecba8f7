//! The diff between two commits (issue 12) against `git diff --no-renames --full-index` of
//! the same commits, hunk headers compared without git's function context: modified files
//! with several hunks, added, deleted, binary, executable-bit and no-newline changes, nested
//! paths; paging by budget; the registered scope.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid, path};
use gitstore::RepoPath;

/// Git's diff with every hunk header's function context removed.
fn git_diff(f: &Fixture, base: &str, head: &str, limit: Option<&str>) -> String {
    let mut args = vec!["diff", "--no-renames", "--full-index", base, head];
    if let Some(limit) = limit {
        args.extend(["--", limit]);
    }
    let out = testgit::git_raw(&f.src, &args, None);
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| match l.strip_prefix("@@ ") {
            Some(rest) => format!("@@ {} @@", rest.split(" @@").next().unwrap()),
            None => l.to_owned(),
        })
        .map(|l| l + "\n")
        .collect()
}

fn ours(f: &Fixture, base: &str, head: &str, limit: &str, budget: usize) -> (String, Vec<usize>) {
    let mut text = String::new();
    let mut pages = Vec::new();
    let mut skip = 0;
    loop {
        let page = f
            .store
            .diff(&f.name, &cid(base), &cid(head), &path(limit), skip, budget)
            .unwrap();
        pages.push(page.files.len());
        for file in &page.files {
            assert!(!file.truncated, "{}", file.path);
            text.push_str(&file.text);
        }
        match page.next_file {
            Some(next) => skip = next,
            None => break,
        }
    }
    (text, pages)
}

#[test]
fn diff_matches_git_diff() {
    let f = Fixture::new();
    let long: String = (1..=40).map(|n| format!("line {n}\n")).collect();
    let base = f.commit(
        &[
            ("long.txt", long.as_bytes()),
            ("gone.md", b"bye\n"),
            ("bin.dat", b"\0\x01"),
            ("tool.sh", b"echo hi\n"),
            ("dir/sub/a.rs", b"fn a() {}\n"),
            ("tail.txt", b"no newline"),
        ],
        "base",
    );
    let edited = long
        .replace("line 3\n", "line three\n")
        .replace("line 30\n", "line 30\ninserted\n");
    f.git(&["rm", "-q", "gone.md"]);
    let head = f.commit(
        &[
            ("long.txt", edited.as_bytes()),
            ("new.md", b"# New\n"),
            ("bin.dat", b"\0\x02"),
            ("dir/sub/a.rs", b"fn a() { 1 }\n"),
            ("tail.txt", b"no newline\nnow more"),
        ],
        "head",
    );
    f.git(&["update-index", "--chmod=+x", "tool.sh"]);
    let head2 = f.commit_index("executable");
    f.register("");
    f.sync();
    for (a, b) in [
        (&base, &head),
        (&head, &head2),
        (&base, &head2),
        (&head2, &base),
    ] {
        let (text, _) = ours(&f, a, b, "", 1 << 20);
        assert_eq!(text, git_diff(&f, a, b, None), "{a}..{b}");
    }
    let (text, _) = ours(&f, &base, &head2, "dir", 1 << 20);
    assert_eq!(text, git_diff(&f, &base, &head2, Some("dir")));

    // Paging: a budget of the largest file spreads the same text over pages of whole files.
    let largest = f
        .store
        .diff(
            &f.name,
            &cid(&base),
            &cid(&head2),
            &RepoPath::root(),
            0,
            1 << 20,
        )
        .unwrap()
        .files
        .iter()
        .map(|file| file.text.len())
        .max()
        .unwrap();
    let (paged, pages) = ours(&f, &base, &head2, "", largest);
    assert_eq!(paged, git_diff(&f, &base, &head2, None));
    assert!(pages.len() > 2, "{pages:?}");
    // One file over the budget is cut at a line and says so.
    let page = f
        .store
        .diff(&f.name, &cid(&base), &cid(&head2), &RepoPath::root(), 0, 60)
        .unwrap();
    assert_eq!(page.files.len(), 1);
    assert!(page.files[0].truncated && page.files[0].text.len() <= 60);
    assert_eq!(page.next_file, Some(1));
}

/// G-2: a monorepo registration's diff covers its directory only.
#[test]
fn diff_stays_inside_the_registered_path() {
    let f = Fixture::new();
    let base = f.commit(&[("docs/a.md", b"a\n"), ("src/b.rs", b"b\n")], "root");
    let head = f.commit(&[("docs/a.md", b"a2\n"), ("src/b.rs", b"b2\n")], "both");
    f.register("docs");
    f.sync();
    let (text, _) = ours(&f, &base, &head, "", 1 << 20);
    assert_eq!(text, git_diff(&f, &base, &head, Some("docs")));
    let outside = f
        .store
        .diff(&f.name, &cid(&base), &cid(&head), &path("src"), 0, 1000);
    assert!(outside.is_err());
}
