//! Issue 34 point 8: every line hit carries the byte ranges of the query's matches in its
//! snippet, found by the engine with the regex it matched with; compared with what
//! `git grep -o` finds on the same lines, for regular expressions and literal text, on
//! pages from the result cache, for references, at a revision (overlay) and through a
//! cluster merge.

mod common;

use std::collections::BTreeMap;

use common::{all_hits, git_grep_records, index_commit, overlay_of, request};
use search::{Hit, MAX_MARKS, Mode, SearchRequest, marks_fit, merge};

const FILES: &[(&str, &[u8])] = &[
    (
        "src/lib.rs",
        b"pub fn parse(x: u32) -> u32 { x }\nfn helper() { parse(1); }\n// fnord fn\nstruct Parser; fn a() {} fn b() {}\n",
    ),
    (
        "src/tool.py",
        b"def run():\n    undefined = 1\n    def inner(): pass\n# define def\n",
    ),
    (
        "docs/notes.md",
        "# Notes\nÉté: the parse step, then Parse again.\n\u{212A}elvin and kelvin and KELVIN.\n".as_bytes(),
    ),
];

/// `git grep -o` at `commit`: every (path, line) with the texts of its matches, in order.
fn git_grep_o(
    repo: &std::path::Path,
    commit: &str,
    pattern: &str,
    regex: bool,
    case_sensitive: bool,
) -> BTreeMap<(String, u64), Vec<String>> {
    let mut found: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for (path, line, text) in git_grep_records(repo, commit, pattern, (regex, case_sensitive), true)
    {
        found.entry((path, line)).or_default().push(text);
    }
    found
}

/// Every line hit of `hits` as (path, line) with its marked texts, each hit's marks checked
/// to fit its snippet.
fn marked(hits: impl IntoIterator<Item = Hit>) -> BTreeMap<(String, u64), Vec<String>> {
    let mut out = BTreeMap::new();
    for hit in hits {
        if let Hit::Line {
            path,
            line,
            snippet,
            marks,
            ..
        } = hit
        {
            assert!(marks_fit(&snippet, &marks), "{marks:?} in {snippet:?}");
            assert!(!marks.is_empty(), "{path}:{line} has no marks");
            let texts = marks
                .iter()
                .map(|m| snippet[m.start as usize..m.end as usize].to_owned())
                .collect();
            out.insert((path, line), texts);
        }
    }
    out
}

fn search_marks(
    indexes: &search::Indexes,
    request: &SearchRequest,
) -> BTreeMap<(String, u64), Vec<String>> {
    marked(
        all_hits(indexes, request)
            .into_iter()
            .map(|(_, _, hit)| hit),
    )
}

#[test]
fn issue34_marks_equal_git_grep_o_for_regexes_and_literals() {
    let repo = testgit::SourceRepo::with_files(FILES);
    let head = repo.head();
    let (_tmp, indexes) = index_commit(&repo, &head);
    for (query, regex, case_sensitive) in [
        (r"fn \w+", true, true),
        (r"\bdef\b", true, true),
        (r"^fn", true, true),
        (r"[A-Z]\w+", true, true),
        ("parse", false, false),
        ("parse", false, true),
        ("fn", false, true),
    ] {
        let request = request("o/r", query, regex, case_sensitive);
        let expected = git_grep_o(repo.path(), &head, query, regex, case_sensitive);
        assert!(!expected.is_empty(), "{query}");
        assert_eq!(search_marks(&indexes, &request), expected, "{query}");
        // The same page again comes from the result cache, with the same marks.
        let again = indexes.search(&request).unwrap();
        assert!(again.stats.cached, "{query}");
        let again = marked(again.repos.into_iter().flat_map(|r| r.hits));
        assert_eq!(again, expected, "{query} (cached)");
    }
}

/// Case folding marks what the regex matched, whatever the bytes: the Kelvin sign for `k`.
#[test]
fn issue34_case_insensitive_marks_cover_look_alikes() {
    let repo = testgit::SourceRepo::with_files(FILES);
    let head = repo.head();
    let (_tmp, indexes) = index_commit(&repo, &head);
    for regex in [false, true] {
        let marks = search_marks(&indexes, &request("o/r", "kelvin", regex, false));
        assert_eq!(
            marks[&("docs/notes.md".to_owned(), 3)],
            ["\u{212A}elvin", "kelvin", "KELVIN"]
        );
    }
    let marks = search_marks(&indexes, &request("o/r", "kelvin", false, true));
    assert_eq!(marks[&("docs/notes.md".to_owned(), 3)], ["kelvin"]);
}

/// References mark the name's occurrences (whole words); a revision's overlay and a cluster
/// merge keep the marks of the index's search.
#[test]
fn issue34_references_overlay_and_merge_keep_marks() {
    let repo = testgit::SourceRepo::with_files(FILES);
    let base = repo.head();
    let (_tmp, indexes) = index_commit(&repo, &base);
    let page = request("o/r", "ignored", false, true);
    let references = indexes.references("parse", &page).unwrap();
    let references = marked(references.repos.into_iter().flat_map(|r| r.hits));
    assert_eq!(
        references,
        git_grep_o(repo.path(), &base, r"\bparse\b", true, true)
    );

    let head = repo.commit(
        &[(
            "src/new.rs",
            b"fn added() {}\nlet s = \"fn\"; fn more() {}\n",
        )],
        "add",
    );
    let overlay = overlay_of(repo.path(), &base, &head);
    let query = request("o/r", r"fn \w+", true, true);
    let at_head = indexes.search_overlay(&query, &overlay).unwrap();
    assert_eq!(
        marked(at_head.repos.into_iter().flat_map(|r| r.hits)),
        git_grep_o(repo.path(), &head, r"fn \w+", true, true)
    );

    let top = indexes.top_hits(&query, Mode::Search, 100).unwrap();
    let merged = merge(&query, Mode::Search, vec![top]).unwrap();
    assert_eq!(
        marked(merged.repos.into_iter().flat_map(|r| r.hits)),
        git_grep_o(repo.path(), &base, r"fn \w+", true, true)
    );
}

/// A long line: the marks are those inside its 200-character snippet, at most
/// [`MAX_MARKS`], every one the query's text.
#[test]
fn issue34_long_lines_mark_within_the_snippet() {
    let long = format!("{}\n", "ab ".repeat(400));
    let repo = testgit::SourceRepo::with_files(&[("long.txt", long.as_bytes())]);
    let head = repo.head();
    let (_tmp, indexes) = index_commit(&repo, &head);
    let hits = all_hits(&indexes, &request("o/r", "ab", false, true));
    let [(_, _, Hit::Line { snippet, marks, .. })] = hits.as_slice() else {
        panic!("{hits:?}");
    };
    assert_eq!(snippet.chars().count(), search::SNIPPET_CHARS);
    assert_eq!(marks.len(), MAX_MARKS);
    assert!(marks_fit(snippet, marks));
    for mark in marks {
        assert_eq!(&snippet[mark.start as usize..mark.end as usize], "ab");
    }
}
