//! `mcpserver` is the MCP face of Context Source Graph (SPEC M-1..M-5, R-5, §9), on the
//! official Rust SDK `rmcp`: Streamable HTTP (mounted by the CLI at `/sourcegraph/mcp`) and
//! stdio.
//!
//! The tools are those of [`tools::TOOLS`], plus the `TOOL_PRESETS` of the current server
//! plugin epoch. Answers are standard text `content` blocks only (no `structuredContent`, no
//! `outputSchema`); a read answers the SPEC §9 block. Malformed arguments are JSON-RPC
//! invalid-params errors naming what was wrong; business failures (missing file, unknown
//! repository…) are tool results with `isError: true`.
//!
//! Streamable HTTP is served statelessly for every protocol revision: 2026-07-28 has no
//! sessions, and for 2025-11-25 and older clients statelessness avoids the "session not
//! found" failures of clients that drop `Mcp-Session-Id`. Each POST carries the endpoint URL,
//! so the connection parameter `plugins` (M-2) is read from every request's query.

#![warn(missing_docs)]

mod connection;
mod direct;
mod server;
mod serverplugins;

pub use direct::{BoxResponse, HttpService};
pub use server::McpServer;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use server::{Catalogue, PluginsSource};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tools::Limits;

/// DNS-rebinding and cross-origin protection of the Streamable HTTP endpoint (M-1).
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Accepted `Host` header values: host names or `host:port` authorities
    /// (`example.org`, `example.org:8443`). A name without a port accepts any port. An empty
    /// list accepts every `Host` (rmcp's semantics) — only for deployments where a proxy in
    /// front checks it. Default: the loopback names `localhost`, `127.0.0.1`, `::1`.
    pub allowed_hosts: Vec<String>,
    /// Accepted browser `Origin` values, with scheme and port (`https://example.org:443`,
    /// `http://localhost:*`). A request with any other `Origin` gets HTTP 403; a request
    /// without `Origin` (every non-browser client) passes. Validation is always on: an empty
    /// list refuses every present `Origin`. Deriving the list from the listen address is the
    /// caller's job. Default: empty.
    pub allowed_origins: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: StreamableHttpServerConfig::default().allowed_hosts,
            allowed_origins: Vec::new(),
        }
    }
}

/// The Streamable HTTP MCP endpoint, to mount with
/// `axum::Router::nest_service("/sourcegraph/mcp", svc)`.
///
/// Who calls is a `service::Caller` in the request's extensions, put there by the HTTP
/// access layer in front; a request without one is anonymous.
///
/// Stateless for every protocol revision (no `Mcp-Session-Id`; `GET` and `DELETE` answer 405),
/// plain JSON replies where the answer is a single message, `Host` and `Origin` validated per
/// `config`. Cancelling `shutdown` stops accepting requests and ends open response streams.
///
/// rmcp serves the endpoint; plainly valid `tools/call` and `tools/list` POSTs are answered
/// without rmcp's per-request service (see `direct.rs`), with the same answers.
pub fn http_service(
    service: service::Service,
    config: McpConfig,
    shutdown: CancellationToken,
) -> HttpService {
    let McpConfig {
        allowed_hosts,
        allowed_origins,
    } = config;
    let http_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(allowed_hosts)
        .with_allowed_origins(allowed_origins)
        // With an empty list rmcp would skip Origin validation altogether; ours refuses every
        // foreign Origin instead (DNS rebinding and browser cross-origin protection).
        .enforce_origin_validation()
        .with_cancellation_token(shutdown);
    let catalogue = Arc::new(Catalogue::new(&Limits::new(service.config())));
    let settings = direct::Settings {
        allowed_hosts: http_config.allowed_hosts.clone(),
        max_body_bytes: http_config.max_request_body_bytes,
        shutdown: http_config.cancellation_token.clone(),
        // Presets derive their schemas from these, so they add no annotation.
        param_headers: catalogue.tools().iter().any(|tool| {
            serde_json::to_string(&*tool.input_schema)
                .map_or(true, |schema| schema.contains("x-mcp-header"))
        }),
    };
    let handler = McpServer::new(service, PluginsSource::RequestUrl, catalogue);
    let factory = handler.clone();
    let rmcp = StreamableHttpService::new(
        move || Ok(factory.clone()),
        Arc::new(NeverSessionManager::default()),
        http_config,
    );
    HttpService::new(rmcp, handler, settings)
}

/// Why the stdio MCP session failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The client did not complete the MCP handshake (closed stdin, malformed first message).
    /// Boxed: the rmcp error is large and this is the rare path.
    #[error("the MCP client did not start a session on stdio: {0}")]
    Start(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The session task ended abnormally (a panic inside the server).
    #[error("the stdio MCP session ended abnormally: {0}")]
    Session(#[from] tokio::task::JoinError),
}

/// Serves MCP on this process's stdin/stdout until the client closes the connection
/// (`csg mcp`). `plugins` is the connection parameter (M-2), from `csg mcp --plugins …`.
///
/// Nothing but MCP messages may be written to stdout meanwhile: logs go to stderr.
pub async fn serve_stdio(
    service: service::Service,
    plugins: service::ConnectionPlugins,
) -> Result<(), McpError> {
    let catalogue = Arc::new(Catalogue::new(&Limits::new(service.config())));
    let server = McpServer::new(service, PluginsSource::Fixed(plugins), catalogue);
    let running = server
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpError::Start(Box::new(e)))?;
    let reason = running.waiting().await?;
    tracing::debug!(?reason, "stdio MCP session ended");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolRequestParams;

    /// M-2 (stdio): the connection parameter comes from `csg mcp --plugins`, not from a URL;
    /// the same handler answers over a byte stream.
    #[tokio::test]
    async fn m1_stdio_style_transport_serves_the_tools() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstore::GitStore::open(
            gitstore::StoreConfig {
                data_dir: dir.path().to_path_buf(),
                retention: gitstore::DEFAULT_RETENTION,
            },
            Arc::new(gitstore::SystemClock),
        )
        .unwrap();
        let service = service::Service::new(store, service::ServiceConfig::default());
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let catalogue = Arc::new(Catalogue::new(&Limits::new(service.config())));
        let server = McpServer::new(
            service,
            PluginsSource::Fixed(service::ConnectionPlugins::Off),
            catalogue,
        );
        let served = tokio::spawn(async move {
            let running = server
                .serve(server_io)
                .await
                .map_err(|e| McpError::Start(Box::new(e)))?;
            running.waiting().await?;
            Ok::<_, McpError>(())
        });
        let client = ().serve(client_io).await.unwrap();
        assert_eq!(client.list_all_tools().await.unwrap().len(), 16);
        let result = client
            .call_tool(CallToolRequestParams::new("discovery"))
            .await
            .unwrap();
        let text = result.content[0].as_text().unwrap().text.clone();
        assert_eq!(text, "Repositories: 0\n");
        client.cancel().await.unwrap();
        served.await.unwrap().unwrap();
    }
}
