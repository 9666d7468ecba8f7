//! Issue 12: symbols are derived state of the index. A build stores each text document's
//! definitions; `outline` and `definitions` answer from the published generation;
//! `references` finds word-boundary occurrences and marks the defining lines; a rebuild that
//! reuses a document keeps its symbols; a transform that skips a file leaves no symbols.

mod common;

use common::{GitSource, index_dir, request};
use search::{
    DefinitionsRequest, Hit, IndexConfig, Indexes, SearchError, Source, SourceEntry, SymbolKind,
    Transform,
};

const LIB: &[u8] = b"pub struct Parser {\n    depth: usize,\n}\n\nimpl Parser {\n    pub fn parse(&self) -> usize {\n        self.depth\n    }\n}\n\npub fn parse(text: &str) -> usize {\n    text.len()\n}\n";
const APP: &[u8] = b"from lib import parse\n\n\ndef parse(x):\n    return x\n\n\nclass Runner:\n    def run(self):\n        return parse(1)\n";
const NOTES: &[u8] = b"parse is mentioned here, and parser too, and parse_all.\n";

fn build(source: &dyn Source, dir: &std::path::Path, commit: &str) -> Indexes {
    let indexes = Indexes::open(dir.to_path_buf(), IndexConfig::default()).unwrap();
    indexes.build("o/r", commit, source, &mut |_| {}).unwrap();
    indexes
}

fn definitions(
    indexes: &Indexes,
    symbol: &str,
    lang: Option<&str>,
) -> Vec<(String, u32, SymbolKind)> {
    indexes
        .definitions(&DefinitionsRequest {
            symbol: symbol.into(),
            repos: vec!["o/r".into()],
            lang: lang.map(str::to_owned),
            limit: 100,
            ..DefinitionsRequest::default()
        })
        .unwrap()
        .definitions
        .into_iter()
        .map(|d| (d.path, d.symbol.line, d.symbol.kind))
        .collect()
}

/// The three sample files, indexed: (source, temp dir, indexes, head).
fn indexed_sample() -> (testgit::SourceRepo, tempfile::TempDir, Indexes, String) {
    let repo = testgit::SourceRepo::with_files(&[
        ("src/lib.rs", LIB),
        ("app.py", APP),
        ("NOTES.md", NOTES),
    ]);
    let head = repo.head();
    let (tmp, dir) = index_dir();
    let indexes = build(&GitSource::new(repo.path(), &head), &dir, &head);
    (repo, tmp, indexes, head)
}

#[test]
fn outline_and_definitions_answer_from_the_generation() {
    let (_repo, _tmp, indexes, head) = indexed_sample();

    let outline = indexes.outline("o/r", "src/lib.rs").unwrap();
    assert_eq!(outline.commit, head);
    let rows: Vec<_> = outline
        .symbols
        .iter()
        .map(|s| (s.kind, s.name.as_str(), s.start_line, s.end_line, s.parent))
        .collect();
    assert_eq!(
        rows,
        [
            (SymbolKind::Class, "Parser", 1, 3, None),
            (SymbolKind::Implementation, "Parser", 5, 9, None),
            (SymbolKind::Method, "parse", 6, 8, Some(1)),
            (SymbolKind::Function, "parse", 11, 13, None),
        ]
    );
    // A text file without a grammar has an empty outline; an absent file has none.
    assert!(
        indexes
            .outline("o/r", "NOTES.md")
            .unwrap()
            .symbols
            .is_empty()
    );
    assert!(indexes.outline("o/r", "missing.rs").is_none());
    assert!(indexes.outline("o/other", "src/lib.rs").is_none());

    assert_eq!(
        definitions(&indexes, "parse", None),
        [
            ("app.py".to_owned(), 4, SymbolKind::Function),
            ("src/lib.rs".to_owned(), 6, SymbolKind::Method),
            ("src/lib.rs".to_owned(), 11, SymbolKind::Function),
        ]
    );
    assert_eq!(
        definitions(&indexes, "parse", Some("python")),
        [("app.py".to_owned(), 4, SymbolKind::Function)]
    );
    // Exact and case-sensitive.
    assert!(definitions(&indexes, "pars", None).is_empty());
    assert!(definitions(&indexes, "Parse", None).is_empty());
    let found = indexes
        .definitions(&DefinitionsRequest {
            symbol: "parse".into(),
            repos: vec!["o/r".into(), "o/missing".into()],
            limit: 1,
            ..DefinitionsRequest::default()
        })
        .unwrap();
    assert_eq!(found.definitions.len(), 1);
    assert_eq!(found.total, 3);
    assert_eq!(found.not_indexed, ["o/missing"]);
    let method = indexes
        .definitions(&DefinitionsRequest {
            symbol: "parse".into(),
            repos: vec!["o/r".into()],
            path: Some("src/**".into()),
            limit: 1,
            ..DefinitionsRequest::default()
        })
        .unwrap();
    assert_eq!(method.definitions[0].parent_name.as_deref(), Some("Parser"));
    assert_eq!(
        method.definitions[0].symbol.signature,
        "pub fn parse(&self) -> usize {"
    );
    assert!(matches!(
        indexes.definitions(&DefinitionsRequest {
            symbol: "two words".into(),
            repos: vec!["o/r".into()],
            ..DefinitionsRequest::default()
        }),
        Err(SearchError::InvalidSymbol { .. })
    ));
}

#[test]
fn references_are_word_occurrences_with_definitions_first() {
    let (_repo, _tmp, indexes, head) = indexed_sample();
    let mut page = request("o/r", "ignored", false, false);
    page.limit = 2;
    let mut all = Vec::new();
    loop {
        let results = indexes.references("parse", &page).unwrap();
        for repo in &results.repos {
            assert_eq!(repo.commit, head);
            for hit in &repo.hits {
                match hit {
                    Hit::Line {
                        path,
                        line,
                        definition,
                        ..
                    } => all.push((path.clone(), *line, *definition)),
                    Hit::FileName { .. } => panic!("references have no file-name hits"),
                }
            }
        }
        match results.next_cursor {
            Some(cursor) => page.cursor = Some(cursor),
            None => break,
        }
    }
    assert_eq!(
        all,
        [
            ("app.py".to_owned(), 4, true),
            ("src/lib.rs".to_owned(), 6, true),
            ("src/lib.rs".to_owned(), 11, true),
            ("NOTES.md".to_owned(), 1, false),
            ("app.py".to_owned(), 1, false),
            ("app.py".to_owned(), 10, false),
        ]
    );
    // A search cursor does not page references, nor the reverse.
    let mut search = request("o/r", r"\bparse\b", true, true);
    search.limit = 1;
    let cursor = indexes.search(&search).unwrap().next_cursor.unwrap();
    page.cursor = Some(cursor);
    assert!(matches!(
        indexes.references("parse", &page),
        Err(SearchError::InvalidCursor)
    ));
}

/// A source whose transform skips `app.py` and replaces the indexed text of `src/lib.rs`.
struct Skipping(GitSource);

impl Source for Skipping {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        self.0.entries()
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        self.0.read(entry)
    }
    fn transform(&self, entry: &SourceEntry, _text: &str) -> Result<Transform, String> {
        Ok(match entry.path.as_str() {
            "app.py" => Transform::Skip,
            "src/lib.rs" => Transform::Replace {
                text: Some("replaced text\n".into()),
                lang: search::DocLang::FromPath,
            },
            _ => Transform::Keep,
        })
    }
    fn plugin_fingerprint(&self) -> String {
        "skip-app".into()
    }
}

#[test]
fn reused_documents_keep_their_symbols_and_skipped_files_have_none() {
    let repo = testgit::SourceRepo::with_files(&[("src/lib.rs", LIB), ("app.py", APP)]);
    let first = repo.head();
    let (_tmp, dir) = index_dir();
    let indexes = build(&GitSource::new(repo.path(), &first), &dir, &first);
    let second = repo.commit(&[("other.go", b"package x\n\nfunc parse() {}\n")], "go");
    let stats = indexes
        .build(
            "o/r",
            &second,
            &GitSource::new(repo.path(), &second),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(stats.reused, 2);
    assert_eq!(stats.symbols, 4 + 3 + 1);
    assert_eq!(definitions(&indexes, "parse", None).len(), 4);
    // Reopened from disk, the table answers the same.
    drop(indexes);
    let indexes = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    assert_eq!(
        definitions(&indexes, "parse", Some("go")),
        [("other.go".to_owned(), 3, SymbolKind::Function)]
    );

    let stats = indexes
        .build(
            "o/r",
            &second,
            &Skipping(GitSource::new(repo.path(), &second)),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(stats.skipped, 1);
    assert!(definitions(&indexes, "parse", Some("python")).is_empty());
    assert!(indexes.outline("o/r", "app.py").is_none());
    // Symbols come from the file's own bytes, not from the text a transform indexed.
    assert_eq!(
        indexes.outline("o/r", "src/lib.rs").unwrap().symbols.len(),
        4
    );
    assert!(search_hits(&indexes, "replaced"));
}

/// Phase two of a build (the symbol table) may not have finished: a generation without its
/// table still answers searches, reports itself not indexed for definitions and references,
/// and the next build of the same commit writes the table, which another process sharing
/// the directory then finds without reloading the generation.
#[test]
fn a_missing_symbol_table_is_written_by_the_next_build_and_seen_by_other_processes() {
    let repo = testgit::SourceRepo::with_files(&[("src/lib.rs", LIB), ("NOTES.md", NOTES)]);
    let head = repo.head();
    let (_tmp, dir) = index_dir();
    let source = GitSource::new(repo.path(), &head);
    drop(build(&source, &dir, &head));
    let tables: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "symbols.bin"))
        .collect();
    assert_eq!(tables.len(), 1, "{tables:?}");
    std::fs::remove_file(&tables[0]).unwrap();

    let other = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    let found = other
        .definitions(&DefinitionsRequest {
            symbol: "parse".into(),
            repos: vec!["o/r".into()],
            ..DefinitionsRequest::default()
        })
        .unwrap();
    assert!(found.definitions.is_empty());
    assert_eq!(found.not_indexed, ["o/r"]);
    assert!(other.outline("o/r", "src/lib.rs").is_none());
    let refs = other
        .references("parse", &request("o/r", "", false, false))
        .unwrap();
    assert_eq!(refs.not_indexed, ["o/r"]);
    // Search does not wait for symbols.
    assert!(
        !other
            .search(&request("o/r", "parse", false, true))
            .unwrap()
            .repos
            .is_empty()
    );

    let builder = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    let stats = builder.build("o/r", &head, &source, &mut |_| {}).unwrap();
    assert!(stats.skipped_same);
    assert_eq!(stats.symbols, 4);
    assert_eq!(definitions(&other, "parse", None).len(), 2);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn search_hits(indexes: &Indexes, text: &str) -> bool {
    !indexes
        .search(&request("o/r", text, false, true))
        .unwrap()
        .repos
        .is_empty()
}

/// `definitions` on the committed samples of the `symbols` crate, one file per grammar,
/// against hand-checked answers: every definition of `area` and of `Point`.
#[test]
fn definitions_in_every_language() {
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../symbols/tests/samples");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&samples).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        files.push((name, std::fs::read(&path).unwrap()));
    }
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let repo = testgit::SourceRepo::with_files(&borrowed);
    let head = repo.head();
    let (_tmp, dir) = index_dir();
    let indexes = build(&GitSource::new(repo.path(), &head), &dir, &head);
    let rows = |symbol: &str| -> Vec<String> {
        definitions(&indexes, symbol, None)
            .into_iter()
            .map(|(path, line, kind)| format!("{path}:{line} {}", kind.as_str()))
            .collect()
    };
    assert_eq!(
        rows("area"),
        [
            "sample.c:9 function",
            "sample.c:11 function",
            "sample.cpp:5 method",
            "sample.java:4 method",
            "sample.java:14 method",
            "sample.js:6 method",
            "sample.py:8 method",
            "sample.rs:17 method",
            "sample.ts:2 method",
            "sample.ts:10 method",
        ]
    );
    assert_eq!(
        rows("Point"),
        [
            "sample.cpp:3 class",
            "sample.go:5 type",
            "sample.java:7 class",
            "sample.java:10 method",
            "sample.js:1 class",
            "sample.py:4 class",
            "sample.rs:4 class",
            "sample.ts:9 class",
        ]
    );
}
