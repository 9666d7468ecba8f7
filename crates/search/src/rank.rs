//! Ranking: every hit one search collects, up to the hit cap (file-name hits first, then line
//! hits in repository, path and line order), put in rank order: file names, then
//! definition-looking lines, then the rest, each in that order. The ranked list is what the
//! result cache keeps and what pages are cut from.

use std::sync::Arc;
use std::time::Instant;

use crate::error::SearchError;
use crate::plan::Compiled;
use crate::request::SearchStats;
use crate::store::Generation;
use crate::verify::{self, LineHit};

/// Default cap on the hits one search collects (file-name and line hits together): beyond it,
/// verification stops and [`SearchStats::truncated`](crate::SearchStats::truncated) is set.
/// Bounds the memory and time of queries that match nearly every line (`e`, `^`). Lowered per
/// index set with [`Indexes::with_max_hits`](crate::Indexes::with_max_hits).
pub const MAX_HITS: usize = 100_000;

/// A hit in the global ranking.
pub(crate) enum Ranked {
    FileName { repo: usize, doc: u32 },
    Line { repo: usize, hit: LineHit },
}

impl Ranked {
    /// The index of the hit's repository among the pinned generations.
    pub(crate) fn repo(&self) -> usize {
        match self {
            Ranked::FileName { repo, .. } | Ranked::Line { repo, .. } => *repo,
        }
    }

    /// The hit's tier in the ranking.
    pub(crate) fn tier(&self) -> Tier {
        match self {
            Ranked::FileName { .. } => Tier::FileName,
            Ranked::Line { hit, .. } if hit.definition => Tier::Definition,
            Ranked::Line { .. } => Tier::Line,
        }
    }
}

/// The tiers of the ranking, best first: a ranked list holds every hit of a tier before any
/// of the next, and within a tier orders hits by repository name, then path, then line
/// (names and paths compared as strings, byte by byte) — the order [`merge`](crate::merge)
/// reproduces over lists ranked apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The path matches the query (never for `references`).
    FileName,
    /// A line that looks like a definition (for `references`: that the symbol table says
    /// defines the name).
    Definition,
    /// Any other matching line.
    Line,
}

/// Every hit of one search, in rank order.
pub(crate) struct RankedList {
    pub hits: Vec<Ranked>,
    /// Candidate documents of the search that computed the list.
    pub candidate_files: u64,
    /// The list stopped at the hit cap (more hits exist).
    pub truncated: bool,
}

impl RankedList {
    /// An estimate of the bytes the list holds (the result cache's bound).
    pub(crate) fn bytes(&self) -> usize {
        self.hits.capacity() * std::mem::size_of::<Ranked>() + std::mem::size_of::<Self>()
    }
}

/// One search's query over its pinned generations, and its bounds.
pub(crate) struct Collect<'a> {
    /// The generations searched, one per repository, in repository order.
    pub pinned: &'a [(String, Arc<Generation>)],
    pub compiled: &'a Compiled,
    /// For `references`, the name: no file-name hits, and the symbol table (not the line's
    /// look) says which lines define it.
    pub references: Option<&'a str>,
    /// The hit cap.
    pub max_hits: usize,
    /// Verification threads per generation.
    pub threads: usize,
    pub deadline: Instant,
}

/// Runs a compiled query over the pinned generations and ranks every hit collected: all
/// file-name hits first, then line hits in repository, path and line order, until
/// `max_hits`; then file names, definition-looking lines, the rest (each in that order).
pub(crate) fn rank(
    search: &Collect<'_>,
    stats: &mut SearchStats,
) -> Result<RankedList, SearchError> {
    let (file_names, truncated) = file_name_hits(search);
    let mut lines = line_hits(search, file_names.len(), truncated, stats)?;
    let mut hits = file_names;
    hits.reserve_exact(lines.definitions.len() + lines.others.len());
    hits.append(&mut lines.definitions);
    hits.append(&mut lines.others);
    Ok(RankedList {
        hits,
        candidate_files: lines.candidate_files,
        truncated: lines.truncated,
    })
}

/// The file-name hits of every pinned generation in repository and path order, at most
/// `max_hits`, and whether there were more (none for `references`).
fn file_name_hits(search: &Collect<'_>) -> (Vec<Ranked>, bool) {
    let mut file_names = Vec::new();
    let mut truncated = false;
    for (index, (_, generation)) in search.pinned.iter().enumerate() {
        if search.references.is_some() {
            break;
        }
        let room = search.max_hits - file_names.len();
        let found = verify::file_names(generation, search.compiled);
        if found.len() > room {
            truncated = true;
        }
        file_names.extend(
            found
                .into_iter()
                .take(room)
                .map(|doc| Ranked::FileName { repo: index, doc }),
        );
    }
    (file_names, truncated)
}

/// The line hits of one search, split by rank.
struct LineHits {
    /// Lines that define something (or, for `references`, the name), in collection order.
    definitions: Vec<Ranked>,
    /// The other lines, in collection order.
    others: Vec<Ranked>,
    candidate_files: u64,
    /// More hits exist than the cap let in (file names included).
    truncated: bool,
}

/// Verifies the pinned generations in repository order with what is left of the hit cap
/// after `file_names` hits; nothing once `truncated` (the file names filled the cap).
fn line_hits(
    search: &Collect<'_>,
    file_names: usize,
    mut truncated: bool,
    stats: &mut SearchStats,
) -> Result<LineHits, SearchError> {
    let mut candidate_files = 0;
    let mut definitions = Vec::new();
    let mut others = Vec::new();
    for (index, (_, generation)) in search.pinned.iter().enumerate() {
        if truncated {
            break;
        }
        let budget = search.max_hits - file_names - definitions.len() - others.len();
        let run = verify::lines(
            generation,
            search.compiled,
            search.threads,
            search.deadline,
            budget,
        )?;
        candidate_files += run.candidates;
        stats.files_verified += run.verified;
        truncated = run.more;
        for mut hit in run.lines {
            if let Some(name) = search.references {
                hit.definition = generation
                    .symbols()
                    .is_some_and(|table| table.defines(hit.doc, hit.line, name));
            }
            let ranked = Ranked::Line { repo: index, hit };
            if hit.definition {
                definitions.push(ranked);
            } else {
                others.push(ranked);
            }
        }
    }
    Ok(LineHits {
        definitions,
        others,
        candidate_files,
        truncated,
    })
}
