//! Verification: the regex run over each candidate's stored text, line by line as `git grep`
//! does, on a few threads, keeping the first hits in (path, line) order up to a budget; and
//! the file-name hits of a generation. Each line hit notes whether the line looks like a
//! definition (a ranking signal).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use regex::bytes::Regex;

use crate::candidates;
use crate::error::SearchError;
use crate::plan::Compiled;
use crate::store::Generation;

/// Time budget of one search (the regex engine is linear, but a corpus times a pattern that
/// matches everywhere can still take long).
pub const SEARCH_BUDGET: Duration = Duration::from_secs(20);
/// Candidates per unit of work handed to a verification thread.
const CHUNK: usize = 16;

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
    let candidates = candidates::select(generation, compiled);
    let chunks = Chunks {
        generation,
        regex: &compiled.regex,
        candidates: &candidates,
        // One chunk never needs more than `budget + 1` hits of its own.
        enough: budget.saturating_add(1),
        count: candidates.len().div_ceil(CHUNK),
        deadline,
        next: AtomicUsize::new(0),
        found: AtomicUsize::new(0),
        timed_out: AtomicBool::new(false),
    };
    let total_bytes: u64 = candidates
        .iter()
        .map(|&i| generation.docs[i as usize].len)
        .sum();
    // Threads only pay off past a few hundred KiB of text.
    let results = if threads > 1 && total_bytes > 256 << 10 {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| scope.spawn(|| chunks.work()))
                .collect();
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
        chunks.work()
    };
    if chunks.timed_out.load(Ordering::Relaxed) {
        return Err(SearchError::Timeout {
            seconds: SEARCH_BUDGET.as_secs(),
        });
    }
    let (lines, more, verified) = first_hits(results, budget);
    Ok(LineRun {
        lines,
        more,
        candidates: candidates.len() as u64,
        verified,
    })
}

/// The hits of one chunk of candidates: (chunk number, documents verified, hits).
type ChunkHits = (usize, u64, Vec<LineHit>);

/// The candidates of one [`lines`] call, cut in chunks that its threads take in turn.
///
/// Chunks are taken in increasing order and every chunk taken is finished, so the chunks
/// done always form a prefix of the candidates; workers stop taking chunks once the hits
/// found exceed the budget.
struct Chunks<'a> {
    generation: &'a Generation,
    regex: &'a Regex,
    candidates: &'a [u32],
    /// Hits after which no more chunks are taken: one more than the budget.
    enough: usize,
    /// Chunks in all.
    count: usize,
    deadline: Instant,
    next: AtomicUsize,
    found: AtomicUsize,
    timed_out: AtomicBool,
}

impl Chunks<'_> {
    /// One worker: verifies chunks until none is left, enough hits are known, or the
    /// deadline passes (then `timed_out` is set).
    fn work(&self) -> Vec<ChunkHits> {
        let mut results: Vec<ChunkHits> = Vec::new();
        loop {
            if self.timed_out.load(Ordering::Relaxed)
                || self.found.load(Ordering::Relaxed) >= self.enough
            {
                return results;
            }
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.count {
                return results;
            }
            if Instant::now() > self.deadline {
                self.timed_out.store(true, Ordering::Relaxed);
                return results;
            }
            let mut hits = Vec::new();
            let mut verified = 0u64;
            let candidates = self.candidates;
            for &id in &candidates[chunk * CHUNK..((chunk + 1) * CHUNK).min(candidates.len())] {
                if hits.len() >= self.enough {
                    break;
                }
                let doc = &self.generation.docs[id as usize];
                verify(
                    self.regex,
                    id,
                    self.generation.text(doc),
                    &mut hits,
                    self.enough,
                );
                verified += 1;
            }
            self.found.fetch_add(hits.len(), Ordering::Relaxed);
            results.push((chunk, verified, hits));
        }
    }
}

/// The first `budget` hits of the chunks done, in chunk order: (hits, whether more were
/// found, documents verified).
fn first_hits(mut results: Vec<ChunkHits>, budget: usize) -> (Vec<LineHit>, bool, u64) {
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
    (lines, more, verified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::bytes::RegexBuilder;

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
}
