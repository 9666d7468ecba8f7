//! What the replicas of a cluster say to each other on the wire (issue 31, issue 43): the
//! two markers (replica identity on the cluster's own routes, a forwarded client call
//! everywhere else), the headers a forwarded call carries, what the gate makes of them for
//! the rest of the stack, and the routing's counters. The replica gate (`replica.rs`), the
//! routing (`forward.rs`), the search parts (`peers.rs`, `api/shard.rs`) and `/metrics` all
//! speak it; it speaks none of them.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName};
use service::{ErrorKind, ServiceError};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Replica identity: a replica calling one of the cluster's own routes, with the secret.
pub const REPLICA_HEADER: HeaderName = HeaderName::from_static("x-csg-replica-secret");
/// A client call another replica forwarded here, with the secret.
pub const FORWARDED_HEADER: HeaderName = HeaderName::from_static("x-csg-forwarded-secret");
/// The header that tells the owner how long the caller still waits, in milliseconds.
pub const DEADLINE_HEADER: HeaderName = HeaderName::from_static("x-csg-deadline-ms");
/// The header that names the caller's client address (as the forwarding replica told it),
/// believed only on a forwarded call.
pub const CLIENT_HEADER: HeaderName = HeaderName::from_static("x-csg-client-addr");
/// On a forwarded call: no owner has an index of the repository yet, so an owner that holds
/// it answers anyway (naming it as not indexed) rather than not at all.
pub(crate) const INDEX_OPTIONAL_HEADER: HeaderName =
    HeaderName::from_static("x-csg-index-optional");

/// On a forwarded call of an identity provider's caller (A-5, issue 44 point 7): who the
/// forwarding replica validated the access token as (its grant: subject, scopes, groups),
/// instead of the token itself, which never goes to another replica. Believed only with a
/// valid [`FORWARDED_HEADER`]; dropped from any other request.
pub(crate) const IDENTITY_HEADER: HeaderName = HeaderName::from_static("x-csg-forwarded-identity");
/// The longest [`IDENTITY_HEADER`] value sent; a grant that does not fit (hundreds of long
/// group names) goes as the token, which the owner validates again.
const MAX_IDENTITY_BYTES: usize = 16 * 1024;

/// The validated identity a forwarded call carries ([`IDENTITY_HEADER`]).
#[derive(Debug, Clone)]
pub(crate) struct ForwardedIdentity(pub(crate) service::ProviderGrant);

/// `grant` as an [`IDENTITY_HEADER`] value: its JSON, percent-encoded (group names may be
/// any text); `None` when it is too long to send.
pub(crate) fn encode_identity(grant: &service::ProviderGrant) -> Option<http::HeaderValue> {
    let json = serde_json::json!({
        "sub": grant.subject, "scopes": grant.scopes, "groups": grant.groups,
    })
    .to_string();
    let encoded = percent_encoding::utf8_percent_encode(&json, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    if encoded.len() > MAX_IDENTITY_BYTES {
        return None;
    }
    http::HeaderValue::from_str(&encoded).ok()
}

/// [`encode_identity`] read back; `None` for anything else.
pub(crate) fn decode_identity(value: &http::HeaderValue) -> Option<service::ProviderGrant> {
    if value.len() > MAX_IDENTITY_BYTES {
        return None;
    }
    let json = percent_encoding::percent_decode(value.as_bytes())
        .decode_utf8()
        .ok()?;
    #[derive(serde::Deserialize)]
    struct Wire {
        sub: String,
        scopes: Vec<String>,
        groups: Vec<String>,
    }
    let wire: Wire = serde_json::from_str(&json).ok()?;
    Some(service::ProviderGrant {
        subject: wire.sub,
        scopes: wire.scopes,
        groups: wire.groups,
    })
}

/// A request another replica made on one of the cluster's own routes ([`REPLICA_HEADER`]).
#[derive(Debug, Clone, Copy)]
pub struct FromReplica;

/// A client's call that another replica forwarded here ([`FORWARDED_HEADER`]): answered
/// here, never forwarded again, as the client's (its credentials came along).
#[derive(Debug, Clone, Copy)]
pub struct Forwarded {
    /// How long the forwarding replica waits for the answer.
    pub(crate) deadline: Option<Duration>,
    /// No owner has an index of the repository yet: answer a call that reads the index
    /// anyway (naming it as not indexed) rather than refuse it.
    pub(crate) index_optional: bool,
}

/// What routing did, for `/metrics` (cluster mode only).
pub(crate) struct Counters {
    /// Calls forwarded to an owner and answered by one.
    pub(crate) forwarded: AtomicU64,
    /// Attempts that moved on to the next owner (connection failure, timeout, 502-504).
    pub(crate) failovers: AtomicU64,
    /// Calls no owner answered (503).
    pub(crate) unanswered: AtomicU64,
    /// Calls other replicas forwarded here.
    pub(crate) from_replicas: AtomicU64,
}

pub(crate) static COUNTERS: Counters = Counters {
    forwarded: AtomicU64::new(0),
    failovers: AtomicU64::new(0),
    unanswered: AtomicU64::new(0),
    from_replicas: AtomicU64::new(0),
};

/// How long the caller still waits, as [`DEADLINE_HEADER`] says (milliseconds).
pub(crate) fn deadline_of(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(&DEADLINE_HEADER)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// An error answer in the one shape and status mapping of the API (`json.rs`).
pub(crate) fn refuse(kind: ErrorKind, message: &str) -> Response {
    crate::json::ApiError::from(ServiceError {
        kind,
        message: message.to_owned(),
    })
    .into_response()
}
