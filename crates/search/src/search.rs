//! One search from request to page: the generations pinned, the page from the result cache
//! or found in rank order from where the cursor says the page starts (module `rank`), then
//! cut with its snippets and the next cursor.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use crate::cache;
use crate::error::SearchError;
use crate::indexes::Indexes;
use crate::limits::SEARCH_BUDGET;
use crate::page::{self, MAX_LIMIT};
use crate::plan;
use crate::rank::{self, COUNT_CAP, Pos, RankedList};
use crate::request::{SearchRequest, SearchResults, SearchStats, canonical_request, request_hash};
use crate::shard::{RankedHit, TopHits};
use crate::store::Generation;

/// Pinned generations, and the requested repositories without one.
pub(crate) type Pinned = (Vec<(String, Arc<Generation>)>, Vec<String>);

/// Where a search's page comes from.
enum HitList {
    /// The result cache.
    Cached(Arc<RankedList>),
    /// A search with this compiled query.
    Miss(Box<plan::Compiled>),
}

/// What one page of a search is: its start, size and count, over pinned generations.
struct PageAsk<'a> {
    request: &'a SearchRequest,
    references: Option<&'a str>,
    pinned: &'a [(String, Arc<Generation>)],
    key: cache::Key,
    after: Option<Pos>,
    want: usize,
    count_to: u64,
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
        let result = plan::check_length(&request.query).and_then(|()| {
            // References need the symbol table (phase two of the build) to mark definitions.
            let pinned = self.pinned(&request.repos, references.is_some());
            self.search_run(request, references, pinned, false)
        });
        self.count_search(result.is_ok());
        result
    }

    /// A search over generations pinned by the caller: those of an overlay (module
    /// `overlay`), counted as a search.
    pub(crate) fn search_pinned(
        &self,
        request: &SearchRequest,
        pinned: Pinned,
        overlay: bool,
    ) -> Result<SearchResults, SearchError> {
        let result = plan::check_length(&request.query)
            .and_then(|()| self.search_run(request, None, pinned, overlay));
        self.count_search(result.is_ok());
        result
    }

    fn count_search(&self, ok: bool) {
        let counter = if ok {
            &self.counters.searches
        } else {
            &self.counters.search_errors
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One search over pinned generations (the query's length checked): the page the cursor
    /// asks for, from the result cache or found in rank order, and its next cursor.
    fn search_run(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
        (pinned, not_indexed): Pinned,
        overlay: bool,
    ) -> Result<SearchResults, SearchError> {
        let started = Instant::now();
        let want = request.limit.clamp(1, MAX_LIMIT);
        let generations = generation_ids(&pinned);
        let hash = request_hash(request, references.is_some());
        let mut key = cache_key(request, references.is_some(), generations.clone());
        if overlay {
            // Never the entry of the base generation's own search, even at the same commit.
            key.request.extend_from_slice(b"\noverlay");
        }
        // The page's own key: where it starts, its size, whether it counts.
        key.request.extend_from_slice(b"\ncursor=");
        key.request
            .extend_from_slice(request.cursor.as_deref().unwrap_or("").trim().as_bytes());
        key.request
            .extend_from_slice(format!("\nwant={want};count={}", request.count).as_bytes());
        // A query that does not compile is refused before its cursor is looked at.
        let arcs: Vec<&Arc<Generation>> = pinned.iter().map(|(_, g)| g).collect();
        let hit_list = self.cached_or_compiled(request, &key, &arcs)?;
        let (offset, after) = page::start(request.cursor.as_deref(), &hash, &generations)?;
        let after = after.map(|a| a.pos(&pinned)).transpose()?;
        let count_to = if request.count {
            COUNT_CAP.saturating_sub(offset)
        } else {
            0
        };
        let ask = PageAsk {
            request,
            references,
            pinned: &pinned,
            key,
            after,
            want,
            count_to,
        };
        let (list, mut stats) = self.page_list(&ask, hit_list, started)?;
        stats.total_hits = offset + list.found;
        let page = page::cut(&list, offset, &pinned, hash, generations);
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
    /// request's cursor and limit are ignored. `stats.total_hits` counts the hits known
    /// (with `count`, up to [`COUNT_CAP`]; at least one more than `hits` when more exist).
    pub(crate) fn top_inner(
        &self,
        request: &SearchRequest,
        references: Option<&str>,
        want: usize,
    ) -> Result<TopHits, SearchError> {
        let started = Instant::now();
        plan::check_length(&request.query)?;
        let want = want.clamp(1, self.max_hits);
        let (pinned, not_indexed) = self.pinned(&request.repos, references.is_some());
        let generations = generation_ids(&pinned);
        let mut key = cache_key(request, references.is_some(), generations.clone());
        key.request
            .extend_from_slice(format!("\ntop={want};count={}", request.count).as_bytes());
        let arcs: Vec<&Arc<Generation>> = pinned.iter().map(|(_, g)| g).collect();
        let hit_list = self.cached_or_compiled(request, &key, &arcs)?;
        let ask = PageAsk {
            request,
            references,
            pinned: &pinned,
            key,
            after: None,
            want,
            count_to: if request.count { COUNT_CAP } else { 0 },
        };
        let (list, mut stats) = self.page_list(&ask, hit_list, started)?;
        stats.total_hits = list.found;
        let hits = list
            .hits
            .iter()
            .enumerate()
            .map(|(index, ranked)| {
                let (repo, generation) = &pinned[ranked.repo()];
                let marks = list.marks.get(index).cloned().unwrap_or_default();
                RankedHit {
                    tier: ranked.tier(),
                    repo: repo.clone(),
                    commit: generation.meta.commit.clone(),
                    hit: page::to_hit(ranked, generation, marks),
                }
            })
            .collect();
        stats.elapsed = started.elapsed();
        Ok(TopHits {
            hits,
            generations,
            not_indexed,
            stats,
        })
    }

    /// One page's ranked hits: the cached ones, or found in rank order and kept in the
    /// cache; with the statistics of how they were had (all but `total_hits` and `elapsed`).
    fn page_list(
        &self,
        ask: &PageAsk<'_>,
        hit_list: HitList,
        started: Instant,
    ) -> Result<(Arc<RankedList>, SearchStats), SearchError> {
        let mut stats = SearchStats {
            documents: ask.pinned.iter().map(|(_, g)| g.docs.len() as u64).sum(),
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
                let definitions = match ask.references {
                    Some(name) => Some(name),
                    None if !ask.request.regex && rank::identifier(&ask.request.query) => {
                        Some(ask.request.query.as_str())
                    }
                    None => None,
                };
                let search = rank::Collect {
                    pinned: ask.pinned,
                    compiled: &compiled,
                    references: ask.references.is_some(),
                    definitions,
                    after: ask.after,
                    want: ask.want,
                    count_to: ask.count_to,
                    threads: self.threads,
                    deadline: started + SEARCH_BUDGET,
                };
                let list = Arc::new(rank::rank(&search)?);
                stats.files_verified = list.files_verified;
                let arcs: Vec<&Arc<Generation>> = ask.pinned.iter().map(|(_, g)| g).collect();
                self.results
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(ask.key.clone(), &arcs, list.clone());
                list
            }
        };
        stats.candidate_files = list.candidate_files;
        stats.total_is_lower_bound = !list.exact;
        stats.truncated = !list.exact;
        Ok((list, stats))
    }

    /// The cached page of `key` over exactly the generations `arcs`, or else the request
    /// compiled for a search.
    ///
    /// A cached page needs no regex, and compiling one is most of a small search (over
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
            None => HitList::Miss(Box::new(plan::compile(request)?)),
        })
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
