//! JSON shapes of the API (R-6): the MCP header's facts in snake_case.

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
    /// An answer of the access layer's own (a refused or rate-limited token), which no
    /// operation's error describes. Handlers answer [`ServiceError`]s instead, through the
    /// one mapping of `From<ServiceError>`.
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

    /// Arguments the transport could not read (query string, JSON body): an invalid argument.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::from(ServiceError {
            kind: ErrorKind::InvalidArgument,
            message: message.into(),
        })
    }

    /// A failure inside the server; the detail goes to the log, not to the caller.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::from(ServiceError {
            kind: ErrorKind::Internal,
            message: message.into(),
        })
    }

    /// What went wrong, without the status: a streamed answer's last line (O-5) says it
    /// once the status has been sent.
    pub(crate) fn detail(self) -> ErrorDetail {
        self.1.error
    }
}

/// The one mapping of an operation's error onto an HTTP status and an error kind.
impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let (status, kind) = match error.kind {
            ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::NotReadable => (StatusCode::CONFLICT, "not_readable"),
            ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ErrorKind::Busy => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            ErrorKind::TimedOut => (StatusCode::SERVICE_UNAVAILABLE, "timed_out"),
            ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            ErrorKind::Unauthenticated => (StatusCode::UNAUTHORIZED, UNAUTHENTICATED),
            ErrorKind::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
        };
        Self::new(status, kind, error.message)
    }
}

/// A tool call's failure: arguments that do not fit the tool's schema are a 400 like any
/// invalid argument (the same refusal MCP gives, M-3); the operation's own errors map as
/// every operation's do.
impl From<tools::ToolError> for ApiError {
    fn from(error: tools::ToolError) -> Self {
        match error {
            tools::ToolError::Arguments(message) => Self::bad_request(message),
            tools::ToolError::Service(error) => Self::from(error),
        }
    }
}

/// A line of a streamed `prepare` (O-5, `application/x-ndjson`): `{"progress": {"done",
/// "total"}}` while the index builds, then one `{"result": …}` or `{"error": {"kind",
/// "message"}}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PrepareLine {
    /// Documents of the index build written so far, of all.
    Progress { done: u64, total: u64 },
    /// What `prepare` did: the same answer as the unstreamed call's body.
    Result(service::PrepareAnswer),
    /// Why it failed, with the kind an unstreamed call's error body would carry.
    Error(ErrorDetail),
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
        if matches!(self.1.error.kind, "busy" | "timed_out") {
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

    /// O-5: a streamed `prepare`'s lines are one-key objects, the error line the same
    /// `{"error": …}` an unstreamed call's body is.
    #[test]
    fn o5_prepare_lines() -> Result<(), serde_json::Error> {
        let progress = PrepareLine::Progress { done: 1, total: 2 };
        assert_eq!(
            serde_json::to_string(&progress)?,
            r#"{"progress":{"done":1,"total":2}}"#
        );
        let error = ServiceError {
            kind: ErrorKind::NotFound,
            message: "no such repository".into(),
        };
        let body = serde_json::to_string(&ApiError::from(error.clone()).1)?;
        let line = serde_json::to_string(&PrepareLine::Error(ApiError::from(error).detail()))?;
        assert_eq!(line, body);
        assert_eq!(
            line,
            r#"{"error":{"kind":"not_found","message":"no such repository"}}"#
        );
        Ok(())
    }
}
