//! S-1 query surface: filters, file-name hits, ranking, pagination with cursors, and clear,
//! fast errors for bad queries.

// `vec![a..b]` is a hit's list of one mark (a byte range), not the range's numbers.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{GitSource, all_hits, index_commit, line_hits, request};
use search::{Hit, Indexes, SearchError, SearchRequest};

fn fixture() -> (testgit::SourceRepo, tempfile::TempDir, Indexes, String) {
    let many: String = (0..50).map(|i| format!("row {i} needle\n")).collect();
    let repo = testgit::SourceRepo::with_files(&[
        ("docs/a.md", b"# needle guide\n"),
        ("docs/sub/b.md", b"needle deep\n"),
        ("docs/notes.txt", b"needle text\n"),
        (
            "src/lib.rs",
            b"call(needle_fn());\n\npub fn needle_fn() {}\n",
        ),
        ("src/main.py", b"def needle():\n    pass\n"),
        ("src/many.txt", many.as_bytes()),
        ("src/needle_name.txt", b"nothing to see\n"),
    ]);
    let commit = repo.head();
    let (tmp, indexes) = index_commit(&repo, &commit);
    (repo, tmp, indexes, commit)
}

fn paths(hits: &BTreeSet<(String, u64)>) -> BTreeSet<&str> {
    hits.iter().map(|(p, _)| p.as_str()).collect()
}

#[test]
fn s1_path_glob_and_lang_filters() {
    let (_repo, _tmp, indexes, _) = fixture();
    let mut req = request("o/r", "needle", false, true);
    req.path = Some("docs/**/*.md".into());
    assert_eq!(
        paths(&line_hits(&indexes, &req)),
        BTreeSet::from(["docs/a.md", "docs/sub/b.md"])
    );
    req.path = Some("docs/*.md".into());
    assert_eq!(
        paths(&line_hits(&indexes, &req)),
        BTreeSet::from(["docs/a.md"])
    );
    req.path = None;
    req.lang = Some("rust".into());
    assert_eq!(
        paths(&line_hits(&indexes, &req)),
        BTreeSet::from(["src/lib.rs"])
    );
    req.lang = Some("Python".into());
    assert_eq!(
        paths(&line_hits(&indexes, &req)),
        BTreeSet::from(["src/main.py"])
    );
    req.lang = Some("markdown".into());
    req.path = Some("docs/sub/**".into());
    assert_eq!(
        paths(&line_hits(&indexes, &req)),
        BTreeSet::from(["docs/sub/b.md"])
    );

    req.lang = Some("klingon".into());
    let error = indexes.search(&req).unwrap_err();
    assert!(matches!(error, SearchError::UnknownLang { .. }));
    assert!(error.to_string().contains("rust"), "{error}");
    req.lang = None;
    req.path = Some("docs/[".into());
    let error = indexes.search(&req).unwrap_err();
    assert!(matches!(error, SearchError::InvalidGlob { .. }), "{error}");
}

#[test]
fn s1_file_name_hits_and_definitions_rank_first() {
    let (_repo, _tmp, indexes, commit) = fixture();
    let results = indexes
        .search(&request("o/r", "needle", false, true))
        .unwrap();
    let hits = &results.repos[0].hits;
    assert_eq!(results.repos[0].commit, commit);
    assert_eq!(
        hits[0],
        Hit::FileName {
            path: "src/needle_name.txt".into(),
            path_only: None,
        }
    );
    // Then the definitions of exactly that identifier (the symbol table's; `needle_fn` is
    // another name).
    assert_eq!(
        hits[1],
        Hit::Line {
            path: "src/main.py".into(),
            line: 1,
            snippet: "def needle():".into(),
            definition: true,
            marks: vec![4..10],
        }
    );
    // Then the other lines by static rank (shallower first), then path, then line.
    let rest: Vec<(&str, u64)> = hits[2..]
        .iter()
        .map(|hit| match hit {
            Hit::Line {
                path,
                line,
                definition: false,
                ..
            } => (path.as_str(), *line),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        rest[..5],
        [
            ("docs/a.md", 1),
            ("docs/notes.txt", 1),
            ("src/lib.rs", 1),
            ("src/lib.rs", 3),
            ("src/many.txt", 1),
        ]
    );
    assert_eq!(rest.last(), Some(&("docs/sub/b.md", 1)));
    // An identifier defined in Rust: its definition first, the call after.
    let results = indexes
        .search(&request("o/r", "needle_fn", false, true))
        .unwrap();
    let lines: Vec<(String, u64, bool)> = results.repos[0]
        .hits
        .iter()
        .filter_map(|hit| match hit {
            Hit::Line {
                path,
                line,
                definition,
                ..
            } => Some((path.clone(), *line, *definition)),
            Hit::FileName { .. } => None,
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("src/lib.rs".into(), 3, true),
            ("src/lib.rs".into(), 1, false)
        ]
    );
    // A path-only query finds the file by name.
    let results = indexes
        .search(&request("o/r", "needle_name", false, true))
        .unwrap();
    assert_eq!(
        results.repos[0].hits,
        vec![Hit::FileName {
            path: "src/needle_name.txt".into(),
            path_only: None,
        }]
    );
}

#[test]
fn s1_pagination_covers_every_hit_once_and_cursors_expire() {
    let (repo, _tmp, indexes, _) = fixture();
    let full = indexes
        .search(&request("o/r", "needle", false, true))
        .unwrap();
    assert!(full.next_cursor.is_none());
    let everything: Vec<Hit> = full.repos[0].hits.clone();
    assert_eq!(everything.len() as u64, full.stats.total_hits);
    assert!(everything.len() > 50);
    for limit in [1, 7, 50] {
        let mut req = request("o/r", "needle", false, true);
        req.limit = limit;
        let paged: Vec<Hit> = all_hits(&indexes, &req)
            .into_iter()
            .map(|(_, _, h)| h)
            .collect();
        assert_eq!(paged, everything, "limit {limit}");
    }
    // A cursor of another query is refused; garbage is refused.
    let mut req = request("o/r", "needle", false, true);
    req.limit = 5;
    let first = indexes.search(&req).unwrap();
    let cursor = first.next_cursor.clone().unwrap();
    let mut other = request("o/r", "row", false, true);
    other.cursor = Some(cursor.clone());
    assert!(matches!(
        indexes.search(&other),
        Err(SearchError::InvalidCursor)
    ));
    other.cursor = Some("not a cursor".into());
    assert!(matches!(
        indexes.search(&other),
        Err(SearchError::InvalidCursor)
    ));
    // Re-indexing makes the cursor expire.
    let second = repo.commit(&[("docs/a.md", b"changed needle\n")], "change");
    indexes
        .build(
            "o/r",
            &second,
            &GitSource::new(repo.path(), &second),
            &mut |_| {},
        )
        .unwrap();
    req.cursor = Some(cursor);
    let error = indexes.search(&req).unwrap_err();
    assert!(matches!(error, SearchError::CursorExpired));
    assert!(error.to_string().contains("search again"), "{error}");
    // Limits are clamped.
    req.cursor = None;
    req.limit = 0;
    assert_eq!(indexes.search(&req).unwrap().repos[0].hits.len(), 1);
}

fn quick_error(indexes: &Indexes, req: &SearchRequest) -> SearchError {
    let t = Instant::now();
    let error = indexes.search(req).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "{:?} took {:?}",
        req.query,
        t.elapsed()
    );
    error
}

#[test]
fn s1_bad_queries_answer_clear_errors_quickly() {
    let (_repo, _tmp, indexes, _) = fixture();
    let error = quick_error(&indexes, &request("o/r", "", false, true));
    assert!(matches!(error, SearchError::EmptyQuery));

    let long = "a".repeat(10 * 1024);
    let error = quick_error(&indexes, &request("o/r", &long, false, true));
    assert!(
        matches!(
            error,
            SearchError::QueryTooLong {
                len: 10240,
                max: 1000
            }
        ),
        "{error}"
    );

    let error = quick_error(&indexes, &request("o/r", "foo(bar", true, true));
    let message = error.to_string();
    assert!(matches!(error, SearchError::InvalidRegex { .. }));
    assert!(
        message.contains("unclosed group") && message.contains('^'),
        "{message}"
    );

    for unsupported in [r"(a)\1", "(?=needle)", "(?<!x)needle"] {
        let error = quick_error(&indexes, &request("o/r", unsupported, true, true));
        assert!(
            matches!(error, SearchError::InvalidRegex { .. }),
            "{unsupported}: {error}"
        );
        assert!(error.to_string().contains("no back-references"), "{error}");
    }

    let error = quick_error(&indexes, &request("o/r", r"\w{1000}{1000}", true, true));
    assert!(matches!(error, SearchError::RegexTooBig { .. }), "{error}");
    // The same text as a literal is fine.
    assert!(
        indexes
            .search(&request("o/r", r"\w{1000}{1000}", false, true))
            .is_ok()
    );
}

#[test]
fn s1_catastrophic_patterns_return_promptly() {
    let line = format!("{}\n", "a".repeat(20_000));
    let xline = format!("{}\n", "x".repeat(20_000));
    let repo = testgit::SourceRepo::with_files(&[
        ("a.txt", line.repeat(20).as_bytes()),
        ("x.txt", xline.repeat(20).as_bytes()),
    ]);
    let commit = repo.head();
    let (_tmp, indexes) = index_commit(&repo, &commit);
    for pattern in ["(a*)*b", "(x+x+)+y", "(a|aa)+$b", r"(\w+\s?)+z"] {
        let t = Instant::now();
        let results = indexes
            .search(&request("o/r", pattern, true, true))
            .unwrap();
        assert_eq!(results.stats.total_hits, 0, "{pattern}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{pattern} took {:?}",
            t.elapsed()
        );
    }
}

/// File-name hits run the regex over all paths at once: they equal matching each path alone,
/// for anchors, classes that can match a line break, and absolute anchors.
#[test]
fn s1_file_name_hits_equal_matching_each_path_alone() {
    let (_repo, _tmp, indexes, _) = fixture();
    let all_paths = [
        "docs/a.md",
        "docs/notes.txt",
        "docs/sub/b.md",
        "src/lib.rs",
        "src/main.py",
        "src/many.txt",
        "src/needle_name.txt",
    ];
    for query in [
        "^src/",
        "txt$",
        r"\s",
        r"t\sd",
        r"md\n",
        "^",
        "$",
        r"\Asrc",
        r"py\z",
        "s.*n",
        r"[^a]+",
        r"\bmain\b",
        "sub/b",
    ] {
        let regex = regex::bytes::RegexBuilder::new(query)
            .case_insensitive(true)
            .multi_line(true)
            .build()
            .unwrap();
        let expected: BTreeSet<&str> = all_paths
            .iter()
            .copied()
            .filter(|p| regex.is_match(p.as_bytes()))
            .collect();
        let mut req = request("o/r", query, true, false);
        req.limit = 1;
        let page = indexes.search(&req).unwrap();
        let names: BTreeSet<String> = all_hits(&indexes, &request("o/r", query, true, false))
            .into_iter()
            .filter_map(|(_, _, hit)| match hit {
                Hit::FileName { path, .. } => Some(path),
                Hit::Line { .. } => None,
            })
            .collect();
        let names: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(names, expected, "{query}");
        assert!(page.stats.total_hits >= expected.len().min(2) as u64);
    }
}

/// Fuzz target `search_query` (issue 43, `fuzz/regressions/search_query/absolute-anchor`):
/// absolute anchors (`\A`, `\z`, `^`/`$` with multi-line mode off) anchor at each line, as
/// every line is matched alone (`git grep -P '\Arow'` lists every row), never only at the
/// document's ends.
#[test]
fn s1_absolute_anchors_anchor_each_line() {
    let (_repo, _tmp, indexes, _) = fixture();
    for query in [
        r"\Arow",
        r"(?-m)^row",
        r"needle\z",
        r"(?-m)needle$",
        r"\A\w+ \d+ needle\z",
    ] {
        let hits = line_hits(&indexes, &request("o/r", query, true, true));
        assert_eq!(
            hits.iter()
                .filter(|(path, _)| path == "src/many.txt")
                .count(),
            50,
            "{query}"
        );
    }
    // A file name is a line of its own too.
    let names = all_hits(
        &indexes,
        &request("o/r", r"\Asrc/needle_name\.txt\z", true, true),
    );
    assert!(
        names.iter().any(
            |(_, _, hit)| matches!(hit, Hit::FileName { path, .. } if path == "src/needle_name.txt")
        ),
        "{names:?}"
    );
}

/// Fuzz target `search_query` (issue 43, `fuzz/regressions/search_query/escaped-kelvin-sign`):
/// a character outside ASCII written as an escape folds as the character does (`(?i)\u017F`,
/// the long s, is `s` and `S` too), in ASCII files as in the others.
#[test]
fn s1_escaped_characters_fold_like_written_ones() {
    let (_repo, _tmp, indexes, _) = fixture();
    let plain = line_hits(&indexes, &request("o/r", "(?i)see", true, false));
    assert!(!plain.is_empty());
    for query in [
        "(?i)\u{17F}ee",
        r"(?i)\u017Fee",
        r"(?i)\x{17F}ee",
        r"(?i)[\x{17F}]ee",
        "(?i)\\u{17f}EE",
    ] {
        assert_eq!(
            line_hits(&indexes, &request("o/r", query, true, false)),
            plain,
            "{query}"
        );
    }
}
