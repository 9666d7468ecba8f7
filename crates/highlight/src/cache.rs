//! Results kept per blob. The key is the file's content (a digest of it, then the content
//! compared in full on a hit) with its grammar: exactly what a Git blob id names, so the same
//! file at two commits or two paths is highlighted once, and no two contents ever share an
//! entry. Bounded in bytes, least recently used out first.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hashlink::LruCache;

use crate::{Grammar, Highlighted, Limits, Outcome, highlight};

/// (grammar, digest of the content, length of the content).
type Key = (Option<Grammar>, u64, usize);

/// Highlighting results by content and grammar, at most a byte budget of them.
pub struct Cache {
    entries: Mutex<Entries>,
    /// Keyed per process, so no file can be made to collide with another on purpose (and a
    /// digest match is checked against the content anyway).
    hasher: std::collections::hash_map::RandomState,
    max_bytes: usize,
    limits: Limits,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Entries {
    lru: LruCache<Key, Arc<Highlighted>>,
    bytes: usize,
}

/// What a [`Cache`] did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that highlighted.
    pub misses: u64,
    /// Results held.
    pub entries: usize,
    /// Bytes they hold.
    pub bytes: usize,
}

impl Cache {
    /// A cache of at most `max_bytes` of results, each made within `limits`.
    pub fn new(max_bytes: usize, limits: Limits) -> Cache {
        Cache {
            entries: Mutex::new(Entries {
                lru: LruCache::new_unbounded(),
                bytes: 0,
            }),
            hasher: std::collections::hash_map::RandomState::new(),
            max_bytes,
            limits,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The limits each run is made within.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// `text` highlighted as `grammar`: the kept result when this content was highlighted
    /// as this grammar before, else a new run (kept unless it is a plain result that costs
    /// nothing to redo, or bigger than the whole budget). Runs outside the lock, so two
    /// callers of one new file may both run it once.
    pub fn highlight(&self, grammar: Option<Grammar>, text: &str) -> Arc<Highlighted> {
        // Never kept (below), so neither hashed nor looked up: a large file's every page
        // would otherwise hash all of it.
        if grammar.is_none() || text.len() > self.limits.max_bytes {
            return Arc::new(highlight(grammar, text, self.limits));
        }
        let key = self.key(grammar, text);
        if let Some(found) = self.lookup(&key, text) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return found;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let result = Arc::new(highlight(grammar, text, self.limits));
        // Plain because there is no grammar or the file is too large: nothing was spent.
        // Timed out or failed: kept, so a hostile file costs its deadline once.
        let worth = !matches!(
            result.outcome(),
            Outcome::NoGrammar | Outcome::TooLarge { .. }
        );
        let size = result.heap_bytes();
        if worth && size <= self.max_bytes {
            let mut entries = self.lock();
            if let Some(old) = entries.lru.insert(key, result.clone()) {
                entries.bytes -= old.heap_bytes();
            }
            entries.bytes += size;
            while entries.bytes > self.max_bytes {
                match entries.lru.remove_lru() {
                    Some((_, old)) => entries.bytes -= old.heap_bytes(),
                    None => break,
                }
            }
        }
        result
    }

    /// The kept result of `text` as `grammar`, if there is one (counted as a hit): a caller
    /// that does other work beside a new run asks first.
    pub fn cached(&self, grammar: Option<Grammar>, text: &str) -> Option<Arc<Highlighted>> {
        if grammar.is_none() || text.len() > self.limits.max_bytes {
            return None;
        }
        let found = self.lookup(&self.key(grammar, text), text)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(found)
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStats {
        let entries = self.lock();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: entries.lru.len(),
            bytes: entries.bytes,
        }
    }

    fn key(&self, grammar: Option<Grammar>, text: &str) -> Key {
        (grammar, self.hasher.hash_one(text), text.len())
    }

    fn lookup(&self, key: &Key, text: &str) -> Option<Arc<Highlighted>> {
        let mut entries = self.lock();
        let found = entries.lru.get(key)?;
        (found.text() == text).then(|| found.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock leaves consistent entries (each step is whole).
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("max_bytes", &self.max_bytes)
            .field("limits", &self.limits)
            .field("stats", &self.stats())
            .finish()
    }
}
