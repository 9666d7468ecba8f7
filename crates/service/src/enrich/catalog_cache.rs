//! The catalog cache (W-29): a small LRU of discovered catalogs by commit and scope, bounded
//! in entries and artifact bytes, swept when idle; background preparation never evicts a
//! catalog a request used (W-31).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;
use wasmplugin::Catalog;

/// Catalogs kept (W-29).
const CATALOG_ENTRIES: usize = 64;
/// Artifact bytes kept in catalogs (W-29): the same 128 MiB budget that bounds what one
/// discovery reads.
const CATALOG_BYTES: usize = wasmplugin::CATALOG_ARTIFACT_BYTES as usize;

/// A catalog unused this long is dropped by the background sweep (W-29).
pub const CATALOG_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// What a catalog is cached under (W-29, G-2): storage root, repository, full commit SHA and
/// the registered scope, so a registration that changes the scope never finds a catalog of
/// the old one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct CatalogKey {
    pub(super) storage_root: String,
    pub(super) repo: String,
    pub(super) commit: String,
    pub(super) scope: String,
}

/// A small LRU of catalogs by [`CatalogKey`].
#[derive(Default)]
pub(super) struct CatalogCache {
    pub(super) entries: HashMap<CatalogKey, Cached>,
    order: VecDeque<CatalogKey>,
    bytes: usize,
    /// Lookups answered from the cache, for the hit ratio beside `discoveries`.
    pub(super) hits: u64,
}

/// A cached catalog and when it was last used (for the idle sweep).
pub(super) struct Cached {
    catalog: Arc<Catalog>,
    used: Instant,
    /// A request (a read or `availability`) used it; background preparation never evicts
    /// such an entry (W-31).
    requested: bool,
}

/// Who looks a catalog up: a request, bounded by its deadline, or background preparation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    Request,
    Preparation,
}

impl CatalogCache {
    pub(super) fn get(&mut self, key: &CatalogKey, lookup: Lookup) -> Option<Arc<Catalog>> {
        let found = self.entries.get_mut(key)?;
        if lookup == Lookup::Preparation {
            // Ready already: preparation neither refreshes it nor counts as its use.
            return Some(found.catalog.clone());
        }
        found.used = Instant::now();
        found.requested = true;
        let catalog = found.catalog.clone();
        self.order.retain(|k| k != key);
        self.order.push_back(key.clone());
        Some(catalog)
    }

    /// Caches `catalog`. A request's catalog evicts the least recently used ones as needed;
    /// a preparation's is kept only if it fits by evicting other prepared catalogs nobody
    /// asked for, never one a request used (W-31: warming new heads must not make current
    /// readers discover again).
    pub(super) fn put(&mut self, key: CatalogKey, catalog: Arc<Catalog>, lookup: Lookup) {
        let bytes = catalog.artifact_bytes();
        if lookup == Lookup::Preparation && !self.entries.contains_key(&key) {
            let over = |entries: usize, total: usize| {
                entries + 1 > CATALOG_ENTRIES || total + bytes > CATALOG_BYTES
            };
            let (mut entries, mut total) = (self.entries.len(), self.bytes);
            let mut evict = Vec::new();
            for k in &self.order {
                if !over(entries, total) {
                    break;
                }
                if let Some(c) = self.entries.get(k).filter(|c| !c.requested) {
                    evict.push(k.clone());
                    entries -= 1;
                    total -= c.catalog.artifact_bytes();
                }
            }
            if over(entries, total) {
                return;
            }
            for k in &evict {
                self.remove(k);
            }
            self.order.retain(|k| self.entries.contains_key(k));
        }
        self.bytes += bytes;
        let cached = Cached {
            catalog,
            used: Instant::now(),
            requested: lookup == Lookup::Request,
        };
        if let Some(old) = self.entries.insert(key.clone(), cached) {
            self.bytes -= old.catalog.artifact_bytes();
        }
        self.order.retain(|k| *k != key);
        self.order.push_back(key);
        while self.entries.len() > CATALOG_ENTRIES || self.bytes > CATALOG_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, key: &CatalogKey) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.catalog.artifact_bytes();
        }
    }

    /// Drops the catalogs unused since `now - CATALOG_IDLE`; answers how many.
    pub(super) fn sweep_idle(&mut self, now: Instant) -> usize {
        let idle: Vec<CatalogKey> = self
            .entries
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.used) >= CATALOG_IDLE)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &idle {
            self.remove(key);
        }
        self.order.retain(|k| self.entries.contains_key(k));
        idle.len()
    }
}
