//! The cluster's trust boundary (issue 43, A-7): what a request from another replica may
//! be, told apart at the outermost layer, before anything else looks at it.
//!
//! Two markers, each carrying the cluster secret, never interchangeable:
//!
//! - [`REPLICA_HEADER`] is replica identity. It is accepted on the cluster's own routes
//!   (under [`INTERNAL_PREFIX`]: the part of a search over every repository, the cluster's
//!   status) and nowhere else; those routes answer nobody without it, exactly as an unknown
//!   route answers (404, no body), so a client cannot even tell they exist. They sit outside
//!   the access layer (there is no caller token: the asking replica decided its caller's
//!   access) and are never routed or forwarded.
//! - [`FORWARDED_HEADER`] marks a client's call that another replica forwarded here
//!   ([`Forwarded`]). It carries the client's identity (its own bearer token or session
//!   cookie, authenticated here again by the access layer) and address, never a replica's:
//!   the call is authorized as the client's, and only the routing's own questions (is the
//!   repository held here? indexed?) are answered differently.
//!
//! A request with a wrong secret, or with replica identity on a client route, is refused
//! (403); the cluster's headers are stripped from every request before the rest of the stack
//! sees it, so nothing further in can be fooled by a client that sends them.
//!
//! With mutual TLS (`--cluster-mtls`, O-10) a marker counts only on a connection whose client
//! certificate chains to the cluster CA ([`crate::PeerCertified`]): the certificate is a
//! second factor beside the secret, not a replacement for it (the secret also keys the
//! cursors every replica must accept, so every replica has it anyway). A right secret over a
//! connection without such a certificate is refused as a wrong one: a `/_cluster/` route
//! answers 404, a client route 403.

use crate::ClientAddr;
use crate::wire::{
    CLIENT_HEADER, COUNTERS, FORWARDED_HEADER, Forwarded, FromReplica, IDENTITY_HEADER,
    INDEX_OPTIONAL_HEADER, REPLICA_HEADER, deadline_of, refuse,
};
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json};
use http::{HeaderValue, StatusCode};
use service::{CallContext, ErrorKind, Service};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where the cluster's own routes live: outside `/sourcegraph/`, which clients use (an
/// ingress that passes only `/sourcegraph/` never even reaches them).
pub const INTERNAL_PREFIX: &str = "/_cluster/";
/// `GET /_cluster/status`: the cluster's members and owners, for the other replicas and for
/// whoever holds the secret on the replicas' own network (clients ask
/// `/sourcegraph/api/cluster` with an operator's token).
pub(crate) const STATUS_PATH: &str = "/_cluster/status";

/// How a marker header came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Absent,
    Valid,
    Wrong,
}

struct Gate {
    secret: HeaderValue,
    /// Mutual TLS: a marker counts only from a peer with a certificate of the cluster CA.
    mutual: bool,
}

impl Gate {
    fn marker(&self, presented: Option<HeaderValue>, certified: bool) -> Marker {
        match presented {
            None => Marker::Absent,
            Some(value)
                if constant_time_eq(value.as_bytes(), self.secret.as_bytes())
                    && (certified || !self.mutual) =>
            {
                Marker::Valid
            }
            Some(_) => Marker::Wrong,
        }
    }
}

/// `app` (the whole client-facing router, access layer included) behind the replica gate,
/// with the cluster's own routes beside it. The outermost layer of a replica.
pub fn with_replica_gate(
    app: Router,
    service: Service,
    routing: &crate::ClusterRouting,
) -> Result<Router, String> {
    let secret = HeaderValue::from_str(&routing.secret)
        .map_err(|_| "the cluster secret must be printable ASCII".to_owned())?;
    let internal = Router::new()
        .route(STATUS_PATH, get(status))
        .with_state(service.clone())
        .merge(crate::api::shard::router(service));
    let mutual = routing.tls.as_ref().is_some_and(crate::ClusterTls::mutual);
    let gate = Arc::new(Gate { secret, mutual });
    Ok(app
        .merge(internal)
        .layer(axum::middleware::from_fn_with_state(gate, check)))
}

async fn check(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let certified = request.extensions().get::<crate::PeerCertified>().is_some();
    let headers = request.headers_mut();
    let replica = gate.marker(headers.remove(&REPLICA_HEADER), certified);
    let forwarded = gate.marker(headers.remove(&FORWARDED_HEADER), certified);
    let client = headers.remove(&CLIENT_HEADER);
    let index_optional = headers.remove(&INDEX_OPTIONAL_HEADER).is_some();
    let identity = headers.remove(&IDENTITY_HEADER);
    if request.uri().path().starts_with(INTERNAL_PREFIX) {
        if (replica, forwarded) == (Marker::Valid, Marker::Absent) {
            request.extensions_mut().insert(FromReplica);
            return next.run(request).await;
        }
        // As any route that does not exist (axum's own 404): nothing to learn here.
        return StatusCode::NOT_FOUND.into_response();
    }
    match (replica, forwarded) {
        (Marker::Absent, Marker::Absent) => next.run(request).await,
        (Marker::Absent, Marker::Valid) => {
            COUNTERS.from_replicas.fetch_add(1, Ordering::Relaxed);
            let deadline = deadline_of(request.headers());
            let extensions = request.extensions_mut();
            extensions.insert(Forwarded {
                deadline,
                index_optional,
            });
            // The client as the forwarding replica saw it: its wrong-token limits and its
            // share of heavy work are the client's, not the forwarding replica's.
            if let Some(address) = client.and_then(|value| value.to_str().ok()?.parse().ok()) {
                extensions.insert(ClientAddr(address));
            }
            // Who the forwarding replica validated the caller's access token as.
            if let Some(grant) = identity.as_ref().and_then(crate::wire::decode_identity) {
                extensions.insert(crate::wire::ForwardedIdentity(grant));
            }
            next.run(request).await
        }
        _ => refuse(
            ErrorKind::Forbidden,
            "wrong cluster credentials: a replica marker with a wrong secret, one that does \
             not belong on this route, or (with --cluster-mtls) one sent without a client \
             certificate of the cluster CA; check that every replica has the same \
             CSG_CLUSTER_SECRET and, with mutual TLS, its --cluster-tls-cert",
        ),
    }
}

/// `GET /_cluster/status`: the cluster as this replica sees it, for another replica.
async fn status(
    State(service): State<Service>,
    replica: Option<Extension<FromReplica>>,
) -> Response {
    if replica.is_none() {
        return StatusCode::NOT_FOUND.into_response();
    }
    match service.cluster(&CallContext::default()) {
        Ok(cluster) => Json(crate::api::cluster_json(&cluster)).into_response(),
        Err(error) => crate::json::ApiError::from(error).into_response(),
    }
}

/// Compares without an early exit, so the time taken says nothing about the secret.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
