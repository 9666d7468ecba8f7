//! One published generation of one repository's index on disk, and its in-memory handle.
//!
//! Layout of `<dir>/<owner>/<name>/gen-<n>/` (written as `staging-<n>-<pid>/`, then renamed):
//! - `content.bin`: the bytes of every text document, concatenated (mmap'ed at search time);
//! - `docs.bin`: the document table, sorted by path: `CSGD`, version u32, count u32, then per
//!   document offset u64, len u64, size u64, kind u8, path (u32 len + bytes), blob id (u16 len +
//!   bytes), all little-endian (loaded into memory);
//! - `postings.bin`: `CSGP`, version u32, count u32, pad u32, then `count` records of 16 bytes
//!   (trigram u32, documents u32, data offset u64) sorted by trigram (binary-searched in the
//!   mmap), then the posting lists: document ids ascending, delta-encoded LEB128 varints;
//! - `symbols.bin`: the definitions of each document (module `symtab`), the one file added
//!   after publication: phase two of a build writes it beside a generation that already
//!   answers searches (temp file, then rename), and readers load it when they find it;
//! - `meta.json`: repository, commit, fingerprint, counts, build time ([`Meta`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::disk::{FORMAT_VERSION, map};
use crate::error::SearchError;
use crate::lang::DocLang;
use crate::order::{doc_order, static_rank};
use crate::postings::PostingBuf;
use crate::symtab::SymbolTable;
use crate::trigram::Trigram;
use crate::words::{Vocabulary, WORDS_FILE};

const DOCS_MAGIC: &[u8; 4] = b"CSGD";
/// The symbol table's file in a generation directory.
const SYMBOLS_FILE: &str = "symbols.bin";
const POSTINGS_MAGIC: &[u8; 4] = b"CSGP";
const POSTINGS_HEADER: usize = 16;
const POSTINGS_RECORD: usize = 16;

/// Why a document has (or has no) searchable content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocKind {
    /// UTF-8 text without NUL: content stored and indexed.
    Text = 0,
    /// Over `max_file_bytes`: path only.
    TooLarge = 1,
    /// A NUL byte in the first 8000 bytes: path only.
    Binary = 2,
    /// Not valid UTF-8: path only.
    NotUtf8 = 3,
}

impl DocKind {
    fn from_u8(v: u8) -> Option<DocKind> {
        match v {
            0 => Some(DocKind::Text),
            1 => Some(DocKind::TooLarge),
            2 => Some(DocKind::Binary),
            3 => Some(DocKind::NotUtf8),
            _ => None,
        }
    }
}

/// One document of a generation.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    pub path: String,
    pub blob_id: String,
    pub size: u64,
    pub kind: DocKind,
    pub offset: u64,
    pub len: u64,
    /// The language the `lang` filter sees (P-21).
    pub lang: DocLang,
    /// Its static rank (module `order`), from its path.
    pub rank: u32,
}

/// `meta.json` of a generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub format: u32,
    pub repo: String,
    pub commit: String,
    pub fingerprint: String,
    pub generation: u64,
    pub documents: u64,
    pub path_only: u64,
    pub content_bytes: u64,
    pub corpus_bytes: u64,
    pub built_at_unix_ms: u64,
}

/// A loaded generation. Searches hold it through an `Arc` for their whole run; once it is
/// replaced (marked obsolete) its directory goes away with the last holder.
pub(crate) struct Generation {
    pub dir: PathBuf,
    pub meta: Meta,
    pub docs: Vec<Doc>,
    /// Document ids in path order (`docs` is in rank order).
    by_path: Vec<u32>,
    /// Every path, in id order, each followed by `\n`, and where each starts: one buffer a
    /// file-name search runs the regex over once (made on first use).
    path_lines: OnceLock<(Vec<u8>, Vec<usize>)>,
    content: Option<Mmap>,
    postings: Option<Mmap>,
    /// The word vocabulary (module `words`); `None` when absent or damaged (then no search
    /// uses one).
    words: Option<Vocabulary>,
    /// The definitions of the documents (issue 12), once phase two of the build wrote them.
    symbols: OnceLock<SymbolTable>,
    bytes_on_disk: u64,
    obsolete: AtomicBool,
    /// Set for a commit searched through this repository's current generation (module
    /// `overlay`): the documents come from that generation and from the differing blobs.
    overlay: Option<Overlaid>,
}

/// Marks a document offset as an index into [`Overlaid::added`] rather than into a content
/// store (offsets of real documents never come near it).
const ADDED_DOC: u64 = 1 << 63;

/// The documents of an overlay generation that are not its base's.
pub(crate) struct Overlaid {
    /// The generation the unchanged documents (and their texts and postings) come from.
    pub base: Arc<Generation>,
    /// For each base document, its id in the overlay (`u32::MAX` when hidden).
    from_base: Vec<u32>,
    /// The added documents in id order.
    added: Vec<AddedDoc>,
}

/// A document given to [`Generation::overlaid`]: its entry (offset to be set), its text
/// (empty unless it is text) and its sorted trigrams.
pub(crate) type NewDoc = (Doc, Arc<[u8]>, Arc<[Trigram]>);

/// One document of an overlay that its base lacks (or has with other content).
pub(crate) struct AddedDoc {
    pub id: u32,
    pub text: Arc<[u8]>,
    /// Its distinct trigrams, sorted (empty unless it is text).
    pub trigrams: Arc<[Trigram]>,
    /// Its definitions (name, line), parsed the first time a search needs them.
    pub symbols: OnceLock<Vec<(String, u32)>>,
}

impl Drop for Generation {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            // Unlinking a mapped file is fine on Unix; the mapping dies with `self`.
            // NotFound: another process sharing the directory deleted it first.
            if let Err(error) = std::fs::remove_dir_all(&self.dir)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(%error, dir = %self.dir.display(), "could not delete an old index generation");
            }
        }
    }
}

fn corrupt(meta: &Meta, detail: &str) -> SearchError {
    SearchError::Corrupt {
        repo: meta.repo.clone(),
        detail: detail.to_owned(),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn string(&mut self, len: usize) -> Option<String> {
        self.take(len)
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_owned)
    }
}

fn parse_docs(bytes: &[u8]) -> Option<Vec<Doc>> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4)? != DOCS_MAGIC || r.u32()? != FORMAT_VERSION {
        return None;
    }
    let count = r.u32()? as usize;
    let mut docs = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let offset = r.u64()?;
        let len = r.u64()?;
        let size = r.u64()?;
        let kind = DocKind::from_u8(r.u8()?)?;
        let path_len = r.u32()? as usize;
        let path = r.string(path_len)?;
        let blob_len = usize::from(r.u16()?);
        let blob_id = r.string(blob_len)?;
        let lang = match r.u8()? {
            0 => DocLang::FromPath,
            1 => DocLang::Unknown,
            2 => {
                let lang_len = usize::from(r.u8()?);
                DocLang::Named(r.string(lang_len)?)
            }
            _ => return None,
        };
        docs.push(Doc {
            rank: static_rank(&path),
            path,
            blob_id,
            size,
            kind,
            offset,
            len,
            lang,
        });
    }
    Some(docs)
}

/// The ids of `docs` in path order.
fn path_order(docs: &[Doc]) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..docs.len() as u32).collect();
    ids.sort_unstable_by(|&a, &b| docs[a as usize].path.cmp(&docs[b as usize].path));
    ids
}

/// Size of all files directly in `dir` but the symbol table (which may come later, see
/// [`Generation::disk_bytes`]).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name() != SYMBOLS_FILE)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Generation {
    /// Loads a published generation directory.
    pub(crate) fn load(dir: PathBuf) -> Result<Generation, SearchError> {
        let meta_bytes = std::fs::read(dir.join("meta.json"))
            .map_err(|e| SearchError::io("reading index metadata", e))?;
        let meta: Meta = serde_json::from_slice(&meta_bytes).map_err(|_| SearchError::Corrupt {
            repo: String::new(),
            detail: "unreadable metadata".into(),
        })?;
        if meta.format != FORMAT_VERSION {
            return Err(corrupt(&meta, "older index format"));
        }
        let docs_bytes = std::fs::read(dir.join("docs.bin"))
            .map_err(|e| SearchError::io("reading the document table", e))?;
        let docs = parse_docs(&docs_bytes).ok_or_else(|| corrupt(&meta, "bad document table"))?;
        let content = map(&dir.join("content.bin"))?;
        let postings = map(&dir.join("postings.bin"))?;
        let words = match map(&dir.join(WORDS_FILE)) {
            Ok(Some(mapped)) => Vocabulary::load(mapped),
            Ok(None) | Err(_) => None,
        };
        if words.is_none() {
            tracing::warn!(repo = %meta.repo, "no usable word vocabulary: regex searches verify more");
        }
        let content_len = content.as_ref().map_or(0, |m| m.len() as u64);
        if docs.iter().any(|d| {
            d.offset
                .checked_add(d.len)
                .is_none_or(|end| end > content_len)
        }) {
            return Err(corrupt(&meta, "document outside the content store"));
        }
        if let Some(p) = &postings
            && (p.len() < POSTINGS_HEADER || &p[..4] != POSTINGS_MAGIC)
        {
            return Err(corrupt(&meta, "bad posting lists"));
        }
        let bytes_on_disk = dir_bytes(&dir);
        Ok(Generation {
            dir,
            meta,
            by_path: path_order(&docs),
            path_lines: OnceLock::new(),
            docs,
            content,
            postings,
            words,
            symbols: OnceLock::new(),
            bytes_on_disk,
            obsolete: AtomicBool::new(false),
            overlay: None,
        })
    }

    /// An in-memory generation of `commit`: `base`'s documents but `hidden` ones, and
    /// `added` ones (each with its text and sorted trigrams), in document order. Never on
    /// disk, never retired; it has no symbol table.
    pub(crate) fn overlaid(
        base: Arc<Generation>,
        commit: &str,
        hidden: &std::collections::HashSet<&str>,
        mut added: Vec<NewDoc>,
    ) -> Generation {
        added.sort_by(|a, b| doc_order(&a.0.path, &b.0.path));
        let mut docs = Vec::with_capacity(base.docs.len() + added.len());
        let mut from_base = Vec::with_capacity(base.docs.len());
        let mut added_docs = Vec::with_capacity(added.len());
        let mut pending = added.into_iter().peekable();
        let mut push_added = |docs: &mut Vec<Doc>, (mut doc, text, trigrams): NewDoc| {
            doc.offset = ADDED_DOC | added_docs.len() as u64;
            added_docs.push(AddedDoc {
                id: docs.len() as u32,
                text,
                trigrams,
                symbols: OnceLock::new(),
            });
            docs.push(doc);
        };
        for doc in &base.docs {
            if hidden.contains(doc.path.as_str()) {
                from_base.push(u32::MAX);
                continue;
            }
            while let Some(next) =
                pending.next_if(|(a, _, _)| doc_order(&a.path, &doc.path).is_lt())
            {
                push_added(&mut docs, next);
            }
            from_base.push(docs.len() as u32);
            docs.push(doc.clone());
        }
        for next in pending {
            push_added(&mut docs, next);
        }
        let mut meta = base.meta.clone();
        meta.commit = commit.to_owned();
        meta.documents = docs.len() as u64;
        meta.path_only = docs.iter().filter(|d| d.kind != DocKind::Text).count() as u64;
        meta.content_bytes = docs.iter().map(|d| d.len).sum();
        meta.corpus_bytes = docs.iter().map(|d| d.size).sum();
        Generation {
            dir: base.dir.clone(),
            meta,
            by_path: path_order(&docs),
            path_lines: OnceLock::new(),
            docs,
            content: None,
            postings: None,
            words: None,
            symbols: OnceLock::new(),
            bytes_on_disk: 0,
            obsolete: AtomicBool::new(false),
            overlay: Some(Overlaid {
                base,
                from_base,
                added: added_docs,
            }),
        }
    }

    /// Every path in id order, each followed by `\n`, and the offset each starts at.
    pub(crate) fn path_lines(&self) -> (&[u8], &[usize]) {
        let (text, starts) = self.path_lines.get_or_init(|| {
            let mut text = Vec::with_capacity(self.docs.iter().map(|d| d.path.len() + 1).sum());
            let mut starts = Vec::with_capacity(self.docs.len());
            for doc in &self.docs {
                starts.push(text.len());
                text.extend_from_slice(doc.path.as_bytes());
                text.push(b'\n');
            }
            (text, starts)
        });
        (text, starts)
    }

    /// The id of the document at `path`.
    pub(crate) fn doc_by_path(&self, path: &str) -> Option<u32> {
        let at = self
            .by_path
            .binary_search_by(|&id| self.docs[id as usize].path.as_str().cmp(path))
            .ok()?;
        Some(self.by_path[at])
    }

    /// The (document, line) of every definition named exactly `name`, in document and line
    /// order; `None` while the symbol table is not written. An overlay answers its base's
    /// (for the documents it keeps) and parses its added documents that contain the name,
    /// by `deadline` (the search's: past it, the search times out rather than parse on).
    pub(crate) fn named_lines(
        &self,
        name: &str,
        deadline: std::time::Instant,
    ) -> Result<Option<Vec<(u32, u32)>>, SearchError> {
        let Some(overlay) = &self.overlay else {
            let Some(table) = self.symbols() else {
                return Ok(None);
            };
            let mut lines: Vec<(u32, u32)> = table
                .named(name)
                .into_iter()
                .map(|s| (s.doc, s.symbol.line))
                .collect();
            lines.sort_unstable();
            return Ok(Some(lines));
        };
        let Some(table) = overlay.base.symbols() else {
            return Ok(None);
        };
        let mut lines: Vec<(u32, u32)> = table
            .named(name)
            .into_iter()
            .filter_map(|s| {
                let id = *overlay.from_base.get(s.doc as usize)?;
                (id != u32::MAX).then_some((id, s.symbol.line))
            })
            .collect();
        let finder = memchr::memmem::Finder::new(name.as_bytes());
        // The added documents that may define the name, with their grammar.
        let parse: Vec<(&AddedDoc, symbols::Grammar)> = overlay
            .added
            .iter()
            .filter_map(|added| {
                let doc = &self.docs[added.id as usize];
                if doc.kind != DocKind::Text {
                    return None;
                }
                let grammar = symbols::Grammar::for_path(&doc.path)?;
                // Most files holding the name hold it in comments, strings or selectors
                // only: told by a scan, not a parse.
                crate::definable::may_define(grammar, &added.text, name.as_bytes(), &finder)
                    .then_some((added, grammar))
            })
            .collect();
        // Parsing is most of a cold overlay search for an identifier: the ones not parsed
        // yet are parsed on every core (each document once, kept in its `OnceLock`).
        let pending: Vec<&(&AddedDoc, symbols::Grammar)> = parse
            .iter()
            .filter(|(added, _)| added.symbols.get().is_none())
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(pending.len().div_ceil(8).max(1));
        let per = pending.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            for chunk in pending.chunks(per) {
                scope.spawn(move || {
                    let mut extractor = symbols::Extractor::new();
                    for (added, grammar) in chunk {
                        if std::time::Instant::now() >= deadline {
                            return;
                        }
                        added.symbols.get_or_init(|| {
                            extractor
                                .extract(*grammar, &added.text)
                                .unwrap_or_default()
                                .into_iter()
                                .map(|s| (s.name, s.line))
                                .collect()
                        });
                    }
                });
            }
        });
        for (added, _) in &parse {
            let Some(found) = added.symbols.get() else {
                // Not parsed: the deadline passed first.
                return Err(SearchError::Timeout {
                    seconds: crate::limits::SEARCH_BUDGET.as_secs(),
                });
            };
            lines.extend(
                found
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, line)| (added.id, *line)),
            );
        }
        lines.sort_unstable();
        Ok(Some(lines))
    }

    /// Bytes of the word vocabulary's text a [`Generation::word_docs`] scan reads (the
    /// base's for an overlay), `None` without a vocabulary.
    pub(crate) fn vocabulary_bytes(&self) -> Option<usize> {
        match &self.overlay {
            None => self.words.as_ref().map(Vocabulary::text_len),
            Some(overlay) => overlay.base.vocabulary_bytes(),
        }
    }

    /// The documents holding a word `regex` matches (`ascii` is its ASCII-mode twin, for
    /// ASCII-only words), ascending; `None` without a vocabulary. An overlay answers its
    /// base's documents it keeps and every added document (a superset, as candidates may be).
    pub(crate) fn word_docs(
        &self,
        regex: &regex::bytes::Regex,
        ascii: Option<&regex::bytes::Regex>,
    ) -> Option<Vec<u32>> {
        let Some(overlay) = &self.overlay else {
            return Some(self.words.as_ref()?.matching_docs(regex, ascii));
        };
        let mut docs: Vec<u32> = overlay
            .base
            .word_docs(regex, ascii)?
            .into_iter()
            .filter_map(|id| overlay.from_base.get(id as usize).copied())
            .filter(|&id| id != u32::MAX)
            .collect();
        docs.extend(overlay.added.iter().map(|a| a.id));
        docs.sort_unstable();
        Some(docs)
    }

    /// How many documents hold `trigram` (for an overlay an upper bound), `None` for none.
    pub(crate) fn posting_count(&self, trigram: Trigram) -> Option<u32> {
        match &self.overlay {
            None => self.lookup(trigram).map(|(n, _)| n),
            Some(overlay) => {
                let base = overlay.base.lookup(trigram).map_or(0, |(n, _)| n);
                let added = overlay
                    .added
                    .iter()
                    .filter(|a| a.trigrams.binary_search(&trigram).is_ok())
                    .count() as u32;
                (base + added > 0).then_some(base + added)
            }
        }
    }

    /// The documents holding `trigram`, ascending.
    pub(crate) fn posting_list(&self, trigram: Trigram) -> Vec<u32> {
        match &self.overlay {
            None => self
                .lookup(trigram)
                .map(|(n, offset)| self.postings(n, offset))
                .unwrap_or_default(),
            Some(overlay) => {
                // The map from base ids keeps their order, so both lists stay ascending.
                let base: Vec<u32> = overlay
                    .base
                    .posting_list(trigram)
                    .into_iter()
                    .filter_map(|id| overlay.from_base.get(id as usize).copied())
                    .filter(|&id| id != u32::MAX)
                    .collect();
                let added: Vec<u32> = overlay
                    .added
                    .iter()
                    .filter(|a| a.trigrams.binary_search(&trigram).is_ok())
                    .map(|a| a.id)
                    .collect();
                let mut all = Vec::with_capacity(base.len() + added.len());
                let (mut i, mut j) = (0, 0);
                while i < base.len() || j < added.len() {
                    if j == added.len() || (i < base.len() && base[i] < added[j]) {
                        all.push(base[i]);
                        i += 1;
                    } else {
                        all.push(added[j]);
                        j += 1;
                    }
                }
                all
            }
        }
    }

    /// The symbol table, when phase two of the build has written it (by this process or
    /// another); `None` while it is being extracted. A damaged table counts as absent (and
    /// is logged): the next build of the same commit writes it again.
    pub(crate) fn symbols(&self) -> Option<&SymbolTable> {
        if self.overlay.is_some() {
            // Its directory is the base's: that table's document ids are not this one's.
            return None;
        }
        if let Some(table) = self.symbols.get() {
            return Some(table);
        }
        let path = self.dir.join(SYMBOLS_FILE);
        let mapped = match std::fs::metadata(&path) {
            Ok(_) => map(&path).ok()?,
            Err(_) => return None,
        };
        match SymbolTable::load(mapped, self.docs.len()) {
            Some(table) => Some(self.symbols.get_or_init(|| table)),
            None => {
                tracing::warn!(repo = %self.meta.repo, "ignoring a damaged symbol table");
                None
            }
        }
    }

    /// Writes the symbol table beside this published generation (temp file, then rename)
    /// and makes it current here.
    pub(crate) fn publish_symbols(
        &self,
        per_doc: &[(u32, Vec<symbols::Symbol>)],
    ) -> Result<&SymbolTable, SearchError> {
        let temp = self
            .dir
            .join(format!("{SYMBOLS_FILE}.tmp-{}", std::process::id()));
        let written = crate::symtab::write(&temp, self.docs.len(), per_doc).and_then(|()| {
            std::fs::rename(&temp, self.dir.join(SYMBOLS_FILE))
                .map_err(|e| SearchError::io("publishing the symbol table", e))
        });
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(error);
        }
        self.symbols()
            .ok_or_else(|| corrupt(&self.meta, "the symbol table just written does not load"))
    }

    /// Fills the signatures the symbol table left to the content store (empty ones: the
    /// document's stored text is its own) from the name's line.
    pub(crate) fn fill_signatures(&self, doc: u32, symbols: &mut [symbols::Symbol]) {
        if symbols.iter().all(|s| !s.signature.is_empty()) {
            return;
        }
        let Some(doc) = self.docs.get(doc as usize) else {
            return;
        };
        let text = self.text(doc);
        let lines = symbols::LineStarts::new(text);
        for symbol in symbols.iter_mut().filter(|s| s.signature.is_empty()) {
            symbol.signature = symbols::signature(lines.text(text, symbol.line));
        }
    }

    /// Bytes on disk, the symbol table included once it is there.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.bytes_on_disk + self.symbols().map_or(0, |t| t.file_len() as u64)
    }

    /// Marks this generation for deletion once the last holder lets go.
    pub(crate) fn retire(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The stored text of a document (empty for path-only documents).
    pub(crate) fn text(&self, doc: &Doc) -> &[u8] {
        if let Some(overlay) = &self.overlay {
            if doc.offset & ADDED_DOC != 0 {
                let at = (doc.offset & !ADDED_DOC) as usize;
                return overlay.added.get(at).map_or(&[], |a| &a.text[..]);
            }
            return overlay.base.text(doc);
        }
        let Some(content) = &self.content else {
            return &[];
        };
        // Bounds were checked at load.
        content
            .get(doc.offset as usize..(doc.offset + doc.len) as usize)
            .unwrap_or(&[])
    }

    fn postings_table(&self) -> (&[u8], usize) {
        match &self.postings {
            Some(p) => {
                let count = u32::from_le_bytes([p[8], p[9], p[10], p[11]]) as usize;
                let table_end = POSTINGS_HEADER + count * POSTINGS_RECORD;
                if table_end > p.len() {
                    return (&[], 0);
                }
                (&p[..], count)
            }
            None => (&[], 0),
        }
    }

    /// (documents, data offset) of a trigram's posting list, if any document has it.
    pub(crate) fn lookup(&self, trigram: Trigram) -> Option<(u32, usize)> {
        let (p, count) = self.postings_table();
        let record = |i: usize| {
            let at = POSTINGS_HEADER + i * POSTINGS_RECORD;
            let field = |o: usize| {
                u32::from_le_bytes([p[at + o], p[at + o + 1], p[at + o + 2], p[at + o + 3]])
            };
            let offset = u64::from(field(8)) | (u64::from(field(12)) << 32);
            (field(0), field(4), offset as usize)
        };
        let (mut lo, mut hi) = (0usize, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (t, n, offset) = record(mid);
            match t.cmp(&trigram) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some((n, offset)),
            }
        }
        None
    }

    /// Decodes a posting list found by [`Generation::lookup`].
    pub(crate) fn postings(&self, count: u32, offset: usize) -> Vec<u32> {
        let (p, _) = self.postings_table();
        let mut out = Vec::with_capacity(count as usize);
        let mut pos = offset;
        let mut acc: u32 = 0;
        for _ in 0..count {
            let mut value: u32 = 0;
            let mut shift = 0;
            loop {
                let Some(&byte) = p.get(pos) else {
                    return out;
                };
                pos += 1;
                value |= u32::from(byte & 0x7F) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
                shift += 7;
                if shift > 28 {
                    return out;
                }
            }
            acc = acc.wrapping_add(value);
            out.push(acc);
        }
        out
    }
}

fn io_write(e: std::io::Error) -> SearchError {
    SearchError::io("writing the index", e)
}

/// Writes `postings.bin`.
pub(crate) fn write_postings(
    path: &Path,
    mut lists: Vec<(Trigram, PostingBuf)>,
) -> Result<(), SearchError> {
    lists.sort_unstable_by_key(|(t, _)| *t);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io_write)?);
    out.write_all(POSTINGS_MAGIC).map_err(io_write)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes())
        .map_err(io_write)?;
    out.write_all(&(lists.len() as u32).to_le_bytes())
        .map_err(io_write)?;
    out.write_all(&0u32.to_le_bytes()).map_err(io_write)?;
    let mut offset = (POSTINGS_HEADER + lists.len() * POSTINGS_RECORD) as u64;
    for (trigram, list) in &lists {
        out.write_all(&trigram.to_le_bytes()).map_err(io_write)?;
        out.write_all(&list.count.to_le_bytes()).map_err(io_write)?;
        out.write_all(&offset.to_le_bytes()).map_err(io_write)?;
        offset += list.bytes.len() as u64;
    }
    for (_, list) in &lists {
        out.write_all(&list.bytes).map_err(io_write)?;
    }
    let file = out.into_inner().map_err(|e| io_write(e.into_error()))?;
    file.sync_all().map_err(io_write)?;
    Ok(())
}

/// Writes `docs.bin`.
pub(crate) fn write_docs(path: &Path, docs: &[Doc]) -> Result<(), SearchError> {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io_write)?);
    out.write_all(DOCS_MAGIC).map_err(io_write)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes())
        .map_err(io_write)?;
    out.write_all(&(docs.len() as u32).to_le_bytes())
        .map_err(io_write)?;
    for doc in docs {
        out.write_all(&doc.offset.to_le_bytes()).map_err(io_write)?;
        out.write_all(&doc.len.to_le_bytes()).map_err(io_write)?;
        out.write_all(&doc.size.to_le_bytes()).map_err(io_write)?;
        out.write_all(&[doc.kind as u8]).map_err(io_write)?;
        out.write_all(&(doc.path.len() as u32).to_le_bytes())
            .map_err(io_write)?;
        out.write_all(doc.path.as_bytes()).map_err(io_write)?;
        // Blob ids are hex digests (40 or 64 characters); longer ones are cut, never trusted.
        let blob = &doc.blob_id.as_bytes()[..doc.blob_id.floor_char_boundary(u16::MAX as usize)];
        out.write_all(&(blob.len() as u16).to_le_bytes())
            .map_err(io_write)?;
        out.write_all(blob).map_err(io_write)?;
        match &doc.lang {
            DocLang::FromPath => out.write_all(&[0]).map_err(io_write)?,
            DocLang::Unknown => out.write_all(&[1]).map_err(io_write)?,
            DocLang::Named(name) => {
                let name = &name.as_bytes()[..name.floor_char_boundary(u8::MAX as usize)];
                out.write_all(&[2, name.len() as u8]).map_err(io_write)?;
                out.write_all(name).map_err(io_write)?;
            }
        }
    }
    let file = out.into_inner().map_err(|e| io_write(e.into_error()))?;
    file.sync_all().map_err(io_write)?;
    Ok(())
}

/// Writes `meta.json`.
pub(crate) fn write_meta(path: &Path, meta: &Meta) -> Result<(), SearchError> {
    let bytes = serde_json::to_vec_pretty(meta).map_err(|e| io_write(std::io::Error::other(e)))?;
    let mut file = File::create(path).map_err(io_write)?;
    file.write_all(&bytes).map_err(io_write)?;
    file.sync_all().map_err(io_write)?;
    Ok(())
}
