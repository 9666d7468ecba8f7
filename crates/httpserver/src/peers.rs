//! Cluster mode (issue 31, behaviour 3): how a replica asks another for its part of a
//! `search` or `references` over every repository — `POST /_cluster/search-part` on the
//! owner (`api/shard.rs`), one of the cluster's own routes, with replica identity
//! ([`crate::REPLICA_HEADER`]), over the kept-alive client of forwarded calls, each attempt
//! bounded and the owner told how long it has.

use crate::replica_client::ReplicaClient;
use crate::wire::{DEADLINE_HEADER, REPLICA_HEADER};
use axum::body::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use service::{PeerError, PeerFuture, ShardAnswer, ShardRequest};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The biggest part answer read (a part holds at most `offset + limit` hits with their
/// snippets; far below this).
const MAX_PART_BYTES: usize = 256 * 1024 * 1024;

/// Parts asked of other replicas, for `/metrics` (cluster mode only).
pub(crate) struct Counters {
    /// Parts another replica answered.
    pub(crate) answered: AtomicU64,
    /// Parts that failed: unreachable, timed out, an error status or an unreadable answer
    /// (the repositories then go to their next owner, or are named not searched).
    pub(crate) failed: AtomicU64,
}

pub(crate) static COUNTERS: Counters = Counters {
    answered: AtomicU64::new(0),
    failed: AtomicU64::new(0),
};

/// Asks other replicas for their parts ([`service::Peers`]); plug it in with the placement.
#[derive(Clone)]
pub struct PeerClient {
    client: ReplicaClient,
    secret: HeaderValue,
    attempt_timeout: Duration,
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("PeerClient")
            .field("attempt_timeout", &self.attempt_timeout)
            .finish_non_exhaustive()
    }
}

impl PeerClient {
    /// A client presenting `routing`'s secret (and with mutual TLS its certificate), each
    /// attempt bounded by its `attempt_timeout`.
    pub fn new(routing: &crate::ClusterRouting) -> Result<Self, String> {
        let secret = HeaderValue::from_str(&routing.secret)
            .map_err(|_| "the cluster secret must be printable ASCII".to_owned())?;
        Ok(Self {
            client: ReplicaClient::new(routing.tls.as_ref())?,
            secret,
            attempt_timeout: routing.attempt_timeout,
        })
    }
}

impl service::Peers for PeerClient {
    fn search_shard(&self, owner: &str, request: ShardRequest) -> PeerFuture {
        let url = format!("{}{}", owner.trim_end_matches('/'), crate::api::shard::PATH);
        let body = serde_json::to_vec(&request);
        let mut headers = HeaderMap::new();
        headers.insert(REPLICA_HEADER, self.secret.clone());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(value) = HeaderValue::from_str(&self.attempt_timeout.as_millis().to_string()) {
            headers.insert(DEADLINE_HEADER, value);
        }
        let (client, timeout) = (self.client.clone(), self.attempt_timeout);
        Box::pin(async move {
            let part = ask(&client, body, headers, timeout, url).await;
            let counter = match &part {
                Ok(_) => &COUNTERS.answered,
                Err(_) => &COUNTERS.failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            part
        })
    }
}

/// One part request, sent and its answer read.
async fn ask(
    client: &ReplicaClient,
    body: Result<Vec<u8>, serde_json::Error>,
    headers: HeaderMap,
    timeout: Duration,
    url: String,
) -> Result<ShardAnswer, PeerError> {
    let body = body.map_err(|error| PeerError {
        message: format!("the part request did not serialize: {error}"),
    })?;
    let answer = client
        .send(Method::POST, &url, headers, Bytes::from(body), timeout)
        .await
        .map_err(|error| PeerError {
            message: format!("{url}: {error}"),
        })?;
    let status = answer.status;
    // Past the limit the body is not read on: the part is refused as too large.
    let bytes = answer
        .bytes(MAX_PART_BYTES)
        .await
        .map_err(|error| PeerError {
            message: format!("{url}: the answer was cut off or too large: {error}"),
        })?;
    if !status.is_success() {
        // The owner's error body says why; it is the owner's own message.
        let why: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
        return Err(PeerError {
            message: format!("{url} answered {status}: {why}"),
        });
    }
    serde_json::from_slice::<ShardAnswer>(&bytes).map_err(|error| PeerError {
        message: format!("{url}: the part answer is not one: {error}"),
    })
}
