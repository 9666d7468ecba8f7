//! One search from request to page: the generations pinned, the ranked hit list from the
//! result cache or from planning, candidate selection, verification and ranking, then the
//! page the cursor asks for.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use crate::cache;
use crate::error::SearchError;
use crate::indexes::Indexes;
use crate::page::{self, MAX_LIMIT};
use crate::plan;
use crate::rank::{self, RankedList};
use crate::request::{SearchRequest, SearchResults, SearchStats, canonical_request, request_hash};
use crate::shard::{RankedHit, TopHits};
use crate::store::Generation;
use crate::verify::SEARCH_BUDGET;

/// A search with its generations pinned, before its hits are collected.
struct Prepared {
    pinned: Vec<(String, Arc<Generation>)>,
    not_indexed: Vec<String>,
    /// (repository, commit, generation) of `pinned`: what cursors and cache entries name.
    generations: Vec<(String, String, u64)>,
    /// The cursor's form of the request's hash.
    request_hash: String,
    key: cache::Key,
    hit_list: HitList,
}

/// Where a search's ranked hit list comes from.
enum HitList {
    /// The result cache.
    Cached(Arc<RankedList>),
    /// A search with this compiled query.
    Miss(plan::Compiled),
}

impl Indexes {
    /// Runs a search over the current generations of the requested repositories. Every
    /// repository is read at one generation for the whole call, so hits never mix commits.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResults, SearchError> {
        self.search_mode(request, None)
    }

    /// A search, or with `references` the occurrences of that name (see
    /// [`Indexes::references`]).
    pub(crate) fn search_mode(
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

    /// One search (or references lookup): pin the generations, take the ranked hit list
    /// from the result cache or compute it, then cut the page the cursor asks for.
    fn search_inner(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
    ) -> Result<SearchResults, SearchError> {
        plan::check_length(&request.query)?;
        // References need the symbol table (phase two of the build) to mark definitions.
        let pinned = self.pinned(&request.repos, references.is_some());
        self.search_run(request, references, pinned, false)
    }

    /// A search over generations pinned by the caller: those of an overlay (module
    /// `overlay`), counted as a search.
    pub(crate) fn search_pinned(
        &self,
        request: &SearchRequest,
        pinned: (Vec<(String, Arc<Generation>)>, Vec<String>),
        overlay: bool,
    ) -> Result<SearchResults, SearchError> {
        let result = plan::check_length(&request.query)
            .and_then(|()| self.search_run(request, None, pinned, overlay));
        match &result {
            Ok(_) => self.counters.searches.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.search_errors.fetch_add(1, Ordering::Relaxed),
        };
        result
    }

    /// One search over pinned generations (the query's length checked).
    fn search_run(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
        pinned: (Vec<(String, Arc<Generation>)>, Vec<String>),
        overlay: bool,
    ) -> Result<SearchResults, SearchError> {
        let started = Instant::now();
        let limit = request.limit.clamp(1, MAX_LIMIT);
        let run = self.prepare(request, references, pinned, overlay)?;
        let offset = page::start(
            request.cursor.as_deref(),
            &run.request_hash,
            &run.generations,
        )?;
        let (list, mut stats) = self.ranked(&run, references, started)?;
        let Prepared {
            pinned,
            not_indexed,
            generations,
            request_hash,
            ..
        } = run;
        let page = page::cut(&list, offset, limit, &pinned, request_hash, generations);
        stats.elapsed = started.elapsed();
        Ok(SearchResults {
            repos: page.repos,
            next_cursor: page.next_cursor,
            stats,
            not_indexed,
        })
    }

    /// The first `want` hits of a search (or references lookup) in rank order, each with its
    /// tier, repository and commit, for a merge with other replicas' (cluster mode); the
    /// request's cursor and limit are ignored. The ranked list comes from (and goes to) the
    /// result cache as for [`Indexes::search`], so later pages cost a slice.
    pub(crate) fn top_inner(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
        want: usize,
    ) -> Result<TopHits, SearchError> {
        let started = Instant::now();
        plan::check_length(&request.query)?;
        let pinned = self.pinned(&request.repos, references.is_some());
        let run = self.prepare(request, references, pinned, false)?;
        let (list, mut stats) = self.ranked(&run, references, started)?;
        let hits = list
            .hits
            .iter()
            .take(want)
            .map(|ranked| {
                let (repo, generation) = &run.pinned[ranked.repo()];
                RankedHit {
                    tier: ranked.tier(),
                    repo: repo.clone(),
                    commit: generation.meta.commit.clone(),
                    hit: page::to_hit(ranked, generation),
                }
            })
            .collect();
        stats.elapsed = started.elapsed();
        Ok(TopHits {
            hits,
            generations: run.generations,
            not_indexed: run.not_indexed,
            stats,
        })
    }

    /// The first steps of every search: the query's length checked, the generations pinned,
    /// the cache key and cursor hash made, and the ranked list found in the cache or the
    /// query compiled.
    fn prepare(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
        (pinned, not_indexed): (Vec<(String, Arc<Generation>)>, Vec<String>),
        overlay: bool,
    ) -> Result<Prepared, SearchError> {
        let generations = generation_ids(&pinned);
        let request_hash = request_hash(request, references.is_some());
        let mut key = cache_key(request, references.is_some(), generations.clone());
        if overlay {
            // Never the entry of the base generation's own search, even at the same commit.
            key.request.extend_from_slice(b"\noverlay");
        }
        let arcs: Vec<&Arc<Generation>> = pinned.iter().map(|(_, g)| g).collect();
        let hit_list = self.cached_or_compiled(request, &key, &arcs)?;
        Ok(Prepared {
            pinned,
            not_indexed,
            generations,
            request_hash,
            key,
            hit_list,
        })
    }

    /// The whole ranked list of a prepared search: the cached one, or the hits collected,
    /// ranked and kept in the cache; with the statistics of how it was had.
    fn ranked(
        &self,
        run: &Prepared,
        references: Option<&str>,
        started: Instant,
    ) -> Result<(Arc<RankedList>, SearchStats), SearchError> {
        let mut stats = SearchStats {
            documents: run.pinned.iter().map(|(_, g)| g.docs.len() as u64).sum(),
            ..SearchStats::default()
        };
        let list = match &run.hit_list {
            HitList::Cached(list) => {
                self.counters
                    .result_cache_hits
                    .fetch_add(1, Ordering::Relaxed);
                stats.cached = true;
                list.clone()
            }
            HitList::Miss(compiled) => {
                let search = rank::Collect {
                    pinned: &run.pinned,
                    compiled,
                    references,
                    max_hits: self.max_hits,
                    threads: self.threads,
                    deadline: started + SEARCH_BUDGET,
                };
                let arcs: Vec<&Arc<Generation>> = run.pinned.iter().map(|(_, g)| g).collect();
                self.rank_and_keep(&search, run.key.clone(), &arcs, &mut stats)?
            }
        };
        stats.candidate_files = list.candidate_files;
        stats.truncated = list.truncated;
        stats.total_hits = list.hits.len() as u64;
        Ok((list, stats))
    }

    /// The cached hit list of `key` over exactly the generations `arcs`, or else the
    /// request compiled for a search.
    ///
    /// A cached hit list needs no regex, and compiling one is most of a small search (over
    /// 100 µs for a case-insensitive word): only a miss compiles. A query that does not
    /// compile is never cached, so its error is still reported, before the cursor's.
    fn cached_or_compiled(
        &self,
        request: &SearchRequest,
        key: &cache::Key,
        arcs: &[&Arc<Generation>],
    ) -> Result<HitList, SearchError> {
        let cached = self
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key, arcs);
        Ok(match cached {
            Some(list) => HitList::Cached(list),
            None => HitList::Miss(plan::compile(request)?),
        })
    }

    /// Collects and ranks the hits of a search, and keeps the list in the result cache for
    /// the later pages.
    fn rank_and_keep(
        &self,
        search: &rank::Collect<'_>,
        key: cache::Key,
        arcs: &[&Arc<Generation>],
        stats: &mut SearchStats,
    ) -> Result<Arc<RankedList>, SearchError> {
        let list = Arc::new(rank::rank(search, stats)?);
        self.results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, arcs, list.clone());
        Ok(list)
    }
}

/// (repository, commit, generation) of every pinned generation: what a cursor and a cache
/// entry are bound to.
fn generation_ids(pinned: &[(String, Arc<Generation>)]) -> Vec<(String, String, u64)> {
    pinned
        .iter()
        .map(|(name, g)| (name.clone(), g.meta.commit.clone(), g.meta.generation))
        .collect()
}

/// The result cache's key of a request over `generations`.
fn cache_key(
    request: &SearchRequest,
    references: bool,
    generations: Vec<(String, String, u64)>,
) -> cache::Key {
    let mut canonical = canonical_request(request);
    if references {
        // Another hit list than the same regex searched: no file names, other ranks.
        canonical.extend_from_slice(b"\nreferences");
    }
    cache::Key {
        request: canonical,
        generations,
    }
}
