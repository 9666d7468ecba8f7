//! The SQLite metadata: registrations, sync state, heads seen by syncs, pins.

use crate::{CommitId, Error, Registration, RepoInfo, RepoName, RepoPath};
use changecounter::Changes;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS repos (
    name TEXT PRIMARY KEY NOT NULL,
    source TEXT NOT NULL,
    registered_path TEXT NOT NULL,
    branch TEXT,
    default_branch TEXT,
    head TEXT,
    last_sync INTEGER,
    last_good_sync INTEGER,
    last_error TEXT,
    incarnation INTEGER NOT NULL DEFAULT 0,
    state_gen INTEGER NOT NULL DEFAULT 0,
    private INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS seen_heads (
    repo TEXT NOT NULL,
    sha TEXT NOT NULL,
    last_seen INTEGER NOT NULL,
    PRIMARY KEY (repo, sha)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pins (
    repo TEXT NOT NULL,
    sha TEXT NOT NULL,
    PRIMARY KEY (repo, sha)
);
";

/// Logs the detail and returns the generic storage error (messages never carry host paths or
/// library error chains).
pub(crate) fn storage<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| {
        tracing::warn!(error = %e, "gitstore: {what}");
        Error::Storage(what.to_string())
    }
}

/// A registration row.
#[derive(Debug, Clone)]
pub(crate) struct RepoRow {
    pub name: RepoName,
    pub source: String,
    pub registered_path: RepoPath,
    pub branch: Option<String>,
    pub default_branch: Option<String>,
    pub head: Option<CommitId>,
    pub last_sync: Option<SystemTime>,
    pub last_good_sync: Option<SystemTime>,
    pub last_error: Option<String>,
    /// Unique per registration over the database's life: a name removed and registered
    /// again is another incarnation (lease records, trash entries and states are keyed by
    /// it).
    pub incarnation: u64,
    /// Bumped in the transaction of every change to the repository's retention roots or
    /// refs (sync, pin, unpin, sweep): another process reloads its view when it moves.
    pub state_gen: u64,
    pub private: bool,
}

impl RepoRow {
    pub(crate) fn info(&self) -> RepoInfo {
        RepoInfo {
            name: self.name.clone(),
            source: self.source.clone(),
            registered_path: self.registered_path.clone(),
            default_branch: self.default_branch.clone(),
            head: self.head.clone(),
            last_sync: self.last_sync,
            last_good_sync: self.last_good_sync,
            last_error: self.last_error.clone(),
            private: self.private,
        }
    }
}

pub(crate) struct Db {
    /// The writers' connection: registrations, syncs, pins, sweeps. A write may wait up to
    /// the busy timeout for another process's transaction while holding it.
    conn: Mutex<Connection>,
    /// The readers' connection, never used for a write: `PRAGMA data_version` (which moves
    /// when any *other* connection committed, so this process's own writes count too) and
    /// the queries of the read path (registrations, pins, seen heads). In WAL mode a read
    /// never waits for a writer, and with a connection of its own it never waits behind
    /// `conn` either (R-8: nothing on the read path waits on a lock a writer holds).
    watch: Mutex<Connection>,
    /// Bumped after every commit: other processes look at it before `data_version`.
    changes: Changes,
}

/// The key of the registry generation in `meta`: bumped with every registration change.
const REGISTRY_GENERATION: &str = "registry_generation";

/// Times are stored as nanoseconds since the epoch (the ManualClock of tests ticks in
/// seconds, the system clock in nanoseconds; both round-trip exactly).
pub(crate) fn to_db_time(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn from_db_time(n: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(n).unwrap_or(0))
}

const REPO_COLUMNS: &str = "name, source, registered_path, branch, default_branch, head, last_sync, last_good_sync, last_error, incarnation, state_gen, private";

type RawRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    i64,
    i64,
    bool,
);

fn raw_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
    ))
}

fn parse_row(raw: RawRow) -> Result<RepoRow, Error> {
    let (
        name,
        source,
        path,
        branch,
        default_branch,
        head,
        last_sync,
        last_good,
        last_error,
        incarnation,
        state_gen,
        private,
    ) = raw;
    let corrupt = |what: &str| {
        tracing::warn!(repo = %name, "gitstore: corrupt metadata row ({what})");
        Error::Storage("metadata database".to_string())
    };
    Ok(RepoRow {
        name: RepoName::parse(&name).map_err(|_| corrupt("name"))?,
        source,
        registered_path: RepoPath::parse(&path).map_err(|_| corrupt("registered path"))?,
        branch,
        default_branch,
        head: match head {
            Some(h) => Some(CommitId::parse(&h).ok_or_else(|| corrupt("head"))?),
            None => None,
        },
        last_sync: last_sync.map(from_db_time),
        last_good_sync: last_good.map(from_db_time),
        last_error,
        incarnation: u64::try_from(incarnation).unwrap_or(0),
        state_gen: u64::try_from(state_gen).unwrap_or(0),
        private,
    })
}

fn open_connection(path: &Path) -> Result<Connection, Error> {
    let conn = Connection::open(path).map_err(storage("opening the metadata database"))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(storage("configuring the metadata database"))?;
    Ok(conn)
}

/// Adds the columns of later versions to a database created before them, and gives every
/// registration without one an incarnation. In one immediate transaction: two processes
/// opening an old database at once must not both alter it.
fn migrate(conn: &mut Connection) -> Result<(), Error> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(storage("upgrading the metadata schema"))?;
    let columns: Vec<String> = {
        let mut stmt = tx
            .prepare("SELECT name FROM pragma_table_info('repos')")
            .map_err(storage("upgrading the metadata schema"))?;
        stmt.query_map([], |row| row.get(0))
            .map_err(storage("upgrading the metadata schema"))?
            .collect::<Result<_, _>>()
            .map_err(storage("upgrading the metadata schema"))?
    };
    for column in ["incarnation", "state_gen", "private"] {
        if !columns.iter().any(|c| c == column) {
            tx.execute_batch(&format!(
                "ALTER TABLE repos ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
            ))
            .map_err(storage("upgrading the metadata schema"))?;
        }
    }
    let unnumbered: Vec<String> = {
        let mut stmt = tx
            .prepare("SELECT name FROM repos WHERE incarnation = 0")
            .map_err(storage("upgrading the metadata schema"))?;
        stmt.query_map([], |row| row.get(0))
            .map_err(storage("upgrading the metadata schema"))?
            .collect::<Result<_, _>>()
            .map_err(storage("upgrading the metadata schema"))?
    };
    for name in unnumbered {
        let generation = bump_registry(&tx)?;
        tx.execute(
            "UPDATE repos SET incarnation = ?2 WHERE name = ?1",
            params![name, generation],
        )
        .map_err(storage("upgrading the metadata schema"))?;
    }
    tx.commit()
        .map_err(storage("upgrading the metadata schema"))
}

/// Bumps the registry generation inside `tx`; answers the new value.
fn bump_registry(tx: &rusqlite::Transaction<'_>) -> Result<i64, Error> {
    tx.query_row(
        "INSERT INTO meta (key, value) VALUES (?1, 1)
         ON CONFLICT (key) DO UPDATE SET value = value + 1 RETURNING value",
        [REGISTRY_GENERATION],
        |row| row.get(0),
    )
    .map_err(storage("saving a registration"))
}

/// Bumps the state generation of `name` inside `tx`; answers the new value.
fn bump_state(tx: &rusqlite::Transaction<'_>, name: &RepoName) -> Result<u64, Error> {
    let value: Option<i64> = tx
        .query_row(
            "UPDATE repos SET state_gen = state_gen + 1 WHERE name = ?1 RETURNING state_gen",
            [name.as_str()],
            |row| row.get(0),
        )
        .optional()
        .map_err(storage("saving the repository state"))?;
    Ok(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0))
}

impl Db {
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let mut conn = open_connection(path)?;
        // WAL: readers (`discovery`) never wait for a sync writing its state.
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(storage("configuring the metadata database"))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(storage("configuring the metadata database"))?;
        conn.execute_batch(SCHEMA)
            .map_err(storage("creating the metadata schema"))?;
        let changes = Changes::open(&path.with_extension("changes"));
        migrate(&mut conn)?;
        changes.bump();
        let watch = open_connection(path)?;
        Ok(Self {
            conn: Mutex::new(conn),
            watch: Mutex::new(watch),
            changes,
        })
    }

    /// The shared change counter (see [`changecounter`]): `None` when it could not be
    /// mapped, and then only `data_version` tells.
    pub(crate) fn changes(&self) -> Option<u64> {
        self.changes.current()
    }

    /// `PRAGMA data_version` of the watch connection: it moves when anything else (another
    /// process, or this process's main connection) committed since the last call. One small
    /// query on a cached statement: cheap enough for every call on the read path.
    pub(crate) fn data_version(&self) -> Result<i64, Error> {
        let conn = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stmt = conn
            .prepare_cached("PRAGMA data_version")
            .map_err(storage("reading the metadata version"))?;
        stmt.query_row([], |row| row.get(0))
            .map_err(storage("reading the metadata version"))
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The readers' connection (see [`Db::watch`](Db)).
    fn reads(&self) -> MutexGuard<'_, Connection> {
        self.watch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn all_repos(&self) -> Result<Vec<RepoRow>, Error> {
        Ok(self.registry()?.1)
    }

    /// The registry generation and every registration, read in one transaction so the
    /// generation describes exactly these rows.
    pub(crate) fn registry(&self) -> Result<(u64, Vec<RepoRow>), Error> {
        let mut conn = self.reads();
        let tx = conn
            .transaction()
            .map_err(storage("reading registrations"))?;
        let generation: i64 = tx
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [REGISTRY_GENERATION],
                |row| row.get(0),
            )
            .optional()
            .map_err(storage("reading registrations"))?
            .unwrap_or(0);
        let raws = {
            let mut stmt = tx
                .prepare_cached(&format!("SELECT {REPO_COLUMNS} FROM repos ORDER BY name"))
                .map_err(storage("reading registrations"))?;
            stmt.query_map([], raw_row)
                .map_err(storage("reading registrations"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(storage("reading registrations"))?
        };
        tx.finish().map_err(storage("reading registrations"))?;
        drop(conn);
        let rows = raws.into_iter().map(parse_row).collect::<Result<_, _>>()?;
        Ok((u64::try_from(generation).unwrap_or(0), rows))
    }

    pub(crate) fn repo(&self, name: &RepoName) -> Result<Option<RepoRow>, Error> {
        let raw = self
            .reads()
            .query_row(
                &format!("SELECT {REPO_COLUMNS} FROM repos WHERE name = ?1"),
                [name.as_str()],
                raw_row,
            )
            .optional()
            .map_err(storage("reading a registration"))?;
        raw.map(parse_row).transpose()
    }

    /// Inserts a registration with a fresh incarnation, which it answers.
    pub(crate) fn insert_repo(&self, reg: &Registration) -> Result<u64, Error> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(storage("saving a registration"))?;
        let incarnation = bump_registry(&tx)?;
        tx.execute(
            "INSERT INTO repos (name, source, registered_path, branch, default_branch, incarnation, private) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)",
            params![
                reg.name.as_str(),
                reg.source,
                reg.registered_path.as_str(),
                reg.branch,
                incarnation,
                reg.private.unwrap_or(false)
            ],
        )
        .map_err(storage("saving a registration"))?;
        tx.commit().map_err(storage("saving a registration"))?;
        self.changes.bump();
        Ok(u64::try_from(incarnation).unwrap_or(0))
    }

    /// Sets the visibility of `name`; whether it is registered.
    pub(crate) fn set_private(&self, name: &RepoName, private: bool) -> Result<bool, Error> {
        let changed = self
            .conn()
            .execute(
                "UPDATE repos SET private = ?2 WHERE name = ?1",
                params![name.as_str(), private],
            )
            .map_err(storage("saving the visibility"))?;
        self.changes.bump();
        Ok(changed > 0)
    }

    /// Removes the registration `name` if it still is `incarnation`; the registry generation
    /// of the removal, `None` when it was not registered as that incarnation.
    pub(crate) fn delete_repo(
        &self,
        name: &RepoName,
        incarnation: u64,
    ) -> Result<Option<u64>, Error> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(storage("removing a registration"))?;
        let removed = tx
            .execute(
                "DELETE FROM repos WHERE name = ?1 AND incarnation = ?2",
                params![name.as_str(), i64::try_from(incarnation).unwrap_or(-1)],
            )
            .map_err(storage("removing a registration"))?;
        if removed == 0 {
            return Ok(None);
        }
        let generation = bump_registry(&tx)?;
        for sql in [
            "DELETE FROM seen_heads WHERE repo = ?1",
            "DELETE FROM pins WHERE repo = ?1",
        ] {
            tx.execute(sql, [name.as_str()])
                .map_err(storage("removing a registration"))?;
        }
        tx.commit().map_err(storage("removing a registration"))?;
        self.changes.bump();
        Ok(Some(u64::try_from(generation).unwrap_or(0)))
    }

    pub(crate) fn record_sync_failure(
        &self,
        name: &RepoName,
        now: SystemTime,
        message: &str,
    ) -> Result<(), Error> {
        self.conn()
            .execute(
                "UPDATE repos SET last_sync = ?2, last_error = ?3 WHERE name = ?1",
                params![name.as_str(), to_db_time(now), message],
            )
            .map_err(storage("saving the sync state"))?;
        self.changes.bump();
        Ok(())
    }

    /// One transaction: the sync state and every branch head seen now (G-5).
    pub(crate) fn record_sync_success(
        &self,
        name: &RepoName,
        now: SystemTime,
        default_branch: Option<&str>,
        head: Option<&CommitId>,
        heads_seen: &[CommitId],
    ) -> Result<u64, Error> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(storage("saving the sync state"))?;
        {
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO seen_heads (repo, sha, last_seen) VALUES (?1, ?2, ?3)
                     ON CONFLICT (repo, sha) DO UPDATE SET last_seen = excluded.last_seen",
                )
                .map_err(storage("saving the sync state"))?;
            for sha in heads_seen {
                upsert
                    .execute(params![name.as_str(), sha.as_str(), to_db_time(now)])
                    .map_err(storage("saving the sync state"))?;
            }
        }
        tx.execute(
            "UPDATE repos SET last_sync = ?2, last_good_sync = ?2, last_error = NULL,
                 default_branch = ?3, head = ?4 WHERE name = ?1",
            params![
                name.as_str(),
                to_db_time(now),
                default_branch,
                head.map(CommitId::as_str)
            ],
        )
        .map_err(storage("saving the sync state"))?;
        let generation = bump_state(&tx, name)?;
        tx.commit().map_err(storage("saving the sync state"))?;
        self.changes.bump();
        Ok(generation)
    }

    pub(crate) fn seen_heads(&self, name: &RepoName) -> Result<Vec<(CommitId, SystemTime)>, Error> {
        let conn = self.reads();
        let mut stmt = conn
            .prepare_cached("SELECT sha, last_seen FROM seen_heads WHERE repo = ?1")
            .map_err(storage("reading seen heads"))?;
        let rows = stmt
            .query_map([name.as_str()], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(storage("reading seen heads"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(storage("reading seen heads"))?;
        Ok(rows
            .into_iter()
            .filter_map(|(sha, t)| CommitId::parse(&sha).map(|c| (c, from_db_time(t))))
            .collect())
    }

    /// Answers the new state generation.
    pub(crate) fn delete_seen(&self, name: &RepoName, shas: &[CommitId]) -> Result<u64, Error> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(storage("expiring seen heads"))?;
        {
            let mut del = tx
                .prepare_cached("DELETE FROM seen_heads WHERE repo = ?1 AND sha = ?2")
                .map_err(storage("expiring seen heads"))?;
            for sha in shas {
                del.execute(params![name.as_str(), sha.as_str()])
                    .map_err(storage("expiring seen heads"))?;
            }
        }
        let generation = bump_state(&tx, name)?;
        tx.commit().map_err(storage("expiring seen heads"))?;
        self.changes.bump();
        Ok(generation)
    }

    pub(crate) fn pins(&self, name: &RepoName) -> Result<Vec<CommitId>, Error> {
        let conn = self.reads();
        let mut stmt = conn
            .prepare_cached("SELECT sha FROM pins WHERE repo = ?1")
            .map_err(storage("reading pins"))?;
        let rows = stmt
            .query_map([name.as_str()], |row| row.get::<_, String>(0))
            .map_err(storage("reading pins"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(storage("reading pins"))?;
        Ok(rows.iter().filter_map(|s| CommitId::parse(s)).collect())
    }

    /// Answers the new state generation.
    pub(crate) fn insert_pin(&self, name: &RepoName, sha: &CommitId) -> Result<u64, Error> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(storage("saving a pin"))?;
        tx.execute(
            "INSERT OR IGNORE INTO pins (repo, sha) VALUES (?1, ?2)",
            params![name.as_str(), sha.as_str()],
        )
        .map_err(storage("saving a pin"))?;
        let generation = bump_state(&tx, name)?;
        tx.commit().map_err(storage("saving a pin"))?;
        self.changes.bump();
        Ok(generation)
    }

    /// The new state generation if a pin was removed.
    pub(crate) fn delete_pin(&self, name: &RepoName, sha: &CommitId) -> Result<Option<u64>, Error> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(storage("removing a pin"))?;
        let n = tx
            .execute(
                "DELETE FROM pins WHERE repo = ?1 AND sha = ?2",
                params![name.as_str(), sha.as_str()],
            )
            .map_err(storage("removing a pin"))?;
        if n == 0 {
            return Ok(None);
        }
        let generation = bump_state(&tx, name)?;
        tx.commit().map_err(storage("removing a pin"))?;
        self.changes.bump();
        Ok(Some(generation))
    }
}
