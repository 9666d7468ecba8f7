//! Pins (G-5): a commit kept in retention by a ref of its own and a metadata row, and let go
//! of again (the mirror then marked for gc).

use super::super::{Inner, PINNED_REFS, lock};
use super::{as_storage, mark_needs_gc};
use crate::objects::to_oid;
use crate::{CommitId, Error, RepoName};

impl Inner {
    pub(crate) fn pin(&self, name: &RepoName, commit: &CommitId) -> Result<(), Error> {
        let state = self.state_fresh(name)?;
        // Before the pinned ref is written: a pin the metadata cannot record is not made.
        self.db.check_writable()?;
        let _maintenance = lock(&state.maintenance);
        let Some(_mirror) = self.lock_mirror(&state)? else {
            return Err(Error::UnknownRepo(name.clone()));
        };
        let (state, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        if view.pins.contains(&id) {
            return Ok(());
        }
        self.check_readable(&state, &view, &id, false)?;
        self.update_refs(&state, format!("update {PINNED_REFS}{commit} {commit}\n"))
            .map_err(as_storage)?;
        let state_gen = self.db.insert_pin(name, commit)?;
        let view = self.refreshed_view(&state, &view)?;
        state.publish(view, state_gen);
        Ok(())
    }

    pub(crate) fn unpin(&self, name: &RepoName, commit: &CommitId) -> Result<(), Error> {
        let state = self.state_fresh(name)?;
        let _maintenance = lock(&state.maintenance);
        let Some(_mirror) = self.lock_mirror(&state)? else {
            return Err(Error::UnknownRepo(name.clone()));
        };
        let (state, view) = self.synced(name)?;
        let Some(state_gen) = self.db.delete_pin(name, commit)? else {
            return Ok(());
        };
        let view = self.refreshed_view(&state, &view)?;
        state.publish(view, state_gen);
        mark_needs_gc(&state)?;
        self.update_refs(&state, format!("delete {PINNED_REFS}{commit}\n"))
            .map_err(as_storage)?;
        Ok(())
    }
}
