//! The result cache: the pages of recent searches, so that the same page asked again (a
//! repeated call, a retry, a second client) costs a lookup.
//!
//! An entry is keyed by the request's canonical encoding (query and filters) with the page's
//! own terms (cursor, size, count) and the (repository, commit, generation number) it was
//! computed from, and it is only
//! used when the searcher pinned the very same generation objects: the entry holds them weakly
//! (pointer identity, no ABA while a `Weak` lives), so it never keeps an old generation's files
//! alive and never mixes generations. Bounded by entry count and by an estimate of its bytes;
//! least recently used entries go first.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use crate::rank::RankedList;
use crate::store::Generation;

/// Most entries held.
pub(crate) const RESULT_CACHE_ENTRIES: usize = 32;
/// Most bytes held (estimated from the pages), all entries together.
pub(crate) const RESULT_CACHE_BYTES: usize = 64 << 20;

/// What a list is the answer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// The request's canonical encoding (see `canonical_request`).
    pub request: Vec<u8>,
    /// (repository, commit, generation) of every searched repository, in search order.
    pub generations: Vec<(String, String, u64)>,
}

impl Key {
    fn bytes(&self) -> usize {
        self.request.len()
            + self
                .generations
                .iter()
                .map(|(repo, commit, _)| repo.len() + commit.len() + 8)
                .sum::<usize>()
    }
}

struct Entry<G> {
    key: Key,
    pinned: Vec<Weak<G>>,
    list: Arc<RankedList>,
    bytes: usize,
}

impl<G> Entry<G> {
    fn same_generations(&self, pinned: &[&Arc<G>]) -> bool {
        self.pinned.len() == pinned.len()
            && self
                .pinned
                .iter()
                .zip(pinned)
                .all(|(weak, arc)| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(arc)))
    }

    fn alive(&self) -> bool {
        self.pinned.iter().all(|weak| weak.strong_count() > 0)
    }
}

/// An LRU of pages (front = most recently used); `G` is the generation type (generic
/// for the unit tests).
pub(crate) struct ResultCache<G = Generation> {
    entries: VecDeque<Entry<G>>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<G> Default for ResultCache<G> {
    fn default() -> Self {
        ResultCache::new(RESULT_CACHE_ENTRIES, RESULT_CACHE_BYTES)
    }
}

impl<G> ResultCache<G> {
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        ResultCache {
            entries: VecDeque::new(),
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    /// The list of `key` computed over exactly the generations `pinned` (same objects).
    pub(crate) fn get(&mut self, key: &Key, pinned: &[&Arc<G>]) -> Option<Arc<RankedList>> {
        let index = self.entries.iter().position(|e| &e.key == key)?;
        if !self.entries[index].same_generations(pinned) {
            // Same numbers, other objects (an index removed and rebuilt): never valid again.
            self.remove(index);
            return None;
        }
        let entry = self.entries.remove(index)?;
        let list = entry.list.clone();
        self.entries.push_front(entry);
        Some(list)
    }

    /// Stores the list of `key` computed over `pinned`; evicts the least recently used entries
    /// past the bounds. A list larger than the byte bound alone is not stored.
    pub(crate) fn insert(&mut self, key: Key, pinned: &[&Arc<G>], list: Arc<RankedList>) {
        // Entries whose generations are gone can never match again.
        let mut index = 0;
        while index < self.entries.len() {
            if !self.entries[index].alive() || self.entries[index].key == key {
                self.remove(index);
            } else {
                index += 1;
            }
        }
        let bytes = list.bytes() + key.bytes() + std::mem::size_of::<Entry<G>>();
        if bytes > self.max_bytes || self.max_entries == 0 {
            return;
        }
        self.bytes += bytes;
        self.entries.push_front(Entry {
            key,
            pinned: pinned.iter().map(|arc| Arc::downgrade(arc)).collect(),
            list,
            bytes,
        });
        while self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            let last = self.entries.len() - 1;
            self.remove(last);
        }
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Entries and estimated bytes held.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }

    fn remove(&mut self, index: usize) {
        if let Some(entry) = self.entries.remove(index) {
            self.bytes -= entry.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::Ranked;

    fn key(query: &str, generation: u64) -> Key {
        Key {
            request: query.as_bytes().to_vec(),
            generations: vec![("o/r".into(), "c".into(), generation)],
        }
    }

    fn list(hits: usize) -> Arc<RankedList> {
        Arc::new(RankedList {
            hits: (0..hits)
                .map(|doc| Ranked::FileName {
                    repo: 0,
                    doc: doc as u32,
                })
                .collect(),
            more: false,
            found: hits as u64,
            exact: true,
            candidate_files: 0,
            files_verified: 0,
            marks: Vec::new(),
        })
    }

    #[test]
    fn hits_need_the_same_generation_objects() {
        let mut cache: ResultCache<u64> = ResultCache::default();
        let generation = Arc::new(1u64);
        cache.insert(key("q", 1), &[&generation], list(3));
        assert_eq!(
            cache.get(&key("q", 1), &[&generation]).unwrap().hits.len(),
            3
        );
        assert!(cache.get(&key("other", 1), &[&generation]).is_none());
        assert!(cache.get(&key("q", 2), &[&generation]).is_none());
        // Same key, another object with the same numbers: refused and dropped.
        let lookalike = Arc::new(1u64);
        assert!(cache.get(&key("q", 1), &[&lookalike]).is_none());
        assert_eq!(cache.usage(), (0, 0));
        // The cache does not keep a generation alive; dead entries go on the next insert.
        cache.insert(key("q", 1), &[&generation], list(3));
        drop(generation);
        cache.insert(key("p", 1), &[&lookalike], list(1));
        assert_eq!(cache.usage().0, 1);
    }

    #[test]
    fn bounded_by_entries_and_bytes_lru_first() {
        let generation = Arc::new(0u64);
        let mut cache: ResultCache<u64> = ResultCache::new(2, usize::MAX);
        cache.insert(key("a", 1), &[&generation], list(1));
        cache.insert(key("b", 1), &[&generation], list(1));
        assert!(cache.get(&key("a", 1), &[&generation]).is_some()); // a is now the newest
        cache.insert(key("c", 1), &[&generation], list(1));
        assert!(cache.get(&key("b", 1), &[&generation]).is_none());
        assert!(cache.get(&key("a", 1), &[&generation]).is_some());
        assert!(cache.get(&key("c", 1), &[&generation]).is_some());

        let one = list(1000).bytes() + key("a", 1).bytes() + std::mem::size_of::<Entry<u64>>();
        let mut cache: ResultCache<u64> = ResultCache::new(32, one * 2);
        cache.insert(key("a", 1), &[&generation], list(1000));
        cache.insert(key("b", 1), &[&generation], list(1000));
        cache.insert(key("c", 1), &[&generation], list(1000));
        assert_eq!(cache.usage(), (2, one * 2));
        assert!(cache.get(&key("a", 1), &[&generation]).is_none());
        // Larger than the whole bound: not stored.
        cache.insert(key("d", 1), &[&generation], list(10_000));
        assert!(cache.get(&key("d", 1), &[&generation]).is_none());
        assert_eq!(cache.usage().0, 2);
        cache.clear();
        assert_eq!(cache.usage(), (0, 0));
    }
}
