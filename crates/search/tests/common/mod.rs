//! Test support: a `Source` over a real Git commit (via the git CLI), `git grep` as the
//! oracle, and helpers to collect every hit of a search through its pages.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use search::{Hit, Indexes, SearchRequest, Source, SourceEntry};

/// Runs git with no global configuration; answers stdout (panics on failure).
pub fn git_out(cwd: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C.UTF-8")
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every regular file of one commit, with all blobs loaded through `git cat-file --batch`.
pub struct GitSource {
    pub entries: Vec<SourceEntry>,
    pub blobs: HashMap<String, Vec<u8>>,
}

impl GitSource {
    pub fn new(repo: &Path, commit: &str) -> Self {
        let listing = git_out(repo, &["ls-tree", "-r", "-l", "-z", commit]);
        let mut entries = Vec::new();
        for record in listing.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let record = std::str::from_utf8(record).expect("utf-8 listing");
            let (meta, path) = record.split_once('\t').expect("tab");
            let fields: Vec<&str> = meta.split_whitespace().collect();
            // Regular files only: no symlinks (120000), no submodules (160000).
            if fields[1] != "blob" || !(fields[0] == "100644" || fields[0] == "100755") {
                continue;
            }
            entries.push(SourceEntry {
                path: path.to_owned(),
                blob_id: fields[2].to_owned(),
                size: fields[3].parse().expect("size"),
            });
        }
        let mut child = Command::new("git")
            .current_dir(repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cat-file");
        let mut stdin = child.stdin.take().expect("stdin");
        let ids: Vec<String> = entries.iter().map(|e| e.blob_id.clone()).collect();
        let writer = std::thread::spawn(move || {
            for id in ids {
                writeln!(stdin, "{id}").expect("write id");
            }
        });
        let mut output = Vec::new();
        child
            .stdout
            .take()
            .expect("stdout")
            .read_to_end(&mut output)
            .expect("read batch");
        writer.join().expect("writer");
        assert!(child.wait().expect("wait").success());
        let mut blobs = HashMap::new();
        let mut pos = 0;
        while pos < output.len() {
            let nl = pos
                + output[pos..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("header");
            let header = std::str::from_utf8(&output[pos..nl]).expect("header utf-8");
            let fields: Vec<&str> = header.split(' ').collect();
            let size: usize = fields[2].parse().expect("size");
            blobs.insert(fields[0].to_owned(), output[nl + 1..nl + 1 + size].to_vec());
            pos = nl + 1 + size + 1;
        }
        GitSource { entries, blobs }
    }

    /// Paths of files that git grep and the index both treat as text: NUL-free UTF-8 ≤ 1 MiB.
    pub fn comparable_paths(&self) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|e| {
                let bytes = &self.blobs[&e.blob_id];
                bytes.len() <= 1_048_576
                    && !bytes.contains(&0)
                    && std::str::from_utf8(bytes).is_ok()
            })
            .map(|e| e.path.clone())
            .collect()
    }

    pub fn content(&self, path: &str) -> &[u8] {
        let entry = self.entries.iter().find(|e| e.path == path).expect("path");
        &self.blobs[&entry.blob_id]
    }
}

impl Source for GitSource {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        Ok(self.entries.clone())
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        self.blobs
            .get(&entry.blob_id)
            .cloned()
            .ok_or_else(|| format!("no blob {}", entry.blob_id))
    }
}

/// `git grep -n` (`-o`: `only_matching`) on `commit`: (path, line, text) records, the text
/// being the line, or with `-o` one match (several records per line).
pub fn git_grep_records(
    repo: &Path,
    commit: &str,
    pattern: &str,
    (regex, case_sensitive): (bool, bool),
    only_matching: bool,
) -> Vec<(String, u64, String)> {
    let mut args = vec!["grep", "-n", "-z", "-I", "--no-color"];
    if only_matching {
        args.push("-o");
    }
    args.push(if regex { "-P" } else { "-F" });
    if !case_sensitive {
        args.push("-i");
    }
    args.extend(["-e", pattern, commit]);
    let out = Command::new("git")
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C.UTF-8")
        .args(&args)
        .output()
        .expect("git grep runs");
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "git grep {pattern:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("{commit}:");
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|r| !r.is_empty())
        .map(|record| {
            let mut fields = record.splitn(3, |&b| b == 0);
            let name = String::from_utf8_lossy(fields.next().expect("name")).into_owned();
            let line: u64 = String::from_utf8_lossy(fields.next().expect("line"))
                .parse()
                .expect("line number");
            let text = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
            let path = name
                .strip_prefix(&prefix)
                .expect("commit prefix")
                .to_owned();
            (path, line, text)
        })
        .collect()
}

/// (path, line) hits of `git grep -n` on `commit`, restricted to `paths`.
pub fn git_grep(
    repo: &Path,
    commit: &str,
    pattern: &str,
    regex: bool,
    case_sensitive: bool,
    paths: &BTreeSet<String>,
) -> BTreeSet<(String, u64)> {
    git_grep_records(repo, commit, pattern, (regex, case_sensitive), false)
        .into_iter()
        .filter(|(path, _, _)| paths.contains(path))
        .map(|(path, line, _)| (path, line))
        .collect()
}

/// Every hit of a request, following cursors; asserts no hit repeats.
pub fn all_hits(indexes: &Indexes, request: &SearchRequest) -> Vec<(String, String, Hit)> {
    let mut request = request.clone();
    let mut out = Vec::new();
    loop {
        let results = indexes.search(&request).expect("search");
        for repo in results.repos {
            for hit in repo.hits {
                out.push((repo.repo.clone(), repo.commit.clone(), hit));
            }
        }
        match results.next_cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => return out,
        }
    }
}

/// The (path, line) set of the line hits of a request.
pub fn line_hits(indexes: &Indexes, request: &SearchRequest) -> BTreeSet<(String, u64)> {
    let hits = all_hits(indexes, request);
    let mut set = BTreeSet::new();
    for (_, _, hit) in hits {
        if let Hit::Line { path, line, .. } = hit {
            assert!(
                set.insert((path.clone(), line)),
                "duplicate hit {path}:{line}"
            );
        }
    }
    set
}

pub fn request(repo: &str, query: &str, regex: bool, case_sensitive: bool) -> SearchRequest {
    SearchRequest {
        query: query.to_owned(),
        repos: vec![repo.to_owned()],
        regex,
        case_sensitive,
        limit: 1000,
        ..SearchRequest::default()
    }
}

/// An index directory in a fresh temp dir.
pub fn index_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("index");
    (tmp, dir)
}

/// A deterministic pseudo-random generator (xorshift) for generated corpora.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "struct",
    "Config",
    "hello",
    "Hello",
    "HELLO",
    "world",
    "foo",
    "bar",
    "baz",
    "return",
    "value",
    "x",
    "y",
    "=",
    "42",
    "1234",
    "grüße",
    "GRÜSSE",
    "Grüße",
    "naïve",
    "ΣΑΣ",
    "σας",
    "café",
    "CAFÉ",
    "color",
    "colour",
    "abcdef",
    "cdef",
    "TODO",
    "todo",
    "unwrap()",
    ".unwrap()",
    "println!(",
    "->",
    "::",
    "(",
    ")",
    "{",
    "}",
    ";",
    "error",
    "IoError",
    "ParseError",
    "aaa",
    "eieio",
    "0xdeadbeef",
    "a",
    "ab",
    "Straße",
    "日本語",
    "Ωmega",
];

/// Source-like text: `lines` lines of random words with varied indentation and line ends.
pub fn generated_text(rng: &mut Rng, lines: usize) -> String {
    let mut text = String::new();
    for _ in 0..lines {
        match rng.next() % 10 {
            0 => {}
            1 => text.push_str("    "),
            2 => text.push('\t'),
            _ => {}
        }
        let words = (rng.next() % 9) as usize;
        for w in 0..words {
            if w > 0 {
                text.push(if rng.next().is_multiple_of(5) {
                    '\t'
                } else {
                    ' '
                });
            }
            text.push_str(rng.pick(WORDS));
        }
        match rng.next() % 12 {
            0 => text.push_str(" \r\n"),
            1 => text.push_str(";\n"),
            _ => text.push('\n'),
        }
    }
    text
}

/// Builds `name` at `commit` of the Git repository at `repo`, without progress.
pub fn build_at(indexes: &Indexes, name: &str, repo: &Path, commit: &str) -> search::BuildStats {
    indexes
        .build(name, commit, &GitSource::new(repo, commit), &mut |_| {})
        .expect("build")
}

/// Indexes (default config) over a fresh index directory, which lives as long as the guard.
pub fn fresh_indexes() -> (tempfile::TempDir, Indexes) {
    let (tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, search::IndexConfig::default()).expect("open");
    (tmp, indexes)
}

/// A fresh index directory with `commit` of `repo` built as repository `o/r` (default config).
pub fn index_commit(repo: &testgit::SourceRepo, commit: &str) -> (tempfile::TempDir, Indexes) {
    let (tmp, indexes) = fresh_indexes();
    build_at(&indexes, "o/r", repo.path(), commit);
    (tmp, indexes)
}

/// The overlay of `commit` over `base`: what `git ls-tree` says differs.
pub fn overlay_of(repo: &Path, base: &str, commit: &str) -> search::Overlay {
    let old = GitSource::new(repo, base);
    let new = GitSource::new(repo, commit);
    let old_blobs: std::collections::BTreeMap<&str, &str> = old
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.blob_id.as_str()))
        .collect();
    let new_blobs: std::collections::BTreeMap<&str, &str> = new
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.blob_id.as_str()))
        .collect();
    search::Overlay {
        commit: commit.to_owned(),
        base_commit: base.to_owned(),
        hidden: old_blobs
            .iter()
            .filter(|(path, blob)| new_blobs.get(*path) != Some(*blob))
            .map(|(path, _)| path.to_string())
            .collect(),
        added: new
            .entries
            .iter()
            .filter(|e| old_blobs.get(e.path.as_str()) != Some(&e.blob_id.as_str()))
            .map(|e| search::OverlayDoc {
                path: e.path.clone(),
                blob: e.blob_id.clone(),
                text: std::sync::Arc::from(new.blobs[&e.blob_id].as_slice()),
            })
            .collect(),
    }
}
