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

    /// Sets the index-branch patterns of `name` (S-8; empty: the default branch only);
    /// whether it is registered.
    fn set_index_branches(&self, name: &RepoName, patterns: &[String]) -> Result<bool, Error>;

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

    /// One transaction: the sync state, every branch head seen now (G-5) and, where the
    /// backend keeps them ([`RegistryBackend::recorded_heads`]), the branch heads themselves.
    /// Answers the new state generation; `None` when `fence` says this sync may no longer
    /// record (its lease ran out and another replica may have taken over, or the name was
    /// registered again meanwhile): then nothing was written.
    fn record_sync_success(
        &self,
        name: &RepoName,
        now: SystemTime,
        sync: &SyncRecord<'_>,
        fence: Option<&SyncFence>,
    ) -> Result<Option<u64>, Error>;

    /// The branch heads the last successful sync recorded (branch, commit), sorted by branch:
    /// what every replica resolves a branch name to in cluster mode. `None` when this backend
    /// keeps none (SQLite: one data directory has one mirror, whose refs are the truth).
    fn recorded_heads(&self, _name: &RepoName) -> Result<Option<Vec<(String, CommitId)>>, Error> {
        Ok(None)
    }

    /// Takes the cluster-wide lease on syncing `name` for `ttl` (renewed with
    /// [`RegistryBackend::renew_sync_lease`] while the sync runs). SQLite answers
    /// [`SyncLease::NotShared`]: the mirror file lock already makes syncs of one data
    /// directory take turns.
    fn take_sync_lease(&self, _name: &RepoName, _ttl: Duration) -> Result<SyncLease, Error> {
        Ok(SyncLease::NotShared)
    }

    /// Extends a held lease to `ttl` from now; `false` when it is no longer this holder's.
    fn renew_sync_lease(
        &self,
        _name: &RepoName,
        _token: i64,
        _ttl: Duration,
    ) -> Result<bool, Error> {
        Ok(true)
    }

    /// Gives a held lease back (best effort: an unreleased lease runs out by itself).
    fn release_sync_lease(&self, _name: &RepoName, _token: i64) {}

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

/// What a successful sync records.
pub(crate) struct SyncRecord<'a> {
    pub default_branch: Option<&'a str>,
    /// The default branch's head.
    pub head: Option<&'a CommitId>,
    /// Every distinct branch head (seen heads, G-5).
    pub heads_seen: &'a [CommitId],
    /// Every tracked branch and its head.
    pub branches: &'a [(String, CommitId)],
}

/// What entitles a sync to record its result in cluster mode: the registration it fetched
/// for and the sync lease it holds.
pub(crate) struct SyncFence {
    pub incarnation: u64,
    pub lease: i64,
}

/// The answer to [`RegistryBackend::take_sync_lease`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncLease {
    /// The backend has no cluster to share syncs with (SQLite): sync.
    NotShared,
    /// Held, under this token (a fencing token: unique per grant).
    Held(i64),
    /// Another replica holds it: follow its recorded heads instead of fetching the source.
    Busy,
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
    /// The index-branch patterns (S-8); empty: the default branch only.
    pub index_branches: Vec<String>,
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
            index_branches: self.index_branches.clone(),
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
const REPO_COLUMNS: &str = "name, source, registered_path, branch, default_branch, head, last_sync, last_good_sync, last_error, incarnation, state_gen, private, index_branches";

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
    String,
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
        index_branches,
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
        index_branches: split_index_branches(&index_branches),
    })
}

/// The index-branch patterns as stored: one per line (a branch name or pattern never holds
/// a line break: [`crate::check_index_branches`] refuses control characters).
pub(crate) fn join_index_branches(patterns: &[String]) -> String {
    patterns.join("\n")
}

fn split_index_branches(stored: &str) -> Vec<String> {
    stored
        .lines()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
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
