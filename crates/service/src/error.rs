//! The error every operation answers with: a kind a transport can map (JSON-RPC invalid
//! params, MCP `isError`, HTTP status) and a message fit for the caller.

use std::fmt;

/// What kind of failure; transports map it, callers read the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The arguments are wrong (bad path, bad range, too many items…).
    InvalidArgument,
    /// The repository, revision or path does not exist (or is not visible: A-4).
    NotFound,
    /// The revision exists but is not readable (outside retention) or is ambiguous.
    NotReadable,
    /// The repository is not ready (never synced) or the server is shutting down.
    Unavailable,
    /// Too many calls of this kind run at once; the same call may succeed in a moment
    /// (HTTP 503, an MCP tool error that says to retry).
    Busy,
    /// The call ran past its deadline (O-9) and was stopped: the message says its budget
    /// and how to narrow the call (HTTP 503 with `Retry-After`, an MCP tool error).
    TimedOut,
    /// Something broke inside; the message is generic and the detail is in the log.
    Internal,
    /// The call needs a token and came without one (HTTP 401 with `WWW-Authenticate`).
    Unauthenticated,
    /// The caller's user lacks the capability the call needs (HTTP 403).
    Forbidden,
}

/// An operation's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ServiceError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::InvalidArgument,
            message: message.into(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Internal,
            message: message.into(),
        }
    }

    pub(crate) fn busy(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Busy,
            message: message.into(),
        }
    }

    pub(crate) fn unauthenticated(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Unauthenticated,
            message: message.into(),
        }
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Forbidden,
            message: message.into(),
        }
    }

    /// `operation` ran past its budget of `time` (or its caller left): what to do instead.
    pub(crate) fn timed_out(operation: &str, time: std::time::Duration, narrow: &str) -> Self {
        Self {
            kind: ErrorKind::TimedOut,
            message: format!(
                "{operation} ran past its time budget of {} and was stopped; {narrow}",
                crate::cost::seconds(time)
            ),
        }
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Unavailable,
            message: message.into(),
        }
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServiceError {}

impl From<gitstore::Error> for ServiceError {
    fn from(error: gitstore::Error) -> Self {
        use gitstore::Error as E;
        let kind = match &error {
            E::InvalidName { .. }
            | E::InvalidPath { .. }
            | E::InvalidRevision { .. }
            | E::OutsideScope { .. } => ErrorKind::InvalidArgument,
            E::UnknownRepo(_) | E::UnknownRevision { .. } | E::NotFound { .. } => {
                ErrorKind::NotFound
            }
            E::Ambiguous { .. } | E::OutsideRetention { .. } => ErrorKind::NotReadable,
            E::IsDirectory { .. }
            | E::Symlink { .. }
            | E::Submodule { .. }
            | E::LfsPointer { .. }
            | E::Binary { .. }
            | E::NotUtf8 { .. }
            | E::TooLarge { .. }
            | E::TextTooLarge { .. } => ErrorKind::InvalidArgument,
            E::NotSynced(_) | E::Sync { .. } => ErrorKind::Unavailable,
            E::NameTaken(_) | E::VisibilityDiffers { .. } => ErrorKind::InvalidArgument,
            // A cluster's PostgreSQL is down: the write is refused at once; try again later.
            E::Storage(_) if error.is_metadata_unreachable() => ErrorKind::Unavailable,
            E::Storage(_) => ErrorKind::Internal,
            E::Stopped(_) => ErrorKind::TimedOut,
        };
        Self {
            kind,
            message: error.to_string(),
        }
    }
}

impl From<access::Error> for ServiceError {
    fn from(error: access::Error) -> Self {
        let kind = match &error {
            access::Error::Storage(_) | access::Error::SchemaTooNew { .. } => ErrorKind::Internal,
            access::Error::Unavailable(_) | access::Error::UnknownNow { .. } => {
                ErrorKind::Unavailable
            }
            access::Error::Malformed | access::Error::InvalidToken => ErrorKind::Unauthenticated,
            _ => ErrorKind::InvalidArgument,
        };
        Self {
            kind,
            message: error.to_string(),
        }
    }
}
