//! Retention (G-5): which commits are readable. A commit is retained iff it is reachable from a
//! retention root: a current branch head or tag target, a pin, or a former head seen by a sync
//! within the window. Roots are checked in O(1); anything else needs an ancestor walk, which is
//! memoised per repository and resumed (never restarted) until the roots change.

use crate::db::storage;
use gix::ObjectId;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

/// The retention roots of one repository state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots {
    /// Changes whenever the roots below change (sync, pin, unpin, sweep).
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

    /// Seen heads inside the window that are not fixed roots, sorted.
    fn active_seen(&self, now: SystemTime, retention: Duration) -> Vec<ObjectId> {
        let mut active: Vec<ObjectId> = self
            .seen
            .iter()
            .filter(|(id, t)| in_window(**t, now, retention) && !self.fixed.contains(*id))
            .map(|(id, _)| *id)
            .collect();
        active.sort();
        active
    }
}

/// For which roots the memo was built, and until when that set cannot change by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    generation: u64,
    computed_at: SystemTime,
    /// The earliest instant a currently active seen head leaves the window.
    valid_until: Option<SystemTime>,
    active_seen: Vec<ObjectId>,
}

/// The memoised, resumable ancestor walk of one repository.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    key: Option<Key>,
    /// Every commit known to be reachable from the roots of `key`.
    reached: HashSet<ObjectId>,
    /// Reached commits whose parents have not been looked at yet, newest first (by the
    /// committer time of the child that led to them: recent history is asked for most).
    queue: BinaryHeap<(i64, ObjectId)>,
}

impl Memo {
    /// Makes the memo match `roots` at `now`, restarting the walk only if the set of active
    /// roots differs from the one it was built for.
    fn refresh(&mut self, roots: &Roots, now: SystemTime, retention: Duration) {
        if let Some(key) = &self.key
            && key.generation == roots.generation
            && now >= key.computed_at
            && key.valid_until.is_none_or(|until| now <= until)
        {
            return;
        }
        let active = self.active_seen_key(roots, now, retention);
        let unchanged = self.key.as_ref().is_some_and(|k| {
            k.generation == active.generation && k.active_seen == active.active_seen
        });
        if !unchanged {
            self.reached.clear();
            self.queue.clear();
            let present = |id: &&ObjectId| !roots.absent.contains(*id);
            for id in roots
                .fixed
                .iter()
                .chain(active.active_seen.iter())
                .filter(present)
            {
                if self.reached.insert(*id) {
                    self.queue.push((i64::MAX, *id));
                }
            }
        }
        self.key = Some(active);
    }

    fn active_seen_key(&self, roots: &Roots, now: SystemTime, retention: Duration) -> Key {
        let active_seen = roots.active_seen(now, retention);
        let valid_until = active_seen
            .iter()
            .filter_map(|id| roots.seen.get(id))
            .filter_map(|t| t.checked_add(retention))
            .min();
        Key {
            generation: roots.generation,
            computed_at: now,
            valid_until,
            active_seen,
        }
    }

    /// Whether `target` is reachable from the active roots; walks only as far as needed.
    pub(crate) fn reaches(
        &mut self,
        roots: &Roots,
        now: SystemTime,
        retention: Duration,
        repo: &gix::ThreadSafeRepository,
        target: &ObjectId,
    ) -> Result<bool, crate::Error> {
        self.refresh(roots, now, retention);
        let mut local: Option<gix::Repository> = None;
        loop {
            if self.reached.contains(target) {
                return Ok(true);
            }
            let Some((_, id)) = self.queue.pop() else {
                return Ok(false);
            };
            let repo = local.get_or_insert_with(|| repo.to_thread_local());
            let object = match repo.try_find_object(id) {
                Ok(Some(object)) => object,
                Ok(None) => {
                    // A root whose objects are gone (pruned behind our back, or a mirror
                    // restored from an old copy): nothing below it is readable.
                    tracing::warn!(commit = %id, "gitstore: retention root or ancestor missing from the mirror");
                    continue;
                }
                Err(e) => return Err(storage("walking the commit graph")(e)),
            };
            if object.kind != gix::objs::Kind::Commit {
                continue;
            }
            let iter = gix::objs::CommitRefIter::from_bytes(&object.data, repo.object_hash());
            let time = iter.committer().map(|s| s.seconds()).unwrap_or(0);
            for parent in iter.parent_ids() {
                if self.reached.insert(parent) {
                    self.queue.push((time, parent));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

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

    /// G-5: the memo key is stable while nothing changes and is invalidated when a seen head
    /// leaves the window.
    #[test]
    fn g5_memo_key_follows_time() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        let window = 30 * DAY;
        let a = ObjectId::from_hex(b"1111111111111111111111111111111111111111").unwrap();
        let b = ObjectId::from_hex(b"2222222222222222222222222222222222222222").unwrap();
        let roots = Roots {
            generation: 1,
            fixed: [a].into_iter().collect(),
            seen: [(a, t0), (b, t0)].into_iter().collect(),
            absent: HashSet::new(),
        };
        let mut memo = Memo::default();
        memo.refresh(&roots, t0, window);
        assert!(memo.reached.contains(&b));
        assert_eq!(memo.key.as_ref().unwrap().valid_until, Some(t0 + window));
        memo.refresh(&roots, t0 + window + DAY, window);
        assert!(!memo.reached.contains(&b));
        assert!(memo.reached.contains(&a));
        assert!(roots.is_root(&a, t0 + 100 * window, window));
        assert!(!roots.is_root(&b, t0 + window + DAY, window));
    }
}
