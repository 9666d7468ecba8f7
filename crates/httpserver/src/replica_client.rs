//! The HTTP client of replica-to-replica calls (forwarded calls, search parts): kept-alive
//! connections, a short connect timeout (a dead replica is passed over at once), no
//! redirects, and HTTPS to a node URL that says `https://`, verified with the cluster CA
//! (presenting this replica's certificate with mutual TLS).
//!
//! Built on hyper's client with `hyper-rustls` rather than reqwest's TLS: reqwest's rustls
//! without aws-lc-rs (`rustls-no-provider`) makes *every* `reqwest::Client` in a process
//! panic unless a process-wide crypto provider was installed first, and this crate's
//! features reach every test and tool built with it; here the ring provider is given to the
//! one configuration that needs it.

use axum::body::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::{Duration, Instant};

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// The client; cheap to clone (one pool).
#[derive(Clone)]
pub(crate) struct ReplicaClient {
    http: Client<Connector, Full<Bytes>>,
    /// Whether `https://` node URLs can be called (a cluster CA was given).
    https: bool,
}

/// An answer's head, its body still to read within the call's deadline.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    body: hyper::body::Incoming,
    deadline: Instant,
}

/// Why a call got no answer. Never names the URL (its query string is the caller's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Failed(String),
    #[error(
        "the node URL is https:// but this replica has no --cluster-ca to verify it with; give \
         every replica the cluster CA"
    )]
    NoCa,
}

impl ReplicaClient {
    pub(crate) fn new(tls: Option<&crate::ClusterTls>) -> Result<Self, String> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(Duration::from_secs(1)));
        http.set_nodelay(true);
        http.enforce_http(false);
        let client_tls = tls.and_then(crate::ClusterTls::client);
        let https = client_tls.is_some();
        let config = match client_tls {
            Some(config) => (*config).clone(),
            // Never used (an https:// URL is refused before), but the connector wants one.
            None => rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("cannot set up the replica-to-replica client's TLS: {e}"))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self { http, https })
    }

    /// Sends `method url` with `headers` and `body`; the answer's head within `timeout`, its
    /// body to be read within the rest of it.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Answer, CallError> {
        let deadline = Instant::now() + timeout;
        if url.starts_with("https://") && !self.https {
            return Err(CallError::NoCa);
        }
        let mut request = http::Request::builder()
            .method(method)
            .uri(url)
            .body(Full::new(body))
            .map_err(|e| CallError::Failed(format!("the request cannot be made: {e}")))?;
        *request.headers_mut() = headers;
        let answer = tokio::time::timeout(timeout, self.http.request(request))
            .await
            .map_err(|_| CallError::Timeout(timeout))?
            .map_err(|e| CallError::Failed(describe(&e)))?;
        let (head, body) = answer.into_parts();
        Ok(Answer {
            status: head.status,
            headers: head.headers,
            body,
            deadline,
        })
    }
}

impl Answer {
    /// The whole body, at most `limit` bytes, read by the call's deadline.
    pub(crate) async fn bytes(self, limit: usize) -> Result<Bytes, CallError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let read = Limited::new(self.body, limit).collect();
        match tokio::time::timeout(left, read).await {
            Err(_) => Err(CallError::Timeout(left)),
            Ok(Err(e)) => Err(CallError::Failed(format!("the answer was cut off: {e}"))),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
        }
    }
}

/// An error and its causes on one line (hyper's own says only "client error (Connect)").
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
