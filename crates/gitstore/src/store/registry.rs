//! The registry snapshot kept in step with the metadata: the per-call look at other
//! processes' changes, which never waits; the reconcile that adopts them, reloading the views
//! they moved; and the publication of this process's own registry changes.

use super::{Inner, MIRROR_INCARNATION, Registry, RepoState, lock};
use crate::{Error, RegistryHook, RepoName};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the last reconcile saw of the change counter, and when: the per-call look compares
/// the counter with it without taking `seen`. Two atomics, each written after the reconcile
/// published its registry: a reader that sees one moved and not the other only looks again.
pub(super) struct Looked {
    /// The counter the last reconcile saw; `u64::MAX`: none (no counter, or never).
    changes: AtomicU64,
    /// When, in nanoseconds since `origin`.
    at: AtomicU64,
    origin: std::time::Instant,
}

impl Looked {
    pub(super) fn new() -> Self {
        Self {
            changes: AtomicU64::new(u64::MAX),
            at: AtomicU64::new(0),
            origin: std::time::Instant::now(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether the counter stands at `changes` as the last reconcile saw it, less than
    /// [`changecounter::FULL_CHECK_EVERY`] ago.
    fn fresh(&self, changes: Option<u64>) -> bool {
        let Some(changes) = changes else {
            return false;
        };
        if changes == u64::MAX || self.changes.load(Ordering::Acquire) != changes {
            return false;
        }
        let every = u64::try_from(changecounter::FULL_CHECK_EVERY.as_nanos()).unwrap_or(0);
        self.now().saturating_sub(self.at.load(Ordering::Acquire)) < every
    }

    fn record(&self, changes: Option<u64>) {
        self.at.store(self.now(), Ordering::Release);
        self.changes
            .store(changes.unwrap_or(u64::MAX), Ordering::Release);
    }
}

impl Inner {
    /// Sees what other processes changed (13), waiting for a reconcile another thread runs:
    /// what maintenance (sync, pin, unpin, sweep, release, removal) and opening the store do
    /// before they act, so they act on the registrations as they are now. A call looks with
    /// [`Inner::look`], which never waits.
    ///
    /// When the shared change counter ([`changecounter`]) moved (or a second passed),
    /// `PRAGMA data_version`; when that moved, the registrations are re-read and diffed
    /// against `repos` (new, removed and re-registered names), and a repository whose
    /// `state_gen` moved (another process synced, pinned or swept it) gets its view reloaded
    /// from the shared mirror. With PostgreSQL the counter is that of the registry's
    /// notifications and `data_version` is the same number (see `db/postgres.rs`): no query
    /// unless something changed, and during an outage the reconcile adopts the last rows
    /// read.
    pub(crate) fn refresh(&self) -> Result<(), Error> {
        let mut seen = lock(&self.seen);
        let changes = self.db.changes();
        self.refresh_seen(&mut seen, changes)
    }

    /// The per-call look at other processes' changes (issue 42 point 7): one load of the
    /// change counter, and nothing more while it stands where the last reconcile saw it (for
    /// up to [`changecounter::FULL_CHECK_EVERY`]). When it moved, this call reconciles
    /// itself if `seen` is free; if another thread is reconciling, it answers from the
    /// snapshot in force instead of waiting for that one (its database round trips, its
    /// mirror reads). So a registration, sync or pin another process made is seen by the
    /// first call after it that finds `seen` free: the next call, unless a reconcile started
    /// before the change is still running, and then the first one after that ends.
    fn look(&self) -> Result<(), Error> {
        let changes = self.db.changes();
        if self.looked.fresh(changes) {
            return Ok(());
        }
        let mut seen = match self.seen.try_lock() {
            Ok(seen) => seen,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
        };
        self.refresh_seen(&mut seen, changes)
    }

    /// The check and reconcile behind [`Inner::refresh`] and [`Inner::look`], `seen` held.
    /// `changes` is the counter loaded before `data_version` is asked (see
    /// [`changecounter::Seen::refresh`]).
    fn refresh_seen(
        &self,
        seen: &mut changecounter::Seen,
        changes: Option<u64>,
    ) -> Result<(), Error> {
        let mut checked = false;
        seen.refresh(
            changes,
            || {
                checked = true;
                self.db.data_version()
            },
            || {
                if let Some(hook) = lock(&self.reconcile_hook).clone() {
                    hook();
                }
                self.reconcile()
            },
        )?;
        // Only a full check restarts the clock of the next one (as `seen`'s own).
        if checked {
            self.looked.record(changes);
        }
        Ok(())
    }

    /// Installs the test hook run inside each reconcile, `seen` held (see
    /// [`Inner::reconcile_hook`]).
    pub(crate) fn set_reconcile_hook(&self, hook: Option<RegistryHook>) {
        *lock(&self.reconcile_hook) = hook;
    }

    /// The registry snapshot in force now (after the per-call look at changes made
    /// elsewhere, which never waits).
    pub(super) fn registry(&self) -> Result<Arc<Registry>, Error> {
        self.look()?;
        Ok(self.repos.load_full())
    }

    /// Adopts the metadata's registrations (called with `seen` held): builds the next
    /// registry from the published one and publishes it, unless a registry change of this
    /// process published a newer generation meanwhile (that one is adopted on the next look).
    fn reconcile(&self) -> Result<(), Error> {
        let (generation, rows) = self.db.registry()?;
        let current = self.repos.load_full();
        if current.generation > generation {
            return Ok(());
        }
        let mut fresh = BTreeMap::new();
        for row in &rows {
            match current.repos.get(&row.name) {
                Some(state) if state.id == row.incarnation => {
                    state.private.store(row.private, Ordering::SeqCst);
                    if state.state_gen.load(Ordering::SeqCst) != row.state_gen {
                        self.load_into(state, row);
                    }
                }
                _ => {
                    let state = Arc::new(self.new_state(
                        row.incarnation,
                        row.name.clone(),
                        row.source.clone(),
                        row.registered_path.clone(),
                        row.branch.clone(),
                        row.private,
                    ));
                    self.load_into(&state, row);
                    fresh.insert(row.name.clone(), state);
                }
            }
        }
        let mut replaced = None;
        self.repos.rcu(|latest| {
            if latest.generation > generation {
                replaced = None;
                return Arc::clone(latest);
            }
            let mut repos = BTreeMap::new();
            for row in &rows {
                // The state already published for this incarnation (by this process's own
                // registration, say) is kept: syncs in flight publish their views into it.
                let state = latest
                    .repos
                    .get(&row.name)
                    .filter(|s| s.id == row.incarnation)
                    .or_else(|| fresh.get(&row.name));
                if let Some(state) = state {
                    repos.insert(row.name.clone(), Arc::clone(state));
                }
            }
            replaced = Some(Arc::clone(latest));
            Arc::new(Registry { generation, repos })
        });
        if let Some(previous) = replaced {
            let next = self.repos.load();
            for (name, state) in &previous.repos {
                if next.repos.get(name).is_none_or(|s| s.id != state.id) {
                    // Removed (or replaced) by another process: nothing reads it from now on.
                    state.set_view(None);
                }
            }
        }
        Ok(())
    }

    /// Publishes a registry change of this process (holding `writes`) at `generation`.
    pub(super) fn publish_registry(
        &self,
        generation: u64,
        change: impl Fn(&mut BTreeMap<RepoName, Arc<RepoState>>),
    ) {
        if let Some(hook) = lock(&self.registry_hook).clone() {
            hook();
        }
        self.repos.rcu(|latest| {
            let mut repos = latest.repos.clone();
            change(&mut repos);
            Arc::new(Registry {
                generation: latest.generation.max(generation),
                repos,
            })
        });
    }

    /// Installs the test hook run inside registry changes (see [`Inner::registry_hook`]).
    pub(crate) fn set_registry_hook(&self, hook: Option<RegistryHook>) {
        *lock(&self.registry_hook) = hook;
    }

    /// Loads `state`'s view from its mirror as `row` describes it. On failure the old view
    /// keeps serving (a mirror mid-change by another process, say) and a later change
    /// retries.
    fn load_into(&self, state: &RepoState, row: &crate::db::RepoRow) {
        if row.last_good_sync.is_none()
            || !state.mirror.join("HEAD").is_file()
            || !self.mirror_is_for(state)
        {
            return;
        }
        match self.load_view(state, row.default_branch.clone()) {
            Ok(view) => {
                let behind = !view.pending.is_empty();
                state.publish(view, row.state_gen);
                if behind {
                    // Catch up now rather than on the first read that needs it.
                    self.follows.request(&state.name);
                }
            }
            // The repository stays registered and reads answer from the previous view (or
            // "not synced") until the next change rebuilds it.
            Err(e) => {
                tracing::warn!(repo = %row.name, error = %e, "gitstore: could not load mirror state")
            }
        }
    }

    /// Whether the mirror on disk was made for `state`'s registration: always with SQLite
    /// (a removal trashes the mirror of every process), else as its [`MIRROR_INCARNATION`]
    /// says.
    pub(super) fn mirror_is_for(&self, state: &RepoState) -> bool {
        !self.mirrors_per_replica
            || std::fs::read_to_string(state.mirror.join(MIRROR_INCARNATION))
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                == Some(state.id)
    }
}
