//! The service frame (issue 30): every operation that names a repository takes `ALIASES`
//! (P-22), the access check, the registry snapshot and lease, and statistics
//! in one place. These tests call every such operation through a real server-plugin
//! host, a real store with a public and a private repository, and a real access store.

mod common;

use pyplugin::{HostConfig, PluginHost};
use serde_json::Value;
use service::{
    AvailabilityRequest, BlameRequest, CallContext, Caller, DiffRequest, ErrorKind, ListRequest,
    LogRequest, OutlineRequest, PrepareAction, PrepareRequest, ReadManyRequest, ReadRequest,
    ReferencesRequest, SearchRequest, Service, ServiceConfig, ServiceError, SymbolQuery,
};
use testgit::SourceRepo;
use testgit::answers::{repos_named, untimed};

const REPO: &str = "test/repo";
const PRIVATE: &str = "test/private";
const UNKNOWN: &str = "test/nothing";
/// `ALIASES` of the plugin file: `kb` names [`REPO`], `vault` names [`PRIVATE`].
const TABLES: &str = "ALIASES = {\"kb\": \"test/repo\", \"vault\": \"test/private\"}\n";

struct Fixture {
    _source: SourceRepo,
    _plugins: tempfile::TempDir,
    service: Service,
    /// Another handle on the access tables, as `csg user` in another process.
    operator: access::AccessStore,
    /// The first commit (the head is `main`).
    first: String,
}

/// `source` registered a second time, private, as [`PRIVATE`], and synced.
fn register_private(store: &gitstore::GitStore, source: &SourceRepo) -> gitstore::RepoName {
    let private = gitstore::RepoName::parse(PRIVATE).expect("name");
    store
        .register(gitstore::Registration {
            name: private.clone(),
            source: source.source(),
            registered_path: gitstore::RepoPath::parse("").expect("path"),
            branch: None,
            private: Some(true),
        })
        .expect("registered");
    store.sync(&private).expect("synced");
    private
}

/// A source of two commits registered twice — public as [`REPO`], private as [`PRIVATE`] —
/// both indexed, and a service running the server plugin [`TABLES`].
async fn fixture() -> Fixture {
    let source = SourceRepo::with_files(&[
        ("src/lib.rs", b"pub fn alpha() -> u32 {\n    1\n}\n"),
        ("docs/guide.md", b"alpha deploy guide\n"),
    ]);
    let first = source.head();
    source.commit(
        &[(
            "src/lib.rs",
            b"pub fn alpha() -> u32 {\n    1\n}\n\npub fn beta() -> u32 {\n    alpha() + 1\n}\n",
        )],
        "beta",
    );
    let store = source.store(REPO, "");
    let private = register_private(&store, &source);
    assert!(store.is_private(&private).expect("registered"));
    let operator = access::AccessStore::open(&store.metadata_path()).expect("access store");

    let plugins = tempfile::tempdir().expect("tempdir");
    std::fs::write(plugins.path().join("tables.py"), TABLES).expect("plugin file");
    let config = HostConfig::new(plugins.path().to_path_buf());
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .expect("host started");
    let service = Service::with_server_plugins(store, ServiceConfig::default(), host);
    for repo in [REPO, PRIVATE] {
        service.index(repo.into(), |_| {}).await.expect("indexed");
    }
    Fixture {
        _source: source,
        _plugins: plugins,
        service,
        operator,
        first,
    }
}

impl Fixture {
    /// A context for a caller who holds a token of `user` (created now, without grants).
    fn user(&self, user: &str, prepare: bool) -> CallContext {
        self.operator.add_user(user, prepare).expect("user");
        let token = self
            .operator
            .create_token(user, None)
            .expect("token")
            .secret;
        let principal = self.service.authenticate(&token).expect("a valid token");
        CallContext {
            caller: Caller::User(principal),
            ..CallContext::default()
        }
    }
}

fn json(answer: impl serde::Serialize) -> Value {
    serde_json::to_value(answer).expect("answers serialise")
}

/// Every operation that names a repository, each called once with `repo` as its
/// repository, on a fresh context of `caller` per call (one call, one context, as the
/// transports do): the name of the call and its answer as JSON, or its error.
async fn every_operation(
    f: &Fixture,
    caller: &CallContext,
    repo: &str,
) -> Vec<(&'static str, Result<Value, ServiceError>)> {
    let s = &f.service;
    let ctx = || CallContext {
        caller: caller.caller.clone(),
        ..CallContext::default()
    };
    let read = || ReadRequest {
        repo: repo.into(),
        ..common::read("src/lib.rs")
    };
    let batch = || ReadManyRequest {
        repo: repo.into(),
        ..common::batch(&["src/lib.rs", "docs/guide.md"])
    };
    let symbol = || SymbolQuery {
        repo: Some(repo.into()),
        symbol: "alpha".into(),
        ..SymbolQuery::default()
    };
    let prepare = |action, revision: Option<&str>| PrepareRequest {
        repo: repo.into(),
        action,
        revision: revision.map(str::to_owned),
    };
    let first = f.first.as_str();
    vec![
        ("read", s.read(&ctx(), read()).await.map(json)),
        (
            "read_enriched",
            s.read_enriched(&ctx(), read()).await.map(json),
        ),
        ("read_many", s.read_many(&ctx(), batch()).await.map(json)),
        (
            "read_many_enriched",
            s.read_many_enriched(&ctx(), batch()).await.map(json),
        ),
        (
            "search",
            s.search(
                &ctx(),
                SearchRequest {
                    query: "alpha".into(),
                    repo: Some(repo.into()),
                    ..SearchRequest::default()
                },
            )
            .await
            .map(json),
        ),
        (
            "definitions",
            s.definitions(&ctx(), symbol()).await.map(json),
        ),
        (
            "references",
            s.references(
                &ctx(),
                ReferencesRequest {
                    query: symbol(),
                    cursor: None,
                },
            )
            .await
            .map(json),
        ),
        (
            "list",
            s.list(
                &ctx(),
                ListRequest {
                    repo: repo.into(),
                    revision: None,
                    path: None,
                    depth: Some(2),
                },
            )
            .await
            .map(json),
        ),
        (
            "resolve",
            s.resolve(&ctx(), repo.into(), "main".into())
                .await
                .map(json),
        ),
        (
            "availability",
            s.availability(
                &ctx(),
                AvailabilityRequest {
                    repo: repo.into(),
                    revision: Some("main".into()),
                    include_plugins: true,
                },
            )
            .await
            .map(json),
        ),
        (
            "log",
            s.log(
                &ctx(),
                LogRequest {
                    repo: repo.into(),
                    ..LogRequest::default()
                },
            )
            .await
            .map(json),
        ),
        (
            "commit",
            s.commit(&ctx(), repo.into(), "main".into()).await.map(json),
        ),
        (
            "diff",
            s.diff(
                &ctx(),
                DiffRequest {
                    repo: repo.into(),
                    base: first.into(),
                    head: "main".into(),
                    ..DiffRequest::default()
                },
            )
            .await
            .map(json),
        ),
        (
            "blame",
            s.blame(
                &ctx(),
                BlameRequest {
                    repo: repo.into(),
                    path: "src/lib.rs".into(),
                    ..BlameRequest::default()
                },
            )
            .await
            .map(json),
        ),
        (
            "outline",
            s.outline(
                &ctx(),
                OutlineRequest {
                    repo: repo.into(),
                    revision: None,
                    path: "src/lib.rs".into(),
                    cursor: None,
                },
            )
            .await
            .map(json),
        ),
        (
            "prepare pin",
            s.prepare(&ctx(), prepare(PrepareAction::Pin, Some(first)), |_| {})
                .await
                .map(json),
        ),
        (
            "prepare unpin",
            s.prepare(&ctx(), prepare(PrepareAction::Unpin, Some(first)), |_| {})
                .await
                .map(json),
        ),
        (
            "prepare reindex",
            s.prepare(&ctx(), prepare(PrepareAction::Reindex, None), |_| {})
                .await
                .map(json),
        ),
        (
            "prepare sync",
            s.prepare(&ctx(), prepare(PrepareAction::Sync, None), |_| {})
                .await
                .map(json),
        ),
    ]
}

/// P-22: every repository-naming operation takes an alias wherever it takes a repository
/// and answers exactly as for the real name, naming the real repository.
#[tokio::test]
async fn p22_every_repository_naming_operation_accepts_an_alias() {
    let f = fixture().await;
    let local = CallContext::default();
    let by_alias = every_operation(&f, &local, "kb").await;
    let by_name = every_operation(&f, &local, REPO).await;
    assert_eq!(by_alias.len(), by_name.len());
    for ((operation, aliased), (_, named)) in by_alias.into_iter().zip(by_name) {
        let aliased = aliased.unwrap_or_else(|e| panic!("{operation} with the alias: {e}"));
        let named = named.unwrap_or_else(|e| panic!("{operation} with the name: {e}"));
        assert_eq!(untimed(aliased.clone()), untimed(named), "{operation}");
        let mut named_repos = Vec::new();
        repos_named(&aliased, &mut named_repos);
        assert!(
            !named_repos.is_empty(),
            "{operation} names its repository: {aliased}"
        );
        assert!(
            named_repos.iter().all(|repo| repo == REPO),
            "{operation} names the real repository: {named_repos:?}"
        );
    }
}

/// for a caller who may not read the private repository (anonymous, or a user
/// without a grant), every repository-naming operation answers exactly as for a repository
/// that does not exist, under its name and under an alias; `availability` says "not
/// visible" for both. `prepare` refuses both alike for lack of the capability (A-3). The
/// local caller, and a user once granted, get answers: the refusals are about access.
#[tokio::test]
async fn a4_every_operation_answers_a_private_repository_like_an_unknown_one() {
    let f = fixture().await;
    let anonymous = CallContext {
        caller: Caller::Anonymous,
        ..CallContext::default()
    };
    let bob = f.user("bob", false);
    for (who, caller) in [("anonymous", &anonymous), ("bob", &bob)] {
        let private = every_operation(&f, caller, PRIVATE).await;
        let aliased = every_operation(&f, caller, "vault").await;
        let unknown = every_operation(&f, caller, UNKNOWN).await;
        for ((operation, private), ((_, aliased), (_, unknown))) in
            private.into_iter().zip(aliased.into_iter().zip(unknown))
        {
            let case = format!("{operation} by {who}");
            match (private, aliased, unknown) {
                (Err(private), Err(aliased), Err(unknown)) => {
                    assert_eq!(private.kind, unknown.kind, "{case}");
                    assert_eq!(
                        private.message,
                        unknown.message.replace(UNKNOWN, PRIVATE),
                        "{case}"
                    );
                    assert_eq!(
                        (aliased.kind, &aliased.message),
                        (private.kind, &private.message),
                        "{case}"
                    );
                    let expected = match (operation.starts_with("prepare"), who) {
                        (false, _) => ErrorKind::NotFound,
                        (true, "anonymous") => ErrorKind::Unauthenticated,
                        (true, _) => ErrorKind::Forbidden,
                    };
                    assert_eq!(private.kind, expected, "{case}: {}", private.message);
                }
                (Ok(private), Ok(aliased), Ok(unknown)) => {
                    assert_eq!(operation, "availability", "{case} answered");
                    assert_eq!(private["visible"], Value::Bool(false), "{case}");
                    assert_eq!(aliased, private, "{case}");
                    let unknown = unknown.to_string().replace(UNKNOWN, PRIVATE);
                    assert_eq!(private.to_string(), unknown, "{case}");
                }
                (private, aliased, unknown) => {
                    panic!("{case}: {private:?} / {aliased:?} / {unknown:?}")
                }
            }
        }
    }

    for (who, caller) in [("local", CallContext::default()), ("granted", bob.clone())] {
        if who == "granted" {
            f.operator.grant("bob", PRIVATE).expect("grant");
        }
        for (operation, answer) in every_operation(&f, &caller, "vault").await {
            // A grant is read access; prepare stays an operator capability.
            if who == "granted" && operation.starts_with("prepare") {
                assert_eq!(
                    answer.unwrap_err().kind,
                    ErrorKind::Forbidden,
                    "{operation}"
                );
                continue;
            }
            let answer = answer.unwrap_or_else(|e| panic!("{operation} by {who}: {e}"));
            if operation == "availability" {
                assert_eq!(answer["visible"], Value::Bool(true));
            }
        }
    }
}

/// every framed operation counts each call exactly once under its own operation,
/// an alias, a failure and an invalid request included; `prepare` is counted apart from the
/// base queries.
#[tokio::test]
async fn r7_every_framed_operation_is_counted_once_per_call() {
    let f = fixture().await;
    let local = CallContext::default();
    let before = f.service.stats();
    for (operation, answer) in every_operation(&f, &local, "kb").await {
        answer.unwrap_or_else(|e| panic!("{operation}: {e}"));
    }
    let counted = |stats: service::StatsSnapshot| {
        let mut calls: Vec<(&str, u64, u64)> = stats
            .by_operation()
            .iter()
            .map(|(name, op)| (*name, op.calls, op.errors))
            .collect();
        calls.push(("prepare", stats.prepare.calls, stats.prepare.errors));
        calls
    };
    let expected = |round: u64, errors: bool| {
        let mut expected = vec![
            ("read", 2 * round, 0),
            ("read_many", 2 * round, 0),
            ("search", round, 0),
            ("list", round, 0),
            ("resolve", round, 0),
            ("availability", round, 0),
            ("log", round, 0),
            ("commit", round, 0),
            ("diff", round, 0),
            ("blame", round, 0),
            ("outline", round, 0),
            ("definitions", round, 0),
            ("references", round, 0),
            ("prepare", 4 * round, 0),
        ];
        if errors {
            // The second round failed everywhere but in availability (an answer: not visible).
            for (name, calls, errors) in &mut expected {
                if *name != "availability" {
                    *errors = *calls / 2;
                }
            }
        }
        expected
    };
    assert_eq!(
        before
            .by_operation()
            .iter()
            .map(|(_, op)| op.calls)
            .sum::<u64>(),
        0
    );
    assert_eq!(counted(f.service.stats()), expected(1, false));

    for (operation, answer) in every_operation(&f, &local, UNKNOWN).await {
        if operation != "availability" {
            answer.expect_err(operation);
        }
    }
    assert_eq!(counted(f.service.stats()), expected(2, true));

    // A request refused before it reaches the repository is a call too.
    let empty = ReadManyRequest {
        files: Vec::new(),
        ..common::batch(&[])
    };
    let error = f.service.read_many(&local, empty).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    let read_many = f.service.stats().read_many;
    assert_eq!((read_many.calls, read_many.errors), (5, 3));
}

/// A-4, P-22: an alias named like a registered private repository does not tell a caller who
/// may not read that repository that it exists: for that caller the name is the alias's, as
/// an unregistered name would be; a caller who may read the repository gets the repository.
#[tokio::test]
async fn a4_p22_an_alias_named_like_a_private_repository_reveals_nothing() {
    let source = SourceRepo::with_files(&[("a.md", b"public text\n")]);
    let store = source.store(REPO, "");
    register_private(&store, &source);
    let plugins = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        plugins.path().join("tables.py"),
        format!("ALIASES = {{\"{PRIVATE}\": \"{REPO}\", \"test/ghost\": \"{REPO}\"}}\n"),
    )
    .expect("plugin file");
    let config = HostConfig::new(plugins.path().to_path_buf());
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .expect("host started");
    let service = Service::with_server_plugins(store, ServiceConfig::default(), host);
    let read = |ctx: CallContext, repo: &str| {
        let service = service.clone();
        let request = service::ReadRequest {
            repo: repo.into(),
            revision: None,
            path: "a.md".into(),
            start_line: None,
            end_line: None,
            plugins: None,
        };
        async move { service.read(&ctx, request).await.map(json) }
    };
    let anonymous = || CallContext {
        caller: Caller::Anonymous,
        ..CallContext::default()
    };
    let shadowed = read(anonymous(), PRIVATE).await.expect("the alias answers");
    let ghost = read(anonymous(), "test/ghost")
        .await
        .expect("the alias answers");
    assert_eq!(
        shadowed, ghost,
        "the private name behaves as an unregistered alias"
    );
    assert_eq!(shadowed["repo"], Value::String(REPO.into()));
    let local = read(CallContext::default(), PRIVATE)
        .await
        .expect("readable");
    assert_eq!(local["repo"], Value::String(PRIVATE.into()), "{local}");
}
