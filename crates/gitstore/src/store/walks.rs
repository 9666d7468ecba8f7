//! Nothing walks on an async thread (issue 42 point 7): the leases of a caller that must not
//! walk the history ([`GitStore::lease_revision_inline`]) or must stop at its budget
//! ([`GitStore::lease_revision_within`]), the retention walk completed in the background
//! after a sync ([`GitStore::complete_retention`]), and what tests look at (the walk's
//! counters, a hook inside the registry reconcile).

use super::{Leased, Walk, unwalked};
use crate::objects::to_commit_id;
use crate::retention::WalkStats;
use crate::{Error, GitStore, Lease, RegistryHook, RepoName};
use budget::Budget;

impl GitStore {
    /// [`GitStore::lease_revision`] for an async thread: never walks the history and never
    /// waits for a walk or for another thread's registry reconcile. A branch, tag, pin or
    /// recent head answers at once, and so does an older commit the repository's retention
    /// memo has reached (completed in the background after each sync,
    /// [`GitStore::complete_retention`]); `Ok(None)` when only the ancestor walk can tell
    /// whether the commit is retained: lease it with [`GitStore::lease_revision_within`] on a
    /// blocking thread. Errors as for [`GitStore::lease_revision`].
    pub fn lease_revision_inline(
        &self,
        name: &RepoName,
        revision: Option<&str>,
    ) -> Result<Option<Lease>, Error> {
        self.inner
            .lease_revision_with(name, revision, Walk::Never)?
            .map(|leased| self.wrap(name, leased))
            .transpose()
    }

    /// [`GitStore::lease_revision`] whose retention walk, when one is needed, stops when
    /// `budget` does ([`Error::Stopped`]; what it reached is kept for the next call). Blocks:
    /// call it on a blocking thread.
    pub fn lease_revision_within(
        &self,
        name: &RepoName,
        revision: Option<&str>,
        budget: &Budget,
    ) -> Result<Lease, Error> {
        let leased = self
            .inner
            .lease_revision_with(name, revision, Walk::Within(budget))?
            .ok_or_else(unwalked)?;
        self.wrap(name, leased)
    }

    /// Completes the retention walk of `name` now, so that reads of old commits answer
    /// from its memo without walking (maintenance: after each sync, on a blocking thread).
    /// Cheap when the memo is complete for the current roots; after a sync whose new heads
    /// hold the old ones, it walks only the new commits. Stops when `budget` does
    /// ([`Error::Stopped`]), keeping what it reached. Answers the walk's counters.
    pub fn complete_retention(&self, name: &RepoName, budget: &Budget) -> Result<WalkStats, Error> {
        let (state, view) = self.inner.synced(name)?;
        let now = self.inner.clock.now();
        state.memo.walk(
            &view.roots,
            now,
            self.inner.config.retention,
            &view.repo,
            None,
            Some(budget),
        )?;
        Ok(state.memo.stats())
    }

    /// What the retention walk of `name` has done so far (restarts, extensions, commits
    /// decoded, commits reached, complete): for tests and diagnostics.
    pub fn retention_walks(&self, name: &RepoName) -> Result<WalkStats, Error> {
        Ok(self.inner.state(name)?.memo.stats())
    }

    /// Installs (or removes) a test hook run inside each registry reconcile, while it holds
    /// the reconcile lock: where a slow metadata read would keep it. Calls of other threads
    /// must go on answering from the registry snapshot meanwhile.
    pub fn set_reconcile_hook(&self, hook: Option<RegistryHook>) {
        self.inner.set_reconcile_hook(hook);
    }

    fn wrap(&self, name: &RepoName, leased: Leased) -> Result<Lease, Error> {
        Ok(Lease {
            store: self.inner.clone(),
            commit: to_commit_id(&leased.key.1)?,
            leased,
            repo: name.clone(),
        })
    }
}
