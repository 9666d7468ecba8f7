//! The state behind [`crate::GitStore`]: registrations, per-repository views, retention
//! checks, leases and reads. What changes a mirror (sync, pins, sweep) is in `maintenance`;
//! what coordinates processes sharing the data directory is in `shared`.
//!
//! Readers never wait on a writer. The registry (`repos`) and each repository's view
//! are immutable snapshots behind `ArcSwap`s: a call loads them once and keeps them, and a
//! change builds a new one and publishes it with one atomic swap. What readers lock is only
//! ever held for a few map operations: `leases` (a count, never held across I/O), a
//! repository's `memo` (the ancestor walk's sets; the walk decodes commits outside it). A
//! call never waits on `seen` (the reconcile that adopts other processes' changes): it looks
//! at the change counter without a lock and, when that moved, reconciles itself if `seen`
//! is free, else answers from the snapshot in force (issue 42 point 7).
//!
//! Locking order of the writers (outer first): a repository's `maintenance` mutex (sync,
//! pin, unpin, sweep, unregister, release: everything that runs `git` on the mirror or moves
//! it), then its mirror file lock, then its roots file lock, then `writes` (registrations of
//! this process), then `leases`, then the metadata's write connection. The one writer that
//! takes `seen` is a release (cluster mode), after its mirror file lock and before `leases`,
//! for no longer than a rename: no reconcile reloads a view from a mirror being moved.

use crate::blobcache::{BlobCache, DEFAULT_BLOB_CACHE_BYTES, SharedBlob, TextMemo, TextRead};
use crate::db::{PgRegistry, RegistryBackend, SqliteRegistry, storage};
use crate::handles;
use crate::objects::{self, Target, odb, to_commit_id, to_oid};
use crate::retention::{Memo, Reach, Roots};
use crate::revision::{self, MIN_SHORT_SHA};
use crate::{
    Clock, CommitId, Error, FoundFile, Registration, RepoInfo, RepoName, RepoPath, StoreConfig,
    Text, TreeEntry,
};
use arc_swap::{ArcSwap, ArcSwapOption};
use gix::ObjectId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

mod follow;
mod maintenance;
pub(crate) mod register;
mod shared;
mod walks;

/// Our bookkeeping refs in each mirror. Fetches only write `refs/heads/*` and `refs/tags/*`,
/// so `--prune` never touches these.
const SEEN_REFS: &str = "refs/csg/seen/";
const PINNED_REFS: &str = "refs/csg/pinned/";
const LEASED_REFS: &str = "refs/csg/leased/";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where the ancestor walk of a retention check may run (issue 42 point 7).
#[derive(Clone, Copy)]
pub(crate) enum Walk<'a> {
    /// Nowhere: an async thread. A check only the walk can decide answers `None` (the
    /// caller moves to a blocking thread).
    Never,
    /// Here, as far as needed: maintenance, the command line, the operations by name.
    Unbounded,
    /// Here, until the call's budget stops it ([`Error::Stopped`]).
    Within(&'a budget::Budget),
}

/// The error of a check that needed a walk it was told it may run: never answered, since
/// only [`Walk::Never`] leaves a check undecided.
fn unwalked() -> Error {
    Error::Storage("a retention check was left undecided".to_string())
}

/// Branch name (without `refs/heads/`) → head commit.
type Branches = BTreeMap<String, ObjectId>;
/// Tag name (without `refs/tags/`) → the commit it peels to.
type Tags = HashMap<String, ObjectId>;

/// What the mirror looked like after the last good sync (plus pins and seen heads), with the
/// gix handle to read it. Replaced as a whole, never mutated: a reader keeps a consistent
/// snapshot for the length of its call.
pub(crate) struct View {
    repo: Arc<gix::ThreadSafeRepository>,
    default_branch: Option<String>,
    head: Option<ObjectId>,
    branches: Branches,
    /// Tags that peel to commits.
    tags: Tags,
    pins: HashSet<ObjectId>,
    roots: Roots,
    /// Cluster mode: branches whose recorded head this mirror does not have yet (branch →
    /// the recorded commit). Naming one answers [`Error::NotSynced`] and asks for a follow;
    /// never the mirror's own, older ref (see `follow.rs`). Always empty with SQLite.
    pending: Branches,
}

impl View {
    /// Whether a mirror that lacks `id` lags behind what the cluster recorded, so that
    /// another replica may well answer it: a recorded head is missing here, or `id` is
    /// itself a shared seen head or pin this mirror lacks. Asked in cluster mode only.
    fn behind(&self, id: &ObjectId) -> bool {
        !self.pending.is_empty() || self.roots.absent.contains(id)
    }
}

/// One registered repository.
pub(crate) struct RepoState {
    /// The registration's incarnation (from the metadata): distinguishes a re-registration
    /// under the same name, in this process and in every other (leases are keyed by it).
    id: u64,
    name: RepoName,
    source: String,
    registered_path: RepoPath,
    branch: Option<String>,
    /// Private; changed in place (`csg repo visibility`), so it is not part of the
    /// registration's identity.
    private: AtomicBool,
    mirror: PathBuf,
    /// The file lock for fetch, ref updates, gc and removal, across processes.
    mirror_lock: PathBuf,
    maintenance: Mutex<()>,
    /// The published view: replaced whole by a sync, pin, unpin or sweep, loaded without a
    /// lock by every read.
    view: ArcSwapOption<View>,
    /// The metadata `state_gen` the view reflects; another process's change moves the
    /// row's and the view is reloaded.
    state_gen: AtomicU64,
    /// Cluster mode: a release waits for the leases in flight to end; no new one starts.
    pub(crate) draining: AtomicBool,
    /// The retention walk (see [`Memo`]): its own lock, held for set operations only.
    memo: Memo,
}

impl RepoState {
    pub(crate) fn registered_path(&self) -> &RepoPath {
        &self.registered_path
    }

    fn view(&self) -> Option<Arc<View>> {
        self.view.load_full()
    }

    fn set_view(&self, view: Option<Arc<View>>) {
        self.view.store(view);
    }

    /// Publishes a view built after the metadata reached `state_gen`.
    fn publish(&self, view: View, state_gen: u64) {
        self.set_view(Some(Arc::new(view)));
        self.state_gen.store(state_gen, Ordering::SeqCst);
    }
}

use crate::{FetchHook, GcHook, RegistryHook};

/// A lease counted but not yet granted: released again unless [`Counted::keep`] is called,
/// so a refused lease never leaves a count behind.
struct Counted<'a> {
    store: &'a Inner,
    key: Option<(u64, ObjectId)>,
}

/// This store's leases of one (registration incarnation, commit).
#[derive(Default)]
pub(crate) struct LeaseCount {
    /// Leases alive now.
    count: usize,
    /// Whether the record on disk is written (it stays, at a count of zero too, until this
    /// store's next sweep).
    recorded: bool,
}

impl Counted<'_> {
    fn keep(mut self) {
        self.key = None;
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            self.store.release(key);
        }
    }
}

/// A lease just taken: the key to release, and the registration and view it was decided
/// under, which the lease's reads go on using (one look at the registry per call).
pub(crate) struct Leased {
    pub(crate) key: (u64, ObjectId),
    pub(crate) state: Arc<RepoState>,
    pub(crate) view: Arc<View>,
}

/// One published registry: every registration this process knows, as of the metadata's
/// registry generation it reflects. Never changed once published.
#[derive(Default)]
pub(crate) struct Registry {
    /// The metadata's `registry_generation` these registrations reflect (bumped in the
    /// transaction of every registration change, in any process).
    generation: u64,
    repos: BTreeMap<RepoName, Arc<RepoState>>,
}

/// What the last reconcile saw of the change counter, and when: the per-call look compares
/// the counter with it without taking `seen`. Two atomics, each written after the reconcile
/// published its registry: a reader that sees one moved and not the other only looks again.
struct Looked {
    /// The counter the last reconcile saw; `u64::MAX`: none (no counter, or never).
    changes: AtomicU64,
    /// When, in nanoseconds since `origin`.
    at: AtomicU64,
    origin: std::time::Instant,
}

impl Looked {
    fn new() -> Self {
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

pub(crate) struct Inner {
    config: StoreConfig,
    clock: Arc<dyn Clock>,
    /// The registry metadata: SQLite in the data directory, or PostgreSQL (cluster mode).
    db: Box<dyn RegistryBackend>,
    /// The registry snapshot: loaded once per call, replaced whole by a registration
    /// change of this process or a reconcile with the metadata.
    repos: ArcSwap<Registry>,
    /// What `repos` was last reconciled against, held by a reconcile (no registry change of
    /// this process ever holds it). A call only ever tries it ([`Inner::look`]).
    seen: Mutex<changecounter::Seen>,
    /// What the last reconcile saw, readable without `seen`: the per-call look.
    looked: Looked,
    /// A test hook run inside each reconcile, `seen` held (where a slow metadata read would
    /// keep it).
    reconcile_hook: Mutex<Option<RegistryHook>>,
    /// Serialises this process's registry changes (`register`, `unregister`) among
    /// themselves; no read takes it.
    writes: Mutex<()>,
    /// A test hook run inside a registry change, after its metadata write and before its
    /// snapshot is published (where a slow database write would keep a writer).
    registry_hook: Mutex<Option<RegistryHook>>,
    /// Snapshot leases of this store: (incarnation, commit) → count (G-8). The first lease of
    /// a key writes its record on disk; a count of zero keeps its key and record until this
    /// store's next sweep, so later leases of the commit never touch a file. Never held
    /// across I/O.
    leases: Mutex<HashMap<(u64, ObjectId), LeaseCount>>,
    /// This store's liveness lock and lease record directory.
    owner: shared::Owner,
    gc_hook: Mutex<Option<GcHook>>,
    /// Decoded texts of recently read blobs (by blob id: valid in every commit holding them).
    pub(crate) blobs: BlobCache,
    /// Source of repository state ids and root generations.
    counter: AtomicU64,
    /// The data directory as configured and as canonicalised: never shown to callers.
    data_dir_forms: Vec<String>,
    /// Whether the metadata is shared with processes that keep mirrors of their own
    /// (PostgreSQL, cluster mode): a mirror then names the registration it was made for (see
    /// [`MIRROR_INCARNATION`]), since another replica's removal cannot trash it here.
    mirrors_per_replica: bool,
    /// Where the registry lives, for [`crate::GitStore::metadata`].
    metadata: crate::Metadata,
    /// Cluster mode: repositories whose mirror must catch up with recorded heads (see
    /// `follow.rs`); its workers run only in cluster mode.
    follows: Arc<follow::Follows>,
    /// How long a cluster-wide sync lease outlives its holder's last renewal, in
    /// milliseconds.
    sync_lease_ms: AtomicU64,
    /// A test hook run just before each fetch from the source.
    fetch_hook: Mutex<Option<FetchHook>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.follows.close();
    }
}

/// The file in a mirror naming the incarnation it was made for, in cluster mode only. A name
/// removed through another replica and registered again, maybe with another source, must not
/// be served from the mirror this replica kept of the old registration: such a mirror is not
/// loaded, and the next sync here trashes it and clones afresh.
pub(crate) const MIRROR_INCARNATION: &str = "csg-incarnation";

impl Inner {
    /// Where the registry lives.
    pub(crate) fn metadata(&self) -> &crate::Metadata {
        &self.metadata
    }

    pub(crate) fn open(
        config: StoreConfig,
        clock: Arc<dyn Clock>,
        metadata: crate::Metadata,
    ) -> Result<Self, Error> {
        std::fs::create_dir_all(config.data_dir.join("mirrors"))
            .map_err(storage("creating the data directory"))?;
        let mirrors_per_replica = matches!(metadata, crate::Metadata::Postgres(_));
        let db: Box<dyn RegistryBackend> = match metadata.clone() {
            crate::Metadata::Sqlite => Box::new(SqliteRegistry::open(
                &config.data_dir.join(crate::METADATA_FILE),
            )?),
            crate::Metadata::Postgres(database) => Box::new(PgRegistry::open(database)?),
        };
        let owner = shared::Owner::create(&config.data_dir.join("leases"))?;
        let mut data_dir_forms = vec![config.data_dir.to_string_lossy().into_owned()];
        if let Ok(canonical) = config.data_dir.canonicalize() {
            data_dir_forms.push(canonical.to_string_lossy().into_owned());
        }
        let inner = Self {
            config,
            clock,
            db,
            repos: ArcSwap::from_pointee(Registry::default()),
            seen: Mutex::new(changecounter::Seen::default()),
            looked: Looked::new(),
            reconcile_hook: Mutex::new(None),
            writes: Mutex::new(()),
            registry_hook: Mutex::new(None),
            leases: Mutex::new(HashMap::new()),
            owner,
            gc_hook: Mutex::new(None),
            blobs: BlobCache::new(DEFAULT_BLOB_CACHE_BYTES),
            counter: AtomicU64::new(1),
            data_dir_forms,
            mirrors_per_replica,
            metadata,
            follows: Arc::default(),
            sync_lease_ms: AtomicU64::new(duration_ms(crate::DEFAULT_SYNC_LEASE)),
            fetch_hook: Mutex::new(None),
        };
        inner.refresh()?;
        Ok(inner)
    }

    /// Starts what runs beside the calls: in cluster mode, the follow workers.
    pub(crate) fn start(self: &Arc<Self>) {
        if self.mirrors_per_replica {
            follow::start(self);
        }
    }

    /// Cluster mode: whether this mirror, lacking `id`, is behind the cluster (see
    /// [`View::behind`]). Always false with SQLite: the one mirror is the truth.
    fn behind(&self, view: &View, id: &ObjectId) -> bool {
        self.mirrors_per_replica && view.behind(id)
    }

    /// Asks for a follow of `state` and answers the error a read gives meanwhile: this
    /// replica has not fetched what the cluster recorded yet. No `git` here (read path).
    fn catching_up(&self, state: &RepoState) -> Error {
        self.follows.request(&state.name);
        Error::NotSynced(state.name.clone())
    }

    /// Whether this replica holds a copy of `name` that answers reads now or will once its
    /// follow lands: a view, and either no branch lagging the cluster's record or a follow
    /// that may still bring it (none failed moments ago). No `git`, no wait.
    pub(crate) fn holds_copy(&self, name: &RepoName) -> Result<bool, Error> {
        let state = self.state(name)?;
        Ok(state
            .view()
            .is_some_and(|view| view.pending.is_empty() || !self.follows.failed_recently(name)))
    }

    /// Cluster mode: after a read answered [`Error::NotSynced`], waits at most `timeout` for
    /// this mirror to follow the heads the cluster recorded (see [`follow::Follows::wait`]);
    /// true when trying the read again may answer. False at once when there is nothing to
    /// wait for: SQLite, no view here (never synced or released: the next sync fetches it),
    /// or a follow failed moments ago. A view that lags no branch any more (the follow
    /// landed meanwhile) is worth one more try without waiting. Waits on the follow queue's
    /// notification only, never on a lock a writer holds.
    pub(crate) fn wait_followed(&self, name: &RepoName, timeout: std::time::Duration) -> bool {
        if !self.mirrors_per_replica {
            return false;
        }
        let Some(state) = self.repos.load().repos.get(name).cloned() else {
            return false;
        };
        let Some(view) = state.view() else {
            return false;
        };
        if view.pending.is_empty() {
            return true;
        }
        self.follows.wait(name, timeout) == follow::Waited::Followed
    }

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
    fn registry(&self) -> Result<Arc<Registry>, Error> {
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
    fn publish_registry(
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
    fn mirror_is_for(&self, state: &RepoState) -> bool {
        !self.mirrors_per_replica
            || std::fs::read_to_string(state.mirror.join(MIRROR_INCARNATION))
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                == Some(state.id)
    }

    /// Sets how long a sync lease outlives its holder's last renewal (at least a second).
    pub(crate) fn set_sync_lease(&self, lease: std::time::Duration) {
        let ms = duration_ms(lease).max(1000);
        self.sync_lease_ms.store(ms, Ordering::Relaxed);
    }

    /// Installs the test hook run before each fetch from a source.
    pub(crate) fn set_fetch_hook(&self, hook: Option<FetchHook>) {
        *lock(&self.fetch_hook) = hook;
    }

    /// Installs the test hook run just before `git gc`.
    pub(crate) fn set_gc_hook(&self, hook: Option<GcHook>) {
        *lock(&self.gc_hook) = hook;
    }

    pub(crate) fn storage_root(&self) -> &Path {
        &self.config.data_dir
    }

    fn next_id(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }

    fn mirror_path(&self, name: &RepoName) -> PathBuf {
        let (owner, repo) = name
            .as_str()
            .split_once('/')
            .unwrap_or(("_", name.as_str()));
        self.config
            .data_dir
            .join("mirrors")
            .join(owner)
            .join(format!("{repo}.git"))
    }

    fn new_state(
        &self,
        incarnation: u64,
        name: RepoName,
        source: String,
        registered_path: RepoPath,
        branch: Option<String>,
        private: bool,
    ) -> RepoState {
        let (owner, repo) = name
            .as_str()
            .split_once('/')
            .unwrap_or(("_", name.as_str()));
        let locks = self.config.data_dir.join("locks").join(owner);
        RepoState {
            id: incarnation,
            mirror: self.mirror_path(&name),
            mirror_lock: locks.join(format!("{repo}.mirror.lock")),
            name,
            source,
            registered_path,
            branch,
            private: AtomicBool::new(private),
            maintenance: Mutex::new(()),
            view: ArcSwapOption::empty(),
            state_gen: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            memo: Memo::default(),
        }
    }

    fn state(&self, name: &RepoName) -> Result<Arc<RepoState>, Error> {
        self.registry()?
            .repos
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownRepo(name.clone()))
    }

    /// [`Inner::state`] after a [`Inner::refresh`] (which waits for a reconcile in flight):
    /// for maintenance, which must find a registration another process just made.
    pub(crate) fn state_fresh(&self, name: &RepoName) -> Result<Arc<RepoState>, Error> {
        self.refresh()?;
        self.repos
            .load()
            .repos
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownRepo(name.clone()))
    }

    /// Whether `state` is still the registration under its name (not unregistered or
    /// replaced while we waited for its maintenance lock).
    fn is_current(&self, state: &RepoState) -> bool {
        self.repos
            .load()
            .repos
            .get(&state.name)
            .is_some_and(|s| s.id == state.id)
    }

    /// Every registration of the snapshot in force now.
    pub(crate) fn states(&self) -> Result<Vec<Arc<RepoState>>, Error> {
        Ok(self.registry()?.repos.values().cloned().collect())
    }

    fn synced(&self, name: &RepoName) -> Result<(Arc<RepoState>, Arc<View>), Error> {
        let state = self.state(name)?;
        let view = state.view().ok_or_else(|| Error::NotSynced(name.clone()))?;
        Ok((state, view))
    }

    // ----- registrations -----------------------------------------------------------------

    pub(crate) fn register(&self, reg: Registration) -> Result<RepoInfo, Error> {
        validate_source(&reg.source)?;
        if let Some(branch) = &reg.branch {
            revision::validate_branch(branch)?;
        }
        // Held across the check and the insert so two registrations cannot race (across
        // processes the primary key decides: the loser's insert fails and it answers from
        // the row that won). Readers never take it: they keep the published snapshot.
        let _writes = lock(&self.writes);
        if let Some(row) = self.db.repo(&reg.name)? {
            return same_registration(&row, &reg);
        }
        let incarnation = match self.db.insert_repo(&reg) {
            Ok(incarnation) => incarnation,
            // Another process registered the name between our check and our insert.
            Err(e) => {
                return match self.db.repo(&reg.name)? {
                    Some(row) => same_registration(&row, &reg),
                    None => Err(e),
                };
            }
        };
        let state = Arc::new(self.new_state(
            incarnation,
            reg.name.clone(),
            reg.source.clone(),
            reg.registered_path.clone(),
            reg.branch.clone(),
            reg.private.unwrap_or(false),
        ));
        self.publish_registry(incarnation, |repos| {
            repos.insert(reg.name.clone(), Arc::clone(&state));
        });
        self.repo(&reg.name)
    }

    /// Removes the registration and moves its mirror to the trash, under the mirror lock
    /// (a sync or gc of any process finishes first). The trash entry is deleted by a later
    /// sweep once no live process holds a lease record on this registration: a server
    /// reading it meanwhile sees the repository as unknown on its next call.
    pub(crate) fn unregister(&self, name: &RepoName) -> Result<(), Error> {
        let state = self.state_fresh(name)?;
        let _maintenance = lock(&state.maintenance);
        let _mirror = shared::lock_exclusive(&state.mirror_lock)?;
        {
            let _writes = lock(&self.writes);
            let removed = self.db.delete_repo(name, state.id)?;
            self.publish_registry(removed.unwrap_or(0), |repos| {
                if repos.get(name).is_some_and(|s| s.id == state.id) {
                    repos.remove(name);
                }
            });
            state.set_view(None);
            if removed.is_none() {
                // Another process removed (or replaced) it meanwhile.
                return Err(Error::UnknownRepo(name.clone()));
            }
        }
        self.trash_mirror(&state)
    }

    fn trash_dir(&self) -> PathBuf {
        self.config.data_dir.join("trash")
    }

    /// Renames a removed registration's mirror into the trash (atomic: no half-deleted
    /// mirror is ever left where a mirror is expected).
    fn trash_mirror(&self, state: &RepoState) -> Result<(), Error> {
        if !state.mirror.exists() {
            return Ok(());
        }
        let trash = self.trash_dir();
        std::fs::create_dir_all(&trash).map_err(storage("creating the trash directory"))?;
        let base = format!("{}-{}", state.id, state.name.as_str().replace('/', "-"));
        let mut target = trash.join(format!("{base}.git"));
        let mut n = 1;
        while target.exists() {
            target = trash.join(format!("{base}.{n}.git"));
            n += 1;
        }
        std::fs::rename(&state.mirror, &target).map_err(storage("removing the mirror"))
    }

    /// Deletes trash entries no live process holds a lease record on.
    fn empty_trash(&self) -> Result<(), Error> {
        let entries = match std::fs::read_dir(self.trash_dir()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(storage("reading the trash directory")(e)),
        };
        let leases_root = self.leases_root();
        for entry in entries {
            let entry = entry.map_err(storage("reading the trash directory"))?;
            let name = entry.file_name();
            let Some(incarnation) = name.to_str().and_then(shared::trash_incarnation) else {
                continue;
            };
            if shared::live_leases(&leases_root, incarnation)?.is_empty() {
                std::fs::remove_dir_all(entry.path()).map_err(storage("emptying the trash"))?;
            }
        }
        Ok(())
    }

    fn leases_root(&self) -> PathBuf {
        self.config.data_dir.join("leases")
    }

    pub(crate) fn repos(&self) -> Result<Vec<RepoInfo>, Error> {
        Ok(self.db.all_repos()?.iter().map(|r| r.info()).collect())
    }

    /// The registered path of `name` as this store knows it now (after the per-call
    /// registry check), without a metadata query.
    pub(crate) fn is_private(&self, name: &RepoName) -> Result<bool, Error> {
        Ok(self.state(name)?.private.load(Ordering::SeqCst))
    }

    pub(crate) fn set_private(&self, name: &RepoName, private: bool) -> Result<(), Error> {
        let state = self.state(name)?;
        if !self.db.set_private(name, private)? {
            return Err(Error::UnknownRepo(name.clone()));
        }
        state.private.store(private, Ordering::SeqCst);
        Ok(())
    }

    pub(crate) fn registered_path(&self, name: &RepoName) -> Result<RepoPath, Error> {
        Ok(self.state(name)?.registered_path.clone())
    }

    pub(crate) fn repo(&self, name: &RepoName) -> Result<RepoInfo, Error> {
        self.db
            .repo(name)?
            .map(|r| r.info())
            .ok_or_else(|| Error::UnknownRepo(name.clone()))
    }

    /// Every tracked branch head as of the last good sync, by branch name.
    pub(crate) fn branch_heads(&self, name: &RepoName) -> Result<Vec<(String, CommitId)>, Error> {
        let (_, view) = self.synced(name)?;
        view.branches
            .iter()
            .map(|(branch, id)| Ok((branch.clone(), to_commit_id(id)?)))
            .collect()
    }

    // ----- views -------------------------------------------------------------------------

    fn open_repo(&self, state: &RepoState) -> Result<gix::ThreadSafeRepository, Error> {
        // Isolated: the mirror's own config only, nothing from the environment or the
        // operator's global config can change how objects are read.
        gix::ThreadSafeRepository::open_opts(&state.mirror, gix::open::Options::isolated())
            .map_err(storage("opening a mirror"))
    }

    /// Builds a view from the mirror's refs and the metadata (pins, seen heads). In cluster
    /// mode the branches are the heads the last sync recorded, whichever replica ran it: those
    /// this mirror lacks are `pending`, and the mirror's own branch refs count for nothing
    /// (they may be older, or newer than what was recorded). Until a sync records heads (a
    /// database from before they were recorded), the mirror's refs stand.
    fn load_view(&self, state: &RepoState, default_branch: Option<String>) -> Result<View, Error> {
        let repo = self.open_repo(state)?;
        let local = repo.to_thread_local();
        let (mut branches, tags) = read_refs(&local)?;
        let mut pending = Branches::new();
        if let Some(recorded) = self.db.recorded_heads(&state.name)?
            && !recorded.is_empty()
        {
            branches.clear();
            for (branch, commit) in recorded {
                let id = to_oid(&commit)?;
                if is_commit(&local, id)? {
                    branches.insert(branch, id);
                } else {
                    pending.insert(branch, id);
                }
            }
        }
        let head = default_branch
            .as_ref()
            .and_then(|b| branches.get(b))
            .copied();
        self.assemble_view(
            state,
            Arc::new(repo),
            Heads {
                default_branch,
                head,
                branches,
                pending,
            },
            tags,
        )
    }

    fn assemble_view(
        &self,
        state: &RepoState,
        repo: Arc<gix::ThreadSafeRepository>,
        heads: Heads,
        tags: HashMap<String, ObjectId>,
    ) -> Result<View, Error> {
        let Heads {
            default_branch,
            head,
            branches,
            pending,
        } = heads;
        let pins: HashSet<ObjectId> = self
            .db
            .pins(&state.name)?
            .iter()
            .map(to_oid)
            .collect::<Result<_, _>>()?;
        let seen = self
            .db
            .seen_heads(&state.name)?
            .iter()
            .map(|(c, t)| Ok((to_oid(c)?, *t)))
            .collect::<Result<HashMap<_, _>, Error>>()?;
        let fixed = branches
            .values()
            .chain(tags.values())
            .chain(pins.iter())
            .copied()
            .collect();
        // Cluster mode: which shared rows name commits this mirror lacks (one header lookup
        // each, when a view is built, never per read).
        let mut absent = HashSet::new();
        if self.mirrors_per_replica {
            handles::with_repo(&repo, |local| {
                for id in seen.keys().chain(pins.iter()) {
                    if !is_commit(local, *id)? {
                        absent.insert(*id);
                    }
                }
                Ok::<(), Error>(())
            })?;
        }
        Ok(View {
            repo,
            default_branch,
            head,
            branches,
            tags,
            pins,
            roots: Roots {
                generation: self.next_id(),
                fixed,
                seen,
                absent,
            },
            pending,
        })
    }

    /// A copy of `view` with pins and seen heads re-read from the metadata.
    fn refreshed_view(&self, state: &RepoState, view: &View) -> Result<View, Error> {
        self.assemble_view(state, view.repo.clone(), Heads::of(view), view.tags.clone())
    }

    // ----- retention ---------------------------------------------------------------------

    fn is_leased(&self, state: &RepoState, id: &ObjectId) -> bool {
        lock(&self.leases)
            .get(&(state.id, *id))
            .is_some_and(|lease| lease.count > 0)
    }

    /// Whether `id` is reachable from the retention roots active at `now`, walking as far as
    /// needed (maintenance and the operations by name).
    fn is_retained(
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
    fn check_readable(
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
    fn check_readable_with(
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

    // ----- resolve -----------------------------------------------------------------------

    pub(crate) fn resolve(
        &self,
        name: &RepoName,
        revision: Option<&str>,
    ) -> Result<CommitId, Error> {
        let (state, view) = self.synced(name)?;
        let id = self.resolve_in(&state, &view, revision, Walk::Unbounded)?;
        to_commit_id(&id.ok_or_else(unwalked)?)
    }

    /// [`Inner::resolve`] against a view already taken; `Ok(None)` when the retention check
    /// needs the ancestor walk and `walk` says it may not run here.
    fn resolve_in(
        &self,
        state: &RepoState,
        view: &View,
        revision: Option<&str>,
        walk: Walk<'_>,
    ) -> Result<Option<ObjectId>, Error> {
        let name = &state.name;
        let unknown = |rev: &str| Error::UnknownRevision {
            repo: name.clone(),
            revision: rev.to_string(),
        };
        let id = match revision {
            None | Some("HEAD") => match view.head {
                Some(id) => id,
                None if view
                    .default_branch
                    .as_ref()
                    .is_some_and(|b| view.pending.contains_key(b)) =>
                {
                    return Err(self.catching_up(state));
                }
                None => return Err(unknown("HEAD")),
            },
            Some(rev) => {
                revision::validate_revision(rev)?;
                self.resolve_name(state, view, rev)?
            }
        };
        Ok(self
            .check_readable_with(state, view, &id, false, walk)?
            .map(|()| id))
    }

    fn resolve_name(&self, state: &RepoState, view: &View, rev: &str) -> Result<ObjectId, Error> {
        let unknown = || Error::UnknownRevision {
            repo: state.name.clone(),
            revision: rev.to_string(),
        };
        if rev.len() == 40 && revision::is_hex(rev) {
            let id = ObjectId::from_hex(rev.as_bytes()).map_err(|_| unknown())?;
            return match handles::with_repo(&view.repo, |repo| peel_to_commit(repo, id))? {
                Some(commit) => Ok(commit),
                None if self.behind(view, &id) => Err(self.catching_up(state)),
                None => Err(unknown()),
            };
        }
        // A ref wins over a short SHA of the same spelling, as in git; a branch whose
        // recorded head this mirror lacks (cluster mode) is still that branch.
        let branch = |b: &str| match view.branches.get(b) {
            Some(id) => Some(Ok(*id)),
            None if view.pending.contains_key(b) => Some(Err(())),
            None => None,
        };
        let by_ref = branch(rev)
            .or_else(|| view.tags.get(rev).map(|id| Ok(*id)))
            .or_else(|| rev.strip_prefix("refs/heads/").and_then(branch))
            .or_else(|| {
                rev.strip_prefix("refs/tags/")
                    .and_then(|t| view.tags.get(t))
                    .map(|id| Ok(*id))
            });
        match by_ref {
            Some(Ok(id)) => return Ok(id),
            Some(Err(())) => return Err(self.catching_up(state)),
            None => {}
        }
        if revision::is_hex(rev) && rev.len() >= MIN_SHORT_SHA {
            return match handles::with_repo(&view.repo, |repo| {
                resolve_prefix(&state.name, repo, rev, MIN_SHORT_SHA)
            }) {
                // Maybe a commit of a recorded head this mirror has not fetched yet.
                Err(Error::UnknownRevision { .. })
                    if self.mirrors_per_replica && !view.pending.is_empty() =>
                {
                    Err(self.catching_up(state))
                }
                other => other,
            };
        }
        Err(unknown())
    }

    // ----- leases ------------------------------------------------------------------------

    /// Takes a lease after checking retention; returns the key to release.
    ///
    /// Never waits on a writer. The lease is counted first and retention checked after,
    /// while a sweep publishes its expiry first and reads the counts after: either the sweep
    /// sees this count and keeps the commit, or this check sees the expiry and refuses. The
    /// first lease of a (registration, commit) in this store writes its record on disk first
    /// and then re-reads what other processes published, which is the same order across
    /// processes (a sweep anywhere commits its expiry, then lists the records).
    pub(crate) fn lease(&self, name: &RepoName, commit: &CommitId) -> Result<Leased, Error> {
        let (state, view) = self.synced(name)?;
        self.lease_in(state, view, to_oid(commit)?, Walk::Unbounded)?
            .ok_or_else(unwalked)
    }

    /// Resolves `revision` and leases the commit it names, on one look at the registry: the
    /// frame of every read.
    pub(crate) fn lease_revision(
        &self,
        name: &RepoName,
        revision: Option<&str>,
    ) -> Result<Leased, Error> {
        self.lease_revision_with(name, revision, Walk::Unbounded)?
            .ok_or_else(unwalked)
    }

    /// [`Inner::lease_revision`] where `walk` says whether the retention walk may run here:
    /// `Ok(None)` when only the walk can tell and it may not (no lease is left counted).
    pub(crate) fn lease_revision_with(
        &self,
        name: &RepoName,
        revision: Option<&str>,
        walk: Walk<'_>,
    ) -> Result<Option<Leased>, Error> {
        let (state, view) = self.synced(name)?;
        match self.resolve_in(&state, &view, revision, walk)? {
            Some(id) => self.lease_in(state, view, id, walk),
            None => Ok(None),
        }
    }

    fn lease_in(
        &self,
        state: Arc<RepoState>,
        view: Arc<View>,
        id: ObjectId,
        walk: Walk<'_>,
    ) -> Result<Option<Leased>, Error> {
        // Warm the memo before counting: a first ancestor walk can take a while.
        if self
            .check_readable_with(&state, &view, &id, false, walk)?
            .is_none()
        {
            return Ok(None);
        }
        let key = (state.id, id);
        let recorded = {
            let mut leases = lock(&self.leases);
            // Checked with the count, under one lock: a release that saw no count has no
            // lease to wait for.
            if state.draining.load(Ordering::SeqCst) {
                return Err(Error::NotSynced(state.name.clone()));
            }
            let lease = leases.entry(key).or_default();
            lease.count += 1;
            lease.recorded
        };
        let counted = Counted {
            store: self,
            key: Some(key),
        };
        let (state, view) = if recorded {
            let view = state
                .view()
                .ok_or_else(|| Error::NotSynced(state.name.clone()))?;
            (state, view)
        } else {
            // Concurrent first leases may both write it: creating the record is idempotent.
            self.owner.record(key.0, &id)?;
            if let Some(lease) = lock(&self.leases).get_mut(&key) {
                lease.recorded = true;
            }
            self.synced(&state.name)?
        };
        let retained = if state.id == key.0 {
            self.is_retained_with(&state, &view, &id, self.clock.now(), walk)?
        } else {
            Some(false)
        };
        match retained {
            Some(true) => {}
            Some(false) => {
                return Err(Error::OutsideRetention {
                    repo: state.name.clone(),
                    commit: to_commit_id(&id)?,
                });
            }
            // The count goes with `counted`.
            None => return Ok(None),
        }
        counted.keep();
        Ok(Some(Leased { key, state, view }))
    }

    /// This store's leases of `state` now: every commit with a live count.
    pub(crate) fn leased_here(&self, state: &RepoState) -> HashSet<ObjectId> {
        lock(&self.leases)
            .iter()
            .filter(|((owner, _), lease)| *owner == state.id && lease.count > 0)
            .map(|((_, id), _)| *id)
            .collect()
    }

    /// Memory only: the record stays until this store's next sweep.
    pub(crate) fn release(&self, key: &(u64, ObjectId)) {
        if let Some(lease) = lock(&self.leases).get_mut(key) {
            lease.count = lease.count.saturating_sub(1);
        }
    }

    /// Drops this store's lease records whose count is zero (run by its sweep).
    fn reclaim_idle_leases(&self) {
        lock(&self.leases).retain(|(incarnation, id), lease| {
            if lease.count == 0 {
                self.owner.unrecord(*incarnation, id);
            }
            lease.count > 0
        });
    }

    // ----- reads -------------------------------------------------------------------------

    fn outside_scope(state: &RepoState, path: &RepoPath) -> Error {
        Error::OutsideScope {
            repo: state.name.clone(),
            path: path.to_string(),
            scope: state.registered_path.to_string(),
        }
    }

    /// Runs `read` on the root tree of `commit` after the scope check of `path`, the
    /// retention check (a live lease suffices) and with the object lock held.
    fn with_tree<T>(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        read: impl FnOnce(&RepoState, &gix::Repository, ObjectId) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (state, view) = self.synced(name)?;
        self.tree_in(&state, &view, to_oid(commit)?, path, read)
    }

    /// [`Inner::with_tree`] against a view already taken.
    fn tree_in<T>(
        &self,
        state: &RepoState,
        view: &View,
        id: ObjectId,
        path: &RepoPath,
        read: impl FnOnce(&RepoState, &gix::Repository, ObjectId) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if !path.is_root() && !path.is_within(&state.registered_path) {
            return Err(Self::outside_scope(state, path));
        }
        self.check_readable(state, view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            let tree = objects::commit_tree(repo, id)?;
            read(state, repo, tree)
        })
    }

    pub(crate) fn commit_details(
        &self,
        name: &RepoName,
        commit: &CommitId,
        max_files: usize,
    ) -> Result<crate::CommitDetails, Error> {
        let (state, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            crate::changes::details(repo, id, &state.registered_path, max_files)
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn diff(
        &self,
        name: &RepoName,
        base: &CommitId,
        head: &CommitId,
        path: &RepoPath,
        skip: usize,
        budget: usize,
        call: &budget::Budget,
    ) -> Result<crate::DiffPage, Error> {
        let (state, view) = self.synced(name)?;
        let limit = Self::history_scope(&state, path)?;
        let (base, head) = (to_oid(base)?, to_oid(head)?);
        self.check_readable(&state, &view, &base, true)?;
        self.check_readable(&state, &view, &head, true)?;
        let page = crate::diff::Page {
            skip,
            bytes: budget,
            call,
            blobs: &self.blobs,
        };
        handles::with_repo(&view.repo, |repo| {
            crate::diff::diff(repo, base, head, limit, page)
        })
    }

    pub(crate) fn blame(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        start_line: u64,
        end_line: u64,
    ) -> Result<(Vec<crate::BlameRange>, u64), Error> {
        // Scope, retention and the text checks of a read; the text gives the line count.
        let total = self.read_text(name, commit, path)?.line_count();
        let end = end_line.min(total);
        if total == 0 || start_line > end {
            return Ok((Vec::new(), total));
        }
        let (_, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        let ranges = handles::with_repo(&view.repo, |repo| {
            crate::blame::blame(repo, id, path, start_line.max(1), end)
        })?;
        Ok((ranges, total))
    }

    pub(crate) fn log(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        skip: usize,
        limit: usize,
    ) -> Result<(Vec<crate::CommitSummary>, bool), Error> {
        let (state, view) = self.synced(name)?;
        let path = Self::history_scope(&state, path)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            crate::history::log(repo, id, path, skip, limit)
        })
    }

    /// What a history query limited to `path` covers: `path` inside the registered scope, or
    /// the scope itself for the root (G-2).
    fn history_scope<'a>(state: &'a RepoState, path: &'a RepoPath) -> Result<&'a RepoPath, Error> {
        if path.is_root() {
            Ok(&state.registered_path)
        } else if path.is_within(&state.registered_path) {
            Ok(path)
        } else {
            Err(Self::outside_scope(state, path))
        }
    }

    /// A reader of `commit`'s blobs by object id (see [`crate::BlobReader`]).
    pub(crate) fn blob_reader(
        &self,
        name: &RepoName,
        commit: &CommitId,
    ) -> Result<crate::BlobReader, Error> {
        let (state, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        Ok(crate::BlobReader {
            repo: view.repo.clone(),
        })
    }

    pub(crate) fn read_text(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
    ) -> Result<Arc<Text>, Error> {
        let (state, view) = self.synced(name)?;
        let text = self.text_in(&state, &view, to_oid(commit)?, path, None)?;
        // Without an allowance every blob is read.
        text.ok_or_else(|| odb("a text read without allowance stopped early"))
    }

    /// [`Inner::read_text`] against a view already taken (a lease's). With `allowance`, a
    /// blob not in the cache is inflated only if its size (from the object header) is within
    /// what is left of it, which it then takes; `Ok(None)` means it was not.
    pub(crate) fn text_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        allowance: Option<&mut u64>,
    ) -> Result<Option<Arc<Text>>, Error> {
        Ok(
            match self.text_read(state, view, commit, path, allowance, None)? {
                TextRead::Text(text) => Some(text),
                TextRead::Deferred { .. } => None,
            },
        )
    }

    /// The read path of every text tool (issue 42 point 5): the blob at `path` from the
    /// call's `memo`, the blob cache, or a decode another call runs now (single flight),
    /// else decoded here. A blob over the text cap is refused from its object header before
    /// it is inflated ([`Error::TextTooLarge`]). With `allowance`, a blob that must be inflated
    /// here is inflated only if its size is within what is left of it, which it then takes;
    /// else the read is [`TextRead::Deferred`].
    pub(crate) fn text_read(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        allowance: Option<&mut u64>,
        mut memo: Option<&mut TextMemo>,
    ) -> Result<TextRead, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            let shown = to_commit_id(&commit)?;
            let id = objects::blob_id(repo, tree, path, &shown)?;
            let limit = self.blobs.max_text();
            let too_large = |size: u64| Error::TextTooLarge {
                path: path.to_string(),
                size,
                limit,
            };
            let kept = memo.as_ref().and_then(|memo| memo.get(&id));
            if let Some(text) = kept.or_else(|| self.blobs.get(&id)) {
                // Cached before the cap was lowered: the cap still holds.
                if text.len() as u64 > limit {
                    return Err(too_large(text.len() as u64));
                }
                if let Some(memo) = memo.as_mut() {
                    memo.keep(id, text.clone(), limit);
                }
                return Ok(TextRead::Text(text));
            }
            let size = repo.find_header(id).map_err(odb)?.size();
            if size > limit {
                return Err(too_large(size));
            }
            if let Some(left) = allowance {
                if size > *left {
                    return Ok(TextRead::Deferred {
                        shared: self.blobs.decoding(&id),
                    });
                }
                *left -= size;
            }
            let text = self.blobs.text(id, path.as_str(), || {
                objects::classify_blob(path.as_str(), objects::read_blob(repo, id)?)
            })?;
            if let Some(memo) = memo {
                memo.keep(id, text.clone(), limit);
            }
            Ok(TextRead::Text(text))
        })
    }

    /// The bytes of the blob at `path` to serve whole (`raw`): shared with every other call
    /// serving the same blob now, or with the blob cache's text of it (see
    /// [`crate::SharedBlob`]). A blob over `max` bytes is refused from its header.
    pub(crate) fn blob_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        max: u64,
    ) -> Result<SharedBlob, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        let shown = to_commit_id(&commit)?;
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            let id = objects::blob_id(repo, tree, path, &shown)?;
            let size = repo.find_header(id).map_err(odb)?.size();
            if size > max {
                return Err(Error::TooLarge {
                    path: path.to_string(),
                    size,
                    limit: max,
                });
            }
            self.blobs
                .raw(id, path.as_str(), || objects::read_blob(repo, id))
        })
    }

    pub(crate) fn read_bytes(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        max: Option<u64>,
    ) -> Result<Vec<u8>, Error> {
        let (state, view) = self.synced(name)?;
        self.bytes_in(&state, &view, to_oid(commit)?, path, max)
    }

    /// [`Inner::read_bytes`] against a view already taken (a lease's).
    pub(crate) fn bytes_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        max: Option<u64>,
    ) -> Result<Vec<u8>, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        let shown = to_commit_id(&commit)?;
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            objects::read_bytes(repo, tree, path, &shown, max)
        })
    }

    pub(crate) fn find_files(
        &self,
        name: &RepoName,
        commit: &CommitId,
        suffix: &str,
    ) -> Result<Vec<FoundFile>, Error> {
        let (state, view) = self.synced(name)?;
        self.files_in(&state, &view, to_oid(commit)?, suffix)
    }

    /// [`Inner::find_files`] against a view already taken (a lease's).
    pub(crate) fn files_in(
        &self,
        state: &RepoState,
        view: &View,
        id: ObjectId,
        suffix: &str,
    ) -> Result<Vec<FoundFile>, Error> {
        let commit = &to_commit_id(&id)?;
        self.tree_in(state, view, id, &RepoPath::root(), |state, repo, tree| {
            let scope = &state.registered_path;
            let mut out = Vec::new();
            match objects::locate(repo, tree, scope, commit) {
                Ok(Target::Tree(dir)) => {
                    objects::find_suffix(repo, dir, scope.as_str(), true, suffix, &mut out)?
                }
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(out)
        })
    }

    pub(crate) fn list_tree(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        depth: u32,
        limit: usize,
    ) -> Result<(Vec<TreeEntry>, bool), Error> {
        self.with_tree(name, commit, path, |state, repo, tree| {
            let target_path = if path.is_root() {
                &state.registered_path
            } else {
                path
            };
            let mut out = Vec::new();
            let mut truncated = false;
            match objects::locate(repo, tree, target_path, commit) {
                Ok(Target::Tree(dir)) => {
                    let base = target_path.as_str();
                    truncated = objects::list(repo, dir, base, depth.max(1), limit, &mut out)?;
                }
                Ok(other) => out.push(objects::single_entry(repo, target_path, &other)?),
                // A registered path that does not exist at this commit is an empty scope.
                Err(Error::NotFound { .. }) if path.is_root() => {}
                Err(e) => return Err(e),
            }
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok((out, truncated))
        })
    }
}

/// The branch side of a [`View`], as a sync fetched it or the metadata recorded it.
pub(crate) struct Heads {
    default_branch: Option<String>,
    head: Option<ObjectId>,
    branches: Branches,
    pending: Branches,
}

impl Heads {
    /// The heads of `view`, copied.
    fn of(view: &View) -> Self {
        Self {
            default_branch: view.default_branch.clone(),
            head: view.head,
            branches: view.branches.clone(),
            pending: view.pending.clone(),
        }
    }
}

/// Whole milliseconds of `d`, at least 1.
pub(crate) fn duration_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A `source` we are willing to hand to git as its repository argument.
fn validate_source(source: &str) -> Result<(), Error> {
    // No dedicated variant exists for a bad source; the message names it as the source.
    let bad = |reason: &str| Error::InvalidName {
        name: register::shown_source(source),
        reason: format!("not a usable source ({reason})"),
    };
    if source.trim().is_empty() {
        return Err(bad("it is empty"));
    }
    if source.len() > 4096 {
        return Err(bad("it is longer than 4096 bytes"));
    }
    if source.chars().any(char::is_control) {
        return Err(bad("it contains a control character"));
    }
    if source.starts_with('-') {
        return Err(bad("it starts with `-`"));
    }
    Ok(())
}

fn refs_err<E: std::fmt::Display>(e: E) -> Error {
    storage("reading mirror refs")(e)
}

/// Branch heads and tags (peeled to commits) of the mirror.
fn read_refs(repo: &gix::Repository) -> Result<(Branches, Tags), Error> {
    let platform = repo.references().map_err(refs_err)?;
    let mut branches = BTreeMap::new();
    for reference in platform.local_branches().map_err(refs_err)? {
        let mut reference = reference.map_err(refs_err)?;
        let Some(name) = ref_suffix(&reference, "refs/heads/") else {
            continue;
        };
        let id = reference.peel_to_id().map_err(refs_err)?.detach();
        if is_commit(repo, id)? {
            branches.insert(name, id);
        }
    }
    let mut tags = HashMap::new();
    for reference in platform.tags().map_err(refs_err)? {
        let mut reference = reference.map_err(refs_err)?;
        let Some(name) = ref_suffix(&reference, "refs/tags/") else {
            continue;
        };
        let id = reference.peel_to_id().map_err(refs_err)?.detach();
        if is_commit(repo, id)? {
            tags.insert(name, id);
        }
    }
    Ok((branches, tags))
}

fn ref_suffix(reference: &gix::Reference<'_>, prefix: &str) -> Option<String> {
    let full = std::str::from_utf8(reference.name().as_bstr().as_ref()).ok()?;
    full.strip_prefix(prefix).map(str::to_string)
}

fn is_commit(repo: &gix::Repository, id: ObjectId) -> Result<bool, Error> {
    Ok(repo
        .try_find_header(id)
        .map_err(odb)?
        .is_some_and(|h| h.kind() == gix::objs::Kind::Commit))
}

/// Follows annotated tags to what they point at; `None` unless that is an existing commit.
fn peel_to_commit(repo: &gix::Repository, mut id: ObjectId) -> Result<Option<ObjectId>, Error> {
    // Tag chains are short; a bound keeps a pathological cycle-free chain from looping long.
    for _ in 0..16 {
        let Some(object) = repo.try_find_object(id).map_err(odb)? else {
            return Ok(None);
        };
        match object.kind {
            gix::objs::Kind::Commit => return Ok(Some(id)),
            gix::objs::Kind::Tag => {
                id = gix::objs::TagRefIter::from_bytes(&object.data, repo.object_hash())
                    .target_id()
                    .map_err(odb)?;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Unique-prefix lookup among commits (G-4). `min_len` is a parameter so tests can prove the
/// ambiguity logic with short prefixes, which collide in small repositories.
pub(crate) fn resolve_prefix(
    repo_name: &RepoName,
    repo: &gix::Repository,
    hex: &str,
    min_len: usize,
) -> Result<ObjectId, Error> {
    let unknown = || Error::UnknownRevision {
        repo: repo_name.clone(),
        revision: hex.to_string(),
    };
    if hex.len() < min_len || hex.len() >= 40 || !revision::is_hex(hex) {
        return Err(unknown());
    }
    let prefix = gix::hash::Prefix::from_hex(&hex.to_ascii_lowercase()).map_err(|_| unknown())?;
    let mut candidates = HashSet::new();
    repo.objects
        .lookup_prefix(prefix, Some(&mut candidates))
        .map_err(odb)?;
    let mut commits = Vec::new();
    for id in candidates {
        if is_commit(repo, id)? {
            commits.push(id);
        }
    }
    commits.sort();
    match commits.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        many => Err(Error::Ambiguous {
            repo: repo_name.clone(),
            prefix: hex.to_string(),
            candidates: many.iter().map(to_commit_id).collect::<Result<_, _>>()?,
        }),
    }
}

/// Registering a name that is registered already: the same source and path is the existing
/// registration (unless the visibility asked for differs), anything else is taken.
fn same_registration(row: &crate::db::RepoRow, reg: &Registration) -> Result<RepoInfo, Error> {
    if row.source != reg.source || row.registered_path != reg.registered_path {
        return Err(Error::NameTaken(reg.name.clone()));
    }
    match reg.private {
        Some(private) if private != row.private => Err(Error::VisibilityDiffers {
            name: reg.name.clone(),
            private: row.private,
        }),
        _ => Ok(row.info()),
    }
}
