//! This replica's membership: its row, the thread that heartbeats it, and the view the thread
//! publishes.
//!
//! After an outage (any heartbeat that failed) the thread keeps the members that were live
//! before it live for one more lease after its first heartbeat that gets through again, by the
//! database's clock (`Recovery`; the rule is in the crate docs, "No flap after an outage").

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use metadb::Database;

use crate::store::{self, Beat};
use crate::{ClusterConfig, ClusterView, Error, Member, NodeUrl};

/// How long [`Membership::drain`] and [`Membership::leave`] wait for the membership thread,
/// which may be in the middle of a heartbeat bounded by the database's call timeout.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

type Subscriber = Arc<dyn Fn(&ClusterView) + Send + Sync>;
type Reply = SyncSender<Result<(), Error>>;

/// What the handles (and the change listener) ask of the membership thread.
enum Command {
    /// A member joined, drained or left, or the listener reconnected: heartbeat and read now.
    Refresh,
    Drain(Reply),
    Leave(Reply),
    /// The last `Membership` is gone: stop heartbeating, leave the row to expire.
    Stop,
}

/// This replica's membership of the cluster: a row in `csg_members` that a thread of its own
/// heartbeats, and the [`ClusterView`] that thread publishes. Cheap to clone; the thread stops
/// (without deleting the row, which then expires after the lease as if the process had been
/// killed) within moments of the last clone being dropped, or at once on [`Membership::leave`].
///
/// Needs no async runtime: the thread is a plain thread, and the database calls run on
/// [`metadb`]'s threads. Give the membership a `Database` of its own (one connection is
/// enough), so that its heartbeats never wait behind the stores' calls: a heartbeat that waits
/// longer than the lease makes this replica look dead to the others.
#[derive(Clone)]
pub struct Membership {
    handle: Arc<Handle>,
}

/// Held by every clone; its drop stops the thread.
struct Handle {
    shared: Arc<Shared>,
    commands: Sender<Command>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
    }
}

/// What the handles share with the thread.
struct Shared {
    config: ClusterConfig,
    view: ArcSwap<ClusterView>,
    subscribers: Mutex<Vec<Subscriber>>,
    left: AtomicBool,
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.view();
        f.debug_struct("Membership")
            .field("node_url", view.self_url())
            .field("generation", &view.generation())
            .field("live", &view.live())
            .field("database_reachable", &view.database_reachable())
            .finish()
    }
}

impl Membership {
    /// Joins the cluster whose members `db` records: applies the `cluster` migrations, writes
    /// this replica's row (taking over the row of the same URL, as a restart does: new
    /// incarnation, not draining), announces it, reads the members and starts the heartbeat
    /// thread. When it returns, [`Membership::view`] holds every member the database knows,
    /// this one live among them.
    ///
    /// Fails if the settings contradict each other ([`Error::InvalidConfig`]) or the database
    /// cannot be written ([`Error::Database`]); then no thread is left behind.
    pub fn join(db: Database, config: ClusterConfig) -> Result<Membership, Error> {
        config.check()?;
        store::migrate(&db)?;
        let (commands, inbox) = mpsc::channel();
        // Subscribed before the row is read, so no change between the two is missed. The
        // subscriber outlives this membership (metadb keeps it as long as `db`); once the
        // thread is gone its sends just fail.
        let waker = commands.clone();
        db.subscribe(store::TOPIC, move || {
            let _ = waker.send(Command::Refresh);
        });
        let url = config.node_url.as_str().to_owned();
        let lease_ms = store::millis(config.lease);
        let joined = db.run(move |client| store::join(client, &url, lease_ms))?;
        if joined.took_over_live_row {
            tracing::warn!(
                node_url = %config.node_url,
                "took over the membership row of a replica with this node URL that was still \
                 heartbeating: an earlier run of this replica, or another replica given the \
                 same node URL (give each its own)"
            );
        }
        let view = ClusterView::new(
            config.node_url.clone(),
            joined.members,
            config.owners_per_repo,
            1,
            true,
            Some(joined.heartbeat),
        );
        tracing::info!(
            node_url = %config.node_url,
            live = ?view.live(),
            "joined the cluster"
        );
        let shared = Arc::new(Shared {
            config,
            view: ArcSwap::from_pointee(view),
            subscribers: Mutex::new(Vec::new()),
            left: AtomicBool::new(false),
        });
        let worker = Worker {
            db,
            shared: shared.clone(),
            inbox,
            incarnation: joined.incarnation,
            last_contact: Instant::now(),
            last_heartbeat_ok: Some(joined.heartbeat),
            recovery: Recovery::Steady,
            failing: false,
            superseded: false,
        };
        thread::Builder::new()
            .name("cluster-member".to_owned())
            .spawn(move || worker.run())
            .map_err(|e| Error::Spawn(e.to_string()))?;
        Ok(Membership {
            handle: Arc::new(Handle { shared, commands }),
        })
    }

    /// The current view, without a lock: load it once per call and use that one throughout.
    pub fn view(&self) -> Arc<ClusterView> {
        self.handle.shared.view.load_full()
    }

    /// This replica's URL.
    pub fn self_url(&self) -> &NodeUrl {
        &self.handle.shared.config.node_url
    }

    /// The settings it joined with.
    pub fn config(&self) -> &ClusterConfig {
        &self.handle.shared.config
    }

    /// Calls `on_change` with the new view each time the live set changes (see
    /// [`ClusterView::generation`]), on the membership thread, after the view is published.
    /// Subscribe first, then read [`Membership::view`], to miss no change. Subscribers must be
    /// quick (they delay the heartbeat); a panicking one is caught and logged. Don't capture a
    /// `Membership` in one: it would keep the thread alive.
    pub fn subscribe(&self, on_change: impl Fn(&ClusterView) + Send + Sync + 'static) {
        self.handle
            .shared
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::new(on_change));
    }

    /// Marks this replica draining and announces it: the others stop assigning it repositories
    /// at once, while it stays a member and goes on heartbeating (it keeps serving until it
    /// leaves). A restart (a new `join`) clears the mark.
    pub fn drain(&self) -> Result<(), Error> {
        if self.handle.shared.left.load(Ordering::Acquire) {
            return Err(Error::Left(self.self_url().to_string()));
        }
        let (reply, answer) = mpsc::sync_channel(1);
        if self.handle.commands.send(Command::Drain(reply)).is_err() {
            return Err(Error::Left(self.self_url().to_string()));
        }
        match answer.recv_timeout(REPLY_TIMEOUT) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout(REPLY_TIMEOUT)),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Left(self.self_url().to_string())),
        }
    }

    /// Leaves the cluster, for a graceful shutdown: stops the heartbeat thread and deletes this
    /// replica's row (only its own incarnation's: a restart that already took the row over
    /// keeps it), which the others hear at once. The view then holds the members without this
    /// one. If the row cannot be deleted (database unreachable) the heartbeats stop anyway and
    /// the others count this replica dead once its lease runs out; the error says so. Calling
    /// it again does nothing.
    pub fn leave(&self) -> Result<(), Error> {
        if self.handle.shared.left.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let (reply, answer) = mpsc::sync_channel(1);
        if self.handle.commands.send(Command::Leave(reply)).is_err() {
            return Ok(());
        }
        match answer.recv_timeout(REPLY_TIMEOUT) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout(REPLY_TIMEOUT)),
            Err(RecvTimeoutError::Disconnected) => Ok(()),
        }
    }
}

/// Where the membership thread stands after an outage: the guard against counting the others
/// dead when the database comes back. During an outage every member's heartbeats lapse by the
/// database's clock, so the first replica whose heartbeat gets through would otherwise find
/// itself the only live member and take every repository until the others heartbeat again.
enum Recovery {
    /// The heartbeats get through: reads are taken as they are.
    Steady,
    /// A heartbeat failed; `held` were live in the last view before it.
    Cut { held: Vec<NodeUrl> },
    /// The heartbeats get through again: `held` count as live until a heartbeat written at or
    /// after `until` (the first one after the outage plus a lease), by the database's clock.
    ///
    /// The database's clock rather than this host's monotonic clock, because the lapse it
    /// covers is measured on that clock: the others are live again once their heartbeats,
    /// stamped with the database's `now()`, are within a lease of the database's `now()`. A
    /// heartbeat's time and the read that follows it come from one round trip, so the grace
    /// starts and ends exactly where the rows say, not a round trip (which right after a
    /// restart may be slow) later; and, as everywhere in this crate, no host clock is trusted.
    Grace {
        held: Vec<NodeUrl>,
        until: SystemTime,
    },
}

impl Recovery {
    /// The members of a read with those held live marked live. Rows that are gone (a member
    /// that left) stay gone and draining marks are kept, so a leave or a drain is honoured at
    /// once; members not held (new ones) are taken as read.
    fn hold(&self, mut members: Vec<Member>) -> Vec<Member> {
        let (Recovery::Cut { held } | Recovery::Grace { held, .. }) = self else {
            return members;
        };
        for member in &mut members {
            if !member.live && held.contains(&member.node_url) {
                member.live = true;
            }
        }
        members
    }
}

/// The membership thread's state.
struct Worker {
    db: Database,
    shared: Arc<Shared>,
    inbox: Receiver<Command>,
    /// This run's incarnation: the row is ours while it holds this number.
    incarnation: i64,
    /// When a heartbeat round trip last succeeded (written, or found superseded): the
    /// database counts as reachable within a lease of it.
    last_contact: Instant,
    last_heartbeat_ok: Option<SystemTime>,
    /// Whether reads are taken as they are, or some members are held live after an outage.
    recovery: Recovery,
    /// The last heartbeat failed. Its outage is logged once.
    failing: bool,
    /// Another incarnation holds the row. Logged once.
    superseded: bool,
}

impl Worker {
    fn run(mut self) {
        let every = self.shared.config.heartbeat_every;
        let mut next_beat = Instant::now() + every;
        let mut pending: Option<Command> = None;
        loop {
            // Looked at before waiting, so that a stream of notifications cannot starve the
            // heartbeat.
            if Instant::now() >= next_beat {
                self.beat();
                next_beat = Instant::now() + every;
            }
            let command = match pending.take() {
                Some(command) => command,
                None => match self
                    .inbox
                    .recv_timeout(next_beat.saturating_duration_since(Instant::now()))
                {
                    Ok(command) => command,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
            };
            match command {
                Command::Stop => return,
                Command::Refresh => {
                    // One heartbeat answers a burst of notifications.
                    while let Ok(next) = self.inbox.try_recv() {
                        if !matches!(next, Command::Refresh) {
                            pending = Some(next);
                            break;
                        }
                    }
                    // A heartbeat, not only a read: a read is trusted only right after this
                    // replica's own heartbeat got through (a database that takes no writes
                    // would otherwise show every member dead).
                    self.beat();
                    next_beat = Instant::now() + every;
                }
                Command::Drain(reply) => {
                    let _ = reply.send(self.drain());
                }
                Command::Leave(reply) => {
                    let _ = reply.send(self.leave());
                    return;
                }
            }
        }
    }

    fn beat(&mut self) {
        let config = &self.shared.config;
        let url = config.node_url.as_str().to_owned();
        let incarnation = self.incarnation;
        let lease_ms = store::millis(config.lease);
        let forget_ms = store::millis(config.forget_after);
        let outcome = self
            .db
            .run(move |client| store::beat(client, &url, incarnation, lease_ms, forget_ms));
        match outcome {
            Ok(Beat::Written(at, members)) => {
                self.recovery = match std::mem::replace(&mut self.recovery, Recovery::Steady) {
                    Recovery::Cut { held } => {
                        tracing::info!(
                            lease = ?config.lease,
                            held = ?held,
                            "cluster heartbeats get through again; the members live before \
                             the outage count as live for one more lease, so that they can \
                             heartbeat again before any is counted dead"
                        );
                        Recovery::Grace {
                            held,
                            until: at.checked_add(config.lease).unwrap_or(at),
                        }
                    }
                    Recovery::Grace { until, .. } if at >= until => Recovery::Steady,
                    other => other,
                };
                self.failing = false;
                self.superseded = false;
                self.last_contact = Instant::now();
                self.last_heartbeat_ok = Some(at);
                let members = self.recovery.hold(members);
                self.publish(Some(members));
            }
            Ok(Beat::Superseded(members)) => {
                if !self.superseded {
                    tracing::error!(
                        "{}; this process no longer heartbeats its row",
                        Error::Superseded(self.shared.config.node_url.to_string())
                    );
                }
                self.failing = false;
                self.superseded = true;
                // This process no longer takes part: nothing to guard.
                self.recovery = Recovery::Steady;
                self.last_contact = Instant::now();
                self.publish(Some(members));
            }
            Err(error) => {
                if !self.failing {
                    tracing::warn!(
                        %error,
                        "cluster heartbeat failed; serving from the last known membership \
                         until the database answers again"
                    );
                }
                self.failing = true;
                if !matches!(self.recovery, Recovery::Cut { .. }) {
                    // Within a grace the held members are live in the view, so a second
                    // outage keeps holding them.
                    self.recovery = Recovery::Cut {
                        held: self.shared.view.load().live().to_vec(),
                    };
                }
                self.publish(None);
            }
        }
    }

    fn drain(&mut self) -> Result<(), Error> {
        let url = self.shared.config.node_url.as_str().to_owned();
        let incarnation = self.incarnation;
        let lease_ms = store::millis(self.shared.config.lease);
        let drained = self
            .db
            .run(move |client| store::drain(client, &url, incarnation, lease_ms))?;
        match drained {
            Some(members) => {
                tracing::info!(node_url = %self.shared.config.node_url, "draining: no longer assigned repositories");
                let members = self.recovery.hold(members);
                self.publish(Some(members));
                Ok(())
            }
            None => Err(Error::Superseded(self.shared.config.node_url.to_string())),
        }
    }

    fn leave(&mut self) -> Result<(), Error> {
        let url = self.shared.config.node_url.as_str().to_owned();
        let incarnation = self.incarnation;
        let lease_ms = store::millis(self.shared.config.lease);
        match self
            .db
            .run(move |client| store::leave(client, &url, incarnation, lease_ms))
        {
            Ok(members) => {
                tracing::info!(node_url = %self.shared.config.node_url, "left the cluster");
                let members = self.recovery.hold(members);
                self.publish(Some(members));
                Ok(())
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    "could not delete this replica's membership row; its heartbeats stopped, \
                     so the others count it dead once its lease runs out"
                );
                Err(error.into())
            }
        }
    }

    /// Publishes a view of `members` (or of the last members, when the database could not be
    /// read) and tells the subscribers if the live set changed.
    fn publish(&self, members: Option<Vec<Member>>) {
        let config = &self.shared.config;
        let old = self.shared.view.load_full();
        let reachable = self.last_contact.elapsed() <= config.lease;
        let next = match members {
            None => {
                if old.database_reachable() == reachable
                    && old.last_heartbeat_ok() == self.last_heartbeat_ok
                {
                    return;
                }
                if !reachable && old.database_reachable() {
                    tracing::warn!(
                        lease = ?config.lease,
                        "no cluster heartbeat got through for a lease: the other replicas may \
                         count this one dead; serving from the last known membership"
                    );
                }
                old.with_state(old.generation(), reachable, self.last_heartbeat_ok)
            }
            Some(members) => {
                let fresh = ClusterView::new(
                    config.node_url.clone(),
                    members,
                    config.owners_per_repo,
                    old.generation(),
                    reachable,
                    self.last_heartbeat_ok,
                );
                if fresh.live_set() == old.live_set() {
                    fresh
                } else {
                    fresh.with_state(old.generation() + 1, reachable, self.last_heartbeat_ok)
                }
            }
        };
        let changed = next.generation() != old.generation();
        let next = Arc::new(next);
        self.shared.view.store(next.clone());
        if changed {
            let draining: Vec<&NodeUrl> = next
                .members()
                .iter()
                .filter(|m| m.live && m.draining)
                .map(|m| &m.node_url)
                .collect();
            tracing::info!(
                generation = next.generation(),
                live = ?next.live(),
                draining = ?draining,
                "cluster membership changed"
            );
            let subscribers = self
                .shared
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for subscriber in subscribers {
                if panic::catch_unwind(AssertUnwindSafe(|| subscriber(&next))).is_err() {
                    tracing::error!("a cluster membership subscriber panicked; going on");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::member;

    #[test]
    fn held_members_stay_live_while_leaves_drains_and_joins_are_taken_as_read() {
        let held = ["http://a:1", "http://b:1", "http://c:1", "http://d:1"]
            .map(|u| NodeUrl::parse(u).unwrap())
            .to_vec();
        // b lapsed, c drains and lapsed, d left (no row), e is new and f was dead before.
        let read = vec![
            member("http://a:1", true, false),
            member("http://b:1", false, false),
            member("http://c:1", false, true),
            member("http://e:1", true, false),
            member("http://f:1", false, false),
        ];
        let flags = |members: Vec<Member>| -> Vec<(String, bool, bool)> {
            members
                .into_iter()
                .map(|m| (m.node_url.to_string(), m.live, m.draining))
                .collect()
        };
        let expected = [
            ("http://a:1", true, false),
            ("http://b:1", true, false),
            ("http://c:1", true, true),
            ("http://e:1", true, false),
            ("http://f:1", false, false),
        ]
        .map(|(u, l, d)| (NodeUrl::parse(u).unwrap().to_string(), l, d))
        .to_vec();
        let cut = Recovery::Cut { held: held.clone() };
        assert_eq!(flags(cut.hold(read.clone())), expected);
        let grace = Recovery::Grace {
            held,
            until: SystemTime::UNIX_EPOCH,
        };
        assert_eq!(flags(grace.hold(read.clone())), expected);
        assert_eq!(flags(Recovery::Steady.hold(read.clone())), flags(read));
    }
}
