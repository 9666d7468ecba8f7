//! Opaque access tokens (RFC 7662 introspection; the issue calls it optional): the provider
//! is asked whether a token is active and what it grants, as a confidential client (the
//! website's). Every answer is remembered (an active token with the validated JWTs, until
//! its `exp` and at most 5 minutes; an inactive one for [`REFUSED_FOR`]) and only
//! [`AT_ONCE`] questions are in flight, so the provider sees at most a trickle of requests
//! however many made-up tokens arrive (the transport's wrong-token limiter slows each
//! address too).

use crate::keys::Provider;
use crate::token::{Checked, identity, names_audience, unix_now};
use crate::{Identity, LEEWAY, TokenError, WebClient};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The longest opaque token looked at; printable ASCII only.
const MAX_OPAQUE_BYTES: usize = 4096;
/// How long a token the provider called inactive is refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(60);
/// The most inactive tokens remembered.
const REFUSED_MAX: usize = 4096;
/// Questions to the provider in flight at once; a further token waits for none of them.
const AT_ONCE: usize = 4;

/// The provider's recent "not active" answers and the slots of questions in flight.
pub(crate) struct Introspection {
    refused: Mutex<HashMap<[u8; 32], Instant>>,
    slots: tokio::sync::Semaphore,
}

impl Default for Introspection {
    fn default() -> Self {
        Self {
            refused: Mutex::new(HashMap::new()),
            slots: tokio::sync::Semaphore::new(AT_ONCE),
        }
    }
}

impl Introspection {
    fn refused_lately(&self, key: &[u8; 32]) -> bool {
        let refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused
            .get(key)
            .is_some_and(|until| Instant::now() < *until)
    }

    fn refuse(&self, key: [u8; 32]) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.len() >= REFUSED_MAX {
            let now = Instant::now();
            refused.retain(|_, until| *until > now);
            if refused.len() >= REFUSED_MAX {
                refused.clear();
            }
        }
        refused.insert(key, Instant::now() + REFUSED_FOR);
    }
}

pub(crate) async fn introspect(
    provider: &Provider,
    token: &str,
    client: &WebClient,
) -> Result<Identity, TokenError> {
    let invalid = |why: &str| TokenError::Invalid(why.to_owned());
    if token.is_empty()
        || token.len() > MAX_OPAQUE_BYTES
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(invalid("it is not an access token this server can check"));
    }
    let Some(secret) = &client.secret else {
        return Err(invalid(
            "it is not a JWT, and this server checks opaque tokens only with a client secret \
             (CSG_OAUTH_CLIENT_SECRET) to ask the identity provider with",
        ));
    };
    let key = Checked::key(token);
    if let Some(identity) = provider.checked.get(&key) {
        return Ok(identity);
    }
    let state = &provider.introspection;
    if state.refused_lately(&key) {
        return Err(inactive());
    }
    let metadata = provider.metadata().ok_or(TokenError::KeysUnavailable)?;
    let Some(endpoint) = metadata.introspection_endpoint.as_deref() else {
        return Err(invalid(
            "it is not a JWT, and the identity provider offers no introspection to check it \
             with; configure JWT access tokens",
        ));
    };
    let Ok(_slot) = state.slots.try_acquire() else {
        return Err(TokenError::ProviderBusy(
            "too many tokens are being checked at once".to_owned(),
        ));
    };
    let form = [("token", token), ("token_type_hint", "access_token")];
    let answer = crate::fetch::post_form(endpoint, &form, Some((&client.id, secret)))
        .await
        .map_err(|why| {
            tracing::warn!(error = %why, "the identity provider's introspection failed");
            TokenError::ProviderBusy("its introspection did not answer".to_owned())
        })?;
    let Value::Object(claims) = answer else {
        return Err(TokenError::ProviderBusy(
            "its introspection answered something else than an object".to_owned(),
        ));
    };
    if claims.get("active") != Some(&Value::Bool(true)) {
        state.refuse(key);
        return Err(inactive());
    }
    let config = &provider.config;
    if let Some(issuer) = claims.get("iss").and_then(Value::as_str)
        && issuer.trim_end_matches('/') != config.issuer.trim_end_matches('/')
    {
        state.refuse(key);
        return Err(TokenError::Invalid(format!(
            "it was not issued by {}",
            config.issuer
        )));
    }
    if !names_audience(claims.get("aud"), &config.audience) {
        state.refuse(key);
        return Err(TokenError::Invalid(format!(
            "it was issued for another resource, not {} (RFC 8707 audience)",
            config.audience
        )));
    }
    let expires = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
    if expires.saturating_add(LEEWAY.as_secs()) < unix_now() {
        state.refuse(key);
        return Err(invalid("it has expired"));
    }
    let identity = identity(&config.groups_claim, claims)?;
    provider.checked.keep(key, &identity);
    Ok(identity)
}

fn inactive() -> TokenError {
    TokenError::Invalid(
        "the identity provider says it is not active (expired, revoked or not one of its \
         tokens)"
            .to_owned(),
    )
}
