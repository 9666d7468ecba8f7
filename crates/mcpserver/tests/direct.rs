//! Issue 30 point 6: plainly valid stateless `tools/call` and `tools/list` POSTs are answered
//! without rmcp's per-request service, and the answers are rmcp's. Each request is sent twice
//! over real HTTP on 127.0.0.1: as a client sends it (the direct path), and with an `Accept`
//! header that carries a quality parameter, which the direct path leaves to rmcp; status,
//! content type and body must agree. (The unit tests in `direct.rs` check which requests take
//! the direct path.)

use mcpserver::{McpConfig, http_service};
use serde_json::{Value, json};
use std::net::SocketAddr;
use testgit::SourceRepo;
use tokio_util::sync::CancellationToken;

const REPO: &str = "test/repo";
const GUIDE: &str = "# Guide\nline two\nline three\n";
/// What a client sends: the direct path answers.
const DIRECT_ACCEPT: &str = "application/json, text/event-stream";
/// The same media types with a parameter: left to rmcp.
const RMCP_ACCEPT: &str = "application/json;q=1, text/event-stream";

struct Fixture {
    _source: SourceRepo,
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Fixture {
    async fn start() -> Self {
        let source = SourceRepo::new();
        source.write(&[
            ("docs/guide.md", GUIDE.as_bytes()),
            ("src/lib.rs", b"pub fn answer() -> u32 {\n    42\n}\n"),
        ]);
        source.git(&["add", "."]);
        source.commit_index("initial");
        let service =
            service::Service::new(source.store(REPO, ""), service::ServiceConfig::default());
        service.index(REPO.into(), |_| {}).await.expect("index");
        let shutdown = CancellationToken::new();
        let router = axum::Router::new().nest_service(
            "/sourcegraph/mcp",
            http_service(service, McpConfig::default(), shutdown.clone()),
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
            shutdown,
        }
    }

    /// One POST; answers (status, content type, body).
    async fn post(
        &self,
        query: &str,
        accept: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> (u16, String, String) {
        let mut request = reqwest::Client::new()
            .post(format!("http://{}/sourcegraph/mcp{query}", self.addr))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("POST");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default();
        (
            status,
            content_type,
            response.text().await.unwrap_or_default(),
        )
    }

    /// Sends `body` both ways and checks the answers agree; answers the direct one's status
    /// and JSON body.
    async fn same_answer(
        &self,
        query: &str,
        headers: &[(&str, &str)],
        body: Value,
    ) -> (u16, Value) {
        let direct = self.post(query, DIRECT_ACCEPT, headers, &body).await;
        let rmcp = self.post(query, RMCP_ACCEPT, headers, &body).await;
        assert_eq!(
            direct.0, rmcp.0,
            "status of {body}: {} / {}",
            direct.2, rmcp.2
        );
        assert_eq!(direct.1, rmcp.1, "content type of {body}");
        let (direct_json, rmcp_json): (Value, Value) = (
            serde_json::from_str(&direct.2).unwrap_or_else(|e| panic!("{e}: {}", direct.2)),
            serde_json::from_str(&rmcp.2).unwrap_or_else(|e| panic!("{e}: {}", rmcp.2)),
        );
        assert_eq!(direct_json, rmcp_json, "answer to {body}");
        (direct.0, direct_json)
    }
}

fn tools_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// A 2026-07-28 request: `_meta` with the version and, unless `capabilities` is false, the
/// client capabilities.
fn next_call(id: u64, name: &str, arguments: Value, capabilities: bool) -> Value {
    let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    if capabilities {
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments, "_meta": meta}})
}

const LEGACY: &[(&str, &str)] = &[("mcp-protocol-version", "2025-11-25")];

/// 2025-era stateless calls (with and without the version header): a read, a business
/// failure, invalid arguments, an unknown tool and a bad connection parameter answer as rmcp
/// answers them, with HTTP 200 throughout.
#[tokio::test]
async fn legacy_calls_answer_as_rmcp_does() {
    let fixture = Fixture::start().await;
    let read = json!({"repo": REPO, "path": "docs/guide.md"});
    for headers in [LEGACY, &[]] {
        let (status, body) = fixture
            .same_answer(
                "?plugins=auto",
                headers,
                tools_call(7, "read", read.clone()),
            )
            .await;
        assert_eq!(status, 200);
        assert_eq!(body["id"], 7);
        assert_eq!(body["result"]["isError"], false, "{body}");
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with(&format!("\n\n{GUIDE}")), "{text}");
        assert!(body["result"].get("resultType").is_none(), "{body}");
    }
    let (_, body) = fixture
        .same_answer(
            "",
            LEGACY,
            tools_call(8, "read", json!({"repo": REPO, "path": "missing.txt"})),
        )
        .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    let (status, body) = fixture
        .same_answer(
            "",
            LEGACY,
            tools_call(9, "read", json!({"repo": REPO, "path": "x", "nope": 1})),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32602)),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`nope`")
    );
    let (_, body) = fixture
        .same_answer("", LEGACY, tools_call(10, "search_everything", json!({})))
        .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let (_, body) = fixture
        .same_answer(
            "?plugins=bogus%20value",
            LEGACY,
            tools_call(11, "read", read.clone()),
        )
        .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("plugins=bogus value")
    );
    let (_, body) = fixture
        .same_answer(
            "",
            LEGACY,
            json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}),
        )
        .await;
    assert_eq!(body["id"], "list");
    assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 16);
    assert!(body["result"].get("ttlMs").is_none(), "{body}");
}

/// 2026-07-28 stateless calls (per-request `_meta`, SEP-2243 headers): results carry
/// `resultType`, `tools/list` its cache hints, and incomplete metadata, an unsupported
/// version or a contradicting header are refused with rmcp's HTTP statuses.
#[tokio::test]
async fn next_revision_calls_answer_as_rmcp_does() {
    let fixture = Fixture::start().await;
    let read = json!({"repo": REPO, "path": "docs/guide.md"});
    let headers: &[(&str, &str)] = &[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "read"),
    ];
    let (status, body) = fixture
        .same_answer("", headers, next_call(1, "read", read.clone(), true))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");

    let (status, body) = fixture
        .same_answer("", headers, next_call(2, "read", read.clone(), false))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32602)),
        "{body}"
    );

    let (status, body) = fixture
        .same_answer(
            "",
            headers,
            next_call(
                3,
                "read",
                json!({"repo": REPO, "path": "x", "nope": 1}),
                true,
            ),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32602)),
        "{body}"
    );

    let wrong_name: &[(&str, &str)] = &[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "list"),
    ];
    let (status, body) = fixture
        .same_answer("", wrong_name, next_call(4, "read", read.clone(), true))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32020)),
        "{body}"
    );

    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (status, body) = fixture
        .same_answer(
            "",
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
            ],
            list,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["ttlMs"], 0, "{body}");
    assert_eq!(body["result"]["cacheScope"], "public", "{body}");

    // A version the server does not offer, named in both places (left to rmcp either way).
    let mut unsupported = next_call(6, "read", read, true);
    unsupported["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (status, body) = fixture
        .same_answer(
            "",
            &[
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "read"),
            ],
            unsupported,
        )
        .await;
    assert_eq!(status, 400, "{body}");
}

/// Requests the direct path leaves alone keep rmcp's answers: a notification is accepted
/// with 202, `GET` and `DELETE` answer 405, a body that is not JSON-RPC 415, a foreign
/// `Origin` 403, and a body over rmcp's limit 413 (the direct path reads bodies itself).
#[tokio::test]
async fn everything_else_keeps_rmcps_answers() {
    let fixture = Fixture::start().await;
    let url = format!("http://{}/sourcegraph/mcp", fixture.addr);
    let client = reqwest::Client::new();
    let (status, _, _) = fixture
        .post(
            "",
            DIRECT_ACCEPT,
            LEGACY,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert_eq!(status, 202);
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = client
            .request(method.clone(), &url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 405, "{method}");
    }
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", DIRECT_ACCEPT)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
    let read = tools_call(1, "read", json!({"repo": REPO, "path": "docs/guide.md"}));
    let (status, _, _) = fixture
        .post(
            "",
            DIRECT_ACCEPT,
            &[("origin", "http://evil.example")],
            &read,
        )
        .await;
    assert_eq!(status, 403);
    let (status, _, _) = fixture
        .post("", DIRECT_ACCEPT, &[("host", "evil.example")], &read)
        .await;
    assert_eq!(status, 403);
    let (status, _, _) = fixture.post("", "application/json", LEGACY, &read).await;
    assert_eq!(status, 406);
    let huge = tools_call(
        2,
        "read",
        json!({"repo": REPO, "path": "x".repeat(5 * 1024 * 1024)}),
    );
    let (status, _, body) = fixture.post("", DIRECT_ACCEPT, LEGACY, &huge).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.starts_with("Payload Too Large"), "{body}");
}
