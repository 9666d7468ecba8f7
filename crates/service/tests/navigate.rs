//! `outline`, `definitions` and `references` through the service (issue 12): symbols from
//! the index at the indexed head and parsed at any other commit, the registered scope, the
//! same access answers as `read`, revisions other than the indexed head refused with the
//! reason, and paging.

use service::{
    CallContext, Caller, ErrorKind, OutlineRequest, ReferencesRequest, Service, ServiceConfig,
    SymbolQuery,
};
use testgit::SourceRepo;

const REPO: &str = "acme/nav";
const PRIVATE: &str = "acme/private";
const LIB_V1: &[u8] = b"pub struct Engine;\n\nimpl Engine {\n    pub fn start(&self) {}\n}\n\npub fn start() {\n    Engine.start();\n}\n";
const LIB_V2: &[u8] = b"// v2\npub struct Engine;\n\nimpl Engine {\n    pub fn start(&self) {}\n    pub fn stop(&self) {}\n}\n";

fn ctx() -> CallContext {
    CallContext::default()
}

fn outline_request(path: &str, revision: Option<&str>) -> OutlineRequest {
    OutlineRequest {
        repo: REPO.into(),
        revision: revision.map(str::to_owned),
        path: path.into(),
        cursor: None,
    }
}

fn names(answer: &service::OutlineAnswer) -> Vec<(String, &'static str, u32, u32)> {
    answer
        .symbols
        .iter()
        .map(|e| {
            (
                e.symbol.name.clone(),
                e.symbol.kind,
                e.symbol.start_line,
                e.symbol.end_line,
            )
        })
        .collect()
}

async fn indexed() -> (SourceRepo, Service, String) {
    let source = SourceRepo::with_files(&[
        ("src/lib.rs", LIB_V1),
        ("tools/run.py", b"def start():\n    return 1\n\nstart()\n"),
        ("README.md", b"Call start to start.\n"),
    ]);
    let first = source.head();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.unwrap();
    (source, service, first)
}

#[tokio::test]
async fn outline_from_the_index_and_parsed_at_another_commit() {
    let (source, service, first) = indexed().await;
    let at_head = service
        .outline(&ctx(), outline_request("src/lib.rs", None))
        .await
        .unwrap();
    assert_eq!(at_head.commit, first);
    assert_eq!(at_head.source, "index");
    assert_eq!(at_head.lang, Some("rust"));
    assert_eq!(
        names(&at_head),
        [
            ("Engine".to_owned(), "class", 1, 1),
            ("Engine".to_owned(), "impl", 3, 5),
            ("start".to_owned(), "method", 4, 4),
            ("start".to_owned(), "function", 7, 9),
        ]
    );
    assert_eq!(at_head.symbols[2].symbol.parent, Some(1));
    let depths: Vec<u32> = at_head.symbols.iter().map(|e| e.depth).collect();
    assert_eq!(depths, [0, 0, 1, 0]);

    // A newer commit, not indexed: parsed for the call, pinned to its SHA.
    let second = source.commit(&[("src/lib.rs", LIB_V2)], "v2");
    service.sync(REPO.into()).await.unwrap();
    let parsed = service
        .outline(&ctx(), outline_request("src/lib.rs", Some(&second)))
        .await
        .unwrap();
    assert_eq!(parsed.commit, second);
    assert_eq!(parsed.source, "parsed");
    assert_eq!(
        names(&parsed),
        [
            ("Engine".to_owned(), "class", 2, 2),
            ("Engine".to_owned(), "impl", 4, 7),
            ("start".to_owned(), "method", 5, 5),
            ("stop".to_owned(), "method", 6, 6),
        ]
    );
    // The old commit stays answerable from the index by its SHA.
    let old = service
        .outline(&ctx(), outline_request("src/lib.rs", Some(&first)))
        .await
        .unwrap();
    assert_eq!(old.source, "index");

    // A file without a grammar has an empty outline; a missing file is an error as in read.
    let readme = service
        .outline(&ctx(), outline_request("README.md", None))
        .await
        .unwrap();
    assert!(readme.symbols.is_empty() && readme.lang.is_none());
    let missing = service
        .outline(&ctx(), outline_request("src/nothing.rs", None))
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound);
    let bad_cursor = service
        .outline(
            &ctx(),
            OutlineRequest {
                cursor: Some(format!("{second}.0")),
                ..outline_request("src/lib.rs", Some(&first))
            },
        )
        .await
        .unwrap_err();
    assert!(
        bad_cursor.message.contains("another commit"),
        "{}",
        bad_cursor.message
    );
}

#[tokio::test]
async fn definitions_and_references_answer_for_the_indexed_head() {
    let (source, service, first) = indexed().await;
    let found = service
        .definitions(
            &ctx(),
            SymbolQuery {
                symbol: "start".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap();
    let rows: Vec<_> = found
        .definitions
        .iter()
        .map(|d| {
            (
                d.path.as_str(),
                d.symbol.line,
                d.symbol.kind,
                d.commit.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("src/lib.rs", 4, "method", first.as_str()),
            ("src/lib.rs", 7, "function", first.as_str()),
            ("tools/run.py", 1, "function", first.as_str()),
        ]
    );
    assert_eq!(found.definitions[0].parent_name.as_deref(), Some("Engine"));
    assert_eq!(found.searched, [(REPO.to_owned(), first.clone())]);

    let mut request = ReferencesRequest {
        query: SymbolQuery {
            repo: Some(REPO.into()),
            symbol: "start".into(),
            limit: Some(3),
            ..SymbolQuery::default()
        },
        cursor: None,
    };
    let mut all = Vec::new();
    loop {
        let page = service.references(&ctx(), request.clone()).await.unwrap();
        for repo in &page.repos {
            assert_eq!(repo.commit, first);
            for r in &repo.references {
                all.push((r.path.clone(), r.line, r.definition));
            }
        }
        match page.next_cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => break,
        }
    }
    let expected: Vec<(String, u64, bool)> = [
        ("src/lib.rs", 4, true),
        ("src/lib.rs", 7, true),
        ("tools/run.py", 1, true),
        ("README.md", 1, false),
        ("src/lib.rs", 8, false),
        ("tools/run.py", 4, false),
    ]
    .into_iter()
    .map(|(p, l, d)| (p.to_owned(), l, d))
    .collect();
    assert_eq!(all, expected);

    // A revision other than the indexed head is refused with both SHAs named.
    let second = source.commit(&[("src/lib.rs", LIB_V2)], "v2");
    service.sync(REPO.into()).await.unwrap();
    let error = service
        .definitions(
            &ctx(),
            SymbolQuery {
                repo: Some(REPO.into()),
                revision: Some("main".into()),
                symbol: "start".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(
        error.message.contains(&first) && error.message.contains(&second),
        "{}",
        error.message
    );
    // The indexed head by SHA is fine; revision without repo is not.
    service
        .definitions(
            &ctx(),
            SymbolQuery {
                repo: Some(REPO.into()),
                revision: Some(first.clone()),
                symbol: "start".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap();
    let error = service
        .references(
            &ctx(),
            ReferencesRequest {
                query: SymbolQuery {
                    revision: Some(first.clone()),
                    symbol: "start".into(),
                    ..SymbolQuery::default()
                },
                cursor: None,
            },
        )
        .await
        .unwrap_err();
    assert!(
        error.message.contains("revision needs repo"),
        "{}",
        error.message
    );
    for bad in ["", "two words"] {
        let error = service
            .definitions(
                &ctx(),
                SymbolQuery {
                    symbol: bad.into(),
                    ..SymbolQuery::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidArgument, "{bad:?}");
        assert!(
            error.message.contains("invalid symbol"),
            "{}",
            error.message
        );
    }
    // each call is counted under its operation, failures as errors.
    let stats = service.stats();
    assert_eq!((stats.definitions.calls, stats.definitions.errors), (5, 3));
    assert_eq!(stats.references.errors, 1);
    assert!(stats.references.calls >= 3);
}

#[tokio::test]
async fn navigation_keeps_to_the_scope_and_to_access() {
    let source = SourceRepo::with_files(&[
        ("svc/a/main.go", b"package a\n\nfunc Serve() {}\n"),
        ("svc/b/main.go", b"package b\n\nfunc Serve() {}\n"),
    ]);
    let store = source.store(REPO, "svc/a");
    let service = Service::new(store, ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.unwrap();
    let found = service
        .definitions(
            &ctx(),
            SymbolQuery {
                symbol: "Serve".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap();
    let paths: Vec<&str> = found.definitions.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["svc/a/main.go"]);
    let outside = service
        .outline(&ctx(), outline_request("svc/b/main.go", None))
        .await
        .unwrap_err();
    let read_outside = service
        .read(
            &ctx(),
            service::ReadRequest {
                repo: REPO.into(),
                revision: None,
                path: "svc/b/main.go".into(),
                start_line: None,
                end_line: None,
                plugins: Some(Vec::new()),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(outside.kind, read_outside.kind);
    assert_eq!(outside.message, read_outside.message);

    // a private repository is unknown to an anonymous caller, for all three tools.
    let store = service_store_private(&source);
    let service = Service::new(store, ServiceConfig::default());
    service.index(PRIVATE.into(), |_| {}).await.unwrap();
    let anonymous = CallContext {
        caller: Caller::Anonymous,
        ..CallContext::default()
    };
    let error = service
        .outline(
            &anonymous,
            OutlineRequest {
                repo: PRIVATE.into(),
                ..outline_request("svc/a/main.go", None)
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::NotFound);
    let error = service
        .definitions(
            &anonymous,
            SymbolQuery {
                repo: Some(PRIVATE.into()),
                symbol: "Serve".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::NotFound);
    let everything = service
        .references(
            &anonymous,
            ReferencesRequest {
                query: SymbolQuery {
                    symbol: "Serve".into(),
                    ..SymbolQuery::default()
                },
                cursor: None,
            },
        )
        .await
        .unwrap();
    assert!(
        everything.repos.iter().all(|r| r.repo != PRIVATE),
        "{everything:?}"
    );
}

fn service_store_private(source: &SourceRepo) -> gitstore::GitStore {
    let store = source.store(PRIVATE, "");
    store
        .set_private(&gitstore::RepoName::parse(PRIVATE).unwrap(), true)
        .unwrap();
    store
}

/// G-5, G-8: a commit that left retention is never answered: `outline` refuses it as `read`
/// does, and `definitions`/`references` report an index whose commit left retention as not
/// indexed until the repository is indexed again.
#[tokio::test]
async fn navigation_answers_only_retained_commits() {
    let source = SourceRepo::with_files(&[("base.md", b"base\n")]);
    source.commit(
        &[("lib.py", b"def kept():\n    pass\n")],
        "the indexed head",
    );
    let old = source.head();
    let clock = gitstore::ManualClock::new(std::time::SystemTime::now());
    let store = source.store_with_clock(REPO, "", std::sync::Arc::new(clock.clone()));
    let service = Service::new(store, ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.unwrap();

    // A force-push leaves the indexed head unreachable; the window then passes.
    source.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let new = source.commit(&[("lib.py", b"def rewritten():\n    pass\n")], "rewritten");
    service.sync(REPO.into()).await.unwrap();
    clock.advance(gitstore::DEFAULT_RETENTION + std::time::Duration::from_secs(86_400));

    let outline = service
        .outline(&ctx(), outline_request("lib.py", Some(&old)))
        .await
        .unwrap_err();
    let read = service
        .read(
            &ctx(),
            service::ReadRequest {
                repo: REPO.into(),
                revision: Some(old.clone()),
                path: "lib.py".into(),
                start_line: None,
                end_line: None,
                plugins: Some(Vec::new()),
            },
        )
        .await
        .unwrap_err();
    assert_eq!((outline.kind, &outline.message), (read.kind, &read.message));
    let stale = service
        .definitions(
            &ctx(),
            SymbolQuery {
                symbol: "kept".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap();
    assert!(stale.definitions.is_empty());
    assert_eq!(stale.not_indexed, [REPO]);

    service.index(REPO.into(), |_| {}).await.unwrap();
    let fresh = service
        .definitions(
            &ctx(),
            SymbolQuery {
                symbol: "rewritten".into(),
                ..SymbolQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(fresh.definitions[0].commit, new);
}
