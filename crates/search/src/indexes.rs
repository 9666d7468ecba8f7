//! The set of indexes under one directory: each repository's slot and current generation,
//! loading them at open, the generations a call pins, and the counters and information
//! answered about them. Builds (module `publish`), searches (module `search`) and navigation
//! (module `navigate`) are further `impl Indexes` blocks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use crate::cache::ResultCache;
use crate::config::IndexConfig;
use crate::error::SearchError;
use crate::overlay_cache::{BlobCache, OverlayCache};
use crate::rank::MAX_HITS;
use crate::repodir::{LOCK_FILE, generation_number, repo_components, repo_dir_idle};
use crate::store::Generation;

/// The current generation of one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexInfo {
    /// Repository name.
    pub repo: String,
    /// Full commit SHA the index was built from.
    pub commit: String,
    /// Index fingerprint it was built under ([`IndexConfig::fingerprint`]).
    pub fingerprint: String,
    /// Generation number (grows with each build of the repository).
    pub generation: u64,
    /// Documents (files), path-only ones included.
    pub documents: u64,
    /// Documents indexed by path only.
    pub path_only: u64,
    /// Bytes of searchable text.
    pub content_bytes: u64,
    /// Sum of the sizes of all files of the commit.
    pub corpus_bytes: u64,
    /// Bytes on disk (content store and index).
    pub bytes_on_disk: u64,
    /// When it was built.
    pub built_at: SystemTime,
}

/// Counters since [`Indexes::open`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexesStats {
    /// Builds that published a generation.
    pub builds: u64,
    /// Builds that found the same commit and fingerprint current and did nothing.
    pub builds_skipped: u64,
    /// Builds that failed.
    pub build_errors: u64,
    /// Documents reused from a previous generation.
    pub documents_reused: u64,
    /// Documents read from a source.
    pub documents_read: u64,
    /// Searches answered.
    pub searches: u64,
    /// Searches that ended in an error.
    pub search_errors: u64,
    /// Repositories with a current generation.
    pub repos_indexed: u64,
    /// Searches answered from the result cache (no verification: a later page, or a repeat).
    pub result_cache_hits: u64,
    /// Pages held by the result cache now.
    pub result_cache_entries: u64,
    /// Estimated bytes held by the result cache now.
    pub result_cache_bytes: u64,
}

/// One repository's slot: its current generation and the lock that serialises its builds.
pub(crate) struct Slot {
    pub(crate) current: RwLock<Option<Arc<Generation>>>,
    pub(crate) build: Mutex<()>,
    pub(crate) last_generation: AtomicU64,
}

impl Slot {
    /// The generation current now, held for as long as the caller keeps it.
    pub(crate) fn current(&self) -> Option<Arc<Generation>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Counters since open (see [`IndexesStats`]).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) builds: AtomicU64,
    pub(crate) builds_skipped: AtomicU64,
    pub(crate) build_errors: AtomicU64,
    pub(crate) documents_reused: AtomicU64,
    pub(crate) documents_read: AtomicU64,
    pub(crate) searches: AtomicU64,
    pub(crate) search_errors: AtomicU64,
    pub(crate) result_cache_hits: AtomicU64,
}

/// All repositories' indexes under one directory (the service passes `<data>/index`).
pub struct Indexes {
    pub(crate) dir: PathBuf,
    pub(crate) config: IndexConfig,
    pub(crate) threads: usize,
    pub(crate) repos: RwLock<BTreeMap<String, Arc<Slot>>>,
    pub(crate) counters: Counters,
    pub(crate) max_hits: usize,
    pub(crate) results: Mutex<ResultCache>,
    /// Trigram sets of overlay blobs (module `overlay`).
    pub(crate) blobs: Mutex<BlobCache>,
    /// Recent overlay generations (module `overlay`).
    pub(crate) overlays: Mutex<OverlayCache>,
}

impl Indexes {
    /// Opens (creating) `dir` and loads every repository's newest complete generation;
    /// deletes staging directories left by interrupted builds and older generations.
    pub fn open(dir: PathBuf, config: IndexConfig) -> Result<Self, SearchError> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| SearchError::io("creating the index directory", e))?;
        let threads = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(1, 4);
        let results = if config.result_cache {
            ResultCache::default()
        } else {
            ResultCache::new(0, 0)
        };
        let indexes = Indexes {
            dir,
            config,
            threads,
            repos: RwLock::new(BTreeMap::new()),
            counters: Counters::default(),
            max_hits: MAX_HITS,
            results: Mutex::new(results),
            blobs: Mutex::new(BlobCache::default()),
            overlays: Mutex::new(OverlayCache::default()),
        };
        let mut found = Vec::new();
        indexes.scan(&indexes.dir.clone(), &mut Vec::new(), &mut found);
        let mut repos = indexes
            .repos
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for (repo, generation) in found {
            let number = generation.meta.generation;
            repos.insert(
                repo,
                Arc::new(Slot {
                    current: RwLock::new(Some(Arc::new(generation))),
                    build: Mutex::new(()),
                    last_generation: AtomicU64::new(number),
                }),
            );
        }
        drop(repos);
        Ok(indexes)
    }

    /// Sets the most hits one part of a cluster search answers ([`Indexes::top_hits`];
    /// default [`MAX_HITS`]; at least 1). Drops the result cache.
    pub fn with_max_hits(mut self, max_hits: usize) -> Self {
        self.max_hits = max_hits.max(1);
        self.results
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self
    }

    /// Drops every kept answer: the result cache's hit lists, the kept overlay generations and
    /// the overlay blobs' trigram sets. The next search of any query runs cold (benchmarks
    /// time first pages this way).
    pub fn clear_result_cache(&self) {
        self.results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.overlays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.blobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Walks the index directory: a directory holding `gen-*`/`staging-*` entries is a
    /// repository directory; its relative path is the repository name.
    fn scan(&self, dir: &Path, name: &mut Vec<String>, found: &mut Vec<(String, Generation)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut generations = Vec::new();
        // Another process may be building here: its staging directory is not debris then.
        let idle = repo_dir_idle(dir);
        for entry in entries.filter_map(Result::ok) {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if file_name.starts_with("staging-") {
                // An interrupted build: never published, never loaded.
                if idle {
                    let _ = std::fs::remove_dir_all(&path);
                }
            } else if let Some(n) = generation_number(&file_name, "gen-") {
                generations.push((n, path));
            } else {
                name.push(file_name);
                self.scan(&path, name, found);
                name.pop();
            }
        }
        generations.sort_unstable_by_key(|(n, _)| std::cmp::Reverse(*n));
        let repo = name.join("/");
        let mut loaded = false;
        for (_, path) in generations {
            if !loaded && repo_components(&repo).is_ok() {
                match Generation::load(path.clone()) {
                    Ok(generation) if generation.meta.repo == repo => {
                        found.push((repo.clone(), generation));
                        loaded = true;
                        continue;
                    }
                    Ok(_) | Err(_) => {
                        tracing::warn!(repo, "discarding an unreadable index generation");
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&path);
        }
    }

    pub(crate) fn slot(&self, repo: &str) -> Option<Arc<Slot>> {
        self.repos
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(repo)
            .cloned()
    }

    pub(crate) fn slot_or_create(&self, repo: &str) -> Arc<Slot> {
        if let Some(slot) = self.slot(repo) {
            return slot;
        }
        self.repos
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(repo.to_owned())
            .or_insert_with(|| {
                Arc::new(Slot {
                    current: RwLock::new(None),
                    build: Mutex::new(()),
                    last_generation: AtomicU64::new(0),
                })
            })
            .clone()
    }

    pub(crate) fn repo_dir(&self, repo: &str) -> Result<PathBuf, SearchError> {
        let mut dir = self.dir.clone();
        for part in repo_components(repo)? {
            dir.push(part);
        }
        Ok(dir)
    }

    /// The current generation of `repo`, if it has one.
    pub fn current(&self, repo: &str) -> Option<IndexInfo> {
        let generation = self.slot(repo)?.current()?;
        let meta = &generation.meta;
        Some(IndexInfo {
            repo: repo.to_owned(),
            commit: meta.commit.clone(),
            fingerprint: meta.fingerprint.clone(),
            generation: meta.generation,
            documents: meta.documents,
            path_only: meta.path_only,
            content_bytes: meta.content_bytes,
            corpus_bytes: meta.corpus_bytes,
            bytes_on_disk: generation.disk_bytes(),
            built_at: SystemTime::UNIX_EPOCH + Duration::from_millis(meta.built_at_unix_ms),
        })
    }

    /// The repositories with a current generation, sorted.
    pub fn repos(&self) -> Vec<String> {
        self.repos
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, slot)| slot.current().is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The index fingerprint of builds from a source with `plugin_fingerprint`
    /// ([`IndexConfig::fingerprint`]).
    pub fn fingerprint(&self, plugin_fingerprint: &str) -> String {
        self.config.fingerprint(plugin_fingerprint)
    }

    /// Drops `repo`'s index (waits for a running build of it). Searches already running keep
    /// their generation until they finish; its files go with the last of them.
    pub fn remove(&self, repo: &str) -> Result<(), SearchError> {
        let repo_dir = self.repo_dir(repo)?;
        let Some(slot) = self.slot(repo) else {
            return Ok(());
        };
        let _building = slot.build.lock().unwrap_or_else(PoisonError::into_inner);
        let old = slot
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(old) = old {
            old.retire();
        }
        self.repos
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(repo);
        // Staging leftovers; generations still held by searches are deleted on their drop.
        if let Ok(entries) = std::fs::read_dir(&repo_dir) {
            for entry in entries.filter_map(Result::ok) {
                if entry.file_name().to_string_lossy().starts_with("staging-") {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let _ = std::fs::remove_file(repo_dir.join(LOCK_FILE));
        let _ = std::fs::remove_dir(&repo_dir);
        Ok(())
    }

    /// Counters since open.
    pub fn stats(&self) -> IndexesStats {
        let c = &self.counters;
        let (entries, bytes) = self
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .usage();
        IndexesStats {
            builds: c.builds.load(Ordering::Relaxed),
            builds_skipped: c.builds_skipped.load(Ordering::Relaxed),
            build_errors: c.build_errors.load(Ordering::Relaxed),
            documents_reused: c.documents_reused.load(Ordering::Relaxed),
            documents_read: c.documents_read.load(Ordering::Relaxed),
            searches: c.searches.load(Ordering::Relaxed),
            search_errors: c.search_errors.load(Ordering::Relaxed),
            repos_indexed: self.repos().len() as u64,
            result_cache_hits: c.result_cache_hits.load(Ordering::Relaxed),
            result_cache_entries: entries as u64,
            result_cache_bytes: bytes as u64,
        }
    }

    /// One generation per repository (sorted, deduplicated), held for a whole call, and the
    /// repositories without one. With `need_symbols`, a generation whose symbol table is
    /// still being written counts as not indexed.
    pub(crate) fn pinned(
        &self,
        repos: &[String],
        need_symbols: bool,
    ) -> (Vec<(String, Arc<Generation>)>, Vec<String>) {
        let names: BTreeSet<&str> = repos.iter().map(String::as_str).collect();
        let mut pinned = Vec::new();
        let mut not_indexed = Vec::new();
        for name in names {
            match self.slot(name).and_then(|slot| slot.current()) {
                Some(generation) if !need_symbols || generation.symbols().is_some() => {
                    pinned.push((name.to_owned(), generation));
                }
                Some(_) | None => not_indexed.push(name.to_owned()),
            }
        }
        (pinned, not_indexed)
    }
}
