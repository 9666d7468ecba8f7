//! The sweep (G-5, G-8): former heads past the retention window expired unless leased by
//! any process, leased commits kept by refs of their own, mirrors whose refs let go of
//! anything garbage-collected, the trash emptied.

use super::super::{Heads, Inner, LEASED_REFS, RepoState, SEEN_REFS, View, lock, shared};
use super::{NEEDS_GC, as_storage, mark_needs_gc};
use crate::db::storage;
use crate::gitcli::{GC_TIMEOUT, LOCAL_TIMEOUT};
use crate::objects::to_commit_id;
use crate::retention::in_window;
use crate::{CommitId, Error, SweepReport};
use gix::ObjectId;
use std::collections::HashSet;
use std::sync::Arc;

impl Inner {
    pub(crate) fn sweep(&self) -> Result<SweepReport, Error> {
        // Idle records first: this store's own leases that ended must not keep anything.
        self.reclaim_idle_leases();
        self.refresh()?;
        let states: Vec<Arc<RepoState>> = self.states()?;
        let mut report = SweepReport::default();
        let mut first_error = None;
        for state in states {
            if let Err(e) = self.sweep_repo(&state, &mut report) {
                tracing::warn!(repo = %state.name, error = %e, "gitstore: sweep failed");
                first_error.get_or_insert(e);
            }
        }
        if let Err(e) = self.empty_trash() {
            tracing::warn!(error = %e, "gitstore: emptying the trash failed");
            first_error.get_or_insert(e);
        }
        report.expired.sort();
        report.kept_by_lease.sort();
        match first_error {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    fn sweep_repo(&self, state: &RepoState, report: &mut SweepReport) -> Result<(), Error> {
        // A repository busy with a fetch or gc (here or in another process) is swept next
        // round: one hung fetch must not hold up the sweep of every repository after it.
        let _maintenance = match state.maintenance.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                tracing::debug!(repo = %state.name, "gitstore: busy; swept next round");
                return Ok(());
            }
        };
        let Some(_mirror) = shared::try_lock_exclusive(&state.mirror_lock)? else {
            tracing::debug!(repo = %state.name, "gitstore: busy in another process; swept next round");
            return Ok(());
        };
        self.refresh()?;
        if !self.is_current(state) {
            return Ok(());
        }
        let Some(view) = state.view() else {
            return Ok(());
        };
        // Cluster mode: what the shared rows retain gets this mirror's refs before anything
        // here can be collected.
        self.align_refs(state, &view)?;
        let (candidates, quietly_dropped) = self.past_window(state, &view)?;
        let expiry = self.expire(state, &view, candidates, quietly_dropped, report)?;
        self.update_sweep_refs(state, &expiry)?;
        for commit in expiry.expired {
            report.expired.push((state.name.clone(), commit));
        }
        if state.mirror.join(NEEDS_GC).exists() {
            self.gc(state)?;
        }
        Ok(())
    }

    /// Former heads past the retention window: those to expire (unless leased), and those
    /// that only lose their bookkeeping because they are still reachable from an active root
    /// (a head that was fast-forwarded, say; it never left retention). The ancestor walks
    /// happen here, before the lease lock, so lease() is not held up.
    fn past_window(
        &self,
        state: &RepoState,
        view: &View,
    ) -> Result<(Vec<ObjectId>, Vec<CommitId>), Error> {
        let now = self.clock.now();
        let mut candidates = Vec::new();
        let mut quietly_dropped = Vec::new();
        for (id, last_seen) in &view.roots.seen {
            // A recorded head this mirror lacks is current all the same (cluster mode).
            if in_window(*last_seen, now, self.config.retention)
                || view.roots.fixed.contains(id)
                || view.pending.values().any(|p| p == id)
            {
                continue;
            }
            if self.is_retained(state, view, id, now)? {
                quietly_dropped.push(to_commit_id(id)?);
            } else {
                candidates.push(*id);
            }
        }
        Ok((candidates, quietly_dropped))
    }

    /// The commits of `state` leased now, by any process.
    fn leased_now(&self, state: &RepoState) -> Result<HashSet<ObjectId>, Error> {
        let mut leased = shared::live_leases(&self.leases_root(), state.id)?;
        leased.extend(self.leased_here(state));
        Ok(leased)
    }

    /// Drops `quietly_dropped` and the unleased `candidates` from the seen heads and publishes
    /// that; the leased ones are kept and reported.
    fn expire(
        &self,
        state: &RepoState,
        view: &View,
        candidates: Vec<ObjectId>,
        quietly_dropped: Vec<CommitId>,
        report: &mut SweepReport,
    ) -> Result<Expiry, Error> {
        // Leases of every process, the expiry published, then the leases again. No lock a
        // lease takes is held across any of it: a lease counts itself first and checks
        // retention after, so one counted before the expiry was published is found by the
        // second look and its commit kept by a leased ref (it is no longer a seen head, so
        // new requests are refused); one counted after sees the expiry.
        let mut leased = self.leased_now(state)?;
        let mut expired = Vec::new();
        let mut dropped: Vec<CommitId> = quietly_dropped;
        for id in &candidates {
            if leased.contains(id) {
                report
                    .kept_by_lease
                    .push((state.name.clone(), to_commit_id(id)?));
                if self.mirrors_per_replica {
                    // Cluster mode: the shared row goes by its recorded time alone (no other
                    // replica's sweep knows this one's leases); the leased ref made below
                    // keeps the commit in this mirror while the lease lives.
                    dropped.push(to_commit_id(id)?);
                }
            } else {
                expired.push(*id);
            }
        }
        for id in &expired {
            dropped.push(to_commit_id(id)?);
        }
        if !dropped.is_empty() {
            let state_gen = self.db.delete_seen(&state.name, &dropped)?;
            let view = self.refreshed_view(state, view)?;
            state.publish(view, state_gen);
            let late = self.leased_now(state)?;
            for id in expired.iter().filter(|id| late.contains(*id)) {
                report
                    .kept_by_lease
                    .push((state.name.clone(), to_commit_id(id)?));
            }
            expired.retain(|id| !late.contains(id));
            leased.extend(late);
        }
        let expired = expired.iter().map(to_commit_id).collect::<Result<_, _>>()?;
        Ok(Expiry {
            expired,
            dropped,
            leased,
        })
    }

    /// Deletes the seen refs of dropped heads and brings the leased refs in line with the
    /// leases; marks the mirror for gc when that let go of anything.
    fn update_sweep_refs(&self, state: &RepoState, expiry: &Expiry) -> Result<(), Error> {
        // Leased commits that are no longer roots (a commit from the history of a head that
        // just expired, say) get a ref of their own so gc cannot take them (G-8); refs of
        // leases that ended are dropped.
        let existing = self.git_on_mirror(
            state,
            "for-each-ref",
            &["for-each-ref", "--format=%(refname)", LEASED_REFS],
            None,
            LOCAL_TIMEOUT,
        );
        let existing = existing.map_err(as_storage)?;
        let existing: HashSet<ObjectId> = String::from_utf8_lossy(&existing)
            .lines()
            .filter_map(|l| l.strip_prefix(LEASED_REFS))
            .filter_map(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
            .collect();
        let mut edits = String::new();
        for commit in &expiry.dropped {
            edits.push_str(&format!("delete {SEEN_REFS}{commit}\n"));
        }
        for id in expiry.leased.difference(&existing) {
            edits.push_str(&format!("update {LEASED_REFS}{id} {id}\n"));
        }
        let mut dropped_lease_refs = false;
        for id in existing.difference(&expiry.leased) {
            edits.push_str(&format!("delete {LEASED_REFS}{id}\n"));
            dropped_lease_refs = true;
        }
        if !expiry.expired.is_empty() || dropped_lease_refs {
            mark_needs_gc(state)?;
        }
        self.update_refs(state, edits).map_err(as_storage)
    }

    /// Garbage-collects the mirror, then reopens it for new readers.
    fn gc(&self, state: &RepoState) -> Result<(), Error> {
        // No lock that reads take (14): a read keeps using the packs it has open or
        // mapped, which survive their unlinking, and gix re-scans the pack directory when
        // an object is not where its snapshot said. Only objects unreachable from every
        // retained root and every lease record are pruned, and nothing reads those.
        let hook = lock(&self.gc_hook).clone();
        if let Some(hook) = hook {
            hook(&state.name);
        }
        let gc = self.git_on_mirror(
            state,
            "gc",
            &[
                "-c",
                "gc.reflogExpire=now",
                "-c",
                "gc.reflogExpireUnreachable=now",
                "-c",
                "gc.pruneExpire=now",
                "gc",
                "--quiet",
                "--prune=now",
            ],
            None,
            GC_TIMEOUT,
        );
        // On failure the marker stays: the next sweep, in any process, tries again.
        gc.map_err(as_storage)?;
        std::fs::remove_file(state.mirror.join(NEEDS_GC))
            .map_err(storage("finishing a garbage collection"))?;
        // A fresh handle: the old one holds the maps of packs gc replaced (readers still
        // on it keep them until they finish).
        if let Some(current) = state.view() {
            let repo = Arc::new(self.open_repo(state)?);
            let view =
                self.assemble_view(state, repo, Heads::of(&current), current.tags.clone())?;
            state.set_view(Some(Arc::new(view)));
        }
        Ok(())
    }
}

/// What one sweep of a repository let go of, and the leases it found.
struct Expiry {
    /// Heads expired: past the window and not leased.
    expired: Vec<CommitId>,
    /// Heads no longer seen: the expired ones and those still reachable from a root.
    dropped: Vec<CommitId>,
    /// Commits leased by any process, at either look.
    leased: HashSet<ObjectId>,
}
