//! The PostgreSQL connection of the metadata stores (cluster mode, issue 31): connections on
//! dedicated threads, versioned migrations, change notifications.
//!
//! The driver is the sync `postgres` crate, whose `Client` panics when used from a thread
//! inside a Tokio runtime. So every database call runs on threads this crate owns: callers —
//! async worker threads, blocking-pool threads or plain threads — hand a closure to
//! [`Database::run`] and wait for its outcome (at most the call timeout).
//!
//! A write transaction of a store calls [`notify_change`] with its topic; every replica's
//! listener then bumps that topic's [`ChangeCounter`] and calls its subscribers, which is how a
//! token revoked on one replica is refused by all of them on the next call.

mod config;
mod error;
mod listener;
mod migrate;
mod pool;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

pub use config::Options;
pub use error::Error;
pub use listener::ChangeCounter;
pub use migrate::Migration;
/// The driver, so that stores name its types (`metadb::postgres::Client`) at the same version.
pub use postgres;

use config::Target;
use listener::Changes;
use pool::{Envelope, Link};

/// How long [`Database::migrate`] waits: a migration may rightly take minutes, and replicas
/// starting together wait for each other's.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether the server can be reached, as the last connection attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Connected, or the last attempt succeeded.
    Ok,
    /// Every attempt since `since` failed; calls fail at once with [`Error::Unreachable`] (or
    /// [`Error::Refused`]) until one succeeds, which is tried at most once a second.
    Unreachable {
        /// When the first failed attempt of this outage was made.
        since: SystemTime,
    },
}

/// A handle on one PostgreSQL database: its connection threads and its change listener.
/// Cheap to clone; the threads stop once the last clone is dropped (the listener within a
/// quarter of a second, a connection thread once its current call is done).
///
/// Don't capture a `Database` in a subscriber or in work that outlives the call: the threads
/// would keep it, and so themselves, alive.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    queue: Sender<Envelope>,
}

/// What the connection threads and the listener share with the handle.
pub(crate) struct Shared {
    pub(crate) target: Target,
    pub(crate) options: Options,
    pub(crate) link: Link,
    pub(crate) changes: Changes,
    stop: AtomicBool,
}

impl Shared {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The queue's sender goes with `self`, which ends the connection threads; the listener
        // looks at this flag.
        self.shared.stop.store(true, Ordering::Release);
    }
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Database")
            .field("url", &self.inner.shared.target.shown)
            .field("connections", &self.inner.shared.options.connections)
            .field("health", &self.health())
            .finish()
    }
}

impl Database {
    /// Parses and checks the URL (`postgres://` or `postgresql://`), starts
    /// `options.connections` connection threads and the listener thread, and makes one
    /// connection before returning, so a wrong URL, password or database, or an unreachable
    /// server, fails here with a clear error. When it returns, the listener is listening (unless
    /// its own first attempt failed; it then retries every second).
    pub fn connect(url: &str, mut options: Options) -> Result<Database, Error> {
        options.connections = options.connections.max(1);
        let target = Target::parse(url, &options)?;
        let shared = Arc::new(Shared {
            target,
            options,
            link: Link::default(),
            changes: Changes::default(),
            stop: AtomicBool::new(false),
        });
        let (queue, jobs) = mpsc::channel();
        let database = Database {
            inner: Arc::new(Inner {
                shared: shared.clone(),
                queue,
            }),
        };
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..shared.options.connections {
            let (shared, jobs) = (shared.clone(), jobs.clone());
            thread::Builder::new()
                .name(format!("metadb-worker-{i}"))
                .spawn(move || pool::work(shared, jobs))
                .map_err(|e| Error::Spawn(e.to_string()))?;
        }
        let first = shared.options.connect_timeout + shared.options.call_timeout;
        database.run_within(first, |_client| Ok::<(), Error>(()))?;

        let (ready, listening) = mpsc::sync_channel(1);
        let listener_shared = shared.clone();
        thread::Builder::new()
            .name("metadb-listener".to_owned())
            .spawn(move || listener::listen(listener_shared, ready))
            .map_err(|e| Error::Spawn(e.to_string()))?;
        // A late listener only delays notifications; it retries by itself.
        let _ = listening.recv_timeout(first);
        Ok(database)
    }

    /// Applies `component`'s migrations that the database lacks, in version order, each in its
    /// own transaction, recorded in `csg_schema_migrations`. Processes starting together take
    /// turns (`pg_advisory_xact_lock`), so each version is applied once. Refuses a database
    /// whose recorded versions of `component` are newer than any in `migrations` (it was
    /// migrated by a newer csg), and a list that inserts a version below an applied one.
    /// Waits up to ten minutes, not the call timeout.
    pub fn migrate(&self, component: &str, migrations: &[Migration]) -> Result<(), Error> {
        let migrations = migrate::checked(component, migrations)?;
        let component = component.to_owned();
        self.run_within(MIGRATION_TIMEOUT, move |client| {
            migrate::apply(client, &component, &migrations)
        })
    }

    /// Runs `work` on one of the connection threads with a live connection and waits for its
    /// outcome, at most the call timeout ([`Error::Busy`] if no connection became free:
    /// nothing was done; [`Error::Timeout`] if it started: it may still take effect). A
    /// connection found broken is replaced on the next call. While the server is unreachable,
    /// calls fail at once with [`Error::Unreachable`]; reconnecting is tried at most once a
    /// second. A panic in `work` resumes on the caller's thread.
    ///
    /// Driver errors become [`Error`] by `From<postgres::Error>`: connection failures are
    /// `Unreachable`, statement failures `Query`.
    ///
    /// `work` must not call this `Database` itself (it would wait for a connection it holds).
    pub fn run<T, W>(&self, work: W) -> Result<T, Error>
    where
        T: Send + 'static,
        W: FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    {
        self.run_with(move |client| work(client).map_err(Error::from))
    }

    /// Like [`Database::run`], for work with its own validation and its own error type `E`.
    /// `E` needs `From<metadb::Error>` (how this call's own failures reach the caller:
    /// unreachable, busy, timeout); `work` uses `?` on driver calls if `E` also has
    /// `From<postgres::Error>`, which should go through `metadb::Error::from(e)` so that
    /// connection failures stay recognisable:
    ///
    /// ```no_run
    /// use metadb::{Database, postgres};
    ///
    /// #[derive(Debug)]
    /// enum StoreError {
    ///     NotFound(String),
    ///     Database(metadb::Error),
    /// }
    /// impl From<metadb::Error> for StoreError {
    ///     fn from(e: metadb::Error) -> Self {
    ///         StoreError::Database(e)
    ///     }
    /// }
    /// impl From<postgres::Error> for StoreError {
    ///     fn from(e: postgres::Error) -> Self {
    ///         StoreError::Database(metadb::Error::from(e))
    ///     }
    /// }
    ///
    /// fn token_name(db: &Database, id: i64) -> Result<String, StoreError> {
    ///     db.run_with(move |client| {
    ///         let row = client.query_opt("SELECT name FROM tokens WHERE id = $1", &[&id])?;
    ///         row.map(|row| row.get(0))
    ///             .ok_or_else(|| StoreError::NotFound(format!("token {id}")))
    ///     })
    /// }
    /// ```
    pub fn run_with<T, E, W>(&self, work: W) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        W: FnOnce(&mut postgres::Client) -> Result<T, E> + Send + 'static,
    {
        self.run_within(self.inner.shared.options.call_timeout, work)
    }

    /// Like [`Database::run_with`], waiting at most `timeout` instead of the call timeout:
    /// for a look-up on a request's path, which must give up sooner than an operator's write.
    pub fn run_within<T, E, W>(&self, timeout: Duration, work: W) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        W: FnOnce(&mut postgres::Client) -> Result<T, E> + Send + 'static,
    {
        pool::call(&self.inner.queue, timeout, work)
    }

    /// Calls `on_change` on the listener thread after each committed notification of `topic`
    /// (see [`notify_change`]), and after every (re)connect of the listener, since
    /// notifications may have been lost while it was disconnected. Subscribers must be quick
    /// (they delay every other notification); a panicking one is caught and logged.
    pub fn subscribe(&self, topic: &str, on_change: impl Fn() + Send + Sync + 'static) {
        self.inner
            .shared
            .changes
            .subscribe(topic, Arc::new(on_change));
    }

    /// Writes the notification of a change of `topic` into `tx`: it is delivered to every
    /// replica's listener when `tx` commits, and never if it rolls back. Same as the free
    /// function [`notify_change`].
    pub fn notify_change(
        tx: &mut postgres::Transaction<'_>,
        topic: &str,
    ) -> Result<(), postgres::Error> {
        notify_change(tx, topic)
    }

    /// The number of notifications of `topic` plus listener reconnects so far. It only grows;
    /// read it before loading what the topic covers and compare on the next call. For a call
    /// path, [`Database::change_counter`] reads the same number without a lock.
    pub fn change_count(&self, topic: &str) -> u64 {
        self.change_counter(topic).get()
    }

    /// A handle on `topic`'s [`Database::change_count`]: two atomic loads per read.
    pub fn change_counter(&self, topic: &str) -> ChangeCounter {
        self.inner.shared.changes.counter(topic)
    }

    /// Whether the server could be reached on the last attempt.
    pub fn health(&self) -> Health {
        self.inner.shared.link.health()
    }

    /// The URL as it may be shown: `postgres://user:***@host:port/database`.
    pub fn shown_url(&self) -> &str {
        &self.inner.shared.target.shown
    }
}

/// Writes the notification of a change of `topic` into `tx` (`pg_notify('csg_changes', topic)`):
/// it is delivered to every replica's listener when `tx` commits, and never if it rolls back.
/// Every write transaction of a store calls it once per topic it changes.
pub fn notify_change(
    tx: &mut postgres::Transaction<'_>,
    topic: &str,
) -> Result<(), postgres::Error> {
    tx.execute("SELECT pg_notify($1, $2)", &[&listener::CHANNEL, &topic])?;
    Ok(())
}
