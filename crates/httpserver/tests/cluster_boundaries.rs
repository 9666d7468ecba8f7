//! The cluster's trust boundaries (issue 43, A-7): authenticate, then authorize, then route.
//! Two real replicas on 127.0.0.1, layered as the binary layers one (the replica gate, the
//! access layer, the routing), each with its own data directory and a registry that knows
//! every repository (as a cluster's shared one does); the placement is fixed, so the test
//! decides who owns what. Each finding of the issue has a test that failed before:
//!
//! 1. replica identity for anyone (the cluster's status and search parts through a client
//!    route);
//! 2. a private repository registered but not held yet told apart from an unknown name;
//! 5. the site's search with a `repo` and a double-slash page not routed;
//! 6. a token in the URL forwarded before it was refused.

mod common;

use common::{Fixed, SECRET, bind, bounded, register_elsewhere, routing, serve, site};
use service::{Service, ServiceConfig};
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

/// Public, held by B (and indexed there).
const PUBLIC: &str = "acme/pub";
/// Private, registered everywhere, held nowhere yet (its first sync has not happened).
const PENDING: &str = "acme/pending";
/// Registered, owned by a replica that does not answer.
const DEAD: &str = "acme/dead";

struct Cluster {
    a: String,
    b: String,
    _sources: Vec<SourceRepo>,
}

/// A (owns nothing it is asked about) and B (owns everything); both know every name.
async fn cluster() -> Cluster {
    let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
    let owners = [
        (PUBLIC, vec![b_url.clone()]),
        (PENDING, vec![b_url.clone()]),
        (DEAD, vec!["http://127.0.0.1:1".to_owned()]),
    ];
    let public = SourceRepo::with_files(&[("a.md", b"hello from B\n")]);
    // B: holds the public repository; the private one is registered, not synced.
    let b_store = public.store(PUBLIC, "");
    register_private(&b_store, &public, PENDING);
    let b = Service::new(b_store, ServiceConfig::default());
    b.index(PUBLIC.into(), |_| {}).await.expect("index");
    // A: holds a repository of its own only.
    let own = SourceRepo::with_files(&[("own.md", b"A's own\n")]);
    let a_store = own.store("acme/own", "");
    register_elsewhere(&a_store, &public, &[PUBLIC, DEAD]);
    register_private(&a_store, &public, PENDING);
    let a = Service::new(a_store, ServiceConfig::default());
    for (service, listener, url) in [(a, la, &a_url), (b, lb, &b_url)] {
        service.set_placement(Arc::new(Fixed::per_repo(
            url,
            owners
                .iter()
                .map(|(repo, owners)| (repo.to_string(), owners.clone()))
                .collect(),
        )));
        let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
            .merge(httpserver::site_router(service.clone(), &site(url)));
        serve(
            listener,
            url,
            service,
            routes,
            routing(Duration::from_secs(5)),
        );
    }
    Cluster {
        a: a_url,
        b: b_url,
        _sources: vec![public, own],
    }
}

fn register_private(store: &gitstore::GitStore, source: &SourceRepo, name: &str) {
    store
        .register(gitstore::Registration {
            name: gitstore::RepoName::parse(name).expect("name"),
            source: source.source(),
            registered_path: gitstore::RepoPath::root(),
            branch: None,
            private: Some(true),
        })
        .expect("register");
}

/// Status and body of a request.
async fn answer(request: reqwest::RequestBuilder) -> (u16, String) {
    let answer = request.send().await.expect("send");
    (answer.status().as_u16(), answer.text().await.expect("text"))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Finding 1: the cluster's status and its search parts answer replicas only, on routes of
/// their own; a client route never lends anyone replica identity, not with a `repo` another
/// replica owns, not as a forwarded call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_no_client_gets_replica_identity() {
    bounded(Duration::from_secs(120), async {
        let cluster = cluster().await;
        let http = client();
        for base in [&cluster.a, &cluster.b] {
            // Through the client route, with a name another replica owns: an operator's
            // route, refused to an anonymous caller, not routed to the owner.
            let (status, body) =
                answer(http.get(format!("{base}/sourcegraph/api/cluster?repo={PUBLIC}"))).await;
            assert_eq!(status, 401, "{body}");
            assert!(!body.contains("members"), "{body}");
            // The old part route with a `repo` field is no route at all.
            let (status, body) = answer(
                http.post(format!("{base}/sourcegraph/api/cluster/search"))
                    .json(&serde_json::json!({"repo": PUBLIC, "query": "hello"})),
            )
            .await;
            assert_eq!(status, 404, "{body}");
            // The cluster's own routes answer a client exactly as a route that does not exist.
            let unknown = answer(http.get(format!("{base}/no-such-route"))).await;
            assert_eq!(unknown, (404, String::new()));
            for (marker, secret) in [
                (None, ""),
                (Some("x-csg-replica-secret"), "not-the-secret"),
                (Some("x-csg-forwarded-secret"), SECRET),
            ] {
                for (method, path) in [
                    (reqwest::Method::GET, "/_cluster/status"),
                    (reqwest::Method::POST, "/_cluster/search-part"),
                    (reqwest::Method::GET, "/_cluster/anything"),
                ] {
                    let mut request = http.request(method, format!("{base}{path}"));
                    if let Some(marker) = marker {
                        request = request.header(marker, secret);
                    }
                    assert_eq!(answer(request).await, unknown, "{path} with {marker:?}");
                }
            }
            // A forwarded call is its client's: the operator's route still needs an
            // operator's token.
            let (status, body) = answer(
                http.get(format!("{base}/sourcegraph/api/cluster"))
                    .header("x-csg-forwarded-secret", SECRET),
            )
            .await;
            assert_eq!(status, 401, "{body}");
            // Replica identity on a client route is refused.
            let (status, _) = answer(
                http.get(format!("{base}/sourcegraph/api/cluster"))
                    .header("x-csg-replica-secret", SECRET),
            )
            .await;
            assert_eq!(status, 403);
        }
        // A replica asking on its own route is answered.
        let (status, body) = answer(
            http.get(format!("{}/_cluster/status", cluster.a))
                .header("x-csg-replica-secret", SECRET),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(status["self"], cluster.a.as_str(), "{body}");
    })
    .await;
}

/// Finding 2: a private repository registered but held by no replica yet answers
/// an anonymous caller byte for byte as an unknown name does, on the owner and elsewhere, on
/// every route that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_a_pending_private_repository_answers_as_unknown_everywhere() {
    bounded(Duration::from_secs(120), async {
        let cluster = cluster().await;
        let http = client();
        for base in [&cluster.a, &cluster.b] {
            for (pending, unknown) in [
                (
                    http.get(format!(
                        "{base}/sourcegraph/api/read?repo={PENDING}&path=a.md"
                    )),
                    http.get(format!(
                        "{base}/sourcegraph/api/read?repo=acme/nothing&path=a.md"
                    )),
                ),
                (
                    http.post(format!("{base}/sourcegraph/api/list"))
                        .json(&serde_json::json!({"repo": PENDING})),
                    http.post(format!("{base}/sourcegraph/api/list"))
                        .json(&serde_json::json!({"repo": "acme/nothing"})),
                ),
                (
                    http.get(format!(
                        "{base}/sourcegraph/repos/{PENDING}/-/blob/HEAD/a.md"
                    )),
                    http.get(format!(
                        "{base}/sourcegraph/repos/acme/nothing/-/blob/HEAD/a.md"
                    )),
                ),
            ] {
                let pending = answer(pending).await;
                let unknown = answer(unknown).await;
                assert_eq!(pending.0, unknown.0, "{base}: {pending:?} vs {unknown:?}");
                assert_eq!(
                    pending.1.replace(PENDING, "acme/nothing"),
                    unknown.1,
                    "{base}"
                );
                assert_ne!(pending.0, 503);
            }
        }
    })
    .await;
}

/// Finding 5: the site's pages route as the site parses them: a search naming a repository
/// is answered by its owner (hits, not "not indexed yet"), and a double-slash page path is
/// the same page as the single-slash one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_site_pages_route_as_the_site_parses_them() {
    bounded(Duration::from_secs(120), async {
        let cluster = cluster().await;
        let http = client();
        for base in [&cluster.a, &cluster.b] {
            let (status, page) =
                answer(http.get(format!("{base}/sourcegraph/search?q=hello&repo={PUBLIC}"))).await;
            assert_eq!(status, 200, "{page}");
            assert!(page.contains("<mark>hello</mark> from B"), "{base}: {page}");
            for path in [
                format!("/sourcegraph/repos/{PUBLIC}/-/blob/HEAD/a.md"),
                format!("/sourcegraph/repos//{PUBLIC}/-/blob/HEAD/a.md"),
                "/sourcegraph/repos/acme//pub/-/blob/HEAD//a.md".to_owned(),
            ] {
                let (status, page) = answer(http.get(format!("{base}{path}"))).await;
                assert_eq!(status, 200, "{base}{path}: {page}");
                assert!(page.contains("hello from B"), "{base}{path}");
            }
        }
    })
    .await;
}

/// Finding 6: a token in the URL is refused where the call arrives, before any routing: a
/// call for a repository whose only owner is down is refused at once, not forwarded (which
/// would carry the token on and answer 503 after the attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_a_token_in_the_url_is_refused_before_routing() {
    bounded(Duration::from_secs(120), async {
        let cluster = cluster().await;
        let http = client();
        let token = format!("csg_{}", "0123456789abcdef".repeat(4));
        let (status, body) = answer(http.get(format!(
            "{}/sourcegraph/api/read?repo={DEAD}&path=a.md&token={token}",
            cluster.a
        )))
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("URL"), "{body}");
        // Without the token the same call is routed, and the dead owner makes it a 503.
        let (status, body) = answer(http.get(format!(
            "{}/sourcegraph/api/read?repo={DEAD}&path=a.md",
            cluster.a
        )))
        .await;
        assert_eq!(status, 503, "{body}");
    })
    .await;
}
