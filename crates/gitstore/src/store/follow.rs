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
//! A read on the blocking pool may instead wait a moment for the follow
//! ([`Follows::wait`]): a bounded wait on this queue's notification, never on a lock a
//! writer holds, after which it tries once more. Each follow handed to a worker gets an
//! ordinal; a waiter waits for one handed out after it asked, which fetches the heads
//! recorded by then, so a head a read saw recorded is fetched (or the follow failed) by the
//! time the wait ends.
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
    /// Wakes the workers: a request was queued, or the queue closed.
    wake: Condvar,
    /// Wakes the waiters: a follow finished, or the queue closed.
    finished: Condvar,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<RepoName>,
    queued: HashSet<RepoName>,
    failed: HashMap<RepoName, Instant>,
    /// Per repository: how many follows were handed to a worker (the last one's ordinal),
    /// and the highest ordinal that finished (well or not).
    rounds: HashMap<RepoName, Rounds>,
    /// Set when the store is dropped: the workers end.
    closed: bool,
}

#[derive(Default, Clone, Copy)]
struct Rounds {
    started: u64,
    finished: u64,
}

/// How a [`Follows::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// A follow that started after the wait began finished (well or not): trying again
    /// answers what it brought.
    Followed,
    /// No follow will run soon (one failed moments ago, or the store is closing).
    Refused,
    /// The time ran out first.
    TimedOut,
}

impl Follows {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for a follow of `name`. Never blocks on anything but the queue's own lock, which
    /// is only held for a few map operations.
    pub(crate) fn request(&self, name: &RepoName) {
        let mut queue = self.lock();
        if Self::enqueue(&mut queue, name) {
            drop(queue);
            self.wake.notify_one();
        }
    }

    /// Queues a follow of `name` unless one is queued already; false when none will run
    /// (closed, or a follow failed less than [`RETRY_AFTER`] ago).
    fn enqueue(queue: &mut Queue, name: &RepoName) -> bool {
        if queue.closed {
            return false;
        }
        if queue.queued.contains(name) {
            return true;
        }
        if let Some(at) = queue.failed.get(name) {
            if at.elapsed() < RETRY_AFTER {
                return false;
            }
            queue.failed.remove(name);
        }
        queue.queued.insert(name.clone());
        queue.order.push_back(name.clone());
        true
    }

    /// Asks for a follow of `name` and waits, at most `timeout`, until a follow of it handed
    /// to a worker after this call finished. Holds nothing but the queue's own lock, and that
    /// only between waits: a writer (a sync, a sweep) never keeps a waiter waiting.
    pub(crate) fn wait(&self, name: &RepoName, timeout: Duration) -> Waited {
        let deadline = Instant::now() + timeout;
        let mut queue = self.lock();
        let asked_at = queue.rounds.get(name).copied().unwrap_or_default().started;
        if !Self::enqueue(&mut queue, name) {
            return Waited::Refused;
        }
        self.wake.notify_one();
        loop {
            if queue.closed {
                return Waited::Refused;
            }
            if queue
                .rounds
                .get(name)
                .is_some_and(|rounds| rounds.finished > asked_at)
            {
                return Waited::Followed;
            }
            let now = Instant::now();
            if now >= deadline {
                return Waited::TimedOut;
            }
            queue = self
                .finished
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Whether a follow of `name` failed less than [`RETRY_AFTER`] ago (so none runs now).
    pub(crate) fn failed_recently(&self, name: &RepoName) -> bool {
        self.lock()
            .failed
            .get(name)
            .is_some_and(|at| at.elapsed() < RETRY_AFTER)
    }

    /// Ends the workers (the store is gone); requests are ignored from now on.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
        self.finished.notify_all();
    }

    /// The next repository to follow; `None` once closed. Taken off the queue when handed
    /// out, so a request made while its follow runs (a newer head recorded meanwhile) queues
    /// another one.
    fn next(&self) -> Option<(RepoName, u64)> {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                return None;
            }
            if let Some(name) = queue.order.pop_front() {
                queue.queued.remove(&name);
                let rounds = queue.rounds.entry(name.clone()).or_default();
                rounds.started += 1;
                let ordinal = rounds.started;
                return Some((name, ordinal));
            }
            queue = self
                .wake
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The follow `ordinal` of `name` ended; `ok` says how. Wakes the waiters.
    fn done(&self, name: &RepoName, ordinal: u64, ok: bool) {
        let mut queue = self.lock();
        if !ok {
            queue.failed.insert(name.clone(), Instant::now());
        }
        let rounds = queue.rounds.entry(name.clone()).or_default();
        rounds.finished = rounds.finished.max(ordinal);
        drop(queue);
        self.finished.notify_all();
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
    while let Some((name, ordinal)) = follows.next() {
        let Some(store) = store.upgrade() else {
            // Waiters of this follow give up (the store is going).
            follows.close();
            return;
        };
        let ok = match store.follow(&name) {
            Ok(_) => {
                tracing::debug!(repo = %name, "gitstore: followed the recorded heads");
                true
            }
            Err(e) => {
                tracing::warn!(repo = %name, error = %e, "gitstore: following the recorded heads failed");
                false
            }
        };
        follows.done(&name, ordinal, ok);
    }
}
