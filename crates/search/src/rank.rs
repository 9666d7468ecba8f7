//! Ranking (S-10): one page of hits found in rank order, so a page costs in proportion to the
//! page and not to every hit of the query.
//!
//! The ranking is a total order on (tier, document static rank, repository, path, line):
//! 1. [`Tier::FileName`]: documents whose path matches the query (a regex over the paths of
//!    the document table: cheap, all of them found each time);
//! 2. [`Tier::Definition`]: for a literal query that is an identifier (`[A-Za-z_][A-Za-z0-9_]*`),
//!    the lines where the symbol table says that exact name is defined (for `references`, the
//!    name's definitions), looked up by name, not by verifying every file;
//! 3. [`Tier::Line`]: every other matching line.
//!
//! Within a tier hits follow the documents' static rank (module `order`: source before tests,
//! generated and vendored files, shallower paths first), then repository name, then path,
//! then line. A generation numbers its documents in (static rank, path) order, so its posting
//! lists give the candidates of one repository in rank order; candidates of several
//! repositories are merged on (rank, repository, document). Verification visits them in
//! that order from the page's start and stops once the page and one more hit (which tells a
//! next page exists) are found, or, when the request asks for a count, once [`COUNT_CAP`]
//! hits are known.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use crate::error::SearchError;
use crate::plan::Compiled;
use crate::store::{DocKind, Generation};
use crate::verify::{self, LineHit, LineInput, Skip};

/// Most hits one part of a cluster search answers for a merge (see
/// [`Indexes::top_hits`](crate::Indexes::top_hits)), and the default bound on the pages a
/// merge can reach ([`Indexes::with_max_hits`](crate::Indexes::with_max_hits)).
pub const MAX_HITS: usize = 100_000;

/// Hits a request with `count` counts exactly; beyond, the total is reported as a lower
/// bound ([`SearchStats::total_is_lower_bound`](crate::SearchStats::total_is_lower_bound)).
pub const COUNT_CAP: u64 = 10_000;

/// A hit in the global ranking.
#[derive(Debug, Clone, Copy)]
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

    /// Its place in the ranking.
    pub(crate) fn pos(&self, pinned: &[(String, Arc<Generation>)]) -> Pos {
        let (repo, doc, line) = match self {
            Ranked::FileName { repo, doc } => (*repo, *doc, 0),
            Ranked::Line { repo, hit } => (*repo, hit.doc, hit.line),
        };
        Pos {
            tier: self.tier(),
            rank: pinned[repo].1.docs[doc as usize].rank,
            repo,
            doc,
            line,
        }
    }
}

/// The tiers of the ranking, best first: a ranked list holds every hit of a tier before any
/// of the next, and within a tier orders hits by document static rank, repository name, path
/// and line (names and paths compared as strings, byte by byte) — the order
/// [`merge`](crate::merge) reproduces over lists ranked apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The path matches the query (never for `references`).
    FileName,
    /// A line where the symbol table says the searched identifier (for `references`, the
    /// name) is defined.
    Definition,
    /// Any other matching line.
    Line,
}

impl Tier {
    /// Its number in a cursor.
    pub(crate) fn number(self) -> u8 {
        self as u8
    }

    /// The tier of a cursor's number.
    pub(crate) fn from_number(number: u8) -> Option<Tier> {
        match number {
            0 => Some(Tier::FileName),
            1 => Some(Tier::Definition),
            2 => Some(Tier::Line),
            _ => None,
        }
    }
}

/// A place in the ranking of one index set: within a tier, documents of equal static rank
/// follow repository order (pinned in name order), then document id (path order within a
/// rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub tier: Tier,
    pub rank: u32,
    pub repo: usize,
    pub doc: u32,
    pub line: u32,
}

/// One page's worth of the ranking, from a start position.
pub(crate) struct RankedList {
    /// The hits of the page, in rank order (at most the number wanted).
    pub hits: Vec<Ranked>,
    /// More hits follow the page.
    pub more: bool,
    /// Hits known from the start position on (the page's and those found beyond it).
    pub found: u64,
    /// `found` is every hit from the start position on.
    pub exact: bool,
    /// Candidate documents of the line tier (after path and lang filters).
    pub candidate_files: u64,
    /// Documents run through the regex.
    pub files_verified: u64,
    /// For each of `hits`, the query's matches in its snippet (module `page`'s `marks`;
    /// empty for a file-name hit). Found here, where the compiled regex is at hand, so a
    /// page from the result cache has them without compiling the query again.
    pub marks: Vec<Vec<Range<u32>>>,
}

impl RankedList {
    /// An estimate of the bytes the list holds (the result cache's bound).
    pub(crate) fn bytes(&self) -> usize {
        self.hits.capacity() * std::mem::size_of::<Ranked>()
            + self
                .marks
                .iter()
                .map(|m| {
                    std::mem::size_of::<Vec<Range<u32>>>()
                        + m.capacity() * std::mem::size_of::<Range<u32>>()
                })
                .sum::<usize>()
            + std::mem::size_of::<Self>()
    }
}

/// One search's query over its pinned generations, where its page starts, and its bounds.
pub(crate) struct Collect<'a> {
    /// The generations searched, one per repository, in repository (name) order.
    pub pinned: &'a [(String, Arc<Generation>)],
    pub compiled: &'a Compiled,
    /// For `references`: no file-name hits.
    pub references: bool,
    /// The name whose definitions form the definition tier, if any.
    pub definitions: Option<&'a str>,
    /// The page starts after this hit (at the start without).
    pub after: Option<Pos>,
    /// Hits on the page.
    pub want: usize,
    /// Hits to know from the start position on (a count), when more than the page's.
    pub count_to: u64,
    /// Verification threads.
    pub threads: usize,
    pub deadline: Instant,
}

/// The page of a search: its tiers' hits after the start position in rank order, until the
/// page and one more hit are found (and, with a count, until `count_to` hits are known).
pub(crate) fn rank(search: &Collect<'_>) -> Result<RankedList, SearchError> {
    let keep = search.want.saturating_add(1);
    let enough = (keep as u64).max(search.count_to);
    let after = |pos: &Pos| search.after.is_none_or(|a| *pos > a);
    let mut tiers: Vec<(Pos, Ranked)> = file_name_hits(search);
    let (definitions, skip) = definition_hits(search)?;
    tiers.extend(definitions);
    tiers.retain(|(pos, _)| after(pos));
    tiers.sort_unstable_by_key(|(pos, _)| *pos);
    let mut found = tiers.len() as u64;
    let mut hits: Vec<Ranked> = tiers.into_iter().take(keep).map(|(_, r)| r).collect();
    let mut list = RankedList {
        hits: Vec::new(),
        more: false,
        found: 0,
        exact: false,
        candidate_files: 0,
        files_verified: 0,
        marks: Vec::new(),
    };
    if found < enough {
        let generations: Vec<&Generation> = search.pinned.iter().map(|(_, g)| &**g).collect();
        let candidates = candidates(search);
        list.candidate_files = candidates.len() as u64;
        // Where the line tier starts: at the hit after which the page starts, or at the top.
        let (start, first_line) = match search.after {
            Some(a) if a.tier == Tier::Line => {
                let key = (a.rank, a.repo as u32, a.doc);
                let start = candidates.partition_point(|&(repo, doc)| {
                    (
                        generations[repo as usize].docs[doc as usize].rank,
                        repo,
                        doc,
                    ) < key
                });
                let same = candidates.get(start) == Some(&(a.repo as u32, a.doc));
                (start, if same { a.line + 1 } else { 1 })
            }
            Some(a) if a.tier > Tier::Line => (candidates.len(), 1),
            _ => (0, 1),
        };
        let input = LineInput {
            generations: &generations,
            candidates: &candidates[start..],
            first_line,
            regex: &search.compiled.regex,
            ascii: search.compiled.ascii.as_ref(),
            skip: &skip,
            threads: search.threads,
            deadline: search.deadline,
        };
        let budget = usize::try_from(enough - found).unwrap_or(usize::MAX);
        let (run, considered) = verify_with_words(search, &input, budget)?;
        if let Some(considered) = considered {
            list.candidate_files = (start + considered) as u64;
        }
        list.files_verified = run.verified;
        list.exact = !run.more;
        found += run.lines.len() as u64;
        let room = keep.saturating_sub(hits.len());
        hits.extend(run.lines.into_iter().take(room).map(|hit| Ranked::Line {
            repo: hit.repo as usize,
            hit,
        }));
    }
    list.more = hits.len() > search.want;
    hits.truncate(search.want);
    list.marks = hits
        .iter()
        .map(|ranked| hit_marks(search, ranked))
        .collect();
    list.hits = hits;
    list.found = found;
    Ok(list)
}

/// The query's matches in the snippet of a line hit (none for a file name), found with the
/// regex that verified the line: the ASCII one for an ASCII line (which matches there
/// exactly what the Unicode one does, and faster).
fn hit_marks(search: &Collect<'_>, ranked: &Ranked) -> Vec<Range<u32>> {
    let Ranked::Line { repo, hit } = ranked else {
        return Vec::new();
    };
    let generation = &search.pinned[*repo].1;
    let text = generation.text(&generation.docs[hit.doc as usize]);
    let line = &text[hit.start..hit.end];
    let regex = match &search.compiled.ascii {
        Some(ascii) if line.is_ascii() => ascii,
        _ => &search.compiled.regex,
    };
    crate::snippet::marks(line, hit.at, regex)
}

/// Verifies `input`'s candidates; for a word-only pattern (module `words`) whose candidates
/// hold more text than the word vocabularies, only a first part of them as they are: when
/// the page is not full there, the rest is narrowed to the documents holding a word the
/// pattern matches (an exact superset of those with a hit) and verified. Dense hits fill the
/// page before the vocabulary costs anything; sparse ones stop costing the whole corpus.
/// Answers the run and, when the vocabulary narrowed it, the candidates considered.
fn verify_with_words(
    search: &Collect<'_>,
    input: &LineInput<'_>,
    budget: usize,
) -> Result<(verify::LineRun, Option<usize>), SearchError> {
    let generations = input.generations;
    let vocabulary: Option<usize> = if search.compiled.word_only {
        generations
            .iter()
            .map(|g| g.vocabulary_bytes())
            .sum::<Option<usize>>()
    } else {
        None
    };
    let Some(vocabulary) = vocabulary else {
        return Ok((verify::lines(input, budget)?, None));
    };
    // The first part: candidates up to a sixteenth of the vocabulary's bytes: verification
    // reads a document several times slower than the vocabulary scan reads words.
    let mut bytes = 0usize;
    let head = input
        .candidates
        .iter()
        .position(|&(repo, doc)| {
            bytes += generations[repo as usize].docs[doc as usize].len as usize;
            bytes > vocabulary / 16
        })
        .unwrap_or(input.candidates.len());
    if head == input.candidates.len() {
        return Ok((verify::lines(input, budget)?, None));
    }
    let first = verify::lines(
        &LineInput {
            candidates: &input.candidates[..head],
            ..*input
        },
        budget,
    )?;
    if first.more {
        return Ok((first, None));
    }
    let mut words: Vec<Option<Vec<u32>>> = vec![None; generations.len()];
    let rest: Vec<(u32, u32)> = input.candidates[head..]
        .iter()
        .copied()
        .filter(|&(repo, doc)| {
            let docs = words[repo as usize].get_or_insert_with(|| {
                generations[repo as usize]
                    .word_docs(&search.compiled.regex, search.compiled.ascii.as_ref())
                    .unwrap_or_default()
            });
            docs.binary_search(&doc).is_ok()
        })
        .collect();
    // `first_line` belongs to the first candidate only.
    let first_line = if head == 0 && rest.first() == input.candidates.first() {
        input.first_line
    } else {
        1
    };
    let second = verify::lines(
        &LineInput {
            candidates: &rest,
            first_line,
            ..*input
        },
        budget - first.lines.len(),
    )?;
    let mut lines = first.lines;
    lines.extend(second.lines);
    Ok((
        verify::LineRun {
            lines,
            more: second.more,
            verified: first.verified + second.verified,
        },
        Some(head + rest.len()),
    ))
}

/// The file-name hits of every pinned generation with their places (none for `references`).
fn file_name_hits(search: &Collect<'_>) -> Vec<(Pos, Ranked)> {
    if search.references {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (repo, (_, generation)) in search.pinned.iter().enumerate() {
        for doc in verify::file_names(generation, search.compiled) {
            let ranked = Ranked::FileName { repo, doc };
            out.push((ranked.pos(search.pinned), ranked));
        }
    }
    out
}

/// The definition tier's hits with their places, and every definition line by document (the
/// line tier skips them, wherever the page starts).
fn definition_hits(search: &Collect<'_>) -> Result<(Vec<(Pos, Ranked)>, Skip), SearchError> {
    let mut out = Vec::new();
    let mut skip = Skip::new();
    let Some(name) = search.definitions else {
        return Ok((out, skip));
    };
    for (repo, (_, generation)) in search.pinned.iter().enumerate() {
        let Some(lines) = generation.named_lines(name, search.deadline)? else {
            continue;
        };
        for (doc, line) in lines {
            let Some(d) = generation.docs.get(doc as usize) else {
                continue;
            };
            if d.kind != DocKind::Text || !search.compiled.filter.allows(d) {
                continue;
            }
            let at = (repo as u32, doc);
            let Some(hit) = verify::one_line(&search.compiled.regex, at, generation.text(d), line)
            else {
                continue;
            };
            let lines = skip.entry(at).or_default();
            if lines.contains(&line) {
                continue; // two definitions on one line: one hit
            }
            lines.push(line);
            let ranked = Ranked::Line { repo, hit };
            out.push((ranked.pos(search.pinned), ranked));
        }
    }
    Ok((out, skip))
}

/// The line tier's candidates of every pinned generation, (repository, document) in rank
/// order.
fn candidates(search: &Collect<'_>) -> Vec<(u32, u32)> {
    let mut all: Vec<(u32, u32)> = Vec::new();
    for (repo, (_, generation)) in search.pinned.iter().enumerate() {
        all.extend(
            crate::candidates::select(generation, search.compiled)
                .into_iter()
                .map(|doc| (repo as u32, doc)),
        );
    }
    if search.pinned.len() > 1 {
        // Each repository's are in rank order already; merged on (rank, repository, id).
        all.sort_by_cached_key(|&(repo, doc)| {
            (
                search.pinned[repo as usize].1.docs[doc as usize].rank,
                repo,
                doc,
            )
        });
    }
    all
}

/// Whether a literal query is an identifier, whose definitions form a tier of their own.
pub(crate) fn identifier(query: &str) -> bool {
    let mut bytes = query.bytes();
    bytes
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}
