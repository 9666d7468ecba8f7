//! P-12, A-3: `GET /sourcegraph/api/plugins/status` over real HTTP on 127.0.0.1, behind the
//! real access layer: tracebacks and host paths for operators only.

use httpserver::Readiness;
use serde_json::{Value, json};
use service::{CallContext, HostConfig, PluginHost, Service, ServiceConfig};
use testgit::SourceRepo;

/// One plugin rejected at load with a traceback through the standard library
/// (`/usr/lib/python3.11/json/…`), one whose `on_tool_call` fails with an absolute path in
/// its message.
const LEAKY: [(&str, &str); 2] = [
    ("a_load.py", "import json\njson.loads('{')\n"),
    (
        "b_hook.py",
        "def on_tool_call(call):\n    open('/nonexistent/csg-secret/key.txt')\n",
    ),
];

#[tokio::test]
async fn p12_http_plugin_status_shows_tracebacks_and_paths_to_operators_only() {
    let plugins = tempfile::tempdir().unwrap();
    for (name, source) in LEAKY {
        std::fs::write(plugins.path().join(name), source).unwrap();
    }
    let config = HostConfig::new(plugins.path().to_path_buf());
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    let store = source.store("test/api", "");
    let users = access::AccessStore::open(&store.metadata_path()).unwrap();
    users.add_user("ops", true).unwrap();
    users.add_user("reader", false).unwrap();
    let ops = users.create_token("ops", None).unwrap().secret;
    let reader = users.create_token("reader", None).unwrap().secret;
    let service = Service::with_server_plugins(store, ServiceConfig::default(), host);
    // b_hook.py's on_tool_call fails and is disabled with its message as the reason.
    let Value::Object(arguments) = json!({"query": "x"}) else {
        unreachable!()
    };
    let (_, rewrite) = service
        .rewrite_tool_call(&CallContext::default(), "search", arguments)
        .await;
    assert!(rewrite.is_none());
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), Readiness::default()),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    let client = reqwest::Client::new();
    let directory = plugins.path().to_str().unwrap();

    for (token, full) in [(None, false), (Some(&reader), false), (Some(&ops), true)] {
        let who = if full {
            "ops"
        } else {
            token.map_or("anonymous", |_| "reader")
        };
        let mut request = client.get(format!("{base}/sourcegraph/api/plugins/status"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{who}");
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["state"], "active", "{who}: {text}");
        assert_eq!(body["rejected"][0]["file"], "a_load.py", "{who}: {text}");
        let rejected = body["rejected"][0]["reasons"][0].as_str().unwrap();
        assert!(
            rejected.contains("JSONDecodeError: Expecting"),
            "{who}: {text}"
        );
        assert_eq!(body["disabled"][0]["file"], "b_hook.py", "{who}: {text}");
        assert_eq!(body["disabled"][0]["hook"], "on_tool_call", "{who}: {text}");
        assert_eq!(
            body["hook_failures"],
            json!([{"file": "b_hook.py", "hook": "on_tool_call", "count": 1}]),
            "{who}: {text}"
        );
        let disabled = body["disabled"][0]["reason"].as_str().unwrap();
        assert!(disabled.starts_with("FileNotFoundError"), "{who}: {text}");
        if full {
            assert_eq!(body["detail"], "full", "{who}: {text}");
            assert!(
                rejected.contains("Traceback (most recent call last)")
                    && rejected.contains("/usr/lib/python3"),
                "{who}: {text}"
            );
            assert!(
                disabled.contains("'/nonexistent/csg-secret/key.txt'"),
                "{who}: {text}"
            );
        } else {
            assert_eq!(body["detail"], "summary", "{who}: {text}");
            for leak in [
                "Traceback",
                "File \\\"",
                "/usr/lib",
                "/nonexistent",
                directory,
            ] {
                assert!(!text.contains(leak), "{who}: {leak:?} in {text}");
            }
            assert!(
                disabled.ends_with("No such file or directory: '<path>'"),
                "{who}: {text}"
            );
        }
    }
    // Issue 29 point 11: the failures of each file's hook are in /metrics too.
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth(&ops)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "csg_server_plugin_hook_failures_total{file=\"b_hook.py\",hook=\"on_tool_call\"} 1\n"
        ),
        "{metrics}"
    );
}
