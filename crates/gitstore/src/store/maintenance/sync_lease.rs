//! Cluster mode: the repository's cluster-wide sync lease, taken before a sync (or waited
//! for, while another replica runs the first sync) and renewed while the sync works.

use super::super::{Inner, RepoState};
use crate::db::SyncLease;
use crate::gitcli::FETCH_TIMEOUT;
use crate::{Error, RepoName};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How often a sync that waits for another replica's first sync of a repository looks again
/// (see [`Inner::take_sync_lease_or_follow`]): one cached row read and one lease statement.
const BUSY_POLL: Duration = Duration::from_millis(100);

/// How long a record in the database may take to reach this replica's registry (its
/// notification's trip) before a follow is tried anyway.
const RECORD_NOTICED_WITHIN: Duration = Duration::from_secs(5);

impl Inner {
    /// Takes the sync lease of `state` (under its maintenance and mirror locks); `Busy` once
    /// there is something recorded to follow.
    ///
    /// A repository nobody has synced yet has nothing to follow: answering "not synced"
    /// while another replica runs its first sync (a registration's, which every owner starts
    /// at once) would leave this replica without a copy until its next attempt, however
    /// late that is (a caller backs off after a failure). So it waits for that sync to end,
    /// looking every [`BUSY_POLL`]: once a head is recorded it follows it, and when the
    /// lease comes free with nothing recorded (the holder failed, or died and its lease ran
    /// out) it takes the lease and syncs itself. Bounded by how long a live holder can keep
    /// the lease (its fetch timeout) and the lease length after it. Only this replica's
    /// locks of this repository are held meanwhile, which no read takes.
    pub(super) fn take_sync_lease_or_follow(
        &self,
        state: &RepoState,
        ttl: Duration,
    ) -> Result<SyncLease, Error> {
        let name = &state.name;
        let give_up = Instant::now() + FETCH_TIMEOUT + ttl;
        let mut waited = false;
        loop {
            let lease = self.db.take_sync_lease(name, ttl)?;
            match lease {
                SyncLease::Busy if Instant::now() < give_up && !self.recorded(state)? => {}
                // The holder we waited for recorded and let go before its notification
                // reached this replica: follow its record rather than fetch it again.
                SyncLease::Held(token) if waited && self.has_recorded_heads(name)? => {
                    self.db.release_sync_lease(name, token);
                    self.await_record(state)?;
                    return Ok(SyncLease::Busy);
                }
                lease => return Ok(lease),
            }
            if !waited {
                tracing::info!(repo = %name, "gitstore: another replica runs the first sync; waiting for it");
                waited = true;
            }
            std::thread::sleep(BUSY_POLL);
        }
    }

    /// Whether a sync of `state` was recorded, as this replica's registry knows (a cached
    /// row, read again once a notification came in).
    fn recorded(&self, state: &RepoState) -> Result<bool, Error> {
        Ok(self
            .db
            .repo(&state.name)?
            .filter(|row| row.incarnation == state.id)
            .ok_or_else(|| Error::UnknownRepo(state.name.clone()))?
            .last_good_sync
            .is_some())
    }

    /// Whether the database holds recorded heads of `name` now (a query, not the cache).
    fn has_recorded_heads(&self, name: &RepoName) -> Result<bool, Error> {
        Ok(self
            .db
            .recorded_heads(name)?
            .is_some_and(|heads| !heads.is_empty()))
    }

    /// Waits (at most [`RECORD_NOTICED_WITHIN`]) until this replica's registry shows the
    /// record the database already holds: its notification is on its way.
    fn await_record(&self, state: &RepoState) -> Result<(), Error> {
        let until = Instant::now() + RECORD_NOTICED_WITHIN;
        while !self.recorded(state)? && Instant::now() < until {
            std::thread::sleep(BUSY_POLL);
        }
        Ok(())
    }

    /// How long a sync lease outlives its holder's last renewal.
    pub(super) fn sync_lease(&self) -> Duration {
        Duration::from_millis(self.sync_lease_ms.load(Ordering::Relaxed))
    }

    /// Runs `work` while a thread renews the sync lease `token` every third of `ttl`.
    pub(super) fn renewing<T>(
        &self,
        name: &RepoName,
        token: i64,
        ttl: Duration,
        work: impl FnOnce() -> T,
    ) -> T {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let renewer = std::thread::Builder::new()
                .name("gitstore-lease".to_string())
                .spawn_scoped(scope, move || {
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(ttl / 3) {
                        match self.db.renew_sync_lease(name, token, ttl) {
                            Ok(true) => {}
                            Ok(false) => {
                                tracing::warn!(repo = %name, "gitstore: the sync lease ran out and was taken over; this sync will not be recorded");
                                return;
                            }
                            // Tried again next time; if it runs out meanwhile, the record is
                            // refused (fenced) rather than made twice.
                            Err(e) => {
                                tracing::warn!(repo = %name, error = %e, "gitstore: renewing the sync lease failed")
                            }
                        }
                    }
                });
            if let Err(e) = renewer {
                tracing::warn!(repo = %name, error = %e, "gitstore: cannot renew the sync lease; it may run out before the sync records");
            }
            let out = work();
            // Also dropped when `work` panics, which ends the renewer before the scope joins.
            drop(stop);
            out
        })
    }
}
