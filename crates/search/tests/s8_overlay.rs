//! S-8: a commit that is not indexed, searched through the repository's current generation
//! with the differing files laid over it (`Indexes::search_overlay`), answers what `git grep
//! -n PATTERN COMMIT` answers, and pages exactly as an index built at that commit would:
//! renames, a deleted file, a binary file turned text and back, changed and added files.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{GitSource, build_at, fresh_indexes, git_grep, overlay_of, request};
use search::{Hit, Indexes, SearchError, SearchRequest, SearchResults};

/// Every page of a search (overlay or not), in order.
/// Every page of `req` searched with `overlay` over `indexes` (the base's), and every page of
/// it searched in `at_commit` (an index built at the overlay's commit).
fn both_pages(
    indexes: &Indexes,
    at_commit: &Indexes,
    overlay: &search::Overlay,
    req: &SearchRequest,
) -> (Vec<SearchResults>, Vec<SearchResults>) {
    let overlaid = pages(|cursor| {
        let req = SearchRequest {
            cursor,
            ..req.clone()
        };
        indexes
            .search_overlay(&req, overlay)
            .expect("overlay search")
    });
    let built = pages(|cursor| {
        let req = SearchRequest {
            cursor,
            ..req.clone()
        };
        at_commit.search(&req).expect("search")
    });
    (overlaid, built)
}

fn pages(mut next: impl FnMut(Option<String>) -> SearchResults) -> Vec<SearchResults> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = next(cursor.take());
        cursor = page.next_cursor.clone();
        out.push(page);
        if cursor.is_none() || out.len() > 10_000 {
            return out;
        }
    }
}

struct Fixture {
    repo: testgit::SourceRepo,
    base: String,
    commit: String,
}

fn fixture() -> Fixture {
    let repo = testgit::SourceRepo::with_files(&[
        ("src/main.rs", b"fn main() {\n    needle();\n}\n"),
        (
            "src/lib.rs",
            b"pub fn needle() {}\n// needle twice needle\n",
        ),
        ("moved/a.rs", b"struct Needle;\nfn keep() {}\n"),
        ("old.txt", b"an old needle\n"),
        ("data.bin", b"needle\0binary\n"),
        ("docs/needle.md", b"# Needles\nno match here\n"),
        ("same.txt", b"unchanged needle line\n"),
    ]);
    let base = repo.head();
    // A rename (same blob, new path) and a deleted file.
    repo.git(&["rm", "-q", "moved/a.rs", "old.txt"]);
    let commit = repo.commit(
        &[
            (
                "src/main.rs",
                b"fn main() {\n    other();\n    needle(1);\n}\n",
            ),
            ("data.bin", b"needle now text\n"),
            ("new/needle_new.rs", b"fn needle_new() { needle() }\n"),
            ("latin1.txt", b"needle caf\xe9\n"),
            ("src/lib.rs", b"pub fn needle() {}\n"),
            ("renamed/b.rs", b"struct Needle;\nfn keep() {}\n"),
        ],
        "the changes",
    );
    Fixture { repo, base, commit }
}

/// (query, regex, case_sensitive)
const QUERIES: &[(&str, bool, bool)] = &[
    ("needle", false, false),
    ("Needle", false, true),
    ("fn ", false, true),
    (r"needle\(\d?\)", true, true),
    ("^", true, true),
    (r"\w+_\w+", true, true),
    ("zzz_absent", false, true),
    ("renamed", false, false),
];

#[test]
fn s8_overlay_answers_git_grep_and_pages_as_an_index_built_at_the_commit() {
    let fixture = fixture();
    let path = fixture.repo.path();
    let (_tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/r", path, &fixture.base);
    let (_tmp2, at_commit) = fresh_indexes();
    build_at(&at_commit, "o/r", path, &fixture.commit);
    let overlay = overlay_of(path, &fixture.base, &fixture.commit);
    assert!(overlay.hidden.contains(&"old.txt".to_owned()));
    let comparable = GitSource::new(path, &fixture.commit).comparable_paths();
    for &(query, regex, case_sensitive) in QUERIES {
        for limit in [1, 2, 1000] {
            let mut req = request("o/r", query, regex, case_sensitive);
            req.limit = limit;
            let (overlaid, built) = both_pages(&indexes, &at_commit, &overlay, &req);
            assert_eq!(overlaid.len(), built.len(), "{query}");
            for (a, b) in overlaid.iter().zip(&built) {
                assert_eq!(a.repos, b.repos, "{query} limit {limit}");
                assert_eq!(a.next_cursor, b.next_cursor, "{query}");
                assert_eq!(a.stats.total_hits, b.stats.total_hits, "{query}");
            }
            for repo in overlaid.iter().flat_map(|p| &p.repos) {
                assert_eq!(repo.commit, fixture.commit);
            }
            let lines: BTreeSet<(String, u64)> = overlaid
                .iter()
                .flat_map(|p| &p.repos)
                .flat_map(|r| &r.hits)
                .filter_map(|hit| match hit {
                    Hit::Line { path, line, .. } => Some((path.clone(), *line)),
                    Hit::FileName { .. } => None,
                })
                .collect();
            let grep = git_grep(
                path,
                &fixture.commit,
                query,
                regex,
                case_sensitive,
                &comparable,
            );
            assert_eq!(lines, grep, "{query}");
        }
    }
    // The file-name hits name the commit's paths: the renamed file under its new name, the
    // binary one turned text without a path-only reason, the deleted one not at all.
    let names = indexes
        .search_overlay(&request("o/r", ".", true, true), &overlay)
        .expect("names");
    let hits: Vec<&Hit> = names.repos.iter().flat_map(|r| &r.hits).collect();
    let named = |p: &str| {
        hits.iter()
            .any(|h| matches!(h, Hit::FileName { path, .. } if path == p))
    };
    assert!(named("renamed/b.rs") && !named("moved/a.rs") && !named("old.txt"));
    assert!(
        hits.iter()
            .any(|h| matches!(h, Hit::FileName { path, path_only: None } if path == "data.bin"))
    );
}

#[test]
fn s8_overlay_repeats_from_the_cache_and_refuses_a_moved_base() {
    let fixture = fixture();
    let (_tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/r", fixture.repo.path(), &fixture.base);
    let overlay = overlay_of(fixture.repo.path(), &fixture.base, &fixture.commit);
    let req = request("o/r", "needle", false, false);
    let first = indexes.search_overlay(&req, &overlay).expect("first");
    assert!(!first.stats.cached);
    let started = Instant::now();
    let again = indexes.search_overlay(&req, &overlay).expect("again");
    let took = started.elapsed();
    assert!(again.stats.cached);
    assert_eq!(first.repos, again.repos);
    assert!(took < Duration::from_millis(200), "{took:?}");
    // Another query at the same commit reuses the overlay (no new trigram sets needed).
    let other = indexes
        .search_overlay(&request("o/r", "fn", false, true), &overlay)
        .expect("other");
    assert!(!other.stats.cached);
    // The cursor of an overlay page is not one of the base generation.
    let mut one = req.clone();
    one.limit = 1;
    let page = indexes.search_overlay(&one, &overlay).expect("page");
    let cursor = page.next_cursor.expect("more");
    assert!(matches!(
        indexes.search(&SearchRequest {
            cursor: Some(cursor),
            ..one.clone()
        }),
        Err(SearchError::CursorExpired)
    ));
    // The index moved on: the overlay's base is refused, naming the new commit.
    build_at(&indexes, "o/r", fixture.repo.path(), &fixture.commit);
    match indexes.search_overlay(&req, &overlay) {
        Err(SearchError::OverlayBase { indexed, base, .. }) => {
            assert_eq!(indexed, fixture.commit);
            assert_eq!(base, fixture.base);
        }
        other => panic!("{other:?}"),
    }
    // One repository exactly.
    let two = SearchRequest {
        repos: vec!["o/r".into(), "o/s".into()],
        ..req.clone()
    };
    assert!(matches!(
        indexes.search_overlay(&two, &overlay),
        Err(SearchError::OverlayRepos { count: 2 })
    ));
    // Not indexed: answered as such.
    let none = SearchRequest {
        repos: vec!["o/none".into()],
        ..req
    };
    let answer = indexes
        .search_overlay(&none, &overlay)
        .expect("not indexed");
    assert_eq!(answer.not_indexed, vec!["o/none".to_owned()]);
}

/// Issue 33 point 5 (a cold identifier search at a revision): the overlay tells from a scan
/// that most added files holding an identifier only hold it in comments, strings or
/// selectors, and parses only the others; its definition tier stays the one an index built
/// at the commit has, in every language with a hand lexer (Go, C, C++, Java, Python) and
/// without one (Rust, JavaScript).
#[test]
fn s8_overlay_definitions_of_an_identifier_equal_an_index_built_at_the_commit() {
    let repo = testgit::SourceRepo::with_files(&[("README", b"nothing yet\n")]);
    let base = repo.head();
    let commit = repo.commit(
        &[
            (
                "a/comments.go",
                b"package a\n// TODO: one\n/* TODO\n */\nvar s = \"TODO\" + `\nTODO`\nfunc f() { context.TODO(); x. TODO() }\n",
            ),
            (
                "a/defines.go",
                b"package a\n\nconst (\n\t// TODO is the end.\n\tTODO = 1\n)\n\nfunc TODO2() { _ = TODO }\n",
            ),
            ("b/defines.c", b"/* TODO */\nint TODO(void) { return 0; } // TODO\n"),
            ("b/comments.c", b"/*\n * TODO\n */\nint f(void) { return \"TODO\"[0]; } // TODO\n"),
            ("b/comments.h", b"int x = 1'000; // TODO\nconst char *s = \"TODO\";\n"),
            ("c/TODO.java", b"class TODO { // TODO\n String s = \"TODO\"; void f() { a.TODO(); } }\n"),
            ("d/defines.py", b"'''TODO'''\n# TODO\ndef TODO():\n    return self.TODO\n"),
            ("d/comments.py", b"# TODO\ns = 'TODO'\nt = \"\"\"\nTODO\n\"\"\"\nx.TODO()\n"),
            ("e/lib.rs", b"// TODO\nfn TODO() {}\n"),
            ("e/app.js", b"// TODO\nfunction TODO() {}\n"),
            ("e/open.go", b"package e\nvar s = \"open\n// TODO\nfunc TODO() {}\n"),
        ],
        "definitions and mentions",
    );
    let path = repo.path();
    let (_tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/r", path, &base);
    let (_tmp2, at_commit) = fresh_indexes();
    build_at(&at_commit, "o/r", path, &commit);
    let overlay = overlay_of(path, &base, &commit);
    for (query, case_sensitive) in [("TODO", true), ("TODO", false), ("todo", false)] {
        for limit in [1, 3, 1000] {
            let mut req = request("o/r", query, false, case_sensitive);
            req.limit = limit;
            let (overlaid, built) = both_pages(&indexes, &at_commit, &overlay, &req);
            assert_eq!(overlaid.len(), built.len(), "{query}");
            for (a, b) in overlaid.iter().zip(&built) {
                assert_eq!(a.repos, b.repos, "{query} limit {limit}");
                assert_eq!(a.next_cursor, b.next_cursor, "{query}");
            }
        }
    }
    // The index built at the commit has the definitions this compares: one per defining file.
    let mut req = request("o/r", "TODO", false, true);
    req.limit = 1000;
    let answer = at_commit.search(&req).expect("search");
    let defined: BTreeSet<&str> = answer
        .repos
        .iter()
        .flat_map(|r| &r.hits)
        .filter_map(|hit| match hit {
            Hit::Line {
                path,
                definition: true,
                ..
            } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        defined,
        BTreeSet::from([
            "a/defines.go",
            "b/defines.c",
            "c/TODO.java",
            "d/defines.py",
            "e/app.js",
            "e/lib.rs",
        ]),
        "{answer:?}"
    );
}
