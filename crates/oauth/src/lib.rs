//! `oauth` owns what Context Source Graph knows of OAuth 2.1 and OpenID Connect (SPEC A-5,
//! A-6; issue 44): the identity provider's metadata (RFC 8414, OpenID Connect Discovery),
//! its signing keys (a JWKS, cached), the validation of the access tokens MCP clients present
//! (JWT profile, RFC 9068; audience per RFC 8707; OAuth 2.1 §5.2; opaque ones by RFC 7662
//! introspection) and the scopes this server defines. It knows neither HTTP servers nor permissions: the transport hands it a bearer
//! value and gets an [`Identity`] or a [`TokenError`]; the service decides what the identity
//! may do.
//!
//! Validation never waits on the network on the hot path: keys are fetched at start (retried
//! in the background while the provider is unreachable, which is a warning, not a crash), every
//! hour, and when a token names a key id the cache lacks, at most once per
//! [`KEY_REFRESH_INTERVAL`] whoever asks.

mod fetch;
mod introspect;
mod keys;
mod metadata;
mod signin;
mod token;

#[cfg(feature = "testing")]
pub mod testing;

pub use metadata::ProviderMetadata;
pub use signin::{Pending, SignInError, WebClient};
pub use token::Identity;

use std::sync::Arc;
use std::time::Duration;

/// The scope of reading: the read tools and the website.
pub const SCOPE_READ: &str = "csg:read";
/// The scope of preparing: registration, sync, `reload_plugins`, index rebuilds.
pub const SCOPE_PREPARE: &str = "csg:prepare";
/// Every scope this server defines, for its protected-resource metadata.
pub const SCOPES: [&str; 2] = [SCOPE_READ, SCOPE_PREPARE];

/// The least time between two fetches of the provider's keys for tokens naming an unknown
/// key id: a flood of forged key ids costs the provider one request per interval.
pub const KEY_REFRESH_INTERVAL: Duration = Duration::from_secs(10);
/// The clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(60);
/// The longest bearer value looked at; longer ones are refused unread.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How this server trusts an identity provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier (`iss` of its tokens), an `https://` URL
    /// (or `http://` on a loopback address, for tests and local providers).
    pub issuer: String,
    /// The resource tokens must be issued for (`aud`): this server's canonical MCP URL.
    pub audience: String,
    /// The claim that lists the caller's groups.
    pub groups_claim: String,
}

/// A configuration this crate cannot work with; says which setting is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A URL setting that is not an absolute `https://` URL (or `http://` on loopback).
    #[error(
        "--{setting} {value:?} is not usable: {why}; give an absolute https:// URL (http:// only \
         on a loopback address)"
    )]
    Url {
        /// The setting's flag name.
        setting: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// The groups claim is empty.
    #[error("--oauth-groups-claim must name a claim (the default is `groups`)")]
    EmptyGroupsClaim,
}

/// Why a presented access token was refused. The messages are for the caller: they say what
/// is wrong with the token, never anything of the provider's internals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT this server accepts, a bad signature, the wrong issuer or audience, expired;
    /// the client should get a new token, not retry this one.
    #[error("the access token was refused: {0}; sign in again to get a new one")]
    Invalid(String),
    /// The provider's keys are not known yet (it was unreachable since the start): nothing is
    /// known about the token.
    #[error(
        "this server cannot check access tokens yet: the identity provider's keys could not be \
         fetched; try again shortly"
    )]
    KeysUnavailable,
    /// The provider could not be asked about an opaque token now (it failed, or this server
    /// is asking it about as many tokens as it may at once): nothing is known about it.
    #[error("the identity provider could not check the access token now ({0}); try again shortly")]
    ProviderBusy(String),
}

/// Checks access tokens of one identity provider; cheap to clone (one key cache).
#[derive(Clone)]
pub struct Validator {
    inner: Arc<keys::Provider>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("issuer", &self.inner.config.issuer)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// A validator for `config`, its URLs checked; nothing is fetched until [`Self::start`].
    pub fn new(config: OAuthConfig) -> Result<Self, ConfigError> {
        check_url("oauth-issuer", &config.issuer)?;
        check_audience(&config.audience)?;
        if config.groups_claim.trim().is_empty() {
            return Err(ConfigError::EmptyGroupsClaim);
        }
        Ok(Self {
            inner: Arc::new(keys::Provider::new(config)),
        })
    }

    /// Fetches the provider's metadata and keys in the background, retrying (with a warning
    /// each time) until both are known, then the keys again every hour; returns at once.
    /// Needs a Tokio runtime.
    pub fn start(&self) {
        let provider = Arc::clone(&self.inner);
        tokio::spawn(async move { provider.keep_known().await });
    }

    /// Fetches the provider's metadata and keys now, once: for a start-up that wants to say
    /// whether the provider answered, and for tests.
    pub async fn discover(&self) -> Result<(), String> {
        self.inner.discover().await
    }

    /// The configuration.
    pub fn config(&self) -> &OAuthConfig {
        &self.inner.config
    }

    /// The provider's metadata, once fetched.
    pub fn metadata(&self) -> Option<Arc<ProviderMetadata>> {
        self.inner.metadata()
    }

    /// Checks `token` (the bearer value): its signature with the provider's keys, `iss`,
    /// `aud`, `exp`, `nbf`; answers who it names and what it allows. A token naming a key the
    /// cache lacks makes one fetch of the keys (at most one per [`KEY_REFRESH_INTERVAL`]).
    pub async fn validate(&self, token: &str) -> Result<Identity, TokenError> {
        token::validate(&self.inner, token).await
    }

    /// Checks an opaque `token` by asking the provider (RFC 7662 introspection,
    /// authenticating as `client`, which needs a secret): active, issued by the issuer for
    /// this server's audience, not expired. An answer is remembered as a validated JWT is
    /// (until `exp`, at most 5 minutes; an inactive token for a minute), and at most a few
    /// questions are asked at once, so a flood of made-up tokens cannot turn into one of
    /// requests to the provider.
    pub async fn introspect(
        &self,
        token: &str,
        client: &WebClient,
    ) -> Result<Identity, TokenError> {
        introspect::introspect(&self.inner, token, client).await
    }
}

/// Whether a bearer value has the shape of a JWT (three base64url parts): what tells an
/// access token from this server's own API tokens before anything is looked up.
pub fn looks_like_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    let shaped = |part: Option<&str>| {
        part.is_some_and(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
    };
    token.len() <= MAX_TOKEN_BYTES
        && shaped(parts.next())
        && shaped(parts.next())
        && shaped(parts.next())
        && parts.next().is_none()
}

/// An audience: this server's URL as [`check_url`] takes it, or any other identifier a
/// provider puts in `aud` (Entra ID's application id, an `api://` URI): one word.
fn check_audience(value: &str) -> Result<(), ConfigError> {
    let looks_like_web_url = value.starts_with("http://") || value.starts_with("https://");
    if looks_like_web_url {
        return check_url("oauth-audience", value);
    }
    if value.is_empty()
        || value.len() > 1024
        || value.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ConfigError::Url {
            setting: "oauth-audience",
            value: value.to_owned(),
            why: "it is empty, too long or holds spaces".to_owned(),
        });
    }
    Ok(())
}

/// An absolute `https://` URL, or `http://` on a loopback host.
fn check_url(setting: &'static str, value: &str) -> Result<(), ConfigError> {
    match url_problem(value) {
        None => Ok(()),
        Some(why) => Err(ConfigError::Url {
            setting,
            value: value.to_owned(),
            why,
        }),
    }
}

/// What makes `value` no absolute `https://` URL (or `http://` on loopback) without a
/// query or fragment; `None` when nothing does.
pub(crate) fn url_problem(value: &str) -> Option<String> {
    let url = match url::Url::parse(value) {
        Ok(url) => url,
        Err(error) => return Some(error.to_string()),
    };
    if url.fragment().is_some() || url.query().is_some() {
        return Some("it has a query or a fragment".to_owned());
    }
    match url.scheme() {
        "https" => None,
        "http" if is_loopback(&url) => None,
        "http" => Some("plain http:// is allowed only on a loopback address".to_owned()),
        other => Some(format!("the scheme {other:?} is not http(s)")),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a5_urls_must_be_https_or_loopback_http() {
        for good in [
            "https://id.example.org/realms/acme",
            "http://127.0.0.1:8080",
            "http://[::1]:9/x",
            "http://localhost:4000",
        ] {
            assert_eq!(check_url("oauth-issuer", good), Ok(()), "{good}");
        }
        for bad in [
            "http://id.example.org",
            "ftp://x",
            "id.example.org",
            "https://x/#f",
            "https://x/?q=1",
        ] {
            assert!(check_url("oauth-issuer", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a5_audiences_of_other_shapes() {
        assert!(check_audience("api://csg").is_ok());
        assert!(check_audience("3f2a0c1e-1111-2222-3333-444455556666").is_ok());
        assert!(check_audience("http://csg.example.org/sourcegraph/mcp").is_err());
        assert!(check_audience("a b").is_err());
        assert!(check_audience("").is_err());
    }

    #[test]
    fn a5_jwt_shape() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(
            looks_like_jwt("eyJh.eyJz."),
            "an unsigned token is still JWT-shaped"
        );
        assert!(!looks_like_jwt("csg_0123456789abcdef"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b+.c"));
    }
}
