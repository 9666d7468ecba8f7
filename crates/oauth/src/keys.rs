//! The provider's metadata and signing keys as this process knows them: fetched at start
//! (retried while the provider is unreachable) and again when a token names a key id the
//! cache lacks, at most once per [`KEY_REFRESH_INTERVAL`]. Readers take a snapshot (an `Arc`
//! behind a lock held only to clone or swap it), so a validation never waits on a fetch.

use crate::metadata::{self, ProviderMetadata};
use crate::{KEY_REFRESH_INTERVAL, OAuthConfig};
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// How often the key set is fetched again once known.
const KEY_SET_REFRESH: Duration = Duration::from_secs(3600);
/// The longest wait between two attempts while the provider is unreachable.
const MAX_RETRY: Duration = Duration::from_secs(60);
/// The most keys kept of one key set: a provider publishes a handful.
const MAX_KEYS: usize = 64;

/// The kind of key an algorithm verifies with (jsonwebtoken keeps its own private).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlgorithmFamily {
    Rsa,
    Ec,
    Ed,
}

impl AlgorithmFamily {
    /// The family of `alg`; `None` for HMAC, which is never accepted.
    pub(crate) fn of(alg: jsonwebtoken::Algorithm) -> Option<Self> {
        use jsonwebtoken::Algorithm::*;
        match alg {
            RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => Some(Self::Rsa),
            ES256 | ES384 => Some(Self::Ec),
            EdDSA => Some(Self::Ed),
            HS256 | HS384 | HS512 => None,
        }
    }
}

/// One verification key.
pub(crate) struct Key {
    /// Its `kid`, if the key set names one.
    pub(crate) id: Option<String>,
    /// RSA, EC or OKP (Ed25519).
    pub(crate) family: AlgorithmFamily,
    pub(crate) key: DecodingKey,
}

/// What is known of the provider at one moment.
pub(crate) struct Known {
    pub(crate) metadata: Arc<ProviderMetadata>,
    pub(crate) keys: Vec<Key>,
}

/// One identity provider: its configuration and what this process knows of it.
pub(crate) struct Provider {
    pub(crate) config: OAuthConfig,
    known: RwLock<Option<Arc<Known>>>,
    /// When the keys were last fetched for an unknown key id; held across that fetch, so
    /// concurrent tokens naming unknown keys make one fetch, not one each.
    refreshed: tokio::sync::Mutex<Option<Instant>>,
    /// Tokens checked lately.
    pub(crate) checked: crate::token::Checked,
    /// Opaque tokens the provider said were not active, lately, and the questions asked at
    /// once.
    pub(crate) introspection: crate::introspect::Introspection,
}

impl Provider {
    pub(crate) fn new(config: OAuthConfig) -> Self {
        Self {
            config,
            known: RwLock::new(None),
            refreshed: tokio::sync::Mutex::new(None),
            checked: crate::token::Checked::default(),
            introspection: crate::introspect::Introspection::default(),
        }
    }

    /// The snapshot, if the provider was ever reached.
    pub(crate) fn known(&self) -> Option<Arc<Known>> {
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn metadata(&self) -> Option<Arc<ProviderMetadata>> {
        self.known().map(|known| Arc::clone(&known.metadata))
    }

    /// Fetches the metadata and the keys once and keeps them.
    pub(crate) async fn discover(&self) -> Result<(), String> {
        let metadata = metadata::fetch(&self.config.issuer).await?;
        let keys = fetch_keys(&metadata.jwks_uri).await?;
        self.keep(Known {
            metadata: Arc::new(metadata),
            keys,
        });
        Ok(())
    }

    /// [`Self::discover`] until it succeeds, waiting longer between attempts (up to a
    /// minute; each failure is a warning), then the keys again every [`KEY_SET_REFRESH`]: a
    /// key the provider withdraws stops being trusted then, even if no token ever names a
    /// new one. Runs for the life of the process.
    pub(crate) async fn keep_known(&self) {
        let mut wait = Duration::from_secs(1);
        loop {
            match self.discover().await {
                Ok(()) => {
                    tracing::info!(issuer = %self.config.issuer, "the identity provider's keys are loaded");
                    break;
                }
                Err(why) => tracing::warn!(
                    issuer = %self.config.issuer,
                    error = %why,
                    retry_in = ?wait,
                    "the identity provider could not be reached; OAuth access tokens are refused \
                     until it is"
                ),
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_RETRY);
        }
        loop {
            tokio::time::sleep(KEY_SET_REFRESH).await;
            self.fetch_keys_again().await;
        }
    }

    /// The key set fetched again and kept; a failure keeps the keys known (a warning).
    async fn fetch_keys_again(&self) {
        let Some(metadata) = self.metadata() else {
            return;
        };
        match fetch_keys(&metadata.jwks_uri).await {
            Ok(keys) => self.keep(Known { metadata, keys }),
            Err(why) => tracing::warn!(
                issuer = %self.config.issuer,
                error = %why,
                "the identity provider's keys could not be fetched again; the known ones stay"
            ),
        }
    }

    /// Fetches the keys again for a token naming an unknown key id, unless that was done
    /// less than [`KEY_REFRESH_INTERVAL`] ago; answers the snapshot to look in. Concurrent
    /// callers wait for the one fetch (bounded by the fetch's own timeout, 5 s).
    pub(crate) async fn refresh_for_unknown_key(&self) -> Option<Arc<Known>> {
        let mut refreshed = self.refreshed.lock().await;
        if refreshed.is_none_or(|at| at.elapsed() >= KEY_REFRESH_INTERVAL) {
            *refreshed = Some(Instant::now());
            self.fetch_keys_again().await;
        }
        self.known()
    }

    fn keep(&self, known: Known) {
        *self.known.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(known));
    }
}

/// The signature keys of the key set at `url`: RSA, EC and Ed25519 keys not meant only for
/// encryption; symmetric (`oct`) keys never, so an HMAC token cannot be verified with a
/// published secret.
async fn fetch_keys(url: &str) -> Result<Vec<Key>, String> {
    let document = crate::fetch::json(url).await?;
    let set: JwkSet = serde_json::from_value(document)
        .map_err(|e| format!("{url} is not a JSON Web Key Set: {e}"))?;
    let mut keys = Vec::new();
    for jwk in set.keys.iter().take(MAX_KEYS) {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let family = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
            AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
            AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
            AlgorithmParameters::OctetKey(_) => continue,
        };
        match DecodingKey::from_jwk(jwk) {
            Ok(key) => keys.push(Key {
                id: jwk.common.key_id.clone(),
                family,
                key,
            }),
            Err(error) => tracing::warn!(
                kid = ?jwk.common.key_id,
                %error,
                "a key of the identity provider's key set is skipped"
            ),
        }
    }
    if keys.is_empty() {
        return Err(format!("{url} holds no signature key this server can use"));
    }
    Ok(keys)
}
