//! The JSON API over real HTTP on 127.0.0.1 (R-6, SPEC §9 routes, O-4 probes).

use httpserver::Readiness;
use serde_json::{Value, json};
use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

struct Server {
    _source: SourceRepo,
    base: String,
    head: String,
    readiness: Readiness,
    client: reqwest::Client,
    /// A token of a user with the prepare capability.
    ops: String,
    /// A token of a user without it.
    reader: String,
}

async fn server() -> Server {
    server_with(&[("a.md", b"# A\nsecond\nthird\n"), ("bin.dat", b"\0\0")]).await
}

async fn server_with(files: &[(&str, &[u8])]) -> Server {
    let source = SourceRepo::with_files(files);
    let head = source.head();
    let store = source.store("test/api", "");
    let users = access::AccessStore::open(&store.metadata_path()).unwrap();
    users.add_user("ops", true).unwrap();
    users.add_user("reader", false).unwrap();
    let ops = users.create_token("ops", None).unwrap().secret;
    let reader = users.create_token("reader", None).unwrap().secret;
    let service = Service::new(store, ServiceConfig::default());
    service.index("test/api".into(), |_| {}).await.unwrap();
    let readiness = Readiness::default();
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), readiness.clone()),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    Server {
        _source: source,
        base,
        head,
        readiness,
        client: reqwest::Client::new(),
        ops,
        reader,
    }
}

impl Server {
    async fn raw(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.raw(path).await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_as(None, path, body).await
    }

    /// A POST with `token` as its bearer token, if any.
    async fn post_as(&self, token: Option<&str>, path: &str, body: Value) -> (u16, Value) {
        let mut request = self.client.post(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// the read API carries the header's facts in snake_case JSON.
#[tokio::test]
async fn r6_read_json() {
    let s = server().await;
    let (status, body) = s
        .get("/sourcegraph/api/read?repo=test/api&path=a.md&start_line=2&end_line=2")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "repo": "test/api", "commit": s.head, "path": "a.md",
            "start_line": 2, "end_line": 2, "total_lines": 3,
            "truncated": false, "has_more": true, "next_start_line": 3,
            "content": "second\n"
        })
    );
}

/// read_many keeps failed items in place with `error`.
#[tokio::test]
async fn r6_read_many_json() {
    let s = server().await;
    let request = json!({"repo": "test/api", "files": [{"path": "a.md"}, {"path": "bin.dat"}, {"path": "a.md", "start_line": 3}]});
    let (status, body) = s.post("/sourcegraph/api/read_many", request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"], s.head);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["content"], "# A\nsecond\nthird\n");
    assert!(items[1]["error"].as_str().unwrap().contains("binary file"));
    assert!(items[1].get("content").is_none());
    assert_eq!(items[2]["content"], "third\n");
}

/// Unknown arguments and bad input are 400 with a message (a token in the URL says to use
/// the header: A-1); unknown repositories 404.
#[tokio::test]
async fn r6_errors_are_clear() {
    let s = server().await;
    let (status, body) = s
        .get("/sourcegraph/api/read?repo=test/api&path=a.md&access_token=secret")
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`Authorization: Bearer <token>` header"),
        "{body}"
    );
    let (status, body) = s
        .get("/sourcegraph/api/read?repo=test/api&path=a.md&colour=red")
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{body}"
    );
    let (status, body) = s
        .get("/sourcegraph/api/read?repo=test/api&path=../etc/passwd")
        .await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (400, Some("invalid_argument")),
        "{body}"
    );
    let (status, _) = s.get("/sourcegraph/api/read?repo=nobody/x&path=a.md").await;
    assert_eq!(status, 404);
    let (status, body) = s
        .post(
            "/sourcegraph/api/read_many",
            json!({"repo": "test/api", "files": [], "extra": 1}),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"].as_str().unwrap().contains("extra"),
        "{body}"
    );
}

/// S-5, S-6, S-7, SPEC §9 routes: discovery, resolve, list, availability.
#[tokio::test]
async fn s5_s6_s7_navigation_routes() {
    let s = server().await;
    let (status, body) = s.get("/sourcegraph/api/discovery").await;
    assert_eq!(status, 200);
    assert_eq!(body["repositories"][0]["name"], "test/api");
    assert_eq!(body["repositories"][0]["head"], s.head);
    let (_, body) = s
        .post(
            "/sourcegraph/api/resolve",
            json!({"repo": "test/api", "revision": "main"}),
        )
        .await;
    assert_eq!(body["commit"], s.head);
    let (_, body) = s.get("/sourcegraph/api/list?repo=test/api").await;
    let paths: Vec<&str> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.md", "bin.dat"]);
    let (_, body) = s
        .get("/sourcegraph/api/availability?repo=test/api&revision=main")
        .await;
    assert_eq!(
        (body["readable"].as_bool(), body["commit"].as_str()),
        (Some(true), Some(s.head.as_str()))
    );
}

/// W-6, W-3, SPEC §9: `availability` with `include_plugins` answers plain JSON: a `plugins`
/// array (each entry untrusted text plus its directory, its `input_schema` included), never
/// Rust's `{"Ok": …}` encoding; without `include_plugins` there is no plugin key at all.
#[tokio::test]
async fn w6_availability_plugins_plain_json() {
    let echo = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../wasmplugin/testdata/echo.sourcegraph.wasm"
    ))
    .unwrap();
    let s = server_with(&[("docs/echo.sourcegraph.wasm", &echo), ("docs/a.md", b"a\n")]).await;
    let (status, body) = s
        .post(
            "/sourcegraph/api/availability",
            json!({"repo": "test/api", "include_plugins": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let plugins = body["plugins"].as_array().expect("a plugins array");
    assert_eq!(plugins.len(), 1, "{body}");
    assert_eq!(plugins[0]["name"], "echo");
    assert_eq!(plugins[0]["directory"], "docs");
    assert!(plugins[0]["operations"].is_array(), "{body}");
    // W-3: the metadata's input_schema, as the compact JSON text every face shows.
    assert_eq!(
        plugins[0]["input_schema"],
        json!({"type": "object"}).to_string(),
        "{body}"
    );
    assert!(body.get("plugins_error").is_none(), "{body}");
    assert!(body.get("Ok").is_none() && plugins[0].get("Ok").is_none());

    let (_, body) = s.get("/sourcegraph/api/availability?repo=test/api").await;
    let object = body.as_object().unwrap();
    assert!(
        !object.contains_key("plugins") && !object.contains_key("plugins_error"),
        "{body}"
    );
    assert_eq!(body["readable"], true);
}

/// The samples of a Prometheus text exposition, by series (`name{labels}`). Checks the
/// format on the way: every sample is a number under a `# TYPE` of its family.
fn samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    let mut typed = std::collections::HashSet::new();
    let mut samples = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').expect("TYPE names a kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                typed.insert(family.to_owned()),
                "family typed twice: {line}"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let name = series.split('{').next().unwrap_or(series);
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "sample before its TYPE: {line}");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        samples.insert(series.to_owned(), value);
    }
    samples
}

/// O-4, R-7, W-38: health, readiness and metrics. Base queries, enrichment, sync and index
/// builds each have a histogram that moves with the calls; cache hits sit beside lookups.
#[tokio::test]
async fn o4_probes_and_metrics() {
    let s = server().await;
    assert_eq!(s.raw("/healthz").await.0, 200);
    assert_eq!(
        s.raw("/readyz").await.0,
        503,
        "not ready before start-up finished"
    );
    s.readiness.set_ready();
    assert_eq!(s.raw("/readyz").await.0, 200);
    let before = samples(&s.raw("/metrics").await.1);
    assert_eq!(
        before["csg_index_build_duration_seconds_count"], 1.0,
        "{before:?}"
    );
    assert_eq!(before["csg_sync_duration_seconds_count"], 0.0);

    s.get("/sourcegraph/api/read?repo=test/api&path=a.md").await;
    for _ in 0..2 {
        s.get("/sourcegraph/api/search?query=second&repo=test/api")
            .await;
    }
    let (status, body) = s
        .post_as(
            Some(&s.ops),
            "/sourcegraph/api/prepare",
            json!({"repo": "test/api", "action": "sync"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, text) = s.raw("/metrics").await;
    let after = samples(&text);
    assert_eq!(
        after["csg_queries_total{operation=\"read\"}"], 1.0,
        "{text}"
    );
    assert_eq!(
        after["csg_query_duration_seconds_count{operation=\"read\"}"],
        1.0
    );
    assert_eq!(
        after["csg_query_duration_seconds_count{operation=\"search\"}"],
        2.0
    );
    assert_eq!(
        after["csg_query_duration_seconds_bucket{operation=\"search\",le=\"+Inf\"}"],
        2.0
    );
    // Cumulative buckets: never falling, ending at the count.
    let read_buckets: Vec<f64> = after
        .iter()
        .filter(|(k, _)| k.starts_with("csg_query_duration_seconds_bucket{operation=\"read\""))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        read_buckets.len(),
        service::LATENCY_BUCKETS_MICROS.len() + 1
    );
    assert!(read_buckets.iter().all(|&v| v <= 1.0) && read_buckets.contains(&1.0));
    assert!(after["csg_query_duration_seconds_sum{operation=\"read\"}"] > 0.0);
    assert_eq!(
        after["csg_enrichment_duration_seconds_count"], 0.0,
        "W-38: the JSON API reads base only, and nothing else counts as enrichment"
    );
    assert_eq!(after["csg_sync_duration_seconds_count"], 1.0);
    assert_eq!(before["csg_prepare_duration_seconds_count"], 0.0);
    assert_eq!(after["csg_prepare_duration_seconds_count"], 1.0);
    assert_eq!(after["csg_sync_failures_total"], 0.0);
    assert_eq!(
        after["csg_search_result_cache_hits_total"], 1.0,
        "the repeat"
    );
    assert_eq!(after["csg_searches_total"], 2.0);
    assert!(after.contains_key("csg_plugin_catalog_hits_total"));
    assert!(after.contains_key("csg_auth_authenticated_total"));
}

/// S-1: `POST /sourcegraph/api/search` answers the hits with the full SHA, the cursor and the
/// query statistics; GET works with a query string; bad input is a 400 that says why.
#[tokio::test]
async fn s1_search_json() {
    let s = server().await;
    let (status, body) = s
        .post(
            "/sourcegraph/api/search",
            json!({"query": "second", "repo": "test/api"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["repos"],
        json!([{"repo": "test/api", "commit": s.head,
                "hits": [{"path": "a.md", "line": 2, "snippet": "second"}]}])
    );
    assert_eq!(body["next_cursor"], Value::Null);
    assert_eq!(body["stats"]["total_hits"], 1);
    assert!(body["stats"]["candidate_files"].as_u64().unwrap() >= 1);
    assert!(body["stats"]["files_verified"].as_u64().unwrap() >= 1);
    assert!(body["stats"]["elapsed_us"].is_u64());

    let (status, body) = s.get("/sourcegraph/api/search?query=third&limit=5").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["repos"][0]["hits"][0]["line"], 3);

    let (status, body) = s
        .post(
            "/sourcegraph/api/search",
            json!({"query": "a(", "regex": true}),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid regular expression"),
        "{body}"
    );
    let (status, body) = s
        .post("/sourcegraph/api/search", json!({"query": "x", "bogus": 1}))
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"].as_str().unwrap().contains("bogus"),
        "{body}"
    );

    // Issue 33: history types and revisions name one repository; text with the token
    // prefix is an ordinary query.
    for args in [
        json!({"query": "x", "type": "diff"}),
        json!({"query": "x", "revision": "HEAD"}),
    ] {
        let (status, body) = s.post("/sourcegraph/api/search", args.clone()).await;
        assert_eq!(status, 400, "{args}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("repo"),
            "{body}"
        );
    }
    let (status, body) = s
        .post(
            "/sourcegraph/api/search",
            json!({"query": "x", "type": "log"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.get("/sourcegraph/api/search?query=csg_session").await;
    assert_eq!(status, 200, "{body}");

    let (_, metrics) = s.raw("/metrics").await;
    assert!(metrics.contains("csg_searches_total 3"), "{metrics}");
    assert!(metrics.contains("csg_index_builds_total 1"), "{metrics}");
}

/// A-3, O-5, SPEC §9: `prepare` needs the capability (loopback or not); it rebuilds the index
/// (JSON, or NDJSON progress lines then the result), pins and unpins, and refuses bad actions
/// with a message listing the valid ones.
#[tokio::test]
async fn a3_o5_prepare() {
    let s = server().await;
    let reindex = json!({"repo": "test/api", "action": "reindex"});
    for (token, refused) in [(None, 401), (Some(s.reader.as_str()), 403)] {
        let (status, body) = s
            .post_as(token, "/sourcegraph/api/prepare", reindex.clone())
            .await;
        assert_eq!(status, refused, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("prepare capability"),
            "{body}"
        );
    }
    let ops = Some(s.ops.as_str());
    let (status, body) = s
        .post_as(
            ops,
            "/sourcegraph/api/prepare",
            json!({"repo": "test/api", "action": "reindex"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"], json!(s.head));
    assert_eq!(
        body["index"]["read"], 2,
        "a rebuild reads every file: {body}"
    );
    assert_eq!(body["index"]["reused"], 0);

    let streamed = s
        .client
        .post(format!("{}/sourcegraph/api/prepare", s.base))
        .bearer_auth(&s.ops)
        .header("accept", "application/x-ndjson")
        .json(&json!({"repo": "test/api", "action": "reindex"}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    assert_eq!(
        streamed.headers()["content-type"],
        "application/x-ndjson",
        "streamed"
    );
    let text = streamed.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{text}");
    assert_eq!(
        lines[lines.len() - 2]["progress"],
        json!({"done": 2, "total": 2})
    );
    assert_eq!(lines.last().unwrap()["result"]["action"], "reindex");
    for line in text.lines().take(lines.len() - 1) {
        let (done, total) = line
            .strip_prefix("{\"progress\":{\"done\":")
            .and_then(|rest| rest.strip_suffix('}').and_then(|r| r.strip_suffix('}')))
            .and_then(|rest| rest.split_once(",\"total\":"))
            .unwrap_or_else(|| panic!("a progress line: {line}"));
        assert!(done.parse::<u64>().unwrap() <= total.parse::<u64>().unwrap());
    }

    let (status, body) = s
        .post_as(
            ops,
            "/sourcegraph/api/prepare",
            json!({"repo": "test/api", "action": "pin", "revision": "main"}),
        )
        .await;
    assert_eq!((status, &body["commit"]), (200, &json!(s.head)), "{body}");
    for (body, expected) in [
        (
            json!({"repo": "test/api", "action": "pin"}),
            "`revision` is required",
        ),
        (
            json!({"repo": "test/api", "action": "explode"}),
            "sync, pin, unpin, reindex",
        ),
    ] {
        let (status, answer) = s.post_as(ops, "/sourcegraph/api/prepare", body).await;
        assert_eq!(status, 400);
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{answer}");
    }
    let (status, _) = s
        .post_as(
            ops,
            "/sourcegraph/api/prepare",
            json!({"repo": "nobody/here", "action": "reindex"}),
        )
        .await;
    assert_eq!(status, 404);
    // A streamed answer is refused with its status too, before any line is sent.
    let streamed = s
        .client
        .post(format!("{}/sourcegraph/api/prepare", s.base))
        .bearer_auth(&s.reader)
        .header("accept", "application/x-ndjson")
        .json(&reindex)
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 403);
    // Once the capability is checked the stream starts: a later failure is its last line.
    let streamed = s
        .client
        .post(format!("{}/sourcegraph/api/prepare", s.base))
        .bearer_auth(&s.ops)
        .header("accept", "application/x-ndjson")
        .json(&json!({"repo": "nobody/here", "action": "reindex"}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let text = streamed.text().await.unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(last["error"]["kind"], "not_found", "{text}");
    assert_eq!(last.as_object().map(|o| o.len()), Some(1), "{text}");
}

/// A-3, SPEC §9: `POST /sourcegraph/api/repos` registers a remote repository for a caller
/// with the prepare capability, fetches and indexes it; again is a no-op; local sources are
/// refused; a source that cannot be fetched leaves nothing registered.
#[tokio::test]
async fn a3_register_a_remote_repository() {
    let s = server().await;
    let remote = SourceRepo::with_files(&[("r.md", b"# remote marker\n")]);
    let http = remote.serve_http();
    let add = json!({"name": "acme/remote", "source": http.url()});
    for (token, refused) in [(None, 401), (Some(s.reader.as_str()), 403)] {
        let (status, body) = s
            .post_as(token, "/sourcegraph/api/repos", add.clone())
            .await;
        assert_eq!(status, refused, "{body}");
    }
    let ops = Some(s.ops.as_str());
    let local = json!({"name": "acme/local", "source": remote.source()});
    let (status, body) = s.post_as(ops, "/sourcegraph/api/repos", local).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("csg repo add"),
        "{body}"
    );

    let (status, body) = s.post_as(ops, "/sourcegraph/api/repos", add.clone()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["created"], true);
    assert_eq!(body["head"], json!(remote.head()));
    assert_eq!(body["private"], false);
    assert_eq!(body["index"]["documents"], 1, "{body}");
    let (status, body) = s.post_as(ops, "/sourcegraph/api/repos", add).await;
    assert_eq!((status, &body["created"]), (200, &json!(false)), "{body}");
    let (status, body) = s
        .get("/sourcegraph/api/read?repo=acme/remote&path=r.md")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], "# remote marker\n");
    let (_, body) = s
        .get("/sourcegraph/api/search?query=marker&repo=acme/remote")
        .await;
    assert!(body.to_string().contains("r.md"), "indexed: {body}");

    let secret = json!({"name": "acme/secret", "source": http.url(), "private": true});
    let (status, body) = s.post_as(ops, "/sourcegraph/api/repos", secret).await;
    assert_eq!((status, &body["private"]), (201, &json!(true)), "{body}");
    let (status, _) = s
        .get("/sourcegraph/api/read?repo=acme/secret&path=r.md")
        .await;
    assert_eq!(status, 404, "A-2: private to everyone not granted it");

    let gone = json!({"name": "acme/gone", "source": "http://127.0.0.1:9/none.git"});
    let (status, body) = s.post_as(ops, "/sourcegraph/api/repos", gone).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("nothing was registered"),
        "{body}"
    );
    let (_, discovery) = s.get("/sourcegraph/api/discovery").await;
    let names: Vec<&str> = discovery["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"acme/remote") && !names.contains(&"acme/gone"),
        "{names:?}"
    );
}

/// The log, commit, diff and blame routes: commits with full SHAs, strict arguments.
#[tokio::test]
async fn log_json() {
    let s = server().await;
    let (status, body) = s.get("/sourcegraph/api/log?repo=test/api&limit=5").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"], json!(s.head));
    assert_eq!(body["commits"][0]["commit"], json!(s.head));
    assert_eq!(body["next_cursor"], Value::Null, "one commit only: {body}");
    let (status, body) = s.get("/sourcegraph/api/log?repo=test/api&depth=1").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s
        .get(&format!(
            "/sourcegraph/api/commit?repo=test/api&revision={}",
            s.head
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"], json!(s.head));
    assert_eq!(body["total_files"], 2, "{body}");
    assert_eq!(body["files"][0]["path"], "a.md");
    assert_eq!(
        body["files"][1]["added"],
        Value::Null,
        "bin.dat is binary: {body}"
    );
    let (status, body) = s
        .get(&format!(
            "/sourcegraph/api/diff?repo=test/api&base={0}&head={0}",
            s.head
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_files"], 0, "{body}");
    let (status, body) = s
        .get("/sourcegraph/api/blame?repo=test/api&path=a.md")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ranges"][0]["commit"], json!(s.head));
    assert_eq!(
        (
            &body["ranges"][0]["start_line"],
            &body["ranges"][0]["end_line"]
        ),
        (&json!(1), &json!(3))
    );
}

/// Issue 12: the outline, definitions and references routes answer JSON with full SHAs;
/// bad arguments are 400.
#[tokio::test]
async fn navigation_json() {
    let s = server_with(&[(
        "src/main.py",
        b"class Shop:\n    def open(self):\n        return 1\n\n\nShop().open()\n",
    )])
    .await;
    let (status, body) = s
        .get("/sourcegraph/api/outline?repo=test/api&path=src/main.py")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"], json!(s.head));
    assert_eq!(body["source"], "index");
    assert_eq!(body["lang"], "python");
    assert_eq!(body["symbols"][1]["name"], "open");
    assert_eq!(body["symbols"][1]["kind"], "method");
    assert_eq!(body["symbols"][1]["parent"], 0);
    assert_eq!(body["symbols"][1]["depth"], 1);
    assert_eq!(
        (
            &body["symbols"][0]["start_line"],
            &body["symbols"][0]["end_line"]
        ),
        (&json!(1), &json!(3))
    );
    let (status, body) = s.get("/sourcegraph/api/definitions?symbol=open").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"], 1, "{body}");
    assert_eq!(body["definitions"][0]["path"], "src/main.py");
    assert_eq!(body["definitions"][0]["parent_name"], "Shop");
    assert_eq!(body["definitions"][0]["commit"], json!(s.head));
    let (status, body) = s
        .get("/sourcegraph/api/references?symbol=Shop&repo=test/api")
        .await;
    assert_eq!(status, 200, "{body}");
    let refs = &body["repos"][0]["references"];
    assert_eq!(refs[0]["line"], 1, "{body}");
    assert_eq!(refs[0]["definition"], true);
    assert_eq!(refs[1]["line"], 6);
    assert_eq!(refs[1]["definition"], false);
    for bad in [
        "/sourcegraph/api/definitions?symbol=open&cursor=x",
        "/sourcegraph/api/definitions?symbol=",
        "/sourcegraph/api/outline?repo=test/api",
    ] {
        let (status, body) = s.get(bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

/// The shape of a `/metrics` exposition: every `#` line as it is, every sample as its series
/// (`name{labels}`) without the value, which moves with timing.
fn metrics_shape(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.starts_with('#') {
                line
            } else {
                line.rsplit_once(' ').map_or(line, |(series, _)| series)
            }
        })
        .fold(String::new(), |mut shape, line| {
            shape.push_str(line);
            shape.push('\n');
            shape
        })
}

/// O-4: the whole `/metrics` exposition of a fresh service — every family's help and type,
/// every series, in order — is pinned, so a change to how it is rendered shows here. The
/// expected shape is `tests/metrics_shape.txt`; the probes' bodies are pinned beside it.
#[tokio::test]
async fn o4_metrics_shape_and_probe_bodies() {
    let s = server().await;
    assert_eq!(s.raw("/healthz").await, (200, "ok\n".to_owned()));
    assert_eq!(s.raw("/readyz").await, (503, "starting\n".to_owned()));
    s.readiness.set_ready();
    assert_eq!(s.raw("/readyz").await, (200, "ready\n".to_owned()));
    let response = s
        .client
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4"
    );
    let text = response.text().await.unwrap();
    let shape = metrics_shape(&text);
    let expected = include_str!("metrics_shape.txt");
    assert!(
        shape == expected,
        "the /metrics shape changed; the shape now is:\n{shape}"
    );
}

/// P-12: the plugin tools' first route names answer as the tools do and take no arguments:
/// the status ignores a query string, the reload needs no body (`csg plugins reload` sends
/// none) and is refused by its capability first, then by the disabled subsystem (a 400
/// that says so, not one about a missing body).
#[tokio::test]
async fn p12_plugin_routes_take_no_arguments() {
    let s = server().await;
    let (status, body) = s.get("/sourcegraph/api/plugins/status?whatever=1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "disabled", "{body}");
    let (_, tool) = s.get("/sourcegraph/api/plugin_status").await;
    assert_eq!(body, tool, "the route and the tool answer alike");
    for (token, refused) in [(None, 401), (Some(&s.reader), 403)] {
        let mut request = s
            .client
            .post(format!("{}/sourcegraph/api/plugins/reload", s.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), refused);
    }
    let response = s
        .client
        .post(format!("{}/sourcegraph/api/plugins/reload", s.base))
        .bearer_auth(&s.ops)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("server plugins are disabled"),
        "{body}"
    );
}

/// S-8 over the JSON API: `POST /sourcegraph/api/repos` takes `index_branches` (checked
/// before anything is registered, at most 64) and answers them; `search` with `revision`
/// answers at that commit and names it.
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
        let ops = Some(s.ops.as_str());
        let (status, body) = s
            .post_as(
                ops,
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
            .post_as(
                ops,
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
