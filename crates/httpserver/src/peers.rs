//! Cluster mode (issue 31, behaviour 3): how a replica asks another for its part of a
//! `search` or `references` over every repository — `POST /_cluster/search-part` on the
//! owner (`api/shard.rs`), one of the cluster's own routes, with replica identity
//! ([`crate::REPLICA_HEADER`]), over the kept-alive client of forwarded calls, each attempt
//! bounded and the owner told how long it has.

use crate::forward::{DEADLINE_HEADER, replica_client};
use crate::replica::REPLICA_HEADER;
use http::{HeaderValue, header};
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
    client: reqwest::Client,
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
    /// A client presenting `routing`'s secret, each attempt bounded by its
    /// `attempt_timeout`.
    pub fn new(routing: &crate::ClusterRouting) -> Result<Self, String> {
        let secret = HeaderValue::from_str(&routing.secret)
            .map_err(|_| "the cluster secret must be printable ASCII".to_owned())?;
        Ok(Self {
            client: replica_client()?,
            secret,
            attempt_timeout: routing.attempt_timeout,
        })
    }
}

impl service::Peers for PeerClient {
    fn search_shard(&self, owner: &str, request: ShardRequest) -> PeerFuture {
        let url = format!("{}{}", owner.trim_end_matches('/'), crate::api::shard::PATH);
        let body = serde_json::to_vec(&request);
        let attempt = body.map(|body| {
            let mut call = self
                .client
                .post(&url)
                .header(REPLICA_HEADER, self.secret.clone())
                .header(header::CONTENT_TYPE, "application/json")
                .timeout(self.attempt_timeout)
                .body(body);
            if let Ok(value) = HeaderValue::from_str(&self.attempt_timeout.as_millis().to_string())
            {
                call = call.header(DEADLINE_HEADER, value);
            }
            call
        });
        Box::pin(async move {
            let part = ask(attempt, url).await;
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
    attempt: Result<reqwest::RequestBuilder, serde_json::Error>,
    url: String,
) -> Result<ShardAnswer, PeerError> {
    let call = attempt.map_err(|error| PeerError {
        message: format!("the part request did not serialize: {error}"),
    })?;
    let answer = call.send().await.map_err(|error| PeerError {
        message: format!("{url}: {}", error.without_url()),
    })?;
    let status = answer.status();
    let bytes = answer.bytes().await.map_err(|error| PeerError {
        message: format!("{url}: the answer was cut off: {}", error.without_url()),
    })?;
    if !status.is_success() {
        // The owner's error body says why; it is the owner's own message.
        let why: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
        return Err(PeerError {
            message: format!("{url} answered {status}: {why}"),
        });
    }
    if bytes.len() > MAX_PART_BYTES {
        return Err(PeerError {
            message: format!("{url}: the part answer is too large"),
        });
    }
    serde_json::from_slice::<ShardAnswer>(&bytes).map_err(|error| PeerError {
        message: format!("{url}: the part answer is not one: {error}"),
    })
}
