//! Building one generation: read (or reuse) every document, classify it, extract its
//! trigrams on worker threads, and write the content store and posting lists in path order.
//! Then, once the generation answers searches, its symbol table (`extract_symbols`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use symbols::{Extractor, Grammar, Symbol};

use crate::lang::DocLang;
use crate::store::{Doc, DocKind, Generation, PostingBuf};
use crate::symtab::SymbolTable;
use crate::trigram::{Trigram, TrigramScratch, doc_trigrams};
use crate::{BuildProgress, SearchError, Source, SourceEntry, Transform};

/// Bytes inspected for a NUL to call a file binary (what Git and grep tools do).
const BINARY_SNIFF: usize = 8000;
/// Documents per unit of work handed to a worker.
const CHUNK: usize = 32;

/// A multiplicative hasher for trigram keys: the default SipHash costs more than the rest of
/// the posting insertion.
#[derive(Default)]
pub(crate) struct TrigramHasher(u64);

impl Hasher for TrigramHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        let h = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

type PostingMap = HashMap<Trigram, PostingBuf, BuildHasherDefault<TrigramHasher>>;

/// The classification of one file's bytes.
pub(crate) fn classify(bytes: &[u8], max_file_bytes: u64) -> DocKind {
    if bytes.len() as u64 > max_file_bytes {
        DocKind::TooLarge
    } else if memchr::memchr(0, &bytes[..bytes.len().min(BINARY_SNIFF)]).is_some() {
        DocKind::Binary
    } else if std::str::from_utf8(bytes).is_err() {
        DocKind::NotUtf8
    } else {
        DocKind::Text
    }
}

/// One document, prepared by a worker.
struct Prepared<'a> {
    kind: DocKind,
    text: Cow<'a, [u8]>,
    trigrams: Vec<Trigram>,
    reused: bool,
    /// What the source's transform did (P-21).
    transform: Transformed,
    /// The language the `lang` filter sees (a transform may set it).
    lang: DocLang,
}

/// What a transform did to one document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Transformed {
    Untouched,
    Replaced,
    Skipped,
    Failed(String),
}

/// Counts of one build.
#[derive(Default)]
pub(crate) struct Counts {
    pub reused: u64,
    pub read: u64,
    pub path_only: u64,
    pub content_bytes: u64,
    pub corpus_bytes: u64,
    pub transformed: u64,
    pub skipped: u64,
    pub transform_failures: u64,
    pub failure_messages: Vec<String>,
    /// Documents whose indexed text a transform replaced: their symbols come from the
    /// source's bytes, not from the content store.
    pub replaced: Vec<u32>,
}

/// Inputs of [`write_generation`].
pub(crate) struct BuildInput<'a> {
    pub staging: &'a Path,
    pub entries: &'a [SourceEntry],
    pub source: &'a dyn Source,
    pub previous: Option<&'a Generation>,
    pub max_file_bytes: u64,
    pub threads: usize,
    pub strict_transforms: bool,
}

fn prepare<'a>(
    entry: &SourceEntry,
    previous: Option<(&'a Generation, &'a Doc)>,
    input: &BuildInput<'_>,
    scratch: &mut TrigramScratch,
) -> Result<Prepared<'a>, SearchError> {
    let max = input.max_file_bytes;
    if entry.size > max {
        return Ok(Prepared {
            kind: DocKind::TooLarge,
            text: Cow::Borrowed(&[]),
            trigrams: Vec::new(),
            reused: false,
            transform: Transformed::Untouched,
            lang: DocLang::FromPath,
        });
    }
    let mut transform = Transformed::Untouched;
    let mut lang = DocLang::FromPath;
    let (kind, text, reused) = match previous {
        // Same blob id = same bytes: reuse the stored text, or the path-only verdict when
        // it did not depend on the size limit.
        // The fingerprint holds the transform, so a reused text is one it shaped already.
        Some((generation, doc)) if doc.kind == DocKind::Text && doc.len <= max => {
            lang = doc.lang.clone();
            (DocKind::Text, Cow::Borrowed(generation.text(doc)), true)
        }
        Some((_, doc)) if matches!(doc.kind, DocKind::Binary | DocKind::NotUtf8) => {
            (doc.kind, Cow::Borrowed(&[][..]), true)
        }
        _ => {
            let bytes = input
                .source
                .read(entry)
                .map_err(|message| SearchError::Source { message })?;
            match classify(&bytes, max) {
                DocKind::Text => {
                    // classify checked UTF-8 already.
                    let text = std::str::from_utf8(&bytes).unwrap_or_default();
                    match input.source.transform(entry, text) {
                        Ok(Transform::Keep) => (DocKind::Text, Cow::Owned(bytes), false),
                        Ok(Transform::Skip) => {
                            transform = Transformed::Skipped;
                            (DocKind::Text, Cow::Borrowed(&[][..]), false)
                        }
                        Ok(Transform::Replace {
                            text: replaced,
                            lang: set,
                        }) => {
                            transform = Transformed::Replaced;
                            lang = set;
                            let text = replaced.map_or(bytes, String::into_bytes);
                            (DocKind::Text, Cow::Owned(text), false)
                        }
                        Ok(Transform::Abort(why)) => {
                            return Err(SearchError::Source {
                                message: format!(
                                    "the derived-state transform could not run at {}: {why}; the published index keeps answering",
                                    entry.path
                                ),
                            });
                        }
                        Err(message) if input.strict_transforms => {
                            return Err(SearchError::Source {
                                message: format!(
                                    "the derived-state transform of {} failed (strict mode): {message}",
                                    entry.path
                                ),
                            });
                        }
                        Err(message) => {
                            transform = Transformed::Failed(message);
                            (DocKind::Text, Cow::Owned(bytes), false)
                        }
                    }
                }
                other => (other, Cow::Borrowed(&[][..]), false),
            }
        }
    };
    let mut trigrams = Vec::new();
    if kind == DocKind::Text && transform != Transformed::Skipped {
        doc_trigrams(&text, scratch, &mut trigrams);
    }
    Ok(Prepared {
        kind,
        text,
        trigrams,
        reused,
        transform,
        lang,
    })
}

/// Writes `content.bin` and `postings.bin` into `staging`; answers the document table.
pub(crate) fn write_generation(
    input: &BuildInput<'_>,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<(Vec<Doc>, Counts), SearchError> {
    let previous_by_blob: HashMap<&str, &Doc> = input
        .previous
        .map(|g| g.docs.iter().map(|d| (d.blob_id.as_str(), d)).collect())
        .unwrap_or_default();
    let entries = input.entries;
    let total = entries.len();
    let chunks = total.div_ceil(CHUNK);
    let next_chunk = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);

    let io = |e: std::io::Error| SearchError::io("writing the content store", e);
    let mut content = BufWriter::with_capacity(
        1 << 20,
        File::create(input.staging.join("content.bin")).map_err(io)?,
    );
    let mut offset = 0u64;
    let mut docs = Vec::with_capacity(total);
    let mut postings = PostingMap::default();
    let mut counts = Counts::default();
    let mut failure: Option<SearchError> = None;

    std::thread::scope(|scope| {
        // Bounded so that fast workers cannot buffer the whole corpus ahead of the writer.
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<Vec<Prepared<'_>>, SearchError>)>(
            input.threads * 2,
        );
        for _ in 0..input.threads {
            let tx = tx.clone();
            let (next_chunk, cancel, previous_by_blob) = (&next_chunk, &cancel, &previous_by_blob);
            scope.spawn(move || {
                let mut scratch = TrigramScratch::new();
                loop {
                    let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                    if chunk >= chunks || cancel.load(Ordering::Relaxed) {
                        return;
                    }
                    let range = chunk * CHUNK..((chunk + 1) * CHUNK).min(total);
                    let result = entries[range]
                        .iter()
                        .map(|entry| {
                            let previous = input.previous.and_then(|g| {
                                previous_by_blob
                                    .get(entry.blob_id.as_str())
                                    .map(|d| (g, *d))
                            });
                            prepare(entry, previous, input, &mut scratch)
                        })
                        .collect::<Result<Vec<_>, _>>();
                    let failed = result.is_err();
                    if tx.send((chunk, result)).is_err() || failed {
                        return;
                    }
                }
            });
        }
        drop(tx);

        // The writer: documents must enter the posting lists in id order, so chunks that
        // arrive early wait in `pending`.
        let mut pending: BTreeMap<usize, Vec<Prepared<'_>>> = BTreeMap::new();
        let mut next = 0usize;
        let mut done = 0u64;
        let mut processed = 0u64;
        for (chunk, result) in rx.iter() {
            if failure.is_some() {
                continue; // drain so that workers blocked on send can finish
            }
            match result {
                Ok(prepared) => {
                    pending.insert(chunk, prepared);
                }
                Err(error) => {
                    cancel.store(true, Ordering::Relaxed);
                    failure = Some(error);
                    continue;
                }
            }
            while let Some(prepared) = pending.remove(&next) {
                for (i, doc) in prepared.into_iter().enumerate() {
                    let entry = &entries[next * CHUNK + i];
                    counts.corpus_bytes += entry.size;
                    processed += 1;
                    let replaced = doc.transform == Transformed::Replaced;
                    match doc.transform {
                        Transformed::Untouched => {}
                        Transformed::Replaced => counts.transformed += 1,
                        Transformed::Skipped => {
                            counts.skipped += 1;
                            counts.read += 1;
                            continue;
                        }
                        Transformed::Failed(message) => {
                            counts.transform_failures += 1;
                            if counts.failure_messages.len() < crate::MAX_FAILURE_MESSAGES {
                                counts
                                    .failure_messages
                                    .push(format!("{}: {message}", entry.path));
                            }
                        }
                    }
                    // Document ids are positions in the document table: skipped files have none.
                    let id = docs.len();
                    if replaced {
                        counts.replaced.push(id as u32);
                    }
                    if doc.reused {
                        counts.reused += 1;
                    } else if doc.kind != DocKind::TooLarge {
                        counts.read += 1;
                    }
                    let len = doc.text.len() as u64;
                    if doc.kind == DocKind::Text {
                        if let Err(error) = content.write_all(&doc.text) {
                            cancel.store(true, Ordering::Relaxed);
                            failure = Some(io(error));
                            break;
                        }
                        for &t in &doc.trigrams {
                            postings.entry(t).or_default().push(id as u32);
                        }
                        counts.content_bytes += len;
                    } else {
                        counts.path_only += 1;
                    }
                    docs.push(Doc {
                        path: entry.path.clone(),
                        blob_id: entry.blob_id.clone(),
                        size: entry.size,
                        kind: doc.kind,
                        offset,
                        len,
                        lang: doc.lang.clone(),
                    });
                    offset += len;
                }
                done = processed;
                next += 1;
                if failure.is_some() {
                    break;
                }
                progress(BuildProgress {
                    done,
                    total: total as u64,
                });
            }
        }
        let _ = done;
    });
    if let Some(error) = failure {
        return Err(error);
    }
    if docs.len() as u64 + counts.skipped != total as u64 {
        return Err(SearchError::Source {
            message: "the build stopped before every file was indexed".into(),
        });
    }
    let file = content.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    crate::store::write_postings(
        &input.staging.join("postings.bin"),
        postings.into_iter().collect(),
    )?;
    if total == 0 {
        progress(BuildProgress { done: 0, total: 0 });
    }
    Ok((docs, counts))
}

/// The symbols of each document that has any: (document id, symbols), in id order.
pub(crate) type DocSymbols = Vec<(u32, Vec<Symbol>)>;

/// Where phase two of a build takes each document's own bytes.
pub(crate) struct SymbolInput<'a> {
    pub generation: &'a Generation,
    /// A generation whose symbols of equal blobs can be copied instead of parsed.
    pub previous: Option<&'a Generation>,
    pub source: &'a dyn Source,
    /// Documents whose stored text is not their own (a transform replaced it), sorted.
    pub replaced: &'a [u32],
    /// Every document's stored text may be a transform's: read them all from the source
    /// (phase two of a generation whose phase one this process did not run).
    pub all_from_source: bool,
    pub threads: usize,
}

/// The definitions of every text document of a generation, in document order (documents
/// without any left out), parsed on worker threads or copied from the previous generation
/// for equal blobs. A file a grammar cannot handle has no symbols; a source that cannot give
/// a replaced document's bytes fails the phase.
pub(crate) fn extract_symbols(input: &SymbolInput<'_>) -> Result<DocSymbols, SearchError> {
    let generation = input.generation;
    let previous: Option<Reusable<'_>> = input.previous.and_then(|g| {
        let table = g.symbols()?;
        let ids = g
            .docs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == DocKind::Text)
            .filter_map(|(id, d)| {
                Some(((d.blob_id.as_str(), Grammar::for_path(&d.path)?), id as u32))
            })
            .collect();
        Some((g, table, ids))
    });
    let wanted: Vec<(u32, Grammar)> = generation
        .docs
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind == DocKind::Text)
        .filter_map(|(id, d)| Some((id as u32, Grammar::for_path(&d.path)?)))
        .collect();
    let next_chunk = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let chunks = wanted.len().div_ceil(CHUNK);
    let work = || -> Result<DocSymbols, SearchError> {
        let mut extractor = Extractor::new();
        let mut out = Vec::new();
        loop {
            let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks || cancel.load(Ordering::Relaxed) {
                return Ok(out);
            }
            for &(id, grammar) in &wanted[chunk * CHUNK..((chunk + 1) * CHUNK).min(wanted.len())] {
                match doc_symbols(input, previous.as_ref(), &mut extractor, id, grammar) {
                    Ok(symbols) if symbols.is_empty() => {}
                    Ok(symbols) => out.push((id, symbols)),
                    Err(error) => {
                        cancel.store(true, Ordering::Relaxed);
                        return Err(error);
                    }
                }
            }
        }
    };
    let results: Vec<Result<DocSymbols, SearchError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..input.threads.max(1))
            .map(|_| scope.spawn(work))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(SearchError::Source {
                        message: "a symbol extraction thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut all = Vec::new();
    for result in results {
        all.extend(result?);
    }
    all.sort_unstable_by_key(|(id, _)| *id);
    Ok(all)
}

/// The previous generation, its symbol table and its text documents by (blob, grammar):
/// symbols depend on the bytes and the grammar only, so the same blob under a `.c` and a
/// `.h` path is parsed twice.
type Reusable<'g> = (
    &'g Generation,
    &'g SymbolTable,
    HashMap<(&'g str, Grammar), u32>,
);

/// The definitions of document `id`: copied from the previous table for an equal blob,
/// else parsed from the file's own bytes (the content store's text, or the source's when a
/// transform replaced it). A signature is a line of the file: when the content store holds
/// the file's own text it is read from there, not stored twice (about half the table).
fn doc_symbols(
    input: &SymbolInput<'_>,
    previous: Option<&Reusable<'_>>,
    extractor: &mut Extractor,
    id: u32,
    grammar: Grammar,
) -> Result<Vec<Symbol>, SearchError> {
    let generation = input.generation;
    let doc = &generation.docs[id as usize];
    let own_text = !input.all_from_source && input.replaced.binary_search(&id).is_err();
    let copied = previous.and_then(|(old_generation, table, ids)| {
        let &old = ids.get(&(doc.blob_id.as_str(), grammar))?;
        let mut symbols = table.of_doc(old);
        if !own_text {
            old_generation.fill_signatures(old, &mut symbols);
        }
        Some(symbols)
    });
    let mut symbols = match copied {
        Some(symbols) => symbols,
        None if own_text => parse_symbols(extractor, grammar, &doc.path, generation.text(doc)),
        None => {
            let entry = SourceEntry {
                path: doc.path.clone(),
                blob_id: doc.blob_id.clone(),
                size: doc.size,
            };
            let bytes = input
                .source
                .read(&entry)
                .map_err(|message| SearchError::Source { message })?;
            parse_symbols(extractor, grammar, &doc.path, &bytes)
        }
    };
    if own_text {
        for symbol in &mut symbols {
            symbol.signature.clear();
        }
    }
    Ok(symbols)
}

/// The definitions of one file; a grammar failure leaves the file without symbols, it never
/// fails the build.
fn parse_symbols(
    extractor: &mut Extractor,
    grammar: Grammar,
    path: &str,
    bytes: &[u8],
) -> Vec<Symbol> {
    extractor.extract(grammar, bytes).unwrap_or_else(|error| {
        tracing::debug!(path, %error, "no symbols for a file");
        Vec::new()
    })
}
