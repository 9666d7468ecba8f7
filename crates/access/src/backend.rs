//! The tables behind an [`AccessStore`](crate::AccessStore), one implementation per kind of
//! metadata database: [`SqliteAccess`](crate::sqlite::SqliteAccess) (one data directory,
//! the default) and [`PgAccess`](crate::pg::PgAccess) (replicas sharing PostgreSQL).
//!
//! A backend only stores and loads. The store keeps everything a decision needs in memory
//! (the [`View`]) and decides the rules both backends share: naming, timestamps, when the
//! last use is written. So both answer alike, and the same tests run against both.

use crate::records::{GrantInfo, TokenInfo, UserInfo};
use crate::token::{SessionHash, TokenHash};
use crate::{Error, ProviderGrant};
use arc_swap::ArcSwap;
use std::collections::{HashMap, HashSet};

/// A live website session as the view holds it: only those whose token is active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRow {
    /// The token it was signed in with.
    pub(crate) token_id: i64,
    /// The token's user.
    pub(crate) user: String,
    /// When it was last used, as last written (seconds since the epoch).
    pub(crate) last_seen: i64,
    /// What the identity provider granted, for a session signed in through it.
    pub(crate) provider: Option<ProviderGrant>,
}

/// The name of the token a user's website sign-ins through the identity provider hang on.
pub(crate) const PROVIDER_TOKEN_NAME: &str = "website sign-in (identity provider)";

/// A provider grant's scopes or groups as a column keeps them: one name a line (the names
/// hold no control characters, `oauth` drops those that do).
pub(crate) fn join_names(names: &[String]) -> String {
    names.join("\n")
}

/// [`join_names`] read back.
pub(crate) fn split_names(text: &str) -> Vec<String> {
    text.lines()
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A grant from its row's columns (`subject`, `scopes`, `groups`), if it has one.
pub(crate) fn provider_grant(
    subject: Option<String>,
    scopes: Option<String>,
    groups: Option<String>,
) -> Option<ProviderGrant> {
    Some(ProviderGrant {
        subject: subject?,
        scopes: split_names(&scopes.unwrap_or_default()),
        groups: split_names(&groups.unwrap_or_default()),
    })
}

/// What the decisions need, loaded at once from the tables.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Active tokens by hash: (id, user).
    pub(crate) tokens: HashMap<TokenHash, (i64, String)>,
    /// Website sessions of active tokens, by the hash of their id.
    pub(crate) sessions: HashMap<SessionHash, SessionRow>,
    /// Users and whether they hold `prepare`.
    pub(crate) users: HashMap<String, bool>,
    /// (user, repo) pairs.
    pub(crate) grants: HashSet<(String, String)>,
    /// The identity-provider groups granted each repository (issue 44), by repository.
    pub(crate) group_grants: HashMap<String, HashSet<String>>,
}

/// The users, tokens and grants tables of one metadata database. Times are whole seconds
/// since the Unix epoch, chosen by the store.
pub(crate) trait AccessBackend: Send + Sync {
    /// Reads what the decisions need, as one consistent snapshot.
    fn load(&self) -> Result<View, Error>;

    /// Called before each decision: replaces `view` if the tables may have changed and this
    /// backend learns that by asking (SQLite: the shared change counter, then
    /// `data_version`). A backend told of changes instead (PostgreSQL's notifications, see
    /// `reload.rs`) answers at once without touching its database.
    fn refresh(&self, view: &ArcSwap<View>) -> Result<(), Error>;

    /// Adds a user; [`Error::UserExists`] if the name is taken.
    fn add_user(&self, name: &str, prepare: bool, created: i64) -> Result<(), Error>;

    /// Gives or takes `prepare`; [`Error::UnknownUser`] if there is no such user.
    fn set_prepare(&self, name: &str, prepare: bool) -> Result<(), Error>;

    /// Removes a user, revoking their active tokens (at `now`) and dropping their grants and
    /// website sessions.
    fn remove_user(&self, name: &str, now: i64) -> Result<(), Error>;

    /// Every user, by name.
    fn users(&self) -> Result<Vec<UserInfo>, Error>;

    /// Stores a token of `user` by its hash, named `name` or `token-<n>` (n: the user's
    /// tokens so far, revoked ones included, plus one).
    fn create_token(
        &self,
        user: &str,
        name: Option<&str>,
        hash: &TokenHash,
        created: i64,
    ) -> Result<TokenInfo, Error>;

    /// Every token (of `user`, when given), by id.
    fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, Error>;

    /// Revokes token `id` at `now` if it is active, ending its website sessions;
    /// [`Error::UnknownToken`] if there is none.
    fn revoke_token(&self, id: i64, now: i64) -> Result<(), Error>;

    /// Grants `user` read on `repo`; [`Error::UnknownUser`] if there is no such user.
    fn grant(&self, user: &str, repo: &str, now: i64) -> Result<(), Error>;

    /// Takes a grant back; answers whether there was one.
    fn ungrant(&self, user: &str, repo: &str) -> Result<bool, Error>;

    /// Grants the members of the identity provider's group `group` read on `repo`.
    fn grant_group(&self, group: &str, repo: &str, now: i64) -> Result<(), Error>;

    /// Takes a group grant back; answers whether there was one.
    fn ungrant_group(&self, group: &str, repo: &str) -> Result<bool, Error>;

    /// Every group grant, by group then repository (as `GrantInfo`s whose `user` is the
    /// group).
    fn group_grants(&self) -> Result<Vec<GrantInfo>, Error>;

    /// Drops every grant on `repo`, of users and of groups.
    fn forget_repo(&self, repo: &str) -> Result<(), Error>;

    /// Every grant, by user then repository.
    fn grants(&self) -> Result<Vec<GrantInfo>, Error>;

    /// Records the last use of token `id`. SQLite runs this on the request path, so it never
    /// waits for a lock; PostgreSQL's runs on the store's own thread.
    fn note_use(&self, id: i64, at: i64) -> Result<(), Error>;

    /// Stores a website session of token `token_id` by the hash of its id, at `now`;
    /// [`Error::InvalidToken`] if the token is no longer active. In the same transaction,
    /// drops every session unused since `idle_before` and the oldest sessions of the token
    /// beyond `per_token` (this one included).
    fn create_session(
        &self,
        hash: &SessionHash,
        token_id: i64,
        now: i64,
        idle_before: i64,
        per_token: i64,
    ) -> Result<(), Error>;

    /// The active token `user`'s website sign-ins through the identity provider hang on
    /// ([`PROVIDER_TOKEN_NAME`]), its grant replaced by `grant`; made (with `hash`, a secret
    /// nobody keeps) if the user has none. [`Error::UnknownUser`] if there is no such user.
    fn provider_token(
        &self,
        user: &str,
        grant: &ProviderGrant,
        hash: &TokenHash,
        now: i64,
    ) -> Result<i64, Error>;

    /// Ends the session of this hash, if there is one.
    fn end_session(&self, hash: &SessionHash) -> Result<(), Error>;

    /// The session of this hash as the database has it now, with whether its user holds
    /// `prepare`; `None` if there is none, or its token is revoked or its user gone. Asked
    /// only when the view cannot answer: a session another replica started a moment ago, or
    /// used since this view was loaded (last uses are not announced).
    fn find_session(&self, hash: &SessionHash) -> Result<Option<(SessionRow, bool)>, Error>;

    /// The active token of this hash as the database has it now: its id, its user and
    /// whether the user holds `prepare`; `None` if there is none, or it is revoked. Asked
    /// only when the view lacks it and changes are pushed (PostgreSQL): a token another
    /// replica created a moment ago, before its announcement arrived here.
    fn find_token(&self, hash: &TokenHash) -> Result<Option<(i64, String, bool)>, Error>;

    /// Records the last use of a session, as [`AccessBackend::note_use`] does for tokens.
    fn note_seen(&self, hash: &SessionHash, at: i64) -> Result<(), Error>;
}

/// Logs the detail and answers the generic storage error (no SQL text, paths or URLs reach
/// the caller).
pub(crate) fn storage<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| {
        tracing::warn!(error = %e, "access: {what}");
        Error::Storage(what.to_owned())
    }
}

/// The default name of a user's next token, `count` tokens (revoked ones included) in.
pub(crate) fn default_token_name(count: i64) -> String {
    format!("token-{}", count + 1)
}
