//! The procedures that change a mirror: sync (G-3), pins (G-5) and sweeping (G-5, G-8).
//! All of them run under the repository's maintenance lock and its mirror file lock, so one
//! process at a time runs `git` on a mirror.
//!
//! Cluster mode (PostgreSQL, a mirror per replica) adds three things:
//!
//! - **Leased syncs.** A sync first takes the repository's cluster-wide sync lease (a row
//!   with a fencing token and an expiry, see `db/postgres.rs`); only the holder fetches from
//!   the source and records what it saw: the branch heads every replica then resolves
//!   branch names to, the seen heads, the sync state. A replica that finds the lease taken
//!   does not fetch from the source on its own account: it follows the heads recorded so far
//!   ([`Inner::follow`]), and the holder's record reaches it through the registry's
//!   notification. The holder renews its lease while it works (every third of the lease);
//!   a holder that died stops renewing, and its lease runs out after at most one lease
//!   length ([`crate::DEFAULT_SYNC_LEASE`]). The record checks the token in its transaction,
//!   so a holder whose lease ran out while it was cut off from the database records nothing
//!   and follows whoever took over. Why a row and not `pg_try_advisory_lock`: a session
//!   lock needs one connection held for the whole fetch (up to its 15-minute timeout), which
//!   metadb's few pooled connections cannot spare, and it vanishes silently with that
//!   connection (a network blip), after which two replicas would fetch and record with
//!   nothing to tell them apart; the row's token fences the record.
//! - **Recorded heads, not refs.** A view's branches are the recorded heads; one this mirror
//!   lacks is pending, and reads of it answer "not synced" and ask for a follow (`follow.rs`).
//! - **Bookkeeping refs follow the shared rows.** Each replica's mirror has its own
//!   `refs/csg/seen/*` and `refs/csg/pinned/*`; [`Inner::align_refs`] makes them name exactly
//!   the seen heads, recorded heads and pins of the shared rows that this mirror has, so its
//!   gc keeps what the cluster retains whichever replica synced or pinned it. Shared seen
//!   heads are dropped by any replica's sweep only once past the window by their recorded
//!   time; this replica's own leases never keep a shared row (another replica's sweep would
//!   not know of them) but keep their commits here by leased refs, as before.
//!
//! This module holds what they share: `git` on a mirror (its failures path-free), the mirror
//! made and locked, its bookkeeping refs updated. Each procedure is a submodule: `sync`, with
//! `sync_lease` (cluster mode), `follow` (cluster mode), `release` (cluster mode), `pins` and
//! `sweep`.

mod follow;
mod pins;
mod release;
mod sweep;
mod sync;
mod sync_lease;

use super::shared::{self, FileLock};
use super::{Inner, RepoState};
use crate::Error;
use crate::db::storage;
use crate::gitcli::{self, GitFailure, LOCAL_TIMEOUT};
use std::path::Path;

impl Inner {
    fn secrets(&self, state: &RepoState) -> Vec<(String, &'static str)> {
        let mut secrets = vec![
            (state.source.clone(), "<source>"),
            (state.mirror.to_string_lossy().into_owned(), "<mirror>"),
        ];
        if let Some(path) = state.source.strip_prefix("file://") {
            secrets.push((path.to_string(), "<source>"));
        }
        if let Ok(canonical) = Path::new(&state.source).canonicalize() {
            secrets.push((canonical.to_string_lossy().into_owned(), "<source>"));
        }
        for form in &self.data_dir_forms {
            secrets.push((form.clone(), "<data-dir>"));
        }
        secrets
    }

    fn git_failure(&self, state: &RepoState, what: &str, failure: &GitFailure) -> Error {
        tracing::warn!(repo = %state.name, error = %failure, "gitstore: git {what} failed");
        let secrets = self.secrets(state);
        let refs: Vec<(&str, &str)> = secrets.iter().map(|(s, p)| (s.as_str(), *p)).collect();
        Error::Sync {
            repo: state.name.clone(),
            message: gitcli::describe(failure, &refs),
        }
    }

    /// Runs git on the mirror; failures become a path-free [`Error::Sync`].
    fn git_on_mirror(
        &self,
        state: &RepoState,
        what: &str,
        args: &[&str],
        stdin: Option<Vec<u8>>,
        timeout: std::time::Duration,
    ) -> Result<Vec<u8>, Error> {
        let mut cmd = gitcli::git(Some(&state.mirror));
        cmd.args(args);
        gitcli::run(cmd, stdin, timeout).map_err(|f| self.git_failure(state, what, &f))
    }

    /// Takes the mirror file lock of `state`, then re-reads what other processes changed
    /// while we waited (a sync, a removal). `None` if `state` is no longer registered.
    fn lock_mirror(&self, state: &RepoState) -> Result<Option<FileLock>, Error> {
        let mirror = shared::lock_exclusive(&state.mirror_lock)?;
        self.refresh()?;
        Ok(self.is_current(state).then_some(mirror))
    }

    fn ensure_mirror(&self, state: &RepoState) -> Result<(), Error> {
        if state.mirror.join("HEAD").is_file() {
            if self.mirror_is_for(state) {
                return Ok(());
            }
            // Cluster mode: kept from an earlier registration of the name, removed through
            // another replica.
            self.trash_mirror(state)?;
        }
        if let Some(parent) = state.mirror.parent() {
            std::fs::create_dir_all(parent).map_err(storage("creating a mirror directory"))?;
        }
        let mut cmd = gitcli::git(None);
        cmd.args(["init", "--bare", "--quiet"]).arg(&state.mirror);
        gitcli::run(cmd, None, LOCAL_TIMEOUT).map_err(|f| self.git_failure(state, "init", &f))?;
        for (key, value) in [("core.logAllRefUpdates", "false"), ("gc.auto", "0")] {
            self.git_on_mirror(
                state,
                "config",
                &["config", key, value],
                None,
                LOCAL_TIMEOUT,
            )?;
        }
        if self.mirrors_per_replica {
            std::fs::write(
                state.mirror.join(super::MIRROR_INCARNATION),
                format!("{}\n", state.id),
            )
            .map_err(storage("marking a mirror"))?;
        }
        Ok(())
    }

    fn update_refs(&self, state: &RepoState, edits: String) -> Result<(), Error> {
        if edits.is_empty() {
            return Ok(());
        }
        self.git_on_mirror(
            state,
            "update-ref",
            &["update-ref", "--stdin"],
            Some(edits.into_bytes()),
            LOCAL_TIMEOUT,
        )
        .map(|_| ())
    }
}

/// A marker file in the mirror: refs were deleted since its last garbage collection. On disk,
/// so every process knows (a fresh process does not gc every mirror on its first sweep, and a
/// gc cut short by a crash is done by whoever sweeps next); written before the refs go.
const NEEDS_GC: &str = "csg-needs-gc";

fn mark_needs_gc(state: &RepoState) -> Result<(), Error> {
    std::fs::write(state.mirror.join(NEEDS_GC), b"")
        .map_err(storage("marking a mirror for garbage collection"))
}

/// Outside of sync, a failing git command is storage trouble, not a sync failure.
fn as_storage(e: Error) -> Error {
    match e {
        Error::Sync { message, .. } => {
            tracing::warn!(%message, "gitstore: git maintenance command failed");
            Error::Storage("maintaining a mirror".to_string())
        }
        other => other,
    }
}
