//! Cluster mode: this replica's mirror of a repository it no longer owns dropped into the
//! trash, without ever failing a lease in flight.

use super::super::{Inner, RepoState, lock, shared};
use crate::error::ONLY_COPY;
use crate::{Error, Released, RepoName};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a release waits for the leases in flight on a repository to end, refusing new
/// ones meanwhile; past it the release is postponed to the next round.
const RELEASE_DRAIN: Duration = Duration::from_millis(500);

impl Inner {
    /// Cluster mode: drops this replica's mirror of `name` (see
    /// [`crate::GitStore::release_local`]). The registration and every shared row stay.
    ///
    /// Like a sweep, it takes the maintenance lock and the mirror file lock without waiting:
    /// a repository busy with a sync, follow, pin or sweep (here or in another process of the
    /// data directory) is [`Released::InUse`] and tried again later. Like a sweep's expiry, it
    /// decides against leases without ever failing one: under the `leases` lock it finds no
    /// live lease of the registration and withdraws the view, in one step. A lease counted
    /// before that is seen and the mirror is kept (its reads go on as usual); one counted
    /// after loads no view and answers [`Error::NotSynced`], as for a repository never
    /// synced. When leases are live, the view is withdrawn first and those in flight get up
    /// to [`RELEASE_DRAIN`] to end while new ones are refused, so steady reads cannot
    /// postpone a release forever; if they do not end, it is tried again later. The mirror is then moved into the trash, which a later sweep empties once no
    /// live process holds a lease record on the registration.
    pub(crate) fn release_local(&self, name: &RepoName) -> Result<Released, Error> {
        if !self.mirrors_per_replica {
            return Err(Error::Storage(ONLY_COPY.to_string()));
        }
        let state = self.state_fresh(name)?;
        let _maintenance = match state.maintenance.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(Released::InUse),
        };
        let Some(_mirror) = shared::try_lock_exclusive(&state.mirror_lock)? else {
            return Ok(Released::InUse);
        };
        self.refresh()?;
        if !self.is_current(&state) {
            return Err(Error::UnknownRepo(name.clone()));
        }
        if state.view().is_none() && !state.mirror.exists() {
            return Ok(Released::NotHeld);
        }
        // Another process of this data directory reads it through a view of its own, which
        // moving the mirror would break under it and nothing here could withdraw.
        if shared::leased_elsewhere(&self.leases_root(), state.id, self.owner.dir())? {
            return Ok(Released::InUse);
        }
        // Leases in flight: refuse new ones (they answer "not synced"; the calls of a
        // repository not owned here go to its owners anyway) and give those in flight a
        // moment to end, holding no lock a read takes. Without this, steady local reads
        // would postpone a release forever. The view stays meanwhile: a lease holder's reads
        // by name go on.
        if self.leased(&state) {
            state.draining.store(true, Ordering::SeqCst);
            let until = std::time::Instant::now() + RELEASE_DRAIN;
            while self.leased(&state) && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // Held from here to the rename: a reconcile (which runs under `seen`) that reloads
        // this repository's view from its mirror, as another replica's sync makes it do, must
        // not publish a view of a mirror being moved away. Readers wait at most for the
        // rename; the lease check below holds `leases` for a map scan only.
        let _seen = lock(&self.seen);
        let withdrawn = {
            let leases = lock(&self.leases);
            let leased = leases
                .iter()
                .any(|((incarnation, _), lease)| *incarnation == state.id && lease.count > 0);
            if leased {
                state.draining.store(false, Ordering::SeqCst);
                return Ok(Released::InUse);
            }
            state.view.swap(None)
        };
        // No view now: a new lease answers "not synced" from that.
        state.draining.store(false, Ordering::SeqCst);
        if let Err(e) = self.trash_mirror(&state) {
            // Still in place: it keeps serving (nothing else publishes a view while the
            // maintenance lock and `seen` are held).
            state.set_view(withdrawn);
            return Err(e);
        }
        tracing::debug!(repo = %name, "gitstore: mirror released into the trash");
        Ok(Released::Dropped)
    }

    /// Whether a lease of `state`'s registration is live in this process.
    fn leased(&self, state: &RepoState) -> bool {
        lock(&self.leases)
            .iter()
            .any(|((incarnation, _), lease)| *incarnation == state.id && lease.count > 0)
    }
}
