//! Server plugins as an MCP client sees them (SPEC P-10, P-12, P-20, P-22): real plugin files,
//! the real embedded Python, a real repository and index, the Streamable HTTP endpoint on
//! 127.0.0.1 and the rmcp client.

use mcpserver::{McpConfig, http_service};
use pyplugin::{HostConfig, PluginHost};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use service::{Caller, Principal};
use testgit::SourceRepo;
use tokio_util::sync::CancellationToken;

const REPO: &str = "test/repo";
const GUIDE: &str = "# Guide\nkubernetes deploy\nline three\n";

struct Fixture {
    _source: SourceRepo,
    /// The MCP endpoint's URL.
    url: String,
    plugins: tempfile::TempDir,
    client: RunningService<RoleClient, ()>,
    commit: String,
    shutdown: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A token's user with the prepare capability.
fn operator() -> Caller {
    Caller::User(Principal {
        user: "ops".into(),
        prepare: true,
        token_id: 1,
        provider: None,
    })
}

/// A server whose requests all come from `caller` (what the HTTP access layer would have put
/// into them; without it a request is anonymous).
async fn start(files: &[(&str, &str)], caller: Option<Caller>, enabled: bool) -> Fixture {
    let plugins = tempfile::tempdir().unwrap();
    for (name, source) in files {
        std::fs::write(plugins.path().join(name), source).unwrap();
    }
    let source = SourceRepo::new();
    source.write(&[
        ("docs/guide.md", GUIDE.as_bytes()),
        ("docs/ops.md", b"kubernetes deploy runbook\n"),
        ("src/lib.rs", b"pub fn deploy() {}\n"),
    ]);
    source.git(&["add", "."]);
    let commit = source.commit_index("initial");
    let mut host_config = HostConfig::new(plugins.path().to_path_buf());
    host_config.enabled = enabled;
    host_config.tools = std::sync::Arc::new(tools::plugin_catalog(&tools::Limits::new(
        &service::ServiceConfig::default(),
    )));
    let host = tokio::task::spawn_blocking(move || PluginHost::start(host_config))
        .await
        .unwrap();
    let service = service::Service::with_server_plugins(
        source.store(REPO, ""),
        service::ServiceConfig::default(),
        host,
    );
    service.index(REPO.into(), |_| {}).await.expect("index");
    let shutdown = CancellationToken::new();
    let mut router = axum::Router::new().nest_service(
        "/sourcegraph/mcp",
        http_service(service, McpConfig::default(), shutdown.clone()),
    );
    if let Some(caller) = caller {
        router = router.layer(axum::middleware::from_fn(
            move |mut request: axum::extract::Request, next: axum::middleware::Next| {
                request.extensions_mut().insert(caller.clone());
                next.run(request)
            },
        ));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    let url = format!("http://{addr}/sourcegraph/mcp");
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
            .await
            .expect("client connects");
    Fixture {
        _source: source,
        url: url.clone(),
        plugins,
        client,
        commit,
        shutdown,
    }
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// `read` of `path` in the test repository: the result and its text blocks.
async fn read(f: &Fixture, repo: &str, path: &str) -> (CallToolResult, Vec<String>) {
    let result = f
        .client
        .call_tool(call("read", json!({"repo": repo, "path": path})))
        .await
        .unwrap();
    let blocks = texts(&result);
    (result, blocks)
}

fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .map(|block| block.as_text().unwrap().text.clone())
        .collect()
}

#[tokio::test]
async fn p10_an_argument_rewrite_is_disclosed_with_both_sides_and_the_file() {
    let f = start(
        &[(
            "10_redirect.py",
            "def on_tool_call(call):\n    a = call[\"arguments\"]\n    if call[\"tool\"] == \"read\" and a.get(\"path\") == \"old/guide.md\":\n        return {\"arguments\": dict(a, path=\"docs/guide.md\")}\n",
        )],
        None,
        true,
    )
    .await;
    let (result, blocks) = read(&f, REPO, "old/guide.md").await;
    assert_eq!(result.is_error, Some(false), "{blocks:?}");
    assert!(blocks[0].ends_with(&format!("\n\n{GUIDE}")), "{blocks:?}");
    assert_eq!(
        blocks[1],
        format!(
            "ArgumentsRewritten:\nPlugin: 10_redirect.py\n\
             Original: {{\"path\":\"old/guide.md\",\"repo\":\"{REPO}\"}}\n\
             Effective: {{\"path\":\"docs/guide.md\",\"repo\":\"{REPO}\"}}\n"
        )
    );
    // A call the plugin leaves alone discloses nothing.
    let plain = f
        .client
        .call_tool(call("read", json!({"repo": REPO, "path": "docs/guide.md"})))
        .await
        .unwrap();
    assert_eq!(texts(&plain).len(), 1);
}

#[tokio::test]
async fn p10_a_rewrite_the_tool_cannot_parse_is_discarded() {
    let f = start(
        &[(
            "bad.py",
            "def on_tool_call(call):\n    return {\"arguments\": {\"bogus\": 1}}\n",
        )],
        None,
        true,
    )
    .await;
    let (_, blocks) = read(&f, REPO, "docs/guide.md").await;
    assert_eq!(
        blocks.len(),
        1,
        "no disclosure of a discarded rewrite: {blocks:?}"
    );
    assert!(blocks[0].ends_with(GUIDE));
}

#[tokio::test]
async fn p22_query_aliases_rewrite_a_search_and_say_so() {
    let f = start(
        &[("aliases.py", "QUERY_ALIASES = {\"k8s\": \"kubernetes\"}\n")],
        None,
        true,
    )
    .await;
    let result = f
        .client
        .call_tool(call("search", json!({"query": "K8s deploy", "repo": REPO})))
        .await
        .unwrap();
    let blocks = texts(&result);
    assert!(
        blocks[0].contains("docs/guide.md:2: kubernetes deploy"),
        "{blocks:?}"
    );
    assert!(blocks[0].contains("docs/ops.md:1:"), "{blocks:?}");
    assert_eq!(
        blocks[1],
        format!(
            "ArgumentsRewritten:\nPlugin: aliases.py (QUERY_ALIASES)\n\
             Original: {{\"query\":\"K8s deploy\",\"repo\":\"{REPO}\"}}\n\
             Effective: {{\"query\":\"kubernetes deploy\",\"repo\":\"{REPO}\"}}\n"
        )
    );
}

#[tokio::test]
async fn p20_search_results_may_be_reordered_dropped_and_noted() {
    let f = start(
        &[(
            "rank.py",
            "def on_search_results(result):\n    hits = [h for h in result[\"hits\"] if h[\"path\"].startswith(\"docs/\")]\n    hits.sort(key=lambda h: h[\"path\"] != \"docs/ops.md\")\n    hits[0][\"note\"] = \"the runbook\"\n    return {\"hits\": hits}\n",
        )],
        None,
        true,
    )
    .await;
    let result = f
        .client
        .call_tool(call("search", json!({"query": "deploy", "repo": REPO})))
        .await
        .unwrap();
    let text = &texts(&result)[0];
    let ops = text.find("docs/ops.md:1:").expect(text);
    let guide = text.find("docs/guide.md:2:").expect(text);
    assert!(ops < guide, "{text}");
    assert!(
        text.contains("docs/ops.md:1: kubernetes deploy runbook\n  Note: the runbook\n"),
        "{text}"
    );
    assert!(!text.contains("src/lib.rs:1:"), "dropped: {text}");
}

#[tokio::test]
async fn p20_read_notes_come_as_their_own_block_and_never_replace_the_body() {
    let f = start(
        &[(
            "notes.py",
            "def on_read_result(result):\n    item = result[\"items\"][0]\n    item[\"text\"] = \"tampered\"\n    return {\"notes\": result[\"notes\"] + [\"Owner: docs team (\" + result[\"commit\"][:7] + \")\"]}\n",
        )],
        None,
        true,
    )
    .await;
    let (_, blocks) = read(&f, REPO, "docs/guide.md").await;
    assert!(blocks[0].ends_with(&format!("\n\n{GUIDE}")), "{blocks:?}");
    assert_eq!(
        blocks[1],
        format!("OperatorNotes:\n- Owner: docs team ({})\n", &f.commit[..7])
    );
}

#[tokio::test]
async fn p22_aliases_name_repositories_and_presets_become_tools() {
    let f = start(
        &[(
            "tables.py",
            &format!(
                "ALIASES = {{\"kb\": \"{REPO}\"}}\n\
                 TOOL_PRESETS = {{\"search_docs\": {{\"tool\": \"search\", \"description\": \"Search the handbook only.\", \"arguments\": {{\"repo\": \"kb\", \"path\": \"docs/**\"}}}}}}\n"
            ),
        )],
        None,
        true,
    )
    .await;
    let read = f
        .client
        .call_tool(call("read", json!({"repo": "kb", "path": "docs/guide.md"})))
        .await
        .unwrap();
    assert!(
        texts(&read)[0].starts_with(&format!("Repo: {REPO}\n")),
        "{:?}",
        texts(&read)
    );

    let tools = f.client.list_all_tools().await.unwrap();
    let preset = tools
        .iter()
        .find(|t| t.name == "search_docs")
        .expect("preset listed");
    assert_eq!(
        preset.description.as_deref(),
        Some("Search the handbook only.")
    );
    let properties = preset.input_schema["properties"].as_object().unwrap();
    assert!(properties.contains_key("query") && !properties.contains_key("path"));
    assert!(!properties.contains_key("repo"));

    let hits = f
        .client
        .call_tool(call("search_docs", json!({"query": "deploy"})))
        .await
        .unwrap();
    let text = &texts(&hits)[0];
    assert!(
        text.contains("docs/ops.md:1:") && !text.contains("src/lib.rs"),
        "{text}"
    );

    let fixed = f
        .client
        .call_tool(call(
            "search_docs",
            json!({"query": "deploy", "path": "src/**"}),
        ))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = fixed else {
        panic!("expected a JSON-RPC error, got {fixed:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(
        error.message.contains("`path` is fixed by this preset"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn p12_status_and_reload_over_mcp_for_operators_only() {
    let files = [("a.py", "def on_read_result(result):\n    return None\n")];
    let remote = start(&files, None, true).await;
    let status = remote
        .client
        .call_tool(call("plugin_status", json!({})))
        .await
        .unwrap();
    let text = &texts(&status)[0];
    assert!(
        text.starts_with("ServerPlugins: active\nEpoch: 1\n"),
        "{text}"
    );
    assert!(
        text.contains("- a.py hooks=on_read_result tables=- sha256="),
        "{text}"
    );
    assert!(
        text.contains(
            "Versions: HOST_CONTRACT_VERSION=1 HOOKS_VERSION=1 PRODUCT=context-sourcegraph"
        )
    );
    let refused = remote
        .client
        .call_tool(call("reload_plugins", json!({})))
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        texts(&refused)[0].contains("needs the prepare capability"),
        "{:?}",
        texts(&refused)
    );

    let local = start(&files, Some(operator()), true).await;
    std::fs::write(local.plugins.path().join("b.py"), "QUERY_ALIAS = {}\n").unwrap();
    let reloaded = local
        .client
        .call_tool(call("reload_plugins", json!({})))
        .await
        .unwrap();
    let text = &texts(&reloaded)[0];
    assert!(text.contains("Epoch: 2\n"), "{text}");
    assert!(
        text.contains("Rejected: 1\n- b.py: QUERY_ALIAS is not a table"),
        "{text}"
    );
}

#[tokio::test]
async fn p1_disabled_server_plugins_say_so() {
    let f = start(
        &[("a.py", "raise SystemExit(1)\n")],
        Some(operator()),
        false,
    )
    .await;
    let reload = f
        .client
        .call_tool(call("reload_plugins", json!({})))
        .await
        .unwrap();
    assert_eq!(reload.is_error, Some(true));
    assert!(
        texts(&reload)[0]
            .contains("server plugins are disabled: set SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true"),
        "{:?}",
        texts(&reload)
    );
    let status = f
        .client
        .call_tool(call("plugin_status", json!({})))
        .await
        .unwrap();
    assert!(texts(&status)[0].starts_with("ServerPlugins: disabled\nEnable:"));
}

/// Plugins whose failures name host paths: one rejected at load with a traceback through the
/// standard library (`/usr/lib/python3.11/json/…`), one whose `on_read_result` fails with an
/// absolute path in its message.
const LEAKY: [(&str, &str); 2] = [
    ("a_load.py", "import json\njson.loads('{')\n"),
    (
        "b_hook.py",
        "def on_read_result(result):\n    open('/nonexistent/csg-secret/key.txt')\n",
    ),
];

/// P-12, A-3: anonymous and read-only callers get file names, states and one-line reasons,
/// never a traceback or a host path; operators get the whole traceback and the paths.
#[tokio::test]
async fn p12_plugin_status_shows_tracebacks_and_paths_to_operators_only() {
    let reader = Caller::User(Principal {
        user: "reader".into(),
        prepare: false,
        token_id: 2,
        provider: None,
    });
    for (caller, full) in [
        (None, false),
        (Some(reader), false),
        (Some(operator()), true),
    ] {
        let who = format!("{caller:?}");
        let f = start(&LEAKY, caller, true).await;
        // The read runs b_hook.py's on_read_result, which fails and is disabled.
        let (result, _) = read(&f, REPO, "docs/guide.md").await;
        assert_ne!(result.is_error, Some(true), "{who}");
        let status = f
            .client
            .call_tool(call("plugin_status", json!({})))
            .await
            .unwrap();
        let text = &texts(&status)[0];
        assert!(text.starts_with("ServerPlugins: active\n"), "{who}: {text}");
        assert!(
            text.contains("Rejected: 1\n- a_load.py: json.decoder.JSONDecodeError: Expecting"),
            "{who}: {text}"
        );
        assert!(
            text.contains("- b_hook.py on_read_result: FileNotFoundError: [Errno 2]"),
            "{who}: {text}"
        );
        let directory = f.plugins.path().to_str().unwrap();
        if full {
            for detail in [
                "Traceback (most recent call last)",
                "/usr/lib/python3",
                "'/nonexistent/csg-secret/key.txt'",
                "Detail: full",
            ] {
                assert!(text.contains(detail), "{who}: no {detail:?} in {text}");
            }
        } else {
            for leak in [
                "Traceback",
                "File \"",
                "/usr/lib",
                "/nonexistent",
                directory,
            ] {
                assert!(!text.contains(leak), "{who}: {leak:?} in {text}");
            }
            assert!(
                text.contains("No such file or directory: '<path>'"),
                "{who}: {text}"
            );
            assert!(text.contains("Detail: summary"), "{who}: {text}");
        }
    }
}

/// P-8: `TOOL_PRESETS` argument values are checked at load against the schema `tools/list`
/// advertises for the target tool (types, ranges, nested keys): a bad value rejects the file
/// naming the entry, where before it failed only when an agent called the preset.
#[tokio::test]
async fn p8_preset_arguments_are_checked_against_the_tool_schema_at_load() {
    let preset = |name: &str, tool: &str, arguments: &str| {
        format!(
            "TOOL_PRESETS = {{\"{name}\": {{\"tool\": \"{tool}\", \"description\": \"d\", \"arguments\": {arguments}}}}}\n"
        )
    };
    let files = [
        (
            "a_type.py",
            preset("by_text", "search", "{\"limit\": \"20\"}"),
        ),
        ("b_range.py", preset("many", "search", "{\"limit\": 5000}")),
        ("c_bool.py", preset("rx", "search", "{\"regex\": \"yes\"}")),
        (
            "d_nested.py",
            preset(
                "pair",
                "read_many",
                "{\"files\": [{\"path\": \"a\", \"start_line\": 0}]}",
            ),
        ),
        (
            "e_empty.py",
            preset("none_at_all", "read_many", "{\"files\": []}"),
        ),
        (
            "f_good.py",
            preset(
                "search_docs",
                "search",
                "{\"path\": \"docs/**\", \"limit\": 20}",
            ),
        ),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, s)| (*n, s.as_str())).collect();
    let f = start(&files, Some(operator()), true).await;
    let status = {
        let result = f
            .client
            .call_tool(call("plugin_status", json!({})))
            .await
            .unwrap();
        texts(&result)[0].clone()
    };
    let reason = |file: &str| -> String {
        let prefix = format!("- {file}: ");
        status
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{file} was not rejected: {status}"))
    };
    let type_reason = reason("a_type.py");
    assert!(
        type_reason.contains("TOOL_PRESETS[\"by_text\"]")
            && type_reason.contains("\"limit\" must be int or None, not str"),
        "{type_reason}"
    );
    assert!(
        reason("b_range.py").contains("at most 1000, not 5000"),
        "{status}"
    );
    assert!(
        reason("c_bool.py").contains("must be bool or None, not str"),
        "{status}"
    );
    let nested = reason("d_nested.py");
    assert!(
        nested.contains("files\"[0].start_line must be at least 1, not 0"),
        "{nested}"
    );
    assert!(
        reason("e_empty.py").contains("must have at least 1 entry, not 0"),
        "{status}"
    );
    assert!(status.contains("Rejected: 5\n"), "{status}");
    assert!(!status.contains("- f_good.py: "), "{status}");
    let tools = f.client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "search_docs"));
    assert!(
        !tools
            .iter()
            .any(|t| t.name == "by_text" || t.name == "many")
    );
}

/// A 2026-07-28 `subscriptions/listen` stream for tool list changes, as raw SSE: its
/// acknowledgment is read off before it is returned.
async fn listen_for_tool_changes(url: &str) -> reqwest::Response {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"}}}}"#;
    let mut stream = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body)
        .send()
        .await
        .expect("the listen request is answered");
    assert_eq!(stream.status().as_u16(), 200);
    let first = next_event(&mut stream, std::time::Duration::from_secs(10))
        .await
        .expect("acknowledged");
    assert!(
        first.contains("notifications/subscriptions/acknowledged")
            && first.contains(r#""toolsListChanged":true"#),
        "{first}"
    );
    stream
}

/// The next event of an SSE stream within `within`, if any.
async fn next_event(stream: &mut reqwest::Response, within: std::time::Duration) -> Option<String> {
    let chunk = tokio::time::timeout(within, stream.chunk()).await.ok()?;
    let bytes = chunk
        .expect("the stream reads")
        .expect("the stream is open");
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// P-22, issue 43: the server declares `tools.listChanged`, and a 2026-07-28 client that
/// listens for tool list changes hears of each reload that adds or removes a preset, and of
/// none that leaves the presets as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p22_a_reload_that_changes_the_presets_is_announced() {
    let test = async {
        let f = start(&[], Some(operator()), true).await;
        let declared = f.client.peer_info().and_then(|info| {
            info.capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
        });
        assert_eq!(declared, Some(true), "tools.listChanged is declared");
        let mut changes = listen_for_tool_changes(&f.url).await;
        let reload = || async {
            let reloaded = f
                .client
                .call_tool(call("reload_plugins", json!({})))
                .await
                .unwrap();
            assert_ne!(reloaded.is_error, Some(true), "{:?}", texts(&reloaded));
        };
        let changed = r#""method":"notifications/tools/list_changed""#;
        // A reload that changes nothing is not announced.
        reload().await;
        let heard = next_event(&mut changes, std::time::Duration::from_millis(500)).await;
        assert_eq!(heard, None, "no change, no notification");
        // A preset appears: announced.
        std::fs::write(
            f.plugins.path().join("presets.py"),
            "TOOL_PRESETS = {\"rust_search\": {\"tool\": \"search\", \"description\": \
             \"Search Rust code.\", \"arguments\": {\"lang\": \"rust\"}}}\n",
        )
        .unwrap();
        reload().await;
        let heard = next_event(&mut changes, std::time::Duration::from_secs(10)).await;
        assert!(
            heard.as_deref().is_some_and(|e| e.contains(changed)),
            "{heard:?}"
        );
        // And goes: announced again.
        std::fs::remove_file(f.plugins.path().join("presets.py")).unwrap();
        reload().await;
        let heard = next_event(&mut changes, std::time::Duration::from_secs(10)).await;
        assert!(
            heard.as_deref().is_some_and(|e| e.contains(changed)),
            "{heard:?}"
        );
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), test)
        .await
        .expect("the test finished within 120 s");
}
