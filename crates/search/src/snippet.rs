//! What a line hit shows (S-1, SPEC §9): the snippet cut around the match, and the marks
//! of the query's matches in it, as search pages, commit subjects and diff lines show them.

use std::ops::Range;

use regex::bytes::Regex;

/// Longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 200;
/// Most marks (match ranges) one line hit carries ([`Hit::Line`]'s `marks`).
pub const MAX_MARKS: usize = 16;

/// Cuts a snippet of at most [`SNIPPET_CHARS`] characters around the match.
pub(crate) fn snippet(line: &[u8], at: usize) -> String {
    match std::str::from_utf8(line) {
        Ok(text) => text[window(text, at)].to_owned(),
        // Indexed text is UTF-8; anything else is shown lossily, its offsets unmarked.
        Err(_) => {
            let text = String::from_utf8_lossy(line);
            text[window(&text, at)].to_owned()
        }
    }
}

/// A line's snippet ([`snippet`]) and the ranges of `regex`'s matches in it ([`marks`]).
pub(crate) fn snippet_marked(line: &[u8], at: usize, regex: &Regex) -> (String, Vec<Range<u32>>) {
    (snippet(line, at), marks(line, at, regex))
}

/// Where the snippet of `line` (the match at byte `at`) lies in it: the line without its
/// line break and leading white space, and when that is longer than [`SNIPPET_CHARS`]
/// characters, that many from a little before the match (else without trailing white space).
fn window(line: &str, at: usize) -> Range<usize> {
    let text = line.trim_end_matches(['\r', '\n']);
    let trimmed = text.trim_start();
    let lead = text.len() - trimmed.len();
    if trimmed.chars().count() <= SNIPPET_CHARS {
        return lead..lead + trimmed.trim_end().len();
    }
    // Start a little before the match so that it shows with some context.
    let from = trimmed.floor_char_boundary(at.saturating_sub(lead).saturating_sub(40));
    let len: usize = trimmed[from..]
        .chars()
        .take(SNIPPET_CHARS)
        .map(char::len_utf8)
        .sum();
    lead + from..lead + from + len
}

/// The byte ranges, in the snippet [`snippet`] cuts of `line` around byte `at`, of the
/// non-empty matches of `regex` (the regex the search verified the line with) in the line
/// on its own, as verification applies it (git grep's per-line semantics): clipped to the
/// snippet, widened to whole characters, at most [`MAX_MARKS`], in order and disjoint.
/// None when the line is not UTF-8 (its snippet is a lossy copy with other offsets).
pub(crate) fn marks(line: &[u8], at: usize, regex: &Regex) -> Vec<Range<u32>> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    marks_shown(text, window(text, at), regex, 0, &mut out);
    out
}

/// Appends to `out` the non-empty matches of `regex` in the whole of `line`, clipped to the
/// part `shown` of it and widened to whole characters, as ranges from `shown.start` plus
/// `base` (where that part starts in the text the marks are of), while `out` holds fewer
/// than [`MAX_MARKS`]. What snippets (module `page`) and commit subjects (`history`) mark.
pub(crate) fn marks_shown(
    line: &str,
    shown: Range<usize>,
    regex: &Regex,
    base: usize,
    out: &mut Vec<Range<u32>>,
) {
    let first = out.len();
    for found in regex.find_iter(line.as_bytes()) {
        if found.start() >= shown.end || out.len() >= MAX_MARKS {
            break;
        }
        let start = line.floor_char_boundary(found.start().max(shown.start));
        let end = line.ceil_char_boundary(found.end().min(shown.end));
        // Empty matches mark nothing; a match widened into a character already marked joins
        // that mark (adjacent matches stay apart, as `git grep -o` lists them).
        if start >= end {
            continue;
        }
        let range = (base + start - shown.start) as u32..(base + end - shown.start) as u32;
        match out[first..].last_mut() {
            Some(last) if last.end > range.start => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
}

/// Whether `marks` can be marks of `snippet`: at most [`MAX_MARKS`] non-empty ranges, in
/// order, disjoint, inside it and on character boundaries (what a search makes; for marks
/// that crossed a network).
pub fn marks_fit(snippet: &str, marks: &[Range<u32>]) -> bool {
    let mut after = 0usize;
    marks.len() <= MAX_MARKS
        && marks.iter().all(|mark| {
            let (start, end) = (mark.start as usize, mark.end as usize);
            let fits = start >= after
                && start < end
                && end <= snippet.len()
                && snippet.is_char_boundary(start)
                && snippet.is_char_boundary(end);
            after = end;
            fits
        })
}
