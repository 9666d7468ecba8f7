//! The identity provider's metadata: RFC 8414 (`/.well-known/oauth-authorization-server`,
//! inserted before the issuer's path) or OpenID Connect Discovery
//! (`<issuer>/.well-known/openid-configuration`), whichever answers first.

use serde::Deserialize;

/// What this server uses of the provider's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProviderMetadata {
    /// The issuer identifier; must equal the configured one (RFC 8414 §3.3).
    pub issuer: String,
    /// Where its signing keys are.
    pub jwks_uri: String,
    /// Where a browser is sent to sign in (the website's OpenID Connect sign-in).
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where an authorization code is exchanged for tokens.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// Where an opaque access token is introspected (RFC 7662), if the provider offers it.
    #[serde(default)]
    pub introspection_endpoint: Option<String>,
}

/// The metadata URLs of `issuer`, in the order they are tried.
pub(crate) fn candidates(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = Vec::new();
    if let Ok(url) = url::Url::parse(trimmed) {
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        urls.push(format!(
            "{origin}/.well-known/oauth-authorization-server{path}"
        ));
        if !path.is_empty() {
            urls.push(format!("{origin}/.well-known/openid-configuration{path}"));
        }
    }
    urls.push(format!("{trimmed}/.well-known/openid-configuration"));
    urls.dedup();
    urls
}

/// The metadata of `issuer`: the first candidate that answers a document naming `issuer`.
pub(crate) async fn fetch(issuer: &str) -> Result<ProviderMetadata, String> {
    let mut failures = Vec::new();
    for url in candidates(issuer) {
        let document = match crate::fetch::json(&url).await {
            Ok(document) => document,
            Err(why) => {
                failures.push(why);
                continue;
            }
        };
        let metadata: ProviderMetadata = serde_json::from_value(document)
            .map_err(|e| format!("{url} is not authorization-server metadata: {e}"))?;
        if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(format!(
                "{url} names the issuer {:?}, not the configured {issuer:?}; set --oauth-issuer \
                 to the provider's issuer exactly",
                metadata.issuer
            ));
        }
        // The endpoints the secret and the tokens go to: https, as the issuer must be.
        for (name, endpoint) in [
            ("jwks_uri", Some(&metadata.jwks_uri)),
            ("token_endpoint", metadata.token_endpoint.as_ref()),
            (
                "introspection_endpoint",
                metadata.introspection_endpoint.as_ref(),
            ),
            (
                "authorization_endpoint",
                metadata.authorization_endpoint.as_ref(),
            ),
        ] {
            if let Some(endpoint) = endpoint
                && let Some(why) = crate::url_problem(endpoint)
            {
                return Err(format!(
                    "{url} names the {name} {endpoint:?}, which is unusable: {why}"
                ));
            }
        }
        return Ok(metadata);
    }
    Err(failures.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a5_metadata_urls_of_an_issuer() {
        assert_eq!(
            candidates("https://id.example.org/realms/acme"),
            [
                "https://id.example.org/.well-known/oauth-authorization-server/realms/acme",
                "https://id.example.org/.well-known/openid-configuration/realms/acme",
                "https://id.example.org/realms/acme/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            candidates("http://127.0.0.1:9000/"),
            [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9000/.well-known/openid-configuration",
            ]
        );
    }
}
