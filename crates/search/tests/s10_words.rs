//! S-10: the word vocabulary narrows the candidates of word-only patterns (module `words`)
//! without changing any answer: for word-only patterns and others (`\b`, `(?i)`, Unicode
//! words such as `größe`, digits, `_`), the hits paged to the end equal those of the regex
//! run on every line of every file (what verification without the vocabulary answers), and
//! `git grep -n` where its ASCII-minded `\w`/`\b` cannot differ; at an overlay commit too.

mod common;

use std::collections::BTreeSet;

use common::{GitSource, Rng, build_at, fresh_indexes, git_grep, line_hits, request};
use search::SearchRequest;

/// Common words the corpus repeats (a small vocabulary beside a large text).
const WORDS: &[&str] = &[
    "fn",
    "let",
    "größe",
    "Straße",
    "foo_12",
    "bar",
    "x",
    "ΣΑΣ",
    "日本語",
    "naïve",
    "café",
    "_",
    "__init__",
    "a1b2",
    "K",
    "value",
    "Größe",
    "STRASSE",
    "n0",
    "é\u{301}t",
];
const SEPARATORS: &[&str] = &[" ", " ", "-", ".", "(", "\t", ", ", "::", "é", "—"];
/// Rare words, each placed in a few files.
const RARE: &[&str] = &[
    "word_999",
    "ABCDEFGH12",
    "größe_777",
    "ſtraße",
    "KELVIN\u{212a}",
    "zz_123x",
    "mid_456_end",
    "ÉCOLE_314",
];

/// (pattern, case_sensitive, also compared with `git grep -P`)
const PATTERNS: &[(&str, bool, bool)] = &[
    (r"\b[a-z]+_[0-9]{3}\b", true, false),
    (r"[A-Z]{8}\d{2}", true, true),
    (r"[A-Z]{8}[0-9]{2}", false, true),
    ("größe", true, true),
    ("größe", false, false),
    (r"größe_\d+", true, false),
    (r"\bstraße\b", false, false),
    ("ſtraße", false, false),
    (r"\w+_\d{3}", true, false),
    ("k", false, false),
    (r"kelvin\w", false, false),
    (r"^\w+$", true, false),
    (r"\B\d{2}\b", true, false),
    (r"[a-z]+_[0-9]{3}", true, true),
    ("_", true, true),
    ("__init__", true, true),
    (r"\d", true, false),
    ("σας", false, false),
    (r"\b日本語\b", true, false),
    ("naïve|café", true, true),
    (r"\bÉcole_\d+", false, false),
    (r"(?i)word_9+\b", true, false),
    (r"mid_\d+", true, true),
    (r"\p{Greek}+", true, false),
    // Not word-only: the vocabulary is not used.
    ("a b", true, true),
    (r"foo_\d+\(", true, true),
    (r"\s\w+_\d{3}", true, false),
    (r"\w*", true, false),
    (r"\w+\.", true, false),
];

fn corpus(seed: u64, files: usize) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 0..files {
        let mut text = String::new();
        let lines = 20 + (rng.next() % 40) as usize;
        for _ in 0..lines {
            let words = 1 + (rng.next() % 12) as usize;
            for w in 0..words {
                if w > 0 {
                    text.push_str(rng.pick(SEPARATORS));
                }
                text.push_str(rng.pick(WORDS));
            }
            text.push('\n');
        }
        if i % 97 == 13 {
            let rare = RARE[(i / 97) % RARE.len()];
            text.push_str(&format!("let {rare} = {i};\n"));
        }
        let dir = ["src", "tests", "vendor/x", "docs"][i % 4];
        out.push((format!("{dir}/f{i}.rs"), text.into_bytes()));
    }
    out
}

/// The regex run on every line of every text file: what verification without the
/// vocabulary answers.
fn oracle(source: &GitSource, pattern: &str, case_sensitive: bool) -> BTreeSet<(String, u64)> {
    let regex = regex::bytes::RegexBuilder::new(pattern)
        .case_insensitive(!case_sensitive)
        .build()
        .expect("regex");
    let mut expected = BTreeSet::new();
    for path in source.comparable_paths() {
        let text = source.content(&path);
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        for (i, line) in lines.iter().enumerate() {
            let last = i + 1 == lines.len();
            if regex.is_match(line) && !(line.is_empty() && last) {
                expected.insert((path.clone(), i as u64 + 1));
            }
        }
    }
    expected
}

fn paged(req: &SearchRequest, limit: usize) -> SearchRequest {
    let mut req = req.clone();
    req.limit = limit;
    req
}

#[test]
fn s10_word_vocabulary_answers_as_verification_of_every_file_and_git_grep() {
    let files = corpus(0x5eed_0010_0000_0001, 800);
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    let repo = testgit::SourceRepo::with_files(&refs);
    let commit = repo.head();
    let source = GitSource::new(repo.path(), &commit);
    let comparable = source.comparable_paths();
    let (_tmp, indexes) = fresh_indexes();
    indexes
        .build("o/words", &commit, &source, &mut |_| {})
        .expect("build");
    let mut failures = Vec::new();
    for &(pattern, case_sensitive, git) in PATTERNS {
        let expected = oracle(&source, pattern, case_sensitive);
        let req = request("o/words", pattern, true, case_sensitive);
        for limit in [1000, 7] {
            let got = line_hits(&indexes, &paged(&req, limit));
            if got != expected {
                failures.push(format!(
                    "{pattern:?} cs={case_sensitive} limit={limit}: expected {}, got {}; missing {:?}",
                    expected.len(),
                    got.len(),
                    expected.difference(&got).take(3).collect::<Vec<_>>()
                ));
            }
        }
        if git {
            let grep = git_grep(
                repo.path(),
                &commit,
                pattern,
                true,
                case_sensitive,
                &comparable,
            );
            if grep != expected {
                failures.push(format!(
                    "{pattern:?}: git grep {} hits, the regex {}",
                    grep.len(),
                    expected.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The sparse word-only pattern verified few files: the vocabulary ran.
    let results = indexes
        .search(&request("o/words", r"\b[a-z]+_[0-9]{3}\b", true, true))
        .expect("search");
    assert!(
        results.stats.files_verified * 4 < 800,
        "verified {} files",
        results.stats.files_verified
    );
    // Literal queries (escaped) go the same way.
    for literal in ["größe_777", "word_999", "ABCDEFGH12"] {
        let expected = oracle(&source, &regex::escape(literal), true);
        let got = line_hits(&indexes, &request("o/words", literal, false, true));
        assert_eq!(got, expected, "{literal}");
    }
}

#[test]
fn s10_word_vocabulary_at_an_overlay_commit_counts_added_files() {
    let files = corpus(0x5eed_0010_0000_0002, 400);
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    let repo = testgit::SourceRepo::with_files(&refs);
    let base = repo.head();
    let (_tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/ov", repo.path(), &base);
    // A changed file gains a rare word, a new file holds another, one file goes.
    let changed = files[5].0.clone();
    let mut text = files[5].1.clone();
    text.extend_from_slice("neu_555 größe_888\n".as_bytes());
    let commit = repo.commit(
        &[
            (changed.as_str(), text.as_slice()),
            ("src/new.rs", "let added_777 = größe_999;\n".as_bytes()),
        ],
        "overlay",
    );
    let new = GitSource::new(repo.path(), &commit);
    let overlay = common::overlay_of(repo.path(), &base, &commit);
    for (pattern, case_sensitive) in [
        (r"\b[a-z]+_[0-9]{3}\b", true),
        (r"größe_\d+", true),
        (r"GRÖSSE_\d+", false),
        ("added_777", true),
        (r"\w+_5+", true),
    ] {
        let expected = oracle(&new, pattern, case_sensitive);
        let mut got = BTreeSet::new();
        let mut req = request("o/ov", pattern, true, case_sensitive);
        req.limit = 3;
        loop {
            let page = indexes.search_overlay(&req, &overlay).expect("overlay");
            for r in &page.repos {
                for hit in &r.hits {
                    if let search::Hit::Line { path, line, .. } = hit {
                        got.insert((path.clone(), *line));
                    }
                }
            }
            match page.next_cursor {
                Some(c) => req.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(got, expected, "{pattern}");
    }
}
