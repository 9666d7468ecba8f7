//! The access layer in front of everything under `/sourcegraph/` (the JSON API and the MCP
//! endpoint mounted beside it): who is calling. It refuses a token in the URL,
//! checks `Authorization: Bearer <token>` through the service (hashed lookup, never a
//! plaintext compare), rate-limits wrong tokens (and wrong session ids) per client address,
//! and answers 401 with a `WWW-Authenticate: Bearer` challenge when a token is needed. The
//! caller it established rides in the request's extensions as a `service::Caller`; what the
//! caller may read is the service's decision, made on every call.
//!
//! `/healthz`, `/readyz` and `/metrics` stay open: probes and scrapers carry no tokens, and
//! none of them names a repository.
//!
//! The website's pages (everything under `/sourcegraph/` but `api/` and `mcp`) are for
//! browsers, which carry no bearer token: there the caller is the session of the visitor's
//! cookie (`crate::session`), checked against the access store on every page, and a page
//! that needs a token answers as HTML (the site's sign-in), not with a 401 challenge.

use crate::ClientAddr;
use crate::SiteConfig;
use crate::json::{ApiError, INVALID_TOKEN, UNAUTHENTICATED};
use crate::oauth::{METADATA_PATH, OAuthResource, READ_SCOPE, ROOT_METADATA_PATH};
use crate::session::{
    self, CSRF_COOKIE, SESSION_COOKIE, csrf_of, random_hex, set_cookie, well_formed,
};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use provider::OAUTH_TOKEN_NEEDED;
use service::{AuthFailure, Budget, CallContext, Caller, ClientKey, Service};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

mod provider;

/// Wrong tokens one client address may present at once before it is slowed down.
const BURST: f64 = 10.0;
/// Wrong tokens per second a client address is allowed after the burst.
const REFILL_PER_SECOND: f64 = 1.0;
/// Client addresses the limiter remembers at most; quiet ones are forgotten first.
const MAX_CLIENTS: usize = 10_000;

/// What a client is told when a token sits in the URL.
const TOKEN_IN_URL: &str = "an API token was found in the URL query string, where it ends up \
     in logs and browser history; send it in the `Authorization: Bearer <token>` header \
     instead, and consider revoking this one (`csg token revoke ID`)";

/// Query parameter names that carry a credential by convention.
const CREDENTIAL_PARAMETERS: [&str; 8] = [
    "token",
    "access_token",
    "api_token",
    "api_key",
    "apikey",
    "auth",
    "authorization",
    "bearer",
];

/// Counters of the access layer, process-wide (the `/metrics` of every router shows them).
pub(crate) struct AuthCounters {
    /// Calls with a valid token.
    pub(crate) authenticated: AtomicU64,
    /// Calls refused for a wrong, revoked or malformed token.
    pub(crate) refused: AtomicU64,
    /// Calls refused because their address presented too many wrong tokens.
    pub(crate) rate_limited: AtomicU64,
    /// Calls refused because they carried a token in the URL.
    pub(crate) token_in_url: AtomicU64,
}

pub(crate) static COUNTERS: AuthCounters = AuthCounters {
    authenticated: AtomicU64::new(0),
    refused: AtomicU64::new(0),
    rate_limited: AtomicU64::new(0),
    token_in_url: AtomicU64::new(0),
};

/// The call context of a request the access layer let through: who calls, who it counts
/// against, and the budget the layer cancels when the client goes away (O-9).
pub(crate) fn context(parts: &Parts) -> CallContext {
    CallContext {
        caller: parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or(Caller::Anonymous),
        client: parts
            .extensions
            .get::<ClientKey>()
            .copied()
            .unwrap_or(ClientKey::Unknown),
        budget: parts
            .extensions
            .get::<Budget>()
            .cloned()
            .unwrap_or_default(),
        ..CallContext::default()
    }
}

/// Who a call counts against for the per-client shares of heavy work (O-9): its token,
/// else its client address as the wrong-token limiter keys it (an IPv6 client by its /64).
fn client_of(caller: &Caller, address: Option<IpAddr>) -> ClientKey {
    match (caller, address) {
        (Caller::User(principal), _) => match &principal.provider {
            Some(grant) => {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                grant.subject.hash(&mut hasher);
                ClientKey::ProviderUser(hasher.finish())
            }
            None => ClientKey::Token(principal.token_id),
        },
        (_, Some(address)) => ClientKey::Address(client_key(address)),
        (_, None) => ClientKey::Unknown,
    }
}

/// Runs the rest of the stack for a caller the layer let through: the request carries the
/// caller, who it counts against and a budget that is cancelled if the client goes away
/// before the response is ready (its future dropped), so the work stops too (O-9).
async fn admitted(
    mut request: Request,
    next: Next,
    caller: Caller,
    address: Option<IpAddr>,
) -> Response {
    let departure = Budget::default();
    let extensions = request.extensions_mut();
    extensions.insert(client_of(&caller, address));
    extensions.insert(caller);
    extensions.insert(departure.clone());
    let guard = departure.cancel_on_drop();
    let response = next.run(request).await;
    guard.disarm();
    response
}

/// `app` behind the access layer; `site` says whether the site's cookies are `Secure`. The
/// website's sign-in is refused (there is nowhere to keep sessions): serve the site through
/// [`with_access_and_sessions`].
pub fn with_access(app: Router, service: Service, site: &SiteConfig) -> Router {
    with_access_options(app, service, site, AccessOptions::default())
}

/// What the access layer works with besides the service.
#[derive(Clone, Default)]
pub struct AccessOptions {
    /// Where website sessions live (see [`with_access_and_sessions`]); none: signing in to
    /// the website is refused.
    pub sessions: Option<Arc<access::AccessStore>>,
    /// The identity provider whose access tokens are taken beside API tokens, and the
    /// challenges that send clients to it (A-5, issue 44); none: API tokens only.
    pub oauth: Option<OAuthResource>,
}

/// [`with_access`] whose website sessions live in `sessions`, the access store of the
/// server's metadata (SQLite beside the registry, or a cluster's PostgreSQL), so they
/// survive a restart and work on every replica. Any store on that metadata will do: one of
/// its own (`service::open_access`) or the service's.
pub fn with_access_and_sessions(
    app: Router,
    service: Service,
    site: &SiteConfig,
    sessions: Arc<access::AccessStore>,
) -> Router {
    let options = AccessOptions {
        sessions: Some(sessions),
        oauth: None,
    };
    with_access_options(app, service, site, options)
}

/// [`with_access`] with everything [`AccessOptions`] can give it.
pub fn with_access_options(
    app: Router,
    service: Service,
    site: &SiteConfig,
    options: AccessOptions,
) -> Router {
    // The protected-resource metadata (RFC 9728) as routes of their own: a layer's answer to
    // a path no route has would be lost where a replica merges its own routes beside these.
    let app = match &options.oauth {
        Some(oauth) => {
            let metadata =
                |oauth: OAuthResource| axum::routing::get(move || async move { oauth.metadata() });
            app.route(METADATA_PATH, metadata(oauth.clone()))
                .route(ROOT_METADATA_PATH, metadata(oauth.clone()))
        }
        None => app,
    };
    let state = Arc::new(Access {
        service,
        limiter: Limiter::default(),
        sessions: options.sessions,
        oauth: options.oauth,
        secure_cookies: site.secure(),
    });
    app.layer(axum::middleware::from_fn_with_state(state, check))
}

pub(crate) struct Access {
    service: Service,
    limiter: Limiter,
    /// Where website sessions live; none: signing in is refused.
    sessions: Option<Arc<access::AccessStore>>,
    /// The identity provider's tokens are taken too.
    oauth: Option<OAuthResource>,
    secure_cookies: bool,
}

/// What a sign-in answers without a session store.
const NO_SESSIONS: &str = "signing in to the website is not available on this server (it was \
     started without a place to keep sessions); send your API token as `Authorization: Bearer \
     <token>` instead";

/// Runs a session-store call on the blocking pool: it may wait on the metadata database (a
/// sign-in's write; a look-up of a session another replica started a moment ago), which must
/// not hold up the worker thread's other connections.
async fn on_store<T: Send + 'static>(
    store: &Arc<access::AccessStore>,
    call: impl FnOnce(&access::AccessStore) -> Result<T, access::Error> + Send + 'static,
) -> Result<T, access::Error> {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || call(&store))
        .await
        .unwrap_or_else(|_| {
            Err(access::Error::Storage(
                "a session check was interrupted".to_owned(),
            ))
        })
}

/// Whether `error` says nothing about the credential (the store failed, or may not look it
/// up now: this client's look-ups of unknown ones are spent), so a session must not be ended
/// for it (issue 43 finding 3).
fn store_failed(error: &access::Error) -> bool {
    matches!(
        error,
        access::Error::Storage(_)
            | access::Error::Unavailable(_)
            | access::Error::SchemaTooNew { .. }
            | access::Error::UnknownNow { .. }
    )
}

/// Who is looking at a site page, for the page's header and forms.
#[derive(Debug, Clone)]
pub(crate) struct Visitor {
    /// The signed-in user.
    pub(crate) user: Option<String>,
    /// What the page's forms must post back as `csrf`.
    pub(crate) csrf: String,
    /// The session id, when signed in through the site.
    pub(crate) session: Option<String>,
    /// Whether the site offers signing in through the identity provider.
    pub(crate) provider_sign_in: bool,
}

/// The access layer's state, for the site's sign-in and sign-out handlers.
#[derive(Clone)]
pub(crate) struct SiteAccess(pub(crate) Arc<Access>);

/// Why a sign-in was refused.
pub(crate) enum SignInRefusal {
    /// Too many wrong tokens from the address: seconds to wait.
    Wait(u64),
    /// Not a valid token (the message says why).
    Invalid(String),
    /// The access store failed.
    Unavailable(String),
}

impl Access {
    /// Signs in with a pasted token, under the same per-address limit as bearer tokens
    /// answers the new session's id and CSRF token.
    pub(crate) async fn sign_in(
        &self,
        token: &str,
        client: Option<IpAddr>,
    ) -> Result<(String, String), SignInRefusal> {
        let key = client.map(client_key);
        if let Some(wait) = key.and_then(|c| self.limiter.wait(c)) {
            COUNTERS.rate_limited.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?client, wait, "too many wrong API tokens: sign-in refused");
            return Err(SignInRefusal::Wait(wait));
        }
        let Some(store) = &self.sessions else {
            return Err(SignInRefusal::Unavailable(NO_SESSIONS.to_owned()));
        };
        let token = token.trim().to_owned();
        match on_store(store, move |store| store.start_session_from(&token, client)).await {
            Ok(session) => {
                COUNTERS.authenticated.fetch_add(1, Ordering::Relaxed);
                let csrf = csrf_of(&session.id);
                Ok((session.id, csrf))
            }
            Err(error) if store_failed(&error) => {
                Err(SignInRefusal::Unavailable(error.to_string()))
            }
            Err(error) => {
                COUNTERS.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(?client, "a wrong API token: sign-in refused");
                if let Some(key) = key {
                    self.limiter.failed(key);
                }
                Err(SignInRefusal::Invalid(error.to_string()))
            }
        }
    }

    /// Whether the secure flag goes on the site's cookies.
    pub(crate) fn secure_cookies(&self) -> bool {
        self.secure_cookies
    }

    /// Ends session `id` (sign-out), on every replica; a store that cannot be written now is
    /// logged (the visitor's cookie is removed all the same, and the session ends when idle).
    pub(crate) async fn sign_out(&self, id: &str) {
        let Some(store) = &self.sessions else {
            return;
        };
        let id = id.to_owned();
        if let Err(error) = on_store(store, move |store| store.end_session(&id)).await {
            tracing::warn!(%error, "a website session could not be ended in the access store");
        }
    }

    /// `Set-Cookie` values that start (`Some`) or end (`None`) a session with its CSRF token.
    pub(crate) fn session_cookies(&self, session: Option<(&str, &str)>) -> Vec<HeaderValue> {
        let secure = self.secure_cookies;
        match session {
            Some((id, csrf)) => [
                set_cookie(SESSION_COOKIE, Some(id), secure),
                set_cookie(CSRF_COOKIE, Some(csrf), secure),
            ]
            .into_iter()
            .flatten()
            .collect(),
            None => set_cookie(SESSION_COOKIE, None, secure)
                .into_iter()
                .collect(),
        }
    }

    /// Who a site visitor is: `bearer` when the request carried a valid token, else the
    /// session of their cookie, checked again now; answers cookies to set as well (a fresh
    /// CSRF token, the removal of a session that ended). A session the store cannot tell
    /// about now (it failed; or the view does not know the session and `client`'s database
    /// look-ups are spent, or `client` presented too many wrong tokens or session ids to be
    /// given any) is browsed anonymously this once and its cookie kept: a flood of forged
    /// cookies from elsewhere must never sign a real visitor out (issue 43 finding 3). A
    /// session id the store says is no session counts as a wrong token of `client`.
    async fn visit(
        &self,
        headers: &HeaderMap,
        bearer: Option<Caller>,
        client: Option<IpAddr>,
    ) -> (Caller, Visitor, Vec<HeaderValue>) {
        let mut cookies = Vec::new();
        let csrf = match session::cookie(headers, CSRF_COOKIE).filter(|v| well_formed(v)) {
            Some(value) => value.to_owned(),
            None => {
                let fresh = random_hex().unwrap_or_default();
                cookies.extend(set_cookie(CSRF_COOKIE, Some(&fresh), self.secure_cookies));
                fresh
            }
        };
        let provider_sign_in = self.provider_sign_in();
        let anonymous = |csrf| Visitor {
            user: None,
            csrf,
            session: None,
            provider_sign_in,
        };
        if let Some(caller) = bearer {
            let user = match &caller {
                Caller::User(principal) => Some(principal.user.clone()),
                _ => None,
            };
            return (
                caller,
                Visitor {
                    user,
                    ..anonymous(csrf)
                },
                cookies,
            );
        }
        let Some(id) = session::cookie(headers, SESSION_COOKIE).filter(|v| well_formed(v)) else {
            return (Caller::Anonymous, anonymous(csrf), cookies);
        };
        let Some(store) = &self.sessions else {
            cookies.extend(self.session_cookies(None));
            return (Caller::Anonymous, anonymous(csrf), cookies);
        };
        let owned = id.to_owned();
        let key = client.map(client_key);
        // Over its limit of wrong credentials, a client gets no database look-ups: a session
        // the view knows still works (another visitor behind the same address).
        let limited = key.is_some_and(|key| self.limiter.wait(key).is_some());
        let checked = if limited {
            on_store(store, move |store| store.session_in_view(&owned)).await
        } else {
            on_store(store, move |store| store.session(&owned, client)).await
        };
        match checked {
            Ok(principal) => {
                let principal = self.service.with_provider_capabilities(principal);
                let visitor = Visitor {
                    user: Some(principal.user.clone()),
                    csrf: csrf_of(id),
                    session: Some(id.to_owned()),
                    provider_sign_in,
                };
                (Caller::User(principal), visitor, cookies)
            }
            // The store cannot tell now: the visitor browses anonymously, the cookie stays.
            Err(error) if store_failed(&error) => {
                tracing::debug!(%error, "a website session could not be checked");
                (Caller::Anonymous, anonymous(csrf), cookies)
            }
            // A-1, W-34: signed out, idle, its token revoked or its user removed; or never a
            // session, which counts like a wrong token.
            Err(_) => {
                tracing::debug!(?client, "a cookie naming no live session: removed");
                if let Some(key) = key {
                    self.limiter.failed(key);
                }
                cookies.extend(self.session_cookies(None));
                (Caller::Anonymous, anonymous(csrf), cookies)
            }
        }
    }
}

impl Access {
    /// The caller of one of this server's API tokens: looked up by hash; a wrong one
    /// counts against `client`.
    async fn api_token_caller(
        &self,
        token: &str,
        address: Option<IpAddr>,
        client: Option<IpAddr>,
    ) -> Result<Caller, Response> {
        match self.service.authenticate_or_look_up(token, address).await {
            Ok(principal) => {
                COUNTERS.authenticated.fetch_add(1, Ordering::Relaxed);
                Ok(Caller::User(principal))
            }
            Err(AuthFailure::Invalid(message)) => {
                COUNTERS.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(client = ?address, "a wrong API token: refused");
                if let Some(client) = client {
                    self.limiter.failed(client);
                }
                Err(match &self.oauth {
                    Some(oauth) => oauth.invalid_token(&message),
                    None => ApiError::new(StatusCode::UNAUTHORIZED, INVALID_TOKEN, message)
                        .into_response(),
                })
            }
            Err(AuthFailure::Unavailable(message)) => {
                Err(
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
                        .into_response(),
                )
            }
            // Nothing is known of the token (issue 43 finding 3): not a wrong one, so it is
            // not counted, and the client is told to retry rather than to give it up.
            Err(AuthFailure::UnknownNow {
                message,
                retry_after,
            }) => {
                tracing::debug!(client = ?address, "a token unknown here, not looked up now");
                let mut response =
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
                        .into_response();
                if let Ok(value) = retry_after.to_string().parse() {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                Err(response)
            }
        }
    }
}

/// Whether `path` is one of the website's pages (not the API, not MCP, not a probe).
fn is_site_path(path: &str) -> bool {
    path.starts_with("/sourcegraph")
        && !path.starts_with("/sourcegraph/api")
        && !path.starts_with("/sourcegraph/mcp")
}

/// A leaky bucket of wrong tokens per client address: bearer tokens, tokens pasted into the
/// sign-in form and cookies naming no live session all count.
#[derive(Default)]
struct Limiter {
    clients: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Limiter {
    /// The level of `client`'s bucket now.
    fn level(entry: (f64, Instant), now: Instant) -> f64 {
        let (level, at) = entry;
        (level - now.saturating_duration_since(at).as_secs_f64() * REFILL_PER_SECOND).max(0.0)
    }

    /// Seconds until `client` may present a token again, if it must wait.
    fn wait(&self, client: IpAddr) -> Option<u64> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let level = Self::level(*clients.get(&client)?, Instant::now());
        (level + 1.0 > BURST).then(|| ((level + 1.0 - BURST) / REFILL_PER_SECOND).ceil() as u64)
    }

    /// Counts a wrong token (or session id) of `client`.
    fn failed(&self, client: IpAddr) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, entry| Self::level(*entry, now) > 0.0);
            if clients.len() >= MAX_CLIENTS {
                // Under a flood of addresses: forget an arbitrary one rather than grow.
                if let Some(any) = clients.keys().next().copied() {
                    clients.remove(&any);
                }
            }
        }
        let level = clients
            .get(&client)
            .map_or(0.0, |entry| Self::level(*entry, now));
        clients.insert(client, (level + 1.0, now));
    }
}

/// The limiter's key of a peer address: an IPv4 address as itself, also when a dual-stack
/// listener reports it IPv4-mapped; an IPv6 address by its /64, the block one subscriber
/// gets, so hopping through addresses of one network does not reset the bucket. The access
/// store keys its budgets of database look-ups by the same rule, so it is defined there.
fn client_key(peer: IpAddr) -> IpAddr {
    access::client_key(peer)
}

/// Whether a query string carries a credential: a conventional parameter name, or a value
/// (percent-decoded) holding something shaped like one of our tokens. A search for text that
/// merely contains the prefix (`csg_session`) is not one.
fn token_in_query(query: &str) -> bool {
    query.split('&').any(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        CREDENTIAL_PARAMETERS
            .iter()
            .any(|p| name.eq_ignore_ascii_case(p))
            || service::contains_token(value)
            || service::contains_token(
                &percent_encoding::percent_decode_str(value).decode_utf8_lossy(),
            )
    })
}

/// The bearer token of a request: `Ok(None)` without an `Authorization` header.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, &'static str> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(
        |_| "the Authorization header is not text; send `Authorization: Bearer <token>`",
    )?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("only bearer tokens are accepted: send `Authorization: Bearer <token>`");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("the Authorization header has no token: send `Authorization: Bearer <token>`");
    }
    Ok(Some(token))
}

async fn check(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let response = checked(Arc::clone(&access), request, next).await;
    match &access.oauth {
        // Every 401, whoever answered it, names the metadata (the MCP authorization spec).
        Some(oauth) => oauth.rechallenged(response),
        None => response,
    }
}

async fn checked(access: Arc<Access>, mut request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with("/sourcegraph") {
        return next.run(request).await;
    }
    let site = is_site_path(request.uri().path());
    if request.uri().query().is_some_and(token_in_query) {
        COUNTERS.token_in_url.fetch_add(1, Ordering::Relaxed);
        return ApiError::bad_request(TOKEN_IN_URL).into_response();
    }
    // The client as the listener told it (the peer, or behind a trusted proxy the client it
    // names); none when the app is served some other way, which then goes unlimited.
    let address = request
        .extensions()
        .get::<ClientAddr>()
        .map(|ClientAddr(addr)| *addr);
    let client = address.map(client_key);
    // A call another replica forwarded with the identity it validated (issue 44 point 7):
    // that identity, without a token to validate again.
    let forwarded = request
        .extensions_mut()
        .remove::<crate::wire::ForwardedIdentity>()
        .filter(|_| access.oauth.is_some());
    let caller = if let Some(crate::wire::ForwardedIdentity(grant)) = forwarded {
        match access.service.provider_principal(grant).await {
            Ok(principal) => Caller::User(principal),
            Err(error) => return ApiError::from(error).into_response(),
        }
    } else {
        match bearer(request.headers()) {
            Err(message) => {
                return ApiError::new(StatusCode::UNAUTHORIZED, UNAUTHENTICATED, message)
                    .into_response();
            }
            Ok(None) if site || access.service.public_read() => Caller::Anonymous,
            Ok(None) => {
                if let Some(oauth) = &access.oauth {
                    return oauth.token_needed(OAUTH_TOKEN_NEEDED, READ_SCOPE);
                }
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    UNAUTHENTICATED,
                    service::TOKEN_NEEDED,
                )
                .into_response();
            }
            Ok(Some(token)) => {
                if let Some(wait) = client.and_then(|c| access.limiter.wait(c)) {
                    COUNTERS.rate_limited.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(client = ?address, wait, "too many wrong API tokens: refused");
                    let mut response = ApiError::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        "rate_limited",
                        format!(
                            "too many wrong API tokens from this address; wait {wait} s before \
                         trying again"
                        ),
                    )
                    .into_response();
                    if let Ok(value) = wait.to_string().parse() {
                        response.headers_mut().insert(header::RETRY_AFTER, value);
                    }
                    return response;
                }
                // The identity provider's tokens: JWTs, and with a website client to ask
                // the provider with, opaque ones. Nothing with our tokens' prefix is ever
                // sent to the provider (a mistyped API token is still a secret of ours).
                if let Some(oauth) = &access.oauth
                    && (oauth::looks_like_jwt(token)
                        || (oauth.web_client().is_some()
                            && !token.starts_with(access::TOKEN_PREFIX)))
                {
                    match access.provider_caller(oauth, token, client).await {
                        Ok(caller) => caller,
                        Err(refused) => return refused,
                    }
                } else {
                    match access.api_token_caller(token, address, client).await {
                        Ok(caller) => caller,
                        Err(refused) => return refused,
                    }
                }
            }
        }
    };
    if !site {
        let request = match access.refuse_unscoped(request, &caller).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
        return admitted(request, next, caller, address).await;
    }
    let bearer = (caller != Caller::Anonymous).then_some(caller);
    let (caller, visitor, cookies) = access.visit(request.headers(), bearer, address).await;
    request.extensions_mut().insert(visitor);
    request.extensions_mut().insert(SiteAccess(access.clone()));
    let mut response = admitted(request, next, caller, address).await;
    // A handler's own cookie (a sign-in's new CSRF token) wins over the layer's.
    let cookie_name = |v: &HeaderValue| {
        v.to_str()
            .ok()
            .and_then(|t| t.split_once('='))
            .map(|(name, _)| name.to_owned())
    };
    let set: Vec<String> = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(cookie_name)
        .collect();
    for cookie in cookies {
        if !cookie_name(&cookie).is_some_and(|name| set.contains(&name)) {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// credentials in a query string are recognised by name and by shape; ordinary
    /// arguments are not.
    #[test]
    fn a1_token_in_query_is_recognised() {
        let token = format!("csg_{}", "0123456789abcdef".repeat(4));
        let encoded = token.replace('_', "%5F");
        for query in [
            "token=abc".to_owned(),
            "repo=a/b&access_token=x".to_owned(),
            "API_KEY=1".to_owned(),
            format!("plugins=auto&x={token}"),
            format!("q=see+{encoded}+here"),
        ] {
            assert!(token_in_query(&query), "{query}");
        }
        // S-1 (issue 33 point 8): text that only mentions the prefix is searchable.
        for query in [
            "plugins=auto",
            "repo=a/b&path=token.md",
            "query=tokens",
            "q=csg_session",
            "q=csg%5Fsession&regex=true",
            "q=csg_0123",
        ] {
            assert!(!token_in_query(query), "{query}");
        }
    }

    /// the limiter lets a burst of wrong tokens through, then makes the address wait,
    /// and forgets quiet addresses when it is full.
    #[test]
    fn a1_wrong_tokens_are_rate_limited_per_address() {
        let limiter = Limiter::default();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "::1".parse().unwrap());
        for _ in 0..BURST as usize - 1 {
            limiter.failed(a);
            assert_eq!(limiter.wait(a), None);
        }
        limiter.failed(a);
        assert!(limiter.wait(a).is_some_and(|s| s >= 1));
        assert_eq!(limiter.wait(b), None, "per address");
    }

    /// one client is one bucket, whichever of its addresses it comes from.
    #[test]
    fn a1_limiter_key_of_mapped_and_ipv6_addresses() {
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(client_key("::ffff:127.0.0.1".parse().unwrap()), v4);
        assert_eq!(client_key(v4), v4);
        let a = client_key("2001:db8:1:2::1".parse().unwrap());
        let b = client_key("2001:db8:1:2:ffff::9".parse().unwrap());
        let other = client_key("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(
            client_key("::1".parse().unwrap()),
            "::".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn bearer_header_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), Ok(None));
        headers.insert(header::AUTHORIZATION, "Bearer csg_x".parse().unwrap());
        assert_eq!(bearer(&headers), Ok(Some("csg_x")));
        headers.insert(header::AUTHORIZATION, "bearer  csg_y ".parse().unwrap());
        assert_eq!(bearer(&headers), Ok(Some("csg_y")));
        headers.insert(header::AUTHORIZATION, "Basic dXNlcg==".parse().unwrap());
        assert!(bearer(&headers).is_err());
        headers.insert(header::AUTHORIZATION, "Bearer".parse().unwrap());
        assert!(bearer(&headers).is_err());
    }
}
