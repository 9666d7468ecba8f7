//! Verification: the regex run over each candidate's stored text, line by line as `git grep`
//! does, candidates taken in rank order on a few threads, keeping the first hits in rank
//! order up to a budget and stopping there (S-10); one given line checked (a definition);
//! and the file-name hits of a generation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use regex::bytes::Regex;

use crate::error::SearchError;
use crate::limits::SEARCH_BUDGET;
use crate::plan::Compiled;
use crate::store::Generation;

/// Candidates per unit of work handed to a verification thread.
const CHUNK: usize = 16;
/// Text the calling thread verifies alone before helper threads join.
const SOLO_BYTES: u64 = 256 << 10;

/// One matching line, before its snippet is cut.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineHit {
    /// The repository's index among the pinned generations.
    pub repo: u32,
    pub doc: u32,
    pub line: u32,
    pub start: usize,
    pub end: usize,
    /// Byte offset of the match in the line.
    pub at: usize,
    pub definition: bool,
}

/// Every line of `text` with a match, git-grep style: the regex applies per line. Stops once
/// `out` holds `limit` hits. Hits are of document `doc` of repository 0.
#[cfg(test)]
pub(crate) fn verify(regex: &Regex, doc: u32, text: &[u8], out: &mut Vec<LineHit>, limit: usize) {
    verify_from(regex, (0, doc), text, 1, out, limit);
}

/// Every line of `text` from line `first` (1-based) on with a match, git-grep style: the
/// regex applies per line. Stops once `out` holds `limit` hits.
pub(crate) fn verify_from(
    regex: &Regex,
    (repo, doc): (u32, u32),
    text: &[u8],
    first: u32,
    out: &mut Vec<LineHit>,
    limit: usize,
) {
    let mut pos = 0usize;
    let mut line = 1u32;
    if first > 1 {
        match memchr::memchr_iter(b'\n', text).nth(first as usize - 2) {
            Some(at) => {
                pos = at + 1;
                line = first;
            }
            None => return,
        }
    }
    let mut counted = pos;
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
                repo,
                doc,
                line,
                start,
                end,
                at,
                definition: false,
            });
        }
        pos = end + 1;
    }
}

/// Line `line` (1-based) of `text` as a hit when the regex matches it.
pub(crate) fn one_line(
    regex: &Regex,
    (repo, doc): (u32, u32),
    text: &[u8],
    line: u32,
) -> Option<LineHit> {
    let start = match line {
        0 => return None,
        1 => 0,
        n => memchr::memchr_iter(b'\n', text).nth(n as usize - 2)? + 1,
    };
    if start >= text.len() {
        return None;
    }
    let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
    let at = regex.find(&text[start..end])?.start();
    Some(LineHit {
        repo,
        doc,
        line,
        start,
        end,
        at,
        definition: true,
    })
}

/// File-name hits of one generation: documents (text or path-only) whose path passes the
/// filters and matches the query, in id order.
///
/// The regex runs once over all paths (one per line, module `store`) rather than once per
/// path: a match is taken for the path it starts in, tested alone when it runs past that
/// path's end (a class such as `\s` can match the line break), and the search goes on at the
/// next path. Patterns with absolute anchors (`\A`, `\z`), which see one buffer, not one
/// path, match path by path.
pub(crate) fn file_names(generation: &Generation, compiled: &Compiled) -> Vec<u32> {
    let regex = &compiled.regex;
    let pattern = regex.as_str();
    if pattern.contains("\\A") || pattern.contains("\\z") {
        return generation
            .docs
            .iter()
            .enumerate()
            .filter(|(_, d)| compiled.filter.allows(d) && regex.is_match(d.path.as_bytes()))
            .map(|(i, _)| i as u32)
            .collect();
    }
    let (text, starts) = generation.path_lines();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        let Some(m) = regex.find_at(text, pos) else {
            break;
        };
        let id = starts
            .partition_point(|&start| start <= m.start())
            .saturating_sub(1);
        let Some(doc) = generation.docs.get(id) else {
            break;
        };
        let start = starts[id];
        let end = start + doc.path.len();
        let matched = m.end() <= end || regex.is_match(&text[start..end]);
        if matched && compiled.filter.allows(doc) {
            out.push(id as u32);
        }
        pos = end + 1;
    }
    out
}

/// Lines not to answer again, by (repository, document): those of an earlier tier.
pub(crate) type Skip = HashMap<(u32, u32), Vec<u32>>;

/// What one verification run is over.
pub(crate) struct LineInput<'a> {
    /// The pinned generations, by repository index.
    pub generations: &'a [&'a Generation],
    /// (repository, document) in rank order, from where the run starts.
    pub candidates: &'a [(u32, u32)],
    /// The first line of `candidates[0]` to verify (1-based; later candidates from 1).
    pub first_line: u32,
    pub regex: &'a Regex,
    /// The regex without Unicode mode, for ASCII-only documents ([`Compiled::ascii`]).
    pub ascii: Option<&'a Regex>,
    pub skip: &'a Skip,
    pub threads: usize,
    pub deadline: Instant,
}

/// The line hits of one run, in rank order.
pub(crate) struct LineRun {
    /// At most the `budget` given to [`lines`]: the first ones in rank order.
    pub lines: Vec<LineHit>,
    /// True when more hits than `budget` exist (verification stopped there).
    pub more: bool,
    /// Documents actually run through the regex.
    pub verified: u64,
}

/// Verifies candidates in rank order, collecting at most `budget` line hits: the first ones
/// in rank order, whatever the threads' interleaving. Verification stops once more than
/// `budget` hits are known, so a page costs in proportion to the page (S-10), and memory
/// stays bounded for queries matching nearly every line.
pub(crate) fn lines(input: &LineInput<'_>, budget: usize) -> Result<LineRun, SearchError> {
    let chunks = Chunks {
        input,
        // One chunk never needs more than `budget + 1` hits of its own.
        enough: budget.saturating_add(1),
        count: input.candidates.len().div_ceil(CHUNK),
        next: AtomicUsize::new(0),
        found: AtomicUsize::new(0),
        timed_out: AtomicBool::new(false),
    };
    // This thread starts alone: most pages are full within the first chunks, and a thread
    // started on a busy machine can wait a scheduler tick. Helpers join for what is left
    // past a few hundred KiB of text.
    let mut results = chunks.work(SOLO_BYTES);
    if input.threads > 1 && !chunks.stopped() {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (1..input.threads)
                .map(|_| scope.spawn(|| chunks.work(u64::MAX)))
                .collect();
            results.extend(chunks.work(u64::MAX));
            for handle in handles {
                match handle.join() {
                    Ok(part) => results.extend(part),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
    } else if !chunks.stopped() {
        results.extend(chunks.work(u64::MAX));
    }
    if chunks.timed_out.load(Ordering::Relaxed) {
        return Err(SearchError::Timeout {
            seconds: SEARCH_BUDGET.as_secs(),
        });
    }
    let (lines, more, verified) = first_hits(results, budget);
    Ok(LineRun {
        lines,
        more,
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
    input: &'a LineInput<'a>,
    /// Hits after which no more chunks are taken: one more than the budget.
    enough: usize,
    /// Chunks in all.
    count: usize,
    next: AtomicUsize,
    found: AtomicUsize,
    timed_out: AtomicBool,
}

impl Chunks<'_> {
    /// Whether no chunk is left to take, enough hits are known, or the deadline passed.
    fn stopped(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
            || self.found.load(Ordering::Relaxed) >= self.enough
            || self.next.load(Ordering::Relaxed) >= self.count
    }

    /// One worker: verifies chunks until none is left, enough hits are known, the deadline
    /// passes (then `timed_out` is set), or it has verified `bytes` of text.
    fn work(&self, bytes: u64) -> Vec<ChunkHits> {
        let input = self.input;
        let mut results: Vec<ChunkHits> = Vec::new();
        let mut done = 0u64;
        loop {
            if self.timed_out.load(Ordering::Relaxed)
                || self.found.load(Ordering::Relaxed) >= self.enough
                || done >= bytes
            {
                return results;
            }
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.count {
                return results;
            }
            if Instant::now() > input.deadline {
                self.timed_out.store(true, Ordering::Relaxed);
                return results;
            }
            let mut hits = Vec::new();
            let mut verified = 0u64;
            let candidates = input.candidates;
            let from = chunk * CHUNK;
            for (at, &(repo, doc)) in candidates[from..((chunk + 1) * CHUNK).min(candidates.len())]
                .iter()
                .enumerate()
            {
                if hits.len() >= self.enough {
                    break;
                }
                let generation = input.generations[repo as usize];
                let first = if from + at == 0 { input.first_line } else { 1 };
                let text = generation.text(&generation.docs[doc as usize]);
                let regex = match input.ascii {
                    Some(ascii) if text.is_ascii() => ascii,
                    _ => input.regex,
                };
                match input.skip.get(&(repo, doc)) {
                    None => verify_from(regex, (repo, doc), text, first, &mut hits, self.enough),
                    Some(skip) => {
                        let before = hits.len();
                        let limit = self.enough.saturating_add(skip.len());
                        verify_from(regex, (repo, doc), text, first, &mut hits, limit);
                        let mut kept = before;
                        for i in before..hits.len() {
                            if !skip.contains(&hits[i].line) {
                                hits[kept] = hits[i];
                                kept += 1;
                            }
                        }
                        hits.truncate(kept.min(self.enough));
                    }
                }
                verified += 1;
                done += text.len() as u64;
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
    fn from_a_line_and_one_line() {
        let regex = RegexBuilder::new("b").multi_line(true).build().unwrap();
        let mut out = Vec::new();
        verify_from(&regex, (0, 0), b"b\na\nb\nb", 3, &mut out, usize::MAX);
        assert_eq!(out.iter().map(|h| h.line).collect::<Vec<_>>(), vec![3, 4]);
        out.clear();
        verify_from(&regex, (0, 0), b"b\n", 2, &mut out, usize::MAX);
        assert!(out.is_empty());
        assert_eq!(
            one_line(&regex, (0, 0), b"a\nab\n", 2).map(|h| h.at),
            Some(1)
        );
        assert!(one_line(&regex, (0, 0), b"a\nab\n", 1).is_none());
        assert!(one_line(&regex, (0, 0), b"a\nab\n", 3).is_none());
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
}
