//! What the access store answers its listings with (`csg user list`, `csg token list`,
//! `csg grant list`): users, tokens and grants as read back from either backend.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A user as `csg user list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The name.
    pub name: String,
    /// Holds the `prepare` capability.
    pub prepare: bool,
    /// When the user was added.
    pub created: SystemTime,
}

/// A token as `csg token list` shows it (never the secret: it is not stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// Its id, for `csg token revoke`.
    pub id: i64,
    /// Whose it is.
    pub user: String,
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created: SystemTime,
    /// When it was last used (to the minute), if ever.
    pub last_used: Option<SystemTime>,
    /// When it was revoked, if it was.
    pub revoked: Option<SystemTime>,
}

/// A read grant of a user on a (private) repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantInfo {
    /// The user.
    pub user: String,
    /// The repository's name.
    pub repo: String,
}

/// A time as the tables keep it (seconds since the epoch).
pub(crate) fn from_secs(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}
