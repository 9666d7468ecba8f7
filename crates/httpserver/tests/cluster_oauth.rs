//! Issue 44 point 7: in a cluster, every replica validates access tokens on its
//! own, and a forwarded call carries the identity the forwarding replica validated, never
//! the token: the owner neither sees the token nor validates it again. Two real replicas on
//! 127.0.0.1, layered as the binary layers one, and a real key set on 127.0.0.1.
//!
//! To show the token does not travel, the owner (B) is configured for another audience than
//! the forwarding replica (A): a token for A's would be refused by B, so only a forwarded
//! identity can be served there.

mod common;

use common::{Fixed, SECRET, bind, bounded, register_elsewhere, routing, serve_with, site};
use oauth::testing::{Signer, TestProvider};
use service::{GroupGrant, IdentityPolicy, Service, ServiceConfig};
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

/// Private, held by B, read by the group `eng`.
const SECRET_REPO: &str = "acme/secret";

struct Cluster {
    a: String,
    b: String,
    provider: TestProvider,
    _sources: [SourceRepo; 2],
}

fn config() -> ServiceConfig {
    ServiceConfig {
        public_read: false,
        identity: IdentityPolicy {
            group_grants: vec!["eng=acme/*".parse::<GroupGrant>().expect("grant")],
            prepare_groups: Vec::new(),
        },
        ..ServiceConfig::default()
    }
}

fn validator(provider: &TestProvider, public_url: &str) -> oauth::Validator {
    oauth::Validator::new(oauth::OAuthConfig {
        issuer: provider.issuer().to_owned(),
        audience: format!("{public_url}/sourcegraph/mcp"),
        groups_claim: "groups".to_owned(),
    })
    .expect("validator")
}

async fn cluster() -> Cluster {
    let provider = TestProvider::start().await.expect("provider");
    let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
    let source = SourceRepo::with_files(&[("plan.md", b"the secret plan\n")]);
    let b_store = source.store(SECRET_REPO, "");
    b_store
        .set_private(&gitstore::RepoName::parse(SECRET_REPO).expect("name"), true)
        .expect("private");
    // Kept for the test's life: a store lives in its source's temporary directory.
    let own = SourceRepo::with_files(&[("own.md", b"A's own\n")]);
    let a_store = own.store("acme/own", "");
    register_elsewhere(&a_store, &source, &[SECRET_REPO]);
    a_store
        .set_private(&gitstore::RepoName::parse(SECRET_REPO).expect("name"), true)
        .expect("private");
    let a_validator = validator(&provider, &a_url);
    a_validator.discover().await.expect("A fetches the keys");
    // A asks the provider about opaque tokens as the website's client.
    let a_resource =
        httpserver::OAuthResource::new(a_validator, &a_url).with_web_client(oauth::WebClient {
            id: oauth::testing::CLIENT_ID.to_owned(),
            secret: Some(oauth::testing::CLIENT_SECRET.to_owned()),
        });
    // B's audience is its own URL's: a token for A's would be refused here.
    let b_resource = httpserver::OAuthResource::new(validator(&provider, &b_url), &b_url);
    let owners: std::collections::HashMap<String, Vec<String>> =
        [(SECRET_REPO.to_owned(), vec![b_url.clone()])].into();
    for (store, listener, url, resource) in [
        (a_store, la, &a_url, a_resource),
        (b_store, lb, &b_url, b_resource),
    ] {
        let service = Service::new(store, config());
        service.set_placement(Arc::new(Fixed::per_repo(url, owners.clone())));
        let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
            .merge(httpserver::site_router(service.clone(), &site(url)));
        let options = httpserver::AccessOptions {
            sessions: None,
            oauth: Some(resource),
        };
        serve_with(
            listener,
            url,
            service,
            routes,
            routing(Duration::from_secs(5)),
            options,
            std::future::pending(),
        );
    }
    Cluster {
        a: a_url,
        b: b_url,
        provider,
        _sources: [source, own],
    }
}

async fn get(request: reqwest::RequestBuilder) -> (u16, String) {
    let answer = request.send().await.expect("send");
    (answer.status().as_u16(), answer.text().await.expect("text"))
}

fn read_url(base: &str) -> String {
    format!("{base}/sourcegraph/api/read?repo={SECRET_REPO}&path=plan.md")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_a_forwarded_call_carries_the_validated_identity_not_the_token() {
    bounded(Duration::from_secs(60), async {
        let cluster = cluster().await;
        let http = reqwest::Client::new();
        let audience = format!("{}/sourcegraph/mcp", cluster.a);
        let alice = cluster.provider.sign(
            Signer::Es256,
            &cluster
                .provider
                .claims(&audience, "alice", "csg:read", &["eng"]),
        );
        // Through A, which owns nothing: forwarded to B, which serves it as alice of `eng`.
        let (status, body) = get(http.get(read_url(&cluster.a)).bearer_auth(&alice)).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("the secret plan"), "{body}");
        // B never looked at a key: only A's discovery fetched the key set.
        assert_eq!(cluster.provider.key_set_fetches(), 1);
        // The same token sent to B itself is for another resource there.
        let (status, body) = get(http.get(read_url(&cluster.b)).bearer_auth(&alice)).await;
        assert_eq!(
            status, 503,
            "B has not fetched the keys, so nothing is known: {body}"
        );

        // carol (no group) through A: the same answer as for a name nobody knows.
        let carol = cluster.provider.sign(
            Signer::Es256,
            &cluster.provider.claims(&audience, "carol", "csg:read", &[]),
        );
        let (status, private) = get(http.get(read_url(&cluster.a)).bearer_auth(&carol)).await;
        let missing_url = format!(
            "{}/sourcegraph/api/read?repo=acme/missing&path=plan.md",
            cluster.a
        );
        let (missing_status, missing) = get(http.get(missing_url).bearer_auth(&carol)).await;
        assert_eq!(
            (status, private.replace(SECRET_REPO, "NAME")),
            (missing_status, missing.replace("acme/missing", "NAME"))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_a_client_cannot_send_an_identity_of_its_own() {
    bounded(Duration::from_secs(60), async {
        let cluster = cluster().await;
        let http = reqwest::Client::new();
        let identity = "%7B%22sub%22%3A%22alice%22%2C%22scopes%22%3A%5B%22csg%3Aread%22%5D%2C%22groups%22%3A%5B%22eng%22%5D%7D";
        // Without the forwarded marker the header is dropped: no token, so 401.
        let (status, body) = get(
            http.get(read_url(&cluster.b))
                .header("x-csg-forwarded-identity", identity),
        )
        .await;
        assert_eq!(status, 401, "{body}");
        // With a wrong marker: refused as wrong cluster credentials.
        let (status, body) = get(
            http.get(read_url(&cluster.b))
                .header("x-csg-forwarded-identity", identity)
                .header("x-csg-forwarded-secret", "not-the-secret"),
        )
        .await;
        assert_eq!(status, 403, "{body}");
        // With the real marker (only replicas know it), B takes the identity.
        let (status, body) = get(
            http.get(read_url(&cluster.b))
                .header("x-csg-forwarded-identity", identity)
                .header("x-csg-forwarded-secret", SECRET),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        // A client-sent identity through A is dropped before A forwards anything.
        let (status, body) = get(
            http.get(read_url(&cluster.a))
                .header("x-csg-forwarded-identity", identity),
        )
        .await;
        assert_eq!(status, 401, "{body}");
    })
    .await;
}

/// Issue 44 point 3 (optional RFC 7662): an opaque token is introspected by the replica that
/// took it, once, and forwarded as its identity; nothing with our API tokens' prefix is ever
/// sent to the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_an_opaque_token_is_introspected_once_and_ours_never() {
    bounded(Duration::from_secs(60), async {
        let cluster = cluster().await;
        let http = reqwest::Client::new();
        let audience = format!("{}/sourcegraph/mcp", cluster.a);
        let opaque = cluster.provider.opaque(&cluster.provider.claims(
            &audience,
            "alice",
            "csg:read",
            &["eng"],
        ));
        for _ in 0..3 {
            let (status, body) = get(http.get(read_url(&cluster.a)).bearer_auth(&opaque)).await;
            assert_eq!(status, 200, "{body}");
            assert!(body.contains("the secret plan"), "{body}");
        }
        assert_eq!(cluster.provider.introspections(), 1);
        let mistyped = format!("csg_{}", "0".repeat(10));
        let (status, body) = get(http.get(read_url(&cluster.a)).bearer_auth(&mistyped)).await;
        assert_eq!(status, 401, "{body}");
        let (status, _) = get(http.get(read_url(&cluster.a)).bearer_auth("made-up")).await;
        assert_eq!(status, 401);
        assert_eq!(cluster.provider.introspections(), 2, "the made-up one only");
    })
    .await;
}
