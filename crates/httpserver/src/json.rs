//! JSON shapes of the API: the MCP header's facts in snake_case.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use service::{ErrorKind, ServiceError};

/// The body of every error answer: `{"error": {"kind": …, "message": …}}`.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize)]
pub struct ErrorDetail {
    /// `invalid_argument`, `not_found`, `not_readable`, `unavailable`, `busy` (retry in a
    /// moment), `internal`, `forbidden`.
    pub kind: &'static str,
    pub message: String,
}

/// An error answer with its status code.
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) ErrorBody);

impl ApiError {
    pub(crate) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self(
            status,
            ErrorBody {
                error: ErrorDetail {
                    kind,
                    message: message.into(),
                },
            },
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let (status, kind) = match error.kind {
            ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::NotReadable => (StatusCode::CONFLICT, "not_readable"),
            ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ErrorKind::Busy => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            ErrorKind::Unauthenticated => (StatusCode::UNAUTHORIZED, UNAUTHENTICATED),
            ErrorKind::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
        };
        Self(
            status,
            ErrorBody {
                error: ErrorDetail {
                    kind,
                    message: error.message,
                },
            },
        )
    }
}

/// The error kind of a call that needs a token (401).
pub(crate) const UNAUTHENTICATED: &str = "unauthenticated";
/// The error kind of a presented token that is refused (401, RFC 6750 `invalid_token`).
pub(crate) const INVALID_TOKEN: &str = "invalid_token";

/// The challenge of a 401 (RFC 6750): which scheme, and whether the token was the problem.
fn challenge(kind: &str) -> Option<&'static str> {
    match kind {
        UNAUTHENTICATED => Some("Bearer realm=\"context-sourcegraph\""),
        INVALID_TOKEN => Some("Bearer realm=\"context-sourcegraph\", error=\"invalid_token\""),
        _ => None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.1.error.kind == "busy" {
            // The same call may succeed in a moment: say when to try again.
            return (self.0, [(header::RETRY_AFTER, "1")], Json(self.1)).into_response();
        }
        if let Some(challenge) = challenge(self.1.error.kind) {
            return (
                self.0,
                [(header::WWW_AUTHENTICATE, challenge)],
                Json(self.1),
            )
                .into_response();
        }
        (self.0, Json(self.1)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S-1: a search refused by admission control is a 503 `busy` with `Retry-After`.
    #[test]
    fn s1_busy_is_503_with_retry_after() {
        let error = ServiceError {
            kind: ErrorKind::Busy,
            message: "the server is busy: 4 searches are running already; retry in a moment".into(),
        };
        let response = ApiError::from(error).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}
