//! The one HTTP client of this crate: GETs of the provider's JSON documents (metadata,
//! keys), over HTTPS verified with the system's CAs, bounded in time and size, without
//! redirects (a provider's documents are at the URLs its metadata names).
//!
//! hyper's client with `hyper-rustls` on the ring provider, as the replica client has it:
//! reqwest's rustls without aws-lc-rs would need a process-wide crypto provider.

use http_body_util::{BodyExt, Empty, Limited};
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
fn client() -> Result<&'static Client<Https, Empty<Bytes>>, String> {
    static CLIENT: OnceLock<Result<Client<Https, Empty<Bytes>>, String>> = OnceLock::new();
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

/// The JSON document at `url`. The error says what failed, for the log.
pub(crate) async fn json(url: &str) -> Result<serde_json::Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let request = http::Request::get(uri)
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let client = client()?;
    let fetched = tokio::time::timeout(TIMEOUT, async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        let body = Limited::new(response.into_body(), MAX_BYTES)
            .collect()
            .await
            .map_err(|e| format!("{url}: the answer could not be read ({e})"))?;
        Ok(body.to_bytes())
    })
    .await
    .map_err(|_| format!("{url} did not answer within {TIMEOUT:?}"))??;
    serde_json::from_slice(&fetched).map_err(|e| format!("{url} is not JSON: {e}"))
}
