//! Searches split across replicas (cluster mode, issue 31): each replica that holds some of
//! the repositories answers the first hits of its own ranked list with their rank keys
//! ([`Indexes::top_hits`]), and the replica the caller asked merges those lists into the one
//! ranking a single index set holding every repository would have made, cuts the page and
//! makes its cursor ([`merge`]).
//!
//! Why a merge of heads is exact: the ranking is a total order on (tier, document static
//! rank, repository, path, line) ([`Tier`], module `rank`), computed from the hits alone, so
//! the first `offset + limit` hits of the whole are among the first `offset + limit` of each
//! part. The cursor is the one [`Indexes::search`] makes (offset, the page's last hit,
//! request hash, every repository's (repository, commit, generation)), so a page whose
//! generations changed since the first one is refused as expired, as it is on one replica.
//! Totals are the parts' summed: with `count`, each part counts up to
//! [`COUNT_CAP`](crate::COUNT_CAP) on its own, so a merged exact count can pass the cap that
//! one index set stops at.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::error::SearchError;
use crate::indexes::Indexes;
use crate::navigate::{
    Definitions, DefinitionsRequest, MAX_DEFINITIONS, check_symbol, references_request,
};
use crate::order::static_rank;
use crate::page::{self, After, Cursor, MAX_LIMIT};
use crate::plan;
use crate::plan::DocFilter;
use crate::rank::Tier;
use crate::request::{Hit, RepoHits, SearchRequest, SearchResults, SearchStats, request_hash};

/// What a ranked list is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// A search ([`Indexes::search`]).
    Search,
    /// The occurrences of this name ([`Indexes::references`]).
    References(&'a str),
}

impl Mode<'_> {
    /// The request as the index runs it: for references, the name's word-boundary pattern.
    fn request<'r>(
        &self,
        request: &'r SearchRequest,
    ) -> Result<Cow<'r, SearchRequest>, SearchError> {
        match self {
            Mode::Search => Ok(Cow::Borrowed(request)),
            Mode::References(symbol) => {
                check_symbol(symbol)?;
                Ok(Cow::Owned(references_request(symbol, request)))
            }
        }
    }

    fn symbol(&self) -> Option<&str> {
        match self {
            Mode::Search => None,
            Mode::References(symbol) => Some(symbol),
        }
    }
}

/// One hit of a ranked list with what orders it among other lists' hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedHit {
    /// Its tier.
    pub tier: Tier,
    /// Its repository.
    pub repo: String,
    /// Full SHA of the commit it was found in (the repository's indexed head).
    pub commit: String,
    /// The hit as a page shows it.
    pub hit: Hit,
}

impl RankedHit {
    /// The rank key: tier, the document's static rank, repository, path, line (0 for a
    /// file-name hit).
    fn key(&self) -> (Tier, u32, &str, &str, u64) {
        let (path, line) = self.path_line();
        (self.tier, static_rank(path), self.repo.as_str(), path, line)
    }

    fn path_line(&self) -> (&str, u64) {
        match &self.hit {
            Hit::Line { path, line, .. } => (path.as_str(), *line),
            Hit::FileName { path, .. } => (path.as_str(), 0),
        }
    }
}

/// The head of one part's ranked list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopHits {
    /// At most the number asked for, in rank order.
    pub hits: Vec<RankedHit>,
    /// (repository, commit, generation) of every repository searched.
    pub generations: Vec<(String, String, u64)>,
    /// Requested repositories without an index here.
    pub not_indexed: Vec<String>,
    /// The part's statistics: `total_hits` counts the hits it knows (with `count`, up to
    /// [`COUNT_CAP`](crate::COUNT_CAP)), at least one more than `hits` when more exist.
    pub stats: SearchStats,
}

impl Indexes {
    /// The first `want` hits of a search (or references lookup) over `request.repos`, in
    /// rank order with their rank keys, to be [`merge`]d with other parts' (`cursor` and
    /// `limit` are ignored: the merging side pages).
    pub fn top_hits(
        &self,
        request: &SearchRequest,
        mode: Mode<'_>,
        want: usize,
    ) -> Result<TopHits, SearchError> {
        let result = mode
            .request(request)
            .and_then(|request| self.top_inner(&request, mode.symbol(), want));
        match &result {
            Ok(_) => self.counters.searches.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.search_errors.fetch_add(1, Ordering::Relaxed),
        };
        result
    }
}

/// Where the page a request's cursor asks for starts in the merged ranking (0 without a
/// cursor), checked as far as it can be before the parts answer: the query (so a bad one is
/// refused here, with the message one index set gives, before any part is asked) and the
/// request the cursor was made for. Its generations are checked by [`merge`].
///
/// `request.repos` must be every repository the merge covers, as for [`merge`].
pub fn page_offset(request: &SearchRequest, mode: Mode<'_>) -> Result<u64, SearchError> {
    let run = mode.request(request)?;
    plan::check_length(&run.query)?;
    plan::compile(&run)?;
    let Some(text) = run.cursor.as_deref() else {
        return Ok(0);
    };
    let cursor = Cursor::decode(text)?;
    if cursor.request != request_hash(&run, mode.symbol().is_some()) {
        return Err(SearchError::InvalidCursor);
    }
    Ok(cursor.offset)
}

/// The page `request` asks for (its `limit`, from its cursor's offset) out of the parts'
/// heads, each part asked for at least `offset + limit` hits: the page one index set holding
/// every part's repositories would have answered, with a cursor in the same form (refused as
/// expired once a part's generations change). `request.repos` is the set the cursor's
/// request hash covers: every repository of every part (and those no part could search).
///
/// Statistics: counts are summed, `truncated` and `total_is_lower_bound` when any part's
/// is, `cached` when every
/// part's is, `elapsed` the slowest part's.
pub fn merge(
    request: &SearchRequest,
    mode: Mode<'_>,
    parts: Vec<TopHits>,
) -> Result<SearchResults, SearchError> {
    let run = mode.request(request)?;
    let limit = run.limit.clamp(1, MAX_LIMIT);
    let mut generations: Vec<(String, String, u64)> = parts
        .iter()
        .flat_map(|part| part.generations.iter().cloned())
        .collect();
    // One index set pins its repositories in name order.
    generations.sort();
    let hash = request_hash(&run, mode.symbol().is_some());
    let (offset, _) = page::start(run.cursor.as_deref(), &hash, &generations)?;
    let mut stats = SearchStats {
        cached: !parts.is_empty(),
        ..SearchStats::default()
    };
    let mut hits = Vec::new();
    let mut not_indexed = Vec::new();
    for part in parts {
        stats.candidate_files += part.stats.candidate_files;
        stats.files_verified += part.stats.files_verified;
        stats.documents += part.stats.documents;
        stats.total_hits += part.stats.total_hits;
        stats.truncated |= part.stats.truncated;
        stats.total_is_lower_bound |= part.stats.total_is_lower_bound;
        stats.cached &= part.stats.cached;
        stats.elapsed = stats.elapsed.max(part.stats.elapsed);
        hits.extend(part.hits);
        not_indexed.extend(part.not_indexed);
    }
    not_indexed.sort();
    not_indexed.dedup();
    hits.sort_by(|a, b| a.key().cmp(&b.key()));
    let from = usize::try_from(offset).unwrap_or(usize::MAX);
    let page: Vec<RankedHit> = hits.into_iter().skip(from).take(limit).collect();
    let end = offset + page.len() as u64;
    // A part with more hits than it answered reports at least one more in its total.
    let next_cursor = page.last().filter(|_| end < stats.total_hits).map(|last| {
        let (path, line) = last.path_line();
        Cursor {
            offset: end,
            request: hash,
            generations,
            after: Some(After {
                tier: last.tier.number(),
                repo: last.repo.clone(),
                path: path.to_owned(),
                line,
            }),
        }
        .encode()
    });
    Ok(SearchResults {
        repos: by_repo(page),
        next_cursor,
        stats,
        not_indexed,
    })
}

/// The hits of a page grouped by repository, in order of each repository's first hit.
fn by_repo(page: Vec<RankedHit>) -> Vec<RepoHits> {
    let mut order: Vec<RepoHits> = Vec::new();
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for ranked in page {
        let index = *at.entry(ranked.repo.clone()).or_insert_with(|| {
            order.push(RepoHits {
                repo: ranked.repo.clone(),
                commit: ranked.commit.clone(),
                hits: Vec::new(),
            });
            order.len() - 1
        });
        order[index].hits.push(ranked.hit);
    }
    order
}

/// Checks a `definitions` lookup as [`Indexes::definitions`] would, before any part is
/// asked: the symbol, the path glob and the language.
pub fn check_definitions(request: &DefinitionsRequest) -> Result<(), SearchError> {
    check_symbol(&request.symbol)?;
    DocFilter::new(request.path.as_deref(), request.lang.as_deref())?;
    Ok(())
}

/// The `definitions` one index set holding every part's repositories would have answered,
/// from the parts' answers to `request` (each part asked with the same limit): definitions in
/// repository, path and line order cut to the limit, totals summed, the repositories looked
/// in and not indexed merged in name order.
pub fn merge_definitions(request: &DefinitionsRequest, parts: Vec<Definitions>) -> Definitions {
    let limit = request.limit.clamp(1, MAX_DEFINITIONS);
    let mut merged = Definitions {
        definitions: Vec::new(),
        total: 0,
        searched: Vec::new(),
        not_indexed: Vec::new(),
    };
    for part in parts {
        merged.definitions.extend(part.definitions);
        merged.total += part.total;
        merged.searched.extend(part.searched);
        merged.not_indexed.extend(part.not_indexed);
    }
    // Stable: each repository's definitions come from one part, already in path and line
    // order; one index set looks in repositories in name order.
    merged.definitions.sort_by(|a, b| a.repo.cmp(&b.repo));
    merged.definitions.truncate(limit);
    merged.searched.sort();
    merged.not_indexed.sort();
    merged.not_indexed.dedup();
    merged
}
