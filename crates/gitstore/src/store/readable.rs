//! Whether a commit may be read now (G-5, G-8): a retention root, a live lease, or reached by
//! the (memoised) ancestor walk, where the walk may run; else the precise reason.

use super::{Inner, RepoState, View, Walk, unwalked};
use crate::objects::{odb, to_commit_id};
use crate::retention::Reach;
use crate::{Error, handles};
use gix::ObjectId;
use std::time::SystemTime;

impl Inner {
    /// Whether `id` is reachable from the retention roots active at `now`, walking as far as
    /// needed (maintenance and the operations by name).
    pub(super) fn is_retained(
        &self,
        state: &RepoState,
        view: &View,
        id: &ObjectId,
        now: SystemTime,
    ) -> Result<bool, Error> {
        Ok(self
            .is_retained_with(state, view, id, now, Walk::Unbounded)?
            .unwrap_or(false))
    }

    /// [`Inner::is_retained`] where `walk` says whether the ancestor walk may run here:
    /// `None` when the memo cannot answer yet and it may not. A root or a commit the memo
    /// reached answers in O(1).
    pub(crate) fn is_retained_with(
        &self,
        state: &RepoState,
        view: &View,
        id: &ObjectId,
        now: SystemTime,
        walk: Walk<'_>,
    ) -> Result<Option<bool>, Error> {
        let retention = self.config.retention;
        if view.roots.is_root(id, now, retention) {
            return Ok(Some(true));
        }
        // The memo follows the newest roots: a call holding the view from before a sync
        // asks it with those, so that it is extended, never sent back to older roots.
        let current = state.view();
        let view = match &current {
            Some(current) if current.roots.generation > view.roots.generation => current,
            _ => view,
        };
        let budget = match walk {
            Walk::Never | Walk::Unbounded => None,
            Walk::Within(budget) => Some(budget),
        };
        match state.memo.look(&view.roots, now, retention, id) {
            Reach::Reached => Ok(Some(true)),
            Reach::Unreached => Ok(Some(false)),
            Reach::Unknown if matches!(walk, Walk::Never) => Ok(None),
            Reach::Unknown => state
                .memo
                .walk(&view.roots, now, retention, &view.repo, Some(id), budget)
                .map(Some),
        }
    }

    /// Ok if `id` may be read now; otherwise the precise reason. `allow_leased`: a commit
    /// under a live lease stays readable for the operation holding it (G-8), even if it left
    /// retention meanwhile; new requests (`resolve`, `lease`, `pin`) need real retention.
    pub(super) fn check_readable(
        &self,
        state: &RepoState,
        view: &View,
        id: &ObjectId,
        allow_leased: bool,
    ) -> Result<(), Error> {
        self.check_readable_with(state, view, id, allow_leased, Walk::Unbounded)?
            .ok_or_else(unwalked)
    }

    /// [`Inner::check_readable`] where `walk` says whether the ancestor walk may run here:
    /// `Ok(None)` when only the walk can tell and it may not.
    pub(super) fn check_readable_with(
        &self,
        state: &RepoState,
        view: &View,
        id: &ObjectId,
        allow_leased: bool,
        walk: Walk<'_>,
    ) -> Result<Option<()>, Error> {
        let now = self.clock.now();
        // Cheapest first: roots, then live leases, then the (memoised) ancestor walk.
        if view.roots.is_root(id, now, self.config.retention)
            || (allow_leased && self.is_leased(state, id))
        {
            return Ok(Some(()));
        }
        match self.is_retained_with(state, view, id, now, walk)? {
            Some(true) => return Ok(Some(())),
            Some(false) => {}
            None => return Ok(None),
        }
        let commit = to_commit_id(id)?;
        match handles::with_repo(&view.repo, |repo| repo.try_find_header(*id)) {
            Ok(Some(h)) if h.kind() == gix::objs::Kind::Commit => Err(Error::OutsideRetention {
                repo: state.name.clone(),
                commit,
            }),
            // Cluster mode: another replica may well answer it; this one has to catch up.
            Ok(None) if self.behind(view, id) => Err(self.catching_up(state)),
            Ok(_) => Err(Error::UnknownRevision {
                repo: state.name.clone(),
                revision: commit.to_string(),
            }),
            Err(e) => Err(odb(e)),
        }
    }
}
