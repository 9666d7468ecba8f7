//! Coordination between the processes that share one data directory (every `csg mcp` of a
//! user, a `serve`, the `csg repo` commands): file locks per mirror, lease records that every
//! process's garbage collection honours, and the trash that removed mirrors wait in.
//!
//! Layout below the data directory:
//! - `locks/<owner>/<name>.mirror.lock`: held exclusively for everything that runs `git` on
//!   the mirror (fetch, ref updates, gc) and for unregistering it.
//! - `leases/<store-id>.lock`: flock'ed by one open store for its whole life. A record
//!   directory whose lock can be taken belongs to a dead process (the test survives pid
//!   reuse) and is removed by whoever notices.
//! - `leases/<store-id>/<incarnation>-<sha>`: an empty file per (registration, commit) this
//!   store has leased. Written on the store's first lease of that commit, kept while the
//!   in-memory count drops to zero and rises again, removed by the store's own sweep once the
//!   count is zero (never on a release: the read path stays in memory). No lock orders a
//!   lease and a sweep: a first lease writes its record, *then* re-reads the metadata and
//!   checks retention; a sweep commits its expiry, *then* lists the records. Either the
//!   sweep finds the record or the lease sees the expiry.
//! - `trash/<incarnation>-<owner>-<name>.git`: mirrors of removed registrations, deleted by
//!   a sweep once no live store has a lease record on that registration.

use crate::Error;
use crate::db::storage;
use gix::ObjectId;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A held flock; released when dropped (closing the descriptor releases it).
pub(crate) struct FileLock {
    _file: File,
}

fn open_lock_file(path: &Path) -> Result<File, Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(storage("creating the lock directory"))?;
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(storage("opening a lock file"))
}

/// Blocks until `path` is locked exclusively. A new descriptor each time: flock locks of two
/// descriptors conflict even inside one process, so two stores in one process (tests) are
/// kept apart exactly like two processes.
pub(crate) fn lock_exclusive(path: &Path) -> Result<FileLock, Error> {
    let file = open_lock_file(path)?;
    file.lock().map_err(storage("taking a mirror lock"))?;
    Ok(FileLock { _file: file })
}

/// Locks `path` exclusively if nobody holds it; `None` when another holder has it.
///
/// A lock can look held for a moment by nobody at all: a `git` child forked by another
/// thread holds a copy of every descriptor (our lock files' included) until its `exec`
/// closes them, and a sync that just finished may be in that window. So a refusal is only
/// believed after [`TRY_LOCK_ATTEMPTS`] tries [`TRY_LOCK_PAUSE`] apart; a real holder (a
/// fetch, a gc) holds it far longer.
pub(crate) fn try_lock_exclusive(path: &Path) -> Result<Option<FileLock>, Error> {
    let file = open_lock_file(path)?;
    for attempt in 1..=TRY_LOCK_ATTEMPTS {
        match file.try_lock() {
            Ok(()) => return Ok(Some(FileLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) if attempt < TRY_LOCK_ATTEMPTS => {
                std::thread::sleep(TRY_LOCK_PAUSE)
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(storage("taking a mirror lock")(e)),
        }
    }
    Ok(None)
}

/// See [`try_lock_exclusive`].
const TRY_LOCK_ATTEMPTS: u32 = 5;
const TRY_LOCK_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// This store's identity in `leases/`: its liveness lock and its record directory.
pub(crate) struct Owner {
    dir: PathBuf,
    /// Locked for the life of the store; never read.
    _liveness: File,
}

static OWNERS: AtomicU64 = AtomicU64::new(0);

fn record_name(incarnation: u64, id: &ObjectId) -> String {
    format!("{incarnation}-{id}")
}

impl Owner {
    /// Creates this store's liveness lock and record directory under `root` (`leases/`).
    pub(crate) fn create(root: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(root).map_err(storage("creating the lease directory"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let id = format!(
            "{}-{nanos:x}-{}",
            std::process::id(),
            OWNERS.fetch_add(1, Ordering::Relaxed)
        );
        // Locked under a temporary name, then renamed: a lock file under its final name is
        // always held while its owner lives, so nobody can mistake a starting store for a
        // dead one.
        let tmp = root.join(format!("{id}.lock.tmp"));
        let file = open_lock_file(&tmp)?;
        file.lock()
            .map_err(storage("taking the store liveness lock"))?;
        std::fs::rename(&tmp, root.join(format!("{id}.lock")))
            .map_err(storage("creating the store liveness lock"))?;
        let dir = root.join(&id);
        std::fs::create_dir_all(&dir).map_err(storage("creating the lease directory"))?;
        Ok(Self {
            dir,
            _liveness: file,
        })
    }

    /// Records a lease on (`incarnation`, `id`) for every process's sweep to see.
    pub(crate) fn record(&self, incarnation: u64, id: &ObjectId) -> Result<(), Error> {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(record_name(incarnation, id)))
            .map(drop)
            .map_err(storage("recording a lease"))
    }

    /// This store's record directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes a lease record (its in-memory count is zero).
    pub(crate) fn unrecord(&self, incarnation: u64, id: &ObjectId) {
        match std::fs::remove_file(self.dir.join(record_name(incarnation, id))) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "gitstore: removing a lease record"),
        }
    }
}

/// Every commit of registration `incarnation` that a live store holds a lease record on.
/// Record directories of dead stores are removed on the way.
pub(crate) fn live_leases(root: &Path, incarnation: u64) -> Result<HashSet<ObjectId>, Error> {
    let mut out = HashSet::new();
    for dir in live_owner_dirs(root)? {
        for hex in records_in(&dir, incarnation)? {
            if let Ok(id) = ObjectId::from_hex(hex.as_bytes()) {
                out.insert(id);
            }
        }
    }
    Ok(out)
}

/// Whether a live store other than the one recording into `own` holds a lease record on
/// registration `incarnation`. Such a store reads the mirror through a view of its own that
/// nothing here can take back, so its mirror is not released under it (see
/// `Inner::release_local`). Record directories of dead stores are removed on the way.
pub(crate) fn leased_elsewhere(root: &Path, incarnation: u64, own: &Path) -> Result<bool, Error> {
    for dir in live_owner_dirs(root)? {
        if dir != own && !records_in(&dir, incarnation)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The commits (hex, as named) of the lease records of `incarnation` in one store's record
/// directory; none when the directory is gone (its owner ended and cleaned up meanwhile).
fn records_in(dir: &Path, incarnation: u64) -> Result<Vec<String>, Error> {
    let prefix = format!("{incarnation}-");
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(storage("reading lease records")(e)),
    };
    let mut hexes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(storage("reading lease records"))?;
        if let Some(hex) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
        {
            hexes.push(hex.to_owned());
        }
    }
    Ok(hexes)
}

/// The record directories of live stores; those of dead stores are removed.
fn live_owner_dirs(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(storage("reading lease records")(e)),
    };
    let mut live = Vec::new();
    for entry in entries {
        let entry = entry.map_err(storage("reading lease records"))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let lock_path = root.join(format!("{}.lock", entry.file_name().to_string_lossy()));
        match File::open(&lock_path) {
            Ok(file) => match file.try_lock() {
                Ok(()) => {
                    // Dead: nobody holds its liveness lock. Records first, the lock last,
                    // so a directory never outlives its lock while the lock is free.
                    let _ = std::fs::remove_dir_all(&path);
                    let _ = std::fs::remove_file(&lock_path);
                    tracing::info!("gitstore: dropped the lease records of an ended process");
                }
                Err(std::fs::TryLockError::WouldBlock) => live.push(path),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(storage("checking a store liveness lock")(e));
                }
            },
            // A directory without its lock: left by a cleanup that was interrupted.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = std::fs::remove_dir_all(&path);
            }
            Err(e) => return Err(storage("checking a store liveness lock")(e)),
        }
    }
    Ok(live)
}

/// The incarnation a trash entry belongs to.
pub(crate) fn trash_incarnation(name: &str) -> Option<u64> {
    name.split_once('-')?.0.parse().ok()
}
