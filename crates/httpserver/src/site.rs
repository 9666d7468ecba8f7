//! The website's routes (SPEC §9): thin handlers that turn a request into `service` calls and
//! hand the answers to `website` for the HTML. Who is looking was settled by the access
//! layer (`crate::auth`: a session or nobody); every form post is checked against the CSRF
//! token here. Every page is sent with a strict Content-Security-Policy and is never cached.

use crate::auth::{SiteAccess, Visitor};
use crate::session::same_secret;
use crate::{ConnectOrigin, SiteConfig};
use axum::Router;
use axum::extract::{Form, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use service::{
    AvailabilityRequest, CallContext, ErrorKind, ListRequest, SearchKind, SearchRequest, Service,
    ServiceError,
};
use std::net::IpAddr;
use website::Chrome;

mod blob;
mod history;
mod readme;
mod routes;
mod signin;

use routes::Route;
pub use routes::{site_budgets_table, site_route_patterns};
use signin::{provider_callback, provider_sign_in, sign_in, sign_in_form, sign_out};

#[derive(Clone)]
struct SiteState {
    service: Service,
    connect: std::sync::Arc<Connect>,
    /// READMEs rendered before (issue 42 point 6).
    readmes: std::sync::Arc<readme::RenderedReadmes>,
}

/// How the access page picks the origin its client configuration names (M-6).
struct Connect {
    /// The origin computed at start: `--public-url`, else the listen address's.
    fallback: String,
    /// The allowed hosts a request's `Host` may name to be shown its own origin; none when
    /// the origin is fixed.
    hosts: Vec<AllowedHost>,
}

/// One allowed `Host`, normalized as the MCP endpoint's check (rmcp) normalizes it.
struct AllowedHost {
    /// Lower case, IPv6 without brackets.
    host: String,
    /// `None`: any port.
    port: Option<u16>,
}

impl Connect {
    fn new(site: &SiteConfig, connect: ConnectOrigin) -> Self {
        let hosts = match connect {
            ConnectOrigin::Fixed => Vec::new(),
            ConnectOrigin::RequestHost(hosts) => hosts
                .iter()
                .map(|allowed| allowed.trim())
                .filter(|allowed| !allowed.is_empty())
                .map(|allowed| match Authority::try_from(allowed) {
                    Ok(authority) => AllowedHost {
                        host: normalize_host(authority.host()),
                        port: authority.port_u16(),
                    },
                    // `::1` is no authority, but rmcp takes it as a bare host name.
                    Err(_) => AllowedHost {
                        host: normalize_host(allowed),
                        port: None,
                    },
                })
                .collect(),
        };
        Connect {
            fallback: site.origin.trim_end_matches('/').to_string(),
            hosts,
        }
    }

    /// The origin for a request with these headers: its own `Host` when allowed, else the
    /// fallback. A `Host` is never reflected unchecked: the page would hand visitors an
    /// endpoint of an attacker's choosing.
    fn origin(&self, headers: &HeaderMap, uri: &Uri) -> String {
        self.request_origin(headers, uri)
            .unwrap_or_else(|| self.fallback.clone())
    }

    fn request_origin(&self, headers: &HeaderMap, uri: &Uri) -> Option<String> {
        if self.hosts.is_empty() {
            return None;
        }
        // HTTP/2 carries the host in `:authority`, which hyper leaves in the URI.
        let authority = match headers.get(header::HOST) {
            Some(value) => Authority::try_from(value.as_bytes()).ok()?,
            None => uri.authority()?.clone(),
        };
        // User information is no part of a `Host`; such a value is not taken at its word.
        if authority.as_str().contains('@') {
            return None;
        }
        let host = normalize_host(authority.host());
        let port = authority.port_u16();
        let allowed = self
            .hosts
            .iter()
            .any(|a| a.host == host && a.port.is_none_or(|p| Some(p) == port));
        if !allowed {
            return None;
        }
        // What is shown is an allowed name and a number, nothing else of the header.
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Some(match port {
            Some(port) => format!("http://{host}:{port}"),
            None => format!("http://{host}"),
        })
    }
}

/// A host as rmcp compares it: brackets of an IPv6 address dropped, lower case.
fn normalize_host(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

pub(crate) fn router(service: Service, site: &SiteConfig, origin: ConnectOrigin) -> Router {
    let state = SiteState {
        service,
        connect: std::sync::Arc::new(Connect::new(site, origin)),
        readmes: std::sync::Arc::new(readme::RenderedReadmes::new(readme::README_CACHE_BYTES)),
    };
    Router::new()
        .route(
            "/sourcegraph",
            get(|| async { Redirect::permanent("/sourcegraph/") }),
        )
        .route("/sourcegraph/", get(repositories))
        .route("/sourcegraph/repos/{*rest}", get(repo_pages))
        .route("/sourcegraph/search", get(search))
        .route("/sourcegraph/connect", get(connect))
        .route(
            "/sourcegraph/settings/tokens",
            get(tokens).post(create_token),
        )
        .route("/sourcegraph/settings/tokens/revoke", post(revoke_token))
        .route("/sourcegraph/sign-in", get(sign_in_form).post(sign_in))
        .route("/sourcegraph/sign-out", post(sign_out))
        .route(website::PROVIDER_SIGN_IN_PATH, get(provider_sign_in))
        .route(crate::oauth::CALLBACK_PATH, get(provider_callback))
        .route(
            website::CSS_PATH,
            get(|| async { asset("text/css", website::SITE_CSS) }),
        )
        .route(
            website::JS_PATH,
            get(|| async { asset("text/javascript", website::SITE_JS) }),
        )
        .route(
            website::FAVICON_PATH,
            get(|| async { asset("image/svg+xml", website::FAVICON_SVG) }),
        )
        .with_state(state)
}

/// The visitor and the service's call context of a site request.
struct Page {
    chrome: Chrome,
    ctx: CallContext,
    visitor: Visitor,
    /// The client's address (the sign-in limiter's key).
    client: Option<IpAddr>,
}

impl<S: Send + Sync> FromRequestParts<S> for Page {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let visitor = parts
            .extensions
            .get::<Visitor>()
            .cloned()
            .unwrap_or(Visitor {
                user: None,
                csrf: String::new(),
                session: None,
                provider_sign_in: false,
            });
        Ok(Page {
            chrome: Chrome {
                user: visitor.user.clone(),
                csrf: visitor.csrf.clone(),
                provider_sign_in: visitor.provider_sign_in,
            },
            // The page's route states what it may spend (O-9): every service call it makes
            // runs under that cost.
            ctx: crate::auth::context(parts).with_cost(route_of(parts.uri.path()).cost()),
            visitor,
            client: parts
                .extensions
                .get::<crate::ClientAddr>()
                .map(|crate::ClientAddr(addr)| *addr),
        })
    }
}

/// An HTML page with the site's security headers.
fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (
            header::CONTENT_SECURITY_POLICY,
            website::CONTENT_SECURITY_POLICY,
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    response
}

/// A service error as a page: what was wrong and what to do.
fn error(chrome: &Chrome, error: &ServiceError) -> Response {
    let (status, title) = match error.kind {
        ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "Bad request"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, "Not found"),
        ErrorKind::NotReadable => (StatusCode::CONFLICT, "Not readable"),
        ErrorKind::Unavailable | ErrorKind::Busy | ErrorKind::TimedOut => {
            (StatusCode::SERVICE_UNAVAILABLE, "Not available right now")
        }
        ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "Something broke"),
        ErrorKind::Forbidden => (StatusCode::FORBIDDEN, "Not allowed"),
        ErrorKind::Unauthenticated => {
            return html(
                StatusCode::UNAUTHORIZED,
                website::sign_in(chrome, Some(&error.message)),
            );
        }
    };
    let mut response = html(status, website::error_page(chrome, title, &error.message));
    if matches!(error.kind, ErrorKind::Busy | ErrorKind::TimedOut) {
        // O-9: the same page may answer in a moment.
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn not_found(chrome: &Chrome, what: &str) -> Response {
    html(
        StatusCode::NOT_FOUND,
        website::error_page(chrome, "Not found", what),
    )
}

/// `GET /sourcegraph/`.
async fn repositories(State(state): State<SiteState>, page: Page) -> Response {
    match state.service.discovery(&page.ctx).await {
        Ok(repos) => html(StatusCode::OK, website::repositories(&page.chrome, &repos)),
        Err(e) => error(&page.chrome, &e),
    }
}

/// What a `/sourcegraph/repos/…` path names.
#[derive(Debug, PartialEq, Eq)]
enum RepoPage {
    Home(String),
    Tree {
        repo: String,
        rev: String,
        path: String,
    },
    Blob {
        repo: String,
        rev: String,
        path: String,
    },
    Plugins(String),
    Raw {
        repo: String,
        rev: String,
        path: String,
    },
    Blame {
        repo: String,
        rev: String,
        path: String,
    },
    /// `path` is `""` for the whole repository's history.
    Commits {
        repo: String,
        rev: String,
        path: String,
    },
    Commit {
        repo: String,
        sha: String,
    },
    /// `/-/compare/<base>...<head>`.
    Compare {
        repo: String,
        base: String,
        head: String,
    },
}

/// Splits `<owner>/<name>[/-/tree|blob/<rev>/<path>|/-/plugins]` as the URL has it
/// (percent-encoded), decoding each segment on its own: a revision `feature%2Fx` is the
/// branch `feature/x`, not a revision and a path.
fn parse_repo_page(raw: &str) -> Option<RepoPage> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(|d| d.into_owned())
    };
    let segments: Vec<&str> = raw.split('/').filter(|s| !s.is_empty()).collect();
    let (owner, name) = (decode(segments.first()?)?, decode(segments.get(1)?)?);
    let repo = format!("{owner}/{name}");
    let rest = &segments[2..];
    match rest {
        [] => Some(RepoPage::Home(repo)),
        ["-", "plugins"] => Some(RepoPage::Plugins(repo)),
        ["-", kind, rev, path @ ..] => {
            let rev = decode(rev)?;
            let path = path
                .iter()
                .map(|s| decode(s))
                .collect::<Option<Vec<_>>>()?
                .join("/");
            match *kind {
                "tree" => Some(RepoPage::Tree { repo, rev, path }),
                "blob" if !path.is_empty() => Some(RepoPage::Blob { repo, rev, path }),
                "raw" if !path.is_empty() => Some(RepoPage::Raw { repo, rev, path }),
                "blame" if !path.is_empty() => Some(RepoPage::Blame { repo, rev, path }),
                "commits" => Some(RepoPage::Commits { repo, rev, path }),
                "commit" if path.is_empty() => Some(RepoPage::Commit { repo, sha: rev }),
                "compare" if path.is_empty() => {
                    let (base, head) = rev.split_once("...")?;
                    (!base.is_empty() && !head.is_empty()).then(|| RepoPage::Compare {
                        repo,
                        base: base.to_owned(),
                        head: head.to_owned(),
                    })
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The repository a site request names, parsed as the page's own handler parses it, and
/// whether its answer comes from the search index: what cluster routing routes it by.
/// A repository page (`/sourcegraph/repos/<owner>/<name>/…`, empty segments skipped as the
/// page does), or the search page with a `repo` (a code search reads the index; commit and
/// diff searches read the mirror).
pub(crate) fn named_repo(path: &str, query: Option<&str>) -> Option<(String, bool)> {
    if path == "/sourcegraph/search" {
        let query: SearchQuery = serde_urlencoded::from_str(query.unwrap_or_default()).ok()?;
        let reads_index = !matches!(query.kind.as_deref(), Some("commit" | "diff"));
        return Some((non_empty(query.repo)?, reads_index));
    }
    let page = parse_repo_page(path.strip_prefix("/sourcegraph/repos/")?)?;
    Some((page.repo().to_owned(), false))
}

/// [`parse_repo_page`] for the fuzz targets `routing` and `paths` (`fuzzing.rs`, issue 43):
/// the page's route (by name), repository, revision and path (`""` where it has none; a
/// comparison's `base...head` as its revision).
pub(crate) fn repo_page_for_fuzzing(raw: &str) -> Option<(String, String, String, String)> {
    let page = parse_repo_page(raw)?;
    let route = format!("{:?}", page.route());
    let repo = page.repo().to_owned();
    let (rev, path) = match page {
        RepoPage::Home(_) | RepoPage::Plugins(_) => (String::new(), String::new()),
        RepoPage::Tree { rev, path, .. }
        | RepoPage::Blob { rev, path, .. }
        | RepoPage::Raw { rev, path, .. }
        | RepoPage::Blame { rev, path, .. }
        | RepoPage::Commits { rev, path, .. } => (rev, path),
        RepoPage::Commit { sha, .. } => (sha, String::new()),
        RepoPage::Compare { base, head, .. } => (format!("{base}...{head}"), String::new()),
    };
    Some((route, repo, rev, path))
}

/// The route of a site path (its row in [`routes::ROUTES`]).
fn route_of(path: &str) -> Route {
    match path {
        "/sourcegraph/" => Route::Repositories,
        "/sourcegraph/search" => Route::Search,
        _ => match path
            .strip_prefix("/sourcegraph/repos/")
            .and_then(parse_repo_page)
        {
            Some(page) => page.route(),
            None => Route::Other,
        },
    }
}

impl RepoPage {
    /// The repository the page is of, as the URL names it.
    fn repo(&self) -> &str {
        match self {
            RepoPage::Home(repo) | RepoPage::Plugins(repo) => repo,
            RepoPage::Tree { repo, .. }
            | RepoPage::Blob { repo, .. }
            | RepoPage::Raw { repo, .. }
            | RepoPage::Blame { repo, .. }
            | RepoPage::Commits { repo, .. }
            | RepoPage::Commit { repo, .. }
            | RepoPage::Compare { repo, .. } => repo,
        }
    }

    fn route(&self) -> Route {
        match self {
            RepoPage::Home(_) => Route::Home,
            RepoPage::Tree { .. } => Route::Tree,
            RepoPage::Blob { .. } => Route::Blob,
            RepoPage::Plugins(_) => Route::Plugins,
            RepoPage::Raw { .. } => Route::Raw,
            RepoPage::Blame { .. } => Route::Blame,
            RepoPage::Commits { .. } => Route::Commits,
            RepoPage::Commit { .. } => Route::Commit,
            RepoPage::Compare { .. } => Route::Compare,
        }
    }
}

#[derive(Deserialize)]
struct RepoQuery {
    /// The Plugins tab's revision.
    rev: Option<String>,
    /// The first line of a file page.
    from: Option<u64>,
    /// The `next_cursor` of a history or diff page (the page after it).
    cursor: Option<String>,
}

/// `GET /sourcegraph/repos/…`: the repository page, a tree, a file, the Plugins tab.
async fn repo_pages(
    State(state): State<SiteState>,
    page: Page,
    uri: Uri,
    Query(query): Query<RepoQuery>,
) -> Response {
    let raw = uri.path().strip_prefix("/sourcegraph/repos/").unwrap_or("");
    let Some(target) = parse_repo_page(raw) else {
        return not_found(
            &page.chrome,
            "no such page: repository pages are /sourcegraph/repos/OWNER/NAME, with \
             /-/tree/REV/PATH, /-/blob/REV/PATH or /-/plugins",
        );
    };
    let service = &state.service;
    let result = match &target {
        RepoPage::Home(repo) => home(&state, &page, repo).await,
        RepoPage::Tree { repo, rev, path } => {
            match service
                .list(&page.ctx, list_request(repo, Some(rev), path))
                .await
            {
                Ok(listing) => {
                    let readme = readme::readme(&state, &page.ctx, &listing).await;
                    Ok(website::tree(
                        &page.chrome,
                        repo,
                        rev,
                        &listing,
                        readme.as_deref(),
                    ))
                }
                Err(e) => Err(e),
            }
        }
        RepoPage::Blob { repo, rev, path } => {
            return blob::blob(&state, &page, repo, rev, path, &query).await;
        }
        RepoPage::Raw { repo, rev, path } => {
            return blob::raw(&state, &page, repo, rev, path).await;
        }
        RepoPage::Blame { repo, rev, path } => {
            return history::blame(&state, &page, repo, rev, path, &query).await;
        }
        RepoPage::Commits { repo, rev, path } => {
            return history::commits(&state, &page, repo, rev, path, &query).await;
        }
        RepoPage::Commit { repo, sha } => {
            return history::commit(&state, &page, repo, sha, &query).await;
        }
        RepoPage::Compare { repo, base, head } => {
            return history::compare(&state, &page, repo, base, head, &query).await;
        }
        RepoPage::Plugins(repo) => {
            let request = AvailabilityRequest {
                repo: repo.to_owned(),
                revision: query.rev.clone().filter(|r| !r.trim().is_empty()),
                include_plugins: true,
            };
            match service.availability(&page.ctx, request).await {
                // an invisible repository reads as an unknown one.
                Ok(answer) if !answer.visible => Err(unknown(repo)),
                Ok(answer) => Ok(website::plugins(
                    &page.chrome,
                    query.rev.as_deref(),
                    &answer,
                )),
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(body) => html(StatusCode::OK, body),
        Err(e) => error(&page.chrome, &e),
    }
}

fn unknown(repo: &str) -> ServiceError {
    ServiceError {
        kind: ErrorKind::NotFound,
        message: format!("unknown repository `{repo}`"),
    }
}

fn list_request(repo: &str, rev: Option<&str>, path: &str) -> ListRequest {
    ListRequest {
        repo: repo.to_owned(),
        revision: rev.map(str::to_owned),
        path: (!path.is_empty()).then(|| path.to_owned()),
        depth: Some(1),
    }
}

/// The repository page: its facts (from `discovery`, which only lists what the caller may
/// read), its top directory at the head and that directory's README.
async fn home(state: &SiteState, page: &Page, repo: &str) -> Result<String, ServiceError> {
    let service = &state.service;
    let repos = service.discovery(&page.ctx).await?;
    let Some(summary) = repos.iter().find(|r| r.name == repo) else {
        return Err(unknown(repo));
    };
    let tree = match &summary.head {
        Some(_) => service
            .list(&page.ctx, list_request(repo, None, ""))
            .await
            .map_err(|e| e.message),
        None => Err("Not synced yet: the tree shows once the first fetch is done.".to_owned()),
    };
    let readme = match &tree {
        Ok(listing) => readme::readme(state, &page.ctx, listing).await,
        Err(_) => None,
    };
    Ok(website::repository(
        &page.chrome,
        summary,
        tree.as_ref().map_err(String::as_str),
        readme.as_deref(),
    ))
}

#[derive(Deserialize, Default)]
struct SearchQuery {
    q: Option<String>,
    repo: Option<String>,
    path: Option<String>,
    lang: Option<String>,
    regex: Option<String>,
    case: Option<String>,
    cursor: Option<String>,
    rev: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    author: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// `GET /sourcegraph/search?q=…`.
async fn search(
    State(state): State<SiteState>,
    page: Page,
    Query(query): Query<SearchQuery>,
) -> Response {
    let request = SearchRequest {
        query: query.q.clone().unwrap_or_default(),
        repo: non_empty(query.repo),
        path: non_empty(query.path),
        lang: non_empty(query.lang),
        regex: query.regex.as_deref() == Some("true"),
        case_sensitive: query.case.as_deref() == Some("true"),
        limit: None,
        cursor: non_empty(query.cursor),
        revision: non_empty(query.rev),
        kind: match query.kind.as_deref() {
            Some("commit") => SearchKind::Commit,
            Some("diff") => SearchKind::Diff,
            _ => SearchKind::Code,
        },
        author: non_empty(query.author),
        since: non_empty(query.since),
        until: non_empty(query.until),
        count: false,
    };
    if request.query.trim().is_empty() {
        return html(
            StatusCode::OK,
            website::search(&page.chrome, &request, None),
        );
    }
    match state.service.search(&page.ctx, request.clone()).await {
        Ok(answer) => html(
            StatusCode::OK,
            website::search(&page.chrome, &request, Some(Ok(&answer))),
        ),
        Err(e) if e.kind == ErrorKind::InvalidArgument => html(
            StatusCode::BAD_REQUEST,
            website::search(&page.chrome, &request, Some(Err(&e.message))),
        ),
        Err(e) => error(&page.chrome, &e),
    }
}

/// `GET /sourcegraph/connect` (M-6): the configuration for the origin this visitor reached,
/// when that is one of the deployment's own (see [`Connect::origin`]).
async fn connect(
    State(state): State<SiteState>,
    page: Page,
    access: Option<axum::Extension<SiteAccess>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let origin = state.connect.origin(&headers, &uri);
    let oauth = access.is_some_and(|access| access.0.0.takes_provider_tokens());
    let config =
        website::ClientConfig::for_origin(&origin, !state.service.public_read()).with_oauth(oauth);
    html(StatusCode::OK, website::connect_page(&page.chrome, &config))
}

/// `GET /sourcegraph/settings/tokens`.
async fn tokens(State(state): State<SiteState>, page: Page) -> Response {
    if page.chrome.user.is_none() {
        return Redirect::to("/sourcegraph/sign-in").into_response();
    }
    match state.service.my_tokens(&page.ctx).await {
        Ok(list) => html(StatusCode::OK, website::tokens(&page.chrome, &list, None)),
        Err(e) => error(&page.chrome, &e),
    }
}

/// A form post that must carry the page's CSRF token.
fn refuse_forgery(page: &Page, posted: &str) -> Option<Response> {
    (page.visitor.csrf.is_empty() || !same_secret(&page.visitor.csrf, posted)).then(|| {
        html(
            StatusCode::FORBIDDEN,
            website::error_page(
                &page.chrome,
                "Form expired",
                "This form was not sent from this site's page, or the page is stale. Reload \
                 the page and send the form again.",
            ),
        )
    })
}

#[derive(Deserialize)]
struct CreateTokenForm {
    csrf: String,
    name: Option<String>,
}

/// `POST /sourcegraph/settings/tokens`: a new token, shown once.
async fn create_token(
    State(state): State<SiteState>,
    page: Page,
    Form(form): Form<CreateTokenForm>,
) -> Response {
    if let Some(refusal) = refuse_forgery(&page, &form.csrf) {
        return refusal;
    }
    let name = non_empty(form.name);
    let created = match state.service.create_my_token(&page.ctx, name).await {
        Ok(created) => created,
        Err(e) => return error(&page.chrome, &e),
    };
    match state.service.my_tokens(&page.ctx).await {
        Ok(list) => html(
            StatusCode::OK,
            website::tokens(&page.chrome, &list, Some(&created.secret)),
        ),
        Err(e) => error(&page.chrome, &e),
    }
}

#[derive(Deserialize)]
struct RevokeForm {
    csrf: String,
    id: i64,
}

/// `POST /sourcegraph/settings/tokens/revoke`.
async fn revoke_token(
    State(state): State<SiteState>,
    page: Page,
    Form(form): Form<RevokeForm>,
) -> Response {
    if let Some(refusal) = refuse_forgery(&page, &form.csrf) {
        return refusal;
    }
    match state.service.revoke_my_token(&page.ctx, form.id).await {
        Ok(()) => Redirect::to("/sourcegraph/settings/tokens").into_response(),
        Err(e) => error(&page.chrome, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_page_paths() {
        let home = |r: &str| Some(RepoPage::Home(r.into()));
        assert_eq!(parse_repo_page("acme/docs"), home("acme/docs"));
        assert_eq!(parse_repo_page("acme/docs/"), home("acme/docs"));
        assert_eq!(
            parse_repo_page("acme/docs/-/blob/feature%2Fx/a/b%20c.md"),
            Some(RepoPage::Blob {
                repo: "acme/docs".into(),
                rev: "feature/x".into(),
                path: "a/b c.md".into()
            })
        );
        assert_eq!(
            parse_repo_page("acme/docs/-/tree/v1"),
            Some(RepoPage::Tree {
                repo: "acme/docs".into(),
                rev: "v1".into(),
                path: String::new()
            })
        );
        assert_eq!(
            parse_repo_page("acme/docs/-/plugins"),
            Some(RepoPage::Plugins("acme/docs".into()))
        );
        assert_eq!(
            parse_repo_page("acme/docs/-/compare/v1...feature%2Fx"),
            Some(RepoPage::Compare {
                repo: "acme/docs".into(),
                base: "v1".into(),
                head: "feature/x".into()
            })
        );
        assert_eq!(
            parse_repo_page("acme/docs/-/commits/main"),
            Some(RepoPage::Commits {
                repo: "acme/docs".into(),
                rev: "main".into(),
                path: String::new()
            })
        );
        for bad in [
            "acme",
            "acme/docs/extra",
            "acme/docs/-/blob/main",
            "acme/docs/-/raw/main",
            "acme/docs/-/blame/main",
            "acme/docs/-/commit/abc/extra",
            "acme/docs/-/compare/main",
            "acme/docs/-/compare/...main",
            "acme/docs/-/unknown/x/y",
            "acme/docs/-/blob/main/%FF",
        ] {
            assert_eq!(parse_repo_page(bad), None, "{bad}");
        }
    }

    /// O-9: every page path finds its route in the table; what is not a page is `Other`.
    #[test]
    fn o9_each_page_path_has_its_route() {
        for (path, route) in [
            ("/sourcegraph/", Route::Repositories),
            ("/sourcegraph/search", Route::Search),
            ("/sourcegraph/repos/acme/docs", Route::Home),
            ("/sourcegraph/repos/acme/docs/-/tree/main/src", Route::Tree),
            ("/sourcegraph/repos/acme/docs/-/blob/main/a.md", Route::Blob),
            ("/sourcegraph/repos/acme/docs/-/raw/main/a.md", Route::Raw),
            (
                "/sourcegraph/repos/acme/docs/-/blame/main/a.md",
                Route::Blame,
            ),
            (
                "/sourcegraph/repos/acme/docs/-/commits/main/a.md",
                Route::Commits,
            ),
            ("/sourcegraph/repos/acme/docs/-/commit/abc", Route::Commit),
            (
                "/sourcegraph/repos/acme/docs/-/compare/a...b",
                Route::Compare,
            ),
            ("/sourcegraph/repos/acme/docs/-/plugins", Route::Plugins),
            ("/sourcegraph/connect", Route::Other),
            ("/sourcegraph/repos/acme/docs/-/nope/x", Route::Other),
        ] {
            assert_eq!(route_of(path), route, "{path}");
        }
    }
}
