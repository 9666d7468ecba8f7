//! The registry tables in PostgreSQL through [`metadb`] (cluster mode): replicas share the
//! rows, each keeps its mirrors in a data directory of its own.
//!
//! Freshness without a query per call: every write transaction notifies the topic
//! `registry` ([`metadb::notify_change`]), and the change signal the store looks at on every
//! call ([`RegistryBackend::changes`]) is metadb's counter of those notifications (plus
//! listener reconnects) plus this process's own writes. The last registry read is kept and
//! answers `repos`/`repo` while the signal stands still, so a read asks PostgreSQL nothing
//! when nothing changed.
//!
//! While PostgreSQL is unreachable, reads answer from that last registry read (logged once
//! per outage) and make no attempt to reach it; writes fail at once with
//! [`METADATA_UNREACHABLE`]. When the listener reconnects, the signal moves and the next
//! call re-reads everything.
//!
//! Cluster mode's own tables (version 2): `branch_heads`, every branch head the last
//! successful sync recorded, which every replica resolves branch names to; and
//! `sync_leases`, a row per repository being synced (`token` from the sequence
//! `sync_lease_tokens`, `expires_at` by the database's clock, so replicas' clocks never
//! disagree about it). A lease is taken by one conditional upsert, renewed by its holder and
//! deleted when the sync ends; a holder that died leaves a row that simply expires. The
//! record of a sync locks and checks its lease row (token and expiry) and its registration
//! (incarnation) in its own transaction: the token is a fencing token. Lease statements
//! notify nobody: they change no registry state.

use super::{
    REGISTRY_GENERATION, REPO_COLUMNS, RawRow, RegistryBackend, RepoRow, SyncFence, SyncLease,
    SyncRecord, join_index_branches, parse_pins, parse_row, parse_seen, storage, to_db_time,
};
use crate::error::METADATA_UNREACHABLE;
use crate::{CommitId, Error, Registration, RepoName};
use arc_swap::ArcSwapOption;
use metadb::postgres::{self, Client, IsolationLevel, Transaction};
use metadb::{ChangeCounter, Database, Health, Migration};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The notification topic of the registry tables (and metadb's migration component).
const TOPIC: &str = "registry";

/// After a failed read, how long until the signal moves by itself so the next call tries
/// again (a timed-out query says nothing about the listener, which may never reconnect).
const RETRY_READ_AFTER: Duration = Duration::from_secs(1);

/// The schema's versions. Version 1 is the SQLite schema of the same version, with
/// PostgreSQL's types; version 2 is cluster mode's own (SQLite skips it: one data
/// directory has one mirror, whose refs are the truth); version 3 adds the index-branch
/// patterns (S-8), SQLite's version 2.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "registry tables",
        sql: "
CREATE TABLE repos (
    name TEXT PRIMARY KEY NOT NULL,
    source TEXT NOT NULL,
    registered_path TEXT NOT NULL,
    branch TEXT,
    default_branch TEXT,
    head TEXT,
    last_sync BIGINT,
    last_good_sync BIGINT,
    last_error TEXT,
    incarnation BIGINT NOT NULL DEFAULT 0,
    state_gen BIGINT NOT NULL DEFAULT 0,
    private BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE TABLE seen_heads (
    repo TEXT NOT NULL,
    sha TEXT NOT NULL,
    last_seen BIGINT NOT NULL,
    PRIMARY KEY (repo, sha)
);
CREATE TABLE meta (
    key TEXT PRIMARY KEY NOT NULL,
    value BIGINT NOT NULL
);
CREATE TABLE pins (
    repo TEXT NOT NULL,
    sha TEXT NOT NULL,
    PRIMARY KEY (repo, sha)
);
",
    },
    Migration {
        version: 2,
        name: "recorded branch heads and sync leases",
        sql: "
CREATE TABLE branch_heads (
    repo TEXT NOT NULL,
    branch TEXT NOT NULL,
    sha TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (repo, branch)
);
CREATE TABLE sync_leases (
    repo TEXT PRIMARY KEY NOT NULL,
    token BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE SEQUENCE sync_lease_tokens;
",
    },
    Migration {
        version: 3,
        name: "index-branch patterns",
        sql: "
ALTER TABLE repos ADD COLUMN index_branches TEXT NOT NULL DEFAULT '';
",
    },
];

/// The last registry read, and the change signal loaded just before it.
struct Snapshot {
    signal: u64,
    generation: u64,
    rows: Vec<RepoRow>,
}

pub(crate) struct PgRegistry {
    db: Database,
    /// metadb's count of `registry` notifications and listener reconnects.
    notified: ChangeCounter,
    /// Bumped after every write of this process, committed or not (its own notification
    /// arrives later, and a failed insert may mean another replica's row), and by a retry
    /// after a failed read.
    local: AtomicU64,
    /// The last registry read. Replaced whole, loaded without a lock.
    last: ArcSwapOption<Snapshot>,
    /// Whether this outage was logged.
    outage_logged: AtomicBool,
    /// When a failed read may be retried, in milliseconds after `started` (0: none due).
    retry_at: AtomicU64,
    started: Instant,
}

impl PgRegistry {
    /// Brings the registry tables of `db` to the latest version (replicas starting together
    /// take turns) and watches their notifications.
    pub(crate) fn open(db: Database) -> Result<Self, Error> {
        db.migrate(TOPIC, MIGRATIONS).map_err(|e| {
            tracing::warn!(error = %e, "gitstore: cannot migrate the registry tables");
            if e.is_unreachable() {
                Error::Storage(METADATA_UNREACHABLE.to_string())
            } else {
                Error::Storage(format!(
                    "the registry tables of the metadata database could not be brought up to date ({e})"
                ))
            }
        })?;
        Ok(Self {
            notified: db.change_counter(TOPIC),
            db,
            local: AtomicU64::new(0),
            last: ArcSwapOption::empty(),
            outage_logged: AtomicBool::new(false),
            retry_at: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The change signal: notifications, reconnects, this process's writes and due retries.
    fn signal(&self) -> u64 {
        let due = self.retry_at.load(Ordering::SeqCst);
        if due != 0
            && self.now_ms() >= due
            && self
                .retry_at
                .compare_exchange(due, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.local.fetch_add(1, Ordering::SeqCst);
        }
        self.notified
            .get()
            .wrapping_add(self.local.load(Ordering::SeqCst))
    }

    /// The last registry read if nothing changed since.
    fn fresh(&self, signal: u64) -> Option<Arc<Snapshot>> {
        self.last.load_full().filter(|s| s.signal == signal)
    }

    fn reachable(&self) -> bool {
        matches!(self.db.health(), Health::Ok)
    }

    /// The error of a write (or a read with nothing to fall back on) during an outage.
    fn unreachable(&self) -> Error {
        if !self.outage_logged.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                "gitstore: the metadata database is unreachable; the registry answers from its last known state and refuses changes until it is back"
            );
        }
        Error::Storage(METADATA_UNREACHABLE.to_string())
    }

    /// Sorts a metadb failure: unreachable (the clear outage error) or anything else (logged,
    /// the generic storage error).
    fn failed(&self, what: &'static str, error: metadb::Error) -> Error {
        if error.is_unreachable() {
            self.unreachable()
        } else {
            storage(what)(error)
        }
    }

    fn succeeded(&self) {
        if self.outage_logged.swap(false, Ordering::SeqCst) {
            tracing::info!("gitstore: the metadata database is reachable again");
        }
    }

    /// Runs a read. During an outage it fails at once without any connection attempt (the
    /// read path never waits for one); after a failure the signal moves by itself a moment
    /// later, so a later call tries again.
    fn read<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, Error> {
        if !self.reachable() {
            return Err(self.unreachable());
        }
        match self.db.run(work) {
            Ok(value) => {
                self.succeeded();
                Ok(value)
            }
            Err(e) => {
                let due = self.now_ms() + RETRY_READ_AFTER.as_millis() as u64;
                let _ = self
                    .retry_at
                    .compare_exchange(0, due, Ordering::SeqCst, Ordering::SeqCst);
                Err(self.failed(what, e))
            }
        }
    }

    /// Runs a write transaction that notifies every replica when it commits.
    fn write<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut Transaction<'_>) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, Error> {
        let written = self.write_if(what, move |tx| work(tx).map(Some))?;
        written.ok_or_else(|| storage(what)("a write without a condition was not made"))
    }

    /// [`PgRegistry::write`] whose work may decide not to write: `None` rolls the transaction
    /// back, and nobody is notified.
    fn write_if<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut Transaction<'_>) -> Result<Option<T>, postgres::Error> + Send + 'static,
    ) -> Result<Option<T>, Error> {
        let result = self.db.run(move |client| {
            let mut tx = client.transaction()?;
            let Some(value) = work(&mut tx)? else {
                return Ok(None);
            };
            metadb::notify_change(&mut tx, TOPIC)?;
            tx.commit()?;
            Ok(Some(value))
        });
        // Whatever happened, this process's next look re-reads the rows: its own
        // notification is still on its way, and a refused insert may be another replica's.
        self.local.fetch_add(1, Ordering::SeqCst);
        match result {
            Ok(value) => {
                self.succeeded();
                Ok(value)
            }
            Err(e) => Err(self.failed(what, e)),
        }
    }
}

impl PgRegistry {
    /// A sync lease statement: not a registry change, so nobody is notified and the
    /// registry is not re-read after it.
    fn lease_call<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, Error> {
        if !self.reachable() {
            return Err(self.unreachable());
        }
        self.db.run(work).map_err(|e| self.failed(what, e))
    }
}

fn raw_row(row: &postgres::Row) -> Result<RawRow, postgres::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
        row.try_get(9)?,
        row.try_get(10)?,
        row.try_get(11)?,
        row.try_get(12)?,
    ))
}

/// Bumps the registry generation inside `tx`; answers the new value.
fn bump_registry(tx: &mut Transaction<'_>) -> Result<i64, postgres::Error> {
    tx.query_one(
        "INSERT INTO meta (key, value) VALUES ($1, 1)
         ON CONFLICT (key) DO UPDATE SET value = meta.value + 1 RETURNING value",
        &[&REGISTRY_GENERATION],
    )?
    .try_get(0)
}

/// Bumps the state generation of `name` inside `tx`; answers the new value.
fn bump_state(tx: &mut Transaction<'_>, name: &str) -> Result<u64, postgres::Error> {
    let row = tx.query_opt(
        "UPDATE repos SET state_gen = state_gen + 1 WHERE name = $1 RETURNING state_gen",
        &[&name],
    )?;
    let value: Option<i64> = row.map(|r| r.try_get(0)).transpose()?;
    Ok(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0))
}

fn db_incarnation(incarnation: u64) -> i64 {
    i64::try_from(incarnation).unwrap_or(-1)
}

impl RegistryBackend for PgRegistry {
    fn changes(&self) -> Option<u64> {
        Some(self.signal())
    }

    /// The change signal itself: with notifications there is nothing cheaper or fresher to
    /// ask, and no query is made.
    fn data_version(&self) -> Result<i64, Error> {
        Ok(self.signal() as i64)
    }

    fn registry(&self) -> Result<(u64, Vec<RepoRow>), Error> {
        let signal = self.signal();
        if let Some(last) = self.fresh(signal) {
            return Ok((last.generation, last.rows.clone()));
        }
        let read = self.read("reading registrations", |client| {
            // One snapshot for the generation and the rows.
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let generation: i64 = tx
                .query_opt(
                    "SELECT value FROM meta WHERE key = $1",
                    &[&REGISTRY_GENERATION],
                )?
                .map(|row| row.try_get(0))
                .transpose()?
                .unwrap_or(0);
            let raws = tx
                .query(
                    &format!("SELECT {REPO_COLUMNS} FROM repos ORDER BY name"),
                    &[],
                )?
                .iter()
                .map(raw_row)
                .collect::<Result<Vec<_>, _>>()?;
            tx.commit()?;
            Ok((generation, raws))
        });
        match read {
            Ok((generation, raws)) => {
                let rows: Vec<RepoRow> =
                    raws.into_iter().map(parse_row).collect::<Result<_, _>>()?;
                let generation = u64::try_from(generation).unwrap_or(0);
                self.last.store(Some(Arc::new(Snapshot {
                    signal,
                    generation,
                    rows: rows.clone(),
                })));
                Ok((generation, rows))
            }
            // The last known registrations keep answering (reads go on during an outage).
            Err(e) => match self.last.load_full() {
                Some(last) => Ok((last.generation, last.rows.clone())),
                None => Err(e),
            },
        }
    }

    fn repo(&self, name: &RepoName) -> Result<Option<RepoRow>, Error> {
        let find = |last: &Snapshot| last.rows.iter().find(|r| &r.name == name).cloned();
        if let Some(last) = self.fresh(self.signal()) {
            return Ok(find(&last));
        }
        let key = name.as_str().to_string();
        let read = self.read("reading a registration", move |client| {
            client
                .query_opt(
                    &format!("SELECT {REPO_COLUMNS} FROM repos WHERE name = $1"),
                    &[&key],
                )?
                .as_ref()
                .map(raw_row)
                .transpose()
        });
        match read {
            Ok(raw) => raw.map(parse_row).transpose(),
            Err(e) => match self.last.load_full() {
                Some(last) => Ok(find(&last)),
                None => Err(e),
            },
        }
    }

    fn check_writable(&self) -> Result<(), Error> {
        if self.reachable() {
            Ok(())
        } else {
            Err(self.unreachable())
        }
    }

    fn insert_repo(&self, reg: &Registration) -> Result<u64, Error> {
        let (name, source, path, branch) = (
            reg.name.as_str().to_string(),
            reg.source.clone(),
            reg.registered_path.as_str().to_string(),
            reg.branch.clone(),
        );
        let private = reg.private.unwrap_or(false);
        let incarnation = self.write("saving a registration", move |tx| {
            let incarnation = bump_registry(tx)?;
            tx.execute(
                "INSERT INTO repos (name, source, registered_path, branch, default_branch, incarnation, private)
                 VALUES ($1, $2, $3, $4, $4, $5, $6)",
                &[&name, &source, &path, &branch, &incarnation, &private],
            )?;
            Ok(incarnation)
        })?;
        Ok(u64::try_from(incarnation).unwrap_or(0))
    }

    fn set_private(&self, name: &RepoName, private: bool) -> Result<bool, Error> {
        let name = name.as_str().to_string();
        let changed = self.write("saving the visibility", move |tx| {
            tx.execute(
                "UPDATE repos SET private = $2 WHERE name = $1",
                &[&name, &private],
            )
        })?;
        Ok(changed > 0)
    }

    fn set_index_branches(&self, name: &RepoName, patterns: &[String]) -> Result<bool, Error> {
        let (name, stored) = (name.as_str().to_string(), join_index_branches(patterns));
        let changed = self.write("saving the index-branch patterns", move |tx| {
            tx.execute(
                "UPDATE repos SET index_branches = $2 WHERE name = $1",
                &[&name, &stored],
            )
        })?;
        Ok(changed > 0)
    }

    fn delete_repo(&self, name: &RepoName, incarnation: u64) -> Result<Option<u64>, Error> {
        let name = name.as_str().to_string();
        let generation = self.write("removing a registration", move |tx| {
            let removed = tx.execute(
                "DELETE FROM repos WHERE name = $1 AND incarnation = $2",
                &[&name, &db_incarnation(incarnation)],
            )?;
            if removed == 0 {
                return Ok(None);
            }
            let generation = bump_registry(tx)?;
            tx.execute("DELETE FROM seen_heads WHERE repo = $1", &[&name])?;
            tx.execute("DELETE FROM pins WHERE repo = $1", &[&name])?;
            tx.execute("DELETE FROM branch_heads WHERE repo = $1", &[&name])?;
            Ok(Some(generation))
        })?;
        Ok(generation.map(|g| u64::try_from(g).unwrap_or(0)))
    }

    fn record_sync_failure(
        &self,
        name: &RepoName,
        now: SystemTime,
        message: &str,
    ) -> Result<(), Error> {
        let (name, message) = (name.as_str().to_string(), message.to_string());
        self.write("saving the sync state", move |tx| {
            tx.execute(
                "UPDATE repos SET last_sync = $2, last_error = $3 WHERE name = $1",
                &[&name, &to_db_time(now), &message],
            )
        })?;
        Ok(())
    }

    /// With a fence, first makes sure the sync still holds its lease and the registration
    /// is still the one it fetched for, and keeps both rows locked until the commit: a lease
    /// taken over meanwhile (this replica's renewals failed past its expiry) or a name
    /// registered again means another sync decides now, and nothing is written.
    fn record_sync_success(
        &self,
        name: &RepoName,
        now: SystemTime,
        sync: &SyncRecord<'_>,
        fence: Option<&SyncFence>,
    ) -> Result<Option<u64>, Error> {
        let name = name.as_str().to_string();
        let default_branch = sync.default_branch.map(str::to_string);
        let head = sync.head.map(|h| h.as_str().to_string());
        let seen: Vec<String> = sync
            .heads_seen
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        let branches: Vec<(String, String)> = sync
            .branches
            .iter()
            .map(|(b, c)| (b.clone(), c.as_str().to_string()))
            .collect();
        let fence = fence.map(|f| (db_incarnation(f.incarnation), f.lease));
        self.write_if("saving the sync state", move |tx| {
            if let Some((incarnation, token)) = fence {
                let leased = tx.query_opt(
                    "SELECT 1 FROM sync_leases
                     WHERE repo = $1 AND token = $2 AND expires_at > clock_timestamp()
                     FOR UPDATE",
                    &[&name, &token],
                )?;
                let registered = tx.query_opt(
                    "SELECT 1 FROM repos WHERE name = $1 AND incarnation = $2 FOR UPDATE",
                    &[&name, &incarnation],
                )?;
                if leased.is_none() || registered.is_none() {
                    return Ok(None);
                }
            }
            let now = to_db_time(now);
            let upsert = tx.prepare(
                "INSERT INTO seen_heads (repo, sha, last_seen) VALUES ($1, $2, $3)
                 ON CONFLICT (repo, sha) DO UPDATE SET last_seen = excluded.last_seen",
            )?;
            for sha in &seen {
                tx.execute(&upsert, &[&name, sha, &now])?;
            }
            tx.execute("DELETE FROM branch_heads WHERE repo = $1", &[&name])?;
            let record = tx.prepare(
                "INSERT INTO branch_heads (repo, branch, sha, recorded_at) VALUES ($1, $2, $3, $4)",
            )?;
            for (branch, sha) in &branches {
                tx.execute(&record, &[&name, branch, sha, &now])?;
            }
            tx.execute(
                "UPDATE repos SET last_sync = $2, last_good_sync = $2, last_error = NULL,
                     default_branch = $3, head = $4 WHERE name = $1",
                &[&name, &now, &default_branch, &head],
            )?;
            bump_state(tx, &name).map(Some)
        })
    }

    fn recorded_heads(&self, name: &RepoName) -> Result<Option<Vec<(String, CommitId)>>, Error> {
        let key = name.as_str().to_string();
        let rows = self.read("reading recorded branch heads", move |client| {
            client
                .query(
                    "SELECT branch, sha FROM branch_heads WHERE repo = $1 ORDER BY branch",
                    &[&key],
                )?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<(String, String)>, postgres::Error>>()
        })?;
        let mut heads = Vec::with_capacity(rows.len());
        for (branch, sha) in rows {
            match CommitId::parse(&sha) {
                Some(commit) => heads.push((branch, commit)),
                None => {
                    tracing::warn!(repo = %name, "gitstore: corrupt metadata row (recorded head)");
                    return Err(Error::Storage("metadata database".to_string()));
                }
            }
        }
        Ok(Some(heads))
    }

    /// One statement: a row per repository, taken when absent or expired (by the database's
    /// clock, so replicas' clocks never disagree about it), with a fresh token from a
    /// sequence. Two replicas asking at once are ordered by the row lock the upsert takes:
    /// the second sees the first's unexpired row and gets nothing.
    fn take_sync_lease(&self, name: &RepoName, ttl: Duration) -> Result<SyncLease, Error> {
        let key = name.as_str().to_string();
        let secs = ttl.as_secs_f64();
        let token = self.lease_call("taking a sync lease", move |client| {
            client
                .query_opt(
                    "INSERT INTO sync_leases AS l (repo, token, expires_at)
                     VALUES ($1, nextval('sync_lease_tokens'),
                             clock_timestamp() + make_interval(secs => $2))
                     ON CONFLICT (repo) DO UPDATE
                         SET token = excluded.token, expires_at = excluded.expires_at
                         WHERE l.expires_at <= clock_timestamp()
                     RETURNING token",
                    &[&key, &secs],
                )?
                .map(|row| row.try_get::<_, i64>(0))
                .transpose()
        })?;
        Ok(token.map_or(SyncLease::Busy, SyncLease::Held))
    }

    fn renew_sync_lease(&self, name: &RepoName, token: i64, ttl: Duration) -> Result<bool, Error> {
        let key = name.as_str().to_string();
        let secs = ttl.as_secs_f64();
        let renewed = self.lease_call("renewing a sync lease", move |client| {
            client.execute(
                "UPDATE sync_leases SET expires_at = clock_timestamp() + make_interval(secs => $3)
                 WHERE repo = $1 AND token = $2",
                &[&key, &token, &secs],
            )
        })?;
        Ok(renewed > 0)
    }

    fn release_sync_lease(&self, name: &RepoName, token: i64) {
        let key = name.as_str().to_string();
        let released = self.lease_call("releasing a sync lease", move |client| {
            client.execute(
                "DELETE FROM sync_leases WHERE repo = $1 AND token = $2",
                &[&key, &token],
            )
        });
        if let Err(e) = released {
            // It runs out by itself; until then other replicas follow instead of syncing.
            tracing::warn!(repo = %name, error = %e, "gitstore: a sync lease was not released");
        }
    }

    fn seen_heads(&self, name: &RepoName) -> Result<Vec<(CommitId, SystemTime)>, Error> {
        let name = name.as_str().to_string();
        let rows = self.read("reading seen heads", move |client| {
            client
                .query(
                    "SELECT sha, last_seen FROM seen_heads WHERE repo = $1",
                    &[&name],
                )?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<(String, i64)>, postgres::Error>>()
        })?;
        Ok(parse_seen(rows))
    }

    fn delete_seen(&self, name: &RepoName, shas: &[CommitId]) -> Result<u64, Error> {
        let name = name.as_str().to_string();
        let shas: Vec<String> = shas.iter().map(|c| c.as_str().to_string()).collect();
        self.write("expiring seen heads", move |tx| {
            tx.execute(
                "DELETE FROM seen_heads WHERE repo = $1 AND sha = ANY($2)",
                &[&name, &shas],
            )?;
            bump_state(tx, &name)
        })
    }

    fn pins(&self, name: &RepoName) -> Result<Vec<CommitId>, Error> {
        let name = name.as_str().to_string();
        let rows = self.read("reading pins", move |client| {
            client
                .query("SELECT sha FROM pins WHERE repo = $1", &[&name])?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<Vec<String>, postgres::Error>>()
        })?;
        Ok(parse_pins(&rows))
    }

    fn insert_pin(&self, name: &RepoName, sha: &CommitId) -> Result<u64, Error> {
        let (name, sha) = (name.as_str().to_string(), sha.as_str().to_string());
        self.write("saving a pin", move |tx| {
            tx.execute(
                "INSERT INTO pins (repo, sha) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&name, &sha],
            )?;
            bump_state(tx, &name)
        })
    }

    fn delete_pin(&self, name: &RepoName, sha: &CommitId) -> Result<Option<u64>, Error> {
        let (name, sha) = (name.as_str().to_string(), sha.as_str().to_string());
        self.write("removing a pin", move |tx| {
            let removed = tx.execute(
                "DELETE FROM pins WHERE repo = $1 AND sha = $2",
                &[&name, &sha],
            )?;
            if removed == 0 {
                return Ok(None);
            }
            bump_state(tx, &name).map(Some)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RepoPath;
    use metadb::postgres::NoTls;
    use metadb::testing::within;

    /// A writer elsewhere holding the registry tables locked (a migration, an operator's
    /// `LOCK TABLE`): a registry read that must ask PostgreSQL gives up within the call
    /// timeout and answers from the last rows read; taking a sync lease fails within it too.
    #[test]
    fn reads_do_not_wait_for_a_locked_table() {
        within(Duration::from_secs(60), || {
            let url = metadb::testing::shared().create_database();
            let options = metadb::Options {
                call_timeout: Duration::from_millis(500),
                ..metadb::Options::default()
            };
            let db = Database::connect(&url, options).expect("connect");
            let registry = PgRegistry::open(db).expect("open");
            let name = RepoName::parse("acme/one").expect("name");
            registry
                .insert_repo(&Registration {
                    name: name.clone(),
                    source: "https://example.com/acme/one.git".to_owned(),
                    registered_path: RepoPath::root(),
                    branch: None,
                    private: None,
                })
                .expect("register");
            assert_eq!(registry.registry().expect("read").1.len(), 1);

            let mut locker = Client::connect(&url, NoTls).expect("a connection of the test's own");
            let mut tx = locker.transaction().expect("begin");
            tx.batch_execute("LOCK TABLE repos, meta, sync_leases IN ACCESS EXCLUSIVE MODE")
                .expect("lock");
            // Something changed: the next read asks the database.
            registry.local.fetch_add(1, Ordering::SeqCst);

            let started = Instant::now();
            let (_, rows) = registry.registry().expect("the last rows read");
            assert_eq!(rows.len(), 1);
            assert!(registry.repo(&name).expect("the last rows read").is_some());
            let lease = registry.take_sync_lease(&name, Duration::from_secs(30));
            assert!(lease.is_err(), "{lease:?}");
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "reads waited {:?}",
                started.elapsed()
            );

            tx.rollback().expect("unlock");
            let lease = registry.take_sync_lease(&name, Duration::from_secs(30));
            assert!(matches!(lease, Ok(SyncLease::Held(_))), "{lease:?}");
        });
    }
}
