//! Access-token validation (OAuth 2.1 §5.2, RFC 9068, RFC 8707): a JWS signed with one of
//! the provider's asymmetric keys (`none` and HMAC never), issued by the configured issuer
//! for this server's audience, within its validity (with [`LEEWAY`]).

use crate::keys::{AlgorithmFamily, Known, Provider};
use crate::{LEEWAY, MAX_TOKEN_BYTES, TokenError};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most groups (and scopes) taken from one token; the rest are ignored.
const MAX_ITEMS: usize = 256;
/// The longest group or scope name taken; longer ones are ignored.
const MAX_ITEM_BYTES: usize = 256;

/// Who a valid access token names and what it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The `sub` claim: the user at the provider.
    pub subject: String,
    /// The scopes granted (`scope`, space-separated; or `scp`, as Entra ID and Okta put it).
    pub scopes: Vec<String>,
    /// The groups of the configured claim.
    pub groups: Vec<String>,
    /// `exp`, in seconds since the epoch.
    pub expires: u64,
}

impl Identity {
    /// Whether the token grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

pub(crate) async fn validate(provider: &Provider, token: &str) -> Result<Identity, TokenError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(TokenError::Invalid(
            "it is longer than any access token this server accepts".to_owned(),
        ));
    }
    let key = Checked::key(token);
    if let Some(identity) = provider.checked.get(&key) {
        return Ok(identity);
    }
    let claims = verified_claims(provider, token, &provider.config.audience).await?;
    let identity = identity(&provider.config.groups_claim, claims)?;
    provider.checked.keep(key, &identity);
    Ok(identity)
}

/// Tokens checked lately, by their SHA-256, with what they named: a client presents one
/// token for many calls, and a signature check costs tens of microseconds where a look-up
/// here costs one. Kept until the token expires, at most [`CHECKED_FOR`]; never a refused
/// token (a forged one costs its check every time, as the wrong-token limiter intends).
#[derive(Default)]
pub(crate) struct Checked {
    tokens: std::sync::Mutex<HashMap<[u8; 32], (Identity, Instant)>>,
}

/// The longest a checked token is believed without checking it again, whatever its `exp`:
/// once the hourly fetch of the key set drops a key the provider withdrew, tokens it signed
/// stop being believed within this.
const CHECKED_FOR: Duration = Duration::from_secs(300);
/// The most tokens remembered.
const CHECKED_MAX: usize = 4096;

impl Checked {
    pub(crate) fn key(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Identity, Instant)>> {
        self.tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(&self, key: &[u8; 32]) -> Option<Identity> {
        let mut tokens = self.lock();
        match tokens.get(key) {
            Some((identity, until)) if Instant::now() < *until => Some(identity.clone()),
            Some(_) => {
                tokens.remove(key);
                None
            }
            None => None,
        }
    }

    pub(crate) fn keep(&self, key: [u8; 32], identity: &Identity) {
        let left = identity
            .expires
            .saturating_sub(unix_now())
            .min(CHECKED_FOR.as_secs());
        let until = Instant::now() + Duration::from_secs(left);
        let mut tokens = self.lock();
        if tokens.len() >= CHECKED_MAX {
            let now = Instant::now();
            tokens.retain(|_, (_, until)| *until > now);
            if tokens.len() >= CHECKED_MAX {
                tokens.clear();
            }
        }
        tokens.insert(key, (identity.clone(), until));
    }
}

/// The claims of `token`, a JWS of the provider for `audience`, verified (signature, `iss`,
/// `aud`, `exp`, `nbf`, a `sub`): an access token for this server, or an ID token for the
/// website's client.
pub(crate) async fn verified_claims(
    provider: &Provider,
    token: &str,
    audience: &str,
) -> Result<Map<String, Value>, TokenError> {
    let invalid = |why: &str| TokenError::Invalid(why.to_owned());
    if token.len() > MAX_TOKEN_BYTES {
        return Err(invalid(
            "it is longer than any access token this server accepts",
        ));
    }
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| invalid("it is not a signed JWT with an asymmetric algorithm"))?;
    let Some(family) = AlgorithmFamily::of(header.alg) else {
        return Err(invalid(
            "its algorithm is not accepted (RS*, PS*, ES256, ES384 or EdDSA only)",
        ));
    };
    let known = provider.known().ok_or(TokenError::KeysUnavailable)?;
    let known = match &header.kid {
        Some(kid) if !known.keys.iter().any(|key| key.id.as_deref() == Some(kid)) => provider
            .refresh_for_unknown_key()
            .await
            .ok_or(TokenError::KeysUnavailable)?,
        _ => known,
    };
    verify(
        provider,
        &known,
        token,
        (header.alg, family, audience),
        header.kid.as_deref(),
    )
}

/// The claims of `token`, verified with the matching key of `known`.
fn verify(
    provider: &Provider,
    known: &Arc<Known>,
    token: &str,
    (alg, family, audience): (Algorithm, AlgorithmFamily, &str),
    kid: Option<&str>,
) -> Result<Map<String, Value>, TokenError> {
    let mut candidates = known
        .keys
        .iter()
        .filter(|key| key.family == family && (kid.is_none() || key.id.as_deref() == kid))
        .peekable();
    if candidates.peek().is_none() {
        return Err(TokenError::Invalid(
            "it was signed with a key the identity provider does not publish".to_owned(),
        ));
    }
    let config = &provider.config;
    let mut validation = Validation::new(alg);
    validation.leeway = LEEWAY.as_secs();
    validation.validate_nbf = true;
    let issuer = config.issuer.trim_end_matches('/');
    validation.set_issuer(&[issuer.to_owned(), format!("{issuer}/")]);
    // The audience is checked below: a client that names the resource with the query of the
    // URL it calls (`…/sourcegraph/mcp?plugins=auto`) asked for this resource all the same.
    validation.validate_aud = false;
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let mut last = None;
    for key in candidates {
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
            Ok(data) if names_audience(data.claims.get("aud"), audience) => return Ok(data.claims),
            Ok(_) => {
                last = Some(jsonwebtoken::errors::Error::from(
                    jsonwebtoken::errors::ErrorKind::InvalidAudience,
                ));
                break;
            }
            Err(error) => last = Some(error),
        }
    }
    Err(TokenError::Invalid(match last.as_ref().map(|e| e.kind()) {
        Some(jsonwebtoken::errors::ErrorKind::ExpiredSignature) => "it has expired".to_owned(),
        Some(jsonwebtoken::errors::ErrorKind::ImmatureSignature) => {
            "it is not valid yet (nbf)".to_owned()
        }
        Some(jsonwebtoken::errors::ErrorKind::InvalidAudience) => {
            format!("it was issued for another resource, not {audience} (RFC 8707 audience)")
        }
        Some(jsonwebtoken::errors::ErrorKind::InvalidIssuer) => {
            format!("it was not issued by {}", config.issuer)
        }
        Some(jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(claim)) => {
            format!("it has no {claim:?} claim")
        }
        Some(jsonwebtoken::errors::ErrorKind::InvalidSignature) => {
            "its signature does not verify".to_owned()
        }
        _ => "it is not a valid access token of this server's identity provider".to_owned(),
    }))
}

/// Seconds since the epoch now.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether the `aud` claim (a string or an array of them) names `audience`: exactly, or
/// with a query after it (RFC 8707 discourages one, and some clients send the URL they call).
pub(crate) fn names_audience(claim: Option<&Value>, audience: &str) -> bool {
    let names = |value: &str| {
        value == audience
            || value
                .strip_prefix(audience)
                .is_some_and(|rest| rest.starts_with('?'))
    };
    match claim {
        Some(Value::String(value)) => names(value),
        Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).any(names),
        _ => false,
    }
}

/// The identity the verified `claims` name.
pub(crate) fn identity(
    groups_claim: &str,
    claims: Map<String, Value>,
) -> Result<Identity, TokenError> {
    let subject = match claims.get("sub") {
        Some(Value::String(sub)) if !sub.is_empty() && sub.len() <= MAX_ITEM_BYTES => sub.clone(),
        _ => {
            return Err(TokenError::Invalid(
                "its \"sub\" claim is not a short string".to_owned(),
            ));
        }
    };
    let mut scopes = names(claims.get("scope"));
    scopes.extend(names(claims.get("scp")));
    Ok(Identity {
        subject,
        scopes,
        groups: names(claims.get(groups_claim)),
        expires: claims.get("exp").and_then(Value::as_u64).unwrap_or(0),
    })
}

/// A claim that lists names: an array of strings, or one string of space-separated names.
/// Bounded: at most [`MAX_ITEMS`] names of at most [`MAX_ITEM_BYTES`] each.
fn names(claim: Option<&Value>) -> Vec<String> {
    // Control characters never: the names are stored one a line and shown on pages.
    let fits = |name: &&str| {
        !name.is_empty() && name.len() <= MAX_ITEM_BYTES && !name.chars().any(char::is_control)
    };
    match claim {
        Some(Value::String(text)) => text
            .split_ascii_whitespace()
            .filter(fits)
            .take(MAX_ITEMS)
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter(fits)
            .take(MAX_ITEMS)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a5_scopes_and_groups_of_either_shape() {
        let claims = json!({
            "sub": "alice", "scope": "csg:read  openid", "scp": ["csg:prepare"],
            "roles": ["eng", 7, "", "ops", "two\nlines"], "exp": 9
        });
        let Value::Object(claims) = claims else {
            unreachable!()
        };
        let id = identity("roles", claims).unwrap();
        assert_eq!(id.scopes, ["csg:read", "openid", "csg:prepare"]);
        assert_eq!(id.groups, ["eng", "ops"]);
        assert!(id.has_scope("csg:prepare"));
        assert_eq!(id.expires, 9);
    }

    #[test]
    fn a5_audience_exactly_or_with_a_query() {
        let mcp = "https://csg.example.org/sourcegraph/mcp";
        for (aud, expected) in [
            (json!(mcp), true),
            (json!(format!("{mcp}?plugins=auto")), true),
            (json!(["https://other.example", mcp]), true),
            (json!(format!("{mcp}x")), false),
            (json!(format!("{mcp}/admin")), false),
            (json!("https://csg.example.org/sourcegraph"), false),
            (json!([]), false),
            (json!(7), false),
        ] {
            assert_eq!(names_audience(Some(&aud), mcp), expected, "{aud}");
        }
        assert!(!names_audience(None, mcp));
    }

    #[test]
    fn a5_a_token_without_a_subject_is_refused() {
        let Value::Object(claims) = json!({"sub": ""}) else {
            unreachable!()
        };
        assert!(identity("groups", claims).is_err());
        let many: Vec<String> = (0..1000).map(|i| format!("g{i}")).collect();
        let Value::Object(claims) = json!({"sub": "a", "groups": many}) else {
            unreachable!()
        };
        assert_eq!(identity("groups", claims).unwrap().groups.len(), MAX_ITEMS);
    }
}
