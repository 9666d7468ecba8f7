//! Blame (issue 12) against `git blame --porcelain` of the same file: a linear history of
//! edits, insertions and deletions, a merge that brings lines from a side branch, a range of
//! lines, and the refusals of a read.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid, path};

/// The commit of each final line, as git blames it.
fn git_blame(f: &Fixture, commit: &str, file: &str) -> Vec<String> {
    let porcelain = f.git(&["blame", "--porcelain", commit, "--", file]);
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

fn ours(f: &Fixture, commit: &str, file: &str, start: u64, end: u64) -> Vec<String> {
    let (ranges, _) = f
        .store
        .blame(&f.name, &cid(commit), &path(file), start, end)
        .unwrap();
    let mut owners = Vec::new();
    let mut expected_start = start;
    for range in ranges {
        assert_eq!(range.start_line, expected_start, "ranges are contiguous");
        expected_start = range.end_line + 1;
        for _ in range.start_line..=range.end_line {
            owners.push(range.commit.commit.to_string());
        }
    }
    owners
}

fn lines(names: &[&str]) -> Vec<u8> {
    names
        .iter()
        .map(|n| format!("{n}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn blame_matches_git_blame() {
    let f = Fixture::new();
    f.commit(
        &[(
            "doc.md",
            &lines(&["alpha", "bravo", "charlie", "delta", "echo"]),
        )],
        "one",
    );
    f.commit(
        &[(
            "doc.md",
            &lines(&["alpha", "BRAVO", "charlie", "delta", "echo", "foxtrot"]),
        )],
        "two",
    );
    f.git(&["checkout", "-q", "-b", "side"]);
    f.commit(
        &[(
            "doc.md",
            &lines(&[
                "alpha",
                "BRAVO",
                "charlie",
                "side line",
                "delta",
                "echo",
                "foxtrot",
            ]),
        )],
        "side",
    );
    f.git(&["checkout", "-q", "main"]);
    f.commit(
        &[
            (
                "doc.md",
                &lines(&["zulu", "alpha", "BRAVO", "charlie", "delta", "foxtrot"]),
            ),
            ("other.md", b"x\n"),
        ],
        "three",
    );
    f.git(&["merge", "-q", "--no-edit", "side"]);
    let head = f.commit(&[("other.md", b"y\n")], "four");
    f.register("");
    f.sync();
    let expected = git_blame(&f, &head, "doc.md");
    assert_eq!(expected.len(), 7, "{expected:?}");
    assert_eq!(ours(&f, &head, "doc.md", 1, 1000), expected);
    assert_eq!(ours(&f, &head, "doc.md", 3, 5), expected[2..5].to_vec());
    for (i, commit) in f.git(&["rev-list", "HEAD"]).lines().enumerate() {
        if f.git(&["cat-file", "-t", &format!("{commit}:doc.md")]) == "blob" {
            assert_eq!(
                ours(&f, commit, "doc.md", 1, 1000),
                git_blame(&f, commit, "doc.md"),
                "commit #{i} {commit}"
            );
        }
    }
    assert!(
        f.store
            .blame(&f.name, &cid(&head), &path("missing.md"), 1, 10)
            .is_err()
    );
}
