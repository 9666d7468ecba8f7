//! The Streamable HTTP endpoint, with a direct path for the stateless POSTs that carry the
//! work: `tools/call` and `tools/list` (issue 30 point 6).
//!
//! rmcp answers every stateless POST by building a service for it: a peer, channels, a serve
//! loop task, a handler task and a response task. On a multi-threaded runtime the hand-offs
//! between those tasks cost more server CPU than the whole-file read the request carries. A
//! request that is plainly valid is answered here instead, in the connection's own task: the
//! checks rmcp makes before dispatch, then rmcp's own dispatch (`Service::handle_request` of
//! the handler, which checks the requested protocol version and the per-request metadata of
//! 2026-07-28 and shapes the result for the revision), then the JSON reply and HTTP status
//! rmcp would give.
//!
//! Everything else goes to rmcp unchanged (the body as it was read): other methods,
//! notifications, `GET`/`DELETE`, a `Host` that is not plainly allowed, any `Origin`,
//! `Accept` with parameters, a body that is not a JSON-RPC message, a protocol version header
//! that is absent where required, unknown or contradicted by `_meta`, SEP-2243 headers that
//! do not plainly match. The checks here accept a subset of what rmcp accepts, so every
//! refusal keeps rmcp's exact answer; only the way an accepted request is run differs.

use crate::server::McpServer;
use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientRequest, ErrorCode, GetMeta, Implementation,
    InitializeRequestParams, JsonRpcRequest, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{Peer, RoleServer};
use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// An HTTP response of the endpoint (rmcp's response type).
pub type BoxResponse = Response<BoxBody<Bytes, Infallible>>;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// rmcp wraps SEP-2243 header values that need it as `=?base64?…?=`.
const BASE64_HEADER_PREFIX: &str = "=?base64?";

/// The Streamable HTTP MCP endpoint: a tower `Service` over `http::Request<B>` for any body
/// `B`, to mount with `axum::Router::nest_service`. See [`crate::http_service`].
#[derive(Clone)]
pub struct HttpService {
    inner: Arc<Inner>,
}

/// What the direct path needs, built once per endpoint.
pub(crate) struct Settings {
    /// The `Host` values rmcp accepts (`McpConfig::allowed_hosts`); empty accepts all.
    pub(crate) allowed_hosts: Vec<String>,
    /// rmcp's request body limit.
    pub(crate) max_body_bytes: usize,
    /// rmcp's cancellation token: once cancelled, rmcp answers a request still running 500.
    pub(crate) shutdown: CancellationToken,
    /// Some tool schema carries SEP-2243 `x-mcp-header` annotations.
    pub(crate) param_headers: bool,
}

struct Inner {
    rmcp: StreamableHttpService<McpServer, NeverSessionManager>,
    handler: McpServer,
    /// `None`: every `Host` is allowed (an empty list, rmcp's semantics).
    allowed_hosts: Option<Vec<Authority>>,
    max_body_bytes: usize,
    shutdown: CancellationToken,
    /// Some tool schema carries SEP-2243 `x-mcp-header` annotations, whose `Mcp-Param-*`
    /// headers rmcp checks: then requests of revisions with standard headers go to rmcp.
    param_headers: bool,
    /// One peer per protocol version rmcp knows, made on first use (see [`Inner::peer`]).
    peers: Vec<(ProtocolVersion, OnceLock<Peer<RoleServer>>)>,
}

/// A `Host` authority as rmcp compares them: host lowercased without IPv6 brackets, and the
/// port when one is given.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn new(host: &str, port: Option<u16>) -> Self {
        Self {
            host: host
                .trim_matches('[')
                .trim_matches(']')
                .to_ascii_lowercase(),
            port,
        }
    }

    /// An allowed-hosts entry, parsed as rmcp parses it (`None` for an empty one, which
    /// allows nothing).
    fn allowed(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        Some(match http::uri::Authority::try_from(entry) {
            Ok(authority) => Self::new(authority.host(), authority.port_u16()),
            Err(_) => Self::new(entry, None),
        })
    }

    fn admits(&self, host: &Authority) -> bool {
        self.host == host.host && self.port.is_none_or(|port| host.port == Some(port))
    }
}

/// A request the direct path answers.
struct DirectCall {
    request: JsonRpcRequest<ClientRequest>,
    /// The protocol version the request runs under: its `MCP-Protocol-Version` header, or
    /// 2025-03-26 without one (rmcp's fallback for stateless requests).
    version: usize,
    /// The request names its version in `_meta` (negotiated per request): JSON-RPC errors
    /// then map to HTTP statuses, as rmcp maps them.
    negotiated: bool,
}

impl HttpService {
    pub(crate) fn new(
        rmcp: StreamableHttpService<McpServer, NeverSessionManager>,
        handler: McpServer,
        settings: Settings,
    ) -> Self {
        let allowed_hosts = (!settings.allowed_hosts.is_empty()).then(|| {
            settings
                .allowed_hosts
                .iter()
                .filter_map(|entry| Authority::allowed(entry))
                .collect()
        });
        let peers = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .map(|version| (version.clone(), OnceLock::new()))
            .collect();
        Self {
            inner: Arc::new(Inner {
                rmcp,
                handler,
                allowed_hosts,
                max_body_bytes: settings.max_body_bytes,
                shutdown: settings.shutdown,
                param_headers: settings.param_headers,
                peers,
            }),
        }
    }

    /// Answers one HTTP request: directly when it is a plainly valid stateless `tools/call`
    /// or `tools/list`, through rmcp otherwise.
    pub async fn handle<B>(&self, request: Request<B>) -> BoxResponse
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Display,
    {
        let inner = &self.inner;
        if inner.allowed_hosts.is_some() && host_has_userinfo(request.headers()) {
            // rmcp parses `Host` as a URI authority, so `evil@localhost` would pass as
            // `localhost`; a Host header never carries user information (RFC 9110, 7.2).
            return text_response(
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed".into(),
            );
        }
        if !inner.plain_post(request.method(), request.headers()) {
            return inner.rmcp.handle(request).await;
        }
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body, inner.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(refused) => return refused,
        };
        match inner.direct_call(&parts.headers, &bytes) {
            Some(call) => inner.serve(call, parts).await,
            None => {
                inner
                    .rmcp
                    .handle(Request::from_parts(parts, Full::new(bytes)))
                    .await
            }
        }
    }
}

/// Whether a `Host` header names user information (`user@host`), which no valid one does.
fn host_has_userinfo(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::HOST)
        .iter()
        .any(|host| host.as_bytes().contains(&b'@'))
}

impl<B> tower_service::Service<Request<B>> for HttpService
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Display,
{
    type Response = BoxResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<BoxResponse, Infallible>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}

impl Inner {
    /// A POST whose headers pass rmcp's checks before the body is read: `Host` allowed,
    /// no `Origin` (rmcp checks a present one; browsers are not the hot path), `Accept`
    /// naming both JSON and SSE without parameters, `Content-Type` JSON.
    fn plain_post(&self, method: &Method, headers: &HeaderMap) -> bool {
        method == Method::POST
            && self.host_allowed(headers)
            && !headers.contains_key(header::ORIGIN)
            && accepts_json_and_sse(headers)
            && content_type_is_json(headers)
    }

    /// rmcp's DNS-rebinding check, for a request with a `Host` header (HTTP/1.1; without
    /// one rmcp looks at the URI's authority, and decides).
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST) else {
            return false;
        };
        let Some(host) = host
            .to_str()
            .ok()
            .and_then(|host| http::uri::Authority::try_from(host).ok())
        else {
            return false;
        };
        let host = Authority::new(host.host(), host.port_u16());
        match &self.allowed_hosts {
            None => true,
            Some(allowed) => allowed.iter().any(|entry| entry.admits(&host)),
        }
    }

    /// The request, when the body is one the direct path answers exactly as rmcp would.
    fn direct_call(&self, headers: &HeaderMap, body: &[u8]) -> Option<DirectCall> {
        let Ok(ClientJsonRpcMessage::Request(request)) = serde_json::from_slice(body) else {
            return None;
        };
        let tool_name = match &request.request {
            ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
            ClientRequest::ListToolsRequest(_) => None,
            _ => return None,
        };
        let header = single_header(headers, &PROTOCOL_VERSION)?;
        let declared = request.request.get_meta().protocol_version();
        let negotiated = declared.is_some();
        let version = match (header, declared) {
            // rmcp serves a request without either as 2025-03-26.
            (None, None) => "2025-03-26",
            // A header alone: a known version before the revision that requires `_meta`
            // (rmcp refuses the others).
            (Some(header), None) if header < ProtocolVersion::V_2026_07_28.as_str() => header,
            // Both, equal (rmcp refuses a mismatch or `_meta` without the header).
            (Some(header), Some(declared)) if header == declared.as_str() => header,
            _ => return None,
        };
        let version = self
            .peers
            .iter()
            .position(|(known, _)| known.as_str() == version)?;
        if version_requires_standard_headers(headers)
            && !self.standard_headers_match(headers, &request.request, tool_name)
        {
            return None;
        }
        Some(DirectCall {
            request,
            version,
            negotiated,
        })
    }

    /// SEP-2243 (2026-07-28 on): `Mcp-Method` is the body's method and, for `tools/call`,
    /// `Mcp-Name` the tool's name, each given once and plainly (rmcp also decodes Base64
    /// values and checks `Mcp-Param-*` headers of annotated schemas; those go to rmcp).
    fn standard_headers_match(
        &self,
        headers: &HeaderMap,
        request: &ClientRequest,
        tool_name: Option<&str>,
    ) -> bool {
        if self.param_headers {
            return false;
        }
        let method = request.method();
        if single_header(headers, &MCP_METHOD) != Some(Some(method)) {
            return false;
        }
        match tool_name {
            Some(name) => matches!(
                single_header(headers, &MCP_NAME),
                Some(Some(value)) if value == name && !value.starts_with(BASE64_HEADER_PREFIX)
            ),
            None => true,
        }
    }

    /// A peer carrying what rmcp gives a stateless request's peer: the protocol version and
    /// no client capabilities or identity. rmcp has no public constructor for a peer, so
    /// each comes from a service served once over a closed stream (it ends at once; the
    /// peer keeps its information). The handler never writes to it: the direct path takes
    /// only methods whose handling sends nothing to the client.
    fn peer(&self, version: usize) -> Peer<RoleServer> {
        let (protocol_version, peer) = &self.peers[version];
        peer.get_or_init(|| {
            let info = InitializeRequestParams::new(
                ClientCapabilities::default(),
                Implementation::default(),
            )
            .with_protocol_version(protocol_version.clone());
            let running = rmcp::service::serve_directly(
                self.handler.clone(),
                (tokio::io::empty(), tokio::io::sink()),
                Some(info),
            );
            running.peer().clone()
        })
        .clone()
    }

    /// Runs the request through rmcp's dispatch of the handler and answers as rmcp's
    /// stateless JSON path does.
    async fn serve(&self, call: DirectCall, parts: http::request::Parts) -> BoxResponse {
        let DirectCall {
            mut request,
            version,
            negotiated,
        } = call;
        let id = request.id.clone();
        // rmcp maps invalid params to 400 only when the 2026-07-28 metadata is incomplete.
        let meta_incomplete = !request
            .request
            .get_meta()
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty();
        let mut context = RequestContext::new(id.clone(), self.peer(version));
        std::mem::swap(&mut context.meta, request.request.get_meta_mut());
        context.extensions.insert(parts);
        let handler = self.handler.clone();
        let running = Detached::new(async move {
            rmcp::Service::<RoleServer>::handle_request(&handler, request.request, context).await
        });
        let result = tokio::select! {
            result = running => result,
            () = self.shutdown.cancelled() => {
                tracing::error!("Internal server error when empty response: no response message received from handler");
                return text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Encounter an error when empty response: no response message received from handler".to_string(),
                );
            }
        };
        let message = match result {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => {
                tracing::debug!(%id, ?error, "MCP request failed");
                ServerJsonRpcMessage::error(error, Some(id))
            }
        };
        let status = if negotiated {
            negotiated_status(&message, meta_incomplete)
        } else {
            StatusCode::OK
        };
        match serde_json::to_vec(&message) {
            Ok(body) => {
                let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
                *response.status_mut() = status;
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(JSON));
                response
            }
            Err(error) => {
                tracing::error!("Internal server error when serialize json response: {error}");
                text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Encounter an error when serialize json response: {error}"),
                )
            }
        }
    }
}

/// The handler's future, polled in place; if the response is dropped first (the client went
/// away, or shutdown answered), the rest runs on a task of its own, as rmcp's handler task
/// would: a started tool call is never cut off between two steps.
struct Detached<F: Future + Send + 'static>
where
    F::Output: Send,
{
    future: Option<Pin<Box<F>>>,
}

impl<F: Future + Send + 'static> Detached<F>
where
    F::Output: Send,
{
    fn new(future: F) -> Self {
        Self {
            future: Some(Box::pin(future)),
        }
    }
}

impl<F: Future + Send + 'static> Future for Detached<F>
where
    F::Output: Send,
{
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let Some(future) = self.future.as_mut() else {
            return std::task::Poll::Pending;
        };
        let output = std::task::ready!(future.as_mut().poll(cx));
        self.future = None;
        std::task::Poll::Ready(output)
    }
}

impl<F: Future + Send + 'static> Drop for Detached<F>
where
    F::Output: Send,
{
    fn drop(&mut self) {
        // Outside a runtime (it is being torn down) the rest is dropped: nothing could run it.
        if let (Some(future), Ok(runtime)) =
            (self.future.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(future);
        }
    }
}

/// rmcp's HTTP status for the answer to a request that negotiated its version per request.
fn negotiated_status(message: &ServerJsonRpcMessage, meta_incomplete: bool) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if meta_incomplete => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// Whether rmcp checks SEP-2243 headers: the version header names 2026-07-28 or later
/// (compared as rmcp compares it, as text).
fn version_requires_standard_headers(headers: &HeaderMap) -> bool {
    headers
        .get(&PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|version| version >= ProtocolVersion::STANDARD_HEADERS.as_str())
}

/// `Some(None)`: absent; `Some(Some(value))`: given once, as text; `None`: given twice or
/// not text (left to rmcp).
fn single_header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<Option<&'a str>> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Some(None);
    };
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok().map(Some)
}

/// `Accept` lists both media types rmcp requires, with no parameters or quoting anywhere
/// (a `q=0` would exclude one: those go to rmcp).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains([';', '"']) {
            return false;
        }
        for essence in value.split(',').map(str::trim) {
            json |= essence.eq_ignore_ascii_case(JSON);
            sse |= essence.eq_ignore_ascii_case(EVENT_STREAM);
        }
    }
    json && sse
}

/// rmcp's `Content-Type` check: the first value's media type is JSON.
fn content_type_is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case(JSON)
        })
}

/// The body, read as rmcp reads it, with rmcp's answers when it is too large or breaks off.
async fn read_body<B>(body: B, max_bytes: usize) -> Result<Bytes, BoxResponse>
where
    B: Body,
    B::Error: Display,
{
    let mut collected = BytesMut::new();
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let Ok(mut data) = frame.into_data() else {
                    continue;
                };
                if data.remaining() > max_bytes.saturating_sub(collected.len()) {
                    return Err(text_response(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("Payload Too Large: request body exceeds {max_bytes} bytes"),
                    ));
                }
                while data.has_remaining() {
                    let chunk = data.chunk();
                    let len = chunk.len();
                    collected.extend_from_slice(chunk);
                    data.advance(len);
                }
            }
            Err(error) => {
                return Err(text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Failed to read request body: {error}"),
                ));
            }
        }
    }
    Ok(collected.freeze())
}

fn text_response(status: StatusCode, text: String) -> BoxResponse {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn empty_endpoint(config: crate::McpConfig) -> (HttpService, tempfile::TempDir) {
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
        (
            crate::http_service(service, config, CancellationToken::new()),
            dir,
        )
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    const CLIENT: &[(&str, &str)] = &[
        ("host", "127.0.0.1:8080"),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ];

    fn with(extra: &[(&str, &str)]) -> HeaderMap {
        let mut all = CLIENT.to_vec();
        all.extend_from_slice(extra);
        headers(&all)
    }

    /// Which POSTs reach the body at all: rmcp's header checks, accepted only where plain.
    #[tokio::test]
    async fn plain_posts_are_the_ones_clients_send() {
        let (endpoint, _dir) = empty_endpoint(crate::McpConfig::default());
        let inner = &endpoint.inner;
        assert!(inner.plain_post(&Method::POST, &with(&[])));
        assert!(inner.plain_post(
            &Method::POST,
            &headers(&[
                ("host", "LOCALHOST"),
                ("accept", "text/event-stream"),
                ("accept", "application/json"),
                ("content-type", "application/json; charset=utf-8"),
            ])
        ));
        assert!(!inner.plain_post(&Method::GET, &with(&[])));
        assert!(!inner.plain_post(&Method::POST, &with(&[("origin", "http://localhost")])));
        let refused = [
            [("host", "evil.example"), CLIENT[1], CLIENT[2]],
            [CLIENT[0], ("accept", "application/json"), CLIENT[2]],
            [
                CLIENT[0],
                ("accept", "application/json, text/event-stream;q=0"),
                CLIENT[2],
            ],
            [CLIENT[0], CLIENT[1], ("content-type", "text/plain")],
        ];
        for refused in refused {
            assert!(
                !inner.plain_post(&Method::POST, &headers(&refused)),
                "{refused:?}"
            );
        }
        let no_host = headers(&CLIENT[1..]);
        assert!(!inner.plain_post(&Method::POST, &no_host));

        let (open, _dir) = empty_endpoint(crate::McpConfig {
            allowed_hosts: vec!["mcp.example.org:443".into(), "Other.Example".into()],
            ..crate::McpConfig::default()
        });
        let host = |host: &str| {
            open.inner.plain_post(
                &Method::POST,
                &headers(&[("host", host), CLIENT[1], CLIENT[2]]),
            )
        };
        assert!(host("mcp.example.org:443"));
        assert!(!host("mcp.example.org:8443"));
        assert!(!host("mcp.example.org"));
        assert!(host("other.example:1234"));
        assert!(!host("127.0.0.1"));
    }

    /// Which bodies the direct path answers: `tools/call` and `tools/list` requests whose
    /// version header, `_meta` and SEP-2243 headers are plainly consistent.
    #[tokio::test]
    async fn direct_calls_are_plainly_valid_tool_requests() {
        let (endpoint, _dir) = empty_endpoint(crate::McpConfig::default());
        let inner = &endpoint.inner;
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "read", "arguments": {"repo": "a/b"}}});
        let next = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "read", "arguments": {}, "_meta": {
                              "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}});
        let direct = |headers: &[(&str, &str)], body: &serde_json::Value| {
            inner
                .direct_call(&with(headers), body.to_string().as_bytes())
                .map(|call| (inner.peers[call.version].0.to_string(), call.negotiated))
        };
        let legacy = |version: &str| Some((version.to_string(), false));
        assert_eq!(direct(&[], &call), legacy("2025-03-26"));
        assert_eq!(
            direct(&[("mcp-protocol-version", "2025-11-25")], &call),
            legacy("2025-11-25")
        );
        assert_eq!(
            direct(
                &[("mcp-protocol-version", "2025-06-18")],
                &json!({"jsonrpc": "2.0", "id": "x", "method": "tools/list"})
            ),
            legacy("2025-06-18")
        );
        let standard = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "read"),
        ];
        assert_eq!(
            direct(&standard, &next),
            Some(("2026-07-28".to_string(), true))
        );

        // Left to rmcp.
        for (headers, body) in [
            // Not a tool request, or not a request.
            (
                &[][..],
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "x", "version": "1"}}}),
            ),
            (
                &[][..],
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ),
            (
                &[][..],
                json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            ),
            (&[][..], json!([call.clone()])),
            // Version headers rmcp refuses or routes otherwise.
            (&[("mcp-protocol-version", "1999-01-01")][..], call.clone()),
            (&[("mcp-protocol-version", "2026-07-28")][..], call.clone()),
            (
                &[
                    ("mcp-protocol-version", "2025-11-25"),
                    ("mcp-protocol-version", "2025-11-25"),
                ][..],
                call.clone(),
            ),
            (&[][..], next.clone()),
            (
                &[
                    ("mcp-protocol-version", "2025-11-25"),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "read"),
                ][..],
                next.clone(),
            ),
            // SEP-2243 headers missing, contradicting, repeated or Base64-wrapped.
            (&standard[..1], next.clone()),
            (&standard[..2], next.clone()),
            (
                &[standard[0], ("mcp-method", "tools/list"), standard[2]][..],
                next.clone(),
            ),
            (
                &[standard[0], standard[1], ("mcp-name", "search")][..],
                next.clone(),
            ),
            (
                &[standard[0], standard[1], standard[2], ("mcp-name", "read")][..],
                next.clone(),
            ),
            (
                &[
                    standard[0],
                    standard[1],
                    ("mcp-name", "=?base64?cmVhZA==?="),
                ][..],
                next.clone(),
            ),
        ] {
            assert_eq!(direct(headers, &body), None, "{headers:?} {body}");
        }
    }

    /// A call whose response is dropped (the client went away) still runs to its end.
    #[tokio::test]
    async fn a_dropped_call_runs_to_its_end() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done, finished) = tokio::sync::oneshot::channel();
        let call = Detached::new(async move {
            let _ = wait.await;
            let _ = done.send("finished");
        });
        let started = tokio::time::timeout(std::time::Duration::from_millis(10), call).await;
        assert!(started.is_err(), "the call waits for `go`");
        go.send(()).unwrap();
        assert_eq!(finished.await, Ok("finished"));
    }

    /// rmcp's mapping of errors to HTTP statuses for per-request negotiation.
    #[test]
    fn negotiated_errors_map_to_rmcps_statuses() {
        let error = |code: ErrorCode| {
            ServerJsonRpcMessage::error(
                rmcp::ErrorData::new(code, "x", None),
                Some(rmcp::model::RequestId::Number(1)),
            )
        };
        assert_eq!(
            negotiated_status(&error(ErrorCode::INVALID_PARAMS), false),
            StatusCode::OK
        );
        assert_eq!(
            negotiated_status(&error(ErrorCode::INVALID_PARAMS), true),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiated_status(&error(ErrorCode::METHOD_NOT_FOUND), false),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            negotiated_status(&error(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION), false),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiated_status(&error(ErrorCode::INTERNAL_ERROR), false),
            StatusCode::OK
        );
    }
}
