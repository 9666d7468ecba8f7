//! The one HTTP client of this crate: GETs of the provider's JSON documents (metadata,
//! keys) and the website sign-in's form POST to its token endpoint, over HTTPS verified with
//! the system's CAs, bounded in time and size, without redirects (a provider's endpoints are
//! at the URLs its metadata names).
//!
//! hyper's client with `hyper-rustls` on the ring provider, as the replica client has it:
//! reqwest's rustls without aws-lc-rs would need a process-wide crypto provider.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::OnceLock;
use std::time::Duration;

/// The longest a fetch may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest document read.
const MAX_BYTES: usize = 1024 * 1024;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// The process's client (one pool), built on first use.
fn client() -> Result<&'static Client<Https, Full<Bytes>>, String> {
    static CLIENT: OnceLock<Result<Client<Https, Full<Bytes>>, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A certificate the store cannot parse is skipped, as browsers do.
                let _ = roots.add(cert);
            }
            let tls = rustls::ClientConfig::builder_with_provider(ring_provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("cannot set up TLS to the identity provider: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let mut http = HttpConnector::new();
            http.set_connect_timeout(Some(TIMEOUT));
            http.enforce_http(false);
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .wrap_connector(http);
            Ok(Client::builder(TokioExecutor::new()).build(connector))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The ring provider, as the rest of the process uses it (its post-quantum key exchange is
/// what `aws-lc-rs` would add, with a C toolchain CI lacks).
#[allow(deprecated)]
fn ring_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

/// The JSON document at `url`.
pub(crate) async fn json(url: &str) -> Result<serde_json::Value, String> {
    let request = http::Request::get(url)
        .header(http::header::ACCEPT, "application/json")
        .body(Full::default());
    send(url, request).await
}

/// The JSON answer of a form POST of `form` to `url`, with HTTP basic authentication
/// `basic` (a client id and secret) if given. An error answer's `error` and
/// `error_description` (RFC 6749 §5.2) are in the error.
pub(crate) async fn post_form(
    url: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Result<serde_json::Value, String> {
    let body = serde_urlencoded::to_string(form).map_err(|e| format!("{url}: {e}"))?;
    let mut request = http::Request::post(url)
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        );
    if let Some((id, secret)) = basic {
        use base64::Engine;
        // RFC 6749 §2.3.1: each part form-encoded before the pair is base64-encoded.
        let encode =
            |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
        let pair = format!("{}:{}", encode(id), encode(secret));
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        request = request.header(http::header::AUTHORIZATION, format!("Basic {encoded}"));
    }
    send(url, request.body(Full::new(Bytes::from(body)))).await
}

async fn send(
    url: &str,
    request: Result<http::Request<Full<Bytes>>, http::Error>,
) -> Result<serde_json::Value, String> {
    let request = request.map_err(|e| format!("{url}: {e}"))?;
    let client = client()?;
    let fetched = tokio::time::timeout(TIMEOUT, async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_BYTES)
            .collect()
            .await
            .map_err(|e| format!("{url}: the answer could not be read ({e})"))?
            .to_bytes();
        if !status.is_success() {
            let detail = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .map(|v| {
                    let text = |key: &str| {
                        v.get(key)
                            .and_then(|x| x.as_str())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    format!(": {} {}", text("error"), text("error_description"))
                })
                .unwrap_or_default();
            return Err(format!("{url} answered {status}{detail}"));
        }
        Ok(body)
    })
    .await
    .map_err(|_| format!("{url} did not answer within {TIMEOUT:?}"))??;
    serde_json::from_slice(&fetched).map_err(|e| format!("{url} is not JSON: {e}"))
}
