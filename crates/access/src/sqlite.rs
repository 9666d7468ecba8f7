//! The access tables in the embedded metadata database, `<data>/csg.sqlite`, shared with the
//! registry (`gitstore`) and with every `csg` process on the data directory.

use crate::backend::{
    AccessBackend, PROVIDER_TOKEN_NAME, SessionRow, View, default_token_name, join_names,
    provider_grant, storage,
};
use crate::records::{GrantInfo, TokenInfo, UserInfo, from_secs};
use crate::tables::lock;
use crate::token::{SessionHash, TokenHash};
use crate::{Error, ProviderGrant};
use arc_swap::ArcSwap;
use changecounter::{Changes, Seen};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One schema change: applied once, in order, recorded in `access_migrations`.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// The schema's history. Version 1 is the schema from before versions were recorded; its
/// `IF NOT EXISTS` lets it run over a data directory of that time and change nothing.
/// A later change is a new entry, never an edit of an old one.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "users, tokens and grants",
        sql: "
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY NOT NULL,
    prepare INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user TEXT NOT NULL,
    name TEXT NOT NULL,
    hash BLOB NOT NULL UNIQUE,
    created INTEGER NOT NULL,
    last_used INTEGER,
    revoked INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS tokens_active_name ON tokens (user, name)
    WHERE revoked IS NULL;
CREATE TABLE IF NOT EXISTS grants (
    user TEXT NOT NULL,
    repo TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (user, repo)
);
",
    },
    Migration {
        version: 2,
        name: "website sessions",
        // Keyed by the SHA-256 of the session id (the cookie value); the token by its id.
        sql: "
CREATE TABLE sessions (
    hash BLOB PRIMARY KEY NOT NULL,
    token_id INTEGER NOT NULL,
    created INTEGER NOT NULL,
    last_seen INTEGER NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);
CREATE INDEX sessions_last_seen ON sessions (last_seen);
",
    },
    Migration {
        version: 3,
        name: "identity-provider grants of website sign-ins",
        // What the provider granted a user at their last website sign-in, on the token their
        // sessions hang on (issue 44): names one a line.
        sql: "
CREATE TABLE provider_grants (
    token_id INTEGER PRIMARY KEY NOT NULL,
    subject TEXT NOT NULL,
    scopes TEXT NOT NULL,
    groups TEXT NOT NULL,
    updated INTEGER NOT NULL
);
",
    },
    Migration {
        version: 4,
        name: "group grants",
        // Read of a repository for the members of an identity provider's group (issue 44).
        sql: "
CREATE TABLE group_grants (
    group_name TEXT NOT NULL,
    repo TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (group_name, repo)
);
",
    },
];

/// The versions applied, a table of this crate's own: the file is shared with the registry,
/// whose schema is versioned separately, so neither can use the file's `user_version`.
const MIGRATIONS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS access_migrations (
    version INTEGER PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    applied INTEGER NOT NULL
);
";

/// Users, tokens and grants in SQLite.
pub(crate) struct SqliteAccess {
    conn: Mutex<Connection>,
    /// The readers' connection, never used for a write: `PRAGMA data_version` and the reload
    /// of the view (see `gitstore`'s metadata: the same scheme).
    watch: Mutex<Connection>,
    /// Last-use writes: a connection of their own that never waits for a lock.
    last_use: Mutex<Connection>,
    changes: Changes,
    seen: Mutex<Seen>,
}

fn open_connection(path: &Path, busy: Duration) -> Result<Connection, Error> {
    let conn = Connection::open(path).map_err(storage("opening the access store"))?;
    conn.busy_timeout(busy)
        .map_err(storage("configuring the access store"))?;
    Ok(conn)
}

/// Applies the migrations this file lacks, in one immediate transaction: two processes
/// opening the same data directory at once must not both apply one.
fn migrate(conn: &mut Connection, now: i64) -> Result<(), Error> {
    let fail = || storage("creating the access tables");
    let known = MIGRATIONS.last().map_or(0, |m| m.version);
    // Up to date, the usual case: a read, so opening never waits for another process's
    // write transaction.
    if applied(conn).map_err(fail())? == Some(known) {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(fail())?;
    tx.execute_batch(MIGRATIONS_TABLE).map_err(fail())?;
    let found = applied(&tx).map_err(fail())?.unwrap_or(0);
    if found > known {
        return Err(Error::SchemaTooNew { found, known });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.execute_batch(migration.sql).map_err(fail())?;
        tx.execute(
            "INSERT INTO access_migrations (version, name, applied) VALUES (?1, ?2, ?3)",
            params![migration.version, migration.name, now],
        )
        .map_err(fail())?;
    }
    tx.commit().map_err(fail())
}

/// The newest version applied; `None` before any was recorded.
fn applied(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    let recorded: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'access_migrations'",
        [],
        |r| r.get(0),
    )?;
    if !recorded {
        return Ok(None);
    }
    conn.query_row("SELECT max(version) FROM access_migrations", [], |r| {
        r.get(0)
    })
}

impl SqliteAccess {
    /// Opens the metadata database at `path`, bringing the access tables to the newest
    /// schema; the change counter is the file beside it (`csg.changes`).
    pub(crate) fn open(path: &Path, now: i64) -> Result<Self, Error> {
        let mut conn = open_connection(path, Duration::from_secs(10))?;
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(storage("configuring the access store"))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(storage("configuring the access store"))?;
        migrate(&mut conn, now)?;
        Ok(Self {
            watch: Mutex::new(open_connection(path, Duration::from_secs(10))?),
            last_use: Mutex::new(open_connection(path, Duration::ZERO)?),
            conn: Mutex::new(conn),
            changes: Changes::open(&path.with_extension("changes")),
            seen: Mutex::new(Seen::default()),
        })
    }

    /// Runs a change in an immediate transaction and tells every process.
    fn write<T>(
        &self,
        what: &'static str,
        change: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(storage(what))?;
        let value = change(&tx)?;
        tx.commit().map_err(storage(what))?;
        drop(conn);
        self.changes.bump();
        Ok(value)
    }

    /// The rows of one listing query, each mapped by `row`.
    fn list<T>(
        &self,
        what: &'static str,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, Error> {
        let conn = lock(&self.conn);
        let fail = || storage(what);
        let mut stmt = conn.prepare(sql).map_err(fail())?;
        let rows = stmt.query_map(params, row).map_err(fail())?;
        rows.collect::<Result<_, _>>().map_err(fail())
    }

    /// Whether `user` exists, inside a write.
    fn user_exists(
        tx: &rusqlite::Transaction<'_>,
        user: &str,
        what: &'static str,
    ) -> Result<bool, Error> {
        let known: Option<i64> = tx
            .query_row("SELECT 1 FROM users WHERE name = ?1", [user], |r| r.get(0))
            .optional()
            .map_err(storage(what))?;
        Ok(known.is_some())
    }
}

impl AccessBackend for SqliteAccess {
    /// Reads the tables on the readers' connection: in WAL mode it never waits for a writer,
    /// and a writer holding `conn` (waiting on another process's transaction, say) never
    /// keeps a check of a token or grant waiting.
    fn load(&self) -> Result<View, Error> {
        let conn = lock(&self.watch);
        let fail = || storage("reading the access tables");
        let mut view = View::default();
        let mut stmt = conn
            .prepare("SELECT id, user, hash FROM tokens WHERE revoked IS NULL")
            .map_err(fail())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                ))
            })
            .map_err(fail())?;
        for row in rows {
            let (id, user, hash) = row.map_err(fail())?;
            if let Ok(hash) = TokenHash::try_from(hash.as_slice()) {
                view.tokens.insert(hash, (id, user));
            }
        }
        let mut stmt = conn
            .prepare("SELECT name, prepare FROM users")
            .map_err(fail())?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, bool>(1)?)))
            .map_err(fail())?;
        for row in rows {
            let (name, prepare) = row.map_err(fail())?;
            view.users.insert(name, prepare);
        }
        let mut stmt = conn
            .prepare("SELECT user, repo FROM grants")
            .map_err(fail())?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(fail())?;
        for row in rows {
            view.grants.insert(row.map_err(fail())?);
        }
        let mut stmt = conn
            .prepare("SELECT group_name, repo FROM group_grants")
            .map_err(fail())?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(fail())?;
        for row in rows {
            let (group, repo): (String, String) = row.map_err(fail())?;
            view.group_grants.entry(repo).or_default().insert(group);
        }
        let mut stmt = conn
            .prepare(
                "SELECT s.hash, s.token_id, t.user, s.last_seen, p.subject, p.scopes, p.groups
                 FROM sessions s JOIN tokens t ON t.id = s.token_id
                 LEFT JOIN provider_grants p ON p.token_id = s.token_id
                 WHERE t.revoked IS NULL",
            )
            .map_err(fail())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, Vec<u8>>(0)?,
                    SessionRow {
                        token_id: row.get(1)?,
                        user: row.get(2)?,
                        last_seen: row.get(3)?,
                        provider: provider_grant(row.get(4)?, row.get(5)?, row.get(6)?),
                    },
                ))
            })
            .map_err(fail())?;
        for row in rows {
            let (hash, session) = row.map_err(fail())?;
            if let Ok(hash) = SessionHash::try_from(hash.as_slice()) {
                view.sessions.insert(hash, session);
            }
        }
        Ok(view)
    }

    /// A counter load when nothing changed; `data_version` at least once a second, and a
    /// reload only when it moved.
    fn refresh(&self, view: &ArcSwap<View>) -> Result<(), Error> {
        let mut seen = lock(&self.seen);
        seen.refresh(
            self.changes.current(),
            || {
                lock(&self.watch)
                    .query_row("PRAGMA data_version", [], |row| row.get(0))
                    .map_err(storage("reading the access store version"))
            },
            || {
                view.store(Arc::new(self.load()?));
                Ok(())
            },
        )
    }

    fn add_user(&self, name: &str, prepare: bool, created: i64) -> Result<(), Error> {
        self.write("adding a user", |tx| {
            let added = tx
                .execute(
                    "INSERT INTO users (name, prepare, created) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO NOTHING",
                    params![name, prepare, created],
                )
                .map_err(storage("adding a user"))?;
            if added == 0 {
                return Err(Error::UserExists(name.to_owned()));
            }
            Ok(())
        })
    }

    fn set_prepare(&self, name: &str, prepare: bool) -> Result<(), Error> {
        self.write("changing a user", |tx| {
            let changed = tx
                .execute(
                    "UPDATE users SET prepare = ?2 WHERE name = ?1",
                    params![name, prepare],
                )
                .map_err(storage("changing a user"))?;
            if changed == 0 {
                return Err(Error::UnknownUser(name.to_owned()));
            }
            Ok(())
        })
    }

    fn remove_user(&self, name: &str, now: i64) -> Result<(), Error> {
        self.write("removing a user", |tx| {
            let fail = || storage("removing a user");
            if tx
                .execute("DELETE FROM users WHERE name = ?1", [name])
                .map_err(fail())?
                == 0
            {
                return Err(Error::UnknownUser(name.to_owned()));
            }
            tx.execute(
                "DELETE FROM sessions WHERE token_id IN (SELECT id FROM tokens WHERE user = ?1)",
                [name],
            )
            .map_err(fail())?;
            tx.execute(
                "UPDATE tokens SET revoked = ?2 WHERE user = ?1 AND revoked IS NULL",
                params![name, now],
            )
            .map_err(fail())?;
            tx.execute("DELETE FROM grants WHERE user = ?1", [name])
                .map_err(fail())?;
            Ok(())
        })
    }

    fn users(&self) -> Result<Vec<UserInfo>, Error> {
        self.list(
            "listing users",
            "SELECT name, prepare, created FROM users ORDER BY name",
            [],
            |row| {
                Ok(UserInfo {
                    name: row.get(0)?,
                    prepare: row.get(1)?,
                    created: from_secs(row.get(2)?),
                })
            },
        )
    }

    fn create_token(
        &self,
        user: &str,
        name: Option<&str>,
        hash: &TokenHash,
        created: i64,
    ) -> Result<TokenInfo, Error> {
        self.write("creating a token", |tx| {
            let fail = || storage("creating a token");
            if !Self::user_exists(tx, user, "creating a token")? {
                return Err(Error::UnknownUser(user.to_owned()));
            }
            let name = match name {
                Some(name) => name.to_owned(),
                None => {
                    let count: i64 = tx
                        .query_row("SELECT count(*) FROM tokens WHERE user = ?1", [user], |r| {
                            r.get(0)
                        })
                        .map_err(fail())?;
                    default_token_name(count)
                }
            };
            let inserted = tx.execute(
                "INSERT INTO tokens (user, name, hash, created) VALUES (?1, ?2, ?3, ?4)",
                params![user, name, hash.as_slice(), created],
            );
            match inserted {
                Ok(_) => {}
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    return Err(Error::TokenNameTaken {
                        user: user.to_owned(),
                        name,
                    });
                }
                Err(other) => return Err(fail()(other)),
            }
            Ok(TokenInfo {
                id: tx.last_insert_rowid(),
                user: user.to_owned(),
                name,
                created: from_secs(created),
                last_used: None,
                revoked: None,
            })
        })
    }

    fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, Error> {
        self.list(
            "listing tokens",
            "SELECT id, user, name, created, last_used, revoked FROM tokens
             WHERE ?1 IS NULL OR user = ?1 ORDER BY id",
            [user],
            |row| {
                Ok(TokenInfo {
                    id: row.get(0)?,
                    user: row.get(1)?,
                    name: row.get(2)?,
                    created: from_secs(row.get(3)?),
                    last_used: row.get::<_, Option<i64>>(4)?.map(from_secs),
                    revoked: row.get::<_, Option<i64>>(5)?.map(from_secs),
                })
            },
        )
    }

    fn revoke_token(&self, id: i64, now: i64) -> Result<(), Error> {
        self.write("revoking a token", |tx| {
            let fail = || storage("revoking a token");
            let known: Option<i64> = tx
                .query_row("SELECT 1 FROM tokens WHERE id = ?1", [id], |r| r.get(0))
                .optional()
                .map_err(fail())?;
            if known.is_none() {
                return Err(Error::UnknownToken(id));
            }
            tx.execute(
                "UPDATE tokens SET revoked = ?2 WHERE id = ?1 AND revoked IS NULL",
                params![id, now],
            )
            .map_err(fail())?;
            tx.execute("DELETE FROM sessions WHERE token_id = ?1", [id])
                .map_err(fail())?;
            Ok(())
        })
    }

    fn grant(&self, user: &str, repo: &str, now: i64) -> Result<(), Error> {
        self.write("granting", |tx| {
            if !Self::user_exists(tx, user, "granting")? {
                return Err(Error::UnknownUser(user.to_owned()));
            }
            tx.execute(
                "INSERT INTO grants (user, repo, created) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user, repo) DO NOTHING",
                params![user, repo, now],
            )
            .map_err(storage("granting"))?;
            Ok(())
        })
    }

    fn ungrant(&self, user: &str, repo: &str) -> Result<bool, Error> {
        self.write("taking a grant back", |tx| {
            tx.execute(
                "DELETE FROM grants WHERE user = ?1 AND repo = ?2",
                params![user, repo],
            )
            .map(|n| n > 0)
            .map_err(storage("taking a grant back"))
        })
    }

    fn grant_group(&self, group: &str, repo: &str, now: i64) -> Result<(), Error> {
        self.write("granting to a group", |tx| {
            tx.execute(
                "INSERT INTO group_grants (group_name, repo, created) VALUES (?1, ?2, ?3)
                 ON CONFLICT (group_name, repo) DO NOTHING",
                params![group, repo, now],
            )
            .map(|_| ())
            .map_err(storage("granting to a group"))
        })
    }

    fn ungrant_group(&self, group: &str, repo: &str) -> Result<bool, Error> {
        self.write("taking a group grant back", |tx| {
            tx.execute(
                "DELETE FROM group_grants WHERE group_name = ?1 AND repo = ?2",
                params![group, repo],
            )
            .map(|n| n > 0)
            .map_err(storage("taking a group grant back"))
        })
    }

    fn group_grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.list(
            "listing group grants",
            "SELECT group_name, repo FROM group_grants ORDER BY group_name, repo",
            [],
            |row| {
                Ok(GrantInfo {
                    user: row.get(0)?,
                    repo: row.get(1)?,
                })
            },
        )
    }

    fn forget_repo(&self, repo: &str) -> Result<(), Error> {
        self.write("dropping grants", |tx| {
            tx.execute("DELETE FROM grants WHERE repo = ?1", [repo])
                .map_err(storage("dropping grants"))?;
            tx.execute("DELETE FROM group_grants WHERE repo = ?1", [repo])
                .map(|_| ())
                .map_err(storage("dropping grants"))
        })
    }

    fn grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.list(
            "listing grants",
            "SELECT user, repo FROM grants ORDER BY user, repo",
            [],
            |row| {
                Ok(GrantInfo {
                    user: row.get(0)?,
                    repo: row.get(1)?,
                })
            },
        )
    }

    /// On its own connection with no busy timeout: a writer holding the database makes this
    /// fail at once (the store tries again on the next use) instead of delaying the call.
    fn note_use(&self, id: i64, at: i64) -> Result<(), Error> {
        lock(&self.last_use)
            .execute(
                "UPDATE tokens SET last_used = ?2 WHERE id = ?1",
                params![id, at],
            )
            .map(|_| ())
            .map_err(|error| {
                tracing::debug!(%error, "access: last-use time not written this time");
                Error::Storage("recording a token's last use".to_owned())
            })
    }

    fn create_session(
        &self,
        hash: &SessionHash,
        token_id: i64,
        now: i64,
        idle_before: i64,
        per_token: i64,
    ) -> Result<(), Error> {
        self.write("starting a session", |tx| {
            let fail = || storage("starting a session");
            let active: Option<i64> = tx
                .query_row(
                    "SELECT 1 FROM tokens WHERE id = ?1 AND revoked IS NULL",
                    [token_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(fail())?;
            if active.is_none() {
                return Err(Error::InvalidToken);
            }
            tx.execute("DELETE FROM sessions WHERE last_seen < ?1", [idle_before])
                .map_err(fail())?;
            tx.execute(
                "INSERT INTO sessions (hash, token_id, created, last_seen) VALUES (?1, ?2, ?3, ?3)",
                params![hash.as_slice(), token_id, now],
            )
            .map_err(fail())?;
            tx.execute(
                "DELETE FROM sessions WHERE token_id = ?1 AND hash NOT IN (
                     SELECT hash FROM sessions WHERE token_id = ?1
                     ORDER BY last_seen DESC, created DESC LIMIT ?2)",
                params![token_id, per_token],
            )
            .map_err(fail())?;
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
        const WHAT: &str = "signing in through the identity provider";
        self.write(WHAT, |tx| {
            let fail = || storage(WHAT);
            if !Self::user_exists(tx, user, WHAT)? {
                return Err(Error::UnknownUser(user.to_owned()));
            }
            let existing: Option<i64> = tx
                .query_row(
                    "SELECT id FROM tokens WHERE user = ?1 AND name = ?2 AND revoked IS NULL",
                    params![user, PROVIDER_TOKEN_NAME],
                    |r| r.get(0),
                )
                .optional()
                .map_err(fail())?;
            let id = match existing {
                Some(id) => id,
                None => {
                    tx.execute(
                        "INSERT INTO tokens (user, name, hash, created) VALUES (?1, ?2, ?3, ?4)",
                        params![user, PROVIDER_TOKEN_NAME, hash.as_slice(), now],
                    )
                    .map_err(fail())?;
                    tx.last_insert_rowid()
                }
            };
            tx.execute(
                "INSERT INTO provider_grants (token_id, subject, scopes, groups, updated)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (token_id) DO UPDATE SET subject = excluded.subject,
                     scopes = excluded.scopes, groups = excluded.groups, updated = excluded.updated",
                params![
                    id,
                    grant.subject,
                    join_names(&grant.scopes),
                    join_names(&grant.groups),
                    now
                ],
            )
            .map_err(fail())?;
            Ok(id)
        })
    }

    fn end_session(&self, hash: &SessionHash) -> Result<(), Error> {
        self.write("ending a session", |tx| {
            tx.execute("DELETE FROM sessions WHERE hash = ?1", [hash.as_slice()])
                .map(|_| ())
                .map_err(storage("ending a session"))
        })
    }

    fn find_session(&self, hash: &SessionHash) -> Result<Option<(SessionRow, bool)>, Error> {
        lock(&self.watch)
            .query_row(
                "SELECT s.token_id, t.user, s.last_seen, u.prepare, p.subject, p.scopes, p.groups
                 FROM sessions s JOIN tokens t ON t.id = s.token_id
                 JOIN users u ON u.name = t.user
                 LEFT JOIN provider_grants p ON p.token_id = s.token_id
                 WHERE s.hash = ?1 AND t.revoked IS NULL",
                [hash.as_slice()],
                |r| {
                    Ok((
                        SessionRow {
                            token_id: r.get(0)?,
                            user: r.get(1)?,
                            last_seen: r.get(2)?,
                            provider: provider_grant(r.get(4)?, r.get(5)?, r.get(6)?),
                        },
                        r.get(3)?,
                    ))
                },
            )
            .optional()
            .map_err(storage("reading a session"))
    }

    fn find_token(&self, hash: &TokenHash) -> Result<Option<(i64, String, bool)>, Error> {
        lock(&self.watch)
            .query_row(
                "SELECT t.id, t.user, u.prepare FROM tokens t JOIN users u ON u.name = t.user
                 WHERE t.hash = ?1 AND t.revoked IS NULL",
                [hash.as_slice()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(storage("reading a token"))
    }

    /// As a token's last use: on its own connection, never waiting for a lock.
    fn note_seen(&self, hash: &SessionHash, at: i64) -> Result<(), Error> {
        lock(&self.last_use)
            .execute(
                "UPDATE sessions SET last_seen = max(last_seen, ?2) WHERE hash = ?1",
                params![hash.as_slice(), at],
            )
            .map(|_| ())
            .map_err(|error| {
                tracing::debug!(%error, "access: a session's last use not written this time");
                Error::Storage("recording a session's last use".to_owned())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessStore;

    /// The schema as `csg` created it before versions were recorded.
    const UNVERSIONED: &str = MIGRATIONS[0].sql;

    fn schema(conn: &Connection) -> Vec<(String, String)> {
        let mut stmt = conn
            .prepare(
                "SELECT name, sql FROM sqlite_master
                 WHERE name NOT LIKE 'access_migrations%' AND sql IS NOT NULL ORDER BY name",
            )
            .expect("schema");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// A data directory from before versioned migrations opens with its tables and rows as
    /// they are (the sessions table is added beside them), its tokens authenticate, and it is
    /// recorded at version 1 then 2, once each.
    #[test]
    fn a_data_directory_from_before_versions_opens_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("csg.sqlite");
        let secret = crate::token::generate().expect("random");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(UNVERSIONED).expect("old schema");
            conn.execute(
                "INSERT INTO users (name, prepare, created) VALUES ('alice', 1, 1700000000)",
                [],
            )
            .expect("user");
            conn.execute(
                "INSERT INTO tokens (user, name, hash, created) VALUES ('alice', 'old', ?1, 1700000000)",
                [crate::token::hash(&secret).to_vec()],
            )
            .expect("token");
        }
        let before = schema(&Connection::open(&path).expect("open"));
        let access = AccessStore::open(&path).expect("opens");
        assert!(access.authenticate(&secret).expect("old token").prepare);
        assert_eq!(
            access.users().expect("users")[0].created,
            from_secs(1700000000)
        );
        drop(AccessStore::open(&path).expect("opens again"));
        let conn = Connection::open(&path).expect("open");
        let mut after = schema(&conn);
        // Later versions only add tables.
        after.retain(|(name, _)| {
            !["sessions", "provider_grants", "group_grants"]
                .iter()
                .any(|added| name.starts_with(added))
        });
        assert_eq!(after, before, "the tables are untouched");
        let versions: Vec<(i64, String)> = conn
            .prepare("SELECT version, name FROM access_migrations")
            .expect("query")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(
            versions,
            [
                (1, "users, tokens and grants".to_owned()),
                (2, "website sessions".to_owned()),
                (3, "identity-provider grants of website sign-ins".to_owned()),
                (4, "group grants".to_owned()),
            ]
        );
        // The new version's table works over the old rows.
        let session = access.start_session(&secret).expect("a session");
        assert_eq!(
            access.session(&session.id, None).expect("live").user,
            "alice"
        );
    }

    /// A database a newer `csg` migrated is refused with a message saying so, not misread.
    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("csg.sqlite");
        drop(AccessStore::open(&path).expect("opens"));
        Connection::open(&path)
            .expect("open")
            .execute(
                "INSERT INTO access_migrations (version, name, applied) VALUES (99, 'later', 0)",
                [],
            )
            .expect("a later version");
        let refused = AccessStore::open(&path).map(|_| ());
        let known = MIGRATIONS.last().map_or(0, |m| m.version);
        assert_eq!(refused, Err(Error::SchemaTooNew { found: 99, known }));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("newer than this csg knows")
        );
    }
}
