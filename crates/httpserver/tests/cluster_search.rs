//! Cluster mode (issue 31, behaviour 3): a search over every repository asked of one replica
//! gets the other replicas' parts over HTTP (`POST /_cluster/search-part`, only with
//! the cluster secret), and names what a replica that is down holds as not searched. Two real
//! replicas on 127.0.0.1, each with its own data directory; the placement is fixed.

mod common;

use common::{Fixed, SECRET, bind, bounded, routing, serve_until};
use serde_json::Value;
use service::{Service, ServiceConfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

/// How long one owner gets, as the replicas here are configured.
const ATTEMPT: Duration = Duration::from_secs(5);

/// A replica with `sources` registered and synced, `indexed` indexed, routing by `owners`,
/// served until `stop` fires.
async fn replica(
    listener: tokio::net::TcpListener,
    sources: &[(&str, &SourceRepo)],
    indexed: &[&str],
    owners: &HashMap<String, Vec<String>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> (String, tempfile::TempDir) {
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: dir.path().join("data"),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )
    .expect("open store");
    for (name, source) in sources {
        let name = gitstore::RepoName::parse(name).expect("name");
        store
            .register(gitstore::Registration {
                name: name.clone(),
                source: source.source(),
                registered_path: gitstore::RepoPath::root(),
                branch: None,
                private: None,
            })
            .expect("register");
        store.sync(&name).expect("sync");
    }
    let service = Service::new(store, ServiceConfig::default());
    for repo in indexed {
        service
            .index((*repo).to_owned(), |_| {})
            .await
            .expect("index");
    }
    let peers = httpserver::PeerClient::new(&routing(ATTEMPT)).expect("peers");
    service.set_placement(Arc::new(Fixed {
        peers: Some(Arc::new(peers)),
        ..Fixed::per_repo(&base, owners.clone())
    }));
    let routes = httpserver::router(service.clone(), httpserver::Readiness::default());
    serve_until(listener, &base, service, routes, routing(ATTEMPT), async {
        let _ = stop.await;
    });
    (base, dir)
}

/// A part of a search over every repository posted to `url`, with `secret` as the cluster
/// secret (none when `None`).
async fn post_part(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&str>,
    part: &Value,
) -> reqwest::Response {
    let mut request = client.post(url).json(part);
    if let Some(secret) = secret {
        request = request.header("x-csg-replica-secret", secret);
    }
    request.send().await.expect("send")
}

async fn get_json(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let answer = client.get(url).send().await.expect("send");
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

fn repos_of(body: &Value) -> Vec<String> {
    body["repos"]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .map(|group| group["repo"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_over_every_repository_asks_the_other_replica_and_names_it_when_it_is_down() {
    bounded(Duration::from_secs(120), async {
        let one = SourceRepo::with_files(&[("a.md", b"needle in one\n")]);
        let two = SourceRepo::with_files(&[("b.md", b"needle in two\n")]);
        let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
        let owners = HashMap::from([
            ("acme/one".to_owned(), vec![a_url.clone()]),
            ("acme/two".to_owned(), vec![b_url.clone()]),
        ]);
        let both = [("acme/one", &one), ("acme/two", &two)];
        let (_stop_a, stop) = tokio::sync::oneshot::channel();
        let (a, _a_dir) = replica(la, &both, &["acme/one"], &owners, stop).await;
        let (stop_b, stop) = tokio::sync::oneshot::channel();
        let (b, _b_dir) = replica(lb, &both[1..], &["acme/two"], &owners, stop).await;
        let client = reqwest::Client::new();

        // The part route answers replicas only: to anyone else it is an unknown route.
        let part = serde_json::json!({
            "mode": {"kind": "search"},
            "query": "needle",
            "repos": ["acme/two"],
            "want": 10,
        });
        let url = format!("{b}/_cluster/search-part");
        let refused = post_part(&client, &url, None, &part).await;
        assert_eq!(refused.status().as_u16(), 404);
        assert_eq!(refused.text().await.expect("text"), "");
        let wrong = post_part(&client, &url, Some("not-the-secret"), &part).await;
        assert_eq!(wrong.status().as_u16(), 404);
        let answered = post_part(&client, &url, Some(SECRET), &part).await;
        assert_eq!(answered.status().as_u16(), 200);
        let body: Value = answered.json().await.expect("json");
        assert_eq!(body["hits"][0]["repo"], "acme/two", "{body}");
        assert_eq!(body["hits"][0]["tier"], "line", "{body}");
        // A part of a large cluster names many repositories: past axum's default body limit.
        let many: Vec<String> = (0..60_000)
            .map(|n| format!("acme/a-rather-long-repository-name-{n:06}"))
            .collect();
        let big = serde_json::json!({
            "mode": {"kind": "search"},
            "query": "needle",
            "repos": many,
            "want": 10,
        });
        let answered = post_part(&client, &url, Some(SECRET), &big).await;
        assert_eq!(answered.status().as_u16(), 200);
        let body: Value = answered.json().await.expect("json");
        assert_eq!(body["not_indexed"].as_array().map(Vec::len), Some(60_000));

        // Through A: both repositories, A's own and B's part.
        let (status, body) =
            get_json(&client, &format!("{a}/sourcegraph/api/search?query=needle")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(repos_of(&body), ["acme/one", "acme/two"], "{body}");
        assert_eq!(body["not_indexed"], serde_json::json!([]), "{body}");
        assert!(body.get("not_searched").is_none(), "{body}");

        // B stops: its repository is named as not searched; A's still answers.
        let _ = stop_b.send(());
        let mut body = Value::Null;
        for _ in 0..100 {
            let (status, answer) =
                get_json(&client, &format!("{a}/sourcegraph/api/search?query=needle")).await;
            assert_eq!(status, 200, "{answer}");
            body = answer;
            if body.get("not_searched").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            body["not_searched"],
            serde_json::json!(["acme/two"]),
            "{body}"
        );
        assert_eq!(repos_of(&body), ["acme/one"], "{body}");
    })
    .await;
}
