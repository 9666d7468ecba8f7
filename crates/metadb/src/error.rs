//! The crate's error, and how a driver error is sorted into it.

use std::time::Duration;

/// What went wrong with the metadata database. Messages say what to do and never contain the
/// URL's password.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database URL could not be used; nothing was contacted.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// No connection to the server could be made or kept (refused, timed out, shut down).
    #[error("PostgreSQL is unreachable: {0}")]
    Unreachable(String),
    /// The server answered but refused the login (wrong user or password, missing database).
    #[error("PostgreSQL refused the connection: {0}")]
    Refused(String),
    /// The work started but did not finish within the call timeout: it may still take effect.
    #[error(
        "a PostgreSQL call did not finish within {0:?} and may still take effect; the server may \
         be overloaded or the call waiting on a lock: retry later, or look at pg_stat_activity"
    )]
    Timeout(Duration),
    /// No connection became free within the call timeout: the work never started.
    #[error(
        "no PostgreSQL connection became free within {0:?}, so nothing was done; retry later, or \
         give the metadata store more connections"
    )]
    Busy(Duration),
    /// The server rejected a statement, or a value could not be converted.
    #[error("PostgreSQL query failed: {0}")]
    Query(String),
    /// A schema migration could not be applied, or the database is newer than this binary.
    #[error("database migration failed: {0}")]
    Migration(String),
    /// A connection thread could not be started.
    #[error(
        "could not start a PostgreSQL connection thread ({0}); the process may be out of threads or memory"
    )]
    Spawn(String),
}

impl Error {
    /// True when the server could not be reached: the caller may serve from what it already has
    /// and retry later (writes should fail at once with this error).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable(_))
    }
}

/// Sorts a driver error: connection-level failures (I/O, closed connection, server shutting
/// down) are [`Error::Unreachable`], failed logins [`Error::Refused`], the rest
/// [`Error::Query`]. Stores whose own error type wraps [`Error`] can implement
/// `From<postgres::Error>` through this.
impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        let text = describe(&e);
        match kind(&e) {
            Kind::Unreachable => Error::Unreachable(text),
            Kind::Refused => Error::Refused(text),
            Kind::Query => Error::Query(text),
        }
    }
}

pub(crate) enum Kind {
    Unreachable,
    Refused,
    Query,
}

/// Which side of the line a driver error falls on (see `From<postgres::Error>`).
pub(crate) fn kind(e: &postgres::Error) -> Kind {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return match code {
            // Wrong password or user, a database that does not exist, no login allowed.
            "28P01" | "28000" | "3D000" => Kind::Refused,
            // Connection exceptions; the server shutting down, crashed or still starting; no
            // connection slot left.
            _ if code.starts_with("08") => Kind::Unreachable,
            "57P01" | "57P02" | "57P03" | "53300" => Kind::Unreachable,
            _ => Kind::Query,
        };
    }
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    let text = e.to_string();
    if e.is_closed()
        || io
        || text == "error connecting to server"
        || text == "timeout waiting for server"
    {
        Kind::Unreachable
    } else {
        Kind::Query
    }
}

/// The driver error as one line: the server's severity, SQLSTATE, message, detail and hint, or
/// the driver's message with its cause.
pub(crate) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" (detail: {detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!(" (hint: {hint})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
