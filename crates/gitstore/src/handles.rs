//! Per-thread gix repository handles with warm object caches.
//!
//! `ThreadSafeRepository::to_thread_local` builds a fresh handle with empty caches: done per
//! read, every root tree, every directory on the path and every delta base of a packed blob
//! is found and inflated again. A thread here keeps the handles it made (a few, most recently
//! used first) and hands the same one to the next read of that mirror, so trees and delta
//! bases stay decoded between calls.
//!
//! A handle is keyed by the `Arc` of the shared repository it came from: a view reloaded after
//! a sync has a new `Arc`, so its readers get a new handle that sees the new packs, and a handle
//! whose `Arc` was dropped (the view was replaced) is discarded on the next lookup.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Handles one thread keeps (mirrors it read from recently).
const HANDLES_PER_THREAD: usize = 4;
/// Decoded delta bases one handle keeps (`gix_pack::cache::lru::MemoryCappedHashmap`).
const PACK_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Decoded objects (trees above all; blob texts have their own cache) one handle keeps.
const OBJECT_CACHE_BYTES: usize = 4 * 1024 * 1024;

type Entry = (Weak<gix::ThreadSafeRepository>, gix::Repository);

thread_local! {
    static HANDLES: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` with this thread's handle of `shared` (made and cached on first use).
///
/// The handle is taken out of the thread's list while `work` runs, so a nested call for the
/// same repository gets a second handle instead of a double borrow.
pub(crate) fn with_repo<T>(
    shared: &Arc<gix::ThreadSafeRepository>,
    work: impl FnOnce(&gix::Repository) -> T,
) -> T {
    let taken = HANDLES.with_borrow_mut(|handles| {
        handles.retain(|(owner, _)| owner.strong_count() > 0);
        let at = handles
            .iter()
            .position(|(owner, _)| std::ptr::eq(owner.as_ptr(), Arc::as_ptr(shared)))?;
        Some(handles.remove(at))
    });
    let (owner, repo) = taken.unwrap_or_else(|| (Arc::downgrade(shared), new_handle(shared)));
    let answer = work(&repo);
    HANDLES.with_borrow_mut(|handles| {
        handles.insert(0, (owner, repo));
        handles.truncate(HANDLES_PER_THREAD);
    });
    answer
}

fn new_handle(shared: &gix::ThreadSafeRepository) -> gix::Repository {
    let mut repo = shared.to_thread_local();
    repo.objects.set_pack_cache(|| {
        Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
            PACK_CACHE_BYTES,
        ))
    });
    repo.object_cache_size(OBJECT_CACHE_BYTES);
    repo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(dir: &std::path::Path) -> Arc<gix::ThreadSafeRepository> {
        let status = std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(dir)
            .status()
            .expect("git init");
        assert!(status.success());
        Arc::new(
            gix::ThreadSafeRepository::open_opts(dir, gix::open::Options::isolated())
                .expect("open"),
        )
    }

    fn cached() -> Vec<*const gix::ThreadSafeRepository> {
        HANDLES.with_borrow(|h| h.iter().map(|(w, _)| w.as_ptr()).collect())
    }

    #[test]
    fn handles_are_reused_per_repository_and_dropped_with_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (shared(&tmp.path().join("a")), shared(&tmp.path().join("b")));
        with_repo(&a, |_| ());
        with_repo(&b, |_| ());
        assert_eq!(cached(), vec![Arc::as_ptr(&b), Arc::as_ptr(&a)]);
        // The same repository again: the cached handle, moved to the front.
        with_repo(&a, |r| {
            assert!(
                r.objects.has_object_cache(),
                "the handle keeps an object cache"
            );
        });
        assert_eq!(cached(), vec![Arc::as_ptr(&a), Arc::as_ptr(&b)]);
        // Nested use of one repository gets a second handle, not a double borrow.
        with_repo(&a, |outer| {
            with_repo(&a, |inner| assert!(!std::ptr::eq(outer, inner)));
        });
        drop(a);
        with_repo(&b, |_| ());
        assert_eq!(
            cached(),
            vec![Arc::as_ptr(&b)],
            "a dropped view's handle goes"
        );
    }
}
