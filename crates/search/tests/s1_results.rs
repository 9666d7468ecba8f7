//! S-1/S-10 result handling: each page costs a page (verification stops once it is full and
//! the next page starts where it stopped), pages cover every hit once, totals are exact up to
//! the count cap or a lower bound that says so, the same page repeats from the result cache,
//! and cursors carry a stable hash.

mod common;

use std::collections::BTreeSet;

use common::{
    GitSource, Rng, all_hits, build_at, generated_text, index_commit, index_dir, request,
};
use search::{COUNT_CAP, Hit, IndexConfig, Indexes, SearchError, SearchRequest};

fn indexed(files: &[(&str, &[u8])]) -> (testgit::SourceRepo, tempfile::TempDir, Indexes) {
    let repo = testgit::SourceRepo::with_files(files);
    let commit = repo.head();
    let (tmp, indexes) = index_commit(&repo, &commit);
    (repo, tmp, indexes)
}

fn hits_of(results: &search::SearchResults) -> Vec<Hit> {
    results
        .repos
        .iter()
        .flat_map(|r| r.hits.iter().cloned())
        .collect()
}

fn key(hit: &Hit) -> (String, u64) {
    match hit {
        Hit::Line { path, line, .. } => (path.clone(), *line),
        Hit::FileName { path, .. } => (path.clone(), 0),
    }
}

#[test]
fn s10_each_page_costs_a_page_covers_every_hit_once_and_repeats_from_the_cache() {
    let many: String = (0..60).map(|i| format!("row {i} needle\n")).collect();
    let (repo, tmp, indexes) = indexed(&[
        ("a/needle.txt", b"nothing\n"),
        ("b/lib.rs", b"pub fn needle() {}\nneedle();\n"),
        ("c/many.txt", many.as_bytes()),
    ]);
    let whole = indexes
        .search(&request("o/r", "needle", false, true))
        .unwrap();
    let everything = hits_of(&whole);
    assert_eq!(everything.len(), 63);
    assert_eq!(whole.stats.total_hits, 63);
    assert!(!whole.stats.total_is_lower_bound);

    let mut req = request("o/r", "needle", false, true);
    req.limit = 10;
    let mut paged = Vec::new();
    let mut cursors = Vec::new();
    loop {
        let page = indexes.search(&req).unwrap();
        assert!(!page.stats.cached);
        // A page is found from where the previous one stopped: never more than the page's
        // documents and the one after.
        assert!(page.stats.files_verified <= 3, "{:?}", page.stats);
        assert!(page.stats.total_hits >= (paged.len() + hits_of(&page).len()) as u64);
        paged.extend(hits_of(&page));
        cursors.push(req.cursor.clone());
        match page.next_cursor {
            Some(cursor) => req.cursor = Some(cursor),
            None => {
                assert_eq!(page.stats.total_hits, 63);
                assert!(!page.stats.total_is_lower_bound);
                break;
            }
        }
    }
    assert_eq!(cursors.len(), 7);
    assert_eq!(
        paged, everything,
        "pages cover every hit once, in rank order"
    );
    // The same page asked again comes from the result cache.
    let hits_before = indexes.stats().result_cache_hits;
    for cursor in &cursors {
        req.cursor = cursor.clone();
        let again = indexes.search(&req).unwrap();
        assert!(again.stats.cached);
        assert_eq!(again.stats.files_verified, 0);
    }
    assert_eq!(indexes.stats().result_cache_hits, hits_before + 7);
    // Cleared, it is verified again (what a benchmark of cold pages needs).
    indexes.clear_result_cache();
    assert_eq!(indexes.stats().result_cache_entries, 0);
    assert!(!indexes.search(&req).unwrap().stats.cached);

    // Any page size covers the same hits once.
    let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
    for hit in all_hits(&indexes, &request("o/r", "row", false, true))
        .into_iter()
        .map(|(_, _, h)| h)
    {
        assert!(seen.insert(key(&hit)));
    }
    let mut paged: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut req = request("o/r", "row", false, true);
    req.limit = 25;
    for (_, _, hit) in all_hits(&indexes, &req) {
        assert!(paged.insert(key(&hit)), "duplicate {hit:?}");
    }
    assert_eq!(paged, seen);
    let first = indexes.search(&req).unwrap();

    // A re-index expires the old cursor; the same request is then verified again.
    let cursor = first.next_cursor.clone().unwrap();
    let second_commit = repo.commit(&[("c/more.txt", b"row needle\n")], "more");
    build_at(&indexes, "o/r", repo.path(), &second_commit);
    let mut req = request("o/r", "row", false, true);
    req.limit = 25;
    req.cursor = Some(cursor);
    assert!(matches!(
        indexes.search(&req),
        Err(SearchError::CursorExpired)
    ));
    req.cursor = None;
    req.count = true;
    let fresh = indexes.search(&req).unwrap();
    assert!(!fresh.stats.cached);
    assert!(fresh.stats.files_verified > 0);
    assert_eq!(fresh.stats.total_hits, 61);
    assert!(!fresh.stats.total_is_lower_bound);
    req.count = false;

    // The cache never keeps a generation alive: removing the index deletes its files, and a
    // rebuild at the same commit (same name, commit and generation number) is not served
    // from the old entry, though its cursor still continues it correctly.
    let rebuild = || {
        indexes.remove("o/r").unwrap();
        assert!(
            !tmp.path().join("index/o/r").exists(),
            "the old generation's files are gone"
        );
        let stats = indexes
            .build(
                "o/r",
                &second_commit,
                &GitSource::new(repo.path(), &second_commit),
                &mut |_| {},
            )
            .unwrap();
        assert_eq!(stats.generation, 1);
    };
    rebuild();
    req.cursor = None;
    let page = indexes.search(&req).unwrap();
    assert!(!page.stats.cached);
    req.cursor = page.next_cursor.clone();
    assert!(!indexes.search(&req).unwrap().stats.cached);
    assert!(indexes.search(&req).unwrap().stats.cached);
    rebuild();
    let continued = indexes.search(&req).unwrap();
    assert!(!continued.stats.cached, "a rebuilt generation is new");
    assert!(continued.stats.files_verified > 0);
    let all: Vec<Hit> = hits_of(&indexes.search(&request("o/r", "row", false, true)).unwrap());
    assert_eq!(hits_of(&continued), all[25..50]);
}

#[test]
fn s10_verification_stops_with_the_page_and_counts_up_to_the_cap() {
    let mut rng = Rng(0x5eed_1234);
    let texts: Vec<(String, String)> = (0..80)
        .map(|i| (format!("src/f{i:03}.rs"), generated_text(&mut rng, 300)))
        .collect();
    let mut files: Vec<(&str, &[u8])> = texts
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_bytes()))
        .collect();
    files.push(("docs/eel.md", b"pub fn eel() {}\n"));
    let (_repo, _tmp, indexes) = indexed(&files);
    let corpus: usize = texts.iter().map(|(_, t)| t.len()).sum();
    assert!(corpus > 256 << 10, "large enough for threaded verification");

    // Every hit, page by page.
    let mut query = request("o/r", "e", false, true);
    query.limit = 1000;
    let every: Vec<Hit> = all_hits(&indexes, &query)
        .into_iter()
        .map(|(_, _, h)| h)
        .collect();
    let total = every.len();
    assert!(total as u64 > COUNT_CAP, "{total}");
    let unique: BTreeSet<(String, u64)> = every.iter().map(key).collect();
    assert_eq!(unique.len(), total, "every hit exactly once");
    let names: Vec<Hit> = every
        .iter()
        .filter(|h| matches!(h, Hit::FileName { .. }))
        .cloned()
        .collect();
    assert_eq!(names.len(), 1);
    assert_eq!(every[0], names[0]);

    // A first page stops early and says its total is a lower bound.
    let mut paged = request("o/r", "e", false, true);
    paged.limit = 100;
    let first = indexes.search(&paged).unwrap();
    assert!(first.stats.total_is_lower_bound && first.stats.truncated);
    assert!(first.stats.total_hits > 100 && (first.stats.total_hits as usize) < total);
    assert!(
        first.stats.files_verified <= 4 * 16
            && first.stats.files_verified < first.stats.candidate_files,
        "verification stopped early: {:?}",
        first.stats
    );
    assert_eq!(hits_of(&first), every[..100]);
    // Counted: over the cap here, so at least the cap, and the same page.
    paged.count = true;
    let counted = indexes.search(&paged).unwrap();
    assert!(counted.stats.total_hits >= COUNT_CAP && (counted.stats.total_hits as usize) < total);
    assert!(counted.stats.total_is_lower_bound);
    assert_eq!(hits_of(&counted), every[..100]);
    assert_eq!(
        counted.next_cursor, first.next_cursor,
        "count is not part of the cursor"
    );
    // Below the cap a count is exact.
    let mut some = request("o/r", "e", false, true);
    some.path = Some("src/f0[0-2]?.rs".into());
    some.limit = 1000;
    let below = all_hits(&indexes, &some).len();
    assert!(below > 1000 && (below as u64) < COUNT_CAP, "{below}");
    some.limit = 10;
    some.count = true;
    let exact = indexes.search(&some).unwrap();
    assert_eq!(exact.stats.total_hits as usize, below);
    assert!(!exact.stats.total_is_lower_bound);
    // A later page costs a page too, and continues exactly.
    paged.count = false;
    paged.cursor = first.next_cursor.clone();
    let second = indexes.search(&paged).unwrap();
    assert!(second.stats.files_verified <= 4 * 16, "{:?}", second.stats);
    assert_eq!(hits_of(&second), every[100..200]);
    // The same answer every time.
    for _ in 0..3 {
        indexes.clear_result_cache();
        assert_eq!(hits_of(&indexes.search(&paged).unwrap()), every[100..200]);
    }

    // A page filled by the file name: lines are verified only until one more hit proves a
    // next page (a chunk per thread at most).
    let mut tiny = request("o/r", "e", false, true);
    tiny.limit = 1;
    let tiny = indexes.search(&tiny).unwrap();
    assert!(tiny.stats.total_is_lower_bound);
    assert!(tiny.next_cursor.is_some());
    assert!(tiny.stats.files_verified <= 4 * 16, "{:?}", tiny.stats);
    assert_eq!(hits_of(&tiny), names[..1]);
}

#[test]
fn s1_cursor_request_hash_is_stable() {
    let fixed = SearchRequest {
        query: "fn main".into(),
        repos: vec!["o/r".into(), "a/b".into()],
        path: Some("src/**/*.rs".into()),
        lang: Some("rust".into()),
        regex: false,
        case_sensitive: true,
        limit: 10,
        cursor: None,
        count: false,
    };
    // Pinned: a change breaks every cursor handed out before an upgrade. (FNV-1a 64 over
    // "csg-search-request/1\n", then u64-LE-length-prefixed query, regex and case bytes,
    // tagged path and lang, repository count and sorted repositories; checked independently.)
    assert_eq!(fixed.stable_hash(), 0xc6be_6ecb_730a_91f0);
    // Page size, cursor, and repository order or repeats do not count; the rest does.
    let same = SearchRequest {
        repos: vec!["a/b".into(), "o/r".into(), "a/b".into()],
        limit: 99,
        count: true,
        cursor: Some("x".into()),
        ..fixed.clone()
    };
    assert_eq!(same.stable_hash(), fixed.stable_hash());
    for other in [
        SearchRequest {
            case_sensitive: false,
            ..fixed.clone()
        },
        SearchRequest {
            regex: true,
            ..fixed.clone()
        },
        SearchRequest {
            lang: None,
            ..fixed.clone()
        },
        SearchRequest {
            path: Some(String::new()),
            ..fixed.clone()
        },
        SearchRequest {
            query: "fn mai".into(),
            ..fixed.clone()
        },
    ] {
        assert_ne!(other.stable_hash(), fixed.stable_hash(), "{other:?}");
    }

    // The cursor carries it (hex of JSON; the hash as 16 hex digits).
    let many: String = (0..5).map(|i| format!("fn main {i}\n")).collect();
    let (_repo, _tmp, indexes) = indexed(&[("src/main.rs", many.as_bytes())]);
    let mut req = request("o/r", "fn main", false, true);
    req.limit = 2;
    let cursor = indexes.search(&req).unwrap().next_cursor.unwrap();
    let json: Vec<u8> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16).unwrap())
        .collect();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(&format!("{:016x}", req.stable_hash())),
        "{json}"
    );
}

/// S-4 benchmarks time every search in full: with the result cache off, a repeat verifies
/// again and is never `cached`.
#[test]
fn s1_result_cache_can_be_turned_off() {
    let repo = testgit::SourceRepo::with_files(&[("a.txt", b"needle\n"), ("b.txt", b"needle\n")]);
    let commit = repo.head();
    let (_tmp, dir) = index_dir();
    let config = IndexConfig {
        result_cache: false,
        ..IndexConfig::default()
    };
    let indexes = Indexes::open(dir, config).unwrap();
    build_at(&indexes, "o/r", repo.path(), &commit);
    for _ in 0..2 {
        let results = indexes
            .search(&request("o/r", "needle", false, true))
            .unwrap();
        assert!(!results.stats.cached);
        assert_eq!(results.stats.files_verified, 2);
    }
    assert_eq!(indexes.stats().result_cache_hits, 0);
}

/// A cached hit list is answered without compiling the query again, so a query that does not
/// compile must never be cached: it is refused every time, and before its cursor is looked at.
#[test]
fn s1_a_query_that_does_not_compile_is_refused_every_time() {
    let (_repo, _tmp, indexes) = indexed(&[("a.txt", b"needle (\nneedle\n")]);
    let mut req = request("o/r", "needle (", true, true);
    for _ in 0..2 {
        let refused = indexes.search(&req).unwrap_err();
        assert!(
            matches!(refused, SearchError::InvalidRegex { .. }),
            "{refused:?}"
        );
    }
    // A cursor of another search does not change which error comes first.
    let mut one = request("o/r", "needle", false, true);
    one.limit = 1;
    req.cursor = indexes.search(&one).unwrap().next_cursor;
    assert!(req.cursor.is_some());
    let refused = indexes.search(&req).unwrap_err();
    assert!(
        matches!(refused, SearchError::InvalidRegex { .. }),
        "{refused:?}"
    );
    assert_eq!(indexes.stats().result_cache_hits, 0);
    // The same text as a literal compiles and is cached as usual.
    let literal = request("o/r", "needle (", false, true);
    assert!(!indexes.search(&literal).unwrap().stats.cached);
    assert!(indexes.search(&literal).unwrap().stats.cached);
}
