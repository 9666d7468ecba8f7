//! The access layer's side of the company identity provider (A-5, A-6; issue 44): the
//! callers of its access tokens, the step-up refusal of operator actions, and the website's
//! sign-in through it. Beside `auth.rs`, whose `Access` state it extends.

use super::{Access, COUNTERS, on_store};
use crate::json::ApiError;
use crate::oauth::{OAuthResource, PREPARE_SCOPES, READ_SCOPE};
use crate::session::{self, csrf_of};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use service::{CallContext, Caller};
use std::net::IpAddr;
use std::sync::atomic::Ordering;

/// What a call without a token is told when the server takes the identity provider's.
pub(super) const OAUTH_TOKEN_NEEDED: &str = "this server needs an access token: sign in through the \
     identity provider (MCP clients do so by themselves from this answer), or send \
     `Authorization: Bearer <token>` with an API token (`csg token create USER`)";

impl Access {
    /// Whether the identity provider's access tokens are taken: MCP clients sign in by
    /// themselves.
    pub(crate) fn takes_provider_tokens(&self) -> bool {
        self.oauth.is_some()
    }

    /// Whether the website signs in through the identity provider.
    pub(crate) fn provider_sign_in(&self) -> bool {
        self.oauth
            .as_ref()
            .is_some_and(|o| o.web_client().is_some())
            && self.sessions.is_some()
    }

    /// Starts a website sign-in through the identity provider: where to send the browser,
    /// and the cookie that keeps the sign-in's secrets until it comes back.
    pub(crate) fn start_provider_sign_in(
        &self,
    ) -> Result<(String, Option<HeaderValue>), oauth::SignInError> {
        let (Some(oauth), true) = (&self.oauth, self.sessions.is_some()) else {
            return Err(oauth::SignInError::NotReady);
        };
        let client = oauth.web_client().ok_or(oauth::SignInError::NotReady)?;
        let pending = oauth::Pending::new()?;
        let url = oauth
            .validator()
            .authorization_url(client, oauth.redirect_uri(), &pending)?;
        let cookie = crate::oauth::pending_cookie(Some(&pending.to_cookie()), self.secure_cookies);
        Ok((url, cookie))
    }

    /// Finishes a website sign-in through the identity provider: the callback's `code` and
    /// `state` against the pending sign-in of the browser's cookie, the provider's tokens
    /// checked, the user (added on first use) signed in with the grant of this sign-in.
    /// Answers the new session's id and CSRF token.
    pub(crate) async fn finish_provider_sign_in(
        &self,
        headers: &HeaderMap,
        code: &str,
        state: &str,
    ) -> Result<(String, String), (StatusCode, String)> {
        let refused = |error: oauth::SignInError| {
            let status = match error {
                oauth::SignInError::NotReady => StatusCode::SERVICE_UNAVAILABLE,
                oauth::SignInError::Mismatch => StatusCode::BAD_REQUEST,
                _ => StatusCode::UNAUTHORIZED,
            };
            (status, error.to_string())
        };
        let (Some(oauth), Some(store)) = (&self.oauth, &self.sessions) else {
            return Err(refused(oauth::SignInError::NotReady));
        };
        let client = oauth
            .web_client()
            .ok_or_else(|| refused(oauth::SignInError::NotReady))?;
        let pending = session::cookie(headers, crate::oauth::PENDING_COOKIE)
            .and_then(oauth::Pending::from_cookie)
            .filter(|pending| session::same_secret(&pending.state, state))
            .ok_or_else(|| refused(oauth::SignInError::Mismatch))?;
        let identity = oauth
            .validator()
            .finish_sign_in(client, oauth.redirect_uri(), code, &pending)
            .await
            .map_err(refused)?;
        if !identity.has_scope(READ_SCOPE) {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "the identity provider did not grant the {READ_SCOPE} scope this website \
                     needs; ask its administrator to allow it for your account"
                ),
            ));
        }
        let grant = service::ProviderGrant {
            subject: identity.subject,
            scopes: identity.scopes,
            groups: identity.groups,
        };
        let principal = self
            .service
            .provider_principal(grant.clone())
            .await
            .map_err(|error| {
                let ApiError(status, _) = ApiError::from(error.clone());
                (status, error.message)
            })?;
        let user = principal.user;
        let session = on_store(store, move |store| {
            store.start_provider_session(&user, grant)
        })
        .await
        .map_err(|error| (StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
        COUNTERS.authenticated.fetch_add(1, Ordering::Relaxed);
        let csrf = csrf_of(&session.id);
        Ok((session.id, csrf))
    }

    /// The caller of an identity provider's access token: validated (keys cached, no
    /// round trip), then mapped to a user with its groups and scopes. A token without the
    /// read scope is a 403 step-up; a refused one counts as a wrong token of `client`.
    pub(super) async fn provider_caller(
        &self,
        oauth: &OAuthResource,
        token: &str,
        client: Option<IpAddr>,
    ) -> Result<Caller, Response> {
        // A JWT is checked here with the provider's keys; anything else is asked of the
        // provider (RFC 7662), as the website's client.
        let checked = match oauth.web_client() {
            Some(client) if !oauth::looks_like_jwt(token) => {
                oauth.validator().introspect(token, client).await
            }
            _ => oauth.validator().validate(token).await,
        };
        let identity = match checked {
            Ok(identity) => identity,
            Err(oauth::TokenError::Invalid(message)) => {
                COUNTERS.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(?client, %message, "an access token was refused");
                if let Some(client) = client {
                    self.limiter.failed(client);
                }
                return Err(oauth.invalid_token(&message));
            }
            Err(
                error @ (oauth::TokenError::KeysUnavailable | oauth::TokenError::ProviderBusy(_)),
            ) => {
                let mut response = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    error.to_string(),
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                return Err(response);
            }
        };
        if !identity.has_scope(READ_SCOPE) {
            return Err(oauth.insufficient_scope(READ_SCOPE));
        }
        let grant = service::ProviderGrant {
            subject: identity.subject,
            scopes: identity.scopes,
            groups: identity.groups,
        };
        match self.service.provider_principal(grant).await {
            Ok(principal) => {
                COUNTERS.authenticated.fetch_add(1, Ordering::Relaxed);
                Ok(Caller::User(principal))
            }
            Err(error) => Err(ApiError::from(error).into_response()),
        }
    }

    /// A-5 step-up: with the identity provider on, an operator action by an anonymous caller
    /// or a provider caller without `prepare` is refused here with a challenge naming the
    /// scopes it needs (an MCP tool's refusal would be a tool error, which sends no client
    /// to the provider). API-token callers are answered by the operation, as before.
    pub(super) async fn refuse_unscoped(
        &self,
        request: Request,
        caller: &Caller,
    ) -> Result<Request, Response> {
        let Some(oauth) = &self.oauth else {
            return Ok(request);
        };
        let asks = match caller {
            Caller::Anonymous => true,
            Caller::User(principal) => principal.provider.is_some() && !principal.prepare,
            Caller::Local => false,
        };
        let path = request.uri().path();
        let mcp = path.starts_with("/sourcegraph/mcp");
        // A forwarded call was asked this on the replica that took it.
        let forwarded = request
            .extensions()
            .get::<crate::wire::Forwarded>()
            .is_some();
        if !asks || forwarded || !(mcp || path.starts_with("/sourcegraph/api/")) {
            return Ok(request);
        }
        let (parts, body) = request.into_parts();
        // The API's operator actions are told by their path; only an MCP call by its body.
        let (bytes, body) = if mcp && parts.method == http::Method::POST {
            match crate::body::read_limited(&parts.headers, body).await {
                Ok(bytes) => (Some(bytes.clone()), axum::body::Body::from(bytes)),
                Err(refused) => return Err(refused),
            }
        } else {
            (None, body)
        };
        let ctx = CallContext {
            caller: caller.clone(),
            ..CallContext::default()
        };
        if crate::forward::prepares(&self.service, &ctx, &parts, bytes.as_deref()) {
            return Err(match caller {
                Caller::Anonymous => oauth.token_needed(OAUTH_TOKEN_NEEDED, PREPARE_SCOPES),
                _ => oauth.insufficient_scope(PREPARE_SCOPES),
            });
        }
        Ok(Request::from_parts(parts, body))
    }
}
