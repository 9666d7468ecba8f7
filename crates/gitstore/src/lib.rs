//! `gitstore` owns the Git side of Context Source Graph (SPEC section 1, G-1..G-8).
//!
//! It keeps registered repositories (a whole repository or a registered path inside a
//! monorepo), their bare mirrors under the data directory, the metadata (registrations, sync
//! state, heads seen, pins: SQLite in the data directory, or PostgreSQL shared by cluster
//! replicas, see [`Metadata`]), revision resolution to full SHAs, retention with an
//! injectable clock, snapshot leases, path safety and blob/tree reads.
//!
//! Everything here is blocking: callers on an async runtime wrap calls in
//! `spawn_blocking`. Object access goes through `gix`; only fetch/clone and pruning shell
//! out to `git`.
//!
//! Paths given to and returned by this crate are always *repository-relative*
//! (`packages/docs/knowledge/a.md`), even for a registration with a registered path: the
//! scope only decides what is visible.

mod blame;
mod blobcache;
mod changes;
mod clock;
mod commitfiles;
mod db;
mod diff;
mod error;
mod follow;
#[doc(hidden)]
pub mod fuzzing;
mod gitcli;
mod gitdiff;
mod handles;
mod history;
mod linediff;
mod mergebase;
mod names;
mod objects;
mod retention;
mod revision;
mod store;
mod text;
mod treediff;
mod walk;

pub use blame::BlameRange;
pub use blobcache::{
    DEFAULT_BLOB_CACHE_BYTES, DEFAULT_MAX_TEXT_BYTES, SharedBlob, TextMemo, TextRead,
};
pub use changes::{ChangeKind, CommitDetails, FileChange};
pub use clock::{Clock, ManualClock, SystemClock};
pub use commitfiles::{CommitFile, CommitFiles, FileStatus};
pub use diff::{DiffPage, FileDiff};
pub use error::Error;
pub use follow::{FollowStatus, FollowedCommit};
pub use gitcli::{ProgressObserver, TransferProgress, stop_all as stop_git};
pub use history::{CommitSummary, CursorError, LogCursor, LogPage, PageLimits};
pub use names::{CommitId, RepoName, RepoPath};
pub use retention::WalkStats;
pub use store::register::{Awaited, SourceError, WaitProgress};
pub use text::Text;
pub use treediff::{FileDelta, MAX_INDEX_BRANCHES, check_index_branches, index_branch_matches};
pub use walk::{CommitChanges, DiffLine, HistoryCommit, LineSide};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use store::Leased;

/// A test hook run just before `git gc` (see [`GitStore::set_gc_hook`]).
#[doc(hidden)]
pub type GcHook = Arc<dyn Fn(&RepoName) + Send + Sync>;

/// A test hook run inside a registry change (see [`GitStore::set_registry_hook`]).
#[doc(hidden)]
pub type RegistryHook = Arc<dyn Fn() + Send + Sync>;

/// A test hook run just before each fetch from a source (see [`GitStore::set_fetch_hook`]).
#[doc(hidden)]
pub type FetchHook = Arc<dyn Fn(&RepoName, SourceFetch) + Send + Sync>;

/// Why a fetch from the source runs (see [`GitStore::set_fetch_hook`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFetch {
    /// A sync that decides the heads: with SQLite every sync, in cluster mode the holder of
    /// the repository's sync lease.
    Sync,
    /// Cluster mode: catching this replica's mirror up with heads another replica's sync
    /// recorded. Decides and records nothing.
    Follow,
}

/// How long a cluster-wide sync lease outlives its holder's last renewal (cluster mode; see
/// [`GitStore::set_sync_lease`]). The holder renews it every third of this while it syncs,
/// so it bounds how long a replica killed mid-sync keeps the others from syncing that
/// repository: about as long as the membership takes to call a silent replica dead (10 s),
/// with two renewals' slack for a slow database.
pub const DEFAULT_SYNC_LEASE: Duration = Duration::from_secs(15);

/// Default retention window for former heads (G-5).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// How the store is set up.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The storage root: mirrors, lock files, lease records and (unless
    /// [`Metadata::Postgres`]) the SQLite metadata live below it.
    pub data_dir: PathBuf,
    /// How long a former head stays readable after the last sync that saw it (G-5).
    pub retention: Duration,
}

/// Where the registry metadata (registrations, sync state, heads seen by syncs, pins) lives.
/// Chosen when the store opens ([`GitStore::open_with`]).
#[derive(Debug, Clone, Default)]
pub enum Metadata {
    /// `<data>/csg.sqlite`, shared by the processes of one data directory: the default.
    #[default]
    Sqlite,
    /// The tables `repos`, `seen_heads`, `pins`, `meta`, `branch_heads` (the heads the last
    /// sync recorded, which every replica resolves branch names to) and `sync_leases` (one
    /// replica syncs a repository at a time, see [`GitStore::sync`]) in a PostgreSQL
    /// database shared by replicas (cluster mode), migrated on open (component `registry`).
    /// Each replica keeps its mirrors, lock files and lease records in its own data
    /// directory, and catches its mirror up with recorded heads on background threads of
    /// the store (see [`GitStore::resolve`]). Another
    /// replica's registration, removal, sync or pin is seen on the first call after its
    /// notification arrives; while the database is unreachable, reads answer from the last
    /// known metadata and every metadata write fails at once (see
    /// [`Error::is_metadata_unreachable`]), until it is back (no reopening needed).
    Postgres(metadb::Database),
}

/// What a caller asks to register (G-1, G-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `owner/name`.
    pub name: RepoName,
    /// A remote URL (https, ssh, file://) or a local path (made absolute by the caller).
    pub source: String,
    /// The registered path (monorepo scope); [`RepoPath::root`] for the whole repository.
    pub registered_path: RepoPath,
    /// The default branch; `None` takes the source's `HEAD`.
    pub branch: Option<String>,
    /// Private (readable only by users granted it, A-2) or public. `None`: public for a new
    /// registration, and whatever it is for an existing one (so `serve --repo` does not undo
    /// `csg repo visibility`).
    pub private: Option<bool>,
}

/// A registered repository and its sync state, as `discovery` shows it (S-5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    pub name: RepoName,
    pub source: String,
    pub registered_path: RepoPath,
    /// The default branch (configured, or the source's `HEAD` at the last sync).
    pub default_branch: Option<String>,
    /// Full SHA of the default branch head at the last good sync.
    pub head: Option<CommitId>,
    /// When the last sync attempt finished, successful or not.
    pub last_sync: Option<SystemTime>,
    /// When the last *successful* sync finished.
    pub last_good_sync: Option<SystemTime>,
    /// The error of the last sync attempt, if it failed (G-3). Never a host path.
    pub last_error: Option<String>,
    /// Readable only by users granted it.
    pub private: bool,
    /// The index-branch patterns (S-8: branch names or globs like `release/*`, at most
    /// [`MAX_INDEX_BRANCHES`]); empty: the default branch only.
    pub index_branches: Vec<String>,
}

/// The result of one successful sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    /// Head of the default branch after the fetch.
    pub head: Option<CommitId>,
    /// Branch heads that changed (`branch`, new SHA).
    pub changed: Vec<(String, CommitId)>,
}

/// One entry of a tree listing (S-7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Repository-relative path.
    pub path: String,
    pub kind: EntryKind,
    /// Blob size in bytes, for files.
    pub size: Option<u64>,
}

/// A file found by [`GitStore::find_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// Repository-relative path (lossy when [`FoundFile::path_utf8`] is false).
    pub path: String,
    /// Whether the path's bytes are valid UTF-8, so `path` names the entry exactly.
    pub path_utf8: bool,
    pub kind: EntryKind,
    /// Blob size in bytes (0 for symlinks and submodules).
    pub size: u64,
    /// The object id (hex): a content digest for blobs.
    pub id: String,
}

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Executable,
    Directory,
    Symlink,
    Submodule,
}

/// What retention sweeping did (G-5, G-8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Former heads dropped from retention.
    pub expired: Vec<(RepoName, CommitId)>,
    /// Former heads past the window that were kept because a lease held them.
    pub kept_by_lease: Vec<(RepoName, CommitId)>,
}

/// Reads blobs of one commit by object id: the search indexer's bulk path, cheaper than
/// path lookups from the root tree. The ids must come from [`GitStore::find_files`] of that
/// commit; this is never exposed to callers or plugins (W-24 forbids object-id access), and the
/// caller keeps a [`Lease`] on the commit while it reads. Safe to share between threads.
pub struct BlobReader {
    repo: Arc<gix::ThreadSafeRepository>,
}

impl BlobReader {
    /// The bytes of blob `id` (40 hex digits).
    pub fn read(&self, id: &str) -> Result<Vec<u8>, Error> {
        let oid =
            gix::ObjectId::from_hex(id.as_bytes()).map_err(db::storage("parsing an object id"))?;
        handles::with_repo(&self.repo, |repo| {
            let object = repo
                .find_object(oid)
                .map_err(db::storage("reading the object database"))?;
            Ok(object.detach().data)
        })
    }
}

/// What [`GitStore::release_local`] did with this replica's mirror of a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The mirror moved into the trash; reads here answer [`Error::NotSynced`].
    Dropped,
    /// This replica held no mirror of it: nothing to drop.
    NotHeld,
    /// Kept for now: a reader leases it, or a sync, follow, pin or sweep works on it. Try
    /// again later.
    InUse,
}

/// A snapshot lease on (repo, commit): while it lives, sweeping cannot remove the commit (G-8).
/// Dropping it releases the lease. Reads through the lease ([`Lease::read_text`]) use the
/// registration and view the lease was taken under, so a call looks at the registry once.
pub struct Lease {
    store: Arc<store::Inner>,
    leased: store::Leased,
    repo: RepoName,
    commit: CommitId,
}

impl Lease {
    /// The leased repository.
    pub fn repo(&self) -> &RepoName {
        &self.repo
    }

    /// The leased commit.
    pub fn commit(&self) -> &CommitId {
        &self.commit
    }

    /// [`GitStore::read_text`] of the leased commit.
    pub fn read_text(&self, path: &RepoPath) -> Result<Arc<Text>, Error> {
        let Leased { state, view, key } = &self.leased;
        let text = self.store.text_in(state, view, key.1, path, None)?;
        text.ok_or_else(|| db::storage("reading a text")("a read without allowance stopped"))
    }

    /// [`Lease::read_text`] that inflates at most `allowance` bytes of blobs not in the blob
    /// cache, deducting what it inflates: `Ok(None)` when this file's blob is not cached and
    /// bigger than what is left. A caller on an async thread reads cheap files in place this
    /// way and moves the rest to a blocking thread.
    pub fn read_text_within(
        &self,
        path: &RepoPath,
        allowance: &mut u64,
    ) -> Result<Option<Arc<Text>>, Error> {
        let Leased { state, view, key } = &self.leased;
        self.store
            .text_in(state, view, key.1, path, Some(allowance))
    }

    /// The text read of every text tool (issue 42 point 5): `path` from `memo` (the texts
    /// this call read already), the blob cache, or the decode another call runs now (one
    /// decode shared), else decoded here; a blob over the text cap
    /// ([`GitStore::set_max_text_bytes`]) is refused from its object header before it is
    /// inflated ([`Error::TextTooLarge`]). With `allowance`, as [`Lease::read_text_within`]:
    /// a blob that would be inflated here beyond it is [`TextRead::Deferred`].
    pub fn read_text_shared(
        &self,
        path: &RepoPath,
        allowance: Option<&mut u64>,
        memo: &mut TextMemo,
    ) -> Result<TextRead, Error> {
        let Leased { state, view, key } = &self.leased;
        self.store
            .text_read(state, view, key.1, path, allowance, Some(memo))
    }

    /// The bytes of the file at `path`, to be served whole (the website's raw view): one
    /// copy shared by every call serving the same blob at once, and by the blob cache's text
    /// of it. A blob over `max` bytes is refused from its header ([`Error::TooLarge`]).
    pub fn read_shared(&self, path: &RepoPath, max: u64) -> Result<SharedBlob, Error> {
        let Leased { state, view, key } = &self.leased;
        self.store.blob_in(state, view, key.1, path, max)
    }

    /// The registered path (scope) of the registration the lease was taken under.
    pub fn registered_path(&self) -> &RepoPath {
        self.leased.state.registered_path()
    }

    /// [`GitStore::read_bytes`] of the leased commit; with `max`, a blob over `max` bytes is
    /// refused from its header ([`Error::TooLarge`]) before it is inflated.
    pub fn read_bytes(&self, path: &RepoPath, max: Option<u64>) -> Result<Vec<u8>, Error> {
        let Leased { state, view, key } = &self.leased;
        self.store.bytes_in(state, view, key.1, path, max)
    }

    /// [`GitStore::find_files`] of the leased commit.
    pub fn find_files(&self, suffix: &str) -> Result<Vec<FoundFile>, Error> {
        let Leased { state, view, key } = &self.leased;
        self.store.files_in(state, view, key.1, suffix)
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("repo", &self.repo)
            .field("commit", &self.commit)
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.store.release(&self.leased.key);
    }
}

/// The metadata database's file name in the data directory. Other stores of the data
/// directory (`access`) keep their tables in it too.
pub const METADATA_FILE: &str = "csg.sqlite";

/// The store of registered repositories. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct GitStore {
    inner: Arc<store::Inner>,
}

impl GitStore {
    /// Opens (creating if needed) the store under `config.data_dir`, its metadata in
    /// `<data>/csg.sqlite` ([`Metadata::Sqlite`]).
    pub fn open(config: StoreConfig, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        Self::open_with(config, clock, Metadata::Sqlite)
    }

    /// Opens (creating if needed) the store under `config.data_dir` with its registry
    /// metadata where `metadata` says. The data directory holds the mirrors, the lock files
    /// and the lease records either way; only the metadata rows (registrations, sync state,
    /// seen heads, pins) move to PostgreSQL with [`Metadata::Postgres`].
    pub fn open_with(
        config: StoreConfig,
        clock: Arc<dyn Clock>,
        metadata: Metadata,
    ) -> Result<Self, Error> {
        let inner = Arc::new(store::Inner::open(config, clock, metadata)?);
        inner.start();
        Ok(Self { inner })
    }

    /// The storage root this store lives in (part of every cache key above this crate).
    pub fn storage_root(&self) -> &std::path::Path {
        self.inner.storage_root()
    }

    /// Where the registry metadata lives: the other metadata stores of this process (users,
    /// tokens, grants) open on the same one.
    pub fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }

    /// The SQLite metadata database (`<data>/csg.sqlite`); with [`Metadata::Postgres`] the
    /// registry is not there.
    pub fn metadata_path(&self) -> std::path::PathBuf {
        self.inner.storage_root().join(METADATA_FILE)
    }

    /// Every tracked branch head as of the last good sync, sorted by branch name (W-31
    /// prepares plugins for them).
    pub fn branch_heads(&self, name: &RepoName) -> Result<Vec<(String, CommitId)>, Error> {
        self.inner.branch_heads(name)
    }

    /// Registers a repository. Registering the same name again with the same source and
    /// registered path is a no-op that returns the existing registration (so `serve --repo .`
    /// can run twice); a different source or path under a taken name is
    /// [`Error::NameTaken`]. Does not fetch: call [`GitStore::sync`].
    pub fn register(&self, registration: Registration) -> Result<RepoInfo, Error> {
        self.inner.register(registration)
    }

    /// Removes a registration and its metadata, and moves its mirror to the trash (after any
    /// sync or gc of it in any process has finished). Every process sharing the data
    /// directory answers [`Error::UnknownRepo`] for it from its next call; a later
    /// [`GitStore::sweep`] deletes the trashed mirror once no live process holds a lease
    /// record on it.
    pub fn unregister(&self, name: &RepoName) -> Result<(), Error> {
        self.inner.unregister(name)
    }

    /// All registrations, sorted by name.
    pub fn repos(&self) -> Result<Vec<RepoInfo>, Error> {
        self.inner.repos()
    }

    /// One registration.
    pub fn repo(&self, name: &RepoName) -> Result<RepoInfo, Error> {
        self.inner.repo(name)
    }

    /// Whether `name` is private: in memory, kept current with changes of any process.
    pub fn is_private(&self, name: &RepoName) -> Result<bool, Error> {
        self.inner.is_private(name)
    }

    /// Makes `name` private or public; every process sees it from its next call.
    pub fn set_private(&self, name: &RepoName, private: bool) -> Result<(), Error> {
        self.inner.set_private(name, private)
    }

    /// The registered path (scope) of `name` now: in memory, kept current with registry
    /// changes of any process (cheaper than [`GitStore::repo`], which reads the metadata).
    pub fn registered_path(&self, name: &RepoName) -> Result<RepoPath, Error> {
        self.inner.registered_path(name)
    }

    /// Checks that `registration`'s source can be fetched before anything is recorded: a
    /// `git ls-remote` of it (its own process group, at most a minute) that must list its
    /// `HEAD` (and its configured branch, which must exist); a local path must exist and be a
    /// Git repository. Records and fetches nothing. What an admin command asks in cluster
    /// mode before [`GitStore::register`], since the clone happens later on the owner
    /// replicas, where a typo would only show up as a recorded sync failure. The error shows
    /// the source with any password of its URL replaced by `***`, and no host path.
    pub fn check_source(&self, registration: &Registration) -> Result<(), SourceError> {
        store::register::check_source(registration)
    }

    /// Cluster mode: waits at most `timeout` until a sync recorded the heads of `name` (its
    /// last good sync: what the owner replicas do in their next catch-up round after a
    /// registration, the first of them fetching, the other following), and answers the
    /// recorded default-branch head; [`Awaited::NotYet`] when none did in time (the
    /// registration stays). `observer` hears every ten seconds that the wait goes on, and at
    /// once when the owners' last attempt failed with a new error.
    /// Fetches nothing itself: an admin command's data directory gets no mirror. Answers at
    /// once for a repository synced before. [`Error::UnknownRepo`] when `name` is not
    /// registered, or is removed meanwhile. Blocks the calling thread.
    pub fn wait_recorded(
        &self,
        name: &RepoName,
        timeout: Duration,
        observer: &mut dyn FnMut(&WaitProgress),
    ) -> Result<Awaited, Error> {
        self.inner.wait_recorded(name, timeout, observer)
    }

    /// Fetches the source into the mirror (clone on first use), records every branch head seen
    /// now (for retention) and the sync state. A failure is recorded in the metadata
    /// (`last_error`) and returned; the mirror keeps its last good state (G-3).
    ///
    /// In cluster mode ([`Metadata::Postgres`]) the sync first takes the repository's
    /// cluster-wide sync lease, renewed while it runs: only its holder fetches from the
    /// source and records the heads (branch → full SHA), which every replica then resolves
    /// branch names to. When another replica holds it, this one fetches nothing from the
    /// source on its own account: it catches its mirror up with the heads recorded so far
    /// (fetching only if it lacks them) and answers those; a failure then is not recorded
    /// (it is this replica's own), and [`Error::NotSynced`] means nothing was recorded yet.
    pub fn sync(&self, name: &RepoName) -> Result<SyncOutcome, Error> {
        self.inner.sync(name, None)
    }

    /// [`GitStore::sync`] that reports the transfer's progress to `observer` as it goes, on
    /// this thread (O-5: a bar on a terminal, periodic lines in a log).
    pub fn sync_with_progress(
        &self,
        name: &RepoName,
        observer: ProgressObserver<'_>,
    ) -> Result<SyncOutcome, Error> {
        self.inner.sync(name, Some(observer))
    }

    /// Resolves `revision` (full SHA, branch, tag, unique short SHA of ≥ 7 hex; `None` = head
    /// of the default branch) to a full commit SHA that is readable now (G-4, G-5).
    ///
    /// In cluster mode a branch resolves to the head the last sync recorded, whichever
    /// replica ran it, never to this mirror's own ref. While this replica's mirror lacks that
    /// commit the answer is [`Error::NotSynced`] (so is a read of a commit the cluster
    /// retains that it lacks), and a fetch is queued on the store's own background workers;
    /// no `git` runs on the calling thread. The caller may try another replica meanwhile.
    pub fn resolve(&self, name: &RepoName, revision: Option<&str>) -> Result<CommitId, Error> {
        self.inner.resolve(name, revision)
    }

    /// Whether this replica holds a copy of `name` that answers reads, at once or after
    /// [`GitStore::wait_followed`]: it has synced or followed it, and a branch whose
    /// recorded head it lacks is being followed (a follow that failed moments ago makes it
    /// `false` until the follow is tried again). What a replica asks before it answers a
    /// call for `name` rather than sending it to another owner: unlike a lease of the
    /// default branch, it stays true while a new head another replica recorded is being
    /// fetched. [`Error::UnknownRepo`] when `name` is not registered.
    pub fn holds_copy(&self, name: &RepoName) -> Result<bool, Error> {
        self.inner.holds_copy(name)
    }

    /// Cluster mode: after [`GitStore::lease_revision`] (or a read) answered
    /// [`Error::NotSynced`] because this mirror lacks a head the cluster recorded, waits at
    /// most `timeout` for the store's follow to fetch it, asking for one now if none is
    /// queued; true when a follow that began after this call has finished (or the view lags
    /// no more), so trying once more may answer. False at once when waiting cannot help: not
    /// cluster mode, a repository this replica holds no copy of (its next sync fetches it),
    /// or a follow that failed moments ago. Blocks the calling thread: call it on a blocking
    /// thread, never an async one. Waits on a notification, never on a lock a sync, pin or
    /// sweep holds.
    pub fn wait_followed(&self, name: &RepoName, timeout: Duration) -> bool {
        self.inner.wait_followed(name, timeout)
    }

    /// Takes a snapshot lease after re-checking that `commit` is retained (G-8).
    pub fn lease(&self, name: &RepoName, commit: &CommitId) -> Result<Lease, Error> {
        Ok(Lease {
            store: self.inner.clone(),
            leased: self.inner.lease(name, commit)?,
            repo: name.clone(),
            commit: commit.clone(),
        })
    }

    /// [`GitStore::resolve`] and [`GitStore::lease`] in one, on a single look at the registry
    /// (what every read does first). Errors as for those two.
    pub fn lease_revision(&self, name: &RepoName, revision: Option<&str>) -> Result<Lease, Error> {
        let leased = self.inner.lease_revision(name, revision)?;
        Ok(Lease {
            store: self.inner.clone(),
            commit: objects::to_commit_id(&leased.key.1)?,
            leased,
            repo: name.clone(),
        })
    }

    /// Reads a file at `commit` as UTF-8 text. Every non-text case is a typed error:
    /// [`Error::NotFound`], [`Error::IsDirectory`], [`Error::Symlink`], [`Error::Submodule`],
    /// [`Error::LfsPointer`], [`Error::Binary`], [`Error::NotUtf8`],
    /// [`Error::OutsideScope`].
    pub fn read_text(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
    ) -> Result<Arc<Text>, Error> {
        self.inner.read_text(name, commit, path)
    }

    /// Bounds the cache of decoded blob texts that [`GitStore::read_text`] keeps (default
    /// [`DEFAULT_BLOB_CACHE_BYTES`]; 0 turns it off). Continuation reads of one big file then
    /// find and inflate it once.
    pub fn set_blob_cache_bytes(&self, bytes: usize) {
        self.inner.blobs.set_capacity(bytes);
    }

    /// (entries, bytes) the blob cache holds now: texts and their line tables.
    pub fn blob_cache_usage(&self) -> (usize, usize) {
        self.inner.blobs.usage()
    }

    /// Sets the text cap (default [`DEFAULT_MAX_TEXT_BYTES`]; at most [`Text::MAX_BYTES`]):
    /// the text tools refuse a larger blob from its object header, before inflating it
    /// ([`Error::TextTooLarge`]), and diffs do not diff one.
    pub fn set_max_text_bytes(&self, bytes: u64) {
        self.inner.blobs.set_max_text(bytes);
    }

    /// The text cap in bytes.
    pub fn max_text_bytes(&self) -> u64 {
        self.inner.blobs.max_text()
    }

    /// Blobs inflated so far by text and raw reads (cache hits and decodes shared with
    /// another call not counted).
    pub fn blob_decodes(&self) -> u64 {
        self.inner.blobs.decodes()
    }

    /// Reads a file's raw bytes at `commit` (no text classification; plugin artifacts and
    /// plugin host reads). Directory, symlink, submodule, missing and out-of-scope paths are
    /// errors as for [`GitStore::read_text`].
    pub fn read_bytes(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
    ) -> Result<Vec<u8>, Error> {
        self.inner.read_bytes(name, commit, path, None)
    }

    /// [`GitStore::read_bytes`] refusing a blob over `max` bytes from its header, before it
    /// is inflated ([`Error::TooLarge`]): plugin host reads under FILE_BYTES (W-22).
    pub fn read_bytes_within(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        max: u64,
    ) -> Result<Vec<u8>, Error> {
        self.inner.read_bytes(name, commit, path, Some(max))
    }

    /// A [`BlobReader`] for `commit` (which must be readable now).
    pub fn blob_reader(&self, name: &RepoName, commit: &CommitId) -> Result<BlobReader, Error> {
        self.inner.blob_reader(name, commit)
    }

    /// Every entry inside the registered scope whose file name ends with `suffix`, sorted by
    /// path, with its kind, size and object id (discovery of `*.sourcegraph.wasm`, W-2).
    pub fn find_files(
        &self,
        name: &RepoName,
        commit: &CommitId,
        suffix: &str,
    ) -> Result<Vec<FoundFile>, Error> {
        self.inner.find_files(name, commit, suffix)
    }

    /// Lists the tree at `path` (`RepoPath::root()` = the registered scope's top) down to
    /// `depth` levels (1 = direct children), sorted by path, only inside the registered scope.
    pub fn list_tree(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        depth: u32,
    ) -> Result<Vec<TreeEntry>, Error> {
        Ok(self
            .inner
            .list_tree(name, commit, path, depth, usize::MAX)?
            .0)
    }

    /// [`GitStore::list_tree`] that stops collecting at `limit` entries, level by level (all
    /// of one depth before the next), and says whether entries were left out: a `list` of a
    /// huge tree costs what it returns, not the whole subtree.
    pub fn list_tree_limited(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        depth: u32,
        limit: usize,
    ) -> Result<(Vec<TreeEntry>, bool), Error> {
        self.inner.list_tree(name, commit, path, depth, limit)
    }

    /// The log from `commit` (which must be readable now): commits newest first by
    /// committer date, as `git log` lists them, skipping `skip` and answering at most `limit`,
    /// with whether more follow. `path` limits it to the commits that changed that path
    /// (git's default history simplification); the root means the registered scope, so a
    /// monorepo registration lists only the commits that changed its directory (G-2).
    pub fn log(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        skip: usize,
        limit: usize,
    ) -> Result<(Vec<CommitSummary>, bool), Error> {
        self.inner.log(name, commit, path, skip, limit)
    }

    /// `commit` (which must be readable now) with its whole message and the files it changed
    /// against its first parent, with added and removed lines (`None` for binary files), as
    /// `git diff --numstat --no-renames --minimal` counts them; only changes inside the
    /// registered scope (G-2); line counts for the first `max_files` changed files in path
    /// order.
    pub fn commit_details(
        &self,
        name: &RepoName,
        commit: &CommitId,
        max_files: usize,
    ) -> Result<CommitDetails, Error> {
        self.inner.commit_details(name, commit, max_files)
    }

    /// The unified diff between two readable commits (`git diff --no-renames --full-index
    /// BASE HEAD`, hunk headers without function context) within `path` (the root: the
    /// registered scope), file by file from file `skip` while the texts fit `budget` bytes.
    pub fn diff(
        &self,
        name: &RepoName,
        base: &CommitId,
        head: &CommitId,
        path: &RepoPath,
        skip: usize,
        budget: usize,
    ) -> Result<DiffPage, Error> {
        self.inner.diff(
            name,
            base,
            head,
            path,
            skip,
            budget,
            &budget::Budget::unlimited(),
        )
    }

    /// [`GitStore::diff`] under a call's budget, as [`GitStore::commit_diff_within`].
    #[allow(clippy::too_many_arguments)]
    pub fn diff_within(
        &self,
        name: &RepoName,
        base: &CommitId,
        head: &CommitId,
        path: &RepoPath,
        skip: usize,
        budget: usize,
        call: &budget::Budget,
    ) -> Result<DiffPage, Error> {
        self.inner.diff(name, base, head, path, skip, budget, call)
    }

    /// `git blame` of lines `start_line..=end_line` (1-based; `end_line` is clamped to the
    /// file) of the text file `path` at `commit`: consecutive lines last changed by one
    /// commit come as one range; answers the ranges and the file's line count. The path must
    /// be inside the registered scope and a text file, as for [`GitStore::read_text`].
    pub fn blame(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        start_line: u64,
        end_line: u64,
    ) -> Result<(Vec<BlameRange>, u64), Error> {
        self.inner.blame(name, commit, path, start_line, end_line)
    }

    /// Pins a commit so it stays readable regardless of retention (G-5).
    pub fn pin(&self, name: &RepoName, commit: &CommitId) -> Result<(), Error> {
        self.inner.pin(name, commit)
    }

    /// Removes a pin.
    pub fn unpin(&self, name: &RepoName, commit: &CommitId) -> Result<(), Error> {
        self.inner.unpin(name, commit)
    }

    /// Drops former heads that left retention (not leased by any process sharing the data
    /// directory, not pinned) and prunes objects no longer reachable from anything retained
    /// (G-5, G-8). Also drops this store's idle lease records (leases whose count fell to
    /// zero) and empties the trash of removed mirrors no live process holds a lease on.
    pub fn sweep(&self) -> Result<SweepReport, Error> {
        self.inner.sweep()
    }

    /// Cluster mode: drops this replica's own copy of `name`, a repository it no longer
    /// owns, without touching the shared registry (the registration, recorded heads, seen
    /// heads and pins stay for the replicas that own it). The mirror moves into the trash
    /// (a later [`GitStore::sweep`] deletes it) and reads of the repository here answer
    /// [`Error::NotSynced`] from then on, until a [`GitStore::sync`] fetches it again.
    ///
    /// Never under a reader: a repository a lease of this process holds (or a lease record
    /// of another live process of this data directory), or that a sync, follow, pin or sweep
    /// works on now, is kept and answered [`Released::InUse`]: try again later. A lease
    /// taken once the mirror is released answers [`Error::NotSynced`], never a broken read.
    ///
    /// Refused ([`Error::Storage`]) with [`Metadata::Sqlite`]: there the mirror is the only
    /// copy. [`Error::UnknownRepo`] when `name` is not registered.
    pub fn release_local(&self, name: &RepoName) -> Result<Released, Error> {
        self.inner.release_local(name)
    }

    /// How long a cluster-wide sync lease outlives its holder's last renewal (default
    /// [`DEFAULT_SYNC_LEASE`], at least a second): a replica killed while syncing a
    /// repository keeps the others from syncing it (they follow its last recorded heads) at
    /// most this long. Only cluster mode takes leases.
    pub fn set_sync_lease(&self, lease: Duration) {
        self.inner.set_sync_lease(lease);
    }

    /// Test support: `hook` runs on the syncing (or following) thread just before each fetch
    /// from a source, with the repository's locks (and in cluster mode its sync lease, for
    /// [`SourceFetch::Sync`]) held, so a test can count fetches or hold one. Not for
    /// production use.
    #[doc(hidden)]
    pub fn set_fetch_hook(&self, hook: Option<FetchHook>) {
        self.inner.set_fetch_hook(hook);
    }

    /// Test support: `hook` runs on the sweeping thread with every lock of a garbage
    /// collection held, just before `git gc` starts, so a test can prove what does and does
    /// not wait for it. Not for production use.
    #[doc(hidden)]
    pub fn set_gc_hook(&self, hook: Option<GcHook>) {
        self.inner.set_gc_hook(hook);
    }

    /// Test support: `hook` runs on the thread of every registry change (`register`,
    /// `unregister`) with the change's locks held, after its metadata write and before its
    /// snapshot is published, so a test can park a registry change there and prove that no
    /// read waits for it. Not for production use.
    #[doc(hidden)]
    pub fn set_registry_hook(&self, hook: Option<RegistryHook>) {
        self.inner.set_registry_hook(hook);
    }
}
