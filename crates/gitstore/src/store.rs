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
//!
//! This module holds the state's types and the registry snapshot's lookups; its parts:
//! `registry` (the snapshot kept in step with the metadata), `register` (registrations),
//! `views` (a mirror's refs into a view), `resolve` (revisions), `readable` (retention
//! checks), `leases`, `reads`, `maintenance`, `walks`, `follow` and `shared`.

use crate::blobcache::{BlobCache, DEFAULT_BLOB_CACHE_BYTES};
use crate::db::{PgRegistry, RegistryBackend, SqliteRegistry, storage};
use crate::retention::{Memo, Roots};
use crate::{Clock, Error, RepoName, RepoPath, StoreConfig};
use crate::{FetchHook, GcHook, RegistryHook};
use arc_swap::{ArcSwap, ArcSwapOption};
use gix::ObjectId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

mod follow;
mod leases;
mod maintenance;
mod readable;
mod reads;
pub(crate) mod register;
mod registry;
mod resolve;
mod shared;
mod views;
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

/// This store's leases of one (registration incarnation, commit).
#[derive(Default)]
pub(crate) struct LeaseCount {
    /// Leases alive now.
    count: usize,
    /// Whether the record on disk is written (it stays, at a count of zero too, until this
    /// store's next sweep).
    recorded: bool,
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
    looked: registry::Looked,
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
            looked: registry::Looked::new(),
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
