//! `access` owns who may do what (SPEC A-1..A-4): users, their personal API tokens, the
//! `prepare` capability and read grants on private repositories. It lives in tables of the
//! metadata database beside the registry, written by the `csg user`, `csg token` and
//! `csg grant` commands of any process and read by every server. That database is one of
//! two, behind one internal trait (`backend.rs`) with versioned migrations each:
//!
//! - embedded SQLite, `<data>/csg.sqlite` ([`AccessStore::open`]), the default;
//! - a cluster's shared PostgreSQL ([`AccessStore::open_postgres`], through `metadb`), where
//!   replicas share users, tokens and grants.
//!
//! A token is shown once, when it is created, and stored only as its SHA-256: a presented
//! token is hashed and looked up by hash, never compared as plaintext. The website's sign-in
//! sessions live here too ([`AccessStore::start_session`]), so they survive a restart and
//! work on every replica: a row per session keyed by the SHA-256 of its id (the cookie
//! value), naming the token it was signed in with by id, never the token itself; a session
//! ends on sign-out, after [`SESSION_IDLE`] unused, or when its token is revoked or its user
//! removed. The decisions
//! ([`AccessStore::authenticate`], [`AccessStore::granted`]) answer from an in-memory view,
//! without a lock and without a database query per call. With SQLite the view is checked
//! against the shared change counter (`changecounter`) on every call and reloaded when
//! another process changed the tables: a revoked token or grant is refused on the very next
//! call (W-34). With PostgreSQL every write announces itself (`NOTIFY`) and each replica's
//! store reloads on its own thread within moments; a write through a store is in its view
//! when the write returns. While PostgreSQL is unreachable, the decisions answer from the
//! last view and writes fail at once with [`Error::Unavailable`]. A token or session the view
//! lacks (another replica made it a moment ago) is looked up in the database, within a budget
//! per client address ([`client_key`]); a spent budget is [`Error::UnknownNow`], which says
//! nothing about the credential.
//!
//! Repository visibility (public or private) is a property of the registration and lives in
//! `gitstore`; this crate knows repositories only by name.

mod backend;
mod lookups;
mod names;
mod pg;
mod records;
mod reload;
mod sqlite;
mod store;
mod tables;
mod token;

pub use lookups::client_key;
pub use names::valid_user_name;
pub use records::{GrantInfo, TokenInfo, UserInfo};
pub use store::{AccessStore, SESSION_IDLE};
pub use token::{TOKEN_PREFIX, contains_token, looks_like_token};

use std::fmt;

/// An authenticated caller: the user a valid token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user's name.
    pub user: String,
    /// Whether the user holds the `prepare` capability.
    pub prepare: bool,
    /// The id of the API token used (`csg token list` shows it); 0 for a caller of the
    /// identity provider ([`Principal::provider`]).
    pub token_id: i64,
    /// What the identity provider's access token carried, for a caller signed in through it
    /// (A-5, issue 44); `None` for an API token of this server.
    pub provider: Option<ProviderGrant>,
}

/// What an identity provider's access token granted its caller (A-5, issue 44).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderGrant {
    /// The provider's name of the user (`sub`).
    pub subject: String,
    /// The scopes the token grants.
    pub scopes: Vec<String>,
    /// The groups the token lists.
    pub groups: Vec<String>,
}

/// A token that was just created: the only time its secret is known.
#[derive(Clone, PartialEq, Eq)]
pub struct NewToken {
    /// What `csg token list` will show about it.
    pub info: TokenInfo,
    /// The token itself, to hand to the user once.
    pub secret: String,
}

impl fmt::Debug for NewToken {
    // Never print the secret by accident (logs, test failures).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewToken")
            .field("info", &self.info)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// A website session that was just started: the only time its id exists outside the
/// visitor's cookie (it is stored as its SHA-256).
#[derive(Clone, PartialEq, Eq)]
pub struct NewSession {
    /// The session id, for the visitor's cookie: 64 hex digits.
    pub id: String,
    /// Who signed in.
    pub principal: Principal,
}

impl fmt::Debug for NewSession {
    // Never print the id by accident: it is a credential while the session lives.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewSession")
            .field("id", &"<redacted>")
            .field("principal", &self.principal)
            .finish()
    }
}

/// Why an access-store operation failed. Messages are fit for the caller: no host paths,
/// no SQLite detail (that goes to the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The presented bearer value is not shaped like an API token of this server.
    #[error(
        "the bearer token is not an API token of this server (they start with `{TOKEN_PREFIX}`); \
         create one with `csg token create USER`"
    )]
    Malformed,
    /// No active token has this hash: unknown, or revoked.
    #[error(
        "the API token is unknown or was revoked; create a new one with `csg token create USER`"
    )]
    InvalidToken,
    /// No live website session has this id: never started, signed out, unused longer than
    /// [`SESSION_IDLE`], or its token was revoked or its user removed.
    #[error(
        "the website session has ended (signed out, unused for 12 hours, or its API token was \
         revoked); sign in again"
    )]
    SessionEnded,
    /// The view does not know this session or token, and the database may not be asked now:
    /// this client's look-ups of unknown ones are spent (or, under a flood from many
    /// addresses, those of all). Says nothing about the credential: it may be one another
    /// replica made a moment ago. A website visitor browses anonymously this once and keeps
    /// the cookie; an API caller retries after `retry_after` seconds (issue 43 finding 3).
    #[error(
        "this server does not know the session or API token yet (another replica may have \
         made it a moment ago) and cannot look it up now: too many unknown ones were presented \
         (from this address, or to this server in all); try again in {retry_after} s"
    )]
    UnknownNow {
        /// Whole seconds until a look-up may be made again.
        retry_after: u64,
    },
    /// A user name that breaks the naming rule.
    #[error(
        "invalid user name {0:?}: use 1 to 64 letters, digits, `.`, `_` or `-`, starting with a \
         letter or digit"
    )]
    InvalidUserName(String),
    /// A group name that breaks the naming rule.
    #[error("invalid group name {0:?}: use 1 to 256 bytes without control characters")]
    InvalidGroupName(String),
    /// A token name that breaks the naming rule.
    #[error("invalid token name {0:?}: use 1 to 64 printable characters without control codes")]
    InvalidTokenName(String),
    /// No such user.
    #[error("unknown user {0:?}; `csg user list` shows the users")]
    UnknownUser(String),
    /// The user exists already.
    #[error("the user {0:?} exists already")]
    UserExists(String),
    /// No token with this id.
    #[error("no token with id {0}; `csg token list` shows the tokens")]
    UnknownToken(i64),
    /// The user has an active token of this name.
    #[error("{user:?} already has an active token named {name:?}; pick another --name")]
    TokenNameTaken {
        /// The user.
        user: String,
        /// The name.
        name: String,
    },
    /// The metadata database failed; the detail is in the log.
    #[error("the access store failed ({0}); see the server log")]
    Storage(String),
    /// The shared metadata database (PostgreSQL, cluster mode) cannot be reached. Checks of
    /// tokens and grants keep answering from the last view; this operation needs the
    /// database. The text says what is refused until when.
    #[error("the metadata database is unreachable; {0}")]
    Unavailable(String),
    /// The tables were written by a newer `csg`, whose schema this one does not know.
    #[error(
        "the access tables are at schema version {found}, newer than this csg knows ({known}); \
         run the newer csg"
    )]
    SchemaTooNew {
        /// The version in the database.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
}
