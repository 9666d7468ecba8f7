//! The PostgreSQL store's own thread: reloads the view when the database tells of a change,
//! and writes last-use times (of tokens and website sessions), so neither ever makes a
//! request wait on the database.
//!
//! The listener's subscriber only sets a flag and wakes this thread: notifications arriving
//! while a reload runs set the flag again, so a burst of changes costs at most one reload
//! more, whatever its size. The thread ends when the store (its [`Worker`]) is dropped.

use crate::Error;
use crate::tables::{Tables, lock};
use crate::token::SessionHash;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How soon a failed reload is tried again when nothing else wakes the thread (the
/// listener's reconnect usually does first).
const RETRY: Duration = Duration::from_secs(2);

/// What the thread has to do.
#[derive(Default)]
struct Pending {
    /// The tables changed (or may have): reload the view.
    reload: bool,
    /// Last uses to write: (token id, seconds since the epoch).
    uses: Vec<(i64, i64)>,
    /// Last uses of sessions to write: (hash of the session id, seconds since the epoch).
    seen: Vec<(SessionHash, i64)>,
    /// The store is gone.
    stop: bool,
}

struct Signal {
    pending: Mutex<Pending>,
    wake: Condvar,
}

impl Signal {
    fn update(&self, change: impl FnOnce(&mut Pending)) {
        change(&mut lock(&self.pending));
        self.wake.notify_one();
    }
}

/// The handle on the thread, owned by the store.
pub(crate) struct Worker {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread over the store's tables.
    pub(crate) fn start(tables: Arc<Tables>) -> Result<Self, Error> {
        let signal = Arc::new(Signal {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        });
        let thread = std::thread::Builder::new()
            .name("access-reload".to_owned())
            .spawn({
                let signal = Arc::clone(&signal);
                move || run(&signal, &tables)
            })
            .map_err(crate::backend::storage("starting the access reload thread"))?;
        Ok(Self {
            signal,
            thread: Some(thread),
        })
    }

    /// Asks for a reload.
    pub(crate) fn wake(&self) {
        self.signal.update(|p| p.reload = true);
    }

    /// What the database's listener calls on a change: as quick as a mutex and a wake-up. It
    /// holds the thread's signal weakly, so a subscription (which the listener keeps for
    /// its lifetime) outliving the store keeps nothing of it alive.
    pub(crate) fn waker(&self) -> impl Fn() + Send + Sync + 'static {
        let signal: Weak<Signal> = Arc::downgrade(&self.signal);
        move || {
            if let Some(signal) = signal.upgrade() {
                signal.update(|p| p.reload = true);
            }
        }
    }

    /// Queues a last-use write.
    pub(crate) fn queue_use(&self, id: i64, at: i64) {
        self.signal.update(|p| p.uses.push((id, at)));
    }

    /// Queues a write of a session's last use.
    pub(crate) fn queue_seen(&self, hash: SessionHash, at: i64) {
        self.signal.update(|p| p.seen.push((hash, at)));
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.signal.update(|p| p.stop = true);
        if let Some(thread) = self.thread.take() {
            // At most one database call (bounded by its timeout) is in flight.
            let _ = thread.join();
        }
    }
}

fn run(signal: &Signal, tables: &Tables) {
    // Whether the last reload failed: logged once per outage, retried every RETRY.
    let mut failing = false;
    loop {
        let work = {
            let mut pending = lock(&signal.pending);
            loop {
                if pending.stop {
                    // Queued last uses are dropped: they are advisory, and waiting for an
                    // unreachable database would hold up the store's drop.
                    return;
                }
                if pending.reload || !pending.uses.is_empty() || !pending.seen.is_empty() {
                    break;
                }
                if failing {
                    let (guard, waited) = signal
                        .wake
                        .wait_timeout(pending, RETRY)
                        .unwrap_or_else(PoisonError::into_inner);
                    pending = guard;
                    pending.reload |= waited.timed_out();
                } else {
                    pending = signal
                        .wake
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            Pending {
                reload: std::mem::take(&mut pending.reload),
                uses: std::mem::take(&mut pending.uses),
                seen: std::mem::take(&mut pending.seen),
                stop: false,
            }
        };
        for (id, at) in work.uses {
            // A failure is logged by the backend; the token's next use a minute on tries
            // again.
            let _ = tables.backend.note_use(id, at);
        }
        for (hash, at) in work.seen {
            let _ = tables.backend.note_seen(&hash, at);
        }
        if work.reload {
            match tables.reload() {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!(
                        "access: users, tokens and grants reloaded; the view is current again"
                    );
                }
                Ok(()) => {}
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(
                        %error,
                        "access: cannot reload users, tokens and grants; checks answer from the \
                         last view until the metadata database is back"
                    );
                }
                Err(_) => {}
            }
        }
    }
}
