//! Change notifications: writers `NOTIFY csg_changes, '<topic>'` inside their transaction; one
//! thread per `Database` holds its own connection `LISTEN`ing, counts each topic's changes and
//! calls the topic's subscribers.

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use crate::Shared;
use crate::pool::RETRY_EVERY;

/// The channel every store notifies on; the payload is the topic.
pub(crate) const CHANNEL: &str = "csg_changes";

/// How long the listener waits for a notification before it looks whether its `Database` is
/// gone: the bound on how long its thread outlives the last clone.
const WAKE_EVERY: Duration = Duration::from_millis(250);

type Subscriber = Arc<dyn Fn() + Send + Sync>;

/// A topic's change count, cheap to read on every call: see [`crate::Database::change_counter`].
#[derive(Clone, Debug)]
pub struct ChangeCounter {
    topic: Arc<AtomicU64>,
    reconnects: Arc<AtomicU64>,
}

impl ChangeCounter {
    /// Notifications of this topic plus listener (re)connects so far. Read it before loading
    /// what the topic covers: if it differs on a later call, load again.
    pub fn get(&self) -> u64 {
        self.topic.load(Ordering::Acquire) + self.reconnects.load(Ordering::Acquire)
    }
}

#[derive(Default)]
struct Topic {
    count: Arc<AtomicU64>,
    subscribers: Vec<Subscriber>,
}

/// Every topic's count and subscribers.
#[derive(Default)]
pub(crate) struct Changes {
    reconnects: Arc<AtomicU64>,
    topics: Mutex<HashMap<String, Topic>>,
}

impl Changes {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Topic>> {
        self.topics.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self, topic: &str, on_change: Subscriber) {
        self.lock()
            .entry(topic.to_owned())
            .or_default()
            .subscribers
            .push(on_change);
    }

    pub(crate) fn counter(&self, topic: &str) -> ChangeCounter {
        let count = self
            .lock()
            .entry(topic.to_owned())
            .or_default()
            .count
            .clone();
        ChangeCounter {
            topic: count,
            reconnects: self.reconnects.clone(),
        }
    }

    /// One notification of `topic`: counted first, so a subscriber that reads the counter sees
    /// the change.
    fn notified(&self, topic: &str) {
        let subscribers = {
            let mut topics = self.lock();
            let entry = topics.entry(topic.to_owned()).or_default();
            entry.count.fetch_add(1, Ordering::AcqRel);
            entry.subscribers.clone()
        };
        call(topic, &subscribers);
    }

    /// The listener (re)connected: notifications may have been missed, so every topic counts as
    /// changed and every subscriber is called.
    fn reconnected(&self) {
        self.reconnects.fetch_add(1, Ordering::AcqRel);
        let all: Vec<(String, Vec<Subscriber>)> = self
            .lock()
            .iter()
            .map(|(topic, entry)| (topic.clone(), entry.subscribers.clone()))
            .collect();
        for (topic, subscribers) in all {
            call(&topic, &subscribers);
        }
    }
}

/// Calls the subscribers outside the lock (one may subscribe or read a counter), each guarded:
/// a panicking subscriber must not end the listener.
fn call(topic: &str, subscribers: &[Subscriber]) {
    for subscriber in subscribers {
        if panic::catch_unwind(AssertUnwindSafe(|| subscriber())).is_err() {
            tracing::error!(topic, "a change subscriber panicked; the listener goes on");
        }
    }
}

/// The body of the listener thread: connect, `LISTEN`, dispatch; on a lost connection, try
/// again every [`RETRY_EVERY`]. `ready` hears once, after the first attempt, so `connect` can
/// return with the listener already listening.
pub(crate) fn listen(shared: Arc<Shared>, ready: SyncSender<()>) {
    let mut ready = Some(ready);
    while !shared.stopped() {
        let attempt = Instant::now();
        let opened = shared.target.connect(false).and_then(|mut client| {
            client
                .batch_execute(&format!("LISTEN {CHANNEL}"))
                .map_err(crate::Error::from)?;
            Ok(client)
        });
        match opened {
            Ok(mut client) => {
                shared.link.connected(&shared.target.shown);
                shared.changes.reconnected();
                if let Some(ready) = ready.take() {
                    let _ = ready.send(());
                }
                dispatch(&shared, &mut client);
            }
            Err(error) => {
                shared.link.failed(&error);
                if let Some(ready) = ready.take() {
                    let _ = ready.send(());
                }
                // Sleep out the rest of the retry interval in short naps, to notice a stop.
                while !shared.stopped() && attempt.elapsed() < RETRY_EVERY {
                    thread::sleep(WAKE_EVERY.min(RETRY_EVERY.saturating_sub(attempt.elapsed())));
                }
            }
        }
    }
}

/// Hands notifications to the topics until the connection ends or the `Database` is gone.
fn dispatch(shared: &Shared, client: &mut postgres::Client) {
    while !shared.stopped() {
        let next = client.notifications().timeout_iter(WAKE_EVERY).next();
        match next {
            Ok(Some(notification)) if notification.channel() == CHANNEL => {
                shared.changes.notified(notification.payload());
            }
            Ok(Some(_)) => {}
            Ok(None) if !client.is_closed() => {}
            Ok(None) => {
                tracing::debug!("the change listener's connection closed; reconnecting");
                return;
            }
            Err(error) => {
                tracing::debug!(%error, "the change listener's connection failed; reconnecting");
                return;
            }
        }
    }
}
