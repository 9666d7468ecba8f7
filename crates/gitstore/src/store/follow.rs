//! Cluster mode: bringing this replica's mirror up to the branch heads another replica's sync
//! recorded (issue 31, behaviour 4).
//!
//! In cluster mode a branch name resolves to the head recorded in the shared metadata by the
//! sync that fetched it, never to this mirror's own ref, so every replica answers the same
//! SHA. A replica that learns of a recorded head its mirror lacks cannot answer it, and the
//! read path runs no `git` (an Architecture Invariant): the read answers
//! [`Error::NotSynced`](crate::Error::NotSynced) at once (the service's 503, after which a
//! forwarding layer asks another owner) and asks this queue for a *follow*: a `git fetch` of
//! the mirror under its usual locks, on a worker thread of the store, after which the next
//! read answers the recorded head. The request costs the read a map lookup; requests for a
//! repository already queued are one entry, and after a failed follow the repository is not
//! tried again for [`RETRY_AFTER`] (a source that is down is not hammered once per read).
//!
//! A follow never records anything: only the holder of a repository's sync lease decides
//! what its heads are (see `maintenance.rs`).

use super::Inner;
use crate::RepoName;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// After a failed follow, how long requests for the repository are ignored.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Worker threads per store: follows of different repositories overlap this much (those of
/// one repository take turns on its maintenance lock anyway).
const WORKERS: usize = 2;

/// The follow requests of one store, de-duplicated per repository.
#[derive(Default)]
pub(crate) struct Follows {
    state: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<RepoName>,
    queued: HashSet<RepoName>,
    failed: HashMap<RepoName, Instant>,
    /// Set when the store is dropped: the workers end.
    closed: bool,
}

impl Follows {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for a follow of `name`. Never blocks on anything but the queue's own lock, which
    /// is only held for a few map operations.
    pub(crate) fn request(&self, name: &RepoName) {
        let mut queue = self.lock();
        if queue.closed || queue.queued.contains(name) {
            return;
        }
        if let Some(at) = queue.failed.get(name) {
            if at.elapsed() < RETRY_AFTER {
                return;
            }
            queue.failed.remove(name);
        }
        queue.queued.insert(name.clone());
        queue.order.push_back(name.clone());
        drop(queue);
        self.wake.notify_one();
    }

    /// Ends the workers (the store is gone); requests are ignored from now on.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// The next repository to follow; `None` once closed. Taken off the queue when handed
    /// out, so a request made while its follow runs (a newer head recorded meanwhile) queues
    /// another one.
    fn next(&self) -> Option<RepoName> {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                return None;
            }
            if let Some(name) = queue.order.pop_front() {
                queue.queued.remove(&name);
                return Some(name);
            }
            queue = self
                .wake
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn failed(&self, name: &RepoName) {
        self.lock().failed.insert(name.clone(), Instant::now());
    }
}

/// Starts the follow workers of `store`. They hold it only while they follow, so dropping
/// the last [`crate::GitStore`] closes the queue and ends them.
pub(crate) fn start(store: &Arc<Inner>) {
    for i in 0..WORKERS {
        let follows = Arc::clone(&store.follows);
        let store = Arc::downgrade(store);
        let spawned = std::thread::Builder::new()
            .name(format!("gitstore-follow-{i}"))
            .spawn(move || work(&follows, &store));
        if let Err(e) = spawned {
            // Reads then answer "not synced" until this replica's own next sync.
            tracing::warn!(error = %e, "gitstore: could not start a follow worker");
        }
    }
}

fn work(follows: &Follows, store: &Weak<Inner>) {
    while let Some(name) = follows.next() {
        let Some(store) = store.upgrade() else {
            return;
        };
        match store.follow(&name) {
            Ok(_) => tracing::debug!(repo = %name, "gitstore: followed the recorded heads"),
            Err(e) => {
                tracing::warn!(repo = %name, error = %e, "gitstore: following the recorded heads failed");
                follows.failed(&name);
            }
        }
    }
}
