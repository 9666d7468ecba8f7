//! Code search for Context Source Graph (SPEC S-1, S-3, S-4): one index per repository at
//! one commit, published atomically as a *generation*, searched with literal or regular
//! expression queries whose answers equal `git grep -n` on the same commit.
//!
//! How a search runs: the query (escaped when literal) becomes a `regex` and, through its
//! `regex-syntax` HIR, a boolean query over trigrams (module `trigram`); the posting lists of the
//! generation give the candidate documents; each candidate's stored text (a memory-mapped
//! content store, never the Git pack) is verified line by line; hits are ranked (file names,
//! then definition-looking lines, then the rest, each in repository/path/line order) and cut
//! into pages with an opaque cursor bound to the generations it was made from.
//!
//! Bounds and reuse: one search collects at most [`MAX_HITS`] hits (configurable with
//! [`Indexes::with_max_hits`]): all file-name hits first, then line hits in repository, path
//! and line order; verification stops at the cap and [`SearchStats::truncated`] says so. The
//! ranking then orders the hits collected, so with the cap reached it is over the first hits in
//! path order, not over every hit of the corpus. The complete ranked list of recent searches is
//! kept in a small LRU (32 lists, 64 MiB), keyed by the request without cursor and page size and
//! by the exact generations searched: a later page slices it instead of verifying again
//! ([`SearchStats::cached`], [`IndexesStats::result_cache_hits`]). Cursors carry a stable hash
//! of the request ([`SearchRequest::stable_hash`]), so they survive a server upgrade (as long
//! as the generations they name are current).
//!
//! On-disk layout (module `store`): `<dir>/<owner>/<name>/gen-<n>/` holding `content.bin`
//! (document texts), `docs.bin` (document table), `postings.bin` (trigram → document ids) and
//! `meta.json`; builds write `staging-<n>-<pid>/` and publish it with one rename.
//!
//! Semantics worth knowing: a match never spans a line (like `git grep`), so a query
//! containing a line break finds nothing; case-insensitive means Unicode simple case folding
//! (the `regex` crate's `(?i)`); `\w`, `\d`, `\s`, `\b` and POSIX classes follow the
//! `regex` crate (Unicode-aware except POSIX classes, which are ASCII).

mod build;
mod cache;
mod candidates;
mod config;
mod disk;
mod error;
mod lang;
mod navigate;
mod page;
mod plan;
mod rank;
mod request;
mod source;
mod store;
mod symtab;
mod trigram;
mod verify;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

pub use config::{DEFAULT_MAX_FILE_BYTES, IndexConfig, plugin_part};
pub use error::SearchError;
pub use lang::{DocLang, MAX_LANG_BYTES, known_langs, lang_of};
pub use navigate::{
    Definition, Definitions, DefinitionsRequest, IndexedOutline, MAX_DEFINITIONS, MAX_SYMBOL_BYTES,
};
pub use page::{MAX_LIMIT, SNIPPET_CHARS};
pub use plan::{MAX_QUERY_BYTES, REGEX_SIZE_LIMIT};
pub use rank::MAX_HITS;
pub use request::{Hit, PathOnly, RepoHits, SearchRequest, SearchResults, SearchStats};
pub use source::{BuildProgress, BuildStats, MAX_FAILURE_MESSAGES, Source, SourceEntry, Transform};
pub use symbols::{Symbol, SymbolKind};
pub use verify::SEARCH_BUDGET;

use cache::ResultCache;
use disk::FORMAT_VERSION;
use rank::RankedList;
use request::{canonical_request, request_hash};
use store::{Generation, Meta};

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
    /// Ranked hit lists held by the result cache now.
    pub result_cache_entries: u64,
    /// Estimated bytes held by the result cache now.
    pub result_cache_bytes: u64,
}

/// Where a search's ranked hit list comes from.
enum HitList {
    /// The result cache.
    Cached(Arc<RankedList>),
    /// A search with this compiled query.
    Miss(plan::Compiled),
}

/// One repository's slot: its current generation and the lock that serialises its builds.
struct Slot {
    current: RwLock<Option<Arc<Generation>>>,
    build: Mutex<()>,
    last_generation: AtomicU64,
}

impl Slot {
    fn current(&self) -> Option<Arc<Generation>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Default)]
struct Counters {
    builds: AtomicU64,
    builds_skipped: AtomicU64,
    build_errors: AtomicU64,
    documents_reused: AtomicU64,
    documents_read: AtomicU64,
    searches: AtomicU64,
    search_errors: AtomicU64,
    result_cache_hits: AtomicU64,
}

/// All repositories' indexes under one directory (the service passes `<data>/index`).
pub struct Indexes {
    dir: PathBuf,
    config: IndexConfig,
    threads: usize,
    repos: RwLock<BTreeMap<String, Arc<Slot>>>,
    counters: Counters,
    max_hits: usize,
    results: Mutex<ResultCache>,
}

/// Where and as what one build writes its generation.
#[derive(Clone, Copy)]
struct Staging<'a> {
    repo: &'a str,
    commit: &'a str,
    number: u64,
    dir: &'a Path,
    fingerprint: &'a str,
}

/// Checks a repository name and answers its directory components.
fn repo_components(repo: &str) -> Result<Vec<&str>, SearchError> {
    let invalid = || SearchError::InvalidRepo {
        repo: repo.to_owned(),
    };
    let parts: Vec<&str> = repo.split('/').collect();
    if repo.is_empty() || repo.len() > 512 {
        return Err(invalid());
    }
    for part in &parts {
        let ok = !part.is_empty()
            && !part.starts_with('.')
            && !part.starts_with("gen-")
            && !part.starts_with("staging-")
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !ok {
            return Err(invalid());
        }
    }
    Ok(parts)
}

/// The lock file that serialises builds of one repository across processes.
const LOCK_FILE: &str = ".build.lock";

/// Takes the repository directory's build lock (blocking); released when the file drops.
fn lock_repo_dir(repo_dir: &Path) -> Result<std::fs::File, SearchError> {
    std::fs::create_dir_all(repo_dir)
        .map_err(|e| SearchError::io("creating an index directory", e))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(repo_dir.join(LOCK_FILE))
        .map_err(|e| SearchError::io("opening the index build lock", e))?;
    file.lock()
        .map_err(|e| SearchError::io("taking the index build lock", e))?;
    Ok(file)
}

/// Whether no process is building in `repo_dir` now (its lock is free).
fn repo_dir_idle(repo_dir: &Path) -> bool {
    match std::fs::File::open(repo_dir.join(LOCK_FILE)) {
        Ok(file) => file.try_lock_shared().is_ok(),
        Err(_) => true,
    }
}

fn generation_number(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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

    /// Sets the most hits one search collects (default [`MAX_HITS`]; at least 1). Mostly for
    /// tests; drops the result cache.
    pub fn with_max_hits(mut self, max_hits: usize) -> Self {
        self.max_hits = max_hits.max(1);
        self.results
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self
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

    fn slot(&self, repo: &str) -> Option<Arc<Slot>> {
        self.repos
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(repo)
            .cloned()
    }

    fn slot_or_create(&self, repo: &str) -> Arc<Slot> {
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

    /// Makes the newest generation on disk current when another process published it after
    /// this one loaded (called under the repository's lock file).
    fn adopt_newest(&self, repo: &str, repo_dir: &Path, slot: &Slot) {
        let newest = std::fs::read_dir(repo_dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| generation_number(&e.file_name().to_string_lossy(), "gen-"))
            .max();
        let Some(newest) = newest else {
            return;
        };
        if newest <= slot.last_generation.load(Ordering::Relaxed) {
            return;
        }
        match Generation::load(repo_dir.join(format!("gen-{newest}"))) {
            Ok(generation) if generation.meta.repo == repo => {
                slot.last_generation.store(newest, Ordering::Relaxed);
                // Not retired here: its directory belongs to the process that replaced it.
                slot.current
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .replace(Arc::new(generation));
            }
            Ok(_) | Err(_) => {
                tracing::warn!(
                    repo,
                    "ignoring an unreadable index generation of another process"
                );
                slot.last_generation.store(newest, Ordering::Relaxed);
            }
        }
    }

    fn repo_dir(&self, repo: &str) -> Result<PathBuf, SearchError> {
        let mut dir = self.dir.clone();
        for part in repo_components(repo)? {
            dir.push(part);
        }
        Ok(dir)
    }

    /// Builds the index of (repo, commit) and publishes it atomically as that repo's current
    /// generation. Reuses documents of the repo's previous generation whose blob id is unchanged
    /// (no re-read from the Source). Searches running meanwhile answer from the previous
    /// generation without waiting. Same commit + same fingerprint already current → no-op.
    /// Builds of one repository run one at a time; `progress` is called from this thread.
    pub fn build(
        &self,
        repo: &str,
        commit: &str,
        source: &dyn Source,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<BuildStats, SearchError> {
        self.build_counted(repo, commit, source, progress, false)
    }

    /// Builds (repo, commit) from scratch even when it is current, reading every document
    /// from the source (no reuse): `csg index rebuild`, for an index suspected damaged.
    /// Searches keep answering from the previous generation meanwhile, as with [`build`].
    ///
    /// [`build`]: Indexes::build
    pub fn rebuild(
        &self,
        repo: &str,
        commit: &str,
        source: &dyn Source,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<BuildStats, SearchError> {
        self.build_counted(repo, commit, source, progress, true)
    }

    fn build_counted(
        &self,
        repo: &str,
        commit: &str,
        source: &dyn Source,
        progress: &mut dyn FnMut(BuildProgress),
        fresh: bool,
    ) -> Result<BuildStats, SearchError> {
        let result = self.build_inner(repo, commit, source, progress, fresh);
        if result.is_err() {
            self.counters.build_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn build_inner(
        &self,
        repo: &str,
        commit: &str,
        source: &dyn Source,
        progress: &mut dyn FnMut(BuildProgress),
        fresh: bool,
    ) -> Result<BuildStats, SearchError> {
        let started = Instant::now();
        let repo_dir = self.repo_dir(repo)?;
        let slot = self.slot_or_create(repo);
        let _building = slot.build.lock().unwrap_or_else(PoisonError::into_inner);
        // Several processes may share the index directory (every `csg mcp` of a user does):
        // builds of one repository take its lock file, then adopt whatever generation another
        // process published meanwhile, so numbers never collide and work is not repeated.
        let _locked = lock_repo_dir(&repo_dir)?;
        self.adopt_newest(repo, &repo_dir, &slot);
        let previous = slot.current();
        let plugin_fingerprint = source.plugin_fingerprint();
        let fingerprint = self.config.fingerprint(&plugin_fingerprint);
        if let Some(current) = &previous
            && !fresh
            && current.meta.commit == commit
            && current.meta.fingerprint == fingerprint
        {
            self.counters.builds_skipped.fetch_add(1, Ordering::Relaxed);
            // Phase two did not finish for this generation (the process stopped, or writing
            // failed): do it now. A transform may have shaped the stored texts.
            let symbols = match current.symbols() {
                Some(table) => table.len() as u64,
                None => {
                    self.symbols_phase(current, None, source, &[], !plugin_fingerprint.is_empty())
                }
            };
            return Ok(BuildStats {
                documents: current.meta.documents,
                reused: 0,
                read: 0,
                path_only: current.meta.path_only,
                bytes: current.disk_bytes(),
                content_bytes: current.meta.content_bytes,
                corpus_bytes: current.meta.corpus_bytes,
                elapsed: started.elapsed(),
                skipped_same: true,
                generation: current.meta.generation,
                transformed: 0,
                skipped: 0,
                transform_failures: 0,
                failure_messages: Vec::new(),
                transform_failures_by_step: BTreeMap::new(),
                symbols,
                searchable_after: Duration::ZERO,
            });
        }
        let mut entries = source
            .entries()
            .map_err(|message| SearchError::Source { message })?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries.dedup_by(|a, b| a.path == b.path);
        if entries.len() >= u32::MAX as usize {
            return Err(SearchError::Source {
                message: "too many files to index".into(),
            });
        }

        let number = slot.last_generation.load(Ordering::Relaxed) + 1;
        let staging = repo_dir.join(format!("staging-{number}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|e| SearchError::io("creating a staging directory", e))?;
        // Documents are reused only from a generation shaped by the same transform (P-7: no
        // mixing of derived-state hook sources).
        let reusable = previous.as_deref().filter(|g| {
            !fresh && plugin_part(&g.meta.fingerprint) == Some(plugin_fingerprint.as_str())
        });
        let built = self.write_staging(
            &Staging {
                repo,
                commit,
                number,
                dir: &staging,
                fingerprint: &fingerprint,
            },
            &entries,
            source,
            reusable,
            progress,
        );
        let counts = match built {
            Ok(counts) => counts,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(error);
            }
        };
        let published = repo_dir.join(format!("gen-{number}"));
        let _ = std::fs::remove_dir_all(&published);
        if let Err(error) = std::fs::rename(&staging, &published) {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(SearchError::io("publishing an index generation", error));
        }
        let generation = Arc::new(Generation::load(published)?);
        slot.last_generation.store(number, Ordering::Relaxed);
        let old = slot
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(generation.clone());
        if let Some(old) = old {
            // Deleted when the last search holding it finishes.
            old.retire();
        }
        // Phase two: the generation answers searches already; `definitions` and `references`
        // wait for its symbol table, `outline` parses meanwhile.
        let searchable_after = started.elapsed();
        let symbols = self.symbols_phase(&generation, reusable, source, &counts.replaced, false);
        self.counters.builds.fetch_add(1, Ordering::Relaxed);
        self.counters
            .documents_reused
            .fetch_add(counts.reused, Ordering::Relaxed);
        self.counters
            .documents_read
            .fetch_add(counts.read, Ordering::Relaxed);
        Ok(BuildStats {
            documents: generation.meta.documents,
            reused: counts.reused,
            read: counts.read,
            path_only: counts.path_only,
            bytes: generation.disk_bytes(),
            content_bytes: counts.content_bytes,
            corpus_bytes: counts.corpus_bytes,
            elapsed: started.elapsed(),
            skipped_same: false,
            generation: number,
            transformed: counts.transformed,
            skipped: counts.skipped,
            symbols,
            searchable_after,
            transform_failures: counts.transform_failures,
            failure_messages: counts.failure_messages,
            transform_failures_by_step: BTreeMap::new(),
        })
    }

    /// Phase two of a build: extracts (or copies from `previous`) the definitions of every
    /// text document and writes the symbol table beside the published generation. Answers
    /// the symbols stored; a failure is logged and leaves the table to the next build.
    fn symbols_phase(
        &self,
        generation: &Generation,
        previous: Option<&Generation>,
        source: &dyn Source,
        replaced: &[u32],
        all_from_source: bool,
    ) -> u64 {
        let input = build::SymbolInput {
            generation,
            previous,
            source,
            replaced,
            all_from_source,
            threads: self.threads.clamp(1, 2),
        };
        let written = build::extract_symbols(&input)
            .and_then(|per_doc| generation.publish_symbols(&per_doc).map(|t| t.len() as u64));
        written.unwrap_or_else(|error| {
            tracing::warn!(
                repo = %generation.meta.repo,
                %error,
                "the symbol table was not written: definitions and references wait for the next build"
            );
            0
        })
    }

    fn write_staging(
        &self,
        at: &Staging<'_>,
        entries: &[SourceEntry],
        source: &dyn Source,
        previous: Option<&Generation>,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<build::Counts, SearchError> {
        let Staging {
            repo,
            commit,
            number,
            dir: staging,
            fingerprint,
        } = *at;
        let input = build::BuildInput {
            strict_transforms: self.config.strict_transforms,
            staging,
            entries,
            source,
            previous,
            max_file_bytes: self.config.max_file_bytes,
            threads: self.threads.clamp(1, 2),
        };
        let (docs, counts) = build::write_generation(&input, progress)?;
        store::write_docs(&staging.join("docs.bin"), &docs)?;
        let meta = Meta {
            format: FORMAT_VERSION,
            repo: repo.to_owned(),
            commit: commit.to_owned(),
            fingerprint: fingerprint.to_owned(),
            generation: number,
            documents: docs.len() as u64,
            path_only: counts.path_only,
            content_bytes: counts.content_bytes,
            corpus_bytes: counts.corpus_bytes,
            built_at_unix_ms: unix_ms(SystemTime::now()),
        };
        store::write_meta(&staging.join("meta.json"), &meta)?;
        Ok(counts)
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

    /// Runs a search over the current generations of the requested repositories. Every
    /// repository is read at one generation for the whole call, so hits never mix commits.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResults, SearchError> {
        self.search_mode(request, None)
    }

    /// A search, or with `references` the occurrences of that name (see
    /// [`Indexes::references`]).
    fn search_mode(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
    ) -> Result<SearchResults, SearchError> {
        let result = self.search_inner(request, references);
        match &result {
            Ok(_) => self.counters.searches.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.search_errors.fetch_add(1, Ordering::Relaxed),
        };
        result
    }

    /// One generation per repository (sorted, deduplicated), held for a whole call, and the
    /// repositories without one. With `need_symbols`, a generation whose symbol table is
    /// still being written counts as not indexed.
    fn pinned(
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

    fn search_inner(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
    ) -> Result<SearchResults, SearchError> {
        let started = Instant::now();
        let deadline = started + SEARCH_BUDGET;
        plan::check_length(&request.query)?;
        let limit = request.limit.clamp(1, MAX_LIMIT);

        // References need the symbol table (phase two of the build) to mark definitions.
        let (pinned, not_indexed) = self.pinned(&request.repos, references.is_some());
        let generations: Vec<(String, String, u64)> = pinned
            .iter()
            .map(|(name, g)| (name.clone(), g.meta.commit.clone(), g.meta.generation))
            .collect();
        let request_hash = request_hash(request, references.is_some());
        let mut canonical = canonical_request(request);
        if references.is_some() {
            // Another hit list than the same regex searched: no file names, other ranks.
            canonical.extend_from_slice(b"\nreferences");
        }
        let key = cache::Key {
            request: canonical,
            generations: generations.clone(),
        };
        let arcs: Vec<&Arc<Generation>> = pinned.iter().map(|(_, g)| g).collect();
        let cached = self
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key, &arcs);
        // A cached hit list needs no regex, and compiling one is most of a small search
        // (over 100 µs for a case-insensitive word): only a miss compiles. A query that does
        // not compile is never cached, so its error is still reported, before the cursor's.
        let hit_list = match cached {
            Some(list) => HitList::Cached(list),
            None => HitList::Miss(plan::compile(request)?),
        };
        let offset = page::start(request.cursor.as_deref(), &request_hash, &generations)?;

        let mut stats = SearchStats {
            documents: pinned.iter().map(|(_, g)| g.docs.len() as u64).sum(),
            ..SearchStats::default()
        };
        let list = match hit_list {
            HitList::Cached(list) => {
                self.counters
                    .result_cache_hits
                    .fetch_add(1, Ordering::Relaxed);
                stats.cached = true;
                list
            }
            HitList::Miss(compiled) => {
                let search = rank::Collect {
                    pinned: &pinned,
                    compiled: &compiled,
                    references,
                    max_hits: self.max_hits,
                    threads: self.threads,
                    deadline,
                };
                let list = Arc::new(rank::rank(&search, &mut stats)?);
                self.results
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, &arcs, list.clone());
                list
            }
        };
        stats.candidate_files = list.candidate_files;
        stats.truncated = list.truncated;
        stats.total_hits = list.hits.len() as u64;
        let page = page::cut(&list, offset, limit, &pinned, request_hash, generations);
        stats.elapsed = started.elapsed();
        Ok(SearchResults {
            repos: page.repos,
            next_cursor: page.next_cursor,
            stats,
            not_indexed,
        })
    }
}
