//! Routes and handlers of the JSON API. Each handler parses, calls the service, answers.

mod metrics;
pub(crate) mod shard;

use crate::Readiness;
use crate::json::{ApiError, PrepareLine};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use service::{CallContext, Service};
use std::sync::Arc;
use tokio_stream::StreamExt as _;

#[derive(Clone)]
struct AppState {
    service: Service,
    readiness: Readiness,
}

/// The JSON API: one route per tool of [`tools::TOOLS`] (GET with a query string and POST
/// with a JSON body for a read-only tool, POST only otherwise) and the plugin tools' first
/// route names, then the operations that are not tools (`prepare` streams, `repos`
/// registers), the probes and the metrics. Every JSON handler answers `Result<Json<_>,
/// ApiError>`, its errors mapped onto statuses in one place (`From<ServiceError> for
/// ApiError`).
pub(crate) fn router(service: Service, readiness: Readiness) -> Router {
    let limits = tools::Limits::new(service.config());
    let mut api = Router::new();
    for &tool in tools::TOOLS {
        // Computed once: a GET's query string is typed by it on every call.
        let schema = Arc::new(tool.input_schema(&limits));
        let handler = move |State(state): State<AppState>, Ctx(ctx): Ctx, request: Request| {
            let schema = schema.clone();
            async move { call_tool(tool, &schema, state, ctx, request).await }
        };
        let route = if tool.annotations().read_only {
            get(handler.clone()).post(handler)
        } else {
            post(handler)
        };
        api = api.route(&format!("/{}", tool.name()), route);
        if let Some(path) = first_route_name(tool.name()) {
            // No arguments: the query string and the body are ignored, as they always were
            // (`csg plugins reload` posts no body).
            let handler = move |State(state): State<AppState>, Ctx(ctx): Ctx| async move {
                run_tool(tool, &state.service, &ctx, tools::Arguments::new()).await
            };
            let route = if tool.annotations().read_only {
                get(handler)
            } else {
                post(handler)
            };
            api = api.route(path, route);
        }
    }
    let api = api
        .route("/prepare", post(prepare))
        .route("/repos", post(add_repo))
        .route("/cluster", get(cluster));
    // One body limit for every route (issue 42): refused with a 413 before it is read whole.
    let api = api.layer(DefaultBodyLimit::max(crate::MAX_REQUEST_BODY_BYTES));
    let api = crate::with_body_limit(Router::new().nest("/sourcegraph/api", api));
    api.route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AppState { service, readiness })
}

/// The first route name of a tool that had one before the tools had their own (P-12), kept
/// for existing clients: `GET /sourcegraph/api/plugins/status` is `plugin_status`, `POST
/// /sourcegraph/api/plugins/reload` is `reload_plugins`.
fn first_route_name(tool: &str) -> Option<&'static str> {
    match tool {
        "plugin_status" => Some("/plugins/status"),
        "reload_plugins" => Some("/plugins/reload"),
        _ => None,
    }
}

/// The call context of an API request: the caller the access layer established
/// (`crate::auth`), anonymous when it did not run. The connection parameter `plugins` is
/// irrelevant: the API does not enrich.
struct Ctx(CallContext);

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Ctx(crate::auth::context(parts)))
    }
}

/// A tool over HTTP: its arguments from the query string (GET, typed by the tool's schema)
/// or the JSON body (POST), exactly the MCP arguments with the same refusals, then the tool's
/// JSON answer.
async fn call_tool(
    tool: &'static dyn tools::ToolDef,
    schema: &tools::Arguments,
    state: AppState,
    ctx: CallContext,
    request: Request,
) -> Result<Json<serde_json::Value>, ApiError> {
    let arguments = tool_arguments(schema, request).await?;
    run_tool(tool, &state.service, &ctx, arguments).await
}

/// Runs a tool for the JSON API with arguments already read.
async fn run_tool(
    tool: &'static dyn tools::ToolDef,
    service: &Service,
    ctx: &CallContext,
    arguments: tools::Arguments,
) -> Result<Json<serde_json::Value>, ApiError> {
    match tool.call(service, ctx, arguments, tools::Face::Api).await? {
        tools::Answer::Json(value) => Ok(Json(value)),
        tools::Answer::Text { .. } => {
            tracing::error!(tool = tool.name(), "a tool answered text to the JSON API");
            Err(ApiError::internal(
                "the tool answered text to the JSON API; see the server log",
            ))
        }
    }
}

/// A tool's arguments from a GET query string or a POST JSON body (an object).
async fn tool_arguments(
    schema: &tools::Arguments,
    request: Request,
) -> Result<tools::Arguments, ApiError> {
    if request.method() == Method::GET {
        let pairs = request.uri().query().unwrap_or_default();
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(pairs)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        return tools::arguments_from_pairs(schema, pairs).map_err(ApiError::bad_request);
    }
    let Json(body) = Json::<serde_json::Value>::from_request(request, &())
        .await
        .map_err(json_rejection)?;
    match body {
        serde_json::Value::Object(arguments) => Ok(arguments),
        other => Err(ApiError::bad_request(format!(
            "invalid JSON body: the arguments must be a JSON object, not {}",
            json_kind(&other)
        ))),
    }
}

/// Why a JSON body could not be read: over the body limit (the limit layer refuses those
/// first; this is its twin for a router mounted without it), or not the JSON expected.
fn json_rejection(rejection: axum::extract::rejection::JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return crate::body::too_large();
    }
    ApiError::bad_request(format!("invalid JSON body: {}", rejection.body_text()))
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Arguments of the operations that are not tools, from a JSON body (POST). Unknown
/// arguments are refused with a message naming them.
struct Args<T>(T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequest<S> for Args<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(args) = Json::<T>::from_request(request, state)
            .await
            .map_err(json_rejection)?;
        Ok(Args(args))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrepareArgs {
    repo: String,
    action: String,
    revision: Option<String>,
}

/// The media type of a streamed `prepare`: one [`PrepareLine`] per line (O-5).
const NDJSON: &str = "application/x-ndjson";

/// `prepare {repo, action, revision?}`: the service checks the `prepare` capability.
/// The answer is one JSON body, or NDJSON lines when the caller accepts them.
async fn prepare(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    headers: HeaderMap,
    Args(a): Args<PrepareArgs>,
) -> Result<Prepared, ApiError> {
    let request = service::PrepareRequest {
        repo: a.repo,
        action: service::PrepareAction::parse(&a.action)?,
        revision: a.revision,
    };
    let streamed = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains(NDJSON));
    if streamed {
        // Refused with its status while there is still one to send: once the stream has
        // started, only its last line can say what went wrong.
        state.service.check_prepare(&ctx)?;
        return Ok(Prepared::Streamed(prepare_streamed(
            state.service,
            ctx,
            request,
        )));
    }
    let answer = state.service.prepare(&ctx, request, |_| {}).await?;
    Ok(Prepared::Whole(Json(answer)))
}

/// A `prepare` answer in the form the caller asked for.
enum Prepared {
    /// One JSON body once the work is done.
    Whole(Json<service::PrepareAnswer>),
    /// Progress while the index builds, then the result (O-5).
    Streamed(Ndjson),
}

impl IntoResponse for Prepared {
    fn into_response(self) -> Response {
        match self {
            Prepared::Whole(answer) => answer.into_response(),
            Prepared::Streamed(lines) => lines.into_response(),
        }
    }
}

/// An NDJSON answer: each [`PrepareLine`] serialized on a line of its own, as it comes.
struct Ndjson(tokio::sync::mpsc::UnboundedReceiver<PrepareLine>);

impl IntoResponse for Ndjson {
    fn into_response(self) -> Response {
        let lines = tokio_stream::wrappers::UnboundedReceiverStream::new(self.0).map(|line| {
            // A line that does not serialize ends the body with an error (the client sees
            // the stream cut) rather than the request panicking.
            serde_json::to_vec(&line).map(|mut bytes| {
                bytes.push(b'\n');
                bytes
            })
        });
        (
            [(header::CONTENT_TYPE, NDJSON)],
            axum::body::Body::from_stream(lines),
        )
            .into_response()
    }
}

/// Runs `prepare` in a task and streams its index-build progress (one line per percent) and
/// then its result (O-5). A client that hangs up does not stop the work.
fn prepare_streamed(
    service: Service,
    ctx: CallContext,
    request: service::PrepareRequest,
) -> Ndjson {
    let (lines, receiver) = tokio::sync::mpsc::unbounded_channel();
    let progress_lines = lines.clone();
    let mut last_percent = None;
    let progress = move |p: service::BuildProgress| {
        let percent = (p.done * 100).checked_div(p.total).unwrap_or(100);
        if last_percent != Some(percent) {
            last_percent = Some(percent);
            let _ = progress_lines.send(PrepareLine::Progress {
                done: p.done,
                total: p.total,
            });
        }
    };
    tokio::spawn(async move {
        let last = match service.prepare(&ctx, request, progress).await {
            Ok(answer) => PrepareLine::Result(answer),
            Err(error) => PrepareLine::Error(ApiError::from(error).detail()),
        };
        let _ = lines.send(last);
    });
    Ndjson(receiver)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddRepoArgs {
    name: String,
    source: String,
    /// The registered path (monorepo scope); the whole repository when absent.
    path: Option<String>,
    branch: Option<String>,
    private: Option<bool>,
    /// Index-branch patterns (S-8), replacing the repository's; absent leaves them.
    index_branches: Option<Vec<String>>,
}

/// `POST /sourcegraph/api/repos {name, source, path?, branch?, private?, index_branches?}`
/// (A-3, SPEC §9): registers a remote repository, fetches and indexes it. 201 when new, 200
/// when the same registration existed.
async fn add_repo(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Args(a): Args<AddRepoArgs>,
) -> Result<(StatusCode, Json<service::AddRepoAnswer>), ApiError> {
    let request = service::RegisterRequest {
        name: a.name,
        source: a.source,
        registered_path: a.path.unwrap_or_default(),
        branch: a.branch,
        private: a.private,
    };
    let added = state
        .service
        .add_repo_with(&ctx, request, a.index_branches)
        .await?;
    let status = if added.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(added)))
}

/// `/readyz`: an atomic flag set at the end of start-up, answered in plain text like
/// `/healthz`. Neither ever asks the service for anything that could wait on the
/// server-plugin interpreter (P-23: a wedged interpreter bypasses hooks; the server stays
/// ready and `/metrics` shows the wedge).
///
/// In cluster mode (issue 31) it answers JSON: ready once started and not draining, even
/// while the metadata database is unreachable (the replica serves what it holds from the last
/// known metadata; `writes` says it cannot record anything), so a database outage never
/// takes every replica out of a balancer's rotation at once.
async fn readyz(State(state): State<AppState>) -> axum::response::Response {
    let started = state.readiness.is_ready();
    let Some(cluster) = state.service.readiness() else {
        return if started {
            (StatusCode::OK, "ready\n").into_response()
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response()
        };
    };
    let membership = &cluster.membership;
    let ready = started && !membership.draining;
    let body = serde_json::json!({
        "ready": ready,
        "state": if !started { "starting" } else if membership.draining { "draining" } else { "serving" },
        "database": if membership.database_reachable { "ok" } else { "unreachable" },
        "writes": membership.database_reachable,
        "repositories_served": cluster.served_here,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /sourcegraph/api/cluster`: the members and each repository's owners, for operators
/// (a token with the prepare capability, A-3). The other replicas ask on their own route
/// (`replica.rs`), never here: a client route knows no replica identity.
async fn cluster(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
) -> Result<Json<serde_json::Value>, ApiError> {
    let cluster = state.service.cluster(&ctx).map_err(ApiError::from)?;
    Ok(Json(cluster_json(&cluster)))
}

/// The answer of the cluster's status routes: `self`, the members with the number of
/// repositories each owns, and every repository's owners with whether `self` serves it
/// (owns and holds it) and, on the operator's route, searches it from an index of its own.
pub(crate) fn cluster_json(cluster: &service::ClusterStatus) -> serde_json::Value {
    let members: Vec<serde_json::Value> = cluster
        .membership
        .members
        .iter()
        .map(|member| {
            let owned = cluster
                .repositories
                .iter()
                .filter(|repo| repo.owners.contains(&member.node_url))
                .count();
            serde_json::json!({
                "node_url": member.node_url,
                "last_heartbeat": service::rfc3339(member.last_heartbeat),
                "live": member.live,
                "repositories_owned": owned,
            })
        })
        .collect();
    let repositories: Vec<serde_json::Value> = cluster
        .repositories
        .iter()
        .map(|repo| {
            let mut entry = serde_json::json!({
                "name": repo.name,
                "owners": repo.owners,
                "served_here": repo.served_here,
            });
            if let Some(indexed) = repo.indexed_here {
                entry["indexed_here"] = indexed.into();
            }
            entry
        })
        .collect();
    serde_json::json!({
        "self": cluster.self_url,
        "members": members,
        "repositories": repositories,
    })
}

/// `/metrics`: the Prometheus text exposition (O-4).
async fn metrics(State(state): State<AppState>) -> metrics::Exposition {
    metrics::Exposition(metrics::render(&state.service))
}
