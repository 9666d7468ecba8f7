//! The access tables in a cluster's shared PostgreSQL database (issue 31): every replica
//! reads and writes the same rows through `metadb`.
//!
//! Times are `BIGINT` seconds since the Unix epoch, as in SQLite, so both backends store
//! and answer the same values. Ids are `BIGSERIAL`, token hashes `BYTEA`. The column naming
//! a user is `user_name`: `user` is a reserved word in PostgreSQL. Listings sort with the
//! `C` collation, byte order, as SQLite does, whatever the database's collation.
//!
//! Every write transaction announces itself on the topic [`TOPIC`]; each replica's store
//! reloads its view when told (see `reload.rs`). Last-use times are not announced: no view
//! holds them, and announcing them would make every replica reload for each token used.

use crate::backend::{
    AccessBackend, PROVIDER_TOKEN_NAME, SessionRow, View, default_token_name, join_names,
    provider_grant, storage,
};
use crate::records::{GrantInfo, TokenInfo, UserInfo, from_secs};
use crate::token::{SessionHash, TokenHash};
use crate::{Error, ProviderGrant};
use arc_swap::ArcSwap;
use metadb::postgres::error::SqlState;
use metadb::postgres::{self, Client, IsolationLevel, Transaction};

/// The change topic of the access tables.
pub(crate) const TOPIC: &str = "access";

/// The schema's history (component `access`). A later change is a new entry, never an edit.
const MIGRATIONS: &[metadb::Migration] = &[
    metadb::Migration {
        version: 1,
        name: "users, tokens and grants",
        sql: "
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    prepare BOOLEAN NOT NULL DEFAULT FALSE,
    created BIGINT NOT NULL
);
CREATE TABLE tokens (
    id BIGSERIAL PRIMARY KEY,
    user_name TEXT NOT NULL,
    name TEXT NOT NULL,
    hash BYTEA NOT NULL UNIQUE,
    created BIGINT NOT NULL,
    last_used BIGINT,
    revoked BIGINT
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (user_name, name) WHERE revoked IS NULL;
CREATE INDEX tokens_user ON tokens (user_name);
CREATE TABLE grants (
    user_name TEXT NOT NULL,
    repo TEXT NOT NULL,
    created BIGINT NOT NULL,
    PRIMARY KEY (user_name, repo)
);
CREATE INDEX grants_repo ON grants (repo);
",
    },
    metadb::Migration {
        version: 2,
        name: "website sessions",
        // Keyed by the SHA-256 of the session id (the cookie value); the token by its id.
        sql: "
CREATE TABLE sessions (
    hash BYTEA PRIMARY KEY,
    token_id BIGINT NOT NULL,
    created BIGINT NOT NULL,
    last_seen BIGINT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);
CREATE INDEX sessions_last_seen ON sessions (last_seen);
",
    },
    metadb::Migration {
        version: 3,
        name: "identity-provider grants of website sign-ins",
        // What the provider granted a user at their last website sign-in, on the token their
        // sessions hang on (issue 44): names one a line.
        sql: "
CREATE TABLE provider_grants (
    token_id BIGINT PRIMARY KEY,
    subject TEXT NOT NULL,
    scopes TEXT NOT NULL,
    groups TEXT NOT NULL,
    updated BIGINT NOT NULL
);
",
    },
    metadb::Migration {
        version: 4,
        name: "group grants",
        // Read of a repository for the members of an identity provider's group (issue 44).
        sql: "
CREATE TABLE group_grants (
    group_name TEXT NOT NULL,
    repo TEXT NOT NULL,
    created BIGINT NOT NULL,
    PRIMARY KEY (group_name, repo)
);
CREATE INDEX group_grants_repo ON group_grants (repo);
",
    },
];

/// The longest a request waits for a look-up the view could not answer (a token or website
/// session another replica made a moment ago): far below the call timeout, which an
/// operator's write may use up.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// What refused writes say.
const WRITES: &str = "writes (users, tokens, grants, sign-ins) are refused until it is back; \
                      tokens, grants and sessions already known keep working";
/// What a session check that needed the database says.
const SESSIONS: &str = "a website session this replica has not seen yet cannot be checked \
                        until it is back; sessions already known keep working";
/// What a token check that needed the database says.
const TOKENS: &str = "a token this replica has not seen yet cannot be checked until it is \
                      back; tokens already known keep working";
/// What refused listings say.
const LISTINGS: &str = "users, tokens and grants cannot be listed until it is back; tokens and \
                        grants already known keep working";

/// Why a call failed: an answer of the rules (an unknown user, say), or the database.
enum Failure {
    Answer(Error),
    Database(metadb::Error),
}

impl From<metadb::Error> for Failure {
    fn from(e: metadb::Error) -> Self {
        Failure::Database(e)
    }
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        // Through metadb, so a lost connection stays recognisable as one.
        Failure::Database(metadb::Error::from(e))
    }
}

/// Users, tokens and grants in PostgreSQL.
pub(crate) struct PgAccess {
    db: metadb::Database,
}

impl PgAccess {
    /// The grants a listing query selects (grantee, repository).
    fn listed_grants(&self, sql: &'static str) -> Result<Vec<GrantInfo>, Error> {
        self.call("listing grants", LISTINGS, move |client| {
            let rows = client.query(sql, &[])?;
            let mut grants = Vec::with_capacity(rows.len());
            for row in rows {
                grants.push(GrantInfo {
                    user: row.try_get(0)?,
                    repo: row.try_get(1)?,
                });
            }
            Ok(grants)
        })
    }

    /// Brings the tables to the newest schema; fails if the database cannot be reached.
    pub(crate) fn open(db: metadb::Database) -> Result<Self, Error> {
        db.migrate(TOPIC, MIGRATIONS).map_err(|e| match e {
            metadb::Error::Unreachable(_) => {
                tracing::warn!(error = %e, "access: cannot create the access tables");
                Error::Unavailable(
                    "the access store cannot be opened until it is back; check --database and \
                     that PostgreSQL is running"
                        .to_owned(),
                )
            }
            metadb::Error::Refused(_) => {
                tracing::warn!(error = %e, "access: cannot create the access tables");
                Error::Storage(
                    "PostgreSQL refused the login: check the user, password and database name \
                     in --database (CSG_DATABASE_URL)"
                        .to_owned(),
                )
            }
            // Its message says what to do (a newer csg migrated the database, say) and
            // carries neither the URL nor a password.
            other => {
                tracing::warn!(error = %other, "access: cannot create the access tables");
                Error::Storage(other.to_string())
            }
        })?;
        Ok(Self { db })
    }

    /// Runs `work` on a connection; `refused` says what an unreachable database refuses.
    fn call<T: Send + 'static>(
        &self,
        what: &'static str,
        refused: &'static str,
        work: impl FnOnce(&mut Client) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Error> {
        Self::failed(what, refused, self.db.run_with(work))
    }

    /// [`PgAccess::call`] for a look-up on a request's path: it gives up after
    /// [`LOOKUP_TIMEOUT`], so a slow or locked database delays a caller the view could not
    /// answer by at most that.
    fn look_up<T: Send + 'static>(
        &self,
        what: &'static str,
        refused: &'static str,
        work: impl FnOnce(&mut Client) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Error> {
        Self::failed(what, refused, self.db.run_within(LOOKUP_TIMEOUT, work))
    }

    fn failed<T>(
        what: &'static str,
        refused: &'static str,
        outcome: Result<T, Failure>,
    ) -> Result<T, Error> {
        outcome.map_err(|failure| match failure {
            Failure::Answer(answer) => answer,
            Failure::Database(e)
                if matches!(e, metadb::Error::Unreachable(_) | metadb::Error::Refused(_)) =>
            {
                tracing::debug!(error = %e, "access: {what}");
                Error::Unavailable(refused.to_owned())
            }
            Failure::Database(e) => storage(what)(e),
        })
    }

    /// Runs `change` in a transaction that announces itself on [`TOPIC`] at commit.
    fn write<T: Send + 'static>(
        &self,
        what: &'static str,
        change: impl FnOnce(&mut Transaction<'_>) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Error> {
        self.call(what, WRITES, move |client| {
            let mut tx = client.transaction()?;
            let value = change(&mut tx)?;
            metadb::Database::notify_change(&mut tx, TOPIC)?;
            tx.commit()?;
            Ok(value)
        })
    }
}

/// Locks the row of `user` (`FOR UPDATE` or `FOR KEY SHARE`) inside a write; answers
/// whether it exists. Holding the row keeps a concurrent removal of the user from slipping
/// between the check and the write.
fn lock_user(tx: &mut Transaction<'_>, user: &str, mode: &'static str) -> Result<bool, Failure> {
    let sql = format!("SELECT 1 FROM users WHERE name = $1 FOR {mode}");
    Ok(tx.query_opt(sql.as_str(), &[&user])?.is_some())
}

fn token_info(row: &postgres::Row) -> Result<TokenInfo, postgres::Error> {
    Ok(TokenInfo {
        id: row.try_get(0)?,
        user: row.try_get(1)?,
        name: row.try_get(2)?,
        created: from_secs(row.try_get(3)?),
        last_used: row.try_get::<_, Option<i64>>(4)?.map(from_secs),
        revoked: row.try_get::<_, Option<i64>>(5)?.map(from_secs),
    })
}

impl AccessBackend for PgAccess {
    /// One repeatable-read snapshot of the three tables.
    fn load(&self) -> Result<View, Error> {
        self.call("reading the access tables", LISTINGS, |client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let mut view = View::default();
            for row in tx.query(
                "SELECT id, user_name, hash FROM tokens WHERE revoked IS NULL",
                &[],
            )? {
                let hash: Vec<u8> = row.try_get(2)?;
                if let Ok(hash) = TokenHash::try_from(hash.as_slice()) {
                    view.tokens.insert(hash, (row.try_get(0)?, row.try_get(1)?));
                }
            }
            for row in tx.query("SELECT name, prepare FROM users", &[])? {
                view.users.insert(row.try_get(0)?, row.try_get(1)?);
            }
            for row in tx.query("SELECT user_name, repo FROM grants", &[])? {
                view.grants.insert((row.try_get(0)?, row.try_get(1)?));
            }
            for row in tx.query("SELECT group_name, repo FROM group_grants", &[])? {
                let (group, repo): (String, String) = (row.try_get(0)?, row.try_get(1)?);
                view.group_grants.entry(repo).or_default().insert(group);
            }
            for row in tx.query(
                "SELECT s.hash, s.token_id, t.user_name, s.last_seen, p.subject, p.scopes, p.groups
                 FROM sessions s JOIN tokens t ON t.id = s.token_id
                 LEFT JOIN provider_grants p ON p.token_id = s.token_id
                 WHERE t.revoked IS NULL",
                &[],
            )? {
                let hash: Vec<u8> = row.try_get(0)?;
                if let Ok(hash) = SessionHash::try_from(hash.as_slice()) {
                    let session = SessionRow {
                        token_id: row.try_get(1)?,
                        user: row.try_get(2)?,
                        last_seen: row.try_get(3)?,
                        provider: provider_grant(row.try_get(4)?, row.try_get(5)?, row.try_get(6)?),
                    };
                    view.sessions.insert(hash, session);
                }
            }
            tx.commit()?;
            Ok(view)
        })
    }

    /// Nothing to ask: changes are announced, and the store's thread reloads.
    fn refresh(&self, _view: &ArcSwap<View>) -> Result<(), Error> {
        Ok(())
    }

    fn add_user(&self, name: &str, prepare: bool, created: i64) -> Result<(), Error> {
        let name = name.to_owned();
        self.write("adding a user", move |tx| {
            let added = tx.execute(
                "INSERT INTO users (name, prepare, created) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
                &[&name, &prepare, &created],
            )?;
            if added == 0 {
                return Err(Failure::Answer(Error::UserExists(name)));
            }
            Ok(())
        })
    }

    fn set_prepare(&self, name: &str, prepare: bool) -> Result<(), Error> {
        let name = name.to_owned();
        self.write("changing a user", move |tx| {
            let changed = tx.execute(
                "UPDATE users SET prepare = $2 WHERE name = $1",
                &[&name, &prepare],
            )?;
            if changed == 0 {
                return Err(Failure::Answer(Error::UnknownUser(name)));
            }
            Ok(())
        })
    }

    fn remove_user(&self, name: &str, now: i64) -> Result<(), Error> {
        let name = name.to_owned();
        self.write("removing a user", move |tx| {
            if tx.execute("DELETE FROM users WHERE name = $1", &[&name])? == 0 {
                return Err(Failure::Answer(Error::UnknownUser(name)));
            }
            tx.execute(
                "DELETE FROM sessions WHERE token_id IN (SELECT id FROM tokens WHERE user_name = $1)",
                &[&name],
            )?;
            tx.execute(
                "UPDATE tokens SET revoked = $2 WHERE user_name = $1 AND revoked IS NULL",
                &[&name, &now],
            )?;
            tx.execute("DELETE FROM grants WHERE user_name = $1", &[&name])?;
            Ok(())
        })
    }

    fn users(&self) -> Result<Vec<UserInfo>, Error> {
        self.call("listing users", LISTINGS, |client| {
            let rows = client.query(
                "SELECT name, prepare, created FROM users ORDER BY name COLLATE \"C\"",
                &[],
            )?;
            let mut users = Vec::with_capacity(rows.len());
            for row in rows {
                users.push(UserInfo {
                    name: row.try_get(0)?,
                    prepare: row.try_get(1)?,
                    created: from_secs(row.try_get(2)?),
                });
            }
            Ok(users)
        })
    }

    fn create_token(
        &self,
        user: &str,
        name: Option<&str>,
        hash: &TokenHash,
        created: i64,
    ) -> Result<TokenInfo, Error> {
        let (user, name, hash) = (user.to_owned(), name.map(str::to_owned), hash.to_vec());
        self.write("creating a token", move |tx| {
            // FOR UPDATE: two creations for one user take turns, so the default name counts
            // every token before it.
            if !lock_user(tx, &user, "UPDATE")? {
                return Err(Failure::Answer(Error::UnknownUser(user)));
            }
            let name = match name {
                Some(name) => name,
                None => {
                    let count: i64 = tx
                        .query_one("SELECT count(*) FROM tokens WHERE user_name = $1", &[&user])?
                        .try_get(0)?;
                    default_token_name(count)
                }
            };
            let inserted = tx.query_one(
                "INSERT INTO tokens (user_name, name, hash, created) VALUES ($1, $2, $3, $4)
                 RETURNING id",
                &[&user, &name, &hash, &created],
            );
            let id: i64 = match inserted {
                Ok(row) => row.try_get(0)?,
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(Failure::Answer(Error::TokenNameTaken { user, name }));
                }
                Err(e) => return Err(e.into()),
            };
            Ok(TokenInfo {
                id,
                user,
                name,
                created: from_secs(created),
                last_used: None,
                revoked: None,
            })
        })
    }

    fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, Error> {
        let user = user.map(str::to_owned);
        self.call("listing tokens", LISTINGS, move |client| {
            let rows = client.query(
                "SELECT id, user_name, name, created, last_used, revoked FROM tokens
                 WHERE $1::TEXT IS NULL OR user_name = $1 ORDER BY id",
                &[&user],
            )?;
            let mut tokens = Vec::with_capacity(rows.len());
            for row in rows {
                tokens.push(token_info(&row)?);
            }
            Ok(tokens)
        })
    }

    fn revoke_token(&self, id: i64, now: i64) -> Result<(), Error> {
        self.write("revoking a token", move |tx| {
            let changed = tx.query_opt(
                "UPDATE tokens SET revoked = coalesce(revoked, $2) WHERE id = $1 RETURNING id",
                &[&id, &now],
            )?;
            if changed.is_none() {
                return Err(Failure::Answer(Error::UnknownToken(id)));
            }
            tx.execute("DELETE FROM sessions WHERE token_id = $1", &[&id])?;
            Ok(())
        })
    }

    fn grant(&self, user: &str, repo: &str, now: i64) -> Result<(), Error> {
        let (user, repo) = (user.to_owned(), repo.to_owned());
        self.write("granting", move |tx| {
            if !lock_user(tx, &user, "KEY SHARE")? {
                return Err(Failure::Answer(Error::UnknownUser(user)));
            }
            tx.execute(
                "INSERT INTO grants (user_name, repo, created) VALUES ($1, $2, $3)
                 ON CONFLICT (user_name, repo) DO NOTHING",
                &[&user, &repo, &now],
            )?;
            Ok(())
        })
    }

    fn ungrant(&self, user: &str, repo: &str) -> Result<bool, Error> {
        let (user, repo) = (user.to_owned(), repo.to_owned());
        self.write("taking a grant back", move |tx| {
            let removed = tx.execute(
                "DELETE FROM grants WHERE user_name = $1 AND repo = $2",
                &[&user, &repo],
            )?;
            Ok(removed > 0)
        })
    }

    fn grant_group(&self, group: &str, repo: &str, now: i64) -> Result<(), Error> {
        let (group, repo) = (group.to_owned(), repo.to_owned());
        self.write("granting to a group", move |tx| {
            tx.execute(
                "INSERT INTO group_grants (group_name, repo, created) VALUES ($1, $2, $3)
                 ON CONFLICT (group_name, repo) DO NOTHING",
                &[&group, &repo, &now],
            )?;
            Ok(())
        })
    }

    fn ungrant_group(&self, group: &str, repo: &str) -> Result<bool, Error> {
        let (group, repo) = (group.to_owned(), repo.to_owned());
        self.write("taking a group grant back", move |tx| {
            let removed = tx.execute(
                "DELETE FROM group_grants WHERE group_name = $1 AND repo = $2",
                &[&group, &repo],
            )?;
            Ok(removed > 0)
        })
    }

    fn group_grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.listed_grants(
            "SELECT group_name, repo FROM group_grants
             ORDER BY group_name COLLATE \"C\", repo COLLATE \"C\"",
        )
    }

    fn forget_repo(&self, repo: &str) -> Result<(), Error> {
        let repo = repo.to_owned();
        self.write("dropping grants", move |tx| {
            tx.execute("DELETE FROM grants WHERE repo = $1", &[&repo])?;
            tx.execute("DELETE FROM group_grants WHERE repo = $1", &[&repo])?;
            Ok(())
        })
    }

    fn grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.listed_grants(
            "SELECT user_name, repo FROM grants
             ORDER BY user_name COLLATE \"C\", repo COLLATE \"C\"",
        )
    }

    /// Runs on the store's thread, never on a request's. Not announced (see the module).
    fn note_use(&self, id: i64, at: i64) -> Result<(), Error> {
        self.call("recording a token's last use", WRITES, move |client| {
            client.execute(
                "UPDATE tokens SET last_used = $2 WHERE id = $1",
                &[&id, &at],
            )?;
            Ok(())
        })
        .inspect_err(|error| tracing::debug!(%error, "access: last-use time not written this time"))
    }

    fn create_session(
        &self,
        hash: &SessionHash,
        token_id: i64,
        now: i64,
        idle_before: i64,
        per_token: i64,
    ) -> Result<(), Error> {
        let hash = hash.to_vec();
        self.write("starting a session", move |tx| {
            // FOR SHARE: a revocation of the token (an UPDATE of its row) waits for this
            // sign-in, whose session its DELETE then sees; or this waits for the revocation
            // and finds the token revoked. (A session of a revoked token would be harmless
            // anyway: the view only holds sessions of active tokens.)
            let active = tx.query_opt(
                "SELECT 1 FROM tokens WHERE id = $1 AND revoked IS NULL FOR SHARE",
                &[&token_id],
            )?;
            if active.is_none() {
                return Err(Failure::Answer(Error::InvalidToken));
            }
            tx.execute("DELETE FROM sessions WHERE last_seen < $1", &[&idle_before])?;
            tx.execute(
                "INSERT INTO sessions (hash, token_id, created, last_seen) VALUES ($1, $2, $3, $3)",
                &[&hash, &token_id, &now],
            )?;
            tx.execute(
                "DELETE FROM sessions WHERE token_id = $1 AND hash NOT IN (
                     SELECT hash FROM sessions WHERE token_id = $1
                     ORDER BY last_seen DESC, created DESC LIMIT $2)",
                &[&token_id, &per_token],
            )?;
            Ok(())
        })
    }

    fn provider_token(
        &self,
        user: &str,
        grant: &ProviderGrant,
        hash: &TokenHash,
        now: i64,
    ) -> Result<i64, Error> {
        let (user, hash) = (user.to_owned(), hash.to_vec());
        let (subject, scopes, groups) = (
            grant.subject.clone(),
            join_names(&grant.scopes),
            join_names(&grant.groups),
        );
        self.write("signing in through the identity provider", move |tx| {
            // FOR UPDATE: two first sign-ins of one user take turns, so one token is made.
            if !lock_user(tx, &user, "UPDATE")? {
                return Err(Failure::Answer(Error::UnknownUser(user)));
            }
            let existing = tx.query_opt(
                "SELECT id FROM tokens WHERE user_name = $1 AND name = $2 AND revoked IS NULL",
                &[&user, &PROVIDER_TOKEN_NAME],
            )?;
            let id: i64 = match existing {
                Some(row) => row.try_get(0)?,
                None => tx
                    .query_one(
                        "INSERT INTO tokens (user_name, name, hash, created)
                         VALUES ($1, $2, $3, $4) RETURNING id",
                        &[&user, &PROVIDER_TOKEN_NAME, &hash, &now],
                    )?
                    .try_get(0)?,
            };
            tx.execute(
                "INSERT INTO provider_grants (token_id, subject, scopes, groups, updated)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (token_id) DO UPDATE SET subject = excluded.subject,
                     scopes = excluded.scopes, groups = excluded.groups, updated = excluded.updated",
                &[&id, &subject, &scopes, &groups, &now],
            )?;
            Ok(id)
        })
    }

    fn end_session(&self, hash: &SessionHash) -> Result<(), Error> {
        let hash = hash.to_vec();
        self.write("ending a session", move |tx| {
            tx.execute("DELETE FROM sessions WHERE hash = $1", &[&hash])?;
            Ok(())
        })
    }

    fn find_session(&self, hash: &SessionHash) -> Result<Option<(SessionRow, bool)>, Error> {
        let hash = hash.to_vec();
        self.look_up("reading a session", SESSIONS, move |client| {
            let row = client.query_opt(
                "SELECT s.token_id, t.user_name, s.last_seen, u.prepare, p.subject, p.scopes,
                     p.groups
                 FROM sessions s JOIN tokens t ON t.id = s.token_id
                 JOIN users u ON u.name = t.user_name
                 LEFT JOIN provider_grants p ON p.token_id = s.token_id
                 WHERE s.hash = $1 AND t.revoked IS NULL",
                &[&hash],
            )?;
            let Some(row) = row else {
                return Ok(None);
            };
            let session = SessionRow {
                token_id: row.try_get(0)?,
                user: row.try_get(1)?,
                last_seen: row.try_get(2)?,
                provider: provider_grant(row.try_get(4)?, row.try_get(5)?, row.try_get(6)?),
            };
            Ok(Some((session, row.try_get(3)?)))
        })
    }

    fn find_token(&self, hash: &TokenHash) -> Result<Option<(i64, String, bool)>, Error> {
        let hash = hash.to_vec();
        self.look_up("reading a token", TOKENS, move |client| {
            let row = client.query_opt(
                "SELECT t.id, t.user_name, u.prepare FROM tokens t
                 JOIN users u ON u.name = t.user_name
                 WHERE t.hash = $1 AND t.revoked IS NULL",
                &[&hash],
            )?;
            match row {
                Some(row) => Ok(Some((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))),
                None => Ok(None),
            }
        })
    }

    /// Runs on the store's thread, never on a request's. Not announced, as last uses.
    fn note_seen(&self, hash: &SessionHash, at: i64) -> Result<(), Error> {
        let hash = hash.to_vec();
        self.call("recording a session's last use", WRITES, move |client| {
            client.execute(
                "UPDATE sessions SET last_seen = greatest(last_seen, $2) WHERE hash = $1",
                &[&hash, &at],
            )?;
            Ok(())
        })
        .inspect_err(
            |error| tracing::debug!(%error, "access: a session's last use not written this time"),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::{AccessStore, Error};
    use metadb::postgres::{Client, NoTls};
    use metadb::testing::within;
    use std::time::{Duration, Instant};

    /// Issue 31 behaviour 5: a token another replica created a moment ago works here at its
    /// first call, before the announcement has reloaded this view: a token the view lacks is
    /// looked up. The row is written behind the store's back (no announcement at all), so
    /// only the look-up can find it; a made-up token stays refused, and a revoked one (its
    /// row says so) is not brought back by the look-up.
    #[test]
    fn a_token_made_elsewhere_works_before_its_announcement() {
        within(Duration::from_secs(60), || {
            let url = metadb::testing::shared().create_database();
            let db = metadb::Database::connect(&url, metadb::Options::default()).expect("connect");
            let store = AccessStore::open_postgres(db).expect("open");
            store.add_user("alice", true).expect("user");

            let secret = format!("csg_{}", "ab".repeat(32));
            let revoked = format!("csg_{}", "cd".repeat(32));
            let mut elsewhere =
                Client::connect(&url, NoTls).expect("a connection of the test's own");
            for (text, name, revoked_at) in
                [(&secret, "fresh", None), (&revoked, "old", Some(1_i64))]
            {
                elsewhere
                    .execute(
                        "INSERT INTO tokens (user_name, name, hash, created, revoked)
                         VALUES ('alice', $1, $2, 0, $3)",
                        &[&name, &crate::token::hash(text).to_vec(), &revoked_at],
                    )
                    .expect("a token row written elsewhere, unannounced");
            }

            assert!(store.may_know_more());
            let unseen = store.authenticate(&secret);
            assert!(
                matches!(unseen, Err(Error::InvalidToken)),
                "the view lacks it: {unseen:?}"
            );
            let principal = store
                .authenticate_in_database(&secret, None)
                .expect("found by the look-up");
            assert_eq!(
                (principal.user.as_str(), principal.prepare),
                ("alice", true)
            );
            let refused = store.authenticate_in_database(&revoked, None);
            assert!(matches!(refused, Err(Error::InvalidToken)), "{refused:?}");
            let made_up = store.authenticate_in_database(&format!("csg_{}", "ef".repeat(32)), None);
            assert!(matches!(made_up, Err(Error::InvalidToken)), "{made_up:?}");
        });
    }

    /// A store on a fresh database whose user `alice` has the token `secret`, written by
    /// another connection without an announcement: as another replica made it a moment ago,
    /// so the store's view does not know it.
    fn with_a_token_made_elsewhere(secret: &str) -> AccessStore {
        let url = metadb::testing::shared().create_database();
        let db = metadb::Database::connect(&url, metadb::Options::default()).expect("connect");
        let store = AccessStore::open_postgres(db).expect("open");
        store.add_user("alice", false).expect("user");
        let mut elsewhere = Client::connect(&url, NoTls).expect("a connection of the test's own");
        elsewhere
            .execute(
                "INSERT INTO tokens (user_name, name, hash, created) VALUES ('alice', 'new', $1, 0)",
                &[&crate::token::hash(secret).to_vec()],
            )
            .expect("a token row written elsewhere, unannounced");
        store
    }

    /// A-1, issue 43 finding 3: made-up tokens from one client address spend that client's
    /// look-ups only: beyond them it is told "unknown now" (retry), never "invalid", and a
    /// token another replica made a moment ago still works for another client at once.
    #[test]
    fn made_up_tokens_spend_only_their_clients_lookups() {
        within(Duration::from_secs(60), || {
            let secret = format!("csg_{}", "ab".repeat(32));
            let store = with_a_token_made_elsewhere(&secret);

            let flood: std::net::IpAddr = "192.0.2.1".parse().expect("an address");
            let (mut invalid, mut unknown) = (0, 0);
            for n in 0..100 {
                match store.authenticate_in_database(&format!("csg_{n:064x}"), Some(flood)) {
                    Err(Error::InvalidToken) => invalid += 1,
                    Err(Error::UnknownNow { retry_after }) if retry_after >= 1 => unknown += 1,
                    other => panic!("a made-up token answered {other:?}"),
                }
            }
            assert!(
                invalid >= 10 && unknown > 0,
                "{invalid} refused, {unknown} unknown"
            );
            let visitor: std::net::IpAddr = "192.0.2.2".parse().expect("an address");
            let principal = store
                .authenticate_in_database(&secret, Some(visitor))
                .expect("another client's look-up finds the new token");
            assert_eq!(principal.user, "alice");
        });
    }

    /// A-1, issue 43: signing in on the website with a token another replica made a moment
    /// ago (this replica's view does not know it yet) works: the token is looked up in the
    /// database, within the visitor's budget, as a bearer token is.
    #[test]
    fn a_session_starts_with_a_token_another_replica_just_made() {
        within(Duration::from_secs(60), || {
            let secret = format!("csg_{}", "cd".repeat(32));
            let store = with_a_token_made_elsewhere(&secret);
            assert_eq!(
                store.authenticate(&secret).map(|p| p.user),
                Err(Error::InvalidToken),
                "the view does not know it yet"
            );
            let visitor: std::net::IpAddr = "192.0.2.3".parse().expect("an address");
            let session = store
                .start_session_from(&secret, Some(visitor))
                .expect("signed in with the new token");
            assert_eq!(session.principal.user, "alice");
            assert_eq!(
                store.session(&session.id, Some(visitor)).map(|p| p.user),
                Ok("alice".to_owned())
            );
        });
    }

    /// A writer elsewhere holding every access table locked (a migration, an operator's
    /// `LOCK TABLE`): token, grant and known-session checks answer from the view at once; a
    /// check that must ask the database (an unknown session) and a write give up within the
    /// call timeout instead of waiting for the lock.
    #[test]
    fn checks_do_not_wait_for_a_locked_table() {
        within(Duration::from_secs(60), || {
            let url = metadb::testing::shared().create_database();
            let options = metadb::Options {
                call_timeout: Duration::from_millis(500),
                ..metadb::Options::default()
            };
            let db = metadb::Database::connect(&url, options).expect("connect");
            let store = AccessStore::open_postgres(db).expect("open");
            store.add_user("alice", false).expect("user");
            store.grant("alice", "acme/private").expect("grant");
            let token = store.create_token("alice", None).expect("token");
            let session = store.start_session(&token.secret).expect("sign in");

            let mut locker = Client::connect(&url, NoTls).expect("a connection of the test's own");
            let mut tx = locker.transaction().expect("begin");
            tx.batch_execute("LOCK TABLE users, tokens, grants, sessions IN ACCESS EXCLUSIVE MODE")
                .expect("lock");

            let started = Instant::now();
            assert_eq!(
                store.authenticate(&token.secret).expect("known").user,
                "alice"
            );
            assert!(store.granted("alice", "acme/private").expect("granted"));
            assert_eq!(
                store.session(&session.id, None).expect("signed in").user,
                "alice"
            );
            assert!(
                started.elapsed() < Duration::from_millis(200),
                "checks from the view waited {:?}",
                started.elapsed()
            );

            let started = Instant::now();
            let unknown = store.session("no-such-session", None);
            assert!(unknown.is_err(), "{unknown:?}");
            let refused = store.add_user("bob", false);
            assert!(matches!(refused, Err(Error::Storage(_))), "{refused:?}");
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "calls that need the database waited {:?}",
                started.elapsed()
            );

            tx.rollback().expect("unlock");
            store
                .add_user("bob", false)
                .expect("a write once the lock is gone");
        });
    }
}
