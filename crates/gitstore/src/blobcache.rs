//! Decoded text of recently read blobs, so a continuation read of a big file (the next 200
//! lines, and the next) does not find and inflate the same blob again.
//!
//! Keyed by blob id alone: a blob id names its bytes, so one entry serves every commit,
//! path and repository that holds that blob. Nothing about access lives here: scope,
//! retention and the path lookup in the commit's tree all happen before the cache is asked.

use crate::Text;
use gix::ObjectId;
use hashlink::LruCache;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of decoded text the cache holds by default (64 MiB).
pub const DEFAULT_BLOB_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// A least-recently-used cache of UTF-8 blob texts with their line tables, bounded in bytes
/// (text plus table). Only text is cached: binary, non-UTF-8 and LFS-pointer answers are
/// errors, cheap to recompute from the header.
pub(crate) struct BlobCache {
    state: Mutex<State>,
}

struct State {
    entries: LruCache<ObjectId, Arc<Text>>,
    /// Bytes held (texts and line tables).
    bytes: usize,
    /// At most this many bytes; 0 turns the cache off.
    capacity: usize,
}

impl BlobCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                entries: LruCache::new_unbounded(),
                bytes: 0,
                capacity,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The text of blob `id`, if cached (and marks it recently used).
    pub(crate) fn get(&self, id: &ObjectId) -> Option<Arc<Text>> {
        self.state().entries.get(id).cloned()
    }

    /// Keeps `text` as the text of blob `id`, evicting the least recently used entries to
    /// make room. A text over half the capacity is not kept: it would evict everything else
    /// for one file.
    pub(crate) fn insert(&self, id: ObjectId, text: Arc<Text>) {
        let mut state = self.state();
        if text.footprint() > state.capacity / 2 || state.entries.contains_key(&id) {
            return;
        }
        state.bytes += text.footprint();
        state.entries.insert(id, text);
        state.evict_to_capacity();
    }

    /// Changes the bound (0 turns the cache off and empties it).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut state = self.state();
        state.capacity = capacity;
        state.evict_to_capacity();
    }

    /// (entries, text bytes) held now.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let state = self.state();
        (state.entries.len(), state.bytes)
    }
}

impl State {
    fn evict_to_capacity(&mut self) {
        while self.bytes > self.capacity {
            match self.entries.remove_lru() {
                Some((_, text)) => self.bytes -= text.footprint(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    /// A one-line text of `len` bytes: it costs `len + 4` (one line start).
    fn text(len: usize) -> Arc<Text> {
        Arc::new(Text::new("x".repeat(len)).expect("small"))
    }

    /// R-2 support: the cache stays within its byte bound, evicting least recently used
    /// entries first, and never keeps a text over half of it.
    #[test]
    fn bounded_in_bytes_lru_first() {
        let cache = BlobCache::new(100);
        cache.insert(id(1), text(36));
        cache.insert(id(2), text(36));
        assert!(
            cache.get(&id(1)).is_some(),
            "1 is now the most recently used"
        );
        cache.insert(id(3), text(36));
        assert!(cache.get(&id(2)).is_none(), "2 was the least recently used");
        assert!(cache.get(&id(1)).is_some() && cache.get(&id(3)).is_some());
        assert_eq!(cache.usage(), (2, 80));
        cache.insert(id(4), text(47));
        assert!(cache.get(&id(4)).is_none(), "over half the capacity");
        cache.set_capacity(0);
        assert_eq!(cache.usage(), (0, 0));
        cache.insert(id(5), text(1));
        assert!(
            cache.get(&id(5)).is_none(),
            "a zero capacity caches nothing"
        );
    }
}
