//! Builds: a repository's build lock taken, the current generation reused when it is the
//! same commit under the same fingerprint, otherwise a new generation staged (module `build`),
//! published with one rename and made current; then phase two, its symbol table (module
//! `extract`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::build;
use crate::config::plugin_part;
use crate::disk::FORMAT_VERSION;
use crate::error::SearchError;
use crate::extract;
use crate::indexes::{Indexes, Slot};
use crate::order::static_rank;
use crate::repodir::{generation_number, lock_repo_dir};
use crate::source::{BuildProgress, BuildStats, Source, SourceEntry};
use crate::store::{self, Generation, Meta};

/// Where and as what one build writes its generation.
#[derive(Clone, Copy)]
struct Staging<'a> {
    repo: &'a str,
    commit: &'a str,
    number: u64,
    dir: &'a Path,
    fingerprint: &'a str,
}

/// Milliseconds since the Unix epoch (0 for a time before it).
fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Indexes {
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

    /// One build: the repository's locks taken, the current generation kept when it is the
    /// same commit under the same fingerprint, otherwise a new generation staged, published
    /// and given its symbol table.
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
            let transformed = !plugin_fingerprint.is_empty();
            return Ok(self.keep_current(current, source, transformed, started));
        }
        let entries = sorted_entries(source)?;

        let number = slot.last_generation.load(Ordering::Relaxed) + 1;
        let staging = repo_dir.join(format!("staging-{number}-{}", std::process::id()));
        // Documents are reused only from a generation shaped by the same transform (P-7: no
        // mixing of derived-state hook sources).
        let reusable = previous.as_deref().filter(|g| {
            !fresh && plugin_part(&g.meta.fingerprint) == Some(plugin_fingerprint.as_str())
        });
        let at = Staging {
            repo,
            commit,
            number,
            dir: &staging,
            fingerprint: &fingerprint,
        };
        let counts = self.stage(&at, &entries, source, reusable, progress)?;
        let generation = publish(&slot, &repo_dir, &staging, number)?;
        // Phase two: the generation answers searches already; `definitions` and `references`
        // wait for its symbol table, `outline` parses meanwhile.
        let searchable_after = started.elapsed();
        let symbols = self.symbols_phase(&generation, reusable, source, &counts.replaced, false);
        self.count_build(&counts);
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

    /// The answer of a build that finds the same commit under the same fingerprint current:
    /// nothing is written, except the symbol table when phase two did not finish for it
    /// (the process stopped, or writing failed). With `transformed`, a transform may have
    /// shaped the stored texts, so symbols are parsed from the source's bytes.
    fn keep_current(
        &self,
        current: &Generation,
        source: &dyn Source,
        transformed: bool,
        started: Instant,
    ) -> BuildStats {
        self.counters.builds_skipped.fetch_add(1, Ordering::Relaxed);
        let symbols = match current.symbols() {
            Some(table) => table.len() as u64,
            None => self.symbols_phase(current, None, source, &[], transformed),
        };
        BuildStats {
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
        }
    }

    /// Writes a generation into a fresh staging directory `at.dir`; removes the directory
    /// when that fails.
    fn stage(
        &self,
        at: &Staging<'_>,
        entries: &[SourceEntry],
        source: &dyn Source,
        previous: Option<&Generation>,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<build::Counts, SearchError> {
        let _ = std::fs::remove_dir_all(at.dir);
        std::fs::create_dir_all(at.dir)
            .map_err(|e| SearchError::io("creating a staging directory", e))?;
        self.write_staging(at, entries, source, previous, progress)
            .inspect_err(|_| {
                let _ = std::fs::remove_dir_all(at.dir);
            })
    }

    /// Counts a published build.
    fn count_build(&self, counts: &build::Counts) {
        self.counters.builds.fetch_add(1, Ordering::Relaxed);
        self.counters
            .documents_reused
            .fetch_add(counts.reused, Ordering::Relaxed);
        self.counters
            .documents_read
            .fetch_add(counts.read, Ordering::Relaxed);
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
        let input = extract::SymbolInput {
            generation,
            previous,
            source,
            replaced,
            all_from_source,
            threads: self.threads.clamp(1, 2),
        };
        let written = extract::extract_symbols(&input)
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
}

/// The source's entries one per path, in document order (static rank, then path: module
/// `order`), which numbers the documents.
fn sorted_entries(source: &dyn Source) -> Result<Vec<SourceEntry>, SearchError> {
    let mut entries = source
        .entries()
        .map_err(|message| SearchError::Source { message })?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries.dedup_by(|a, b| a.path == b.path);
    entries.sort_by_cached_key(|e| static_rank(&e.path));
    if entries.len() >= u32::MAX as usize {
        return Err(SearchError::Source {
            message: "too many files to index".into(),
        });
    }
    Ok(entries)
}

/// Publishes the staging directory of generation `number` with one rename and makes it the
/// slot's current generation. The one it replaces is deleted when the last search holding it
/// finishes.
fn publish(
    slot: &Slot,
    repo_dir: &Path,
    staging: &Path,
    number: u64,
) -> Result<Arc<Generation>, SearchError> {
    let published = repo_dir.join(format!("gen-{number}"));
    let _ = std::fs::remove_dir_all(&published);
    if let Err(error) = std::fs::rename(staging, &published) {
        let _ = std::fs::remove_dir_all(staging);
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
        old.retire();
    }
    Ok(generation)
}
