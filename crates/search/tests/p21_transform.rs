//! P-7, P-21: a source's derived-state transform (what server plugins' `on_source_file`
//! becomes) shapes what is indexed, enters the fingerprint, and never mixes across
//! transforms.

mod common;

use common::{GitSource, index_dir, line_hits, request};
use search::{DocLang, IndexConfig, Indexes, Source, SourceEntry, Transform};
use std::collections::BTreeSet;

/// A source over a commit whose transform is a small rule table, with a fingerprint.
struct Transforming {
    inner: GitSource,
    fingerprint: &'static str,
    rule: fn(&str, &str) -> Result<Transform, String>,
}

impl Source for Transforming {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        self.inner.entries()
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        self.inner.read(entry)
    }
    fn transform(&self, entry: &SourceEntry, text: &str) -> Result<Transform, String> {
        (self.rule)(&entry.path, text)
    }
    fn plugin_fingerprint(&self) -> String {
        self.fingerprint.to_owned()
    }
}

fn repo() -> (testgit::SourceRepo, String) {
    let repo = testgit::SourceRepo::with_files(&[
        ("app.min.js", b"var generatedneedle=1;\n"),
        ("docs/a.md", b"# Title\noriginalword here\n"),
        ("docs/b.md", b"plain text\n"),
    ]);
    let head = repo.head();
    (repo, head)
}

fn rules(path: &str, _text: &str) -> Result<Transform, String> {
    match path {
        "app.min.js" => Ok(Transform::Skip),
        "docs/a.md" => Ok(Transform::Replace {
            text: Some("# Title\nreplacedword here\n".into()),
            lang: DocLang::FromPath,
        }),
        "docs/b.md" => Err("on_source_file raised ValueError".into()),
        _ => Ok(Transform::Keep),
    }
}

fn keep(_path: &str, _text: &str) -> Result<Transform, String> {
    Ok(Transform::Keep)
}

fn hits(indexes: &Indexes, query: &str) -> BTreeSet<(String, u64)> {
    line_hits(indexes, &request("o/r", query, false, false))
}

fn file_names(indexes: &Indexes, query: &str) -> Vec<String> {
    common::all_hits(indexes, &request("o/r", query, false, false))
        .into_iter()
        .filter_map(|(_, _, hit)| match hit {
            search::Hit::FileName { path, .. } => Some(path),
            search::Hit::Line { .. } => None,
        })
        .collect()
}

#[test]
fn p21_skip_replace_and_a_failing_transform() {
    let (repo, head) = repo();
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    let source = Transforming {
        inner: GitSource::new(repo.path(), &head),
        fingerprint: "v1",
        rule: rules,
    };
    let stats = indexes.build("o/r", &head, &source, &mut |_| {}).unwrap();
    assert_eq!(
        (stats.skipped, stats.transformed, stats.transform_failures),
        (1, 1, 1)
    );
    assert_eq!(
        stats.documents, 2,
        "the skipped file is not in the generation"
    );
    assert!(stats.failure_messages[0].starts_with("docs/b.md: on_source_file raised"));
    assert!(hits(&indexes, "generatedneedle").is_empty());
    assert!(
        file_names(&indexes, "min.js").is_empty(),
        "no file-name hit either"
    );
    assert_eq!(
        hits(&indexes, "replacedword"),
        BTreeSet::from([("docs/a.md".into(), 2)])
    );
    assert!(hits(&indexes, "originalword").is_empty());
    // The failing transform's file is indexed as it is (P-7).
    assert_eq!(
        hits(&indexes, "plain text"),
        BTreeSet::from([("docs/b.md".into(), 1)])
    );
    let info = indexes.current("o/r").unwrap();
    assert_eq!(search::plugin_part(&info.fingerprint), Some("v1"));

    // Same commit, same transform: a no-op. Same commit, another transform: a rebuild that
    // reuses nothing the old transform shaped (a transform that keeps gives the originals).
    assert!(
        indexes
            .build("o/r", &head, &source, &mut |_| {})
            .unwrap()
            .skipped_same
    );
    let plain = Transforming {
        inner: GitSource::new(repo.path(), &head),
        fingerprint: "",
        rule: keep,
    };
    let rebuilt = indexes.build("o/r", &head, &plain, &mut |_| {}).unwrap();
    assert!(!rebuilt.skipped_same);
    assert_eq!(rebuilt.reused, 0);
    assert_eq!(
        hits(&indexes, "originalword"),
        BTreeSet::from([("docs/a.md".into(), 2)])
    );
    assert_eq!(
        hits(&indexes, "generatedneedle"),
        BTreeSet::from([("app.min.js".into(), 1)])
    );
}

fn languages(path: &str, _text: &str) -> Result<Transform, String> {
    let lang = match path {
        "docs/a.md" => DocLang::named("RS"),
        "docs/b.md" => DocLang::Unknown,
        _ => return Ok(Transform::Keep),
    };
    Ok(Transform::Replace { text: None, lang })
}

fn in_lang(indexes: &Indexes, query: &str, lang: &str) -> BTreeSet<(String, u64)> {
    let mut request = request("o/r", query, false, false);
    request.lang = Some(lang.to_owned());
    line_hits(indexes, &request)
}

/// P-21: a transform may set the language the `lang` filter sees (a known alias stands for
/// its name; `Unknown` matches no filter) while the text stays the file's; the choice is
/// stored with the generation and holds after a reopen.
#[test]
fn p21_a_transform_sets_the_indexed_language() {
    let (repo, head) = repo();
    let (_tmp, dir) = index_dir();
    let source = Transforming {
        inner: GitSource::new(repo.path(), &head),
        fingerprint: "langs",
        rule: languages,
    };
    {
        let indexes = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
        let stats = indexes.build("o/r", &head, &source, &mut |_| {}).unwrap();
        assert_eq!((stats.transformed, stats.documents), (2, 3));
    }
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    let a = BTreeSet::from([("docs/a.md".into(), 2)]);
    assert_eq!(in_lang(&indexes, "originalword", "rust"), a);
    assert!(in_lang(&indexes, "originalword", "markdown").is_empty());
    assert_eq!(hits(&indexes, "originalword"), a, "the text is the file's");
    assert!(in_lang(&indexes, "plain", "markdown").is_empty());
    assert_eq!(
        hits(&indexes, "plain"),
        BTreeSet::from([("docs/b.md".into(), 1)])
    );
    assert_eq!(
        in_lang(&indexes, "generatedneedle", "js"),
        BTreeSet::from([("app.min.js".into(), 1)]),
        "untouched files keep their path's language"
    );
}

#[test]
fn p7_strict_transforms_fail_the_build_and_the_published_generation_answers() {
    let (repo, head) = repo();
    let (_tmp, dir) = index_dir();
    let config = IndexConfig {
        strict_transforms: true,
        ..IndexConfig::default()
    };
    let indexes = Indexes::open(dir, config).unwrap();
    let plain = Transforming {
        inner: GitSource::new(repo.path(), &head),
        fingerprint: "",
        rule: keep,
    };
    indexes.build("o/r", &head, &plain, &mut |_| {}).unwrap();
    let failing = Transforming {
        inner: GitSource::new(repo.path(), &head),
        fingerprint: "v2",
        rule: rules,
    };
    let error = indexes
        .build("o/r", &head, &failing, &mut |_| {})
        .unwrap_err();
    assert!(error.to_string().contains("docs/b.md"), "{error}");
    assert_eq!(
        search::plugin_part(&indexes.current("o/r").unwrap().fingerprint),
        Some("")
    );
    assert_eq!(
        hits(&indexes, "originalword"),
        BTreeSet::from([("docs/a.md".into(), 2)])
    );
}
