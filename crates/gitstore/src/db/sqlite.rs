//! The registry tables in SQLite (`<data>/csg.sqlite`): the embedded default.

use super::{
    REGISTRY_GENERATION, REPO_COLUMNS, RawRow, RegistryBackend, RepoRow, SyncFence, SyncRecord,
    join_index_branches, parse_pins, parse_row, parse_seen, storage, to_db_time,
};
use crate::{CommitId, Error, Registration, RepoName};
use changecounter::Changes;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

/// The tables as version 1 of the schema has them (created if missing; a database from
/// before incarnations and state generations gets the missing columns in [`version_1`]).
const TABLES_V1: &str = "
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

/// The key in `meta` holding the registry schema's version. A row of the registry's own
/// table, not `PRAGMA user_version`: the file is shared with other stores (`access`), whose
/// schemas are versioned on their own.
const SCHEMA_VERSION: &str = "registry_schema_version";

/// One step of the schema, applied inside the opening's immediate transaction.
struct Migration {
    version: i64,
    apply: fn(&rusqlite::Transaction<'_>) -> Result<(), Error>,
}

/// Every version of the schema, in order. Version 1 is the schema as it was before it was
/// versioned, so a data directory from before opens unchanged (its tables are left as they
/// are and the version row is added).
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        apply: version_1,
    },
    Migration {
        version: 2,
        apply: version_2,
    },
];

pub(crate) struct SqliteRegistry {
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
        row.get(12)?,
    ))
}

fn open_connection(path: &Path) -> Result<Connection, Error> {
    let conn = Connection::open(path).map_err(storage("opening the metadata database"))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(storage("configuring the metadata database"))?;
    Ok(conn)
}

/// Brings the schema to the latest version, in one immediate transaction: two processes
/// opening an old database at once must not both alter it.
fn migrate(conn: &mut Connection) -> Result<(), Error> {
    let upgrading = storage("upgrading the metadata schema");
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(upgrading)?;
    let current = schema_version(&tx)?;
    let latest = MIGRATIONS.last().map_or(0, |m| m.version);
    if current > latest {
        tracing::warn!(
            current,
            latest,
            "gitstore: the registry schema is newer than this binary"
        );
        return Err(Error::Storage(format!(
            "the metadata database has registry schema version {current}, newer than this csg knows ({latest}); run the csg that wrote it or a newer one"
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        (migration.apply)(&tx)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![SCHEMA_VERSION, migration.version],
        )
        .map_err(storage("upgrading the metadata schema"))?;
    }
    tx.commit()
        .map_err(storage("upgrading the metadata schema"))
}

/// The version recorded in `meta`; 0 for a database without one (new, or from before the
/// schema was versioned).
fn schema_version(tx: &rusqlite::Transaction<'_>) -> Result<i64, Error> {
    let has_meta: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
            [],
            |row| row.get(0),
        )
        .map_err(storage("reading the metadata schema version"))?;
    if !has_meta {
        return Ok(0);
    }
    Ok(tx
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [SCHEMA_VERSION],
            |row| row.get(0),
        )
        .optional()
        .map_err(storage("reading the metadata schema version"))?
        .unwrap_or(0))
}

/// Version 1: the tables, the columns of later releases added to a database created before
/// them, and an incarnation for every registration without one.
fn version_1(tx: &rusqlite::Transaction<'_>) -> Result<(), Error> {
    tx.execute_batch(TABLES_V1)
        .map_err(storage("creating the metadata schema"))?;
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
        let generation = bump_registry(tx)?;
        tx.execute(
            "UPDATE repos SET incarnation = ?2 WHERE name = ?1",
            params![name, generation],
        )
        .map_err(storage("upgrading the metadata schema"))?;
    }
    Ok(())
}

/// Version 2: the index-branch patterns of each registration (S-8), one per line; empty
/// for the default branch only.
fn version_2(tx: &rusqlite::Transaction<'_>) -> Result<(), Error> {
    tx.execute_batch("ALTER TABLE repos ADD COLUMN index_branches TEXT NOT NULL DEFAULT ''")
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

impl SqliteRegistry {
    /// Opens (creating and upgrading as needed) the registry tables of the database at
    /// `path`; the shared change counter lives beside it (`.changes`).
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let mut conn = open_connection(path)?;
        // WAL: readers (`discovery`) never wait for a sync writing its state.
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(storage("configuring the metadata database"))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(storage("configuring the metadata database"))?;
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

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The readers' connection (see [`SqliteRegistry::watch`](SqliteRegistry)).
    fn reads(&self) -> MutexGuard<'_, Connection> {
        self.watch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RegistryBackend for SqliteRegistry {
    /// The shared change counter (see [`changecounter`]): `None` when it could not be
    /// mapped, and then only `data_version` tells.
    fn changes(&self) -> Option<u64> {
        self.changes.current()
    }

    /// `PRAGMA data_version` of the watch connection: it moves when anything else (another
    /// process, or this process's main connection) committed since the last call. One small
    /// query on a cached statement: cheap enough for every call on the read path.
    fn data_version(&self) -> Result<i64, Error> {
        let conn = self.reads();
        let mut stmt = conn
            .prepare_cached("PRAGMA data_version")
            .map_err(storage("reading the metadata version"))?;
        stmt.query_row([], |row| row.get(0))
            .map_err(storage("reading the metadata version"))
    }

    fn registry(&self) -> Result<(u64, Vec<RepoRow>), Error> {
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

    fn repo(&self, name: &RepoName) -> Result<Option<RepoRow>, Error> {
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

    fn insert_repo(&self, reg: &Registration) -> Result<u64, Error> {
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

    fn set_private(&self, name: &RepoName, private: bool) -> Result<bool, Error> {
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

    fn set_index_branches(&self, name: &RepoName, patterns: &[String]) -> Result<bool, Error> {
        let changed = self
            .conn()
            .execute(
                "UPDATE repos SET index_branches = ?2 WHERE name = ?1",
                params![name.as_str(), join_index_branches(patterns)],
            )
            .map_err(storage("saving the index-branch patterns"))?;
        self.changes.bump();
        Ok(changed > 0)
    }

    fn delete_repo(&self, name: &RepoName, incarnation: u64) -> Result<Option<u64>, Error> {
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

    fn record_sync_failure(
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

    /// The branch heads themselves are not kept here (see
    /// [`RegistryBackend::recorded_heads`]), and there is no fence: the mirror file lock
    /// already lets one sync at a time run and record.
    fn record_sync_success(
        &self,
        name: &RepoName,
        now: SystemTime,
        sync: &SyncRecord<'_>,
        _fence: Option<&SyncFence>,
    ) -> Result<Option<u64>, Error> {
        let SyncRecord {
            default_branch,
            head,
            heads_seen,
            ..
        } = *sync;
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
        Ok(Some(generation))
    }

    fn seen_heads(&self, name: &RepoName) -> Result<Vec<(CommitId, SystemTime)>, Error> {
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
        Ok(parse_seen(rows))
    }

    fn delete_seen(&self, name: &RepoName, shas: &[CommitId]) -> Result<u64, Error> {
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

    fn pins(&self, name: &RepoName) -> Result<Vec<CommitId>, Error> {
        let conn = self.reads();
        let mut stmt = conn
            .prepare_cached("SELECT sha FROM pins WHERE repo = ?1")
            .map_err(storage("reading pins"))?;
        let rows = stmt
            .query_map([name.as_str()], |row| row.get::<_, String>(0))
            .map_err(storage("reading pins"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(storage("reading pins"))?;
        Ok(parse_pins(&rows))
    }

    fn insert_pin(&self, name: &RepoName, sha: &CommitId) -> Result<u64, Error> {
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

    fn delete_pin(&self, name: &RepoName, sha: &CommitId) -> Result<Option<u64>, Error> {
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
