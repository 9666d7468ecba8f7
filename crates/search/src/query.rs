//! Query execution: compile, select candidates through the trigram index, verify line by
//! line, rank, and cut a page.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use crate::lang::LangFilter;
use crate::store::{Doc, DocKind, Generation};
use crate::trigram::{TrigramQuery, plan};
use crate::{Hit, PathOnly, SearchError, SearchRequest};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1000;
/// Compiled-size limit of a regular expression (and of its lazy DFA cache).
pub const REGEX_SIZE_LIMIT: usize = 8 << 20;
/// Most hits per page.
pub const MAX_LIMIT: usize = 1000;
/// Longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 200;
/// Time budget of one search (the regex engine is linear, but a corpus times a pattern that
/// matches everywhere can still take long).
pub const SEARCH_BUDGET: Duration = Duration::from_secs(20);
/// Default cap on the hits one search collects (file-name and line hits together): beyond it,
/// verification stops and [`SearchStats::truncated`](crate::SearchStats::truncated) is set.
/// Bounds the memory and time of queries that match nearly every line (`e`, `^`). Lowered per
/// index set with [`Indexes::with_max_hits`](crate::Indexes::with_max_hits).
pub const MAX_HITS: usize = 100_000;
/// At most this many trigram posting lists are intersected per AND: the rarest ones. More
/// would cost decoding time and can only shrink a candidate set that verification fixes.
const MAX_AND_LISTS: usize = 12;

/// A query ready to run.
pub(crate) struct Compiled {
    pub regex: Regex,
    pub plan: TrigramQuery,
    pub filter: DocFilter,
}

/// The `path` glob and `lang` filter of a request.
pub(crate) struct DocFilter {
    glob: Option<GlobMatcher>,
    lang: Option<LangFilter>,
}

impl DocFilter {
    /// Validates and compiles the filters (blank ones filter nothing).
    pub(crate) fn new(path: Option<&str>, lang: Option<&str>) -> Result<DocFilter, SearchError> {
        let glob = match path.map(str::trim) {
            None | Some("") => None,
            Some(glob) => Some(
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| SearchError::InvalidGlob {
                        glob: glob.to_owned(),
                        message: e.kind().to_string(),
                    })?
                    .compile_matcher(),
            ),
        };
        let lang = match lang.map(str::trim) {
            None | Some("") => None,
            Some(lang) => Some(LangFilter::parse(lang)?),
        };
        Ok(DocFilter { glob, lang })
    }

    /// Whether a document passes both filters.
    pub(crate) fn allows(&self, doc: &Doc) -> bool {
        self.glob.as_ref().is_none_or(|g| g.is_match(&doc.path))
            && self
                .lang
                .as_ref()
                .is_none_or(|l| l.matches_doc(&doc.path, &doc.lang))
    }
}

/// Refuses an empty query or one over [`MAX_QUERY_BYTES`]: checked before anything else.
pub(crate) fn check_length(query: &str) -> Result<(), SearchError> {
    if query.is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(SearchError::QueryTooLong {
            len: query.len(),
            max: MAX_QUERY_BYTES,
        });
    }
    Ok(())
}

/// Validates and compiles the request's query and filters; its length has passed
/// [`check_length`] already.
pub(crate) fn compile(request: &SearchRequest) -> Result<Compiled, SearchError> {
    let pattern = if request.regex {
        request.query.clone()
    } else {
        regex::escape(&request.query)
    };
    let regex = RegexBuilder::new(&pattern)
        .case_insensitive(!request.case_sensitive)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(limit) => SearchError::RegexTooBig { limit },
            regex::Error::Syntax(message) => SearchError::InvalidRegex { message },
            other => SearchError::InvalidRegex {
                message: other.to_string(),
            },
        })?;
    // The same flags as the regex, so the plan describes exactly what the regex matches.
    let plan = match regex_syntax::ParserBuilder::new()
        .case_insensitive(!request.case_sensitive)
        .multi_line(true)
        .build()
        .parse(&pattern)
    {
        Ok(hir) => plan(&hir),
        Err(_) => TrigramQuery::All,
    };
    let filter = DocFilter::new(request.path.as_deref(), request.lang.as_deref())?;
    Ok(Compiled {
        regex,
        plan,
        filter,
    })
}

/// Candidate documents of a generation: `None` for all of them.
fn evaluate(generation: &Generation, query: &TrigramQuery) -> Option<Vec<u32>> {
    match query {
        TrigramQuery::All => None,
        TrigramQuery::Trigram(t) => Some(
            generation
                .lookup(*t)
                .map(|(n, offset)| generation.postings(n, offset))
                .unwrap_or_default(),
        ),
        TrigramQuery::And(parts) => {
            // Trigram leaves rarest first, capped; composite parts after.
            let mut leaves = Vec::new();
            let mut others = Vec::new();
            for part in parts {
                match part {
                    TrigramQuery::Trigram(t) => match generation.lookup(*t) {
                        None => return Some(Vec::new()),
                        Some(found) => leaves.push(found),
                    },
                    other => others.push(other),
                }
            }
            leaves.sort_unstable_by_key(|(n, _)| *n);
            leaves.truncate(MAX_AND_LISTS);
            let mut result: Option<Vec<u32>> = None;
            for (n, offset) in leaves {
                let list = generation.postings(n, offset);
                result = Some(match result {
                    None => list,
                    Some(acc) => intersect(&acc, &list),
                });
                if result.as_ref().is_some_and(Vec::is_empty) {
                    return result;
                }
            }
            for other in others {
                if let Some(list) = evaluate(generation, other) {
                    result = Some(match result {
                        None => list,
                        Some(acc) => intersect(&acc, &list),
                    });
                }
            }
            result
        }
        TrigramQuery::Or(parts) => {
            let mut acc: Vec<u32> = Vec::new();
            for part in parts {
                let list = evaluate(generation, part)?;
                acc = union(&acc, &list);
            }
            Some(acc)
        }
    }
}

fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len().min(b.len())));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(_), Some(&y)) | (None, Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, None) => break,
        };
        out.push(next);
    }
    out
}

/// One matching line, before its snippet is cut.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineHit {
    pub doc: u32,
    pub line: u32,
    pub start: usize,
    pub end: usize,
    /// Byte offset of the match in the line.
    pub at: usize,
    pub definition: bool,
}

/// Words that may precede a definition keyword.
const MODIFIERS: &[&str] = &[
    "pub",
    "pub(crate)",
    "pub(super)",
    "export",
    "default",
    "async",
    "unsafe",
    "static",
    "public",
    "private",
    "protected",
    "internal",
    "abstract",
    "final",
    "sealed",
    "open",
    "extern",
    "const",
    "inline",
    "virtual",
    "override",
    "data",
];
/// Keywords that start a definition in common languages.
const DEFINITIONS: &[&str] = &[
    "fn",
    "struct",
    "class",
    "def",
    "func",
    "type",
    "interface",
    "enum",
    "trait",
    "impl",
    "function",
    "mod",
    "module",
    "macro_rules!",
    "union",
    "object",
    "record",
    "namespace",
    "typedef",
];

/// Whether a line looks like it defines something (ranked before other lines).
pub(crate) fn is_definition(line: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(line) else {
        return false;
    };
    let mut words = text.split_whitespace();
    for word in words.by_ref() {
        if MODIFIERS.contains(&word) {
            continue;
        }
        return DEFINITIONS.contains(&word);
    }
    false
}

/// Every line of `text` with a match, git-grep style: the regex applies per line. Stops once
/// `out` holds `limit` hits.
pub(crate) fn verify(regex: &Regex, doc: u32, text: &[u8], out: &mut Vec<LineHit>, limit: usize) {
    let mut pos = 0usize;
    let mut line = 1u32;
    let mut counted = 0usize;
    while pos <= text.len() && out.len() < limit {
        let Some(m) = regex.find_at(text, pos) else {
            break;
        };
        let start = memchr::memrchr(b'\n', &text[pos..m.start()]).map_or(pos, |i| pos + i + 1);
        if start == text.len() && (text.is_empty() || text[start - 1] == b'\n') {
            break; // after the final newline there is no line
        }
        let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        line += memchr::memchr_iter(b'\n', &text[counted..start]).count() as u32;
        counted = start;
        let at = if m.end() <= end {
            Some(m.start() - start)
        } else {
            // The leftmost match runs past the line's end: test the line on its own.
            regex.find(&text[start..end]).map(|m| m.start())
        };
        if let Some(at) = at {
            out.push(LineHit {
                doc,
                line,
                start,
                end,
                at,
                definition: is_definition(&text[start..end]),
            });
        }
        pos = end + 1;
    }
}

/// Cuts a snippet of at most [`SNIPPET_CHARS`] characters around the match.
pub(crate) fn snippet(line: &[u8], at: usize) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches(['\r', '\n']);
    let trimmed = text.trim_start();
    let lead = text.len() - trimmed.len();
    if trimmed.chars().count() <= SNIPPET_CHARS {
        return trimmed.trim_end().to_owned();
    }
    // Start a little before the match so that it shows with some context.
    let from = trimmed.floor_char_boundary(at.saturating_sub(lead).saturating_sub(40));
    trimmed[from..].chars().take(SNIPPET_CHARS).collect()
}

/// File-name hits of one generation: documents (text or path-only) whose path passes the
/// filters and matches the query, in path order.
pub(crate) fn file_names(generation: &Generation, compiled: &Compiled) -> Vec<u32> {
    generation
        .docs
        .iter()
        .enumerate()
        .filter(|(_, d)| compiled.filter.allows(d) && compiled.regex.is_match(d.path.as_bytes()))
        .map(|(i, _)| i as u32)
        .collect()
}

/// The line hits of one repository, in (path, line) order.
pub(crate) struct LineRun {
    /// At most the `budget` given to [`lines`]: the first ones in (path, line) order.
    pub lines: Vec<LineHit>,
    /// True when more hits than `budget` exist (those past it were dropped).
    pub more: bool,
    /// Text documents selected by the trigram plan and the filters.
    pub candidates: u64,
    /// Documents actually run through the regex (fewer than `candidates` when `more`).
    pub verified: u64,
}

/// Verifies the candidate documents of one generation, collecting at most `budget` line hits:
/// the first ones in (path, line) order, whatever the threads' interleaving. Verification stops
/// once more than `budget` hits are known, so the memory stays bounded for queries matching
/// nearly every line.
pub(crate) fn lines(
    generation: &Generation,
    compiled: &Compiled,
    threads: usize,
    deadline: Instant,
    budget: usize,
) -> Result<LineRun, SearchError> {
    let docs = &generation.docs;
    let candidates: Vec<u32> = match evaluate(generation, &compiled.plan) {
        Some(ids) => ids,
        None => (0..docs.len() as u32).collect(),
    }
    .into_iter()
    .filter(|&i| {
        docs.get(i as usize)
            .is_some_and(|d| d.kind == DocKind::Text && compiled.filter.allows(d))
    })
    .collect();

    // Chunks are taken in increasing order and every chunk taken is finished, so the chunks
    // done always form a prefix of the candidates; workers stop taking chunks once the hits
    // found exceed the budget. One chunk never needs more than `budget + 1` hits of its own.
    let enough = budget.saturating_add(1);
    const CHUNK: usize = 16;
    let chunks = candidates.len().div_ceil(CHUNK);
    let next = AtomicUsize::new(0);
    let found = AtomicUsize::new(0);
    let timed_out = AtomicBool::new(false);
    let work = || {
        let mut results: Vec<(usize, u64, Vec<LineHit>)> = Vec::new();
        loop {
            if timed_out.load(Ordering::Relaxed) || found.load(Ordering::Relaxed) >= enough {
                return results;
            }
            let chunk = next.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                return results;
            }
            if Instant::now() > deadline {
                timed_out.store(true, Ordering::Relaxed);
                return results;
            }
            let mut hits = Vec::new();
            let mut verified = 0u64;
            for &id in &candidates[chunk * CHUNK..((chunk + 1) * CHUNK).min(candidates.len())] {
                if hits.len() >= enough {
                    break;
                }
                let doc = &docs[id as usize];
                verify(&compiled.regex, id, generation.text(doc), &mut hits, enough);
                verified += 1;
            }
            found.fetch_add(hits.len(), Ordering::Relaxed);
            results.push((chunk, verified, hits));
        }
    };
    let total_bytes: u64 = candidates.iter().map(|&i| docs[i as usize].len).sum();
    // Threads only pay off past a few hundred KiB of text.
    let mut results = if threads > 1 && total_bytes > 256 << 10 {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            let mut all = Vec::new();
            for handle in handles {
                match handle.join() {
                    Ok(part) => all.extend(part),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            all
        })
    } else {
        work()
    };
    if timed_out.load(Ordering::Relaxed) {
        return Err(SearchError::Timeout {
            seconds: SEARCH_BUDGET.as_secs(),
        });
    }
    results.sort_unstable_by_key(|(chunk, _, _)| *chunk);
    let verified = results.iter().map(|(_, verified, _)| verified).sum();
    let mut lines: Vec<LineHit> = Vec::new();
    let mut more = false;
    for (_, _, hits) in results {
        let room = budget - lines.len();
        if hits.len() > room {
            lines.extend_from_slice(&hits[..room]);
            more = true;
            break;
        }
        lines.extend(hits);
    }
    Ok(LineRun {
        lines,
        more,
        candidates: candidates.len() as u64,
        verified,
    })
}

/// The content of a cursor (hex of JSON: opaque to callers).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Hits already returned.
    pub offset: u64,
    /// Hash of the query and its filters.
    pub request: String,
    /// (repository, commit, generation) of every searched repository.
    pub generations: Vec<(String, String, u64)>,
}

impl Cursor {
    pub(crate) fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        json.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub(crate) fn decode(text: &str) -> Result<Cursor, SearchError> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) || text.len() > 1 << 16 {
            return Err(SearchError::InvalidCursor);
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| SearchError::InvalidCursor)?;
        serde_json::from_slice(&bytes).map_err(|_| SearchError::InvalidCursor)
    }
}

/// A hit in the global ranking.
pub(crate) enum Ranked {
    FileName { repo: usize, doc: u32 },
    Line { repo: usize, hit: LineHit },
}

impl Ranked {
    pub(crate) fn repo(&self) -> usize {
        match self {
            Ranked::FileName { repo, .. } | Ranked::Line { repo, .. } => *repo,
        }
    }

    pub(crate) fn to_hit(&self, generation: &Generation) -> Hit {
        match self {
            Ranked::FileName { doc, .. } => {
                let doc = &generation.docs[*doc as usize];
                Hit::FileName {
                    path: doc.path.clone(),
                    path_only: match doc.kind {
                        DocKind::Text => None,
                        DocKind::TooLarge => Some(PathOnly::TooLarge),
                        DocKind::Binary => Some(PathOnly::Binary),
                        DocKind::NotUtf8 => Some(PathOnly::NotUtf8),
                    },
                }
            }
            Ranked::Line { hit, .. } => {
                let doc = &generation.docs[hit.doc as usize];
                let text = generation.text(doc);
                Hit::Line {
                    path: doc.path.clone(),
                    line: u64::from(hit.line),
                    snippet: snippet(&text[hit.start..hit.end], hit.at),
                    definition: hit.definition,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(pattern: &str, text: &str) -> Vec<u32> {
        let regex = RegexBuilder::new(pattern).multi_line(true).build().unwrap();
        let mut out = Vec::new();
        verify(&regex, 0, text.as_bytes(), &mut out, usize::MAX);
        out.iter().map(|h| h.line).collect()
    }

    #[test]
    fn per_line_semantics() {
        assert_eq!(lines(r"a\sb", "a\nb\na b\n"), vec![3]);
        assert_eq!(lines("^", "x\ny\n"), vec![1, 2]);
        assert_eq!(lines("^", "x\ny"), vec![1, 2]);
        assert_eq!(lines("^", ""), Vec::<u32>::new());
        assert_eq!(lines("$", "x\n\nz"), vec![1, 2, 3]);
        assert_eq!(lines(r"[^x]+", "x\nab\n"), vec![2]);
    }

    #[test]
    fn verification_stops_at_the_limit() {
        let regex = RegexBuilder::new("^").multi_line(true).build().unwrap();
        let mut out = Vec::new();
        verify(&regex, 0, b"a\nb\nc\nd\n", &mut out, 3);
        assert_eq!(
            out.iter().map(|h| h.line).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        verify(&regex, 1, b"e\n", &mut out, 3);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn definitions() {
        assert!(is_definition(b"    pub fn main() {"));
        assert!(is_definition(b"class Foo:"));
        assert!(!is_definition(b"    let x = fn_call();"));
    }

    #[test]
    fn snippets_are_bounded() {
        let long = format!("{}needle{}", "é".repeat(300), "x".repeat(300));
        let s = snippet(long.as_bytes(), 600);
        assert!(s.chars().count() <= SNIPPET_CHARS);
        assert!(s.contains("needle"));
    }
}
