//! Phase two of a build, once the generation answers searches: the definitions of every text
//! document, parsed on worker threads (or copied from the previous generation's symbol table
//! for equal blobs), for the symbol table (module `symtab`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use symbols::{Extractor, Grammar, Symbol};

use crate::error::SearchError;
use crate::source::{Source, SourceEntry};
use crate::store::{DocKind, Generation};
use crate::symtab::SymbolTable;

/// Text documents per unit of work handed to a worker.
const CHUNK: usize = 32;

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
