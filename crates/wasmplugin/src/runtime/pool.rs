//! Idle instances kept for reuse (W-32): at most IDLE_INSTANCES host-wide, least recently
//! used evicted first, and only ever handed back to the same key and the same module.

use std::collections::VecDeque;

use super::{InstanceKey, Live};

pub(super) struct IdlePool {
    capacity: usize,
    /// Least recently used first.
    entries: VecDeque<Entry>,
}

struct Entry {
    key: InstanceKey,
    digest: String,
    live: Live,
}

impl IdlePool {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: VecDeque::with_capacity(capacity),
        }
    }

    /// The most recently parked instance for `key` and module `digest`, exclusively.
    pub fn take(&mut self, key: &InstanceKey, digest: &str) -> Option<Live> {
        let at = self
            .entries
            .iter()
            .rposition(|e| e.digest == digest && e.key == *key)?;
        self.entries.remove(at).map(|entry| entry.live)
    }

    /// Parks an instance; returns the one evicted to make room (dropped by the caller outside
    /// the pool lock), or the instance itself when the pool keeps none.
    pub fn put(&mut self, key: &InstanceKey, digest: &str, live: Live) -> Option<Live> {
        if self.capacity == 0 {
            return Some(live);
        }
        let evicted = if self.entries.len() >= self.capacity {
            self.entries.pop_front().map(|entry| entry.live)
        } else {
            None
        };
        self.entries.push_back(Entry {
            key: key.clone(),
            digest: digest.to_string(),
            live,
        });
        evicted
    }

    /// Removes every idle instance of module `digest` (its module left the cache).
    pub fn purge(&mut self, digest: &str) -> Vec<Live> {
        let mut purged = Vec::new();
        let mut kept = VecDeque::with_capacity(self.entries.len());
        for entry in self.entries.drain(..) {
            if entry.digest == digest {
                purged.push(entry.live)
            } else {
                kept.push_back(entry)
            }
        }
        self.entries = kept;
        purged
    }

    /// Removes everything (shutdown).
    pub fn clear(&mut self) -> Vec<Live> {
        self.entries.drain(..).map(|entry| entry.live).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
