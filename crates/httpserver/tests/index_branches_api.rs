//! S-8 over the JSON API on 127.0.0.1: `POST /sourcegraph/api/repos` takes `index_branches`
//! (checked before anything is registered, at most 64) and answers them; `search` with
//! `revision` answers at that commit and names it.

use serde_json::{Value, json};
use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

struct Server {
    _source: SourceRepo,
    base: String,
    client: reqwest::Client,
    /// A token of a user with the prepare capability.
    ops: String,
}

async fn server() -> Server {
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    let store = source.store("test/api", "");
    let users = access::AccessStore::open(&store.metadata_path()).unwrap();
    users.add_user("ops", true).unwrap();
    let ops = users.create_token("ops", None).unwrap().secret;
    let service = Service::new(store, ServiceConfig::default());
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), httpserver::Readiness::default()),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    Server {
        _source: source,
        base,
        client: reqwest::Client::new(),
        ops,
    }
}

impl Server {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.ops)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn s8_register_with_index_branches_and_search_at_a_branch() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let s = server().await;
        let remote = SourceRepo::with_files(&[("r.md", b"marker on main\n")]);
        remote.git(&["checkout", "-q", "-b", "release/1"]);
        let release = remote.commit(&[("r.md", b"marker on release\nmarker again\n")], "release");
        remote.git(&["checkout", "-q", "main"]);
        let http = remote.serve_http();

        let too_many: Vec<String> = (0..65).map(|i| format!("b{i}")).collect();
        let (status, body) = s
            .post(
                "/sourcegraph/api/repos",
                json!({"name": "acme/remote", "source": http.url(), "index_branches": too_many}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains("at most 64"), "{body}");
        let (status, body) = s
            .post("/sourcegraph/api/search", json!({"query": "marker", "repo": "acme/remote"}))
            .await;
        assert_ne!(status, 200, "nothing was registered: {body}");

        let (status, body) = s
            .post(
                "/sourcegraph/api/repos",
                json!({"name": "acme/remote", "source": http.url(), "index_branches": ["release/*"]}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["index_branches"], json!(["release/*"]), "{body}");

        let (status, body) = s
            .post(
                "/sourcegraph/api/search",
                json!({"query": "marker", "repo": "acme/remote", "revision": "release/1"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let text = body.to_string();
        assert!(text.contains(&release), "names the branch head: {body}");
        assert!(text.contains("marker again"), "{body}");
    })
    .await
    .expect("finished within 120 s");
}
