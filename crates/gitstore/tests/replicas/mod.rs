//! What the tests of the registry's metadata backends have in common (`registry_backends.rs`,
//! `cluster_consistency.rs`): stores opened on a data directory of their own with a manual
//! clock, connections to the test database, how long a change may take to reach another
//! replica, and looks into a SQLite data directory's metadata file.

use gitstore::{
    CommitId, DEFAULT_RETENTION, GitStore, ManualClock, Metadata, RepoName, RepoPath, StoreConfig,
};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

pub const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// How long another replica may take to see a change: the notification's trip.
pub const SEEN_WITHIN: Duration = Duration::from_secs(5);

pub fn cid(sha: &str) -> CommitId {
    CommitId::parse(sha).expect("full sha")
}

pub fn path(p: &str) -> RepoPath {
    RepoPath::parse(p).expect("valid path")
}

pub fn name(n: &str) -> RepoName {
    RepoName::parse(n).expect("valid name")
}

/// A manual clock at a fixed moment, so retention windows are crossed by `advance` alone.
pub fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

/// A connection to a test database (one per replica, as each process has its own).
pub fn connect(url: &str) -> metadb::Database {
    metadb::Database::connect(url, metadb::Options::default())
        .expect("connect to the test database")
}

/// A store on `data` with the default retention, on `clock` and `metadata`.
pub fn open(data: &Path, clock: &ManualClock, metadata: Metadata) -> GitStore {
    GitStore::open_with(
        StoreConfig {
            data_dir: data.to_path_buf(),
            retention: DEFAULT_RETENTION,
        },
        Arc::new(clock.clone()),
        metadata,
    )
    .expect("open store")
}

/// The one integer `sql` answers on a SQLite metadata file.
pub fn sqlite_int(conn: &rusqlite::Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// The SQLite registry schema this build migrates to (2: index-branch patterns, S-8).
pub const SQLITE_SCHEMA: i64 = 2;

/// The registry schema version a SQLite metadata file records.
pub fn sqlite_schema_version(conn: &rusqlite::Connection) -> i64 {
    sqlite_int(
        conn,
        "SELECT value FROM meta WHERE key = 'registry_schema_version'",
    )
}
