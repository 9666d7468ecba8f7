//! The tables and the in-memory view the decisions answer from.

use crate::names::{valid_token_name, valid_user_name};
use crate::token::{self, TokenHash};
use crate::{Error, NewToken, Principal};
use arc_swap::ArcSwap;
use changecounter::{Changes, Seen};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SCHEMA: &str = "
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
";

/// How often the last-use time of one token is written at most: a write per call would
/// cost more than the call.
const LAST_USE_EVERY: Duration = Duration::from_secs(60);

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

/// What the decisions need, loaded at once from the tables.
#[derive(Default)]
struct View {
    /// Active tokens by hash: (id, user).
    tokens: HashMap<TokenHash, (i64, String)>,
    /// Users and whether they hold `prepare`.
    users: HashMap<String, bool>,
    /// (user, repo) pairs.
    grants: HashSet<(String, String)>,
}

/// Users, tokens and grants of one data directory.
pub struct AccessStore {
    conn: Mutex<Connection>,
    /// The readers' connection, never used for a write: `PRAGMA data_version` and the reload
    /// of the view (see `gitstore`'s metadata: the same scheme).
    watch: Mutex<Connection>,
    /// Last-use writes: a connection of their own that never waits for a lock.
    last_use: Mutex<(Connection, HashMap<i64, Instant>)>,
    changes: Changes,
    seen: Mutex<Seen>,
    /// The published view: loaded without a lock by every check, replaced whole by a reload.
    view: ArcSwap<View>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Logs the detail and answers the generic storage error.
fn storage<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| {
        tracing::warn!(error = %e, "access: {what}");
        Error::Storage(what.to_owned())
    }
}

fn now_secs() -> i64 {
    to_secs(SystemTime::now())
}

fn to_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn from_secs(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

fn open_connection(path: &Path, busy: Duration) -> Result<Connection, Error> {
    let conn = Connection::open(path).map_err(storage("opening the access store"))?;
    conn.busy_timeout(busy)
        .map_err(storage("configuring the access store"))?;
    Ok(conn)
}

impl AccessStore {
    /// Opens (creating the tables if needed) the access store of the metadata database at
    /// `path` (`<data>/csg.sqlite`); the change counter is `<data>/csg.changes`, shared with
    /// the registry.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let conn = open_connection(path, Duration::from_secs(10))?;
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(storage("configuring the access store"))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(storage("configuring the access store"))?;
        conn.execute_batch(SCHEMA)
            .map_err(storage("creating the access tables"))?;
        let store = Self {
            watch: Mutex::new(open_connection(path, Duration::from_secs(10))?),
            last_use: Mutex::new((open_connection(path, Duration::ZERO)?, HashMap::new())),
            conn: Mutex::new(conn),
            changes: Changes::open(&path.with_extension("changes")),
            seen: Mutex::new(Seen::default()),
            view: ArcSwap::from_pointee(View::default()),
        };
        store.refresh()?;
        Ok(store)
    }

    /// The view, reloaded first if the tables may have changed (a counter load when nothing
    /// did).
    fn current(&self) -> Result<Arc<View>, Error> {
        self.refresh()?;
        Ok(self.view.load_full())
    }

    fn refresh(&self) -> Result<(), Error> {
        let mut seen = lock(&self.seen);
        seen.refresh(
            self.changes.current(),
            || {
                lock(&self.watch)
                    .query_row("PRAGMA data_version", [], |row| row.get(0))
                    .map_err(storage("reading the access store version"))
            },
            || {
                let view = self.load()?;
                self.view.store(Arc::new(view));
                Ok(())
            },
        )
    }

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
        Ok(view)
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

    /// The user a presented bearer token belongs to. Hashes the text and looks the
    /// hash up; a revoked or unknown token, or one of a removed user, is
    /// [`Error::InvalidToken`].
    pub fn authenticate(&self, presented: &str) -> Result<Principal, Error> {
        if !token::looks_like_token(presented) {
            return Err(Error::Malformed);
        }
        let view = self.current()?;
        let (id, user) = view
            .tokens
            .get(&token::hash(presented))
            .ok_or(Error::InvalidToken)?;
        let prepare = *view.users.get(user).ok_or(Error::InvalidToken)?;
        self.note_use(*id);
        Ok(Principal {
            user: user.clone(),
            prepare,
            token_id: *id,
        })
    }

    /// Records that token `id` was used, at most once per [`LAST_USE_EVERY`]; never waits
    /// for a lock held by another writer (the next use tries again).
    fn note_use(&self, id: i64) {
        let mut guard = lock(&self.last_use);
        let (conn, written) = &mut *guard;
        let now = Instant::now();
        if written
            .get(&id)
            .is_some_and(|at| now.saturating_duration_since(*at) < LAST_USE_EVERY)
        {
            return;
        }
        match conn.execute(
            "UPDATE tokens SET last_used = ?2 WHERE id = ?1",
            params![id, now_secs()],
        ) {
            Ok(_) => {
                written.insert(id, now);
            }
            Err(error) => tracing::debug!(%error, "access: last-use time not written this time"),
        }
    }

    /// Whether `user` holds a read grant on `repo`.
    pub fn granted(&self, user: &str, repo: &str) -> Result<bool, Error> {
        Ok(self
            .current()?
            .grants
            .contains(&(user.to_owned(), repo.to_owned())))
    }

    /// Adds a user, with the `prepare` capability or not.
    pub fn add_user(&self, name: &str, prepare: bool) -> Result<UserInfo, Error> {
        if !valid_user_name(name) {
            return Err(Error::InvalidUserName(name.to_owned()));
        }
        let created = now_secs();
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
            Ok(UserInfo {
                name: name.to_owned(),
                prepare,
                created: from_secs(created),
            })
        })
    }

    /// Gives or takes the `prepare` capability.
    pub fn set_prepare(&self, name: &str, prepare: bool) -> Result<(), Error> {
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

    /// Removes a user: their tokens are revoked and their grants dropped.
    pub fn remove_user(&self, name: &str) -> Result<(), Error> {
        let now = now_secs();
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
                "UPDATE tokens SET revoked = ?2 WHERE user = ?1 AND revoked IS NULL",
                params![name, now],
            )
            .map_err(fail())?;
            tx.execute("DELETE FROM grants WHERE user = ?1", [name])
                .map_err(fail())?;
            Ok(())
        })
    }

    /// Every user, by name.
    pub fn users(&self) -> Result<Vec<UserInfo>, Error> {
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

    /// Creates a token for `user` (named `name`, or `token-<n>`), and answers it: the only
    /// time its secret exists outside the caller's hands.
    pub fn create_token(&self, user: &str, name: Option<&str>) -> Result<NewToken, Error> {
        if let Some(name) = name
            && !valid_token_name(name)
        {
            return Err(Error::InvalidTokenName(name.to_owned()));
        }
        let secret = token::generate().map_err(storage("drawing a random token"))?;
        let hash = token::hash(&secret);
        let created = now_secs();
        let info = self.write("creating a token", |tx| {
            let fail = || storage("creating a token");
            let known: Option<i64> = tx
                .query_row("SELECT 1 FROM users WHERE name = ?1", [user], |r| r.get(0))
                .optional()
                .map_err(fail())?;
            if known.is_none() {
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
                    format!("token-{}", count + 1)
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
        })?;
        Ok(NewToken { info, secret })
    }

    /// Every token (of `user`, when given), oldest first, revoked ones included.
    pub fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, Error> {
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

    /// Revokes token `id`: it is refused from the next call on, in every process. Revoking a
    /// revoked token changes nothing.
    pub fn revoke_token(&self, id: i64) -> Result<(), Error> {
        let now = now_secs();
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
            Ok(())
        })
    }

    /// Grants `user` read on `repo` (a private repository; public ones need no grant). The
    /// caller checks that the repository is registered.
    pub fn grant(&self, user: &str, repo: &str) -> Result<(), Error> {
        let now = now_secs();
        self.write("granting", |tx| {
            let fail = || storage("granting");
            let known: Option<i64> = tx
                .query_row("SELECT 1 FROM users WHERE name = ?1", [user], |r| r.get(0))
                .optional()
                .map_err(fail())?;
            if known.is_none() {
                return Err(Error::UnknownUser(user.to_owned()));
            }
            tx.execute(
                "INSERT INTO grants (user, repo, created) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user, repo) DO NOTHING",
                params![user, repo, now],
            )
            .map_err(fail())?;
            Ok(())
        })
    }

    /// Takes a grant back; answers whether there was one.
    pub fn ungrant(&self, user: &str, repo: &str) -> Result<bool, Error> {
        self.write("taking a grant back", |tx| {
            tx.execute(
                "DELETE FROM grants WHERE user = ?1 AND repo = ?2",
                params![user, repo],
            )
            .map(|n| n > 0)
            .map_err(storage("taking a grant back"))
        })
    }

    /// Drops every grant on `repo` (its registration was removed: a repository registered
    /// later under the name must not inherit them).
    pub fn forget_repo(&self, repo: &str) -> Result<(), Error> {
        self.write("dropping grants", |tx| {
            tx.execute("DELETE FROM grants WHERE repo = ?1", [repo])
                .map(|_| ())
                .map_err(storage("dropping grants"))
        })
    }

    /// Every grant, by user then repository.
    pub fn grants(&self) -> Result<Vec<GrantInfo>, Error> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &tempfile::TempDir) -> AccessStore {
        AccessStore::open(&dir.path().join("csg.sqlite")).expect("open")
    }

    /// a created token authenticates as its user, is stored only as a hash, and is
    /// refused once revoked; a malformed bearer value is told apart from an unknown token.
    #[test]
    fn a1_token_lifecycle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = store(&dir);
        access.add_user("alice", false).expect("user");
        let new = access.create_token("alice", Some("laptop")).expect("token");
        assert!(!format!("{new:?}").contains(&new.secret), "Debug redacts");
        let who = access.authenticate(&new.secret).expect("valid");
        assert_eq!((who.user.as_str(), who.prepare), ("alice", false));
        let stored: Vec<u8> = lock(&access.conn)
            .query_row("SELECT hash FROM tokens", [], |r| r.get(0))
            .expect("row");
        assert_eq!(stored, token::hash(&new.secret).to_vec());
        let raw: String = lock(&access.conn)
            .query_row(
                "SELECT group_concat(quote(hash) || name) FROM tokens",
                [],
                |r| r.get(0),
            )
            .expect("row");
        assert!(
            !raw.contains(&new.secret[4..]),
            "the plaintext is not stored"
        );
        let listed = access.tokens(Some("alice")).expect("list");
        assert_eq!(listed.len(), 1);
        assert!(listed[0].last_used.is_some(), "last use recorded");
        access.revoke_token(new.info.id).expect("revoke");
        assert_eq!(access.authenticate(&new.secret), Err(Error::InvalidToken));
        assert_eq!(access.authenticate("hunter2"), Err(Error::Malformed));
        assert_eq!(
            access.authenticate(&token::generate().expect("random")),
            Err(Error::InvalidToken)
        );
        assert!(access.tokens(None).expect("list")[0].revoked.is_some());
        // The name is free again once the token is revoked.
        access
            .create_token("alice", Some("laptop"))
            .expect("reuse name");
        assert!(matches!(
            access.create_token("alice", Some("laptop")),
            Err(Error::TokenNameTaken { .. })
        ));
        assert_eq!(
            access.create_token("bob", None).map(|t| t.info),
            Err(Error::UnknownUser("bob".into()))
        );
    }

    /// W-34 across processes: a second store on the same files (another `csg` process)
    /// sees a revocation and a grant change on its very next call.
    #[test]
    fn w34_changes_elsewhere_take_effect_on_the_next_call() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, cli) = (store(&dir), store(&dir));
        cli.add_user("alice", true).expect("user");
        let new = cli.create_token("alice", None).expect("token");
        assert_eq!(new.info.name, "token-1");
        assert!(server.authenticate(&new.secret).expect("valid").prepare);
        cli.grant("alice", "acme/private").expect("grant");
        assert!(server.granted("alice", "acme/private").expect("view"));
        cli.ungrant("alice", "acme/private").expect("ungrant");
        assert!(!server.granted("alice", "acme/private").expect("view"));
        cli.grant("alice", "acme/private").expect("grant");
        cli.forget_repo("acme/private").expect("forget");
        assert!(!server.granted("alice", "acme/private").expect("view"));
        cli.set_prepare("alice", false).expect("change");
        assert!(!server.authenticate(&new.secret).expect("valid").prepare);
        cli.revoke_token(new.info.id).expect("revoke");
        assert_eq!(server.authenticate(&new.secret), Err(Error::InvalidToken));
    }

    /// Removing a user revokes their tokens and drops their grants.
    #[test]
    fn removing_a_user_revokes_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = store(&dir);
        access.add_user("alice", false).expect("user");
        assert_eq!(
            access.add_user("alice", false),
            Err(Error::UserExists("alice".into()))
        );
        assert!(matches!(
            access.add_user("-x", false),
            Err(Error::InvalidUserName(_))
        ));
        let new = access.create_token("alice", None).expect("token");
        access.grant("alice", "acme/private").expect("grant");
        access.remove_user("alice").expect("remove");
        assert_eq!(access.authenticate(&new.secret), Err(Error::InvalidToken));
        assert!(access.grants().expect("grants").is_empty());
        assert!(access.users().expect("users").is_empty());
        assert_eq!(
            access.remove_user("alice"),
            Err(Error::UnknownUser("alice".into()))
        );
    }
}
