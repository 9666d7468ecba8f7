//! Cluster mode (issue 31): a search over repositories held by different index sets, each
//! answering the head of its ranked list ([`Indexes::top_hits`]) and merged ([`search::merge`]),
//! pages exactly as one index set holding every repository does — same hits in the same order,
//! same cursors — and its cursors expire when a part's generation changes.

mod common;

use common::{GitSource, index_dir};
use search::{
    Hit, IndexConfig, Indexes, Mode, SearchError, SearchRequest, SearchResults, merge, page_offset,
};

/// Three repositories whose hits interleave in every tier: file names, definitions and other
/// lines in each, paths that sort across repositories, documents of several static ranks
/// (depths, a test, a vendored file).
fn sources() -> Vec<(&'static str, testgit::SourceRepo)> {
    let many: String = (0..30).map(|i| format!("row {i} needle here\n")).collect();
    vec![
        (
            "a/one",
            testgit::SourceRepo::with_files(&[
                ("needle.md", b"# title\nsome needle text\n"),
                (
                    "src/lib.rs",
                    b"use needle;\npub fn needle() {}\nneedle();\n",
                ),
                ("src/z.txt", many.as_bytes()),
                ("tests/needle_test.rs", b"fn t() { needle(); }\n"),
            ]),
        ),
        (
            "b/two",
            testgit::SourceRepo::with_files(&[
                ("docs/needle_guide.md", b"nothing\n"),
                ("lib/a.py", b"def needle():\n    return needle\n"),
                ("lib/b.txt", b"needle\nneedle\nno\nneedle\n"),
                ("vendor/x/needle.go", b"func needle() {}\n"),
            ]),
        ),
        (
            "c/three",
            testgit::SourceRepo::with_files(&[
                ("a.rs", b"fn needle() {}\nlet x = needle();\n"),
                ("needle/mod.rs", b"struct Needle;\nimpl Needle {}\n"),
            ]),
        ),
    ]
}

fn build(indexes: &Indexes, name: &str, repo: &testgit::SourceRepo) {
    let head = repo.head();
    indexes
        .build(
            name,
            &head,
            &GitSource::new(repo.path(), &head),
            &mut |_| {},
        )
        .expect("build");
}

/// One index set holding every repository, and two that split them.
struct Fixture {
    sources: Vec<(&'static str, testgit::SourceRepo)>,
    _dirs: Vec<tempfile::TempDir>,
    whole: Indexes,
    parts: Vec<(Indexes, Vec<String>)>,
}

fn fixture() -> Fixture {
    let sources = sources();
    let mut dirs = Vec::new();
    let mut open = || {
        let (tmp, dir) = index_dir();
        dirs.push(tmp);
        Indexes::open(dir, IndexConfig::default()).expect("open")
    };
    let whole = open();
    let first = open();
    let second = open();
    for (name, repo) in &sources {
        build(&whole, name, repo);
    }
    build(&first, "a/one", &sources[0].1);
    build(&first, "c/three", &sources[2].1);
    build(&second, "b/two", &sources[1].1);
    Fixture {
        sources,
        _dirs: dirs,
        whole,
        parts: vec![
            (first, vec!["a/one".into(), "c/three".into()]),
            (second, vec!["b/two".into()]),
        ],
    }
}

fn every_repo() -> Vec<String> {
    ["a/one", "b/two", "c/three", "d/none"]
        .map(str::to_owned)
        .to_vec()
}

/// One page through the parts, as a replica receiving the call does it.
fn merged(
    parts: &[(Indexes, Vec<String>)],
    request: &SearchRequest,
    mode: Mode<'_>,
) -> Result<SearchResults, SearchError> {
    let offset = page_offset(request, mode)?;
    let want = offset as usize + request.limit.clamp(1, search::MAX_LIMIT);
    let heads = parts
        .iter()
        .map(|(indexes, repos)| {
            let part = SearchRequest {
                repos: repos.clone(),
                ..request.clone()
            };
            indexes.top_hits(&part, mode, want)
        })
        .collect::<Result<Vec<_>, _>>()?;
    merge(request, mode, heads)
}

fn whole(
    indexes: &Indexes,
    request: &SearchRequest,
    mode: Mode<'_>,
) -> Result<SearchResults, SearchError> {
    match mode {
        Mode::Search => indexes.search(request),
        Mode::References(symbol) => indexes.references(symbol, request),
    }
}

/// Every page of both, compared page by page: hits, grouping, cursors, totals.
fn same_pages(fixture: &Fixture, request: &SearchRequest, mode: Mode<'_>) -> usize {
    let mut left = request.clone();
    let mut right = request.clone();
    let mut hits = 0;
    loop {
        let one = whole(&fixture.whole, &left, mode).expect("whole");
        let two = merged(&fixture.parts, &right, mode).expect("merged");
        assert_eq!(one.repos, two.repos, "limit {}", request.limit);
        assert_eq!(one.next_cursor, two.next_cursor);
        assert_eq!(one.not_indexed, vec!["d/none".to_owned()]);
        // No part was asked for d/none: naming it is the caller's.
        assert!(two.not_indexed.is_empty());
        if request.count {
            // Counted (below the cap): exact both ways.
            assert_eq!(one.stats.total_hits, two.stats.total_hits);
            assert!(!one.stats.total_is_lower_bound && !two.stats.total_is_lower_bound);
        } else {
            // What each side's work found: at least the hits paged so far.
            let so_far = (hits + one.repos.iter().map(|r| r.hits.len()).sum::<usize>()) as u64;
            assert!(one.stats.total_hits >= so_far && two.stats.total_hits >= so_far);
        }
        assert_eq!(one.stats.documents, two.stats.documents);
        hits += one.repos.iter().map(|r| r.hits.len()).sum::<usize>();
        match one.next_cursor {
            Some(cursor) => {
                left.cursor = Some(cursor.clone());
                right.cursor = Some(cursor);
            }
            None => return hits,
        }
    }
}

#[test]
fn a_merged_search_pages_exactly_as_one_index_set_holding_every_repository() {
    let fixture = fixture();
    for query in ["needle", "NEEDLE", "fn", r"needle\(\)", "row"] {
        for limit in [1, 2, 5, 13, 1000] {
            for count in [false, true] {
                let request = SearchRequest {
                    query: query.into(),
                    repos: every_repo(),
                    regex: query.contains('\\'),
                    limit,
                    count,
                    ..SearchRequest::default()
                };
                let hits = same_pages(&fixture, &request, Mode::Search);
                assert!(hits > 0 || query == "NEEDLE", "{query}");
            }
        }
    }
    // The first page mixes the tiers and the repositories, by static rank first: shallow
    // source before deeper, tests and vendored files.
    let request = SearchRequest {
        query: "needle".into(),
        repos: every_repo(),
        limit: 1000,
        ..SearchRequest::default()
    };
    let page = merged(&fixture.parts, &request, Mode::Search).unwrap();
    let repos: Vec<&str> = page.repos.iter().map(|r| r.repo.as_str()).collect();
    assert_eq!(repos, ["a/one", "b/two", "c/three"]);
    assert!(matches!(page.repos[0].hits[0], Hit::FileName { .. }));
}

#[test]
fn merged_references_page_as_one_index_set_does() {
    let fixture = fixture();
    for limit in [1, 3, 1000] {
        for count in [false, true] {
            let request = SearchRequest {
                repos: every_repo(),
                limit,
                count,
                ..SearchRequest::default()
            };
            let hits = same_pages(&fixture, &request, Mode::References("needle"));
            assert!(hits > 5);
        }
    }
}

#[test]
fn a_merged_cursor_is_refused_for_another_request_and_expires_with_a_part() {
    let fixture = fixture();
    let request = SearchRequest {
        query: "needle".into(),
        repos: every_repo(),
        limit: 3,
        ..SearchRequest::default()
    };
    let first = merged(&fixture.parts, &request, Mode::Search).unwrap();
    let cursor = first.next_cursor.expect("more pages");
    let other = SearchRequest {
        query: "row".into(),
        cursor: Some(cursor.clone()),
        ..request.clone()
    };
    assert!(matches!(
        page_offset(&other, Mode::Search),
        Err(SearchError::InvalidCursor)
    ));
    // A search cursor is no references cursor.
    assert!(matches!(
        page_offset(&other, Mode::References("needle")),
        Err(SearchError::InvalidCursor)
    ));
    // A bad query is refused before any part is asked, as one index set refuses it.
    let bad = SearchRequest {
        query: "(".into(),
        regex: true,
        ..request.clone()
    };
    assert!(matches!(
        page_offset(&bad, Mode::Search),
        Err(SearchError::InvalidRegex { .. })
    ));
    // The second part re-indexed: the cursor expired.
    let next = SearchRequest {
        cursor: Some(cursor),
        ..request.clone()
    };
    assert!(merged(&fixture.parts, &next, Mode::Search).is_ok());
    let (_, b) = &fixture.sources[1];
    let commit = b.commit(&[("lib/b.txt", b"needle changed\n")], "change");
    fixture.parts[1]
        .0
        .build(
            "b/two",
            &commit,
            &GitSource::new(b.path(), &commit),
            &mut |_| {},
        )
        .unwrap();
    let error = merged(&fixture.parts, &next, Mode::Search).unwrap_err();
    assert!(matches!(error, SearchError::CursorExpired), "{error}");
}

#[test]
fn a_part_answers_only_the_head_asked_with_its_whole_count() {
    let fixture = fixture();
    let (indexes, repos) = &fixture.parts[0];
    let request = SearchRequest {
        query: "needle".into(),
        repos: repos.clone(),
        count: true,
        ..SearchRequest::default()
    };
    let head = indexes.top_hits(&request, Mode::Search, 4).unwrap();
    assert_eq!(head.hits.len(), 4);
    let every = indexes.top_hits(&request, Mode::Search, 1000).unwrap();
    assert!(every.hits.len() > 4);
    assert_eq!(head.stats.total_hits, every.hits.len() as u64);
    assert!(!head.stats.total_is_lower_bound);
    assert_eq!(head.generations.len(), 2);
    assert_eq!(head.hits[0].tier, search::Tier::FileName);
    assert_eq!(every.hits[..4], head.hits[..]);
    // The same head asked again is kept.
    let again = indexes.top_hits(&request, Mode::Search, 4).unwrap();
    assert!(again.stats.cached);
    assert_eq!(again.hits, head.hits);
    // Without a count, a part knows at least one hit more than it answers when more exist.
    let uncounted = SearchRequest {
        count: false,
        ..request.clone()
    };
    let head = indexes.top_hits(&uncounted, Mode::Search, 4).unwrap();
    assert!(head.stats.total_hits > 4);
}

#[test]
fn merged_definitions_answer_as_one_index_set_does() {
    let fixture = fixture();
    for (symbol, limit) in [("needle", 1), ("needle", 2), ("needle", 50), ("Needle", 50)] {
        let request = search::DefinitionsRequest {
            symbol: symbol.into(),
            repos: every_repo(),
            limit,
            ..search::DefinitionsRequest::default()
        };
        search::check_definitions(&request).unwrap();
        let one = fixture.whole.definitions(&request).unwrap();
        let parts = fixture
            .parts
            .iter()
            .map(|(indexes, repos)| {
                indexes
                    .definitions(&search::DefinitionsRequest {
                        repos: repos.clone(),
                        ..request.clone()
                    })
                    .unwrap()
            })
            .collect();
        let two = search::merge_definitions(&request, parts);
        assert_eq!(one.definitions, two.definitions, "{symbol} {limit}");
        assert_eq!(one.total, two.total);
        assert_eq!(one.searched, two.searched);
        assert!(one.total > 0, "{symbol}");
    }
    let bad = search::DefinitionsRequest {
        symbol: "two words".into(),
        ..search::DefinitionsRequest::default()
    };
    assert!(matches!(
        search::check_definitions(&bad),
        Err(SearchError::InvalidSymbol { .. })
    ));
}
