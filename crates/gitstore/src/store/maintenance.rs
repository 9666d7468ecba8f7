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

use super::shared::{self, FileLock};
use super::views::{is_commit, read_refs};
use super::{Branches, Heads, Inner, LEASED_REFS, PINNED_REFS, RepoState, SEEN_REFS, View, lock};
use crate::db::{SyncFence, SyncLease, SyncRecord, storage};
use crate::error::ONLY_COPY;
use crate::gitcli::{self, FETCH_TIMEOUT, GC_TIMEOUT, GitFailure, LOCAL_TIMEOUT, ProgressObserver};
use crate::objects::{to_commit_id, to_oid};
use crate::retention::in_window;
use crate::{CommitId, Error, Released, RepoName, SourceFetch, SweepReport, SyncOutcome};
use gix::ObjectId;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a release waits for the leases in flight on a repository to end, refusing new
/// ones meanwhile; past it the release is postponed to the next round.
const RELEASE_DRAIN: Duration = Duration::from_millis(500);

/// How often a sync that waits for another replica's first sync of a repository looks again
/// (see [`Inner::take_sync_lease_or_follow`]): one cached row read and one lease statement.
const BUSY_POLL: Duration = Duration::from_millis(100);

/// How long a record in the database may take to reach this replica's registry (its
/// notification's trip) before a follow is tried anyway.
const RECORD_NOTICED_WITHIN: Duration = Duration::from_secs(5);

impl Inner {
    // ----- sync --------------------------------------------------------------------------

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

    /// Takes the sync lease of `state` (under its maintenance and mirror locks); `Busy` once
    /// there is something recorded to follow.
    ///
    /// A repository nobody has synced yet has nothing to follow: answering "not synced"
    /// while another replica runs its first sync (a registration's, which every owner starts
    /// at once) would leave this replica without a copy until its next attempt, however
    /// late that is (a caller backs off after a failure). So it waits for that sync to end,
    /// looking every [`BUSY_POLL`]: once a head is recorded it follows it, and when the
    /// lease comes free with nothing recorded (the holder failed, or died and its lease ran
    /// out) it takes the lease and syncs itself. Bounded by how long a live holder can keep
    /// the lease (its fetch timeout) and the lease length after it. Only this replica's
    /// locks of this repository are held meanwhile, which no read takes.
    fn take_sync_lease_or_follow(
        &self,
        state: &RepoState,
        ttl: Duration,
    ) -> Result<SyncLease, Error> {
        let name = &state.name;
        let give_up = Instant::now() + FETCH_TIMEOUT + ttl;
        let mut waited = false;
        loop {
            let lease = self.db.take_sync_lease(name, ttl)?;
            match lease {
                SyncLease::Busy if Instant::now() < give_up && !self.recorded(state)? => {}
                // The holder we waited for recorded and let go before its notification
                // reached this replica: follow its record rather than fetch it again.
                SyncLease::Held(token) if waited && self.has_recorded_heads(name)? => {
                    self.db.release_sync_lease(name, token);
                    self.await_record(state)?;
                    return Ok(SyncLease::Busy);
                }
                lease => return Ok(lease),
            }
            if !waited {
                tracing::info!(repo = %name, "gitstore: another replica runs the first sync; waiting for it");
                waited = true;
            }
            std::thread::sleep(BUSY_POLL);
        }
    }

    /// Whether a sync of `state` was recorded, as this replica's registry knows (a cached
    /// row, read again once a notification came in).
    fn recorded(&self, state: &RepoState) -> Result<bool, Error> {
        Ok(self
            .db
            .repo(&state.name)?
            .filter(|row| row.incarnation == state.id)
            .ok_or_else(|| Error::UnknownRepo(state.name.clone()))?
            .last_good_sync
            .is_some())
    }

    /// Whether the database holds recorded heads of `name` now (a query, not the cache).
    fn has_recorded_heads(&self, name: &RepoName) -> Result<bool, Error> {
        Ok(self
            .db
            .recorded_heads(name)?
            .is_some_and(|heads| !heads.is_empty()))
    }

    /// Waits (at most [`RECORD_NOTICED_WITHIN`]) until this replica's registry shows the
    /// record the database already holds: its notification is on its way.
    fn await_record(&self, state: &RepoState) -> Result<(), Error> {
        let until = Instant::now() + RECORD_NOTICED_WITHIN;
        while !self.recorded(state)? && Instant::now() < until {
            std::thread::sleep(BUSY_POLL);
        }
        Ok(())
    }

    /// How long a sync lease outlives its holder's last renewal.
    fn sync_lease(&self) -> Duration {
        Duration::from_millis(self.sync_lease_ms.load(Ordering::Relaxed))
    }

    /// Runs `work` while a thread renews the sync lease `token` every third of `ttl`.
    fn renewing<T>(
        &self,
        name: &RepoName,
        token: i64,
        ttl: Duration,
        work: impl FnOnce() -> T,
    ) -> T {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let renewer = std::thread::Builder::new()
                .name("gitstore-lease".to_string())
                .spawn_scoped(scope, move || {
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(ttl / 3) {
                        match self.db.renew_sync_lease(name, token, ttl) {
                            Ok(true) => {}
                            Ok(false) => {
                                tracing::warn!(repo = %name, "gitstore: the sync lease ran out and was taken over; this sync will not be recorded");
                                return;
                            }
                            // Tried again next time; if it runs out meanwhile, the record is
                            // refused (fenced) rather than made twice.
                            Err(e) => {
                                tracing::warn!(repo = %name, error = %e, "gitstore: renewing the sync lease failed")
                            }
                        }
                    }
                });
            if let Err(e) = renewer {
                tracing::warn!(repo = %name, error = %e, "gitstore: cannot renew the sync lease; it may run out before the sync records");
            }
            let out = work();
            // Also dropped when `work` panics, which ends the renewer before the scope joins.
            drop(stop);
            out
        })
    }

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

    // ----- release (cluster mode) --------------------------------------------------------

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
    fn fetch(
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

    // ----- pins --------------------------------------------------------------------------

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

    // ----- sweep -------------------------------------------------------------------------

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

impl Inner {
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

/// What one sweep of a repository let go of, and the leases it found.
struct Expiry {
    /// Heads expired: past the window and not leased.
    expired: Vec<CommitId>,
    /// Heads no longer seen: the expired ones and those still reachable from a root.
    dropped: Vec<CommitId>,
    /// Commits leased by any process, at either look.
    leased: HashSet<ObjectId>,
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
fn changed_branches(
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
