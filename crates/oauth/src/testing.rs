//! A real identity provider's two documents, served on 127.0.0.1 for tests (feature
//! `testing`): the authorization-server metadata and the key set, with ES256 and Ed25519
//! keys made at start, and tokens signed with them (or with keys it does not publish).
//! Enough to test a resource server's validation without a full provider; the end-to-end
//! tests run a certified one (`scripts/oidc.sh`).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_ED25519};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Which key signs a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// The published ES256 key.
    Es256,
    /// The published Ed25519 key.
    EdDsa,
    /// An ES256 key the provider does not publish (its `kid` is unknown).
    Unpublished,
}

struct Keys {
    es256: KeyPair,
    eddsa: KeyPair,
    unpublished: KeyPair,
    /// Bumped by [`TestProvider::rotate`]: the published keys' ids end with it.
    generation: u64,
}

struct Shared {
    issuer: String,
    keys: Mutex<Keys>,
    key_set_fetches: AtomicU64,
    /// Opaque tokens it issued, with their introspection answers.
    opaque: Mutex<std::collections::HashMap<String, Value>>,
    introspections: AtomicU64,
}

/// The client id the provider's introspection takes (with [`CLIENT_SECRET`]).
pub const CLIENT_ID: &str = "csg-website";
/// The secret of [`CLIENT_ID`].
pub const CLIENT_SECRET: &str = "test-secret";

/// The provider: its issuer URL, its keys, and how often its key set was fetched.
pub struct TestProvider {
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn key_pair(alg: &'static rcgen::SignatureAlgorithm) -> KeyPair {
    KeyPair::generate_for(alg).unwrap_or_else(|e| panic!("a test key: {e}"))
}

impl TestProvider {
    /// Starts one on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let issuer = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            issuer,
            keys: Mutex::new(Keys {
                es256: key_pair(&PKCS_ECDSA_P256_SHA256),
                eddsa: key_pair(&PKCS_ED25519),
                unpublished: key_pair(&PKCS_ECDSA_P256_SHA256),
                generation: 0,
            }),
            key_set_fetches: AtomicU64::new(0),
            opaque: Mutex::new(std::collections::HashMap::new()),
            introspections: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/jwks", get(key_set))
            .route("/introspect", axum::routing::post(introspect))
            .with_state(Arc::clone(&shared));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { shared, server })
    }

    /// Its issuer identifier (`http://127.0.0.1:PORT`).
    pub fn issuer(&self) -> &str {
        &self.shared.issuer
    }

    /// How many times its key set was fetched.
    pub fn key_set_fetches(&self) -> u64 {
        self.shared.key_set_fetches.load(Ordering::Relaxed)
    }

    /// How many times its introspection was asked.
    pub fn introspections(&self) -> u64 {
        self.shared.introspections.load(Ordering::Relaxed)
    }

    /// An opaque access token whose introspection answers `claims` with `"active": true`.
    pub fn opaque(&self, claims: &Value) -> String {
        let mut bytes = [0u8; 24];
        getrandom::fill(&mut bytes).unwrap_or_else(|e| panic!("randomness: {e}"));
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut answer = claims.clone();
        answer["active"] = Value::Bool(true);
        self.shared
            .opaque
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), answer);
        token
    }

    /// Replaces the published ES256 key with a new one under a new `kid` (a key rotation).
    pub fn rotate(&self) {
        let mut keys = self
            .shared
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        keys.es256 = key_pair(&PKCS_ECDSA_P256_SHA256);
        keys.generation += 1;
    }

    /// `claims` signed by `signer`, with its `kid`.
    pub fn sign(&self, signer: Signer, claims: &Value) -> String {
        let keys = self
            .shared
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (alg, pair, kid) = match signer {
            Signer::Es256 => (Algorithm::ES256, &keys.es256, es256_id(keys.generation)),
            Signer::EdDsa => (Algorithm::EdDSA, &keys.eddsa, "ed-1".to_owned()),
            Signer::Unpublished => (Algorithm::ES256, &keys.unpublished, "nobody".to_owned()),
        };
        let key = match alg {
            Algorithm::EdDSA => EncodingKey::from_ed_der(&pair.serialize_der()),
            _ => EncodingKey::from_ec_der(&pair.serialize_der()),
        };
        let mut header = Header::new(alg);
        header.kid = Some(kid);
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, claims, &key).unwrap_or_else(|e| panic!("signing: {e}"))
    }

    /// The claims of a valid access token for `audience`: `sub`, `scope`, `groups`, a
    /// validity of ten minutes from now.
    pub fn claims(&self, audience: &str, sub: &str, scope: &str, groups: &[&str]) -> Value {
        let now = now();
        json!({
            "iss": self.issuer(), "aud": audience, "sub": sub, "scope": scope,
            "groups": groups, "iat": now, "nbf": now, "exp": now + 600,
            "client_id": "test-client",
        })
    }
}

/// Seconds since the epoch now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn es256_id(generation: u64) -> String {
    format!("ec-{generation}")
}

async fn metadata(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    let issuer = &shared.issuer;
    axum::Json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/jwks"),
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "introspection_endpoint": format!("{issuer}/introspect"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn key_set(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    shared.key_set_fetches.fetch_add(1, Ordering::Relaxed);
    let keys = shared.keys.lock().unwrap_or_else(PoisonError::into_inner);
    let ec = keys.es256.public_key_raw();
    // An uncompressed P-256 point: 0x04, then x and y of 32 bytes each.
    let (x, y) = ec.get(1..).unwrap_or_default().split_at(32);
    axum::Json(json!({"keys": [
        {"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
         "kid": es256_id(keys.generation),
         "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)},
        {"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": "ed-1",
         "x": URL_SAFE_NO_PAD.encode(keys.eddsa.public_key_raw())},
        // A symmetric key is never used, even when a token names it.
        {"kty": "oct", "kid": "shared", "k": URL_SAFE_NO_PAD.encode(b"a published secret")},
    ]}))
}

/// RFC 7662: the answer for a token it issued, `{"active": false}` for any other; 401 to a
/// caller without the client's basic credentials.
async fn introspect(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    shared.introspections.fetch_add(1, Ordering::Relaxed);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    let authorized = headers
        .get(axum::http::header::AUTHORIZATION)
        .is_some_and(|value| value.as_bytes() == expected.as_bytes());
    if !authorized {
        return axum::http::StatusCode::UNAUTHORIZED.into_response();
    }
    let answer = form
        .get("token")
        .and_then(|token| {
            shared
                .opaque
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(token)
                .cloned()
        })
        .unwrap_or_else(|| json!({"active": false}));
    axum::Json(answer).into_response()
}
