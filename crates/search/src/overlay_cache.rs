//! What overlay searches (`overlay.rs`, S-8) keep for the next call: each added blob's
//! classification and trigram set, by blob id (bounded by [`BLOB_CACHE_BYTES`], least
//! recently used first), and the few most recent overlay generations (by repository, base
//! generation and commit; [`OVERLAY_CACHE_ENTRIES`], [`OVERLAY_CACHE_BYTES`]). The index set
//! (`indexes.rs`) owns one of each.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use crate::store::{DocKind, Generation};
use crate::trigram::Trigram;

/// Most bytes of trigram sets the blob cache holds (about 4 bytes per distinct trigram).
pub(crate) const BLOB_CACHE_BYTES: usize = 64 << 20;
/// Most overlay generations kept.
pub(crate) const OVERLAY_CACHE_ENTRIES: usize = 8;
/// Most bytes of added texts the kept overlay generations hold, all together.
pub(crate) const OVERLAY_CACHE_BYTES: usize = 256 << 20;

/// What the blob cache keeps of one blob.
struct BlobInfo {
    kind: DocKind,
    trigrams: Arc<[Trigram]>,
    /// Last use (the cache's clock).
    used: u64,
}

/// Trigram sets by blob id, bounded by bytes; the least recently used go first.
#[derive(Default)]
pub(crate) struct BlobCache {
    blobs: HashMap<String, BlobInfo>,
    bytes: usize,
    clock: u64,
}

impl BlobCache {
    pub(crate) fn get(&mut self, blob: &str) -> Option<(DocKind, Arc<[Trigram]>)> {
        self.clock += 1;
        let clock = self.clock;
        self.blobs.get_mut(blob).map(|info| {
            info.used = clock;
            (info.kind, info.trigrams.clone())
        })
    }

    pub(crate) fn insert(&mut self, blob: &str, kind: DocKind, trigrams: Arc<[Trigram]>) {
        let bytes = entry_bytes(blob, &trigrams);
        if bytes > BLOB_CACHE_BYTES {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.blobs.insert(
            blob.to_owned(),
            BlobInfo {
                kind,
                trigrams,
                used: self.clock,
            },
        ) {
            self.bytes -= entry_bytes(blob, &old.trigrams);
        }
        self.bytes += bytes;
        if self.bytes > BLOB_CACHE_BYTES {
            // Evict the older half at once: one sort per many inserts.
            let mut ages: Vec<u64> = self.blobs.values().map(|info| info.used).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            let mut freed = 0;
            self.blobs.retain(|blob, info| {
                let keep = info.used > cut;
                if !keep {
                    freed += entry_bytes(blob, &info.trigrams);
                }
                keep
            });
            self.bytes -= freed;
        }
    }
}

impl BlobCache {
    /// Drops every trigram set.
    pub(crate) fn clear(&mut self) {
        self.blobs.clear();
        self.bytes = 0;
    }
}

fn entry_bytes(blob: &str, trigrams: &[Trigram]) -> usize {
    blob.len() + std::mem::size_of_val(trigrams) + 64
}

/// One kept overlay generation.
struct Kept {
    repo: String,
    base: Weak<Generation>,
    commit: String,
    generation: Arc<Generation>,
    bytes: usize,
}

/// The most recent overlay generations (front = most recently used).
#[derive(Default)]
pub(crate) struct OverlayCache {
    kept: VecDeque<Kept>,
    bytes: usize,
}

impl OverlayCache {
    pub(crate) fn get(
        &mut self,
        repo: &str,
        base: &Arc<Generation>,
        commit: &str,
    ) -> Option<Arc<Generation>> {
        // An overlay over a base that is no longer current can never be asked for again.
        self.drop_where(|kept| {
            kept.repo == repo && !std::ptr::eq(kept.base.as_ptr(), Arc::as_ptr(base))
        });
        let at = self
            .kept
            .iter()
            .position(|kept| kept.repo == repo && kept.commit == commit)?;
        let kept = self.kept.remove(at)?;
        let generation = kept.generation.clone();
        self.kept.push_front(kept);
        Some(generation)
    }

    pub(crate) fn insert(
        &mut self,
        repo: &str,
        base: &Arc<Generation>,
        commit: &str,
        generation: Arc<Generation>,
        bytes: usize,
    ) {
        self.drop_where(|kept| kept.repo == repo && kept.commit == commit);
        if bytes > OVERLAY_CACHE_BYTES {
            return;
        }
        self.bytes += bytes;
        self.kept.push_front(Kept {
            repo: repo.to_owned(),
            base: Arc::downgrade(base),
            commit: commit.to_owned(),
            generation,
            bytes,
        });
        while self.kept.len() > OVERLAY_CACHE_ENTRIES || self.bytes > OVERLAY_CACHE_BYTES {
            if let Some(last) = self.kept.pop_back() {
                self.bytes -= last.bytes;
            }
        }
    }

    fn drop_where(&mut self, gone: impl Fn(&Kept) -> bool) {
        let mut freed = 0;
        self.kept.retain(|kept| {
            let drop = gone(kept);
            if drop {
                freed += kept.bytes;
            }
            !drop
        });
        self.bytes -= freed;
    }

    /// Drops every kept overlay.
    pub(crate) fn clear(&mut self) {
        self.kept.clear();
        self.bytes = 0;
    }
}
