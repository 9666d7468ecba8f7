//! Access decisions of the service (A-2, A-4, W-28, W-34) with a real access store beside a
//! real store: a private repository with a real Wasm plugin, a user granted it, and the grant
//! and token taken back through a second handle on the same metadata, as `csg grant --remove`
//! in another process does.

use service::{CallContext, Caller, ErrorKind, ReadRequest, SearchRequest, Service, ServiceConfig};
use testgit::SourceRepo;

const REPO: &str = "acme/secret";

fn read() -> ReadRequest {
    ReadRequest {
        repo: REPO.into(),
        revision: None,
        path: "docs/a.md".into(),
        start_line: None,
        end_line: None,
        plugins: None,
    }
}

fn search(repo: &str) -> SearchRequest {
    SearchRequest {
        query: "needle".into(),
        repo: Some(repo.into()),
        ..SearchRequest::default()
    }
}

fn as_user(service: &Service, token: &str) -> CallContext {
    let principal = service.authenticate(token).expect("a valid token");
    CallContext {
        caller: Caller::User(principal),
        ..CallContext::default()
    }
}

struct Fixture {
    _source: SourceRepo,
    service: Service,
    /// Another handle on the same tables, standing in for another process.
    operator: access::AccessStore,
    token: String,
}

async fn fixture() -> Fixture {
    let echo = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../wasmplugin/testdata/echo.sourcegraph.wasm"
    ))
    .expect("the committed echo fixture");
    let source = SourceRepo::with_files(&[
        ("docs/echo.sourcegraph.wasm", &echo),
        ("docs/a.md", b"a needle\n"),
    ]);
    let store = source.store(REPO, "");
    store
        .set_private(&gitstore::RepoName::parse(REPO).expect("name"), true)
        .expect("made private");
    let operator = access::AccessStore::open(&store.metadata_path()).expect("access store");
    operator.add_user("alice", false).expect("user");
    operator.grant("alice", REPO).expect("grant");
    let token = operator.create_token("alice", None).expect("token").secret;
    let service = Service::new(store, ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.expect("indexed");
    Fixture {
        _source: source,
        service,
        operator,
        token,
    }
}

/// W-34: with the private repository's plugin catalog, compiled module and an idle instance
/// cached by two granted reads, taking the grant back refuses the very next read, exactly as
/// for an unknown repository, and running no plugin.
#[tokio::test]
async fn w34_revoked_grant_is_refused_on_the_next_call_despite_warm_caches() {
    let f = fixture().await;
    let ctx = as_user(&f.service, &f.token);
    for _ in 0..2 {
        let (_, enrichment) = f.service.read_enriched(&ctx, read()).await.expect("read");
        assert_eq!(enrichment.for_item(0).count(), 1, "the plugin ran");
    }
    let warm = f.service.plugin_stats().expect("plugins on");
    assert_eq!((warm.compiles, warm.executions), (1, 2));
    assert_eq!(warm.instance_reuses, 1, "an instance is pooled");
    assert_eq!(f.service.plugin_discoveries(), 1, "the catalog is cached");

    assert!(f.operator.ungrant("alice", REPO).expect("ungrant"));
    let refused = f.service.read_enriched(&ctx, read()).await.unwrap_err();
    let unknown = f
        .service
        .read_enriched(
            &ctx,
            ReadRequest {
                repo: "acme/nothing".into(),
                ..read()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::NotFound);
    assert_eq!(
        refused.to_string(),
        unknown.to_string().replace("acme/nothing", REPO),
        "A-4: no hint that it exists"
    );
    assert_eq!(
        f.service.plugin_stats().expect("plugins on").executions,
        2,
        "no plugin ran for the refused call"
    );
    // Granted again, the caches serve again.
    f.operator.grant("alice", REPO).expect("grant");
    f.service.read_enriched(&ctx, read()).await.expect("read");
    assert_eq!(f.service.plugin_discoveries(), 1);
}

/// W-34: a search answered from the result cache is refused once the grant is gone, and
/// a revoked token is refused at once, while the server keeps running.
#[tokio::test]
async fn w34_cached_search_and_revoked_token() {
    let f = fixture().await;
    let ctx = as_user(&f.service, &f.token);
    let first = f.service.search(&ctx, search(REPO)).await.expect("search");
    assert_eq!(first.stats.total_hits, 1);
    let second = f.service.search(&ctx, search(REPO)).await.expect("search");
    assert!(
        second.stats.cached,
        "the second answer comes from the cache"
    );

    assert!(f.operator.ungrant("alice", REPO).expect("ungrant"));
    let error = f.service.search(&ctx, search(REPO)).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::NotFound);
    // Without a repository the search covers what the caller may read: nothing now.
    let everything = f
        .service
        .search(
            &ctx,
            SearchRequest {
                repo: None,
                ..search(REPO)
            },
        )
        .await
        .expect("search");
    assert_eq!(everything.stats.total_hits, 0, "{everything:?}");
    assert!(everything.repos.is_empty());

    let id = f.operator.tokens(Some("alice")).expect("tokens")[0].id;
    f.operator.revoke_token(id).expect("revoked");
    assert!(f.service.authenticate(&f.token).is_err(), "revoked at once");
}

/// W-28, A-3: an anonymous caller sees a private repository as unknown; only the local
/// caller and users with the capability may prepare, and a grant does not give it.
#[tokio::test]
async fn a3_prepare_is_a_capability_of_its_own() {
    let f = fixture().await;
    let anonymous = CallContext {
        caller: Caller::Anonymous,
        ..CallContext::default()
    };
    let error = f
        .service
        .read_enriched(&anonymous, read())
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::NotFound);
    let granted = as_user(&f.service, &f.token);
    let reindex = || service::PrepareRequest {
        repo: REPO.into(),
        action: service::PrepareAction::parse("reindex").expect("action"),
        revision: None,
    };
    let error = f
        .service
        .prepare(&granted, reindex(), |_| {})
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Forbidden);
    let error = f
        .service
        .prepare(&anonymous, reindex(), |_| {})
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unauthenticated);
    f.service
        .prepare(&CallContext::default(), reindex(), |_| {})
        .await
        .expect("the local caller prepares");
}
