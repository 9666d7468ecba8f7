//! Building one generation (phase one of a build): read (or reuse) every document, classify
//! and transform it, extract its trigrams on worker threads, and write the content store and
//! posting lists in the order of the entries given (static rank, then path: module `order`). Phase two, the symbol table, is module `extract`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::error::SearchError;
use crate::lang::DocLang;
use crate::order::static_rank;
use crate::postings::PostingBuf;
use crate::source::{BuildProgress, MAX_FAILURE_MESSAGES, Source, SourceEntry, Transform};
use crate::store::{Doc, DocKind, Generation, write_postings};
use crate::trigram::{Trigram, TrigramScratch, doc_trigrams};
use crate::words::{WORDS_FILE, WordsBuilder, doc_words};

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
    /// Its distinct words, each followed by `\n` (module `words`).
    words: Vec<u8>,
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

impl<'a> Prepared<'a> {
    /// A document as it is, its trigrams not extracted yet.
    fn new(kind: DocKind, text: Cow<'a, [u8]>, reused: bool) -> Prepared<'a> {
        Prepared {
            kind,
            text,
            trigrams: Vec::new(),
            words: Vec::new(),
            reused,
            transform: Transformed::Untouched,
            lang: DocLang::FromPath,
        }
    }
}

/// Prepares one document: its verdict and text reused from the previous generation for an
/// equal blob, else read from the source, classified and transformed; then its trigrams.
fn prepare<'a>(
    entry: &SourceEntry,
    previous: Option<(&'a Generation, &'a Doc)>,
    input: &BuildInput<'_>,
    scratch: &mut TrigramScratch,
) -> Result<Prepared<'a>, SearchError> {
    let max = input.max_file_bytes;
    if entry.size > max {
        return Ok(Prepared::new(DocKind::TooLarge, Cow::Borrowed(&[]), false));
    }
    let mut prepared = match previous {
        // Same blob id = same bytes: reuse the stored text, or the path-only verdict when
        // it did not depend on the size limit.
        // The fingerprint holds the transform, so a reused text is one it shaped already.
        Some((generation, doc)) if doc.kind == DocKind::Text && doc.len <= max => Prepared {
            lang: doc.lang.clone(),
            ..Prepared::new(DocKind::Text, Cow::Borrowed(generation.text(doc)), true)
        },
        Some((_, doc)) if matches!(doc.kind, DocKind::Binary | DocKind::NotUtf8) => {
            Prepared::new(doc.kind, Cow::Borrowed(&[][..]), true)
        }
        _ => {
            let bytes = input
                .source
                .read(entry)
                .map_err(|message| SearchError::Source { message })?;
            match classify(&bytes, max) {
                DocKind::Text => transform(entry, bytes, input)?,
                other => Prepared::new(other, Cow::Borrowed(&[][..]), false),
            }
        }
    };
    if prepared.kind == DocKind::Text && prepared.transform != Transformed::Skipped {
        doc_trigrams(&prepared.text, scratch, &mut prepared.trigrams);
        prepared.words = doc_words(&prepared.text);
    }
    Ok(prepared)
}

/// A text file read from the source, through the source's transform (P-21): kept, skipped,
/// replaced, or kept as it is when the transform fails (unless strict). A transform that
/// could not run at all fails the build.
fn transform(
    entry: &SourceEntry,
    bytes: Vec<u8>,
    input: &BuildInput<'_>,
) -> Result<Prepared<'static>, SearchError> {
    // classify checked UTF-8 already.
    let text = std::str::from_utf8(&bytes).unwrap_or_default();
    Ok(match input.source.transform(entry, text) {
        Ok(Transform::Keep) => Prepared::new(DocKind::Text, Cow::Owned(bytes), false),
        Ok(Transform::Skip) => Prepared {
            transform: Transformed::Skipped,
            ..Prepared::new(DocKind::Text, Cow::Borrowed(&[][..]), false)
        },
        Ok(Transform::Replace {
            text: replaced,
            lang,
        }) => {
            let text = replaced.map_or(bytes, String::into_bytes);
            Prepared {
                transform: Transformed::Replaced,
                lang,
                ..Prepared::new(DocKind::Text, Cow::Owned(text), false)
            }
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
        Err(message) => Prepared {
            transform: Transformed::Failed(message),
            ..Prepared::new(DocKind::Text, Cow::Owned(bytes), false)
        },
    })
}

/// Writes `content.bin` and `postings.bin` into `staging`; answers the document table.
///
/// Worker threads prepare the documents chunk by chunk (read or reuse, classify,
/// transform, trigrams); this thread writes them in path order as the chunks come in.
pub(crate) fn write_generation(
    input: &BuildInput<'_>,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<(Vec<Doc>, Counts), SearchError> {
    let previous_by_blob: HashMap<&str, &Doc> = input
        .previous
        .map(|g| g.docs.iter().map(|d| (d.blob_id.as_str(), d)).collect())
        .unwrap_or_default();
    let chunks = Chunks {
        input,
        previous_by_blob,
        count: input.entries.len().div_ceil(CHUNK),
        next: AtomicUsize::new(0),
        cancel: AtomicBool::new(false),
    };
    let mut writer = Writer::create(input.staging, input.entries.len())?;
    let failure = std::thread::scope(|scope| {
        // Bounded so that fast workers cannot buffer the whole corpus ahead of the writer.
        let (tx, rx) = mpsc::sync_channel::<PreparedChunk<'_>>(input.threads * 2);
        for _ in 0..input.threads {
            let tx = tx.clone();
            let chunks = &chunks;
            scope.spawn(move || chunks.prepare_all(&tx));
        }
        drop(tx);
        writer.write_in_order(&rx, &chunks, progress)
    });
    if let Some(error) = failure {
        return Err(error);
    }
    writer.finish(input, progress)
}

/// A chunk of prepared documents, or why it could not be prepared: (chunk number, result).
type PreparedChunk<'a> = (usize, Result<Vec<Prepared<'a>>, SearchError>);

/// The entries of one build, cut in chunks that the worker threads take in turn.
struct Chunks<'a> {
    input: &'a BuildInput<'a>,
    /// The previous generation's documents by blob id (equal ids, equal bytes).
    previous_by_blob: HashMap<&'a str, &'a Doc>,
    /// Chunks in all.
    count: usize,
    next: AtomicUsize,
    /// Set when the writer failed: workers stop taking chunks.
    cancel: AtomicBool,
}

impl<'a> Chunks<'a> {
    /// One worker: prepares chunks and sends them to the writer until none is left, the
    /// build is cancelled, a document fails, or the writer is gone.
    fn prepare_all(&self, tx: &mpsc::SyncSender<PreparedChunk<'a>>) {
        let input = self.input;
        let total = input.entries.len();
        let mut scratch = TrigramScratch::new();
        loop {
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.count || self.cancel.load(Ordering::Relaxed) {
                return;
            }
            let range = chunk * CHUNK..((chunk + 1) * CHUNK).min(total);
            let result = input.entries[range]
                .iter()
                .map(|entry| {
                    let previous = input.previous.and_then(|g| {
                        self.previous_by_blob
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
    }
}

/// The writer's side of a build: the content store being written, and the document table,
/// posting lists and counts so far.
struct Writer {
    content: BufWriter<File>,
    /// Where the next document's text starts in the content store.
    offset: u64,
    docs: Vec<Doc>,
    postings: PostingMap,
    words: WordsBuilder,
    counts: Counts,
    /// Entries done (skipped ones included).
    processed: u64,
}

fn content_error(e: std::io::Error) -> SearchError {
    SearchError::io("writing the content store", e)
}

impl Writer {
    fn create(staging: &Path, total: usize) -> Result<Writer, SearchError> {
        let file = File::create(staging.join("content.bin")).map_err(content_error)?;
        Ok(Writer {
            content: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            docs: Vec::with_capacity(total),
            postings: PostingMap::default(),
            words: WordsBuilder::default(),
            counts: Counts::default(),
            processed: 0,
        })
    }

    /// Receives the prepared chunks and writes them in order: documents must enter the
    /// posting lists in id order, so chunks that arrive early wait in `pending`. Answers the
    /// first failure (a worker's or a write's), after which the rest is drained unwritten.
    fn write_in_order(
        &mut self,
        rx: &mpsc::Receiver<PreparedChunk<'_>>,
        chunks: &Chunks<'_>,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Option<SearchError> {
        let entries = chunks.input.entries;
        let mut pending: BTreeMap<usize, Vec<Prepared<'_>>> = BTreeMap::new();
        let mut next = 0usize;
        let mut failure: Option<SearchError> = None;
        for (chunk, result) in rx.iter() {
            if failure.is_some() {
                continue; // drain so that workers blocked on send can finish
            }
            match result {
                Ok(prepared) => {
                    pending.insert(chunk, prepared);
                }
                Err(error) => {
                    chunks.cancel.store(true, Ordering::Relaxed);
                    failure = Some(error);
                    continue;
                }
            }
            while let Some(prepared) = pending.remove(&next) {
                let first = next * CHUNK;
                let written = prepared
                    .into_iter()
                    .enumerate()
                    .try_for_each(|(i, doc)| self.add(&entries[first + i], doc));
                next += 1;
                if let Err(error) = written {
                    chunks.cancel.store(true, Ordering::Relaxed);
                    failure = Some(error);
                    break;
                }
                progress(BuildProgress {
                    done: self.processed,
                    total: entries.len() as u64,
                });
            }
        }
        failure
    }

    /// Adds one prepared document: counted, and unless a transform skipped it, given the next
    /// id, its text appended to the content store and its trigrams to the posting lists.
    fn add(&mut self, entry: &SourceEntry, doc: Prepared<'_>) -> Result<(), SearchError> {
        let Prepared {
            kind,
            text,
            trigrams,
            words,
            reused,
            transform,
            lang,
        } = doc;
        let counts = &mut self.counts;
        counts.corpus_bytes += entry.size;
        self.processed += 1;
        let replaced = transform == Transformed::Replaced;
        match transform {
            Transformed::Untouched => {}
            Transformed::Replaced => counts.transformed += 1,
            Transformed::Skipped => {
                counts.skipped += 1;
                counts.read += 1;
                return Ok(());
            }
            Transformed::Failed(message) => {
                counts.transform_failures += 1;
                if counts.failure_messages.len() < MAX_FAILURE_MESSAGES {
                    counts
                        .failure_messages
                        .push(format!("{}: {message}", entry.path));
                }
            }
        }
        // Document ids are positions in the document table: skipped files have none.
        let id = self.docs.len();
        if replaced {
            counts.replaced.push(id as u32);
        }
        if reused {
            counts.reused += 1;
        } else if kind != DocKind::TooLarge {
            counts.read += 1;
        }
        let len = text.len() as u64;
        if kind == DocKind::Text {
            self.content.write_all(&text).map_err(content_error)?;
            for &t in &trigrams {
                self.postings.entry(t).or_default().push(id as u32);
            }
            self.words.add(id as u32, &words);
            counts.content_bytes += len;
        } else {
            counts.path_only += 1;
        }
        self.docs.push(Doc {
            rank: static_rank(&entry.path),
            path: entry.path.clone(),
            blob_id: entry.blob_id.clone(),
            size: entry.size,
            kind,
            offset: self.offset,
            len,
            lang,
        });
        self.offset += len;
        Ok(())
    }

    /// Checks that every entry was written, syncs the content store and writes the posting
    /// lists; answers the document table and the counts.
    fn finish(
        self,
        input: &BuildInput<'_>,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<(Vec<Doc>, Counts), SearchError> {
        let total = input.entries.len() as u64;
        if self.docs.len() as u64 + self.counts.skipped != total {
            return Err(SearchError::Source {
                message: "the build stopped before every file was indexed".into(),
            });
        }
        let file = self
            .content
            .into_inner()
            .map_err(|e| content_error(e.into_error()))?;
        file.sync_all().map_err(content_error)?;
        write_postings(
            &input.staging.join("postings.bin"),
            self.postings.into_iter().collect(),
        )?;
        self.words.write(&input.staging.join(WORDS_FILE))?;
        if total == 0 {
            progress(BuildProgress { done: 0, total: 0 });
        }
        Ok((self.docs, self.counts))
    }
}
