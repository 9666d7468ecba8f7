//! Trigrams: extraction from documents at build time, and from a regular expression's HIR at
//! query time (after Russ Cox, "Regular Expression Matching with a Trigram Index").
//!
//! The index holds one set of trigrams per document, of the ASCII-lowercased text. Lowercasing
//! is a byte-for-byte map that leaves every non-ASCII byte alone, so if a document contains a
//! string `s` then its lowercased text contains `lower(s)`: a query literal, lowercased the
//! same way, always finds its documents whatever the case flag. Case-sensitive queries pay
//! with a slightly larger candidate set; the index stays half the size. Trigrams spanning a
//! newline are not indexed: a match never spans a line (git grep semantics), so a query
//! literal containing a newline can match nothing, and an empty candidate set is then exact.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, ClassBytes, ClassUnicode, Hir, HirKind, Repetition};

/// A trigram packed as `b0 << 16 | b1 << 8 | b2` of the lowercased bytes.
pub(crate) type Trigram = u32;

/// Number of distinct trigrams (24 bits).
const TRIGRAM_SPACE: usize = 1 << 24;

/// Per-thread scratch space for [`doc_trigrams`]: a bit per possible trigram, all clear
/// between calls, so deduplication needs no sort and no hashing.
pub(crate) struct TrigramScratch {
    seen: Vec<u64>,
}

impl TrigramScratch {
    /// Allocates the 2 MiB bit set.
    pub(crate) fn new() -> Self {
        TrigramScratch {
            seen: vec![0; TRIGRAM_SPACE / 64],
        }
    }
}

/// The distinct trigrams of `text` (lowercased, not spanning `\n`), in first-seen order.
pub(crate) fn doc_trigrams(text: &[u8], scratch: &mut TrigramScratch, out: &mut Vec<Trigram>) {
    out.clear();
    let mut window: u32 = 0;
    // Bytes of the current line in the window (saturating at 3).
    let mut filled = 0u8;
    for &byte in text {
        if byte == b'\n' {
            filled = 0;
            continue;
        }
        window = ((window << 8) | u32::from(byte.to_ascii_lowercase())) & 0x00FF_FFFF;
        if filled < 2 {
            filled += 1;
            continue;
        }
        let (word, bit) = ((window >> 6) as usize, 1u64 << (window & 63));
        if scratch.seen[word] & bit == 0 {
            scratch.seen[word] |= bit;
            out.push(window);
        }
    }
    for &t in out.iter() {
        scratch.seen[(t >> 6) as usize] &= !(1u64 << (t & 63));
    }
}

/// The trigrams of one query literal (lowercased; may include trigrams with `\n`, which are
/// never in the index, so such a literal selects no document: correct, see the module doc).
fn literal_trigrams(literal: &[u8]) -> Vec<Trigram> {
    let mut out: Vec<Trigram> = literal
        .windows(3)
        .map(|w| {
            (u32::from(w[0].to_ascii_lowercase()) << 16)
                | (u32::from(w[1].to_ascii_lowercase()) << 8)
                | u32::from(w[2].to_ascii_lowercase())
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A boolean query over trigrams that every document with a match satisfies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrigramQuery {
    /// No constraint: every document is a candidate.
    All,
    /// The document has this trigram.
    Trigram(Trigram),
    /// All of these hold.
    And(Vec<TrigramQuery>),
    /// One of these holds.
    Or(Vec<TrigramQuery>),
}

impl TrigramQuery {
    fn and(parts: Vec<TrigramQuery>) -> TrigramQuery {
        let mut flat = Vec::new();
        for part in parts {
            match part {
                TrigramQuery::All => {}
                TrigramQuery::And(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        flat.dedup();
        match flat.len() {
            0 => TrigramQuery::All,
            1 => flat.pop().unwrap_or(TrigramQuery::All),
            _ => TrigramQuery::And(flat),
        }
    }

    fn or(parts: Vec<TrigramQuery>) -> TrigramQuery {
        let mut flat = Vec::new();
        for part in parts {
            match part {
                TrigramQuery::All => return TrigramQuery::All,
                TrigramQuery::Or(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        flat.dedup();
        match flat.len() {
            // An alternation of nothing matches nothing; `All` stays correct (a superset).
            0 => TrigramQuery::All,
            1 => flat.pop().unwrap_or(TrigramQuery::All),
            _ => TrigramQuery::Or(flat),
        }
    }
}

/// Largest set of exact strings tracked for one sub-expression before falling back to a query.
const MAX_EXACT: usize = 64;
/// Largest character class expanded into exact strings.
const MAX_CLASS: usize = 16;

/// What is known about the strings a sub-expression matches.
enum Info {
    /// Every match is exactly one of these (lowercased) strings.
    Exact(BTreeSet<Vec<u8>>),
    /// Every document containing a match satisfies this query.
    Inexact(TrigramQuery),
}

fn set_of(strings: impl IntoIterator<Item = Vec<u8>>) -> BTreeSet<Vec<u8>> {
    strings.into_iter().collect()
}

fn lower(bytes: &[u8]) -> Vec<u8> {
    bytes.to_ascii_lowercase()
}

/// The query satisfied by every document containing one of `set`.
fn exact_query(set: &BTreeSet<Vec<u8>>) -> TrigramQuery {
    if set.is_empty() || set.iter().any(|s| s.len() < 3) {
        return TrigramQuery::All;
    }
    TrigramQuery::or(
        set.iter()
            .map(|s| {
                TrigramQuery::and(
                    literal_trigrams(s)
                        .into_iter()
                        .map(TrigramQuery::Trigram)
                        .collect(),
                )
            })
            .collect(),
    )
}

fn to_query(info: Info) -> TrigramQuery {
    match info {
        Info::Exact(set) => exact_query(&set),
        Info::Inexact(query) => query,
    }
}

/// Cross product `a × b`, or `None` when it would exceed [`MAX_EXACT`].
fn product(a: &BTreeSet<Vec<u8>>, b: &BTreeSet<Vec<u8>>) -> Option<BTreeSet<Vec<u8>>> {
    if a.len().saturating_mul(b.len()) > MAX_EXACT {
        return None;
    }
    Some(
        a.iter()
            .flat_map(|x| {
                b.iter().map(move |y| {
                    let mut s = x.clone();
                    s.extend_from_slice(y);
                    s
                })
            })
            .collect(),
    )
}

/// What is known about the strings `hir` matches.
fn analyze(hir: &Hir) -> Info {
    match hir.kind() {
        // Zero-width: contributes the empty string to a concatenation.
        HirKind::Empty | HirKind::Look(_) => Info::Exact(set_of([Vec::new()])),
        HirKind::Literal(literal) => Info::Exact(set_of([lower(&literal.0)])),
        HirKind::Class(Class::Unicode(class)) => unicode_class(class),
        HirKind::Class(Class::Bytes(class)) => byte_class(class),
        HirKind::Repetition(rep) => repetition(rep),
        HirKind::Capture(capture) => analyze(&capture.sub),
        HirKind::Concat(parts) => concat(parts),
        HirKind::Alternation(branches) => alternation(branches),
    }
}

/// A small class is the set of its characters (lowercased); a large one constrains nothing.
fn unicode_class(class: &ClassUnicode) -> Info {
    let count: usize = class
        .ranges()
        .iter()
        .map(|r| (r.end() as usize).saturating_sub(r.start() as usize) + 1)
        .sum();
    if count > MAX_CLASS {
        return Info::Inexact(TrigramQuery::All);
    }
    let mut set = BTreeSet::new();
    for range in class.ranges() {
        for c in range.start()..=range.end() {
            let mut buf = [0u8; 4];
            set.insert(lower(c.encode_utf8(&mut buf).as_bytes()));
        }
    }
    Info::Exact(set)
}

/// As [`unicode_class`], for a class of bytes.
fn byte_class(class: &ClassBytes) -> Info {
    let count: usize = class
        .ranges()
        .iter()
        .map(|r| usize::from(r.end()) - usize::from(r.start()) + 1)
        .sum();
    if count > MAX_CLASS {
        return Info::Inexact(TrigramQuery::All);
    }
    let mut set = BTreeSet::new();
    for range in class.ranges() {
        for b in range.start()..=range.end() {
            set.insert(vec![b.to_ascii_lowercase()]);
        }
    }
    Info::Exact(set)
}

/// A repetition: `x?` of a small exact set and `x{n}` (n ≤ 4, while the product stays
/// small) are exact; otherwise at least one occurrence of `x` is required, if any is.
fn repetition(rep: &Repetition) -> Info {
    let sub = analyze(&rep.sub);
    if rep.min == 0 {
        // `x?` of a small exact set stays exact (`colou?r`); other optional parts
        // constrain nothing.
        if rep.max == Some(1)
            && let Info::Exact(mut set) = sub
            && set.len() < MAX_EXACT
        {
            set.insert(Vec::new());
            return Info::Exact(set);
        }
        return Info::Inexact(TrigramQuery::All);
    }
    if let Info::Exact(set) = &sub
        && Some(rep.min) == rep.max
        && rep.min <= 4
    {
        let mut acc = set_of([Vec::new()]);
        let mut fits = true;
        for _ in 0..rep.min {
            match product(&acc, set) {
                Some(next) => acc = next,
                None => {
                    fits = false;
                    break;
                }
            }
        }
        if fits {
            return Info::Exact(acc);
        }
    }
    // At least one occurrence of the sub-expression.
    Info::Inexact(to_query(sub))
}

/// Exact parts multiply into runs of exact strings while the product stays small; each run
/// that cannot grow, and each inexact part, becomes a query, all of which must hold.
fn concat(parts: &[Hir]) -> Info {
    let mut run = set_of([Vec::new()]);
    let mut queries = Vec::new();
    let mut all_exact = true;
    for part in parts {
        match analyze(part) {
            Info::Exact(set) => match product(&run, &set) {
                Some(next) => run = next,
                None => {
                    all_exact = false;
                    queries.push(exact_query(&run));
                    run = set;
                }
            },
            Info::Inexact(query) => {
                all_exact = false;
                queries.push(exact_query(&run));
                run = set_of([Vec::new()]);
                queries.push(query);
            }
        }
    }
    if all_exact {
        Info::Exact(run)
    } else {
        queries.push(exact_query(&run));
        Info::Inexact(TrigramQuery::and(queries))
    }
}

/// The union of exact branches while it stays small; else one of the branches' queries.
fn alternation(branches: &[Hir]) -> Info {
    let infos: Vec<Info> = branches.iter().map(analyze).collect();
    if infos.iter().all(|i| matches!(i, Info::Exact(_))) {
        let mut union = BTreeSet::new();
        for info in &infos {
            if let Info::Exact(set) = info {
                union.extend(set.iter().cloned());
            }
        }
        if union.len() <= MAX_EXACT {
            return Info::Exact(union);
        }
    }
    Info::Inexact(TrigramQuery::or(infos.into_iter().map(to_query).collect()))
}

/// The trigram query that every document with a match of `hir` satisfies.
pub(crate) fn plan(hir: &Hir) -> TrigramQuery {
    to_query(analyze(hir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(pattern: &str, case_insensitive: bool) -> TrigramQuery {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(case_insensitive)
            .multi_line(true)
            .build()
            .parse(pattern)
            .unwrap();
        plan(&hir)
    }

    fn tri(s: &str) -> TrigramQuery {
        let b = s.as_bytes();
        TrigramQuery::Trigram((u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]))
    }

    #[test]
    fn literal_and_case() {
        assert_eq!(
            plan_of("Abcd", false),
            TrigramQuery::And(vec![tri("abc"), tri("bcd")])
        );
        assert_eq!(
            plan_of("abcd", true),
            TrigramQuery::And(vec![tri("abc"), tri("bcd")])
        );
    }

    #[test]
    fn no_literal_is_all() {
        assert_eq!(plan_of(r"\w+\s*=\s*\d", false), TrigramQuery::All);
        assert_eq!(plan_of("ab", false), TrigramQuery::All);
    }

    #[test]
    fn concat_with_gap_and_alternation() {
        assert_eq!(
            plan_of(r"foo\w+bar", false),
            TrigramQuery::And(vec![tri("foo"), tri("bar")])
        );
        assert_eq!(
            plan_of("abc|xyz", false),
            TrigramQuery::Or(vec![tri("abc"), tri("xyz")])
        );
    }

    #[test]
    fn doc_trigrams_skip_newlines_and_fold() {
        let mut scratch = TrigramScratch::new();
        let mut out = Vec::new();
        doc_trigrams(b"ABc\nab", &mut scratch, &mut out);
        assert_eq!(
            out,
            vec![(u32::from(b'a') << 16) | (u32::from(b'b') << 8) | u32::from(b'c')]
        );
        doc_trigrams(b"abcabc", &mut scratch, &mut out);
        assert_eq!(out.len(), 3);
    }
}
