//! O-4, P-23: the probes never wait on the server-plugin interpreter, and a wedged interpreter
//! shows in `/metrics`. A test binary of its own: the wedging hook keeps the one CPython of the
//! process (and its interpreter lock) busy for a while, which would stall any other test's
//! plugins.

use httpserver::Readiness;
use serde_json::{Map, Value, json};
use service::{CallContext, HostConfig, PluginHost, Service, ServiceConfig};
use std::time::{Duration, Instant};
use testgit::SourceRepo;

/// A hook stuck in C code *holding the interpreter lock*: `ctypes.PyDLL` calls do not release
/// it, and an exception raised into the thread is only seen back in Python. It writes `marker`
/// first, so the test knows the interpreter is taken. It ends by itself after 20 s, so the test
/// process is not kept busy forever.
fn wedging_plugin(marker: &std::path::Path) -> String {
    format!(
        "import ctypes\n\
         def on_tool_call(call):\n    \
             open({marker:?}, 'w').close()\n    \
             ctypes.PyDLL(None).sleep(20)\n",
        marker = marker.to_str().expect("a UTF-8 temp path"),
    )
}

/// The Prometheus samples of `text`, by series.
fn samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// GET `path`, which must answer 200 within the client's 2 s timeout.
async fn prompt(client: &reqwest::Client, base: &str, path: &str) -> String {
    let started = Instant::now();
    let response = client
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path} did not answer promptly: {e}"));
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let body = response.text().await.expect("a body");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{path} took {:?}",
        started.elapsed()
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o4_p23_probes_answer_while_the_interpreter_is_wedged_and_metrics_show_the_wedge() {
    let plugins = tempfile::tempdir().unwrap();
    // Not a `.py` file: the host does not load it.
    let marker = plugins.path().join("wedge-started");
    std::fs::write(plugins.path().join("wedge.py"), wedging_plugin(&marker)).unwrap();
    let mut config = HostConfig::new(plugins.path().to_path_buf());
    config.hook_timeout = Duration::from_millis(300);
    // A long grace: a second call gives up waiting for the interpreter (after the hook time
    // limit) well before the wedge is declared.
    config.wedge_grace = Duration::from_millis(1500);
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    assert_eq!(host.state().name(), "active");
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    let service =
        Service::with_server_plugins(source.store("test/api", ""), ServiceConfig::default(), host);
    let readiness = Readiness::default();
    readiness.set_ready();
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), readiness),
        service.clone(),
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();

    let before = samples(&prompt(&client, &base, "/metrics").await);
    assert_eq!(before["csg_server_plugins_state{state=\"active\"}"], 1.0);
    assert_eq!(before["csg_server_plugins_state{state=\"wedged\"}"], 0.0);

    // A tool call runs the hook, which takes the interpreter and never gives it back.
    let wedging = {
        let service = service.clone();
        tokio::spawn(async move {
            let Value::Object(arguments) = json!({"query": "x"}) else {
                unreachable!()
            };
            service
                .rewrite_tool_call(&CallContext::default(), "search", arguments)
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the hook never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Interrupted or not yet: the interpreter (and its lock) is taken now.
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/sourcegraph/api/plugins/status",
    ] {
        prompt(&client, &base, path).await;
    }
    // Another call waits for the interpreter only as long as a hook may run, then answers as
    // without server plugins; the wait is counted.
    let started = Instant::now();
    let Value::Object(arguments) = json!({"query": "y"}) else {
        unreachable!()
    };
    let (_, second) = service
        .rewrite_tool_call(&CallContext::default(), "search", arguments)
        .await;
    assert!(second.is_none());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let waited = samples(&prompt(&client, &base, "/metrics").await);
    assert_eq!(
        waited["csg_server_plugins_interpreter_wait_timeouts_total"], 1.0,
        "{waited:?}"
    );

    // The watchdog gives up on it: the call answers as without server plugins.
    let (arguments, rewrite): (Map<String, Value>, _) =
        tokio::time::timeout(Duration::from_secs(10), wedging)
            .await
            .expect("the watchdog answers the call")
            .unwrap();
    assert!(rewrite.is_none());
    assert_eq!(arguments["query"], "x");
    assert_eq!(service.server_plugins().state().name(), "wedged");

    assert_eq!(prompt(&client, &base, "/healthz").await, "ok\n");
    assert_eq!(prompt(&client, &base, "/readyz").await, "ready\n");
    let text = prompt(&client, &base, "/metrics").await;
    let after = samples(&text);
    assert_eq!(
        after["csg_server_plugins_state{state=\"wedged\"}"], 1.0,
        "{text}"
    );
    assert_eq!(after["csg_server_plugins_state{state=\"active\"}"], 0.0);
    assert!(
        text.contains("# TYPE csg_server_plugins_state gauge"),
        "{text}"
    );
    let status: Value =
        serde_json::from_str(&prompt(&client, &base, "/sourcegraph/api/plugins/status").await)
            .unwrap();
    assert_eq!(status["state"], "wedged", "{status}");
}
