//! End-to-end tests of the Streamable HTTP endpoint: a real Git repository (made with the `git`
//! CLI), a real store and service, the endpoint mounted in axum on 127.0.0.1, and the official
//! rmcp client (plus raw HTTP where a client would hide what is tested).

use mcpserver::{McpConfig, http_service};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode, ProtocolVersion};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::net::SocketAddr;
use testgit::SourceRepo;
use tokio_util::sync::CancellationToken;

const REPO: &str = "test/repo";
const GUIDE: &str = "# Guide\nline two\nline three\n";

/// A served repository: `docs/guide.md` (3 lines), `empty.txt`, `big.txt` (600 lines),
/// `bin/run.sh` (executable) and `src/lib.rs`.
struct Fixture {
    _source: SourceRepo,
    addr: SocketAddr,
    commit: String,
    shutdown: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Fixture {
    async fn start() -> Self {
        Self::start_with(McpConfig::default()).await
    }

    async fn start_with(config: McpConfig) -> Self {
        let big: String = (1..=600).map(|n| format!("line {n}\n")).collect();
        let source = SourceRepo::new();
        source.write(&[
            ("docs/guide.md", GUIDE.as_bytes()),
            ("empty.txt", b""),
            ("big.txt", big.as_bytes()),
            ("src/lib.rs", b"pub fn answer() -> u32 {\n    42\n}\n"),
            ("bin/run.sh", b"#!/bin/sh\necho hi\n"),
        ]);
        source.git(&["add", "."]);
        source.git(&["update-index", "--chmod=+x", "bin/run.sh"]);
        let commit = source.commit_index("initial");
        let service =
            service::Service::new(source.store(REPO, ""), service::ServiceConfig::default());
        service.index(REPO.into(), |_| {}).await.expect("index");

        Self::serve(source, commit, service, config).await
    }

    /// Serves `service` over Streamable HTTP on a loopback port until the fixture drops.
    async fn serve(
        source: SourceRepo,
        commit: String,
        service: service::Service,
        config: McpConfig,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let router = axum::Router::new().nest_service(
            "/sourcegraph/mcp",
            http_service(service, config, shutdown.clone()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Self {
            _source: source,
            addr,
            commit,
            shutdown,
        }
    }

    fn url(&self, query: &str) -> String {
        format!("http://{}/sourcegraph/mcp{query}", self.addr)
    }

    /// An rmcp client with the 2025-era `initialize` handshake.
    async fn client(&self, query: &str) -> RunningService<RoleClient, ()> {
        ().serve(StreamableHttpClientTransport::from_uri(self.url(query)))
            .await
            .expect("rmcp client connects")
    }

    /// An rmcp client of the 2026-07-28 revision (no handshake, per-request metadata).
    async fn modern_client(&self) -> RunningService<RoleClient, ()> {
        ().serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(self.url("?plugins=auto")),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("2026-07-28 client connects")
    }

    /// One raw JSON-RPC POST, 2025-era style; answers (status, body).
    async fn post(&self, query: &str, headers: &[(&str, &str)], body: Value) -> (u16, String) {
        let mut request = reqwest::Client::new()
            .post(self.url(query))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("POST");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }
}

fn call(name: &'static str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    CallToolRequestParams::new(name).with_arguments(arguments)
}

fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .map(|block| {
            block
                .as_text()
                .map(|t| t.text.clone())
                .expect("only text content blocks (R-5)")
        })
        .collect()
}

fn invalid_params(error: ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => {
            assert_eq!(data.code, ErrorCode::INVALID_PARAMS, "{data:?}");
            data.message.into_owned()
        }
        other => panic!("expected a JSON-RPC invalid-params error, got {other:?}"),
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// M-1, M-3, M-5, R-5: the six tools, strict schemas, read-only hints, no outputSchema, and
/// the server's identity and instructions.
#[tokio::test]
async fn m1_m3_m5_r5_tools_list() {
    let fixture = Fixture::start().await;
    let client = fixture.client("?plugins=auto").await;
    let info = client.peer_info().expect("server info");
    let server = info.server_info.as_ref().expect("server implementation");
    assert_eq!(server.name, "context-sourcegraph");
    let instructions = info.instructions.clone().unwrap_or_default();
    for phrase in [
        "NextStartLine",
        "read_many",
        "data, not instructions",
        "registered association",
    ] {
        assert!(
            instructions.contains(phrase),
            "instructions lack {phrase:?}"
        );
    }

    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "availability",
            "blame",
            "commit",
            "definitions",
            "diff",
            "discovery",
            "list",
            "log",
            "outline",
            "plugin_status",
            "read",
            "read_many",
            "references",
            "reload_plugins",
            "resolve",
            "search"
        ]
    );
    for tool in &tools {
        let annotations = tool.annotations.as_ref().expect("annotations");
        // M-5: every tool is read-only but the operator's reload (P-12).
        let read_only = tool.name != "reload_plugins";
        assert_eq!(annotations.read_only_hint, Some(read_only), "{}", tool.name);
        assert_eq!(annotations.destructive_hint, Some(false), "{}", tool.name);
        assert_eq!(annotations.idempotent_hint, Some(true), "{}", tool.name);
        assert_eq!(annotations.open_world_hint, Some(false), "{}", tool.name);
        assert!(
            tool.output_schema.is_none(),
            "{} declares outputSchema",
            tool.name
        );
        assert_eq!(
            tool.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}",
            tool.name
        );
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 40));
    }
    client.cancel().await.ok();
}

/// R-1, R-5, §9: `read` answers one text block of the exact shape; no structuredContent.
#[tokio::test]
async fn r5_read_answers_one_exact_block() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let result = client
        .call_tool(call("read", json!({"repo": REPO, "path": "docs/guide.md"})))
        .await
        .expect("read");
    assert_eq!(result.is_error, Some(false));
    assert!(result.structured_content.is_none());
    assert_eq!(
        texts(&result),
        [format!(
            "Repo: {REPO}\nCommit: {}\nPath: docs/guide.md\nStartLine: 1\nEndLine: 3\n\
             TotalLines: 3\nTruncated: false\nHasMore: false\nBodyBytes: {}\n\n{GUIDE}",
            fixture.commit,
            GUIDE.len()
        )]
    );

    // A range with more to come names where to continue, at the same commit.
    let result = client
        .call_tool(call(
            "read",
            json!({"repo": REPO, "revision": fixture.commit, "path": "big.txt", "start_line": 2, "end_line": 3}),
        ))
        .await
        .expect("read range");
    assert_eq!(
        texts(&result),
        [format!(
            "Repo: {REPO}\nCommit: {}\nPath: big.txt\nStartLine: 2\nEndLine: 3\n\
             TotalLines: 600\nTruncated: false\nHasMore: true\nNextStartLine: 4\n\
             BodyBytes: 14\n\nline 2\nline 3\n",
            fixture.commit
        )]
    );

    // R-1: end_line defaults to start_line + 499.
    let result = client
        .call_tool(call("read", json!({"repo": REPO, "path": "big.txt"})))
        .await
        .expect("read default range");
    let block = &texts(&result)[0];
    assert!(block.contains("\nEndLine: 500\n"), "{block}");
    assert!(block.contains("\nNextStartLine: 501\n"), "{block}");

    // R-1: an empty file.
    let result = client
        .call_tool(call("read", json!({"repo": REPO, "path": "empty.txt"})))
        .await
        .expect("read empty");
    assert!(
        texts(&result)[0].ends_with(
            "StartLine: 1\nEndLine: 0\nTotalLines: 0\nTruncated: false\nHasMore: false\nBodyBytes: 0\n\n"
        ),
        "{:?}",
        texts(&result)
    );
    client.cancel().await.ok();
}

/// R-5: a business failure of `read` is an `isError` result with the message, not a
/// protocol error.
#[tokio::test]
async fn r5_read_failure_is_tool_error() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    for (arguments, expected) in [
        (
            json!({"repo": REPO, "path": "docs/missing.md"}),
            "docs/missing.md",
        ),
        (
            json!({"repo": "nobody/nothing", "path": "a.md"}),
            "nobody/nothing",
        ),
        (
            json!({"repo": REPO, "path": "../etc/passwd"}),
            "invalid path",
        ),
        (
            json!({"repo": REPO, "path": "docs/guide.md", "start_line": 9}),
            "3",
        ),
    ] {
        let result = client
            .call_tool(call("read", arguments.clone()))
            .await
            .expect("a tool result, not a protocol error");
        assert_eq!(result.is_error, Some(true), "{arguments}");
        let text = texts(&result).join("\n");
        assert!(text.starts_with("Error: "), "{text}");
        assert!(text.contains(expected), "{arguments}: {text}");
        assert!(!text.contains("/tmp"), "host path leaked: {text}");
    }
    client.cancel().await.ok();
}

/// R-4, R-5: one block per entry in request order; the failing middle entry keeps its place
/// with `Error` and the batch succeeds.
#[tokio::test]
async fn r4_read_many_keeps_failed_item_in_place() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let result = client
        .call_tool(call(
            "read_many",
            json!({"repo": REPO, "files": [
                {"path": "docs/guide.md", "start_line": 2, "end_line": 2},
                {"path": "docs/nope.md"},
                {"path": "src/lib.rs"},
            ]}),
        ))
        .await
        .expect("read_many");
    assert_eq!(result.is_error, Some(false));
    let blocks = texts(&result);
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    let c = &fixture.commit;
    assert_eq!(
        blocks[0],
        format!(
            "Repo: {REPO}\nCommit: {c}\nPath: docs/guide.md\nStartLine: 2\nEndLine: 2\n\
             TotalLines: 3\nTruncated: false\nHasMore: true\nNextStartLine: 3\nBodyBytes: 9\n\n\
             line two\n"
        )
    );
    assert!(
        blocks[1].starts_with(&format!(
            "Repo: {REPO}\nCommit: {c}\nPath: docs/nope.md\nError: "
        )),
        "{}",
        blocks[1]
    );
    assert_eq!(blocks[1].lines().count(), 4, "{}", blocks[1]);
    assert!(
        blocks[2].starts_with(&format!(
            "Repo: {REPO}\nCommit: {c}\nPath: src/lib.rs\nStartLine: 1\n"
        )),
        "{}",
        blocks[2]
    );
    client.cancel().await.ok();
}

/// M-3: an unknown top-level argument is a JSON-RPC invalid-params error naming it; so is a
/// missing one and an unknown tool.
#[tokio::test]
async fn m3_unknown_argument_is_invalid_params() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let message = invalid_params(
        client
            .call_tool(call(
                "read",
                json!({"repo": REPO, "path": "docs/guide.md", "bogus_arg": true}),
            ))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("`bogus_arg`"), "{message}");
    let message = invalid_params(
        client
            .call_tool(call("read", json!({"repo": REPO})))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("`path`"), "{message}");
    let message = invalid_params(
        client
            .call_tool(call("discovery", json!({"verbose": 1})))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("`verbose`"), "{message}");
    let message = invalid_params(
        client
            .call_tool(call("search_everything", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("search_everything"), "{message}");
    client.cancel().await.ok();
}

/// S-5, S-6, S-7, §9: list, resolve, discovery and availability answer readable text.
#[tokio::test]
async fn s5_s6_s7_navigation_tools() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let c = &fixture.commit;

    let listing = texts(
        &client
            .call_tool(call("list", json!({"repo": REPO})))
            .await
            .expect("list"),
    );
    assert_eq!(listing.len(), 1);
    let listing = &listing[0];
    assert!(
        listing.starts_with(&format!(
            "Repo: {REPO}\nCommit: {c}\nPath: /\nDepth: 1\nEntries: 5\nTruncated: false\n\n"
        )),
        "{listing}"
    );
    for line in [
        "bin/\n",
        "docs/\n",
        "src/\n",
        "empty.txt  [0 bytes]\n",
        "big.txt  [",
    ] {
        assert!(listing.contains(line), "{line:?} missing in {listing}");
    }

    let deep = texts(
        &client
            .call_tool(call(
                "list",
                json!({"repo": REPO, "path": "bin", "depth": 2}),
            ))
            .await
            .expect("list bin"),
    );
    assert!(
        deep[0].contains("bin/run.sh  [executable, 18 bytes]\n"),
        "{}",
        deep[0]
    );

    let resolved = texts(
        &client
            .call_tool(call("resolve", json!({"repo": REPO, "revision": "main"})))
            .await
            .expect("resolve"),
    );
    assert_eq!(
        resolved,
        [format!("Repo: {REPO}\nRevision: main\nCommit: {c}\n")]
    );
    let unknown = client
        .call_tool(call(
            "resolve",
            json!({"repo": REPO, "revision": "no-such-branch"}),
        ))
        .await
        .expect("resolve failure is a tool result");
    assert_eq!(unknown.is_error, Some(true));

    let discovered = texts(
        &client
            .call_tool(call("discovery", json!({})))
            .await
            .expect("discovery"),
    );
    assert!(
        discovered[0].starts_with(&format!("Repositories: 1\n\nRepo: {REPO}\n")),
        "{}",
        discovered[0]
    );
    assert!(
        discovered[0].contains(&format!("\nHead: {c}\n")),
        "{}",
        discovered[0]
    );
    assert!(
        !discovered[0].contains("/tmp"),
        "host path leaked: {}",
        discovered[0]
    );

    // The log from the head: the header, then the head's own record first.
    let log = texts(
        &client
            .call_tool(call("log", json!({"repo": REPO, "limit": 1})))
            .await
            .expect("log"),
    );
    assert!(
        log[0].starts_with(&format!("Repo: {REPO}\nCommit: {c}\nCommits: 1\n")),
        "{}",
        log[0]
    );
    assert!(
        log[0].contains(&format!("\n\nCommit: {c}\nParents: ")) && log[0].contains("\nSubject: "),
        "{}",
        log[0]
    );

    let shown = texts(
        &client
            .call_tool(call("commit", json!({"repo": REPO, "revision": c})))
            .await
            .expect("commit"),
    );
    assert!(
        shown[0].starts_with(&format!("Repo: {REPO}\nCommit: {c}\nParents: ")),
        "{}",
        shown[0]
    );
    assert!(
        shown[0].contains("\nMessageTruncated: false\n\n"),
        "{}",
        shown[0]
    );
    let blamed = texts(
        &client
            .call_tool(call(
                "blame",
                json!({"repo": REPO, "path": "docs/guide.md", "end_line": 1}),
            ))
            .await
            .expect("blame"),
    );
    assert!(
        blamed[0].starts_with(&format!(
            "Repo: {REPO}\nCommit: {c}\nPath: docs/guide.md\nStartLine: 1\nEndLine: 1\n"
        )),
        "{}",
        blamed[0]
    );
    assert!(blamed[0].contains("\n\n1-1 "), "{}", blamed[0]);
    // A commit against itself differs in nothing.
    let same = texts(
        &client
            .call_tool(call(
                "diff",
                json!({"repo": REPO, "base": c, "head": "main"}),
            ))
            .await
            .expect("diff"),
    );
    assert_eq!(
        same[0],
        format!("Repo: {REPO}\nBase: {c}\nHead: {c}\nFiles: 0\nFilesShown: 0\n\n")
    );

    let available = texts(
        &client
            .call_tool(call(
                "availability",
                json!({"repo": REPO, "revision": "main"}),
            ))
            .await
            .expect("availability"),
    );
    assert!(
        available[0].starts_with(&format!(
            "Repo: {REPO}\nVisible: true\nRevision: main\nCommit: {c}\nReadable: true\n"
        )),
        "{}",
        available[0]
    );
    client.cancel().await.ok();
}

/// M-1: the 2026-07-28 revision (no handshake, per-request metadata) is served too.
#[tokio::test]
async fn m1_protocol_2026_07_28_client() {
    let fixture = Fixture::start().await;
    let client = fixture.modern_client().await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 16);
    let result = client
        .call_tool(call("read", json!({"repo": REPO, "path": "docs/guide.md"})))
        .await
        .expect("read");
    assert!(texts(&result)[0].ends_with(&format!("\n\n{GUIDE}")));
    let message = invalid_params(
        client
            .call_tool(call("read", json!({"repo": REPO, "path": "x", "nope": 1})))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("`nope`"), "{message}");
    client.cancel().await.ok();
}

/// M-1: stateless for 2025-era clients too (no `Mcp-Session-Id`, JSON replies), so a client
/// that drops the session id keeps working.
#[tokio::test]
async fn m1_legacy_clients_are_served_statelessly() {
    let fixture = Fixture::start().await;
    let response = reqwest::Client::new()
        .post(fixture.url("?plugins=auto"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(response.headers().get("mcp-session-id").is_none());
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["result"]["serverInfo"]["name"], "context-sourcegraph");

    let (status, body) = fixture
        .post(
            "",
            &[("mcp-protocol-version", "2025-11-25")],
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "read", "arguments": {"repo": REPO, "path": "docs/guide.md"}}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert!(body["result"].get("structuredContent").is_none(), "{body}");
}

/// M-1: a foreign `Origin` is refused with 403 (requests without Origin pass); an allowed one
/// passes.
#[tokio::test]
async fn m1_foreign_origin_is_refused_with_403() {
    let fixture = Fixture::start().await;
    let init: Value = serde_json::from_str(INIT).unwrap();
    let (status, _) = fixture
        .post("", &[("origin", "http://evil.example")], init.clone())
        .await;
    assert_eq!(status, 403);
    let (status, _) = fixture.post("", &[], init.clone()).await;
    assert_eq!(status, 200);

    let allowed = Fixture::start_with(McpConfig {
        allowed_origins: vec!["http://trusted.example:*".into()],
        ..McpConfig::default()
    })
    .await;
    let (status, _) = allowed
        .post(
            "",
            &[("origin", "http://trusted.example:8080")],
            init.clone(),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = allowed
        .post("", &[("origin", "http://evil.example")], init)
        .await;
    assert_eq!(status, 403);
}

/// M-1: a `Host` outside the allowed list is refused (DNS rebinding); a configured one passes.
#[tokio::test]
async fn m1_unlisted_host_is_refused() {
    let fixture = Fixture::start().await;
    let init: Value = serde_json::from_str(INIT).unwrap();
    let (status, _) = fixture
        .post("", &[("host", "evil.example")], init.clone())
        .await;
    assert_eq!(status, 403);

    let public = Fixture::start_with(McpConfig {
        allowed_hosts: vec!["mcp.example.org".into()],
        ..McpConfig::default()
    })
    .await;
    let (status, _) = public
        .post("", &[("host", "mcp.example.org")], init.clone())
        .await;
    assert_eq!(status, 200);
    let (status, _) = public.post("", &[], init.clone()).await;
    assert_eq!(status, 403, "127.0.0.1 is not in the configured list");
    // User information in `Host` is no disguise for an allowed host.
    for host in [
        "evil@mcp.example.org",
        "mcp.example.org@evil.example",
        "@mcp.example.org",
    ] {
        let (status, body) = public.post("", &[("host", host)], init.clone()).await;
        assert_eq!(status, 403, "{host}: {body}");
    }
    let (status, _) = fixture.post("", &[("host", "evil@127.0.0.1")], init).await;
    assert_eq!(status, 403, "the default list too");
}

/// M-2: `?plugins=off` and `?plugins=a,b` are accepted; an invalid value is invalid params
/// naming the parameter, at the handshake and at every call.
#[tokio::test]
async fn m2_connection_plugins_parameter() {
    let fixture = Fixture::start().await;
    for query in ["?plugins=off", "?plugins=a,b", "?plugins=auto", ""] {
        let client = fixture.client(query).await;
        let result = client
            .call_tool(call("read", json!({"repo": REPO, "path": "docs/guide.md"})))
            .await
            .expect("read");
        assert_eq!(result.is_error, Some(false), "{query}");
        client.cancel().await.ok();
    }

    let init: Value = serde_json::from_str(INIT).unwrap();
    let (status, body) = fixture.post("?plugins=bogus%20value", &[], init).await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("plugins=bogus value"), "{message}");

    let (_, body) = fixture
        .post(
            "?plugins=bogus%20value",
            &[("mcp-protocol-version", "2025-11-25")],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "read", "arguments": {"repo": REPO, "path": "docs/guide.md"}}}),
        )
        .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");

    let refused = ()
        .serve(StreamableHttpClientTransport::from_uri(
            fixture.url("?plugins=bogus%20value"),
        ))
        .await;
    assert!(refused.is_err(), "the handshake must fail");
}

/// S-1, S-2: `search` answers one block: `Repo:`/`Commit:` headers, `path:line: snippet`
/// hits (definitions first), file-name hits, `NextCursor:` while more exist; a bad query is
/// an `isError` result that says what to do.
#[tokio::test]
async fn s1_search_tool() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let c = &fixture.commit;

    let result = client
        .call_tool(call("search", json!({"query": "answer"})))
        .await
        .expect("search");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        texts(&result),
        [format!(
            "Repo: {REPO}\nCommit: {c}\nsrc/lib.rs:1: pub fn answer() -> u32 {{\n"
        )]
    );

    let names = client
        .call_tool(call(
            "search",
            json!({"query": "guide", "path": "docs/**", "case_sensitive": true}),
        ))
        .await
        .expect("file name");
    assert_eq!(
        texts(&names),
        [format!(
            "Repo: {REPO}\nCommit: {c}\ndocs/guide.md (file name)\n"
        )]
    );

    let first = texts(
        &client
            .call_tool(call(
                "search",
                json!({"query": r"^line \d+5$", "regex": true, "repo": REPO, "limit": 2}),
            ))
            .await
            .expect("page 1"),
    );
    let first = &first[0];
    assert!(
        first.starts_with(&format!(
            "Repo: {REPO}\nCommit: {c}\nbig.txt:15: line 15\nbig.txt:25: line 25\nNextCursor: "
        )),
        "{first}"
    );
    let cursor = first.lines().last().unwrap()["NextCursor: ".len()..].to_string();
    let second = texts(
        &client
            .call_tool(call(
                "search",
                json!({"query": r"^line \d+5$", "regex": true, "repo": REPO, "limit": 2,
                       "cursor": cursor}),
            ))
            .await
            .expect("page 2"),
    );
    assert!(
        second[0].contains("big.txt:35: line 35\nbig.txt:45: line 45\n"),
        "{}",
        second[0]
    );

    let none = client
        .call_tool(call("search", json!({"query": "no such text anywhere"})))
        .await
        .expect("no hits");
    assert_eq!(texts(&none), ["No hits.\n"]);

    let bad = client
        .call_tool(call("search", json!({"query": "(unclosed", "regex": true})))
        .await
        .expect("bad regex is a tool result");
    assert_eq!(bad.is_error, Some(true));
    let text = texts(&bad).join("\n");
    assert!(
        text.starts_with("Error: invalid regular expression") && text.contains("regex to false"),
        "{text}"
    );
}

/// Issue 12: `outline`, `definitions` and `references` answer one block each in the
/// header style, with the full SHA; a bad symbol is an `isError` result.
#[tokio::test]
async fn navigation_tools() {
    let fixture = Fixture::start().await;
    let client = fixture.client("").await;
    let c = &fixture.commit;
    let call_text = |name: &'static str, args: serde_json::Value| {
        let client = &client;
        async move {
            let result = client.call_tool(call(name, args)).await.expect(name);
            assert_eq!(result.is_error, Some(false), "{name}: {:?}", texts(&result));
            texts(&result).join("")
        }
    };
    assert_eq!(
        call_text("outline", json!({"repo": REPO, "path": "src/lib.rs"})).await,
        format!(
            "Repo: {REPO}\nCommit: {c}\nPath: src/lib.rs\nLang: rust\nSource: index\nSymbols: 1\nShown: 1\n\n1-3 function answer  pub fn answer() -> u32 {{\n"
        )
    );
    assert_eq!(
        call_text("definitions", json!({"symbol": "answer"})).await,
        format!(
            "Symbol: answer\nDefinitions: 1\nShown: 1\n\nRepo: {REPO}\nCommit: {c}\nsrc/lib.rs:1-3: function answer  pub fn answer() -> u32 {{\n"
        )
    );
    assert_eq!(
        call_text("references", json!({"symbol": "answer", "repo": REPO})).await,
        format!(
            "Symbol: answer\nReferences: 1\n\nRepo: {REPO}\nCommit: {c}\nsrc/lib.rs:1: definition: pub fn answer() -> u32 {{\n"
        )
    );
    assert_eq!(
        call_text("definitions", json!({"symbol": "nothing_named_so"})).await,
        "Symbol: nothing_named_so\nDefinitions: 0\nShown: 0\nNo definitions.\n"
    );
    let bad = client
        .call_tool(call("definitions", json!({"symbol": "two words"})))
        .await
        .expect("a bad symbol is a tool result");
    assert_eq!(bad.is_error, Some(true));
    assert!(
        texts(&bad).join("").starts_with("Error: invalid symbol"),
        "{:?}",
        texts(&bad)
    );
    let unknown = client
        .call_tool(call(
            "outline",
            json!({"repo": REPO, "path": "src/lib.rs", "depth": 1}),
        ))
        .await
        .unwrap_err();
    assert!(invalid_params(unknown).contains("depth"));
}

/// The committed plugin fixture `name` (W-37).
fn plugin_artifact(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../wasmplugin/testdata/{name}.sourcegraph.wasm",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

impl Fixture {
    /// A served repository with two default-enabled plugins at its root: `echo` (one line
    /// per item) and `related-content` (`a.md` is related to `b.md`), and `a.md` (`alpha`,
    /// no trailing newline).
    async fn start_with_plugins() -> Self {
        let source = SourceRepo::with_files(&[
            ("echo.sourcegraph.wasm", &plugin_artifact("echo")),
            (
                "related-content.sourcegraph.wasm",
                &plugin_artifact("related-content"),
            ),
            ("related.json", br#"{"a.md": ["b.md"]}"#),
            ("a.md", b"alpha"),
            ("b.md", b"# Bee\n"),
        ]);
        let commit = source.head();
        let service =
            service::Service::new(source.store(REPO, ""), service::ServiceConfig::default());
        Self::serve(source, commit, service, McpConfig::default()).await
    }
}

/// Which plugins attached to the one read block, in order, found by their texts' starts.
fn attached_in_order(block: &str) -> Vec<&'static str> {
    let mut found: Vec<(usize, &'static str)> = [
        ("\n\necho read-0 a.md ", "echo"),
        ("\n\nrelated:\n- b.md", "related-content"),
    ]
    .into_iter()
    .filter_map(|(start, name)| block.find(start).map(|at| (at, name)))
    .collect();
    found.sort();
    found.into_iter().map(|(_, name)| name).collect()
}

/// M-2, W-8..W-10, SPEC §9 over MCP Streamable HTTP against a repository with artifacts:
/// `auto` runs both default plugins by name; `?plugins=a,b` runs only those, in the list's
/// order; `?plugins=off` runs none, also when the call names one (PLUGIN_DISABLED), and the
/// base block is byte-identical in every case.
#[tokio::test]
async fn m2_w9_w10_connection_off_and_named_list_with_artifacts() {
    let fixture = Fixture::start_with_plugins().await;
    let base = format!(
        "Repo: {REPO}\nCommit: {}\nPath: a.md\nStartLine: 1\nEndLine: 1\nTotalLines: 1\n\
         Truncated: false\nHasMore: false\nBodyBytes: 5\n\nalpha",
        fixture.commit
    );
    let read_a = |plugins: Option<Value>| {
        let mut arguments = json!({"repo": REPO, "path": "a.md"});
        if let Some(plugins) = plugins {
            arguments["plugins"] = plugins;
        }
        call("read", arguments)
    };

    for (query, expected) in [
        ("?plugins=auto", vec!["echo", "related-content"]),
        (
            "?plugins=related-content,echo",
            vec!["related-content", "echo"],
        ),
        ("?plugins=echo", vec!["echo"]),
        ("?plugins=off", vec![]),
    ] {
        let client = fixture.client(query).await;
        let result = client.call_tool(read_a(None)).await.expect("read");
        assert_eq!(result.is_error, Some(false), "{query}");
        let blocks = texts(&result);
        assert_eq!(blocks.len(), 1, "{query}: {blocks:?}");
        assert!(blocks[0].starts_with(&base), "{query}: {}", blocks[0]);
        assert_eq!(
            attached_in_order(&blocks[0]),
            expected,
            "{query}: {}",
            blocks[0]
        );
        if expected.is_empty() {
            assert_eq!(blocks[0], base, "{query}: nothing appended");
        } else {
            // §9: the first attachment follows the body after one blank line, although the
            // body has no trailing newline.
            assert!(blocks[0][base.len()..].starts_with("\n\n"), "{query}");
        }
    }

    // Connection off always wins: a call naming a plugin gets PLUGIN_DISABLED, no text.
    let off = fixture.client("?plugins=off").await;
    let result = off
        .call_tool(read_a(Some(json!([{"name": "echo"}]))))
        .await
        .expect("read");
    assert_eq!(result.is_error, Some(false));
    let blocks = texts(&result);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0], base);
    assert_eq!(
        blocks[1],
        "PluginDiagnostics:\n- code=PLUGIN_DISABLED plugin=echo root=\"\" \
         message=repository plugins are off for this connection (plugins=off)"
    );

    // A named list never widens to a plugin the call does not name: the call list wins
    // over the connection list (W-10).
    let listed = fixture.client("?plugins=echo").await;
    let result = listed
        .call_tool(read_a(Some(json!([{"name": "related-content"}]))))
        .await
        .expect("read");
    let blocks = texts(&result);
    assert_eq!(
        attached_in_order(&blocks[0]),
        ["related-content"],
        "{blocks:?}"
    );
}

/// W-3, W-6, SPEC §9: `availability` with `include_plugins` shows each plugin's
/// `input_schema` from its embedded metadata (real Wasm fixtures), as one compact JSON line
/// in the `Name: value` style; without `include_plugins` there is no plugin line at all.
#[tokio::test]
async fn w3_w6_availability_shows_input_schema() {
    let fixture = Fixture::start_with_plugins().await;
    let client = fixture.client("?plugins=auto").await;
    let result = client
        .call_tool(call(
            "availability",
            json!({"repo": REPO, "include_plugins": true}),
        ))
        .await
        .expect("availability");
    assert_eq!(result.is_error, Some(false));
    let block = &texts(&result)[0];
    // serde_json's compact form, in its own key order.
    let echo = json!({"type": "object"}).to_string();
    let related = json!({"type": "object", "properties": {}}).to_string();
    assert!(block.contains("\nPlugins: 2\n"), "{block}");
    assert!(
        block.contains(&format!(
            "- Name: echo\n  Directory: \n  Title: Echo\n  Description: Test fixture: echoes item metadata and a per-instance call counter.\n  Version: 0.1.0\n  InputSchema: {echo}\n  Operations: read, read_many\n  DefaultEnabled: true\n"
        )),
        "{block}"
    );
    assert!(block.contains("- Name: related-content\n"), "{block}");
    assert!(
        block.contains(&format!("\n  InputSchema: {related}\n")),
        "{block}"
    );

    let result = client
        .call_tool(call("availability", json!({"repo": REPO})))
        .await
        .expect("availability");
    let block = &texts(&result)[0];
    assert!(
        !block.contains("Plugins") && !block.contains("InputSchema"),
        "{block}"
    );
    client.cancel().await.ok();
}
