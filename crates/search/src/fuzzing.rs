//! Entry points of the fuzz targets `search_query` and `cursor` (`fuzz/`, issue 43) and of
//! their corpus replay in CI (`tests/fuzz_corpus.rs`). Each feeds untrusted bytes to the real
//! parser or planner and asserts what must hold of its answer; a panic is a finding. Not an
//! API (hidden); nothing here changes what a search does.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use regex::bytes::Regex;

use crate::page::Cursor;
use crate::trigram::{Trigram, TrigramQuery, TrigramScratch, doc_trigrams};
use crate::{Hit, IndexConfig, Indexes, SearchRequest, Source, SourceEntry};

/// The documents of the index every `search_query` input is also searched in: a few lines
/// of code and prose in several scripts and case pairs, CRLF and long lines.
const FIXTURE: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "//! A library.\nuse std::fmt;\n\npub struct Config {\n    pub name: String,\n}\n\nimpl fmt::Display for Config {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{}\", self.name)\n    }\n}\n\nfn parse_0xDEADBEEF(x: u32) -> Option<u32> { x.checked_mul(3) }\n",
    ),
    (
        "docs/README.md",
        "# Grüße aus Köln\n\nStraße, naïve café. ΣΑΣ σας ς. The Kelvin sign \u{212a} and long ſ.\nTODO: colour vs color\n\n日本語のテキスト\n",
    ),
    (
        "tests/crlf.txt",
        "first line\r\nsecond\tline\r\n\r\nfoo_bar baz_123 qux\r\nlast",
    ),
    (
        "vendor/min.js",
        "function a(b){return b&&b.c?b.c(1):0}var x=\"ab\\\"cd\";/* \u{1F600} */\n",
    ),
    ("Makefile", "all:\n\tcargo build --release\n\n.PHONY: all\n"),
    ("empty.txt", ""),
    (
        "src/deep/nested/mod.rs",
        "pub mod a; pub mod b;\n#[cfg(test)]\nmod tests { #[test] fn it_works() { assert_eq!(2 + 2, 4); } }\n",
    ),
];

const REPO: &str = "fuzz/fixture";
/// Changes with [`FIXTURE`] (its generation is kept in the temporary directory).
const COMMIT: &str = "f0220000000000000000000000000000000000a1";

struct Fixture;

impl Source for Fixture {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        Ok(FIXTURE
            .iter()
            .enumerate()
            .map(|(i, (path, text))| SourceEntry {
                path: (*path).to_owned(),
                blob_id: format!("{i:040x}"),
                size: text.len() as u64,
            })
            .collect())
    }

    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        FIXTURE
            .iter()
            .find(|(path, _)| *path == entry.path)
            .map(|(_, text)| text.as_bytes().to_vec())
            .ok_or_else(|| "no such entry".to_owned())
    }
}

/// The fixture's index, built once per process (a later process finds it current).
fn fixture() -> &'static Indexes {
    static INDEXES: OnceLock<Indexes> = OnceLock::new();
    INDEXES.get_or_init(|| {
        let dir: PathBuf = std::env::temp_dir().join(format!("csg-fuzz-search-{COMMIT}"));
        let config = IndexConfig {
            result_cache: false,
            ..IndexConfig::default()
        };
        let indexes = Indexes::open(dir, config).expect("fixture index");
        indexes
            .build(REPO, COMMIT, &Fixture, &mut |_| {})
            .expect("fixture build");
        indexes
    })
}

thread_local! {
    static SCRATCH: RefCell<TrigramScratch> = RefCell::new(TrigramScratch::new());
}

/// Target `search_query`: a code search's query and filters as a caller sends them, planned
/// (`plan.rs`: the regex, its ASCII twin, the trigram query, word-only), then checked against
/// a document from the input and searched for real in [`FIXTURE`]'s index, paged to the end.
/// The first byte holds the flags (bit 0: regex, bit 1: case-sensitive); the rest is
/// `query \0 path glob \0 lang \0 document`.
///
/// What must hold: every line a query's regex matches is found — the trigram plan admits its
/// document, a word-only query's vocabulary scan finds it, the ASCII twin matches exactly the
/// same ASCII lines, and the index's pages, walked by their cursors, hold exactly the lines a
/// line-by-line scan of the fixture matches.
pub fn search_query(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut fields = rest.splitn(4, |&b| b == 0);
    let mut text = || String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    let (query, path, lang) = (text(), text(), text());
    let doc = fields.next().unwrap_or_default().to_vec();
    let request = SearchRequest {
        query,
        repos: vec![REPO.to_owned()],
        path: (!path.is_empty()).then_some(path),
        lang: (!lang.is_empty()).then_some(lang),
        regex: flags & 1 != 0,
        case_sensitive: flags & 2 != 0,
        limit: 7,
        cursor: None,
        count: flags & 4 != 0,
    };
    if crate::plan::check_length(&request.query).is_err() {
        return;
    }
    let Ok(compiled) = crate::plan::compile(&request) else {
        return;
    };
    check_document(&compiled, &doc);
    search_fixture(&request, &compiled.regex);
}

/// The planner's promises on one document.
fn check_document(compiled: &crate::plan::Compiled, doc: &[u8]) {
    let lines = lines(doc);
    let matching: Vec<&[u8]> = lines
        .iter()
        .copied()
        .filter(|line| compiled.regex.is_match(line))
        .collect();
    if let Some(ascii) = &compiled.ascii
        && doc.is_ascii()
    {
        for line in &lines {
            assert_eq!(
                ascii.is_match(line),
                compiled.regex.is_match(line),
                "the ASCII twin disagrees on {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }
    if matching.is_empty() {
        return;
    }
    let trigrams: HashSet<Trigram> = SCRATCH.with(|scratch| {
        let mut out = Vec::new();
        doc_trigrams(doc, &mut scratch.borrow_mut(), &mut out);
        out.into_iter().collect()
    });
    assert!(
        admits(&compiled.plan, &trigrams),
        "the trigram plan {:?} rejects a document with a match on {:?}",
        compiled.plan,
        String::from_utf8_lossy(matching[0])
    );
    if compiled.word_only && std::str::from_utf8(doc).is_ok() {
        let words = crate::words::doc_words(doc);
        let found = compiled.regex.is_match(&words)
            || compiled.ascii.as_ref().is_some_and(|a| a.is_match(&words));
        assert!(
            found,
            "a word-only query misses the vocabulary of a document with a match on {:?}",
            String::from_utf8_lossy(matching[0])
        );
    }
}

/// Whether a document with `trigrams` passes `plan`.
fn admits(plan: &TrigramQuery, trigrams: &HashSet<Trigram>) -> bool {
    match plan {
        TrigramQuery::All => true,
        TrigramQuery::Trigram(t) => trigrams.contains(t),
        TrigramQuery::And(parts) => parts.iter().all(|p| admits(p, trigrams)),
        TrigramQuery::Or(parts) => parts.iter().any(|p| admits(p, trigrams)),
    }
}

/// A text's lines as `git grep` sees them: no line after a final newline.
fn lines(text: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if text.is_empty() || text.ends_with(b"\n") {
        lines.pop();
    }
    lines
}

/// The request searched in the fixture, every page: the line hits are exactly the lines the
/// regex matches (filters absent), and each line once.
fn search_fixture(request: &SearchRequest, regex: &Regex) {
    let indexes = fixture();
    let mut found = BTreeSet::new();
    let mut request = request.clone();
    for _ in 0..64 {
        let Ok(page) = indexes.search(&request) else {
            return;
        };
        for repo in &page.repos {
            for hit in &repo.hits {
                if let Hit::Line { path, line, .. } = hit {
                    assert!(
                        found.insert((path.clone(), *line)),
                        "{path}:{line} on two pages"
                    );
                }
            }
        }
        match page.next_cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => break,
        }
    }
    if request.path.is_some() || request.lang.is_some() || found.len() >= 64 * 7 {
        return;
    }
    let mut expected = BTreeSet::new();
    for (path, text) in FIXTURE {
        for (i, line) in lines(text.as_bytes()).into_iter().enumerate() {
            if regex.is_match(line) {
                expected.insert(((*path).to_owned(), i as u64 + 1));
            }
        }
    }
    assert_eq!(
        found, expected,
        "the index's hits differ from a line-by-line scan"
    );
}

/// Target `cursor`, its search part: a code search's page cursor (`page.rs`) and a commit or
/// diff search's (`history/query.rs`) as a caller sends them. A page cursor that decodes is
/// written again as its canonical text, which decodes to the same cursor.
pub fn cursors(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(cursor) = Cursor::decode(&text) {
        let again = cursor.encode();
        assert_eq!(Cursor::decode(&again).ok(), Some(cursor));
        let generations = vec![(REPO.to_owned(), COMMIT.to_owned(), 1)];
        let _ = crate::page::start(Some(&again), "request", &generations);
    }
    // The same bytes as a cursor's JSON, hex-encoded as a server would write it.
    let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
    if let Ok(cursor) = Cursor::decode(&hex) {
        let generations = cursor.generations.clone();
        let request = cursor.request.clone();
        assert_eq!(
            crate::page::start(Some(&hex), &request, &generations).is_ok(),
            cursor.offset == 0 || cursor.after.is_some()
        );
        assert_eq!(Cursor::decode(&cursor.encode()).ok(), Some(cursor));
    }
    let _ = crate::history_cursor_tip(&text);
    let _ = crate::history_cursor_tip(&hex);
}
