//! `changecounter`: a change counter shared by every process on one data directory, an
//! 8-byte file each process maps, which every metadata write bumps after its commit. The
//! repository registry (`gitstore`) and the access store (`access`) both keep an in-memory
//! view of SQLite tables fresh with it.
//!
//! Seeing other processes' changes used to cost a `PRAGMA data_version` per call, that is a
//! SQLite read transaction with its file locks (four `fcntl` calls) under the registry mutex:
//! several microseconds of every read, and a point where concurrent reads queue. One atomic
//! load of the shared counter says whether any write happened since the last look; only then
//! is `data_version` asked. A writer that died between its commit and its bump, or one that
//! does not know this file (the `sqlite3` shell), is still seen by the full check the store
//! makes at least once per [`FULL_CHECK_EVERY`].

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How stale a store's view of writers that do not bump the counter may get.
pub const FULL_CHECK_EVERY: Duration = Duration::from_secs(1);

/// The mapped counter, or nothing when the file cannot be mapped (then every call makes
/// the full check, as before the counter existed).
pub struct Changes {
    #[cfg(unix)]
    map: Option<unix::Mapping>,
}

impl Changes {
    /// Maps the counter file at `path`, creating it.
    pub fn open(path: &Path) -> Self {
        #[cfg(unix)]
        {
            let map = unix::Mapping::open(path)
                .inspect_err(|e| {
                    tracing::warn!(
                        path = %path.display(),
                        error = %e,
                        "no shared change counter; every call asks the metadata database"
                    )
                })
                .ok();
            Self { map }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            Self {}
        }
    }

    /// The counter now; `None` without a mapping.
    pub fn current(&self) -> Option<u64> {
        self.counter().map(|c| c.load(Ordering::SeqCst))
    }

    /// Tells every process that the metadata changed (after the commit).
    pub fn bump(&self) {
        if let Some(counter) = self.counter() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter(&self) -> Option<&AtomicU64> {
        #[cfg(unix)]
        {
            self.map.as_ref().map(unix::Mapping::counter)
        }
        #[cfg(not(unix))]
        {
            None
        }
    }
}

/// What a process last saw of a metadata database: the shared counter, SQLite's
/// `data_version` and when it last asked SQLite.
#[derive(Debug, Default)]
pub struct Seen {
    /// `PRAGMA data_version` at the last full check (`None`: never).
    version: Option<i64>,
    /// The shared change counter loaded just before it.
    changes: Option<u64>,
    checked: Option<Instant>,
}

impl Seen {
    /// Runs `reload` when the tables may have changed since the last look. `changes` is
    /// [`Changes::current`] loaded *before* `data_version` is asked: a write committing after
    /// that load bumps the counter after it, so the next call looks again. Without a counter,
    /// or [`FULL_CHECK_EVERY`] after the last full check, `data_version` decides (one small
    /// query); `reload` runs only when it moved. Hold the lock around `self` for the whole
    /// call, so two threads do not reload at once.
    pub fn refresh<E>(
        &mut self,
        changes: Option<u64>,
        data_version: impl FnOnce() -> Result<i64, E>,
        reload: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let now = Instant::now();
        if let (Some(changes), Some(checked)) = (changes, self.checked)
            && self.changes == Some(changes)
            && now.saturating_duration_since(checked) < FULL_CHECK_EVERY
        {
            return Ok(());
        }
        let version = data_version()?;
        if self.version != Some(version) {
            reload()?;
        }
        *self = Seen {
            version: Some(version),
            changes,
            checked: Some(now),
        };
        Ok(())
    }
}

#[cfg(unix)]
mod unix {
    use std::fs::OpenOptions;
    use std::os::fd::AsRawFd;
    use std::path::Path;
    use std::sync::atomic::AtomicU64;

    const LEN: usize = std::mem::size_of::<AtomicU64>();

    /// A shared, read-write mapping of the first 8 bytes of a file.
    pub(super) struct Mapping {
        ptr: std::ptr::NonNull<AtomicU64>,
    }

    // SAFETY: the mapping is only accessed through `&AtomicU64`, which is Sync; the pointer
    // stays valid until `drop` unmaps it.
    unsafe impl Send for Mapping {}
    unsafe impl Sync for Mapping {}

    impl Mapping {
        pub(super) fn open(path: &Path) -> std::io::Result<Self> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            // Growing from 0 (a new file) to 8 bytes reads as zeros; a file already that long
            // is left alone (set_len to the same length changes nothing).
            if file.metadata()?.len() < LEN as u64 {
                file.set_len(LEN as u64)?;
            }
            // SAFETY: a fresh shared mapping of 8 bytes of a file we opened read-write and
            // made at least that long; the kernel picks the (page-aligned) address. The fd
            // may be closed afterwards: the mapping keeps the file.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    LEN,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            let ptr = std::ptr::NonNull::new(ptr.cast::<AtomicU64>())
                .ok_or_else(|| std::io::Error::other("mmap returned a null address"))?;
            Ok(Self { ptr })
        }

        pub(super) fn counter(&self) -> &AtomicU64 {
            // SAFETY: page-aligned (so aligned for AtomicU64), 8 valid bytes, mapped until
            // drop; every process only touches it atomically.
            unsafe { self.ptr.as_ref() }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly the mapping `open` made; no reference outlives `self`.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), LEN);
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// 13 (cross-process view): two mappings of one counter file, as two processes would
    /// have, see each other's bumps at once; the count survives a remap.
    #[test]
    fn bumps_are_seen_through_every_mapping() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("csg.changes");
        let (a, b) = (Changes::open(&path), Changes::open(&path));
        assert_eq!((a.current(), b.current()), (Some(0), Some(0)));
        a.bump();
        b.bump();
        assert_eq!((a.current(), b.current()), (Some(2), Some(2)));
        drop((a, b));
        assert_eq!(Changes::open(&path).current(), Some(2));
    }

    /// `data_version` is asked only when the counter moved (or without a counter), and
    /// `reload` runs only when it moved.
    #[test]
    fn seen_asks_sqlite_only_when_the_counter_moved() {
        let mut seen = Seen::default();
        let (mut asked, mut reloaded) = (0, 0);
        let mut look = |seen: &mut Seen, changes: Option<u64>, version: i64| {
            seen.refresh::<()>(
                changes,
                || {
                    asked += 1;
                    Ok(version)
                },
                || {
                    reloaded += 1;
                    Ok(())
                },
            )
        };
        look(&mut seen, Some(1), 7).expect("first");
        look(&mut seen, Some(1), 7).expect("same counter");
        look(&mut seen, Some(2), 7).expect("counter moved, version did not");
        look(&mut seen, Some(3), 8).expect("both moved");
        look(&mut seen, None, 8).expect("no counter");
        assert_eq!((asked, reloaded), (4, 2));
    }

    #[test]
    fn an_unmappable_path_means_no_counter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let none = Changes::open(&dir.path().join("missing").join("csg.changes"));
        assert_eq!(none.current(), None);
        none.bump();
    }
}
