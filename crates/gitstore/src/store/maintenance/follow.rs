//! Cluster mode: this mirror brought to what the shared rows record, whichever replica wrote
//! them: a follow fetches the recorded heads it lacks and publishes their view (the follow
//! workers that run it are `store/follow.rs`), and `align_refs` makes its bookkeeping refs
//! name the shared seen heads and pins.

use super::super::views::is_commit;
use super::super::{Inner, PINNED_REFS, RepoState, SEEN_REFS, View, lock};
use super::sync::changed_branches;
use super::{as_storage, mark_needs_gc};
use crate::gitcli::{LOCAL_TIMEOUT, ProgressObserver};
use crate::objects::{to_commit_id, to_oid};
use crate::{Error, RepoName, SourceFetch, SyncOutcome};
use gix::ObjectId;
use std::collections::HashSet;

impl Inner {
    /// Cluster mode, under the maintenance and mirror locks: brings the mirror up to the
    /// heads the last sync recorded (fetching only when it lacks one of them) and publishes
    /// the view of them. Records nothing: the recorded heads were decided by the lease
    /// holder. A recorded head the source no longer has is an error (its branches stay
    /// pending: reads of them answer "not synced" here until a later sync records heads this
    /// replica can fetch).
    pub(crate) fn follow_locked(
        &self,
        state: &RepoState,
        observer: Option<ProgressObserver<'_>>,
    ) -> Result<SyncOutcome, Error> {
        let row = self
            .db
            .repo(&state.name)?
            .filter(|row| row.incarnation == state.id)
            .ok_or_else(|| Error::UnknownRepo(state.name.clone()))?;
        if row.last_good_sync.is_none() {
            return Err(Error::NotSynced(state.name.clone()));
        }
        let recorded = self.db.recorded_heads(&state.name)?.unwrap_or_default();
        self.ensure_mirror(state)?;
        let mut has_all = !recorded.is_empty();
        if has_all {
            let repo = self.open_repo(state)?.to_thread_local();
            for (_, commit) in &recorded {
                if !is_commit(&repo, to_oid(commit)?)? {
                    has_all = false;
                    break;
                }
            }
        }
        if !has_all {
            self.fetch(state, SourceFetch::Follow, observer)?;
        }
        let view = self.load_view(state, row.default_branch.clone())?;
        if let Err(e) = self.align_refs(state, &view) {
            // The sweep aligns again before any garbage collection.
            tracing::warn!(repo = %state.name, error = %e, "gitstore: aligning bookkeeping refs failed");
        }
        let changed = changed_branches(state.view().as_deref(), &view.branches)?;
        let head = view.head.as_ref().map(to_commit_id).transpose()?;
        let missing: Vec<String> = view.pending.keys().cloned().collect();
        state.publish(view, row.state_gen);
        if !missing.is_empty() {
            return Err(Error::Sync {
                repo: state.name.clone(),
                message: format!(
                    "the source does not have the head another server recorded for {}; this server answers {} once a later sync records heads it can fetch",
                    missing.join(", "),
                    if missing.len() == 1 { "it" } else { "them" }
                ),
            });
        }
        Ok(SyncOutcome { head, changed })
    }

    /// [`Inner::follow_locked`] with the locks taken: the follow workers' job.
    ///
    /// Every follow is asked for by a view that lags (a read, a reload); a repository with no
    /// view by the time its turn comes was released meanwhile ([`Inner::release_local`]), and
    /// following it would clone back what this replica just dropped. It is left alone: a
    /// replica that owns it again fetches it with its next sync.
    pub(crate) fn follow(&self, name: &RepoName) -> Result<SyncOutcome, Error> {
        let state = self.state_fresh(name)?;
        let _maintenance = lock(&state.maintenance);
        let Some(_mirror) = self.lock_mirror(&state)? else {
            return Err(Error::UnknownRepo(name.clone()));
        };
        if state.view().is_none() {
            tracing::debug!(repo = %name, "gitstore: not held here (released); nothing to follow");
            return Ok(SyncOutcome {
                head: None,
                changed: Vec::new(),
            });
        }
        self.follow_locked(&state, None)
    }

    /// Cluster mode: makes this mirror's `refs/csg/seen/*` and `refs/csg/pinned/*` name
    /// exactly the commits it has among the shared seen heads and recorded heads (seen) and
    /// the shared pins (pinned) of `view`. Another replica's sync, pin or sweep changes the
    /// rows, never this mirror; without this, a commit the cluster retains could be collected
    /// here (a former head seen by another replica's sync, say, once a force-push left this
    /// mirror's branches), and refs of rows gone would keep objects forever. Dropping a ref
    /// marks the mirror for gc; commits leased here are kept by leased refs, which the sweep
    /// writes before any gc. With SQLite nothing to do: the rows and refs change together.
    pub(crate) fn align_refs(&self, state: &RepoState, view: &View) -> Result<(), Error> {
        if !self.mirrors_per_replica {
            return Ok(());
        }
        let listed = self
            .git_on_mirror(
                state,
                "for-each-ref",
                &[
                    "for-each-ref",
                    "--format=%(refname)",
                    SEEN_REFS,
                    PINNED_REFS,
                ],
                None,
                LOCAL_TIMEOUT,
            )
            .map_err(as_storage)?;
        let listed = String::from_utf8_lossy(&listed);
        let refs_under = |prefix: &str| -> HashSet<ObjectId> {
            listed
                .lines()
                .filter_map(|l| l.strip_prefix(prefix))
                .filter_map(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
                .collect()
        };
        let wanted_seen: HashSet<ObjectId> = view
            .roots
            .seen
            .keys()
            .chain(view.branches.values())
            .copied()
            .collect();
        let mut edits = String::new();
        let mut dropped = false;
        for (prefix, wanted) in [(SEEN_REFS, &wanted_seen), (PINNED_REFS, &view.pins)] {
            let have = refs_under(prefix);
            for id in wanted.difference(&have) {
                // A row naming a commit this mirror lacks gets its ref once a fetch brought it.
                if !view.roots.absent.contains(id) {
                    edits.push_str(&format!("update {prefix}{id} {id}\n"));
                }
            }
            for id in have.difference(wanted) {
                edits.push_str(&format!("delete {prefix}{id}\n"));
                dropped = true;
            }
        }
        if dropped {
            mark_needs_gc(state)?;
        }
        self.update_refs(state, edits).map_err(as_storage)
    }
}
