//! The OAuth 2.1 resource server's HTTP face (A-5, issue 44; the MCP authorization spec,
//! revisions 2025-06-18 to 2026-07-28): the protected-resource metadata (RFC 9728) and the
//! `WWW-Authenticate` challenges that send an MCP client to the identity provider, or back
//! to it for a scope it lacks. The access layer (`auth.rs`) validates the tokens with
//! [`oauth::Validator`] and asks this module how to refuse.

use crate::json::{ApiError, INVALID_TOKEN, UNAUTHENTICATED};
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The path of the protected-resource metadata of the MCP endpoint (RFC 9728 §3.1: the
/// well-known prefix, then the resource's path).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/sourcegraph/mcp";
/// The root form of the same document, for clients that look there first.
pub const ROOT_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// Where the identity provider sends a browser back after a website sign-in; the redirect
/// URI to register for the website's client is the public URL followed by it.
pub const CALLBACK_PATH: &str = "/sourcegraph/oauth/callback";
/// The cookie that keeps a website sign-in under way (`state`, `nonce`, PKCE verifier) until
/// the provider sends the browser back: `SameSite=Lax`, as that return is a navigation from
/// the provider's site, and only on the callback's path.
pub(crate) const PENDING_COOKIE: &str = "csg_signin";
/// How long a sign-in may take at the provider.
const PENDING_SECONDS: u32 = 600;

/// The `Set-Cookie` value that keeps (`Some`) or drops (`None`) a pending sign-in.
pub(crate) fn pending_cookie(value: Option<&str>, secure: bool) -> Option<HeaderValue> {
    let rest = match value {
        Some(_) => format!("SameSite=Lax; Max-Age={PENDING_SECONDS}"),
        None => "SameSite=Lax".to_owned(),
    };
    crate::session::cookie_with(PENDING_COOKIE, value, "/sourcegraph/oauth", &rest, secure)
}

/// The name clients show for this resource.
const RESOURCE_NAME: &str = "Context Source Graph";
/// The scope of a call that only reads.
pub(crate) const READ_SCOPE: &str = oauth::SCOPE_READ;
/// The scopes of an operator action (the read scope, which every call needs, and prepare),
/// all in one challenge as the 2026-07-28 revision asks.
pub(crate) const PREPARE_SCOPES: &str = "csg:read csg:prepare";

/// This server as an OAuth protected resource: the validator of its identity provider's
/// tokens and its canonical MCP URL.
#[derive(Clone, Debug)]
pub struct OAuthResource {
    validator: oauth::Validator,
    /// The canonical MCP URL (`<public URL>/sourcegraph/mcp`).
    resource: String,
    /// Where [`METADATA_PATH`] is served, absolute.
    metadata_url: String,
    /// The website's own client at the provider, for signing in through it.
    web_client: Option<oauth::WebClient>,
    /// Where the provider sends a browser back after a sign-in.
    redirect_uri: String,
}

impl OAuthResource {
    /// The resource at `public_url` (no trailing slash needed) whose tokens `validator`
    /// checks.
    pub fn new(validator: oauth::Validator, public_url: &str) -> Self {
        let base = public_url.trim_end_matches('/');
        Self {
            validator,
            resource: format!("{base}/sourcegraph/mcp"),
            metadata_url: format!("{base}{METADATA_PATH}"),
            web_client: None,
            redirect_uri: format!("{base}{CALLBACK_PATH}"),
        }
    }

    /// The same, with the website signing in through the provider as `client`.
    pub fn with_web_client(self, client: oauth::WebClient) -> Self {
        Self {
            web_client: Some(client),
            ..self
        }
    }

    /// The website's client, if the website signs in through the provider.
    pub(crate) fn web_client(&self) -> Option<&oauth::WebClient> {
        self.web_client.as_ref()
    }

    /// The redirect URI of the website's sign-in.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    pub(crate) fn validator(&self) -> &oauth::Validator {
        &self.validator
    }

    /// The protected-resource metadata (RFC 9728 §2).
    pub(crate) fn metadata(&self) -> Response {
        let body = serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.validator.config().issuer],
            "scopes_supported": oauth::SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": RESOURCE_NAME,
        });
        (
            [(header::CACHE_CONTROL, "public, max-age=3600")],
            Json(body),
        )
            .into_response()
    }

    /// A `Bearer` challenge naming the metadata and the scopes `scope`, with `error` if the
    /// token was the problem (RFC 6750 §3).
    fn challenge(&self, error: Option<&str>, scope: &str) -> Option<HeaderValue> {
        let error = error
            .map(|e| format!("error=\"{e}\", "))
            .unwrap_or_default();
        HeaderValue::from_str(&format!(
            "Bearer {error}scope=\"{scope}\", resource_metadata=\"{}\"",
            self.metadata_url
        ))
        .ok()
    }

    /// 401 for a call that needs a token and came without one: which scopes to ask for.
    pub(crate) fn token_needed(&self, message: &str, scope: &str) -> Response {
        let response = ApiError::new(StatusCode::UNAUTHORIZED, UNAUTHENTICATED, message);
        self.challenged(response.into_response(), None, scope)
    }

    /// 401 for a token that was refused.
    pub(crate) fn invalid_token(&self, message: &str) -> Response {
        let response = ApiError::new(StatusCode::UNAUTHORIZED, INVALID_TOKEN, message);
        self.challenged(response.into_response(), Some("invalid_token"), READ_SCOPE)
    }

    /// 403 for a valid token without a scope the call needs (step-up).
    pub(crate) fn insufficient_scope(&self, scope: &str) -> Response {
        let response = ApiError::new(
            StatusCode::FORBIDDEN,
            "insufficient_scope",
            format!(
                "this call needs the scopes {scope:?}, which the access token does not grant; \
                 authorize again asking for them"
            ),
        );
        self.challenged(response.into_response(), Some("insufficient_scope"), scope)
    }

    /// `response` with this resource's challenge (every 401 names the metadata, so a client
    /// that called anything finds the provider).
    pub(crate) fn challenged(
        &self,
        mut response: Response,
        error: Option<&str>,
        scope: &str,
    ) -> Response {
        if let Some(value) = self.challenge(error, scope) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// A 401 some handler answered (with the plain challenge of `json.rs`): the same with
    /// this resource's challenge, its `error` kept. One of this resource's own challenges
    /// (naming the scopes its call needs) is left as it is.
    pub(crate) fn rechallenged(&self, response: Response) -> Response {
        if response.status() != StatusCode::UNAUTHORIZED {
            return response;
        }
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if challenge.contains("resource_metadata=") {
            return response;
        }
        let error = challenge
            .contains("invalid_token")
            .then_some("invalid_token");
        self.challenged(response, error, READ_SCOPE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource() -> OAuthResource {
        let validator = oauth::Validator::new(oauth::OAuthConfig {
            issuer: "https://id.example.org/realms/acme".into(),
            audience: "https://csg.example.org/sourcegraph/mcp".into(),
            groups_claim: "groups".into(),
        })
        .unwrap();
        OAuthResource::new(validator, "https://csg.example.org/")
    }

    #[test]
    fn a5_challenges_name_the_metadata_and_the_scopes() {
        let resource = resource();
        let response = resource.insufficient_scope(PREPARE_SCOPES);
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            response.headers()[header::WWW_AUTHENTICATE],
            "Bearer error=\"insufficient_scope\", scope=\"csg:read csg:prepare\", \
             resource_metadata=\"https://csg.example.org/.well-known/oauth-protected-resource/sourcegraph/mcp\""
        );
        let response = resource.token_needed("a token, please", READ_SCOPE);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap();
        assert!(challenge.starts_with("Bearer scope=\"csg:read\", resource_metadata="));
    }

    /// A handler's plain 401 gets this resource's challenge; one of its own keeps its scopes.
    #[test]
    fn a5_every_401_names_the_metadata_and_keeps_the_scopes_it_asked_for() {
        let resource = resource();
        let kept = resource.rechallenged(resource.token_needed("a token, please", PREPARE_SCOPES));
        let challenge = kept.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            challenge.contains("scope=\"csg:read csg:prepare\""),
            "{challenge}"
        );
        let plain = ApiError::new(StatusCode::UNAUTHORIZED, INVALID_TOKEN, "no").into_response();
        let named = resource.rechallenged(plain);
        let challenge = named.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            challenge.starts_with(
                "Bearer error=\"invalid_token\", scope=\"csg:read\", resource_metadata="
            ),
            "{challenge}"
        );
    }
}
