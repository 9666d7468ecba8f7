//! `search` with `revision` (S-8, issue 33 points 4 and 5) through the service, over real Git
//! repositories made in temp dirs with branches, a tag, a rename, a deleted file, a binary
//! file and an executable: every page to the end equals `git grep -n` at that commit (as a
//! set), the answer names the full SHA, and a revision `read` refuses is refused with
//! `read`'s error.

use service::{
    CallContext, ErrorKind, ReadRequest, SearchAnswer, SearchRequest, Service, ServiceConfig,
};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const REPO: &str = "test/repo";

fn ctx() -> CallContext {
    CallContext::default()
}

/// Runs `test` under a timeout, so a hang fails instead of holding the suite.
async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("the test finished within 120 s");
}

fn at(revision: &str, query: &str, regex: bool) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        repo: Some(REPO.into()),
        revision: Some(revision.into()),
        regex,
        case_sensitive: true,
        limit: Some(3),
        ..SearchRequest::default()
    }
}

/// Every line hit of every page, following `next_cursor` to the end; every page names
/// `commit`.
async fn all_pages(
    service: &Service,
    mut request: SearchRequest,
    commit: &str,
) -> BTreeSet<(String, u64, String)> {
    let mut hits = BTreeSet::new();
    for _ in 0..1000 {
        let answer: SearchAnswer = service.search(&ctx(), request.clone()).await.unwrap();
        for group in &answer.repos {
            assert_eq!(
                group.commit, commit,
                "the answer names the full SHA searched"
            );
            for hit in &group.hits {
                if let (Some(line), Some(snippet)) = (hit.line, &hit.snippet) {
                    hits.insert((hit.path.clone(), line, snippet.trim_end().to_string()));
                }
            }
        }
        match answer.next_cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => return hits,
        }
    }
    panic!("more than 1000 pages");
}

/// `git grep -n -I` (text files only: binary files are indexed by path) at `commit`.
fn git_grep(
    source: &SourceRepo,
    commit: &str,
    pattern: &str,
    regex: bool,
) -> BTreeSet<(String, u64, String)> {
    let kind = if regex { "-E" } else { "-F" };
    let out = testgit::git_raw(
        source.path(),
        &["grep", "-n", "-I", kind, "-e", pattern, commit],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .map(|line| {
            let rest = line
                .strip_prefix(&format!("{commit}:"))
                .expect("commit prefix");
            let mut parts = rest.splitn(3, ':');
            let path = parts.next().unwrap().to_string();
            let number = parts.next().unwrap().parse().unwrap();
            (path, number, parts.next().unwrap().trim_end().to_string())
        })
        .collect()
}

/// A repository whose default branch moved on after a tag and a feature branch forked:
/// answers the source, the service (indexed at main's head) and (tag, feature head, main head).
async fn fixture() -> (SourceRepo, Service, String, String, String) {
    let source = SourceRepo::with_files(&[
        ("a.md", b"needle in a\nplain\n"),
        ("src/lib.rs", b"fn needle() {}\n// needle 1\n"),
        ("docs/old-name.md", b"a needle renamed\n"),
        ("gone.md", b"needle gone soon\n"),
        ("image.bin", b"\x00needle binary\x00"),
        ("tool.sh", b"#!/bin/sh\necho needle\n"),
    ]);
    source.git(&["tag", "v1"]);
    let tag = source.head();
    source.git(&["checkout", "-q", "-b", "feature"]);
    source.git(&["mv", "docs/old-name.md", "docs/new-name.md"]);
    source.git(&["rm", "-q", "gone.md"]);
    source.commit(
        &[
            ("src/lib.rs", b"fn needle() {}\n// needle 2\n// needle 3\n"),
            ("src/new.rs", b"needle new\nneeeedle 42\n"),
            ("image.bin", b"\x00needle binary, changed\x00"),
            ("notes.txt", b"no match here\n"),
        ],
        "feature work",
    );
    let feature = source.head();
    source.git(&["checkout", "-q", "main"]);
    let main = source.commit(
        &[
            ("a.md", b"needle in a, changed on main\n"),
            ("main.md", b"needle main only\n"),
        ],
        "main moves on",
    );
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.unwrap();
    (source, service, tag, feature, main)
}

/// S-8: at a branch, a tag, a full and a short SHA, a literal and a regex search paged to
/// the end equal `git grep -n` at that commit, and every answer names the full SHA; at the
/// indexed head too. The same call again is answered from the kept overlay.
#[tokio::test]
async fn s8_search_at_revisions_equals_git_grep() {
    bounded(async {
        let (source, service, tag, feature, main) = fixture().await;
        let cases = [
            ("feature", feature.clone()),
            ("v1", tag.clone()),
            (tag.as_str(), tag.clone()),
            (&feature[..10], feature.clone()),
            ("main", main.clone()),
        ];
        for (revision, commit) in &cases {
            for (query, regex) in [("needle", false), ("ne+dle [0-9]+", true)] {
                let found = all_pages(&service, at(revision, query, regex), commit).await;
                let expected = git_grep(&source, commit, query, regex);
                assert!(!expected.is_empty(), "{revision} {query}");
                assert_eq!(found, expected, "{revision} {query}");
            }
        }
        // The renamed, deleted and binary files, seen through the answers.
        let feature_hits = all_pages(&service, at("feature", "needle", false), &feature).await;
        assert!(feature_hits.iter().any(|(p, _, _)| p == "docs/new-name.md"));
        assert!(
            !feature_hits
                .iter()
                .any(|(p, _, _)| p == "docs/old-name.md" || p == "gone.md" || p == "image.bin")
        );

        // The same call again: no tree diff, no blob read.
        let started = Instant::now();
        let again = service
            .search(&ctx(), at("feature", "needle", false))
            .await
            .unwrap();
        assert_eq!(again.repos[0].commit, feature);
        eprintln!("the same call again: {:?}", started.elapsed());
    })
    .await;
}

/// S-8: a revision `read` refuses — unknown, or out of retention — is refused by `search`
/// with the same kind and message; a repository without an index answers "not indexed".
#[tokio::test]
async fn s8_revision_errors_are_reads() {
    bounded(async {
        let source = SourceRepo::with_files(&[("a.md", b"needle\n")]);
        source.git(&["checkout", "-q", "-b", "gone"]);
        let doomed = source.commit(&[("b.md", b"needle doomed\n")], "doomed");
        source.git(&["checkout", "-q", "main"]);
        let clock = gitstore::ManualClock::new(std::time::SystemTime::now());
        let store = source.store_with_clock(REPO, "", std::sync::Arc::new(clock.clone()));
        let service = Service::new(store, ServiceConfig::default());

        let not_indexed = service
            .search(&ctx(), at("gone", "needle", false))
            .await
            .unwrap();
        assert_eq!(not_indexed.not_indexed, [REPO]);
        assert!(not_indexed.repos.is_empty());
        service.index(REPO.into(), |_| {}).await.unwrap();
        let found = all_pages(&service, at("gone", "needle", false), &doomed).await;
        assert_eq!(found, git_grep(&source, &doomed, "needle", false));

        // The branch is deleted: its head stays readable within the retention window, then not.
        source.git(&["branch", "-q", "-D", "gone"]);
        service.sync(REPO.into()).await.unwrap();
        clock.advance(gitstore::DEFAULT_RETENTION + Duration::from_secs(86_400));
        service.sync(REPO.into()).await.unwrap();

        for revision in [doomed.as_str(), "no-such-branch", "0123456789abcdef"] {
            let read = service
                .read(
                    &ctx(),
                    ReadRequest {
                        repo: REPO.into(),
                        revision: Some(revision.into()),
                        path: "a.md".into(),
                        start_line: None,
                        end_line: None,
                        plugins: None,
                    },
                )
                .await
                .unwrap_err();
            let searched = service
                .search(&ctx(), at(revision, "needle", false))
                .await
                .unwrap_err();
            assert_eq!(
                (searched.kind, &searched.message),
                (read.kind, &read.message),
                "{revision}"
            );
            assert_ne!(searched.kind, ErrorKind::Internal);
        }
    })
    .await;
}

/// S-8, A-4: access is checked before the revision is resolved: a private repository an
/// anonymous caller may not read answers as an unknown one, whatever the revision.
#[tokio::test]
async fn s8_private_repository_answers_as_unknown() {
    bounded(async {
        let (source, service, _tag, _feature, _main) = fixture().await;
        let store = source.store(REPO, "");
        store
            .set_private(&gitstore::RepoName::parse(REPO).unwrap(), true)
            .unwrap();
        let anonymous = CallContext {
            caller: service::Caller::Anonymous,
            ..CallContext::default()
        };
        for revision in ["feature", "no-such-branch"] {
            let error = service
                .search(&anonymous, at(revision, "needle", false))
                .await
                .unwrap_err();
            assert_eq!(error.kind, ErrorKind::NotFound, "{revision}: {error:?}");
            assert!(
                error.message.contains("unknown repository"),
                "{revision}: {}",
                error.message
            );
        }
    })
    .await;
}

/// S-8: an indexed branch (`--index-branch`) is warmed after its index build, and a search
/// at it then equals `git grep` at its head.
#[tokio::test]
async fn s8_indexed_branches_are_warmed() {
    bounded(async {
        let (source, service, _tag, feature, _main) = fixture().await;
        let store = source.store(REPO, "");
        store
            .set_index_branches(&gitstore::RepoName::parse(REPO).unwrap(), &["feat*".into()])
            .unwrap();
        service.warm_index_branches(REPO.into()).await;
        let started = Instant::now();
        let found = all_pages(&service, at("feature", "needle", false), &feature).await;
        eprintln!(
            "first search at the warmed branch, all pages: {:?}",
            started.elapsed()
        );
        assert_eq!(found, git_grep(&source, &feature, "needle", false));
    })
    .await;
}

/// S-8 timing on a real repository (not a timed test; run it by hand, best with
/// `--release`): `CSG_S8_REPO=/path/to/repo cargo test --release -p service --test
/// revision_search -- --ignored --nocapture`. Registers the repository in a temporary data
/// directory, indexes its head, then searches at the commit `CSG_S8_BEHIND` (default 1000)
/// commits behind it, twice, and compares the hits with `git grep -n`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs CSG_S8_REPO, a real repository; prints timings"]
async fn s8_timing_on_a_real_repository() {
    let Ok(repo) = std::env::var("CSG_S8_REPO") else {
        eprintln!("CSG_S8_REPO is not set: nothing to time");
        return;
    };
    let behind: usize = std::env::var("CSG_S8_BEHIND")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let query = std::env::var("CSG_S8_QUERY").unwrap_or_else(|_| "func New".into());
    let data = tempfile::tempdir().unwrap();
    let store = testgit::registered_store(
        data.path().to_path_buf(),
        REPO,
        &repo,
        "",
        std::sync::Arc::new(gitstore::SystemClock),
    );
    let name = gitstore::RepoName::parse(REPO).unwrap();
    let started = Instant::now();
    let head = store.sync(&name).unwrap().head.unwrap().to_string();
    eprintln!("clone: {:?}", started.elapsed());
    let service = Service::new(store, ServiceConfig::default());
    let started = Instant::now();
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    eprintln!(
        "index of {head}: {} files, {:?}",
        built.documents,
        started.elapsed()
    );
    let list = testgit::git(
        std::path::Path::new(&repo),
        &["rev-list", "--max-count", &(behind + 1).to_string(), &head],
    );
    let commit = list.lines().last().unwrap().to_string();
    let changed = testgit::git(
        std::path::Path::new(&repo),
        &["diff", "--name-only", "--no-renames", &commit, &head],
    );
    eprintln!(
        "searching at {commit} ({behind} commits behind; {} paths differ)",
        changed.lines().count()
    );
    let mut request = at(&commit, &query, false);
    request.limit = Some(20);
    for call in ["first call (overlay made)", "same call again", "third call"] {
        let started = Instant::now();
        let answer = service.search(&ctx(), request.clone()).await.unwrap();
        eprintln!(
            "{call}: {:?} ({} hits on the page, cached {})",
            started.elapsed(),
            answer.repos.iter().map(|r| r.hits.len()).sum::<usize>(),
            answer.stats.cached
        );
    }
    let mut other = at(&commit, "context.Context", false);
    other.limit = Some(20);
    let started = Instant::now();
    service.search(&ctx(), other).await.unwrap();
    eprintln!("another query at the same commit: {:?}", started.elapsed());
    let started = Instant::now();
    let mut full = at(&commit, &query, false);
    full.limit = Some(500);
    let found = all_pages(&service, full, &commit).await;
    eprintln!("all pages ({} hits): {:?}", found.len(), started.elapsed());
    let grep = {
        let out = testgit::git_raw(
            std::path::Path::new(&repo),
            &["grep", "-n", "-I", "-F", "-e", &query, &commit],
            None,
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix(&format!("{commit}:"))?;
                let mut parts = rest.splitn(3, ':');
                Some((
                    parts.next()?.to_string(),
                    parts.next()?.parse().ok()?,
                    parts.next()?.trim_end().to_string(),
                ))
            })
            .collect::<BTreeSet<(String, u64, String)>>()
    };
    // Snippets are cut for long lines: compare (path, line).
    let found: BTreeSet<(String, u64)> = found.into_iter().map(|(p, l, _)| (p, l)).collect();
    let grep: BTreeSet<(String, u64)> = grep.into_iter().map(|(p, l, _)| (p, l)).collect();
    let only_found: Vec<_> = found.difference(&grep).take(10).collect();
    let only_grep: Vec<_> = grep.difference(&found).take(10).collect();
    eprintln!(
        "git grep -n at {commit}: {} lines; search: {} lines",
        grep.len(),
        found.len()
    );
    assert!(
        only_found.is_empty() && only_grep.is_empty(),
        "only in search: {only_found:?}; only in git grep: {only_grep:?}"
    );
}
