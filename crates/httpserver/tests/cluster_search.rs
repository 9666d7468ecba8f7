//! Cluster mode (issue 31, behaviour 3): a search over every repository asked of one replica
//! gets the other replicas' parts over HTTP (`POST /sourcegraph/api/cluster/search`, only with
//! the cluster secret), and names what a replica that is down holds as not searched. Two real
//! replicas on 127.0.0.1, each with its own data directory; the placement is fixed.

use serde_json::Value;
use service::{Placement, Service, ServiceConfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

const SECRET: &str = "a-cluster-secret-of-at-least-32-characters";

struct Fixed {
    me: String,
    owners: HashMap<String, Vec<String>>,
    peers: Arc<httpserver::PeerClient>,
}

impl Placement for Fixed {
    fn owners(&self, repo: &str) -> Vec<String> {
        self.owners.get(repo).cloned().unwrap_or_default()
    }
    fn self_url(&self) -> &str {
        &self.me
    }
    fn members(&self) -> service::Membership {
        service::Membership {
            members: Vec::new(),
            database_reachable: true,
            draining: false,
        }
    }
    fn peers(&self) -> Option<Arc<dyn service::Peers>> {
        Some(self.peers.clone())
    }
}

fn routing() -> httpserver::ClusterRouting {
    httpserver::ClusterRouting {
        secret: SECRET.into(),
        attempt_timeout: Duration::from_secs(5),
    }
}

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
    service.set_placement(Arc::new(Fixed {
        me: base.clone(),
        owners: owners.clone(),
        peers: Arc::new(httpserver::PeerClient::new(&routing()).expect("peers")),
    }));
    let site = httpserver::SiteConfig {
        origin: base.clone(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), httpserver::Readiness::default()),
        service.clone(),
        &site,
    );
    let app = httpserver::with_cluster_search(app, service.clone());
    let app = httpserver::with_cluster_routing(app, service, routing()).expect("routing");
    tokio::spawn(httpserver::serve(listener, app, async {
        let _ = stop.await;
    }));
    (base, dir)
}

async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
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
    tokio::time::timeout(Duration::from_secs(120), async {
        let one = SourceRepo::with_files(&[("a.md", b"needle in one\n")]);
        let two = SourceRepo::with_files(&[("b.md", b"needle in two\n")]);
        let (la, lb) = (bind().await, bind().await);
        let a_url = format!("http://{}", la.local_addr().expect("addr"));
        let b_url = format!("http://{}", lb.local_addr().expect("addr"));
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

        // The part route answers replicas only.
        let part = serde_json::json!({
            "mode": {"kind": "search"},
            "query": "needle",
            "repos": ["acme/two"],
            "want": 10,
        });
        let url = format!("{b}/sourcegraph/api/cluster/search");
        let refused = client.post(&url).json(&part).send().await.expect("send");
        assert_eq!(refused.status().as_u16(), 403);
        let body: Value = refused.json().await.expect("json");
        assert_eq!(body["error"]["kind"], "forbidden", "{body}");
        let wrong = client
            .post(&url)
            .header("x-csg-cluster-secret", "not-the-secret")
            .json(&part)
            .send()
            .await
            .expect("send");
        assert_eq!(wrong.status().as_u16(), 403);
        let answered = client
            .post(&url)
            .header("x-csg-cluster-secret", SECRET)
            .json(&part)
            .send()
            .await
            .expect("send");
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
        let answered = client
            .post(&url)
            .header("x-csg-cluster-secret", SECRET)
            .json(&big)
            .send()
            .await
            .expect("send");
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
    .await
    .expect("the test finished within its bound");
}
