//! The word vocabulary of a generation (S-10): every distinct word of its text documents
//! (a maximal run of characters the `regex` crate's Unicode `\w` matches) with the documents
//! holding it.
//!
//! Why: a regex with no required trigram (`\b[a-z]+_[0-9]{3}\b`) admits every document,
//! and sparse hits make the early stop verify most of the corpus. When the pattern can only
//! match non-empty strings made of word characters, every match lies inside one word of the
//! document, and the pattern run over the vocabulary (one word per line) matches that word:
//! `\b`, `\B`, `^` and `$` see a non-word character (the newline) at a word's edges there as
//! in the document, and the same characters inside. So the documents of the matching words
//! are a superset of the documents with a match: the candidate set, at the cost of one scan
//! of the vocabulary instead of the corpus.
//!
//! `words.bin`: `CSGW`, version u32, words u32, ASCII words u32, text length u64; the text
//! (each word followed by `\n`, the ASCII-only words first, each part sorted); then
//! `words + 1` u64 offsets of the words in the text; then `words + 1` u64 offsets of their
//! posting lists in the data that follows (document ids ascending, delta-encoded LEB128).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::OnceLock;

use memmap2::Mmap;
use regex::bytes::Regex;
use regex_syntax::hir::{Class, ClassBytes, ClassUnicode, Hir, HirKind, Look};

use crate::disk::FORMAT_VERSION;
use crate::error::SearchError;
use crate::postings::PostingBuf;

/// The vocabulary's file in a generation directory.
pub(crate) const WORDS_FILE: &str = "words.bin";
const MAGIC: &[u8; 4] = b"CSGW";
const HEADER: usize = 24;

/// Whether `c` is a word character of the `regex` crate's Unicode `\w`.
fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return regex_syntax::is_word_byte(c as u8);
    }
    // The feature `unicode` (hence `unicode-perl`) is on, so this never errs; were it off,
    // `word_only` refuses every pattern and no vocabulary is consulted.
    regex_syntax::try_is_word_character(c).unwrap_or(false)
}

/// The distinct words of a text document, each followed by `\n`, in first-seen order.
pub(crate) fn doc_words(text: &[u8]) -> Vec<u8> {
    // Text documents are UTF-8; anything else has no words.
    let Ok(text) = std::str::from_utf8(text) else {
        return Vec::new();
    };
    let bytes = text.as_bytes();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (word, len) = if b < 0x80 {
            (regex_syntax::is_word_byte(b), 1)
        } else {
            let c = text[i..]
                .chars()
                .next()
                .unwrap_or(char::REPLACEMENT_CHARACTER);
            (is_word_char(c), c.len_utf8())
        };
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let w = &text[s..i];
                if seen.insert(w) {
                    out.extend_from_slice(w.as_bytes());
                    out.push(b'\n');
                }
                start = None;
            }
            _ => {}
        }
        i += len;
    }
    if let Some(s) = start {
        let w = &text[s..];
        if seen.insert(w) {
            out.extend_from_slice(w.as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// The vocabulary being built: documents arrive in id order.
#[derive(Default)]
pub(crate) struct WordsBuilder {
    lists: HashMap<Box<str>, PostingBuf>,
}

impl WordsBuilder {
    /// Adds document `doc`'s words (from [`doc_words`]).
    pub(crate) fn add(&mut self, doc: u32, words: &[u8]) {
        for word in words.split(|&b| b == b'\n').filter(|w| !w.is_empty()) {
            let Ok(word) = std::str::from_utf8(word) else {
                continue;
            };
            match self.lists.get_mut(word) {
                Some(list) => list.push(doc),
                None => {
                    let mut list = PostingBuf::default();
                    list.push(doc);
                    self.lists.insert(word.into(), list);
                }
            }
        }
    }

    /// Writes `words.bin`.
    pub(crate) fn write(self, path: &Path) -> Result<(), SearchError> {
        let io = |e: std::io::Error| SearchError::io("writing the word vocabulary", e);
        let mut lists: Vec<(Box<str>, PostingBuf)> = self.lists.into_iter().collect();
        lists.sort_unstable_by(|(a, _), (b, _)| (!a.is_ascii(), a).cmp(&(!b.is_ascii(), b)));
        let ascii = lists.iter().take_while(|(w, _)| w.is_ascii()).count();
        let text_len: usize = lists.iter().map(|(w, _)| w.len() + 1).sum();
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(io)?;
        out.write_all(&(lists.len() as u32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&(ascii as u32).to_le_bytes()).map_err(io)?;
        out.write_all(&(text_len as u64).to_le_bytes())
            .map_err(io)?;
        for (word, _) in &lists {
            out.write_all(word.as_bytes()).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
        }
        let mut at = 0u64;
        for (word, _) in &lists {
            out.write_all(&at.to_le_bytes()).map_err(io)?;
            at += word.len() as u64 + 1;
        }
        out.write_all(&at.to_le_bytes()).map_err(io)?;
        let mut at = 0u64;
        for (_, list) in &lists {
            out.write_all(&at.to_le_bytes()).map_err(io)?;
            at += list.bytes.len() as u64;
        }
        out.write_all(&at.to_le_bytes()).map_err(io)?;
        for (_, list) in &lists {
            out.write_all(&list.bytes).map_err(io)?;
        }
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        Ok(())
    }
}

/// Below this many bytes of vocabulary text the scan stays on the calling thread (starting
/// threads costs more than it saves).
const PARALLEL_SCAN_BYTES: usize = 1 << 20;

/// `text[from..to]` (whole words, each ending in `\n`) cut in about as many parts as there
/// are cores (at most four), each ending at a word's end, with the regex to run over it.
fn pieces<'r>(
    text: &[u8],
    from: usize,
    to: usize,
    regex: &'r Regex,
) -> Vec<(usize, usize, &'r Regex)> {
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let count = if to - from < PARALLEL_SCAN_BYTES {
        1
    } else {
        cores
    };
    let mut out = Vec::with_capacity(count);
    let mut start = from;
    for part in 1..=count {
        if start >= to {
            break;
        }
        let target = from + (to - from) * part / count;
        let end = if part == count {
            to
        } else if target < start {
            continue; // the last part ran past this one's target
        } else {
            memchr::memchr(b'\n', &text[target..to]).map_or(to, |at| target + at + 1)
        };
        out.push((start, end, regex));
        start = end;
    }
    out
}

/// A mapped `words.bin`, checked at load.
pub(crate) struct Vocabulary {
    map: Mmap,
    count: usize,
    ascii: usize,
    text_len: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

impl Vocabulary {
    /// Checks a mapped file's header and bounds; `None` when it is not a vocabulary of
    /// this format.
    pub(crate) fn load(map: Mmap) -> Option<Vocabulary> {
        if map.get(..4)? != MAGIC || u32_at(&map, 4)? != FORMAT_VERSION {
            return None;
        }
        let count = u32_at(&map, 8)? as usize;
        let ascii = u32_at(&map, 12)? as usize;
        let text_len = usize::try_from(u64_at(&map, 16)?).ok()?;
        let vocabulary = Vocabulary {
            count,
            ascii,
            text_len,
            map,
        };
        let data = vocabulary.data_start()?;
        let last_text = u64_at(&vocabulary.map, vocabulary.starts_at() + count * 8)?;
        let last_data = u64_at(&vocabulary.map, vocabulary.lists_at() + count * 8)?;
        (ascii <= count
            && last_text as usize == text_len
            && (data as u64).checked_add(last_data)? <= vocabulary.map.len() as u64)
            .then_some(vocabulary)
    }

    fn starts_at(&self) -> usize {
        HEADER + self.text_len
    }

    fn lists_at(&self) -> usize {
        self.starts_at() + (self.count + 1) * 8
    }

    fn data_start(&self) -> Option<usize> {
        let end = self.lists_at().checked_add((self.count + 1) * 8)?;
        (end <= self.map.len()).then_some(end)
    }

    fn text(&self) -> &[u8] {
        &self.map[HEADER..HEADER + self.text_len]
    }

    fn start(&self, word: usize) -> usize {
        u64_at(&self.map, self.starts_at() + word * 8).map_or(self.text_len, |v| v as usize)
    }

    /// Bytes of the vocabulary's text (what a scan reads).
    pub(crate) fn text_len(&self) -> usize {
        self.text_len
    }

    /// The documents holding a word the regex matches (ascending, deduplicated): `ascii`,
    /// when given, runs over the ASCII-only words (it matches what `regex` matches there),
    /// `regex` over the rest.
    pub(crate) fn matching_docs(&self, regex: &Regex, ascii: Option<&Regex>) -> Vec<u32> {
        let text = self.text();
        let split = self.start(self.ascii);
        // The scan is most of a word-only search that finds few words (tens of MB of
        // vocabulary for a 100 MB corpus): its parts, cut at word ends, run on every core.
        let mut parts = pieces(text, 0, split, ascii.unwrap_or(regex));
        parts.extend(pieces(text, split, text.len(), regex));
        let mut words = Vec::new();
        if parts.len() == 1 || text.len() < PARALLEL_SCAN_BYTES {
            for (from, to, regex) in parts {
                self.scan(regex, &text[from..to], from, &mut words);
            }
        } else {
            std::thread::scope(|scope| {
                let workers: Vec<_> = parts
                    .into_iter()
                    .map(|(from, to, regex)| {
                        scope.spawn(move || {
                            let mut found = Vec::new();
                            self.scan(regex, &text[from..to], from, &mut found);
                            found
                        })
                    })
                    .collect();
                for worker in workers {
                    match worker.join() {
                        Ok(found) => words.extend(found),
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
            });
        }
        let mut docs = Vec::new();
        for word in words {
            self.postings(word, &mut docs);
        }
        docs.sort_unstable();
        docs.dedup();
        docs
    }

    /// Adds the index of every word in `part` (at `base` in the text) the regex matches.
    fn scan(&self, regex: &Regex, part: &[u8], base: usize, words: &mut Vec<usize>) {
        let mut pos = 0;
        while pos < part.len() {
            let Some(m) = regex.find_at(part, pos) else {
                return;
            };
            let at = base + m.start();
            // The word holding the match start: the last whose start is at or before it.
            let word = self
                .partition_point(|w| self.start(w) <= at)
                .saturating_sub(1);
            words.push(word);
            // On to the next word (a match never spans the newline after this one).
            pos = self
                .start(word + 1)
                .saturating_sub(base)
                .max(m.end().max(pos + 1));
        }
    }

    fn partition_point(&self, pred: impl Fn(usize) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Appends word `word`'s documents.
    fn postings(&self, word: usize, out: &mut Vec<u32>) {
        let Some(data) = self.data_start() else {
            return;
        };
        let offset = |w: usize| u64_at(&self.map, self.lists_at() + w * 8).map(|v| v as usize);
        let (Some(from), Some(to)) = (offset(word), offset(word + 1)) else {
            return;
        };
        let Some(bytes) = self.map.get(data + from..data + to) else {
            return;
        };
        let (mut acc, mut value, mut shift) = (0u32, 0u32, 0u32);
        for &byte in bytes {
            value |= u32::from(byte & 0x7F) << shift.min(31);
            if byte & 0x80 == 0 {
                acc = acc.wrapping_add(value);
                out.push(acc);
                value = 0;
                shift = 0;
            } else {
                shift += 7;
            }
        }
    }
}

/// Whether every match of `hir` is a non-empty run of word characters, with only
/// look-arounds that judge a position by its two neighbouring characters (word boundaries,
/// line anchors): then the vocabulary finds every document with a match (module doc).
pub(crate) fn word_only(hir: &Hir) -> bool {
    if regex_syntax::try_is_word_character('a').is_err() {
        return false;
    }
    hir.properties().minimum_len().is_some_and(|n| n > 0) && all_word(hir)
}

fn all_word(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Empty => true,
        HirKind::Literal(literal) => {
            std::str::from_utf8(&literal.0).is_ok_and(|s| s.chars().all(is_word_char))
        }
        HirKind::Class(Class::Unicode(class)) => unicode_words(class),
        HirKind::Class(Class::Bytes(class)) => byte_words(class),
        HirKind::Look(look) => matches!(
            look,
            Look::StartLF
                | Look::EndLF
                | Look::WordAscii
                | Look::WordAsciiNegate
                | Look::WordUnicode
                | Look::WordUnicodeNegate
                | Look::WordStartAscii
                | Look::WordEndAscii
                | Look::WordStartUnicode
                | Look::WordEndUnicode
                | Look::WordStartHalfAscii
                | Look::WordEndHalfAscii
                | Look::WordStartHalfUnicode
                | Look::WordEndHalfUnicode
        ),
        HirKind::Repetition(rep) => all_word(&rep.sub),
        HirKind::Capture(capture) => all_word(&capture.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts.iter().all(all_word),
    }
}

/// Unicode `\w` as a class.
fn word_class() -> Option<&'static ClassUnicode> {
    static WORD: OnceLock<Option<ClassUnicode>> = OnceLock::new();
    WORD.get_or_init(|| match regex_syntax::parse(r"\w").ok()?.into_kind() {
        HirKind::Class(Class::Unicode(class)) => Some(class),
        _ => None,
    })
    .as_ref()
}

fn unicode_words(class: &ClassUnicode) -> bool {
    let Some(word) = word_class() else {
        return false;
    };
    let mut rest = class.clone();
    rest.difference(word);
    rest.ranges().is_empty()
}

fn byte_words(class: &ClassBytes) -> bool {
    class
        .ranges()
        .iter()
        .all(|r| (r.start()..=r.end()).all(regex_syntax::is_word_byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applies(pattern: &str, case_insensitive: bool) -> bool {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(case_insensitive)
            .multi_line(true)
            .build()
            .parse(pattern)
            .expect("pattern");
        word_only(&hir)
    }

    #[test]
    fn s10_word_only_patterns_are_recognised() {
        for p in [
            r"\b[a-z]+_[0-9]{3}\b",
            r"[A-Z]{8}\d{2}",
            "größe",
            r"^\w+$",
            r"foo|bar_1",
            r"\Bx\B",
            r"(?-u:\w)+",
        ] {
            assert!(applies(p, false), "{p}");
            assert!(applies(p, true), "{p} (?i)");
        }
        for p in [
            r"\w*", r"\b", "a b", "a.c", r"[^ ]+", r"\Afoo", r"foo\z", "a-b", r"x?",
        ] {
            assert!(!applies(p, false), "{p}");
        }
    }

    #[test]
    fn s10_scan_parts_cover_the_text_at_word_ends() {
        let regex = Regex::new("x").expect("regex");
        let text: Vec<u8> = (0..300_000u32)
            .flat_map(|i| format!("w{}\n", i % 977).into_bytes())
            .collect();
        for (from, to) in [(0, text.len()), (0, 0), (4, text.len()), (0, 4)] {
            let parts = pieces(&text, from, to, &regex);
            let mut at = from;
            for &(start, end, _) in &parts {
                assert_eq!(start, at);
                assert!(end > start && end <= to);
                assert!(end == to || text[end - 1] == b'\n');
                at = end;
            }
            assert_eq!(at.max(from), to.max(from));
        }
    }

    #[test]
    fn s10_a_scan_in_parts_finds_what_one_scan_finds() {
        // Over a MiB of vocabulary, so the scan runs in parts on several threads.
        let mut builder = WordsBuilder::default();
        let mut all: Vec<(String, u32)> = Vec::new();
        for doc in 0..64u32 {
            let mut words = Vec::new();
            for i in 0..3000u32 {
                let word = format!("w{doc}_{i}_{}", (i * 7919 + doc) % 1000);
                words.extend_from_slice(word.as_bytes());
                words.push(b'\n');
                all.push((word, doc));
            }
            builder.add(doc, &words);
        }
        builder.add(64, "größe_7\n".as_bytes());
        all.push(("größe_7".into(), 64));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(WORDS_FILE);
        builder.write(&path).expect("write");
        let map = crate::disk::map(&path).expect("map").expect("not empty");
        let vocabulary = Vocabulary::load(map).expect("load");
        assert!(vocabulary.text_len() > PARALLEL_SCAN_BYTES);
        for pattern in [r"\bw\d+_\d*77\d*_\d{3}\b", r"_7$", r"\w+ö\w+", r"^w1_"] {
            // Multi-line, as searches compile them (module `plan`).
            let regex = regex::bytes::RegexBuilder::new(pattern)
                .multi_line(true)
                .build()
                .expect("regex");
            let mut expected: Vec<u32> = all
                .iter()
                .filter(|(word, _)| regex.is_match(word.as_bytes()))
                .map(|(_, doc)| *doc)
                .collect();
            expected.sort_unstable();
            expected.dedup();
            assert!(!expected.is_empty(), "{pattern}");
            assert_eq!(
                vocabulary.matching_docs(&regex, None),
                expected,
                "{pattern}"
            );
        }
    }

    #[test]
    fn s10_doc_words_split_on_unicode_word_characters() {
        let words = doc_words("größe_1 größe_1, x-y\n日本語 é\u{301}".as_bytes());
        assert_eq!(
            String::from_utf8(words).expect("utf8"),
            "größe_1\nx\ny\n日本語\né\u{301}\n"
        );
    }
}
