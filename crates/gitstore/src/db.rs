//! The registry metadata: registrations, sync state, heads seen by syncs, pins.
//!
//! [`RegistryBackend`] is everything the store asks of it; two implementations keep the same
//! tables (`repos`, `seen_heads`, `pins`, `meta`) with the same meaning:
//!
//! - [`SqliteRegistry`] (`sqlite.rs`): the embedded default, `<data>/csg.sqlite`, shared by
//!   the processes of one data directory; other processes' writes are seen through the shared
//!   change counter and `PRAGMA data_version`.
//! - [`PgRegistry`] (`postgres.rs`): PostgreSQL through [`metadb`] (cluster mode), shared by
//!   replicas that each keep their mirrors in a data directory of their own; other replicas'
//!   writes are seen through `LISTEN/NOTIFY`, and reads answer from the last rows read while
//!   the database is unreachable.
//!
//! The store keeps its snapshots above the trait: a backend only reads and writes rows.

use crate::{CommitId, Error, Registration, RepoInfo, RepoName, RepoPath};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod postgres;
mod sqlite;

pub(crate) use postgres::PgRegistry;
pub(crate) use sqlite::SqliteRegistry;

/// What the store asks of the registry metadata. Every method is blocking; each write is one
/// transaction.
pub(crate) trait RegistryBackend: Send + Sync {
    /// A counter that moves after every committed write, of this process and of every other
    /// one sharing the metadata, loaded without I/O: the per-call look at the registry asks
    /// [`RegistryBackend::data_version`] only when it moved (or once a second). `None` when
    /// there is no such counter, and then `data_version` decides on every call.
    fn changes(&self) -> Option<u64>;

    /// A version that moves when anything committed since the last call (SQLite's
    /// `PRAGMA data_version`); the registry is re-read when it moved.
    fn data_version(&self) -> Result<i64, Error>;

    /// The registry generation and every registration, sorted by name, read in one
    /// transaction so the generation describes exactly these rows.
    fn registry(&self) -> Result<(u64, Vec<RepoRow>), Error>;

    /// Every registration, sorted by name.
    fn all_repos(&self) -> Result<Vec<RepoRow>, Error> {
        Ok(self.registry()?.1)
    }

    /// One registration.
    fn repo(&self, name: &RepoName) -> Result<Option<RepoRow>, Error>;

    /// Ok when a write can be attempted now; else the error every write would answer. Asked
    /// before work whose result must be recorded (a sync's fetch), so that work is not done
    /// for nothing.
    fn check_writable(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Inserts a registration with a fresh incarnation, which it answers.
    fn insert_repo(&self, reg: &Registration) -> Result<u64, Error>;

    /// Sets the visibility of `name`; whether it is registered.
    fn set_private(&self, name: &RepoName, private: bool) -> Result<bool, Error>;

    /// Removes the registration `name` if it still is `incarnation`, with its seen heads and
    /// pins; the registry generation of the removal, `None` when it was not registered as
    /// that incarnation.
    fn delete_repo(&self, name: &RepoName, incarnation: u64) -> Result<Option<u64>, Error>;

    /// Records a failed sync attempt.
    fn record_sync_failure(
        &self,
        name: &RepoName,
        now: SystemTime,
        message: &str,
    ) -> Result<(), Error>;

    /// One transaction: the sync state and every branch head seen now (G-5). Answers the new
    /// state generation.
    fn record_sync_success(
        &self,
        name: &RepoName,
        now: SystemTime,
        default_branch: Option<&str>,
        head: Option<&CommitId>,
        heads_seen: &[CommitId],
    ) -> Result<u64, Error>;

    /// The heads syncs saw, with when they last saw each.
    fn seen_heads(&self, name: &RepoName) -> Result<Vec<(CommitId, SystemTime)>, Error>;

    /// Forgets seen heads; answers the new state generation.
    fn delete_seen(&self, name: &RepoName, shas: &[CommitId]) -> Result<u64, Error>;

    /// The pinned commits.
    fn pins(&self, name: &RepoName) -> Result<Vec<CommitId>, Error>;

    /// Pins a commit; answers the new state generation.
    fn insert_pin(&self, name: &RepoName, sha: &CommitId) -> Result<u64, Error>;

    /// Removes a pin; the new state generation if one was removed.
    fn delete_pin(&self, name: &RepoName, sha: &CommitId) -> Result<Option<u64>, Error>;
}

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

/// The columns of a `repos` row in the order [`RawRow`] holds them.
const REPO_COLUMNS: &str = "name, source, registered_path, branch, default_branch, head, last_sync, last_good_sync, last_error, incarnation, state_gen, private";

/// A `repos` row as stored, before its names and SHAs are checked.
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

/// Seen heads as stored: unparsable SHAs are skipped (as they always were).
fn parse_seen(rows: Vec<(String, i64)>) -> Vec<(CommitId, SystemTime)> {
    rows.into_iter()
        .filter_map(|(sha, t)| CommitId::parse(&sha).map(|c| (c, from_db_time(t))))
        .collect()
}

fn parse_pins(rows: &[String]) -> Vec<CommitId> {
    rows.iter().filter_map(|s| CommitId::parse(s)).collect()
}
