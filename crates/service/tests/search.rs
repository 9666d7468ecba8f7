//! `search` and indexing through the service, over real Git repositories made in temp dirs
//! (S-1..S-3, S-5): scope, readable SHAs, incremental re-indexing, index state in
//! `discovery`/`availability`, and errors.

use service::{
    AvailabilityRequest, CallContext, ErrorKind, ReadRequest, SearchAnswer, SearchRequest, Service,
    ServiceConfig,
};
use testgit::SourceRepo;

fn ctx() -> CallContext {
    CallContext::default()
}

fn query(text: &str) -> SearchRequest {
    SearchRequest {
        query: text.into(),
        limit: Some(1000),
        ..SearchRequest::default()
    }
}

/// (path, line) of every hit, in answer order; file-name hits have line 0.
fn hits(answer: &SearchAnswer) -> Vec<(String, u64)> {
    answer
        .repos
        .iter()
        .flat_map(|r| r.hits.iter())
        .map(|h| (h.path.clone(), h.line.unwrap_or(0)))
        .collect()
}

/// S-3, S-5: the index is built from the head; `discovery` and `availability` say so; hits
/// name the full SHA and `read` at that SHA shows the same line.
#[tokio::test]
async fn s1_s3_index_then_search_then_read_the_hit() {
    let source = SourceRepo::with_files(&[
        (
            "src/lib.rs",
            b"pub fn frobnicate() {}\n// frobnicate later\n",
        ),
        ("README.md", b"# Frobnicate\nNothing here.\n"),
    ]);
    let head = source.head();
    let service = Service::new(source.store("test/repo", ""), ServiceConfig::default());

    let before = service.search(&ctx(), query("frobnicate")).await.unwrap();
    assert_eq!(before.not_indexed, ["test/repo"]);
    assert!(before.repos.is_empty());
    assert!(!service.discovery(&ctx()).await.unwrap()[0].indexed);

    let built = service.index("test/repo".into(), |_| {}).await.unwrap();
    assert_eq!((built.documents, built.read, built.reused), (2, 2, 0));
    assert!(service.discovery(&ctx()).await.unwrap()[0].indexed);
    let availability = service
        .availability(
            &ctx(),
            AvailabilityRequest {
                repo: "test/repo".into(),
                revision: None,
                include_plugins: false,
            },
        )
        .await
        .unwrap();
    assert!(availability.indexed);

    let answer = service.search(&ctx(), query("frobnicate")).await.unwrap();
    assert_eq!(answer.repos.len(), 1);
    assert_eq!(answer.repos[0].commit, head, "the full SHA");
    assert_eq!(
        hits(&answer),
        [
            ("src/lib.rs".to_string(), 1),
            ("README.md".to_string(), 1),
            ("src/lib.rs".to_string(), 2),
        ],
        "definition first, then the rest in path order (case-insensitive by default)"
    );
    let line = service
        .read(
            &ctx(),
            ReadRequest {
                repo: "test/repo".into(),
                revision: Some(answer.repos[0].commit.clone()),
                path: "src/lib.rs".into(),
                start_line: Some(1),
                end_line: Some(1),
                plugins: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        line.outcome.unwrap().content,
        "pub fn frobnicate() {}\n",
        "the hit is readable at its SHA"
    );
    assert!(answer.stats.candidate_files >= 2);
}

/// S-3: a new commit re-indexes incrementally (unchanged blobs reused), an unchanged head is
/// a no-op, and hits move to the new SHA.
#[tokio::test]
async fn s3_reindex_after_a_commit_reuses_unchanged_documents() {
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i}.txt"), format!("file {i}\n").into_bytes()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let source = SourceRepo::with_files(&refs);
    let service = Service::new(source.store("test/repo", ""), ServiceConfig::default());
    service.index("test/repo".into(), |_| {}).await.unwrap();
    let same = service.index("test/repo".into(), |_| {}).await.unwrap();
    assert!(same.skipped_same);

    let second = source.commit(&[("f3.txt", b"changed zanzibar\n")], "one file");
    service.sync("test/repo".into()).await.unwrap();
    let mut progress = Vec::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let built = service
        .index("test/repo".into(), move |p| {
            let _ = tx.send((p.done, p.total));
        })
        .await
        .unwrap();
    progress.extend(rx.try_iter());
    assert_eq!((built.read, built.reused), (1, 19));
    assert_eq!(
        progress.last(),
        Some(&(20, 20)),
        "progress reaches the total"
    );
    let answer = service.search(&ctx(), query("zanzibar")).await.unwrap();
    assert_eq!(answer.repos[0].commit, second);
    assert_eq!(hits(&answer), [("f3.txt".to_string(), 1)]);
    let stats = service.index_stats().unwrap();
    assert_eq!(stats.documents_reused, 19);
}

/// S-1 with a monorepo registered path: nothing outside the scope is indexed or found.
#[tokio::test]
async fn s1_registered_path_bounds_the_hits() {
    let source = SourceRepo::with_files(&[
        ("packages/docs/a.md", b"needle inside\n"),
        ("packages/app/b.md", b"needle outside\n"),
        ("needle.txt", b"needle at the root\n"),
    ]);
    let service = Service::new(
        source.store("test/repo", "packages/docs"),
        ServiceConfig::default(),
    );
    service.index("test/repo".into(), |_| {}).await.unwrap();
    let answer = service.search(&ctx(), query("needle")).await.unwrap();
    assert_eq!(hits(&answer), [("packages/docs/a.md".to_string(), 1)]);
}

/// S-1: filters, regex and case sensitivity pass through; bad input is a clear
/// invalid-argument error; an unknown repository is not-found.
#[tokio::test]
async fn s1_filters_and_errors() {
    let source = SourceRepo::with_files(&[
        ("docs/guide.md", b"Alpha beta\nalpha gamma\n"),
        ("src/alpha.rs", b"fn alpha() {}\n"),
    ]);
    let service = Service::new(source.store("test/repo", ""), ServiceConfig::default());
    service.index("test/repo".into(), |_| {}).await.unwrap();

    let only_docs = SearchRequest {
        path: Some("docs/**/*.md".into()),
        case_sensitive: true,
        ..query("Alpha")
    };
    let answer = service.search(&ctx(), only_docs).await.unwrap();
    assert_eq!(hits(&answer), [("docs/guide.md".to_string(), 1)]);

    let regex = SearchRequest {
        regex: true,
        lang: Some("rust".into()),
        repo: Some("test/repo".into()),
        ..query(r"fn \w+\(\)")
    };
    let answer = service.search(&ctx(), regex).await.unwrap();
    assert_eq!(hits(&answer), [("src/alpha.rs".to_string(), 1)]);

    let paged = SearchRequest {
        limit: Some(1),
        ..query("alpha")
    };
    let first = service.search(&ctx(), paged.clone()).await.unwrap();
    let cursor = first.next_cursor.clone().expect("more pages");
    let second = service
        .search(
            &ctx(),
            SearchRequest {
                cursor: Some(cursor),
                ..paged
            },
        )
        .await
        .unwrap();
    assert_ne!(hits(&first), hits(&second));

    for (bad, kind) in [
        (query(""), ErrorKind::InvalidArgument),
        (
            SearchRequest {
                regex: true,
                ..query("(unclosed")
            },
            ErrorKind::InvalidArgument,
        ),
        (
            SearchRequest {
                repo: Some("nobody/here".into()),
                ..query("alpha")
            },
            ErrorKind::NotFound,
        ),
    ] {
        let error = service.search(&ctx(), bad.clone()).await.unwrap_err();
        assert_eq!(error.kind, kind, "{bad:?}: {error}");
    }
}

/// S-1 with retention (G-5, G-8): a hit always names a readable SHA. An index whose commit left
/// retention (its repository not re-indexed since) is reported as not indexed, not answered
/// with hits nobody can read; re-indexing brings the repository back.
#[tokio::test]
async fn s1_hits_always_name_a_readable_sha() {
    let source = SourceRepo::with_files(&[("base.md", b"base\n")]);
    source.commit(&[("a.md", b"needle one\n")], "the indexed head");
    let clock = gitstore::ManualClock::new(std::time::SystemTime::now());
    let store = source.store_with_clock("test/repo", "", std::sync::Arc::new(clock.clone()));
    let service = Service::new(store, ServiceConfig::default());
    service.index("test/repo".into(), |_| {}).await.unwrap();
    let first = service.search(&ctx(), query("needle")).await.unwrap();
    assert_eq!(first.repos[0].commit, source.head());

    // A force-push: the indexed head becomes unreachable, readable only within the window.
    source.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let second = source.commit(&[("a.md", b"needle two\n")], "rewritten head");
    service.sync("test/repo".into()).await.unwrap();
    clock.advance(gitstore::DEFAULT_RETENTION + std::time::Duration::from_secs(86_400));
    let stale = service.search(&ctx(), query("needle")).await.unwrap();
    assert!(stale.repos.is_empty(), "{stale:?}");
    assert_eq!(stale.not_indexed, ["test/repo"]);

    service.index("test/repo".into(), |_| {}).await.unwrap();
    let fresh = service.search(&ctx(), query("needle")).await.unwrap();
    assert_eq!(fresh.repos[0].commit, second);
    assert_eq!(hits(&fresh), [("a.md".to_string(), 1)]);
}

/// S-3: the index of a repository that is no longer registered is dropped by maintenance.
#[tokio::test]
async fn s3_unregistered_repositories_lose_their_index() {
    let source = SourceRepo::with_files(&[("a.md", b"needle\n")]);
    let service = Service::new(source.store("test/repo", ""), ServiceConfig::default());
    service.index("test/repo".into(), |_| {}).await.unwrap();
    service.index_history("test/repo".into()).await.unwrap();
    assert!(source.data_dir().join("index/test/repo/history").exists());
    assert!(service.prune_indexes().await.unwrap().is_empty());
    service.unregister("test/repo".into()).await.unwrap();
    assert_eq!(service.prune_indexes().await.unwrap(), ["test/repo"]);
    assert!(service.index_info("test/repo").is_none());
    assert!(!source.data_dir().join("index/test/repo").exists());
}

/// A-3, G-3: `prepare sync` fetches, re-indexes the new head incrementally and reports it;
/// `reindex` rebuilds from scratch; pin needs a revision.
#[tokio::test]
async fn a3_prepare_sync_and_reindex() {
    use service::{PrepareAction, PrepareRequest};
    let source = SourceRepo::with_files(&[("a.md", b"one\n"), ("b.md", b"two\n")]);
    let service = Service::new(source.store("test/repo", ""), ServiceConfig::default());
    service.index("test/repo".into(), |_| {}).await.unwrap();
    let head = source.commit(&[("a.md", b"one changed\n")], "change");
    let request = |action| PrepareRequest {
        repo: "test/repo".into(),
        action,
        revision: None,
    };
    let synced = service
        .prepare(&ctx(), request(PrepareAction::Sync), |_| {})
        .await
        .unwrap();
    assert_eq!(synced.commit.as_deref(), Some(head.as_str()));
    let index = synced.index.unwrap();
    assert_eq!((index.read, index.reused, index.unchanged), (1, 1, false));
    assert!(service.discovery(&ctx()).await.unwrap()[0].indexed);

    let rebuilt = service
        .prepare(&ctx(), request(PrepareAction::Reindex), |_| {})
        .await
        .unwrap();
    assert_eq!(rebuilt.index.unwrap().read, 2, "from scratch");

    let error = service
        .prepare(&ctx(), request(PrepareAction::Pin), |_| {})
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
}
