//! What the CLI's integration tests share: the `csg` binary run with only the settings a
//! test passes, a `csg serve` killed when dropped, the calls of every face (MCP over
//! Streamable HTTP, the JSON API's GET and POST) and the answers made comparable.
#![allow(dead_code)] // Each test crate uses what it needs.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use testgit::SourceRepo;
use tools::{Limits, ToolDef};

/// The `csg` binary under test.
pub const CSG: &str = env!("CARGO_BIN_EXE_csg");

/// How long one test may take, servers' start, indexing and every call included.
pub const LIMIT: Duration = Duration::from_secs(300);

/// Runs `body`, failing the test if it takes longer than [`LIMIT`].
pub async fn within(body: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(LIMIT, body).await.is_err() {
        panic!("the test did not finish within {LIMIT:?}");
    }
}

/// `csg` with no inherited `CSG_*` or `SOURCEGRAPH_*` setting: only what a test passes
/// counts.
pub fn command() -> Command {
    let mut command = Command::new(CSG);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("CSG_") || text.starts_with("SOURCEGRAPH_") {
            command.env_remove(&name);
        }
    }
    command
}

/// `csg --data-dir DATA ARGS`, which must succeed: its stdout. The process is polled, not
/// waited on, so the test's bound covers it too (dropped unfinished, it is killed).
pub async fn csg(data: &Path, args: &[&str]) -> String {
    csg_with(data, args, &[]).await
}

/// [`csg`] with `env` set.
pub async fn csg_with(data: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = tempfile::tempfile().expect("stdout file");
    let err = tempfile::tempfile().expect("stderr file");
    let child = command()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .envs(env.iter().copied())
        .stdout(out.try_clone().expect("stdout handle"))
        .stderr(err.try_clone().expect("stderr handle"))
        .spawn()
        .expect("csg runs");
    let mut child = Killed(child);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("csg is waited for") {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let read = |mut file: std::fs::File| {
        use std::io::{Read, Seek};
        let mut text = String::new();
        file.rewind().expect("rewound");
        file.read_to_string(&mut text).expect("utf-8 output");
        text
    };
    assert!(status.success(), "csg {args:?}: {}", read(err));
    read(out)
}

/// A child process killed when dropped.
pub struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new user (with the prepare capability when asked) and a token of theirs.
pub async fn user_with_token(data: &Path, user: &str, prepare: bool) -> String {
    let mut args = vec!["user", "add", user];
    if prepare {
        args.push("--prepare");
    }
    csg(data, &args).await;
    csg(data, &["token", "create", user])
        .await
        .trim()
        .to_owned()
}

/// A running `csg serve`; killed when dropped (a failing or timed-out test included).
pub struct Server {
    _child: Killed,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Server {
    /// `csg --data-dir DATA serve ARGS` with `env` (listening on `127.0.0.1:0` unless `args`
    /// say where), logging to `{data}.log`; answers once it printed its MCP endpoint.
    pub async fn spawn(data: &Path, args: &[String], env: &[(&str, &str)]) -> Server {
        let log = std::fs::File::create(data.with_extension("log")).expect("log file");
        let mut command = command();
        command.arg("--data-dir").arg(data).arg("serve");
        if !args.iter().any(|arg| arg == "--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = command.spawn().expect("csg serve starts");
        let stdout = child.stdout.take().expect("stdout");
        // Owned from here: if the endpoint never comes, dropping it kills the process.
        let mut server = Server {
            _child: Killed(child),
            base: String::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(endpoint) = line.strip_prefix("MCP endpoint: ") {
                    let _ = tx.send(endpoint.to_owned());
                }
            }
        });
        let endpoint = tokio::task::spawn_blocking(move || rx.recv_timeout(LIMIT))
            .await
            .expect("the waiting task ran")
            .unwrap_or_else(|_| {
                let log = std::fs::read_to_string(data.with_extension("log")).unwrap_or_default();
                panic!("csg serve printed no MCP endpoint; its log:\n{log}")
            });
        let base = &endpoint[..endpoint.find("/sourcegraph/").expect("an endpoint path")];
        assert!(
            base.starts_with("http://127.0.0.1:"),
            "bound to loopback only: {endpoint}"
        );
        server.base = base.to_owned();
        server
    }

    /// An rmcp client over Streamable HTTP at `/sourcegraph/mcp`, with `token` as its bearer.
    pub async fn mcp(&self, token: Option<&str>) -> RunningService<RoleClient, ()> {
        let mut config =
            StreamableHttpClientTransportConfig::with_uri(format!("{}/sourcegraph/mcp", self.base));
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP client connects")
    }

    /// `GET /sourcegraph/api/TOOL?ARGS`, the arguments as a query string (arrays and
    /// objects as JSON text): the status and the body (JSON, or the text as a JSON string).
    pub async fn get(&self, tool: &str, arguments: &Value, token: Option<&str>) -> (u16, Value) {
        let query = query_string(arguments);
        let url = format!("{}/sourcegraph/api/{tool}?{query}", self.base);
        let request = reqwest::Client::new().get(url);
        answer(with_token(request, token)).await
    }

    /// `POST /sourcegraph/api/PATH` with `body` as JSON: the status and the body.
    pub async fn post(&self, path: &str, body: &Value, token: Option<&str>) -> (u16, Value) {
        let request = reqwest::Client::new()
            .post(format!("{}/sourcegraph/api/{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        answer(with_token(request, token)).await
    }
}

pub fn with_token(
    request: reqwest::RequestBuilder,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

/// Sends `request`: its status and its body as JSON (a body that is not JSON, such as a
/// router's bare 404 or 405, as a JSON string).
pub async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// `arguments` as a query string: strings as they are, numbers and booleans as their JSON
/// text, arrays and objects as JSON text; every byte outside the unreserved set escaped.
pub fn query_string(arguments: &Value) -> String {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object: {arguments}");
    };
    arguments
        .iter()
        .map(|(name, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            format!("{}={}", escape(name), escape(&text))
        })
        .collect::<Vec<_>>()
        .join("&")
}

pub fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

/// One MCP `tools/call`: whether it is an `isError` result, and its text blocks.
pub async fn mcp_call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: &Value,
) -> (bool, Vec<String>) {
    mcp_try_call(client, tool, arguments)
        .await
        .unwrap_or_else(|error| panic!("tools/call {tool} {arguments}: {error}"))
}

/// [`mcp_call`], a failure of the transport (an HTTP error status, say) as `Err`.
pub async fn mcp_try_call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: &Value,
) -> Result<(bool, Vec<String>), String> {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments.clone()));
    let result: CallToolResult = client
        .call_tool(params)
        .await
        .map_err(|error| error.to_string())?;
    let texts = result
        .content
        .iter()
        .map(|block| {
            block
                .as_text()
                .map(|text| text.text.clone())
                .unwrap_or_else(|| panic!("{tool}: only text blocks (R-5)"))
        })
        .collect();
    Ok((result.is_error == Some(true), texts))
}

/// A source of two commits: `src/lib.rs` defines `alpha` (and `beta` after the second
/// commit), `docs/guide.md` mentions it. Answers the repository and its first commit.
pub fn source() -> (SourceRepo, String) {
    let source = SourceRepo::with_files(&[
        ("src/lib.rs", b"pub fn alpha() -> u32 {\n    1\n}\n"),
        ("docs/guide.md", b"alpha deploy guide\n"),
    ]);
    let first = source.head();
    source.commit(
        &[(
            "src/lib.rs",
            b"pub fn alpha() -> u32 {\n    1\n}\n\npub fn beta() -> u32 {\n    alpha() + 1\n}\n",
        )],
        "beta",
    );
    (source, first)
}

/// Arguments that make `tool` answer about `repo` (every tool of the table has some: a tool
/// added without an entry here fails the tests, which is the point of walking the table).
pub fn arguments(tool: &str, repo: &str, first: &str) -> Value {
    match tool {
        "read" => json!({"repo": repo, "path": "src/lib.rs"}),
        "read_many" => json!({
            "repo": repo,
            "files": [{"path": "src/lib.rs"}, {"path": "docs/guide.md", "start_line": 1}]
        }),
        "search" => json!({"query": "alpha", "repo": repo}),
        "list" => json!({"repo": repo, "depth": 2}),
        "resolve" => json!({"repo": repo, "revision": "main"}),
        "log" => json!({"repo": repo, "limit": 10}),
        "commit" => json!({"repo": repo, "revision": "main"}),
        "diff" => json!({"repo": repo, "base": first, "head": "main"}),
        "blame" => json!({"repo": repo, "path": "src/lib.rs", "start_line": 1}),
        "outline" => json!({"repo": repo, "path": "src/lib.rs"}),
        "definitions" => json!({"symbol": "alpha", "repo": repo}),
        "references" => json!({"symbol": "alpha", "repo": repo}),
        "availability" => json!({"repo": repo, "revision": "main", "include_plugins": true}),
        "discovery" | "plugin_status" | "reload_plugins" => json!({}),
        other => panic!("the test has no arguments for the new tool `{other}`: add them"),
    }
}

/// Waits (within the test's bound) until `repo` is indexed with its symbols: `definitions`
/// of `alpha` finds `src/lib.rs`.
pub async fn wait_indexed(server: &Server, repo: &str, token: Option<&str>) {
    let probe = json!({"symbol": "alpha", "repo": repo});
    loop {
        let (status, body) = server.get("definitions", &probe, token).await;
        if status == 200 && body.to_string().contains("src/lib.rs") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The repository-naming tools of the table: those with a `repo` argument.
pub fn repository_naming_tools(limits: &Limits) -> Vec<&'static dyn ToolDef> {
    tools::TOOLS
        .iter()
        .copied()
        .filter(|tool| {
            tool.input_schema(limits)
                .get("properties")
                .and_then(|properties| properties.get("repo"))
                .is_some()
        })
        .collect()
}

/// What a caller got from one call on one face, comparable across calls.
#[derive(Debug, Clone, PartialEq)]
pub enum Got {
    /// MCP: `isError` and the text blocks.
    Mcp(bool, Vec<String>),
    /// HTTP: the status and the JSON body without timings.
    Http(u16, Value),
}

impl Got {
    /// The answer with every occurrence of `from` written as `to` (an unknown repository's
    /// answer names the name it was given).
    pub fn renamed(&self, from: &str, to: &str) -> Got {
        match self {
            Got::Mcp(error, texts) => Got::Mcp(
                *error,
                texts.iter().map(|text| text.replace(from, to)).collect(),
            ),
            Got::Http(status, body) => Got::Http(
                *status,
                serde_json::from_str(&body.to_string().replace(from, to)).expect("still JSON"),
            ),
        }
    }

    pub fn failed(&self) -> bool {
        match self {
            Got::Mcp(error, _) => *error,
            Got::Http(status, _) => *status != 200,
        }
    }
}
