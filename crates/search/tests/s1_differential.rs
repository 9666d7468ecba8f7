//! S-1/S-4 exactness: over NUL-free UTF-8 files ≤ 1 MiB, the (path, line) hits of the index
//! equal those of `git grep -n` (`-P` for regular expressions, `-F` for literals, `-i` for
//! case-insensitive, `LC_ALL=C.UTF-8`) on the same commit, for a table of queries, on a
//! generated repository and on this project's own repository.

mod common;

use std::path::Path;

use common::{
    GitSource, Rng, all_hits, build_at, fresh_indexes, generated_text, git_grep, git_out,
    line_hits, request,
};

/// (query, regex, case_sensitive)
const QUERIES: &[(&str, bool, bool)] = &[
    // Literals.
    ("fn ", false, true),
    ("hello", false, false),
    ("Hello", false, true),
    ("a", false, true),
    ("ab", false, false),
    ("x", false, false),
    ("println!(", false, true),
    ("(", false, true),
    ("->", false, true),
    ("  ", false, true),
    ("TODO", false, false),
    ("struct Config", false, true),
    (".unwrap()", false, true),
    ("0xDEADBEEF", false, false),
    ("café", false, true),
    // Unicode literals, case-sensitive and not.
    ("grüße", true, false),
    ("ΣΑΣ", true, false),
    ("CAFÉ", true, false),
    ("日本語", true, true),
    ("Straße|naïve", true, false),
    // Anchors.
    ("^fn ", true, true),
    (";$", true, true),
    ("^$", true, true),
    (r"^\s*//", true, true),
    (r"^\t", true, true),
    (r"\s+$", true, true),
    ("^", true, true),
    // Alternations and groups.
    ("foo|bar", true, true),
    ("(ab|cd)ef", true, true),
    ("colou?r", true, false),
    ("(?-i)Hello|WORLD", true, false),
    // Character classes.
    ("[A-Z][a-z]+Error", true, true),
    (r"\d{3,}", true, true),
    ("[aeiou]{3}", true, true),
    ("[A-Z]{4}", true, true),
    ("[^ ]{12,}", true, false),
    (r"\p{Greek}+", true, true),
    (r"[^\x00-\x7F]+", true, true),
    ("[0-9a-f]{8}", true, true),
    // No literal trigram at all.
    (r"\w+\s*=\s*\d", true, true),
    (r"\bfn\b", true, true),
    ("a.c", true, false),
    ("^.{60,}$", true, true),
    (r"\S\t\S", true, true),
    // Regex with literals.
    (r"let\s+mut", true, true),
    (r"\.unwrap\(\)", true, true),
    (r"return\s+\w+;", true, true),
    (r"impl.*for", true, true),
    ("::", true, true),
    (r"Config\b", true, false),
    (r"eieio|Ωmega", true, false),
];

/// Every query's hits paged to the end with each page size: the same sequence whatever the
/// size (S-10: a page resumes exactly where the previous one stopped), and as a set what
/// `git grep -n` answers.
fn compare(repo: &Path, name: &str, commit: &str, limits: &[usize]) {
    let source = GitSource::new(repo, commit);
    let comparable = source.comparable_paths();
    let (_tmp, indexes) = fresh_indexes();
    indexes
        .build(name, commit, &source, &mut |_| {})
        .expect("build");
    let mut failures = Vec::new();
    for &(query, regex, case_sensitive) in QUERIES {
        let expected = git_grep(repo, commit, query, regex, case_sensitive, &comparable);
        let mut sequences = Vec::new();
        for &limit in limits {
            let mut req = request(name, query, regex, case_sensitive);
            req.limit = limit;
            sequences.push(all_hits(&indexes, &req));
        }
        if sequences.windows(2).any(|w| w[0] != w[1]) {
            failures.push(format!("{query:?}: another order with another page size"));
        }
        let got: std::collections::BTreeSet<_> =
            line_hits(&indexes, &request(name, query, regex, case_sensitive))
                .into_iter()
                .filter(|(path, _)| comparable.contains(path))
                .collect();
        if got != expected {
            let missing: Vec<_> = expected.difference(&got).take(5).collect();
            let extra: Vec<_> = got.difference(&expected).take(5).collect();
            failures.push(format!(
                "{query:?} regex={regex} cs={case_sensitive}: git grep {} hits, index {}; missing {missing:?}, extra {extra:?}",
                expected.len(),
                got.len()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "differences on {name}:\n{}",
        failures.join("\n")
    );
}

#[test]
fn s1_differential_against_git_grep_on_a_generated_repository() {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..160 {
        let lines = 5 + (rng.next() % 60) as usize;
        let dir = ["src", "docs", "lib/deep/er", "tests"][i % 4];
        let ext = ["rs", "md", "py", "txt"][(i / 4) % 4];
        files.push((
            format!("{dir}/file_{i}.{ext}"),
            generated_text(&mut rng, lines).into_bytes(),
        ));
    }
    // A file without a final newline, an empty file, a binary file, a non-UTF-8 file.
    files.push((
        "no_newline.txt".into(),
        b"hello world\nlast line hello".to_vec(),
    ));
    files.push(("empty.txt".into(), Vec::new()));
    files.push(("image.bin".into(), b"hello\0world\n".to_vec()));
    files.push(("latin1.txt".into(), b"caf\xe9 hello\n".to_vec()));
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    let repo = testgit::SourceRepo::with_files(&refs);
    let commit = repo.head();
    compare(repo.path(), "gen/erated", &commit, &[1000, 37, 1]);
}

#[test]
fn s1_differential_against_git_grep_on_this_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Others may commit meanwhile: pin one commit for both sides.
    let commit = String::from_utf8(git_out(&root, &["rev-parse", "HEAD"]))
        .expect("sha")
        .trim()
        .to_owned();
    compare(&root, "csg/self", &commit, &[1000]);
}

/// Regexes whose Unicode and ASCII meanings differ only on non-ASCII text (classes, word
/// boundaries, case folding, a non-ASCII literal folding to ASCII), over an ASCII and a
/// non-ASCII document: verification runs an ASCII-mode regex on ASCII documents, and the hits
/// must be those of the Unicode regex run on each line (the oracle here: `git grep -P` is
/// ASCII-minded for `\w` and `\b`).
#[test]
fn s1_ascii_documents_answer_as_the_unicode_regex_would() {
    let repo = testgit::SourceRepo::with_files(&[
        ("ascii.txt", b"foo_123 bar\nKelvin k and s\nword_999x\n"),
        (
            "utf8.txt",
            "foo_123 \u{e9}t\u{e9}\n\u{e9}foo_123\nK\u{212a} \u{17f}\n".as_bytes(),
        ),
    ]);
    let commit = repo.head();
    let (_tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/r", repo.path(), &commit);
    let source = GitSource::new(repo.path(), &commit);
    for (query, case_sensitive) in [
        (r"\b[a-z]+_[0-9]{3}\b", true),
        (r"\w+_\d+", true),
        ("\u{17f}", false),
        ("\u{212a}", false),
        (r"\bfoo", true),
        (r"[^a-z ]+", true),
        ("K.", false),
    ] {
        let regex = regex::bytes::RegexBuilder::new(query)
            .case_insensitive(!case_sensitive)
            .build()
            .expect("regex");
        let mut expected = std::collections::BTreeSet::new();
        for entry in &source.entries {
            let text = source.content(&entry.path);
            for (i, line) in text.split(|&b| b == b'\n').enumerate() {
                let last = i + 1 == text.split(|&b| b == b'\n').count();
                if regex.is_match(line) && !(line.is_empty() && last) {
                    expected.insert((entry.path.clone(), i as u64 + 1));
                }
            }
        }
        let got = line_hits(&indexes, &request("o/r", query, true, case_sensitive));
        assert_eq!(got, expected, "{query}");
    }
}
