//! Retention (G-5): which commits are readable. A commit is retained iff it is reachable from a
//! retention root: a current branch head or tag target, a pin, or a former head seen by a sync
//! within the window. Roots are checked in O(1); anything else is looked up in the
//! repository's [`Memo`], the commits an ancestor walk from the roots has reached so far.
//!
//! The memo is keyed on the set of roots it was walked from, not on a view (issue 42 point 7):
//! a sync that only adds roots (a new head, whose history holds the old ones) extends the walk
//! with them and keeps everything reached; only a root that leaves (an unpin, a seen head past
//! the window, a shared row this replica's mirror lacks) restarts it.
//!
//! A look at the memo ([`Memo::look`]) never walks: O(1), plus O(roots) once per new set of
//! roots. What it cannot answer yet takes [`Memo::walk`], which the store runs only where a
//! walk may run (a blocking thread, under the call's budget; see `store/walks.rs`) and the
//! service runs in the background after each sync, so old commits are answered from the memo
//! by the time anyone asks. One thread walks a memo at a time; it decodes commits outside the
//! memo's lock, which is held only for set operations, so a look never waits for a walk.

use crate::db::storage;
use gix::ObjectId;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

/// The retention roots of one repository state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots {
    /// Changes whenever the roots below change (sync, pin, unpin, sweep); grows with every
    /// view this process builds.
    pub generation: u64,
    /// Branch heads, tag targets (peeled to commits) and pins: retained whatever the time.
    pub fixed: HashSet<ObjectId>,
    /// Every head seen by a sync, with the time of the last sync that saw it.
    pub seen: HashMap<ObjectId, SystemTime>,
    /// Cluster mode: the seen heads and pins of the shared rows that this replica's mirror
    /// does not have (another replica's sync saw them). Never roots here, and no walk starts
    /// from them: reading them answers "not synced" instead. Empty with SQLite.
    pub absent: HashSet<ObjectId>,
}

/// Whether a head last seen at `last_seen` is still inside the window at `now`. A time in the
/// future (a clock set back) counts as inside: we never drop data because of clock skew.
pub(crate) fn in_window(last_seen: SystemTime, now: SystemTime, retention: Duration) -> bool {
    now.duration_since(last_seen)
        .map(|age| age <= retention)
        .unwrap_or(true)
}

impl Roots {
    /// O(1): whether `id` is itself a root.
    pub(crate) fn is_root(&self, id: &ObjectId, now: SystemTime, retention: Duration) -> bool {
        (self.absent.is_empty() || !self.absent.contains(id))
            && (self.fixed.contains(id)
                || self
                    .seen
                    .get(id)
                    .is_some_and(|t| in_window(*t, now, retention)))
    }

    /// The roots a walk starts from at `now` (fixed roots and seen heads inside the window,
    /// those this mirror lacks aside), and the earliest instant one of those seen heads
    /// leaves the window (until then the set cannot change by itself).
    fn active(
        &self,
        now: SystemTime,
        retention: Duration,
    ) -> (HashSet<ObjectId>, Option<SystemTime>) {
        let mut valid_until: Option<SystemTime> = None;
        let mut active: HashSet<ObjectId> = self
            .fixed
            .iter()
            .filter(|id| !self.absent.contains(*id))
            .copied()
            .collect();
        for (id, seen) in &self.seen {
            if !in_window(*seen, now, retention) || self.absent.contains(id) {
                continue;
            }
            if active.insert(*id)
                && let Some(until) = seen.checked_add(retention)
            {
                valid_until = Some(valid_until.map_or(until, |v| v.min(until)));
            }
        }
        (active, valid_until)
    }
}

/// What a look at the memo found out about one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Reachable from the roots: retained.
    Reached,
    /// The walk is complete and did not reach it: not retained.
    Unreached,
    /// The walk has not got that far yet: only [`Memo::walk`] can tell.
    Unknown,
}

/// What the retention walk of one repository has done, for tests and diagnostics
/// ([`crate::GitStore::retention_walks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Walks started from scratch: the first one, then one after each root that left.
    pub restarts: u64,
    /// Times new roots (a sync's new heads, a pin) joined the walk without restarting it.
    pub extensions: u64,
    /// Commits the walks decoded (each one's parents looked at), over the memo's life.
    pub steps: u64,
    /// Commits the memo holds now: every one reached so far.
    pub reached: u64,
    /// Whether the walk is complete: every ancestor of the roots is reached, and a commit
    /// not reached is not retained.
    pub complete: bool,
}

/// For which roots the memo was last checked, and until when that cannot change by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    /// The generation of the roots last checked (see [`Roots::generation`]).
    generation: u64,
    computed_at: SystemTime,
    /// The earliest instant an active seen head leaves the window.
    valid_until: Option<SystemTime>,
}

/// How long a walker that waits for another thread's walk sleeps at most between looks.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Steps between two looks at a walker's budget (a step decodes one commit: microseconds).
const STEPS_PER_CHECK: u32 = 32;

/// The memoised, resumable ancestor walk of one repository.
///
/// Memory: the memo holds the id of every commit reached, that is up to every commit in the
/// repository's retained history: a `HashSet` of 20-byte ids, 24 to 48 bytes per commit
/// depending on where the table is in its growth (24–48 MB per million commits; redis's
/// 12,000 commits take about 0.5 MB), plus the walk's frontier while it runs (32 bytes a
/// commit, as wide as the history's parallel branches). It shrinks back to nothing when a
/// restart drops it, and goes with the registration.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    state: Mutex<MemoState>,
    /// Signalled after a step when a walker waits for another one's progress.
    progress: Condvar,
}

#[derive(Debug, Default)]
struct MemoState {
    key: Option<Key>,
    /// The roots `reached` was walked from.
    roots: HashSet<ObjectId>,
    /// Every commit known to be reachable from `roots`.
    reached: HashSet<ObjectId>,
    /// Reached commits whose parents have not been looked at yet, newest first (by the
    /// committer time of the child that led to them: recent history is asked for most).
    queue: BinaryHeap<(i64, ObjectId)>,
    /// Bumped by each restart: the step of a walker that began before it is dropped.
    epoch: u64,
    /// A walker is decoding a commit it took from `queue`, outside the lock: no other thread
    /// walks meanwhile, and the walk is not complete.
    walking: bool,
    /// Walkers waiting for `walking` to end.
    waiters: usize,
    /// Set when a step failed (the object database could not be read): the next look
    /// restarts the walk rather than trust a queue that lost a commit.
    broken: bool,
    restarts: u64,
    extensions: u64,
    steps: u64,
}

fn lock(m: &Mutex<MemoState>) -> MutexGuard<'_, MemoState> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoState {
    /// Makes the memo walk from the roots of `roots` at `now`: the same set keeps it, new
    /// roots extend it, a missing one restarts it. O(1) while the generation and the window
    /// hold, else O(roots). Roots older than the ones the memo follows (a call still holding
    /// the view from before a sync) change nothing: the memo answers for the newest roots.
    fn refresh(&mut self, roots: &Roots, now: SystemTime, retention: Duration) {
        if let Some(key) = &self.key
            && !self.broken
        {
            if roots.generation < key.generation {
                return;
            }
            if roots.generation == key.generation
                && now >= key.computed_at
                && key.valid_until.is_none_or(|until| now <= until)
            {
                return;
            }
        }
        let (active, valid_until) = roots.active(now, retention);
        if self.key.is_some() && !self.broken && self.roots.is_subset(&active) {
            let mut extended = false;
            for id in active.difference(&self.roots) {
                extended = true;
                // A root reached already has its history reached or queued.
                if self.reached.insert(*id) {
                    self.queue.push((i64::MAX, *id));
                }
            }
            if extended {
                self.extensions += 1;
            }
        } else {
            self.restart(&active);
        }
        self.roots = active;
        self.key = Some(Key {
            generation: roots.generation,
            computed_at: now,
            valid_until,
        });
    }

    fn restart(&mut self, roots: &HashSet<ObjectId>) {
        self.epoch += 1;
        self.restarts += 1;
        self.broken = false;
        self.reached = roots.clone();
        self.queue = roots.iter().map(|id| (i64::MAX, *id)).collect();
    }

    fn complete(&self) -> bool {
        self.queue.is_empty() && !self.walking && !self.broken
    }

    fn look(&self, target: &ObjectId) -> Reach {
        if self.reached.contains(target) {
            Reach::Reached
        } else if self.complete() {
            Reach::Unreached
        } else {
            Reach::Unknown
        }
    }

    /// The walk's answer for `target` (`None`: for the whole history), once it has one.
    fn decided(&self, target: Option<&ObjectId>) -> Option<bool> {
        match target {
            Some(target) => match self.look(target) {
                Reach::Reached => Some(true),
                Reach::Unreached => Some(false),
                Reach::Unknown => None,
            },
            None => self.complete().then_some(true),
        }
    }

    fn stats(&self) -> WalkStats {
        WalkStats {
            restarts: self.restarts,
            extensions: self.extensions,
            steps: self.steps,
            reached: self.reached.len() as u64,
            complete: self.key.is_some() && self.complete(),
        }
    }
}

impl Memo {
    /// Whether `target` is reachable from the roots of `roots` at `now`, as far as the walk
    /// knows: never walks, and holds the memo's lock for set operations only.
    pub(crate) fn look(
        &self,
        roots: &Roots,
        now: SystemTime,
        retention: Duration,
        target: &ObjectId,
    ) -> Reach {
        let mut state = lock(&self.state);
        state.refresh(roots, now, retention);
        state.look(target)
    }

    /// Walks the history of the roots of `roots` until `target` is decided (reached, or the
    /// walk complete without it) and answers whether it is reachable; without a target,
    /// until the walk is complete. Resumes where earlier walks stopped; when another thread
    /// walks, waits for its progress instead. Stops with [`crate::Error::Stopped`] when
    /// `budget` does, keeping what it reached.
    pub(crate) fn walk(
        &self,
        roots: &Roots,
        now: SystemTime,
        retention: Duration,
        repo: &gix::ThreadSafeRepository,
        target: Option<&ObjectId>,
        budget: Option<&budget::Budget>,
    ) -> Result<bool, crate::Error> {
        let mut state = lock(&self.state);
        state.refresh(roots, now, retention);
        let mut local: Option<gix::Repository> = None;
        let mut parents = Vec::new();
        let mut until_check = 0u32;
        loop {
            if state.broken && !state.walking {
                state.refresh(roots, now, retention);
            }
            if let Some(answer) = state.decided(target) {
                return Ok(answer);
            }
            if state.walking {
                if let Some(budget) = budget {
                    budget.check()?;
                }
                let slice = budget
                    .and_then(budget::Budget::remaining)
                    .map_or(WAIT_SLICE, |left| left.min(WAIT_SLICE));
                state.waiters += 1;
                state = self
                    .progress
                    .wait_timeout(state, slice)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                state.waiters -= 1;
                continue;
            }
            if until_check == 0
                && let Some(budget) = budget
            {
                budget.check()?;
            }
            until_check = (until_check + 1) % STEPS_PER_CHECK;
            let Some((priority, id)) = state.queue.pop() else {
                // Not decided with an empty queue means another walker is out: look again.
                continue;
            };
            let epoch = state.epoch;
            state.walking = true;
            drop(state);
            let stepping = Stepping(self);
            let repo = local.get_or_insert_with(|| repo.to_thread_local());
            parents.clear();
            let step = parents_of(repo, id, &mut parents);
            std::mem::forget(stepping);
            state = lock(&self.state);
            state.walking = false;
            if state.waiters > 0 {
                self.progress.notify_all();
            }
            if state.epoch != epoch {
                // Restarted meanwhile: this step belongs to roots that are gone.
                continue;
            }
            match step {
                Ok(time) => {
                    state.steps += 1;
                    for parent in &parents {
                        if state.reached.insert(*parent) {
                            state.queue.push((time, *parent));
                        }
                    }
                }
                Err(e) => {
                    state.queue.push((priority, id));
                    state.broken = true;
                    return Err(e);
                }
            }
        }
    }

    /// The walk's counters and size now.
    pub(crate) fn stats(&self) -> WalkStats {
        lock(&self.state).stats()
    }
}

/// A walker's step in progress: if it unwinds (a panic while decoding), the memo must not
/// stay marked as walked by it, or every later walk would wait for it in vain.
struct Stepping<'a>(&'a Memo);

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.walking = false;
        // The commit taken from the queue is lost: restart rather than trust the queue.
        state.broken = true;
        self.0.progress.notify_all();
    }
}

/// One step of the walk: the parents of commit `id` into `parents`, and its committer time
/// (their priority in the queue). A commit missing from the mirror has none.
fn parents_of(
    repo: &gix::Repository,
    id: ObjectId,
    parents: &mut Vec<ObjectId>,
) -> Result<i64, crate::Error> {
    let object = match repo.try_find_object(id) {
        Ok(Some(object)) => object,
        Ok(None) => {
            // A root whose objects are gone (pruned behind our back, or a mirror restored
            // from an old copy): nothing below it is readable.
            tracing::warn!(commit = %id, "gitstore: retention root or ancestor missing from the mirror");
            return Ok(0);
        }
        Err(e) => return Err(storage("walking the commit graph")(e)),
    };
    if object.kind != gix::objs::Kind::Commit {
        return Ok(0);
    }
    let iter = gix::objs::CommitRefIter::from_bytes(&object.data, repo.object_hash());
    let time = iter.committer().map(|s| s.seconds()).unwrap_or(0);
    parents.extend(iter.parent_ids());
    Ok(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    fn oid(byte: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    /// G-5: the window boundary is inclusive, and future times count as inside.
    #[test]
    fn g5_window_boundaries() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        let window = 30 * DAY;
        assert!(in_window(t0, t0, window));
        assert!(in_window(t0, t0 + window, window));
        assert!(!in_window(t0, t0 + window + Duration::from_secs(1), window));
        assert!(in_window(t0 + DAY, t0, window));
    }

    /// G-5: the memo is stable while nothing changes and restarts when a seen head leaves
    /// the window.
    #[test]
    fn g5_memo_key_follows_time() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        let window = 30 * DAY;
        let (a, b) = (oid(1), oid(2));
        let roots = Roots {
            generation: 1,
            fixed: [a].into_iter().collect(),
            seen: [(a, t0), (b, t0)].into_iter().collect(),
            absent: HashSet::new(),
        };
        let mut memo = MemoState::default();
        memo.refresh(&roots, t0, window);
        assert!(memo.reached.contains(&b));
        assert_eq!(memo.key.map(|k| k.valid_until), Some(Some(t0 + window)));
        memo.refresh(&roots, t0 + DAY, window);
        assert_eq!((memo.restarts, memo.extensions), (1, 0), "nothing changed");
        memo.refresh(&roots, t0 + window + DAY, window);
        assert!(!memo.reached.contains(&b));
        assert!(memo.reached.contains(&a));
        assert_eq!(memo.restarts, 2, "a root left");
        assert!(roots.is_root(&a, t0 + 100 * window, window));
        assert!(!roots.is_root(&b, t0 + window + DAY, window));
    }

    /// Issue 42 point 7: new roots extend the memo (what it reached stays), a root that
    /// leaves restarts it, and roots older than those it follows change nothing.
    #[test]
    fn new_roots_extend_and_a_removed_root_restarts() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        let window = 30 * DAY;
        let (head, old, next, deep) = (oid(1), oid(2), oid(3), oid(4));
        let mut roots = Roots {
            generation: 1,
            fixed: [head].into_iter().collect(),
            seen: [(head, t0)].into_iter().collect(),
            absent: HashSet::new(),
        };
        let mut memo = MemoState::default();
        memo.refresh(&roots, t0, window);
        // As if a walk had reached `old` and `deep` below the head.
        memo.queue.clear();
        memo.reached.extend([old, deep]);
        assert_eq!(memo.look(&deep), Reach::Reached);
        assert_eq!(memo.look(&oid(9)), Reach::Unreached, "the walk is complete");

        // A sync: `next` is the head now, `head` a seen head inside the window.
        let older = roots.clone();
        roots.generation = 2;
        roots.fixed = [next].into_iter().collect();
        roots.seen.insert(next, t0 + DAY);
        memo.refresh(&roots, t0 + DAY, window);
        assert_eq!((memo.restarts, memo.extensions), (1, 1));
        assert_eq!(memo.look(&deep), Reach::Reached, "kept what it reached");
        assert_eq!(
            memo.look(&oid(9)),
            Reach::Unknown,
            "`next` is not walked yet"
        );
        memo.refresh(&older, t0 + DAY, window);
        assert_eq!(
            (memo.restarts, memo.extensions),
            (1, 1),
            "an older view changes nothing"
        );

        // The old head leaves the window: restarted from `next` alone.
        memo.refresh(&roots, t0 + window + 2 * DAY, window);
        assert_eq!(memo.restarts, 2);
        assert_eq!(memo.look(&deep), Reach::Unknown);
        assert_eq!(memo.look(&next), Reach::Reached);
    }
}
