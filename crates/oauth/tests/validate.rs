//! A-5 (issue 44): access tokens checked against a real key set served on 127.0.0.1.

use oauth::testing::{Signer, TestProvider, now};
use oauth::{OAuthConfig, TokenError, Validator};
use serde_json::json;
use std::time::Duration;

const AUDIENCE: &str = "http://127.0.0.1:1/sourcegraph/mcp";

async fn started() -> (TestProvider, Validator) {
    let provider = TestProvider::start()
        .await
        .expect("the test provider starts");
    let validator = Validator::new(OAuthConfig {
        issuer: provider.issuer().to_owned(),
        audience: AUDIENCE.to_owned(),
        groups_claim: "groups".to_owned(),
    })
    .expect("a valid configuration");
    validator.discover().await.expect("discovery");
    (provider, validator)
}

fn refused(outcome: Result<oauth::Identity, TokenError>) -> String {
    match outcome {
        Err(TokenError::Invalid(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a5_valid_tokens_of_each_published_key_name_their_user_scopes_and_groups() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let (provider, validator) = started().await;
        for signer in [Signer::Es256, Signer::EdDsa] {
            let claims = provider.claims(AUDIENCE, "alice", "csg:read openid", &["eng"]);
            let identity = validator
                .validate(&provider.sign(signer, &claims))
                .await
                .unwrap();
            assert_eq!(identity.subject, "alice");
            assert!(identity.has_scope("csg:read"));
            assert!(!identity.has_scope("csg:prepare"));
            assert_eq!(identity.groups, ["eng"]);
        }
        // An audience list holding this server's resource is fine too.
        let mut claims = provider.claims(AUDIENCE, "bob", "csg:read", &[]);
        claims["aud"] = json!(["https://other.example", AUDIENCE]);
        assert!(
            validator
                .validate(&provider.sign(Signer::Es256, &claims))
                .await
                .is_ok()
        );
        // Only the discovery fetched the key set.
        assert_eq!(provider.key_set_fetches(), 1);
    })
    .await
    .expect("within 30 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a5_foreign_expired_early_and_misissued_tokens_are_refused() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let (provider, validator) = started().await;
        let sign = |claims: &serde_json::Value| provider.sign(Signer::Es256, claims);
        let base = provider.claims(AUDIENCE, "alice", "csg:read", &[]);

        let mut foreign = base.clone();
        foreign["aud"] = json!("https://another-resource.example/mcp");
        let why = refused(validator.validate(&sign(&foreign)).await);
        assert!(why.contains("another resource"), "{why}");

        let mut expired = base.clone();
        expired["exp"] = json!(now() - 120);
        assert!(refused(validator.validate(&sign(&expired)).await).contains("expired"));
        // Within the leeway it still counts.
        expired["exp"] = json!(now() - 30);
        assert!(validator.validate(&sign(&expired)).await.is_ok());

        let mut early = base.clone();
        early["nbf"] = json!(now() + 600);
        assert!(refused(validator.validate(&sign(&early)).await).contains("not valid yet"));

        let mut misissued = base.clone();
        misissued["iss"] = json!("https://impostor.example");
        assert!(refused(validator.validate(&sign(&misissued)).await).contains("not issued by"));

        let mut anonymous = base.clone();
        anonymous.as_object_mut().unwrap().remove("sub");
        assert!(refused(validator.validate(&sign(&anonymous)).await).contains("sub"));

        // A signature that does not verify: the payload changed after signing.
        let token = sign(&base);
        let mut parts: Vec<&str> = token.split('.').collect();
        let other = sign(&provider.claims(AUDIENCE, "mallory", "csg:read csg:prepare", &[]));
        parts[1] = other.split('.').nth(1).unwrap();
        assert!(refused(validator.validate(&parts.join(".")).await).contains("signature"));
    })
    .await
    .expect("within 30 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a5_unsigned_hmac_and_unpublished_keys_are_refused_and_unknown_key_ids_fetch_at_most_once()
{
    tokio::time::timeout(Duration::from_secs(30), async {
        let (provider, validator) = started().await;
        let claims = provider.claims(AUDIENCE, "alice", "csg:read", &[]);
        let encode = |value: &serde_json::Value| {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        // alg none: no signature at all.
        let none = format!(
            "{}.{}.",
            encode(&json!({"alg": "none", "typ": "JWT"})),
            encode(&claims)
        );
        assert!(refused(validator.validate(&none).await).contains("not a signed JWT"));
        // HS256 with the secret of the key set's symmetric key: never accepted.
        let key = jsonwebtoken::EncodingKey::from_secret(b"a published secret");
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("shared".to_owned());
        let hmac = jsonwebtoken::encode(&header, &claims, &key).unwrap();
        assert!(refused(validator.validate(&hmac).await).contains("algorithm"));
        // A key the provider does not publish: one fetch of the key set, then none for a
        // while however many such tokens come.
        let before = provider.key_set_fetches();
        for _ in 0..20 {
            let forged = provider.sign(Signer::Unpublished, &claims);
            assert!(refused(validator.validate(&forged).await).contains("does not publish"));
        }
        assert_eq!(provider.key_set_fetches(), before + 1);
        assert!(refused(validator.validate("x.y.z").await).contains("not a signed JWT"));
    })
    .await
    .expect("within 30 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a5_a_rotated_key_is_fetched_when_a_token_first_names_it() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let (provider, validator) = started().await;
        provider.rotate();
        let claims = provider.claims(AUDIENCE, "alice", "csg:read", &[]);
        let identity = validator
            .validate(&provider.sign(Signer::Es256, &claims))
            .await;
        assert_eq!(identity.map(|i| i.subject), Ok("alice".to_owned()));
        assert_eq!(provider.key_set_fetches(), 2);
    })
    .await
    .expect("within 30 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a5_while_the_provider_is_unreachable_tokens_are_unknown_not_invalid() {
    tokio::time::timeout(Duration::from_secs(60), async {
        // A port nobody listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let validator = Validator::new(OAuthConfig {
            issuer: format!("http://127.0.0.1:{port}"),
            audience: AUDIENCE.to_owned(),
            groups_claim: "groups".to_owned(),
        })
        .unwrap();
        let why = validator.discover().await.unwrap_err();
        assert!(why.contains(&port.to_string()), "{why}");
        validator.start();
        let provider = TestProvider::start().await.unwrap();
        let claims = provider.claims(AUDIENCE, "alice", "csg:read", &[]);
        let token = provider.sign(Signer::Es256, &claims);
        assert_eq!(
            validator.validate(&token).await,
            Err(TokenError::KeysUnavailable)
        );
    })
    .await
    .expect("within 60 s");
}

fn web_client(secret: Option<&str>) -> oauth::WebClient {
    oauth::WebClient {
        id: oauth::testing::CLIENT_ID.to_owned(),
        secret: secret.map(str::to_owned),
    }
}

/// Optional RFC 7662 (issue 44 point 3): an opaque token is checked by the provider's
/// introspection, as the website's confidential client; answers are remembered, so repeated
/// calls and floods of made-up tokens cost the provider little.
#[tokio::test(flavor = "multi_thread")]
async fn a5_opaque_tokens_are_introspected_and_the_answers_remembered() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let (provider, validator) = started().await;
        let client = web_client(Some(oauth::testing::CLIENT_SECRET));
        let claims = provider.claims(AUDIENCE, "alice", "csg:read", &["eng"]);
        let token = provider.opaque(&claims);
        for _ in 0..3 {
            let identity = validator.introspect(&token, &client).await.unwrap();
            assert_eq!(
                (identity.subject.as_str(), identity.groups.clone()),
                ("alice", vec!["eng".to_owned()])
            );
        }
        assert_eq!(provider.introspections(), 1, "asked once, then remembered");

        // Made up: inactive, asked once, then refused without asking.
        for _ in 0..5 {
            let why = refused(validator.introspect("not-a-token-it-issued", &client).await);
            assert!(why.contains("not active"), "{why}");
        }
        assert_eq!(provider.introspections(), 2);

        // Active but for another resource, or expired: refused.
        let mut foreign = claims.clone();
        foreign["aud"] = json!("https://another-resource.example/mcp");
        let why = refused(
            validator
                .introspect(&provider.opaque(&foreign), &client)
                .await,
        );
        assert!(why.contains("another resource"), "{why}");
        let mut expired = claims.clone();
        expired["exp"] = json!(now() - 3600);
        assert!(
            refused(
                validator
                    .introspect(&provider.opaque(&expired), &client)
                    .await
            )
            .contains("expired")
        );

        // Without a secret nothing is asked; nor for text that is no token.
        let before = provider.introspections();
        assert!(refused(validator.introspect(&token, &web_client(None)).await).contains("secret"));
        assert!(
            refused(validator.introspect("two words", &client).await)
                .contains("not an access token")
        );
        assert_eq!(provider.introspections(), before);

        // Wrong client credentials: the provider refuses, nothing is known (not "invalid").
        let wrong = validator
            .introspect(&provider.opaque(&claims), &web_client(Some("wrong")))
            .await;
        assert!(
            matches!(wrong, Err(TokenError::ProviderBusy(_))),
            "{wrong:?}"
        );
    })
    .await
    .expect("within 30 s");
}
