//! `POST /_cluster/search-part` (cluster mode, issue 31 behaviour 3): another replica asks
//! this one for its part of a `search` or `references` over every repository
//! ([`service::Service::search_shard`]). Only replicas may ask: the replica gate
//! (`replica.rs`) checks their marker, answers anyone else as it answers an unknown route,
//! and marks the request [`crate::FromReplica`]; the asking replica decided its caller's
//! access. The route is one of the cluster's own, outside the access layer (there is no
//! caller token to check), never routed or forwarded.

use crate::json::ApiError;
use crate::wire::FromReplica;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Extension, Json, Router};
use service::{ErrorKind, Service, ServiceError, ShardAnswer, ShardRequest};

/// Where the route is.
pub(crate) const PATH: &str = "/_cluster/search-part";

/// The biggest part request read: it names every repository of the part (some 30 bytes
/// each), so a cluster of 100,000 repositories needs a few megabytes, past axum's default.
/// Only a replica that presented its marker gets its body read.
const MAX_PART_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// The route alone, for the replica gate's own router.
pub(crate) fn router(service: Service) -> Router {
    Router::new()
        .route(PATH, post(search_shard))
        .layer(DefaultBodyLimit::max(MAX_PART_REQUEST_BYTES))
        .with_state(service)
}

async fn search_shard(
    State(service): State<Service>,
    replica: Option<Extension<FromReplica>>,
    body: Bytes,
) -> Result<Json<ShardAnswer>, ApiError> {
    if replica.is_none() {
        return Err(ApiError::from(ServiceError {
            kind: ErrorKind::Forbidden,
            message: "this route answers the other replicas of the cluster only".to_owned(),
        }));
    }
    let request: ShardRequest = serde_json::from_slice(&body)
        .map_err(|error| ApiError::bad_request(format!("invalid part request: {error}")))?;
    Ok(Json(service.search_shard(request).await?))
}
