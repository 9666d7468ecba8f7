//! S-3: the index is used, incremental, published atomically per generation, rebuilt on a
//! fingerprint change; path-only documents.

// `vec![a..b]` is a hit's list of one mark (a byte range), not the range's numbers.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{GitSource, Rng, all_hits, build_at, generated_text, index_dir, line_hits, request};
use search::{Hit, IndexConfig, Indexes, PathOnly, SearchError, Source, SourceEntry};

fn generated_repo(files: usize, seed: u64) -> (testgit::SourceRepo, Vec<(String, Vec<u8>)>) {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 0..files {
        let lines = 3 + (rng.next() % 25) as usize;
        out.push((
            format!("pkg{}/mod{}/file_{i}.rs", i % 7, i % 13),
            generated_text(&mut rng, lines).into_bytes(),
        ));
    }
    out.push((
        "pkg0/rare.rs".into(),
        b"fn main() {}\nlet zyxwvutsrq_rare = 1;\n".to_vec(),
    ));
    let refs: Vec<(&str, &[u8])> = out
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    (testgit::SourceRepo::with_files(&refs), out)
}

#[test]
fn s3_rare_literal_verifies_under_one_percent_of_files() {
    let (repo, _) = generated_repo(3000, 7);
    let commit = repo.head();
    let source = GitSource::new(repo.path(), &commit);
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    let stats = indexes
        .build("gen/big", &commit, &source, &mut |_| {})
        .unwrap();
    assert_eq!(stats.documents, 3001);
    assert_eq!(stats.read, 3001);
    let results = indexes
        .search(&request("gen/big", "zyxwvutsrq_rare", false, true))
        .unwrap();
    assert_eq!(results.repos.len(), 1);
    assert_eq!(
        results.repos[0].hits,
        vec![Hit::Line {
            path: "pkg0/rare.rs".into(),
            line: 2,
            snippet: "let zyxwvutsrq_rare = 1;".into(),
            definition: false,
            marks: vec![4..19],
        }]
    );
    assert_eq!(results.repos[0].commit, commit);
    assert_eq!(results.stats.documents, 3001);
    assert!(results.stats.candidate_files >= 1);
    assert!(
        results.stats.files_verified * 100 < 3001,
        "verified {} files",
        results.stats.files_verified
    );
    // Case-insensitive and regex queries use the index too.
    let results = indexes
        .search(&request("gen/big", "ZYXWVUTSRQ_rare", false, false))
        .unwrap();
    assert!(results.stats.files_verified * 100 < 3001);
    let results = indexes
        .search(&request("gen/big", r"zyxwv\w+_rare\s*=", true, true))
        .unwrap();
    assert_eq!(results.stats.total_hits, 1);
    assert!(results.stats.files_verified * 100 < 3001);
    // A query without trigrams that can match a non-word character scans every text
    // document; a word-only one (S-10) verifies the documents holding a word it matches.
    let results = indexes
        .search(&request("gen/big", ";z", false, true))
        .unwrap();
    assert_eq!(results.stats.files_verified, 3001);
    let results = indexes
        .search(&request("gen/big", r"\bzy\w{8}_\w+", true, true))
        .unwrap();
    assert_eq!(results.stats.total_hits, 1);
    assert!(
        results.stats.files_verified * 100 < 3001,
        "verified {} files",
        results.stats.files_verified
    );
}

#[test]
fn s3_one_file_change_reuses_every_other_document() {
    let (repo, files) = generated_repo(200, 11);
    let first = repo.head();
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    let stats = build_at(&indexes, "gen/inc", repo.path(), &first);
    assert_eq!((stats.read, stats.reused), (201, 0));
    let changed = &files[5].0;
    let second = repo.commit(&[(changed, b"brand new content qwertyuiop\n")], "one file");
    let mut seen = Vec::new();
    let stats = indexes
        .build(
            "gen/inc",
            &second,
            &GitSource::new(repo.path(), &second),
            &mut |p| seen.push(p),
        )
        .unwrap();
    assert_eq!((stats.read, stats.reused, stats.documents), (1, 200, 201));
    assert!(!stats.skipped_same);
    assert_eq!(seen.last().map(|p| (p.done, p.total)), Some((201, 201)));
    let counters = indexes.stats();
    assert_eq!(counters.documents_reused, 200);
    assert_eq!(counters.documents_read, 202);
    assert_eq!(counters.builds, 2);
    let hits = line_hits(&indexes, &request("gen/inc", "qwertyuiop", false, true));
    assert_eq!(hits, BTreeSet::from([(changed.clone(), 1)]));
    // Same commit again: nothing to do.
    let again = build_at(&indexes, "gen/inc", repo.path(), &second);
    assert!(again.skipped_same);
    assert_eq!(indexes.stats().builds_skipped, 1);
    let info = indexes.current("gen/inc").unwrap();
    assert_eq!(info.commit, second);
    assert_eq!(info.documents, 201);
    assert!(info.bytes_on_disk > 0);
    // A forced rebuild of the same commit reads everything again into a new generation.
    let fresh = indexes
        .rebuild(
            "gen/inc",
            &second,
            &GitSource::new(repo.path(), &second),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(
        (fresh.read, fresh.reused, fresh.skipped_same),
        (201, 0, false)
    );
    assert_eq!(fresh.generation, info.generation + 1);
    assert_eq!(
        line_hits(&indexes, &request("gen/inc", "qwertyuiop", false, true)),
        BTreeSet::from([(changed.clone(), 1)])
    );
}

#[test]
fn s3_fingerprint_change_rebuilds_the_same_commit_and_reopen_loads_the_index() {
    let repo = testgit::SourceRepo::with_files(&[("a.txt", b"alpha beta gamma\n")]);
    let commit = repo.head();
    let source = GitSource::new(repo.path(), &commit);
    let (_tmp, dir) = index_dir();
    {
        let indexes = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
        let first = indexes.build("o/r", &commit, &source, &mut |_| {}).unwrap();
        assert!(!first.skipped_same);
        assert!(
            indexes
                .build("o/r", &commit, &source, &mut |_| {})
                .unwrap()
                .skipped_same
        );
    }
    {
        // Reopened with the same settings: loaded, still a no-op.
        let indexes = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
        assert_eq!(indexes.current("o/r").unwrap().commit, commit);
        assert_eq!(
            line_hits(&indexes, &request("o/r", "beta", false, true)),
            BTreeSet::from([("a.txt".to_owned(), 1)])
        );
        assert!(
            indexes
                .build("o/r", &commit, &source, &mut |_| {})
                .unwrap()
                .skipped_same
        );
    }
    let config = IndexConfig {
        max_file_bytes: 2 * search::DEFAULT_MAX_FILE_BYTES,
        ..IndexConfig::default()
    };
    let indexes = Indexes::open(dir.clone(), config.clone()).unwrap();
    let before = indexes.current("o/r").unwrap();
    assert_ne!(before.fingerprint, config.fingerprint(""));
    let rebuilt = indexes.build("o/r", &commit, &source, &mut |_| {}).unwrap();
    assert!(!rebuilt.skipped_same);
    assert_eq!(
        rebuilt.reused, 1,
        "same blobs are still reused across a size-limit change"
    );
    let after = indexes.current("o/r").unwrap();
    assert_eq!(after.fingerprint, config.fingerprint(""));
    assert!(after.generation > before.generation);
    // The old generation's directory is gone (nothing holds it).
    let gens: Vec<_> = std::fs::read_dir(dir.join("o/r"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".build.lock")
        .collect();
    assert_eq!(gens, vec![format!("gen-{}", after.generation)]);
    // Removal.
    indexes.remove("o/r").unwrap();
    assert!(indexes.current("o/r").is_none());
    let results = indexes
        .search(&request("o/r", "beta", false, true))
        .unwrap();
    assert_eq!(results.not_indexed, vec!["o/r".to_owned()]);
}

#[test]
fn s3_binary_large_and_non_utf8_files_are_path_only() {
    let mut large = b"needle at the start\n".to_vec();
    large.extend(std::iter::repeat_n(b'x', 2000));
    let repo = testgit::SourceRepo::with_files(&[
        ("big.txt", &large),
        ("bin/tool.dat", b"needle\0binary\n"),
        ("latin1.txt", b"needle caf\xe9\n"),
        ("ok.txt", b"a needle here\n"),
    ]);
    let commit = repo.head();
    let (_tmp, dir) = index_dir();
    let config = IndexConfig {
        max_file_bytes: 1000,
        ..IndexConfig::default()
    };
    let indexes = Indexes::open(dir, config).unwrap();
    let stats = build_at(&indexes, "o/r", repo.path(), &commit);
    assert_eq!(stats.path_only, 3);
    assert_eq!(stats.documents, 4);
    assert_eq!(stats.read, 3, "the large file is never read");
    let hits = line_hits(&indexes, &request("o/r", "needle", false, true));
    assert_eq!(hits, BTreeSet::from([("ok.txt".to_owned(), 1)]));
    for (name, why) in [
        ("big.txt", PathOnly::TooLarge),
        ("tool.dat", PathOnly::Binary),
        ("latin1", PathOnly::NotUtf8),
    ] {
        let hits = all_hits(&indexes, &request("o/r", name, false, true));
        assert_eq!(hits.len(), 1, "{name}");
        assert!(
            matches!(&hits[0].2, Hit::FileName { path, path_only: Some(w) }
                     if path.contains(name) && *w == why),
            "{name}: {:?}",
            hits[0].2
        );
    }
}

/// A real Git source that blocks reading one path until released (to hold a build mid-way).
struct BlockingSource {
    inner: GitSource,
    block_path: String,
    started: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Source for BlockingSource {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        self.inner.entries()
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        if entry.path == self.block_path {
            if let Some(started) = self.started.lock().unwrap().take() {
                started.send(()).unwrap();
            }
            self.release
                .lock()
                .unwrap()
                .recv()
                .map_err(|e| e.to_string())?;
        }
        self.inner.read(entry)
    }
}

#[test]
fn s3_search_during_a_build_answers_from_the_previous_generation_without_waiting() {
    let repo = testgit::SourceRepo::with_files(&[("a.txt", b"needle one\n"), ("b.txt", b"x\n")]);
    let first = repo.head();
    let (_tmp, dir) = index_dir();
    let indexes = Arc::new(Indexes::open(dir, IndexConfig::default()).unwrap());
    build_at(&indexes, "o/r", repo.path(), &first);
    let second = repo.commit(
        &[("a.txt", b"other\nneedle two\n"), ("b.txt", b"y\n")],
        "two",
    );
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let source = BlockingSource {
        inner: GitSource::new(repo.path(), &second),
        block_path: "b.txt".into(),
        started: Mutex::new(Some(started_tx)),
        release: Mutex::new(release_rx),
    };
    let builder = {
        let indexes = indexes.clone();
        let second = second.clone();
        std::thread::spawn(move || indexes.build("o/r", &second, &source, &mut |_| {}))
    };
    started_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("build started");
    let t = Instant::now();
    let results = indexes
        .search(&request("o/r", "needle", false, true))
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "search waited for the build"
    );
    assert_eq!(results.repos[0].commit, first);
    assert_eq!(
        results.repos[0].hits,
        vec![Hit::Line {
            path: "a.txt".into(),
            line: 1,
            snippet: "needle one".into(),
            definition: false,
            marks: vec![0..6],
        }]
    );
    assert_eq!(indexes.current("o/r").unwrap().commit, first);
    release_tx.send(()).unwrap();
    let stats = builder.join().unwrap().unwrap();
    assert!(!stats.skipped_same);
    let results = indexes
        .search(&request("o/r", "needle", false, true))
        .unwrap();
    assert_eq!(results.repos[0].commit, second);
    assert_eq!(
        results.repos[0].hits,
        vec![Hit::Line {
            path: "a.txt".into(),
            line: 2,
            snippet: "needle two".into(),
            definition: false,
            marks: vec![0..6],
        }]
    );
}

#[test]
fn s3_concurrent_searches_during_reindexing_never_error_nor_mix_generations() {
    let repo = testgit::SourceRepo::new();
    let mut commits = Vec::new();
    let mut truth: HashMap<String, BTreeSet<(String, u64, String)>> = HashMap::new();
    for round in 0..3u64 {
        let mut files = Vec::new();
        for f in 0..20u64 {
            let mut text = String::new();
            for l in 0..(5 + (f + round) % 7) {
                if (l + f + round) % 3 == 0 {
                    text.push_str(&format!("needle r{round} f{f} l{l}\n"));
                } else {
                    text.push_str("filler\n");
                }
            }
            files.push((format!("d{}/f{f}.txt", f % 3), text));
        }
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_bytes()))
            .collect();
        let commit = repo.commit(&refs, "round");
        let set = files
            .iter()
            .flat_map(|(path, text)| {
                text.lines()
                    .enumerate()
                    .filter(|(_, line)| line.contains("needle"))
                    .map(|(i, line)| (path.clone(), i as u64 + 1, line.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        truth.insert(commit.clone(), set);
        commits.push(commit);
    }
    let sources: Vec<GitSource> = commits
        .iter()
        .map(|c| GitSource::new(repo.path(), c))
        .collect();
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    indexes
        .build("o/r", &commits[0], &sources[0], &mut |_| {})
        .unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let searchers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut searches = 0;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) || searches < 5 {
                        let mut req = request("o/r", "needle", false, true);
                        req.limit = 7;
                        req.count = true;
                        let results = indexes.search(&req).expect("search never errors");
                        let repo_hits = &results.repos[0];
                        let expected = &truth[&repo_hits.commit];
                        assert_eq!(
                            results.stats.total_hits as usize,
                            expected.len(),
                            "one generation"
                        );
                        for hit in &repo_hits.hits {
                            let Hit::Line {
                                path,
                                line,
                                snippet,
                                ..
                            } = hit
                            else {
                                panic!("unexpected {hit:?}");
                            };
                            assert!(
                                expected.contains(&(path.clone(), *line, snippet.clone())),
                                "{path}:{line} {snippet} not in {}",
                                repo_hits.commit
                            );
                        }
                        searches += 1;
                    }
                    searches
                })
            })
            .collect();
        for i in 1..=12 {
            let k = i % 3;
            indexes
                .build("o/r", &commits[k], &sources[k], &mut |_| {})
                .unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        for searcher in searchers {
            assert!(searcher.join().unwrap() >= 5);
        }
    });
    assert_eq!(indexes.stats().search_errors, 0);
}

#[test]
fn s3_invalid_repository_names_are_refused() {
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir, IndexConfig::default()).unwrap();
    let source = common::GitSource {
        entries: Vec::new(),
        blobs: HashMap::new(),
    };
    for name in ["../x", "a//b", ".hidden/x", "o/gen-1", ""] {
        let error = indexes
            .build(name, "0".repeat(40).as_str(), &source, &mut |_| {})
            .unwrap_err();
        assert!(
            matches!(error, SearchError::InvalidRepo { .. }),
            "{name}: {error}"
        );
    }
}

/// A real Git source whose reads fail for one path (a blob gone missing mid-build).
struct FailingSource {
    inner: GitSource,
    fail_path: String,
}

impl Source for FailingSource {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        self.inner.entries()
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        if entry.path == self.fail_path {
            return Err("object unavailable".into());
        }
        self.inner.read(entry)
    }
}

#[test]
fn s3_a_failed_build_keeps_the_previous_generation_and_leaves_no_staging() {
    let (repo, _) = generated_repo(100, 3);
    let first = repo.head();
    let (_tmp, dir) = index_dir();
    let indexes = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    build_at(&indexes, "o/r", repo.path(), &first);
    let second = repo.commit(&[("pkg0/new.rs", b"fresh file\n")], "add");
    let source = FailingSource {
        inner: GitSource::new(repo.path(), &second),
        fail_path: "pkg0/new.rs".into(),
    };
    let error = indexes
        .build("o/r", &second, &source, &mut |_| {})
        .unwrap_err();
    assert!(matches!(error, SearchError::Source { .. }), "{error}");
    assert!(error.to_string().contains("object unavailable"));
    assert_eq!(indexes.current("o/r").unwrap().commit, first);
    assert_eq!(indexes.stats().build_errors, 1);
    let leftovers: Vec<String> = std::fs::read_dir(dir.join("o/r"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".build.lock")
        .collect();
    assert_eq!(leftovers, vec!["gen-1".to_owned()]);
    // Searching still works on the previous generation.
    let results = indexes
        .search(&request("o/r", "zyxwvutsrq_rare", false, true))
        .unwrap();
    assert_eq!(results.stats.total_hits, 1);
}

/// S-3 with several processes on one index directory (every `csg mcp` of a user shares the
/// data directory): builds take the repository's lock file and adopt what another process
/// published, so generation numbers never collide and nothing is rebuilt twice; a staging
/// directory of a build in progress elsewhere survives another process's open.
#[test]
fn s3_two_processes_share_an_index_directory() {
    let repo = testgit::SourceRepo::with_files(&[("a.txt", b"alpha shared\n")]);
    let first = repo.head();
    let (_tmp, dir) = index_dir();
    let one = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    let two = Indexes::open(dir.clone(), IndexConfig::default()).unwrap();
    let built = build_at(&one, "p/x", repo.path(), &first);
    assert_eq!(built.generation, 1);
    let adopted = build_at(&two, "p/x", repo.path(), &first);
    assert!(
        adopted.skipped_same,
        "the other process's generation was adopted"
    );
    assert_eq!(adopted.generation, 1);

    let second = repo.commit(&[("a.txt", b"beta shared\n")], "second");
    let by_two = build_at(&two, "p/x", repo.path(), &second);
    assert_eq!(by_two.generation, 2, "numbers continue across processes");
    let by_one = build_at(&one, "p/x", repo.path(), &second);
    assert!(by_one.skipped_same);
    for indexes in [&one, &two] {
        assert_eq!(
            line_hits(indexes, &request("p/x", "beta", false, false)),
            BTreeSet::from([("a.txt".to_string(), 1)])
        );
    }

    // A build in progress elsewhere (its lock held, its staging directory present) is left
    // alone by a process that opens the directory meanwhile.
    let repo_dir = dir.join("p/x");
    let staging = repo_dir.join("staging-9-4242");
    std::fs::create_dir_all(&staging).unwrap();
    let lock = std::fs::File::open(repo_dir.join(".build.lock")).unwrap();
    lock.lock().unwrap();
    drop(Indexes::open(dir.clone(), IndexConfig::default()).unwrap());
    assert!(
        staging.exists(),
        "a live build's staging directory survives"
    );
    lock.unlock().unwrap();
    drop(Indexes::open(dir.clone(), IndexConfig::default()).unwrap());
    assert!(!staging.exists(), "an abandoned staging directory is swept");
}
