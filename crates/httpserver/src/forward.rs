//! Cluster mode's routing (issue 31, issue 43): a client's call for a repository this
//! replica does not own is forwarded, as it came, to an owner, and to the next owner if that
//! one cannot answer.
//!
//! Authenticate, then authorize, then route (A-7): this layer sits inside the access layer,
//! so a call reaches it only once its caller is known, a token in the URL refused and a
//! wrong token counted; and it routes only a call whose caller may read the repository (or
//! holds `prepare`). Any other call (an unknown name, a private repository the caller may
//! not read) is answered here on the unknown-name path, whatever the cluster's state, so
//! "unknown" and "may not read" answer alike on every replica.
//!
//! The request is forwarded whole — method, path, query, body and the caller's credentials
//! (bearer token or session cookie) — marked as a forwarded client call
//! ([`crate::wire::FORWARDED_HEADER`]), so the owner authenticates the client again,
//! applies aliases and plugins and renders the answer exactly as it would for a caller of
//! its own; this replica never answers for a repository it does not hold, and the owner
//! never forwards it again (a replica that believes it owns nothing would otherwise bounce
//! it).
//!
//! Which repository a request names — only the known routes are read: `repo` of a tool in
//! the JSON API (query string or JSON body), of an MCP `tools/call` (after the server
//! plugins' presets and `on_tool_call` rewrites, which may fix or change it), a
//! registration's `name`, the site's `/sourcegraph/repos/<owner>/<name>/…` pages (parsed by
//! the site's own parser) and its search with a `repo`. A request naming none (discovery,
//! search over every repository, probes) is answered here.

use crate::replica_client::{Answer, ReplicaClient};
use crate::wire::{
    CLIENT_HEADER, COUNTERS, DEADLINE_HEADER, FORWARDED_HEADER, Forwarded, IDENTITY_HEADER,
    INDEX_OPTIONAL_HEADER, REPLICA_HEADER, deadline_of, refuse,
};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use service::{CallContext, ErrorKind, ForwardedRefusal, Route, RoutedCall, Service};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// On an owner's 503 to a forwarded call that reads the search index: the owner holds the
/// repository but has no index of it yet (it just gained it, or restarted), so the
/// forwarding replica may ask it again with [`INDEX_OPTIONAL_HEADER`] if no owner has one.
const NOT_INDEXED_HEADER: HeaderName = HeaderName::from_static("x-csg-not-indexed");
/// Marks a 503 of the routing itself (the owner does not hold the repository yet, or ran out
/// of the forwarding replica's deadline), as opposed to the owner's own answer (the metadata
/// database is unreachable, say), which is relayed when no owner answers better.
const ROUTING_REFUSAL_HEADER: HeaderName = HeaderName::from_static("x-csg-routing-refusal");
/// The tools answered from the search index rather than the mirror: a replica that holds a
/// repository but has not indexed it yet answers them "not indexed", so a forwarded one goes
/// to an owner with an index first.
const INDEX_TOOLS: [&str; 3] = ["search", "definitions", "references"];

/// How a replica forwards calls.
#[derive(Clone)]
pub struct ClusterRouting {
    /// The secret every replica shares.
    pub secret: String,
    /// How long one owner gets to answer before the next is tried.
    pub attempt_timeout: Duration,
    /// The cluster's TLS (O-10): the CA `https://` node URLs are verified with, this
    /// replica's certificate for mutual TLS, and whether the replica gate asks for one.
    /// `None`: replicas call each other over plain HTTP.
    pub tls: Option<crate::ClusterTls>,
}

struct Forwarder {
    service: Service,
    secret: HeaderValue,
    client: ReplicaClient,
    attempt_timeout: Duration,
}

/// Wraps `app` with cluster routing. It must sit inside the access layer (it routes by the
/// caller the access layer established), which sits inside [`crate::with_replica_gate`]:
/// `with_replica_gate(with_access(with_cluster_routing(app)))`.
pub fn with_cluster_routing(
    app: axum::Router,
    service: Service,
    routing: ClusterRouting,
) -> Result<axum::Router, String> {
    let secret = HeaderValue::from_str(&routing.secret)
        .map_err(|_| "the cluster secret must be printable ASCII".to_owned())?;
    let client = ReplicaClient::new(routing.tls.as_ref())?;
    let state = Arc::new(Forwarder {
        service,
        secret,
        client,
        attempt_timeout: routing.attempt_timeout,
    });
    Ok(app.layer(axum::middleware::from_fn_with_state(state, route)))
}

async fn route(State(state): State<Arc<Forwarder>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    // Only bodies that may name a repository are read here, and only up to the API's limit
    // (413 past it, before the body is held whole); others pass untouched.
    let needs_body = parts.method == Method::POST && crate::body::limited(parts.uri.path());
    let (bytes, body) = if needs_body {
        match crate::body::read_limited(&parts.headers, body).await {
            Ok(bytes) => (Some(bytes.clone()), Body::from(bytes)),
            Err(refused) => return refused,
        }
    } else {
        (None, body)
    };
    let ctx = crate::auth::context(&parts);
    let call = named_call(&state.service, &ctx, &parts, bytes.as_deref()).await;
    if let Some(forwarded) = parts.extensions.get::<Forwarded>().copied() {
        return answer_forwarded(&state.service, &ctx, forwarded, call, parts, body, next).await;
    }
    let Some(call) = call else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    let repo = call.repo;
    match state.service.route_call(&ctx, &repo, call.call) {
        Route::Here => next.run(Request::from_parts(parts, body)).await,
        Route::Elsewhere(owners) => {
            let bytes = match bytes {
                Some(bytes) => bytes,
                // A body the routing did not need (a site form, say) goes along all the
                // same, under the same limit.
                None => match crate::body::read_limited(&parts.headers, body).await {
                    Ok(bytes) => bytes,
                    Err(refused) => return refused,
                },
            };
            // The caller's own deadline, if it sent one, bounds every attempt.
            let deadline = deadline_of(&parts.headers).map(|wait| Instant::now() + wait);
            let tried = state
                .forward(&parts, bytes.clone(), &repo, &owners, deadline, false)
                .await;
            let (not_indexed, last_own) = match tried {
                Tried::Answered(answer) => return answer,
                Tried::Unanswered {
                    not_indexed,
                    last_own,
                } => (not_indexed, last_own),
            };
            // No owner could answer whole (none holds the repository yet, the ones that do
            // are down, or still indexing it). A replica with a copy of its own (one that
            // registered the repository, or held it before) answers rather than nobody: its
            // reads resolve the head the cluster recorded, like the owners'. A call that
            // reads the index goes to it first only if it has an index; else to an owner
            // still indexing (naming the repository as not indexed yet is an answer, which a
            // 503 is not), else here all the same.
            let copy_here = state.service.has_copy(&ctx, &repo);
            let whole_here = copy_here
                && (!call.call.reads_index || state.service.serves_repo(&ctx, &repo, true));
            if !whole_here
                && !not_indexed.is_empty()
                && let Tried::Answered(answer) = state
                    .forward(&parts, bytes.clone(), &repo, &not_indexed, deadline, true)
                    .await
            {
                return answer;
            }
            if copy_here {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            }
            COUNTERS.unanswered.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%repo, owners = owners.len(), "no owner of the repository answered");
            // An owner's own "unavailable" (its metadata database is unreachable, say) says
            // more than ours.
            if let Some(answer) = last_own {
                return answer;
            }
            refuse(
                ErrorKind::Unavailable,
                "the replicas that hold this repository did not answer; try again shortly",
            )
        }
    }
}

/// A call another replica forwarded: answered here, never forwarded again, within the
/// forwarding replica's deadline, as its client's (the access layer authenticated the
/// client's credentials). A repository the client may read that this replica does not hold
/// (yet) is a 503, so the forwarding replica tries the next owner instead of relaying "not
/// synced" as an answer (over MCP that would be a tool error, which nobody retries). So is a
/// call that reads the search index of a repository held here but not indexed yet (a replica
/// that just gained it, or restarted and is live before it is ready): answered here it would
/// be a 200 naming the repository as not indexed, which neither the forwarding replica nor a
/// balancer retries; the 503 says so ([`NOT_INDEXED_HEADER`]), and the forwarding replica
/// asks again with [`INDEX_OPTIONAL_HEADER`] only if no owner has an index.
async fn answer_forwarded(
    service: &Service,
    ctx: &CallContext,
    forwarded: Forwarded,
    call: Option<NamedCall>,
    parts: http::request::Parts,
    body: Body,
    next: Next,
) -> Response {
    if let Some(call) = call {
        match service.forwarded_refusal(ctx, &call.repo, call.call, forwarded.index_optional) {
            Some(ForwardedRefusal::NotHeld) => {
                return routing_refusal(
                    "this replica does not hold the repository yet; try another owner",
                );
            }
            Some(ForwardedRefusal::NotIndexed) => {
                let mut refused = routing_refusal(
                    "this replica has not indexed the repository yet; try another owner",
                );
                refused
                    .headers_mut()
                    .insert(NOT_INDEXED_HEADER, HeaderValue::from_static("1"));
                return refused;
            }
            None => {}
        }
    }
    let answer = next.run(Request::from_parts(parts, body));
    match forwarded.deadline {
        // The forwarding replica stops waiting then: work past it would be wasted.
        Some(deadline) => tokio::time::timeout(deadline, answer)
            .await
            .unwrap_or_else(|_| {
                routing_refusal("the call did not finish within the forwarding replica's deadline")
            }),
        None => answer.await,
    }
}

/// What forwarding a call to its owners came to.
enum Tried {
    /// An owner answered; its answer, to relay.
    Answered(Response),
    /// No owner answered; those that hold the repository but refused a call that reads the
    /// index because they have not indexed it yet, and the last 502-504 an owner answered
    /// itself (not a routing refusal): it says why better than "no owner answered".
    Unanswered {
        not_indexed: Vec<String>,
        last_own: Option<Response>,
    },
}

impl Forwarder {
    /// Tries each owner in turn; a connection failure, a timeout or a 502/503/504 moves on
    /// to the next (every routed call is safe to repeat: the owner had not answered it).
    /// Each attempt gets `attempt_timeout`, or less when the caller's `deadline` comes
    /// sooner (the owner is told the same); none is made past it. `index_optional` asks
    /// owners to answer a call that reads the index even without one.
    async fn forward(
        &self,
        parts: &http::request::Parts,
        body: Bytes,
        repo: &str,
        owners: &[String],
        deadline: Option<Instant>,
        index_optional: bool,
    ) -> Tried {
        let started = Instant::now();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let mut not_indexed = Vec::new();
        let mut last_own = None;
        // The same for every owner tried: the caller's headers, and for an identity
        // provider's caller the identity validated here instead of the access token (issue 44).
        let mut common = forwarded_headers(&parts.headers);
        common.insert(FORWARDED_HEADER, self.secret.clone());
        if let Some(identity) = forwarded_identity(parts) {
            common.remove(http::header::AUTHORIZATION);
            common.insert(IDENTITY_HEADER, identity);
        }
        for owner in owners {
            let timeout = match deadline {
                Some(deadline) => self
                    .attempt_timeout
                    .min(deadline.saturating_duration_since(Instant::now())),
                None => self.attempt_timeout,
            };
            if timeout.is_zero() {
                tracing::info!(%repo, "the caller's deadline passed; no further owner tried");
                break;
            }
            let url = format!("{}{path}", owner.trim_end_matches('/'));
            let mut headers = common.clone();
            if let Some(value) = parts
                .extensions
                .get::<crate::ClientAddr>()
                .and_then(|crate::ClientAddr(addr)| HeaderValue::from_str(&addr.to_string()).ok())
            {
                headers.insert(CLIENT_HEADER, value);
            }
            if let Ok(value) = HeaderValue::from_str(&timeout.as_millis().to_string()) {
                headers.insert(DEADLINE_HEADER, value);
            }
            if index_optional {
                headers.insert(INDEX_OPTIONAL_HEADER, HeaderValue::from_static("1"));
            }
            let attempt = self
                .client
                .send(parts.method.clone(), &url, headers, body.clone(), timeout)
                .await;
            match attempt {
                Ok(answer) if !retryable(answer.status) => {
                    COUNTERS.forwarded.fetch_add(1, Ordering::Relaxed);
                    return Tried::Answered(relay(answer).await.unwrap_or_else(|| {
                        refuse(ErrorKind::Unavailable, "the owner's answer was cut off")
                    }));
                }
                Ok(answer) => {
                    COUNTERS.failovers.fetch_add(1, Ordering::Relaxed);
                    if answer.headers.contains_key(&NOT_INDEXED_HEADER) {
                        not_indexed.push(owner.clone());
                    }
                    tracing::info!(%repo, %owner, status = %answer.status, "owner could not answer; trying the next");
                    if !answer.headers.contains_key(&ROUTING_REFUSAL_HEADER) {
                        last_own = relay(answer).await.or(last_own);
                    }
                }
                Err(error) => {
                    COUNTERS.failovers.fetch_add(1, Ordering::Relaxed);
                    // The error never names the URL: its query string is the caller's. A TLS
                    // failure (a certificate not from the cluster CA) says so here.
                    tracing::info!(%repo, %owner, %error, "owner unreachable; trying the next");
                }
            }
        }
        tracing::debug!(
            %repo,
            owners = owners.len(),
            waited_ms = started.elapsed().as_millis() as u64,
            "no owner answered this pass"
        );
        Tried::Unanswered {
            not_indexed,
            last_own,
        }
    }
}

/// The [`IDENTITY_HEADER`] of a call by an identity provider's caller with a bearer token
/// (not a website session, whose cookie goes along as it is).
fn forwarded_identity(parts: &http::request::Parts) -> Option<HeaderValue> {
    if !parts.headers.contains_key(http::header::AUTHORIZATION) {
        return None;
    }
    match parts.extensions.get::<service::Caller>()? {
        service::Caller::User(principal) => {
            crate::wire::encode_identity(principal.provider.as_ref()?)
        }
        _ => None,
    }
}

fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 502..=504)
}

/// The owner's answer, headers and body, as this replica's.
async fn relay(answer: Answer) -> Option<Response> {
    let status = answer.status;
    let mut headers = HeaderMap::new();
    for (name, value) in &answer.headers {
        if !hop_by_hop(name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    let body = answer.bytes(usize::MAX).await.ok()?;
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Some(response)
}

/// The caller's headers, less the hop-by-hop ones (RFC 9110 §7.6.1) and any cluster header.
/// `Host` stays the caller's: the owner checks it as it would its own caller's (the MCP
/// endpoint's DNS-rebinding check, the access page's origin), not the node URL's.
fn forwarded_headers(incoming: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in incoming {
        let ours = [
            &REPLICA_HEADER,
            &FORWARDED_HEADER,
            &DEADLINE_HEADER,
            &CLIENT_HEADER,
            &INDEX_OPTIONAL_HEADER,
            &IDENTITY_HEADER,
        ];
        if !hop_by_hop(name.as_str()) && !ours.contains(&name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "content-length"
    )
}

/// The repository a request names, and what the call does with it.
struct NamedCall {
    repo: String,
    call: RoutedCall,
}

/// What a call of the tool `tool` does with its repository.
fn tool_call(tool: &str) -> RoutedCall {
    RoutedCall {
        reads_index: INDEX_TOOLS.contains(&tool),
        prepares: tools::find(tool)
            .is_some_and(|tool| tool.capability() == tools::Capability::Prepare),
    }
}

/// A registration or `prepare`: an operator action.
const PREPARES: RoutedCall = RoutedCall {
    reads_index: false,
    prepares: true,
};

/// The repository a request names, if any, and whether its tool reads the index: only the
/// known routes are read (see the module's documentation). A body is parsed only for the
/// fields routing needs, borrowed from it where they have no escapes; every other value is
/// skipped unbuilt ([`serde::de::IgnoredAny`], what serde's derive does with fields a struct
/// does not name), so a body costs no memory beyond itself — unless server plugins adapt the
/// MCP tool called (a preset, an `on_tool_call` hook), which need its arguments whole. A body
/// these do not fit (not JSON, a field of another type, a field twice) names nothing: it is
/// answered here, where the handler says what is wrong with it.
async fn named_call(
    service: &Service,
    ctx: &CallContext,
    parts: &http::request::Parts,
    body: Option<&[u8]>,
) -> Option<NamedCall> {
    let path = parts.uri.path();
    if path.starts_with("/sourcegraph/mcp") {
        let body = body?;
        let (tool, repo) = mcp_tool_call(body)?;
        if service.adapts_tool_call(ctx, &tool) {
            return adapted_call(service, ctx, &tool, body).await;
        }
        return Some(NamedCall {
            call: tool_call(&tool),
            repo: repo?,
        });
    }
    named_by_request(parts, body)
}

/// Whether a request is an operator action (it needs the `prepare` capability, A-3): an MCP
/// `tools/call` of a prepare tool (or of a server plugin's preset of one), the JSON API's
/// `prepare`, registrations, prepare tools and the cluster's status.
/// Asked by the access layer for a caller without `prepare` when the server takes the
/// identity provider's tokens, so the refusal is a challenge a client can step up from (A-5).
pub(crate) fn prepares(
    service: &Service,
    ctx: &CallContext,
    parts: &http::request::Parts,
    body: Option<&[u8]>,
) -> bool {
    let path = parts.uri.path();
    if path.starts_with("/sourcegraph/mcp") {
        let Some((tool, _)) = body.and_then(mcp_tool_call) else {
            return false;
        };
        // A preset names the tool it runs; `on_tool_call` changes only arguments, so no hook
        // runs for this question.
        let tool = service.preset_tool(ctx, &tool).unwrap_or(tool);
        return tool_call(&tool).prepares;
    }
    let Some(route) = path.strip_prefix("/sourcegraph/api/") else {
        return false;
    };
    match route.trim_end_matches('/') {
        "prepare" | "cluster" | "plugins/reload" => true,
        "repos" => parts.method == Method::POST,
        tool => tool_call(tool).prepares,
    }
}

/// An MCP `tools/call`'s tool and the `repo` of its arguments as the caller sent them; `None`
/// for any other message.
fn mcp_tool_call(body: &[u8]) -> Option<(String, Option<String>)> {
    let message: McpMessage = serde_json::from_slice(body).ok()?;
    if message.method?.0 != "tools/call" {
        return None;
    }
    let params = message.params?;
    let repo = params
        .arguments
        .and_then(|arguments| arguments.repo)
        .map(|repo| repo.0.into_owned());
    Some((params.name?.0.into_owned(), repo))
}

/// [`named_call`] for an MCP tool call that server plugins adapt: named by the arguments
/// the tool will run with.
async fn adapted_call(
    service: &Service,
    ctx: &CallContext,
    tool: &str,
    body: &[u8],
) -> Option<NamedCall> {
    let arguments = tool_arguments(body)?;
    let (tool, effective) = service.effective_tool_call(ctx, tool, arguments).await;
    Some(NamedCall {
        repo: effective.get("repo")?.as_str()?.to_owned(),
        call: tool_call(&tool),
    })
}

/// The arguments of an MCP `tools/call` body, whole (none: an empty object); `None` when
/// they are not an object, or the body holds more JSON values than any request may (this
/// layer runs before the body limit's count, and a tree of values costs many times its text).
fn tool_arguments(body: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    if crate::body::too_many_json_values(body) {
        return None;
    }
    let mut message: serde_json::Value = serde_json::from_slice(body).ok()?;
    match message
        .pointer_mut("/params/arguments")
        .map(serde_json::Value::take)
    {
        Some(serde_json::Value::Object(arguments)) => Some(arguments),
        None | Some(serde_json::Value::Null) => Some(serde_json::Map::new()),
        Some(_) => None,
    }
}

/// [`named_call`] for the routes other than MCP: the JSON API's tools and registrations, the
/// site's repository pages and its search.
fn named_by_request(parts: &http::request::Parts, body: Option<&[u8]>) -> Option<NamedCall> {
    let path = parts.uri.path();
    if path.starts_with("/sourcegraph/repos/") || path == "/sourcegraph/search" {
        let (repo, reads_index) = crate::site::named_repo(path, parts.uri.query())?;
        return Some(NamedCall {
            repo,
            call: RoutedCall {
                reads_index,
                prepares: false,
            },
        });
    }
    if path == "/sourcegraph/api/repos" && parts.method == Method::POST {
        // A registration is answered by an owner of the name: it clones and indexes the
        // repository where it will be served, not on whichever replica took the call.
        let registration: Registration = serde_json::from_slice(body?).ok()?;
        return Some(NamedCall {
            repo: registration.name?.0.into_owned(),
            call: PREPARES,
        });
    }
    let route = path
        .strip_prefix("/sourcegraph/api/")?
        .trim_end_matches('/');
    let call = match route {
        "prepare" => PREPARES,
        tool if tools::find(tool).is_some() => tool_call(tool),
        _ => return None,
    };
    let repo = if parts.method == Method::GET {
        let query = parts.uri.query()?;
        serde_urlencoded::from_str::<Vec<(Text, Text)>>(query)
            .ok()?
            .into_iter()
            .find_map(|(key, value)| (key.0 == "repo").then_some(value))?
            .0
            .into_owned()
    } else {
        let arguments: RepoArgument = serde_json::from_slice(body?).ok()?;
        arguments.repo?.0.into_owned()
    };
    Some(NamedCall { repo, call })
}

/// [`named_by_request`] and [`mcp_tool_call`] for the fuzz target `routing` (`fuzzing.rs`,
/// issue 43): the repository routing takes from this request and body; an MCP body's tool
/// and `repo`.
pub(crate) fn named_for_fuzzing(
    parts: &http::request::Parts,
    body: Option<&[u8]>,
) -> (Option<String>, Option<(String, Option<String>)>) {
    let named = named_by_request(parts, body).map(|call| call.repo);
    (named, body.and_then(mcp_tool_call))
}

/// A tool's arguments, for their `repo` alone.
#[derive(Deserialize)]
struct RepoArgument<'a> {
    #[serde(borrow)]
    repo: Option<Text<'a>>,
}

/// A registration (`POST /sourcegraph/api/repos`), for its `name` alone.
#[derive(Deserialize)]
struct Registration<'a> {
    #[serde(borrow)]
    name: Option<Text<'a>>,
}

/// A JSON-RPC message to the MCP endpoint, for what names a tool call's repository.
#[derive(Deserialize)]
struct McpMessage<'a> {
    #[serde(borrow)]
    method: Option<Text<'a>>,
    #[serde(borrow)]
    params: Option<McpParams<'a>>,
}

/// A `tools/call`'s parameters: the tool and its arguments' `repo`.
#[derive(Deserialize)]
struct McpParams<'a> {
    #[serde(borrow)]
    name: Option<Text<'a>>,
    #[serde(borrow)]
    arguments: Option<RepoArgument<'a>>,
}

/// A string as the body has it: borrowed, unless escapes made the parser copy it. (serde's
/// own `Cow<str>` always copies inside an `Option`.)
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                text: &'de str,
            ) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Visitor(std::marker::PhantomData))
    }
}

/// A 503 of the routing itself ([`ROUTING_REFUSAL_HEADER`]): the forwarding replica tries
/// the next owner and never relays it.
fn routing_refusal(message: &str) -> Response {
    let mut refused = refuse(ErrorKind::Unavailable, message);
    refused
        .headers_mut()
        .insert(ROUTING_REFUSAL_HEADER, HeaderValue::from_static("1"));
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: Method, uri: &str) -> http::request::Parts {
        let (parts, ()) = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .expect("request")
            .into_parts();
        parts
    }

    /// [`named_call`] when no server plugin adapts the call.
    fn named_plain(parts: &http::request::Parts, body: Option<&[u8]>) -> Option<NamedCall> {
        if parts.uri.path().starts_with("/sourcegraph/mcp") {
            let (tool, repo) = mcp_tool_call(body?)?;
            return Some(NamedCall {
                call: tool_call(&tool),
                repo: repo?,
            });
        }
        named_by_request(parts, body)
    }

    fn named_repo(parts: &http::request::Parts, body: Option<&[u8]>) -> Option<String> {
        named_plain(parts, body).map(|call| call.repo)
    }

    fn reads_index(parts: &http::request::Parts, body: Option<&[u8]>) -> Option<bool> {
        named_plain(parts, body).map(|call| call.call.reads_index)
    }

    #[test]
    fn a_registration_names_its_repository() {
        let post = parts(Method::POST, "/sourcegraph/api/repos");
        let body = br#"{"name":"acme/new","source":"https://example.org/new.git"}"#;
        assert_eq!(named_repo(&post, Some(body)).as_deref(), Some("acme/new"));
        assert_eq!(reads_index(&post, Some(body)), Some(false));
        // A-7: routed as an operator action, not as a read.
        assert!(named_plain(&post, Some(body)).is_some_and(|call| call.call.prepares));
        let prepare = parts(Method::POST, "/sourcegraph/api/prepare");
        let body = br#"{"repo":"acme/new","action":"sync"}"#;
        assert!(named_plain(&prepare, Some(body)).is_some_and(|call| call.call.prepares));
        let read = parts(Method::GET, "/sourcegraph/api/read?repo=acme%2Fnew&path=a");
        assert!(named_plain(&read, None).is_some_and(|call| !call.call.prepares));
        // Only known routes are read.
        let unknown = parts(Method::GET, "/sourcegraph/api/cluster?repo=acme%2Fnew");
        assert!(named_plain(&unknown, None).is_none());
        // Listing the registrations names none.
        assert_eq!(
            named_repo(&parts(Method::GET, "/sourcegraph/api/repos"), None),
            None
        );
    }

    #[test]
    fn tells_the_calls_answered_from_the_index() {
        let get = parts(
            Method::GET,
            "/sourcegraph/api/search?repo=acme%2Fweb&query=x",
        );
        assert_eq!(reads_index(&get, None), Some(true));
        let get = parts(
            Method::GET,
            "/sourcegraph/api/definitions?repo=acme%2Fweb&symbol=x",
        );
        assert_eq!(reads_index(&get, None), Some(true));
        let get = parts(Method::GET, "/sourcegraph/api/read?repo=acme%2Fweb&path=a");
        assert_eq!(reads_index(&get, None), Some(false));
        let post = parts(Method::POST, "/sourcegraph/api/references");
        assert_eq!(
            reads_index(&post, Some(br#"{"repo":"acme/api","symbol":"x"}"#)),
            Some(true)
        );
        let mcp = parts(Method::POST, "/sourcegraph/mcp");
        let search = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"repo":"acme/web","query":"x"}}}"#;
        assert_eq!(reads_index(&mcp, Some(search)), Some(true));
        let read = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme/web","path":"a"}}}"#;
        assert_eq!(reads_index(&mcp, Some(read)), Some(false));
        let site = parts(Method::GET, "/sourcegraph/repos/acme/web/-/blob/main/a.rs");
        assert_eq!(reads_index(&site, None), Some(false));
    }

    #[test]
    fn finds_the_repository_each_face_names() {
        let get = parts(Method::GET, "/sourcegraph/api/read?repo=acme%2Fweb&path=a");
        assert_eq!(named_repo(&get, None).as_deref(), Some("acme/web"));
        let post = parts(Method::POST, "/sourcegraph/api/read");
        assert_eq!(
            named_repo(&post, Some(br#"{"repo":"acme/api","path":"x"}"#)).as_deref(),
            Some("acme/api")
        );
        let mcp = parts(Method::POST, "/sourcegraph/mcp?plugins=auto");
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme/web"}}}"#;
        assert_eq!(named_repo(&mcp, Some(call)).as_deref(), Some("acme/web"));
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(named_repo(&mcp, Some(list)), None);
        let site = parts(Method::GET, "/sourcegraph/repos/acme/web/-/blob/main/a.rs");
        assert_eq!(named_repo(&site, None).as_deref(), Some("acme/web"));
        let search = parts(Method::GET, "/sourcegraph/api/search?query=x");
        assert_eq!(named_repo(&search, None), None);
        assert_eq!(named_repo(&parts(Method::GET, "/healthz"), None), None);
    }

    /// Issue 42: the body is read for its repository alone, wherever the field is, escaped or
    /// not; values of other types, other shapes and malformed bodies name nothing.
    #[test]
    fn reads_only_the_repository_from_a_body() {
        let post = parts(Method::POST, "/sourcegraph/api/read");
        let late = format!(
            r#"{{"pad":[{}],"deep":{{"a":{{"b":[{{"c":"x"}}]}}}},"repo":"acme\/web","path":"a"}}"#,
            vec!["0"; 100_000].join(",")
        );
        assert_eq!(
            named_repo(&post, Some(late.as_bytes())).as_deref(),
            Some("acme/web")
        );
        for nothing in [
            &br#"{"repo":5}"#[..],
            br#"{"path":"a"}"#,
            br#"{"repo":"acme/web""#,
            br#"not json"#,
            br#"{"repo":"acme/a","repo":"acme/b"}"#,
        ] {
            assert_eq!(named_repo(&post, Some(nothing)), None);
        }
        let mcp = parts(Method::POST, "/sourcegraph/mcp");
        for nothing in [
            &br#"{"method":"tools/call","params":{"name":"read","arguments":"acme/web"}}"#[..],
            br#"{"method":"tools/list","params":{"arguments":{"repo":"acme/web"}}}"#,
            br#"[{"method":"tools/call","params":{"arguments":{"repo":"acme/web"}}}]"#,
        ] {
            assert_eq!(named_repo(&mcp, Some(nothing)), None);
        }
    }

    /// A string without escapes is borrowed from the body, not copied.
    #[test]
    fn names_are_borrowed_from_the_body() {
        let body = br#"{"repo":"acme/web"}"#;
        let plain: RepoArgument = serde_json::from_slice(body).expect("parses");
        assert!(matches!(plain.repo, Some(Text(Cow::Borrowed("acme/web")))));
        let escaped: RepoArgument =
            serde_json::from_slice(br#"{"repo":"acme\/web"}"#).expect("parses");
        assert!(matches!(escaped.repo, Some(Text(Cow::Owned(name))) if name == "acme/web"));
    }
}
