//! Snapshot leases (G-8): counted in memory, recorded on disk once per (registration,
//! commit), checked against retention after they are counted; released and reclaimed.

use super::{Inner, Leased, RepoState, View, Walk, lock, unwalked};
use crate::objects::{to_commit_id, to_oid};
use crate::{CommitId, Error, RepoName};
use gix::ObjectId;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Idle lease records reclaimed under one hold of the leases' lock.
const RECLAIM_BATCH: usize = 64;

/// A lease counted but not yet granted: released again unless [`Counted::keep`] is called,
/// so a refused lease never leaves a count behind.
struct Counted<'a> {
    store: &'a Inner,
    key: Option<(u64, ObjectId)>,
}

impl Counted<'_> {
    fn keep(mut self) {
        self.key = None;
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            self.store.release(key);
        }
    }
}

impl Inner {
    pub(super) fn is_leased(&self, state: &RepoState, id: &ObjectId) -> bool {
        lock(&self.leases)
            .get(&(state.id, *id))
            .is_some_and(|lease| lease.count > 0)
    }

    /// Takes a lease after checking retention; returns the key to release.
    ///
    /// Never waits on a writer. The lease is counted first and retention checked after,
    /// while a sweep publishes its expiry first and reads the counts after: either the sweep
    /// sees this count and keeps the commit, or this check sees the expiry and refuses. The
    /// first lease of a (registration, commit) in this store writes its record on disk first
    /// and then re-reads what other processes published, which is the same order across
    /// processes (a sweep anywhere commits its expiry, then lists the records).
    pub(crate) fn lease(&self, name: &RepoName, commit: &CommitId) -> Result<Leased, Error> {
        let (state, view) = self.synced(name)?;
        self.lease_in(state, view, to_oid(commit)?, Walk::Unbounded)?
            .ok_or_else(unwalked)
    }

    /// Resolves `revision` and leases the commit it names, on one look at the registry: the
    /// frame of every read.
    pub(crate) fn lease_revision(
        &self,
        name: &RepoName,
        revision: Option<&str>,
    ) -> Result<Leased, Error> {
        self.lease_revision_with(name, revision, Walk::Unbounded)?
            .ok_or_else(unwalked)
    }

    /// [`Inner::lease_revision`] where `walk` says whether the retention walk may run here:
    /// `Ok(None)` when only the walk can tell and it may not (no lease is left counted).
    pub(crate) fn lease_revision_with(
        &self,
        name: &RepoName,
        revision: Option<&str>,
        walk: Walk<'_>,
    ) -> Result<Option<Leased>, Error> {
        let (state, view) = self.synced(name)?;
        match self.resolve_in(&state, &view, revision, walk)? {
            Some(id) => self.lease_in(state, view, id, walk),
            None => Ok(None),
        }
    }

    fn lease_in(
        &self,
        state: Arc<RepoState>,
        view: Arc<View>,
        id: ObjectId,
        walk: Walk<'_>,
    ) -> Result<Option<Leased>, Error> {
        // Warm the memo before counting: a first ancestor walk can take a while.
        if self
            .check_readable_with(&state, &view, &id, false, walk)?
            .is_none()
        {
            return Ok(None);
        }
        let key = (state.id, id);
        let recorded = {
            let mut leases = lock(&self.leases);
            // Checked with the count, under one lock: a release that saw no count has no
            // lease to wait for.
            if state.draining.load(Ordering::SeqCst) {
                return Err(Error::NotSynced(state.name.clone()));
            }
            let lease = leases.entry(key).or_default();
            lease.count += 1;
            lease.recorded
        };
        let counted = Counted {
            store: self,
            key: Some(key),
        };
        let (state, view) = if recorded {
            let view = state
                .view()
                .ok_or_else(|| Error::NotSynced(state.name.clone()))?;
            (state, view)
        } else {
            // Concurrent first leases may both write it: creating the record is idempotent.
            self.owner.record(key.0, &id)?;
            if let Some(lease) = lock(&self.leases).get_mut(&key) {
                lease.recorded = true;
            }
            self.synced(&state.name)?
        };
        let retained = if state.id == key.0 {
            self.is_retained_with(&state, &view, &id, self.clock.now(), walk)?
        } else {
            Some(false)
        };
        match retained {
            Some(true) => {}
            Some(false) => {
                return Err(Error::OutsideRetention {
                    repo: state.name.clone(),
                    commit: to_commit_id(&id)?,
                });
            }
            // The count goes with `counted`.
            None => return Ok(None),
        }
        counted.keep();
        Ok(Some(Leased { key, state, view }))
    }

    /// This store's leases of `state` now: every commit with a live count.
    pub(crate) fn leased_here(&self, state: &RepoState) -> HashSet<ObjectId> {
        lock(&self.leases)
            .iter()
            .filter(|((owner, _), lease)| *owner == state.id && lease.count > 0)
            .map(|((_, id), _)| *id)
            .collect()
    }

    /// Memory only: the record stays until this store's next sweep.
    pub(crate) fn release(&self, key: &(u64, ObjectId)) {
        if let Some(lease) = lock(&self.leases).get_mut(key) {
            lease.count = lease.count.saturating_sub(1);
        }
    }

    /// Drops this store's lease records whose count is zero (run by its sweep). A record's
    /// file is removed under the lock (else a new lease of the commit could lose its
    /// record), but in batches of [`RECLAIM_BATCH`], the lock given up between them: a read
    /// taking or dropping a lease waits for one batch of unlinks at most, however many idle
    /// leases callers left.
    pub(super) fn reclaim_idle_leases(&self) {
        let idle: Vec<(u64, ObjectId)> = lock(&self.leases)
            .iter()
            .filter(|(_, lease)| lease.count == 0)
            .map(|(key, _)| *key)
            .collect();
        for batch in idle.chunks(RECLAIM_BATCH) {
            let mut leases = lock(&self.leases);
            for key in batch {
                // Taken again since it was listed: it stays.
                if leases.get(key).is_some_and(|lease| lease.count == 0) {
                    self.owner.unrecord(key.0, &key.1);
                    leases.remove(key);
                }
            }
        }
    }
}
