//! The website's sign-in through the identity provider (A-6; OpenID Connect Core's
//! authorization code flow with PKCE, RFC 7636, and a resource indicator, RFC 8707): the URL
//! a browser is sent to, and the exchange of the code it comes back with for an ID token
//! (who signed in: `nonce` and `aud` checked) and an access token for this server's resource
//! (what they may do: the same [`Identity`] an MCP client's token gives).
//!
//! Nothing is kept on the server between the two steps: the [`Pending`] sign-in (`state`,
//! `nonce`, the PKCE verifier) lives in the visitor's cookie, so the callback may land on any
//! replica.

use crate::token::{self, Identity};
use crate::{SCOPE_READ, TokenError, Validator};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// The website's own client at the provider.
#[derive(Clone, PartialEq, Eq)]
pub struct WebClient {
    /// Its client id.
    pub id: String,
    /// Its secret (a confidential client: HTTP basic authentication at the token endpoint);
    /// `None`: a public client, PKCE alone.
    pub secret: Option<String>,
}

impl std::fmt::Debug for WebClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebClient")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A sign-in under way: what the callback must find again.
#[derive(Clone, PartialEq, Eq)]
pub struct Pending {
    /// The `state` (CSRF protection of the callback).
    pub state: String,
    /// The `nonce` the ID token must carry (replay protection).
    pub nonce: String,
    /// The PKCE code verifier.
    pub verifier: String,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending(<redacted>)")
    }
}

/// Why a sign-in through the provider failed; the messages are for the visitor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// The provider's metadata is not known yet, or it names no endpoint for this.
    #[error(
        "signing in through the identity provider is not possible right now (its metadata \
         could not be fetched, or it offers no authorization code flow); try again shortly or \
         sign in with an API token"
    )]
    NotReady,
    /// The callback does not belong to the sign-in this browser started (or it expired).
    #[error(
        "this sign-in answer does not belong to a sign-in started in this browser (or it took \
         longer than 10 minutes); start again"
    )]
    Mismatch,
    /// The provider refused or failed.
    #[error("the identity provider refused the sign-in: {0}")]
    Provider(String),
    /// A token the provider answered did not check out (the detail is in the log).
    #[error("the identity provider's answer was refused: {0}")]
    Invalid(String),
}

/// 32 random bytes, base64url: a `state`, a `nonce`, a PKCE verifier (43 characters, as RFC
/// 7636 §4.1 asks at least).
fn random() -> Result<String, SignInError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|_| SignInError::NotReady)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

impl Pending {
    /// A new sign-in's secrets.
    pub fn new() -> Result<Self, SignInError> {
        Ok(Self {
            state: random()?,
            nonce: random()?,
            verifier: random()?,
        })
    }

    /// The cookie value that keeps it.
    pub fn to_cookie(&self) -> String {
        format!("{}.{}.{}", self.state, self.nonce, self.verifier)
    }

    /// A cookie value [`Pending::to_cookie`] made; `None` for anything else.
    pub fn from_cookie(value: &str) -> Option<Self> {
        let mut parts = value.split('.');
        let mut next = || {
            parts
                .next()
                .filter(|p| {
                    p.len() == 43
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
                .map(str::to_owned)
        };
        let pending = Self {
            state: next()?,
            nonce: next()?,
            verifier: next()?,
        };
        parts.next().is_none().then_some(pending)
    }
}

impl Validator {
    /// Where to send a browser to sign in as `client`, coming back to `redirect_uri`.
    pub fn authorization_url(
        &self,
        client: &WebClient,
        redirect_uri: &str,
        pending: &Pending,
    ) -> Result<String, SignInError> {
        let metadata = self.metadata().ok_or(SignInError::NotReady)?;
        let endpoint = metadata
            .authorization_endpoint
            .as_deref()
            .ok_or(SignInError::NotReady)?;
        let mut url = url::Url::parse(endpoint).map_err(|_| SignInError::NotReady)?;
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &format!("openid profile {SCOPE_READ}"))
            .append_pair("state", &pending.state)
            .append_pair("nonce", &pending.nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &self.config().audience);
        Ok(url.into())
    }

    /// Exchanges the `code` of a callback for tokens and answers who signed in: the ID
    /// token's subject (its `aud` the client, its `nonce` the pending one's), with the scopes
    /// and groups of the access token for this server's resource.
    pub async fn finish_sign_in(
        &self,
        client: &WebClient,
        redirect_uri: &str,
        code: &str,
        pending: &Pending,
    ) -> Result<Identity, SignInError> {
        let metadata = self.metadata().ok_or(SignInError::NotReady)?;
        let endpoint = metadata
            .token_endpoint
            .as_deref()
            .ok_or(SignInError::NotReady)?;
        let resource = self.config().audience.clone();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pending.verifier.as_str()),
            ("resource", resource.as_str()),
        ];
        let basic = match &client.secret {
            Some(secret) => Some((client.id.as_str(), secret.as_str())),
            None => {
                form.push(("client_id", client.id.as_str()));
                None
            }
        };
        let answer = crate::fetch::post_form(endpoint, &form, basic)
            .await
            .map_err(|why| {
                tracing::warn!(error = %why, "the identity provider's token endpoint refused a sign-in");
                SignInError::Provider(
                    "it did not accept this sign-in's code; start again, and if it fails again \
                     ask the administrator to check the website's client at the provider"
                        .to_owned(),
                )
            })?;
        let field = |name: &str| {
            answer
                .get(name)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| SignInError::Invalid(format!("it has no {name}")))
        };
        let (id_token, access_token) = (field("id_token")?, field("access_token")?);
        // The detail is for the operator (a wrong audience, say): the visitor learns which
        // token did not check out and whom to ask.
        let refused = |what: &str, error: TokenError| {
            tracing::warn!(%error, "a sign-in's {what} was refused");
            SignInError::Invalid(format!(
                "{what} did not check out; ask the administrator to check the server log"
            ))
        };
        let claims = token::verified_claims(&self.inner, &id_token, &client.id)
            .await
            .map_err(|e| refused("the ID token", e))?;
        if claims.get("nonce").and_then(serde_json::Value::as_str) != Some(pending.nonce.as_str()) {
            return Err(SignInError::Invalid(
                "the ID token's nonce is not this sign-in's".to_owned(),
            ));
        }
        let identity = self
            .validate(&access_token)
            .await
            .map_err(|e| refused("the access token", e))?;
        if claims.get("sub").and_then(serde_json::Value::as_str) != Some(identity.subject.as_str())
        {
            return Err(SignInError::Invalid(
                "the ID token and the access token name different users".to_owned(),
            ));
        }
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a6_a_pending_sign_in_round_trips_through_its_cookie_and_nothing_else_does() {
        let pending = Pending::new().unwrap();
        assert_eq!(
            Pending::from_cookie(&pending.to_cookie()),
            Some(pending.clone())
        );
        assert_ne!(pending.state, pending.nonce);
        for forged in ["", "a.b.c", &format!("{}.x", pending.to_cookie()), "...."] {
            assert_eq!(Pending::from_cookie(forged), None, "{forged}");
        }
    }
}
