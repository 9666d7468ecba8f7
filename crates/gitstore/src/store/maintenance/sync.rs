//! A sync (G-3): the source's branches and tags fetched into the mirror, the heads marked
//! seen and recorded, the new view published. In cluster mode only the holder of the sync
//! lease fetches and records; another replica follows what it records.

use super::super::views::read_refs;
use super::super::{Branches, Heads, Inner, RepoState, SEEN_REFS, View, lock};
use crate::db::{SyncFence, SyncLease, SyncRecord};
use crate::gitcli::{self, FETCH_TIMEOUT, ProgressObserver};
use crate::objects::to_commit_id;
use crate::{CommitId, Error, RepoName, SourceFetch, SyncOutcome};
use std::collections::HashSet;
use std::sync::Arc;

impl Inner {
    pub(crate) fn sync(
        &self,
        name: &RepoName,
        observer: Option<ProgressObserver<'_>>,
    ) -> Result<SyncOutcome, Error> {
        let state = self.state_fresh(name)?;
        // A sync whose result cannot be recorded is not worth its fetch.
        self.db.check_writable()?;
        let _maintenance = lock(&state.maintenance);
        let Some(_mirror) = self.lock_mirror(&state)? else {
            return Err(Error::UnknownRepo(name.clone()));
        };
        let ttl = self.sync_lease();
        let synced = match self.take_sync_lease_or_follow(&state, ttl)? {
            SyncLease::NotShared => self.sync_locked(&state, observer, None),
            SyncLease::Held(token) => {
                let fence = SyncFence {
                    incarnation: state.id,
                    lease: token,
                };
                let synced = self.renewing(name, token, ttl, || {
                    self.sync_locked(&state, observer, Some(&fence))
                });
                self.db.release_sync_lease(name, token);
                synced
            }
            // Another replica syncs it now and decides its heads; this one catches up with
            // what is recorded (its own failures are its own: not recorded).
            SyncLease::Busy => {
                tracing::debug!(repo = %name, "gitstore: another replica is syncing; following");
                return self.follow_locked(&state, observer);
            }
        };
        match synced {
            Ok(Some(outcome)) => Ok(outcome),
            // The lease ran out while this replica was cut off and another took over: that
            // one's record stands; follow it.
            Ok(None) => {
                tracing::warn!(repo = %name, "gitstore: the sync lease was lost before recording; following the replica that took over");
                self.follow_locked(&state, None)
            }
            Err(e) => {
                let message = match &e {
                    Error::Sync { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                self.db
                    .record_sync_failure(name, self.clock.now(), &message)?;
                Err(Error::Sync {
                    repo: name.clone(),
                    message,
                })
            }
        }
    }

    /// Fetches and records; `None` when `fence` refused the record (see
    /// [`crate::db::RegistryBackend::record_sync_success`]).
    fn sync_locked(
        &self,
        state: &RepoState,
        observer: Option<ProgressObserver<'_>>,
        fence: Option<&SyncFence>,
    ) -> Result<Option<SyncOutcome>, Error> {
        self.ensure_mirror(state)?;
        let remote_head = self.remote_head(state)?;
        self.fetch(state, SourceFetch::Sync, observer)?;

        let repo = Arc::new(self.open_repo(state)?);
        let (branches, tags) = read_refs(&repo.to_thread_local())?;
        let default_branch = default_branch(state, remote_head, &branches);
        let head = default_branch
            .as_ref()
            .and_then(|b| branches.get(b))
            .copied();
        let heads = self.mark_heads_seen(state, &branches)?;
        let recorded = branches
            .iter()
            .map(|(branch, id)| Ok((branch.clone(), to_commit_id(id)?)))
            .collect::<Result<Vec<_>, Error>>()?;

        let now = self.clock.now();
        let head_id = head.as_ref().map(to_commit_id).transpose()?;
        let record = SyncRecord {
            default_branch: default_branch.as_deref(),
            head: head_id.as_ref(),
            heads_seen: &heads,
            branches: &recorded,
        };
        let Some(state_gen) = self
            .db
            .record_sync_success(&state.name, now, &record, fence)?
        else {
            return Ok(None);
        };

        let changed = changed_branches(state.view().as_deref(), &branches)?;
        let heads = Heads {
            default_branch,
            head,
            branches,
            pending: Branches::new(),
        };
        let view = self.assemble_view(state, repo, heads, tags)?;
        if let Err(e) = self.align_refs(state, &view) {
            // The sweep aligns again before any garbage collection.
            tracing::warn!(repo = %state.name, error = %e, "gitstore: aligning bookkeeping refs failed");
        }
        state.publish(view, state_gen);
        Ok(Some(SyncOutcome {
            head: head_id,
            changed,
        }))
    }

    /// The branch the source's HEAD names, if any; refuses a configured branch the source
    /// lacks, before anything in the mirror changes.
    fn remote_head(&self, state: &RepoState) -> Result<Option<String>, Error> {
        let mut args = vec!["ls-remote", "--symref", "--", state.source.as_str(), "HEAD"];
        let branch_ref = state.branch.as_ref().map(|b| format!("refs/heads/{b}"));
        if let Some(r) = &branch_ref {
            args.push(r);
        }
        let listing = self.git_on_mirror(state, "ls-remote", &args, None, FETCH_TIMEOUT)?;
        let listing = String::from_utf8_lossy(&listing);
        let mut remote_head: Option<String> = None;
        let mut branch_exists = false;
        for line in listing.lines() {
            if let Some(rest) = line.strip_prefix("ref: ")
                && let Some((target, "HEAD")) = rest.split_once('\t')
            {
                remote_head = target.strip_prefix("refs/heads/").map(str::to_string);
            } else if let Some((_, refname)) = line.split_once('\t')
                && branch_ref.as_deref() == Some(refname)
            {
                branch_exists = true;
            }
        }
        if let Some(branch) = &state.branch
            && !branch_exists
        {
            return Err(Error::Sync {
                repo: state.name.clone(),
                message: format!("branch `{branch}` does not exist in the source"),
            });
        }
        Ok(remote_head)
    }

    /// Fetches the source's branches and tags into the mirror.
    pub(super) fn fetch(
        &self,
        state: &RepoState,
        why: SourceFetch,
        observer: Option<ProgressObserver<'_>>,
    ) -> Result<(), Error> {
        if let Some(hook) = lock(&self.fetch_hook).clone() {
            hook(&state.name, why);
        }
        // Not a mirror refspec: `--prune` with `+refs/*:refs/*` would delete our own
        // refs/csg/* bookkeeping refs. `--atomic`: all refs move or none.
        let mut fetch = gitcli::git(Some(&state.mirror));
        fetch.args([
            "fetch",
            if observer.is_some() {
                "--progress"
            } else {
                "--quiet"
            },
            "--prune",
            "--force",
            "--no-tags",
            "--atomic",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--",
            state.source.as_str(),
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ]);
        gitcli::run_observed(fetch, None, FETCH_TIMEOUT, observer)
            .map_err(|f| self.git_failure(state, "fetch", &f))?;
        Ok(())
    }

    /// Gives every branch head not seen before a ref of its own; answers all the heads.
    fn mark_heads_seen(
        &self,
        state: &RepoState,
        branches: &Branches,
    ) -> Result<Vec<CommitId>, Error> {
        if self.mirrors_per_replica {
            // The shared rows say what any replica saw, not what this mirror has refs for:
            // `align_refs` gives the heads their refs right after the record, with the
            // mirror lock still held (no gc can run in between).
            return branches
                .values()
                .copied()
                .collect::<HashSet<_>>()
                .iter()
                .map(to_commit_id)
                .collect();
        }
        // Every head gets a ref of its own before it is recorded as seen, so a later
        // force-push cannot let gc take its objects while it is retained (G-5).
        let known: HashSet<CommitId> = self
            .db
            .seen_heads(&state.name)?
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        let heads: Vec<CommitId> = branches
            .values()
            .copied()
            .collect::<HashSet<_>>()
            .iter()
            .map(to_commit_id)
            .collect::<Result<_, _>>()?;
        let mut edits = String::new();
        for h in heads.iter().filter(|h| !known.contains(*h)) {
            edits.push_str(&format!("update {SEEN_REFS}{h} {h}\n"));
        }
        self.update_refs(state, edits)?;
        Ok(heads)
    }
}

/// The configured branch, else the source's HEAD when the mirror has it, else `main`, else
/// `master`, else the first branch by name.
fn default_branch(
    state: &RepoState,
    remote_head: Option<String>,
    branches: &Branches,
) -> Option<String> {
    match &state.branch {
        Some(b) => Some(b.clone()),
        None => remote_head
            .filter(|h| branches.contains_key(h))
            .or_else(|| {
                ["main", "master"]
                    .into_iter()
                    .find(|b| branches.contains_key(*b))
                    .map(str::to_string)
            })
            .or_else(|| branches.keys().next().cloned()),
    }
}

/// The branches whose head is new or moved since `old`.
pub(super) fn changed_branches(
    old: Option<&View>,
    branches: &Branches,
) -> Result<Vec<(String, CommitId)>, Error> {
    let mut changed = Vec::new();
    for (branch, id) in branches {
        if old.and_then(|v| v.branches.get(branch)) != Some(id) {
            changed.push((branch.clone(), to_commit_id(id)?));
        }
    }
    Ok(changed)
}
