//! The symbol table of a generation (issue 12): the definitions the `symbols` crate found in
//! each text document, written at build time beside the posting lists and memory-mapped at
//! search time, so `outline` and `definitions` never parse.
//!
//! `symbols.bin`: `CSGS`, version u32, documents u32, symbols u32; then `documents + 1` u32
//! (the first symbol of each document; symbols are stored in document order, each document's
//! in the order they start); then one 32-byte record per symbol (document u32, name line u32,
//! start line u32, end line u32, parent u32 (a symbol number, `u32::MAX` for none), name
//! offset u32, signature offset u32, name length u16, signature length u8, kind u8); then the
//! symbol numbers sorted by (name, document, line) for exact-name lookups by binary search;
//! then the string pool the offsets point into. All little-endian.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use memmap2::Mmap;
use symbols::{Symbol, SymbolKind};

use crate::disk::FORMAT_VERSION;
use crate::error::SearchError;

const MAGIC: &[u8; 4] = b"CSGS";
const HEADER: usize = 16;
const RECORD: usize = 32;
const NO_PARENT: u32 = u32::MAX;

fn io_write(e: std::io::Error) -> SearchError {
    SearchError::io("writing the symbol table", e)
}

/// Writes `symbols.bin` for `documents` documents; `per_doc` yields each document's symbols
/// in document order (documents without symbols may be absent).
pub(crate) fn write(
    path: &Path,
    documents: usize,
    per_doc: &[(u32, Vec<Symbol>)],
) -> Result<(), SearchError> {
    let too_big = || io_write(std::io::Error::other("the symbol table exceeds 4 GiB"));
    let count: usize = per_doc.iter().map(|(_, s)| s.len()).sum();
    let mut firsts = Vec::with_capacity(documents + 1);
    let mut records = Vec::with_capacity(count * RECORD);
    let mut pool: Vec<u8> = Vec::new();
    // (name offset, name length, document, line, symbol number) for the name order.
    let mut names: Vec<(u32, u16, u32, u32, u32)> = Vec::with_capacity(count);
    let mut next = 0u32;
    let mut per_doc = per_doc.iter().peekable();
    for doc in 0..documents as u32 {
        firsts.push(next);
        let Some((_, symbols)) = per_doc.next_if(|(d, _)| *d == doc) else {
            continue;
        };
        let first = next;
        for symbol in symbols {
            let name_off = u32::try_from(pool.len()).map_err(|_| too_big())?;
            let name =
                &symbol.name.as_bytes()[..symbol.name.floor_char_boundary(u16::MAX as usize)];
            pool.extend_from_slice(name);
            let sig_off = u32::try_from(pool.len()).map_err(|_| too_big())?;
            let signature =
                &symbol.signature.as_bytes()[..symbol.signature.floor_char_boundary(255)];
            pool.extend_from_slice(signature);
            let parent = symbol.parent.map_or(NO_PARENT, |p| first + p);
            for value in [
                doc,
                symbol.line,
                symbol.start_line,
                symbol.end_line,
                parent,
                name_off,
                sig_off,
            ] {
                records.extend_from_slice(&value.to_le_bytes());
            }
            records.extend_from_slice(&(name.len() as u16).to_le_bytes());
            records.push(signature.len() as u8);
            records.push(symbol.kind.to_u8());
            names.push((name_off, name.len() as u16, doc, symbol.line, next));
            next = next.checked_add(1).ok_or_else(too_big)?;
        }
    }
    firsts.push(next);
    let text = |off: u32, len: u16| &pool[off as usize..off as usize + usize::from(len)];
    names.sort_unstable_by(|a, b| {
        text(a.0, a.1)
            .cmp(text(b.0, b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });

    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io_write)?);
    out.write_all(MAGIC).map_err(io_write)?;
    for value in [FORMAT_VERSION, documents as u32, next] {
        out.write_all(&value.to_le_bytes()).map_err(io_write)?;
    }
    for first in &firsts {
        out.write_all(&first.to_le_bytes()).map_err(io_write)?;
    }
    out.write_all(&records).map_err(io_write)?;
    for (.., number) in &names {
        out.write_all(&number.to_le_bytes()).map_err(io_write)?;
    }
    out.write_all(&pool).map_err(io_write)?;
    let file = out.into_inner().map_err(|e| io_write(e.into_error()))?;
    file.sync_all().map_err(io_write)?;
    Ok(())
}

/// A stored symbol with the document it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub doc: u32,
    pub symbol: Symbol,
}

/// A loaded `symbols.bin` (checked at load, so lookups index without failing).
pub(crate) struct SymbolTable {
    map: Option<Mmap>,
    documents: usize,
    count: usize,
}

impl SymbolTable {
    /// The table of a generation without symbols (an empty file).
    pub(crate) fn empty(documents: usize) -> SymbolTable {
        SymbolTable {
            map: None,
            documents,
            count: 0,
        }
    }

    /// Checks a mapped `symbols.bin` of a generation with `documents` documents.
    pub(crate) fn load(map: Option<Mmap>, documents: usize) -> Option<SymbolTable> {
        let Some(bytes) = map.as_deref() else {
            return Some(SymbolTable::empty(documents));
        };
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
        };
        if bytes.get(..4)? != MAGIC || u32_at(4)? != FORMAT_VERSION {
            return None;
        }
        if u32_at(8)? as usize != documents {
            return None;
        }
        let count = u32_at(12)? as usize;
        let table = SymbolTable {
            map: None,
            documents,
            count,
        };
        let pool = table.pool_start();
        if bytes.len() < pool {
            return None;
        }
        let pool_len = bytes.len() - pool;
        // Every document's range in order, every record's strings inside the pool.
        let mut last = 0;
        for doc in 0..=documents {
            let first = u32_at(HEADER + doc * 4)? as usize;
            if first < last || first > count {
                return None;
            }
            last = first;
        }
        for i in 0..count {
            let at = table.records_start() + i * RECORD;
            let name = u32_at(at + 20)? as usize + usize::from(u16_at(bytes, at + 28)?);
            let sig = u32_at(at + 24)? as usize + usize::from(*bytes.get(at + 30)?);
            let parent = u32_at(at + 16)?;
            if name > pool_len
                || sig > pool_len
                || u32_at(at)? as usize >= documents
                || (parent != NO_PARENT && parent as usize >= count)
            {
                return None;
            }
            if u32_at(table.order_start() + i * 4)? as usize >= count {
                return None;
            }
        }
        Some(SymbolTable {
            map,
            documents,
            count,
        })
    }

    fn records_start(&self) -> usize {
        HEADER + (self.documents + 1) * 4
    }

    fn order_start(&self) -> usize {
        self.records_start() + self.count * RECORD
    }

    fn pool_start(&self) -> usize {
        self.order_start() + self.count * 4
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    fn u32_at(&self, at: usize) -> u32 {
        self.bytes()
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    fn first_of(&self, doc: usize) -> usize {
        if self.map.is_none() || doc > self.documents {
            return 0;
        }
        self.u32_at(HEADER + doc * 4) as usize
    }

    fn text(&self, off: u32, len: usize) -> &[u8] {
        let start = self.pool_start() + off as usize;
        self.bytes().get(start..start + len).unwrap_or(&[])
    }

    fn name_of(&self, number: usize) -> &[u8] {
        let at = self.records_start() + number * RECORD;
        let len = u16_at(self.bytes(), at + 28).unwrap_or(0);
        self.text(self.u32_at(at + 20), usize::from(len))
    }

    /// Symbol `number`, its parent numbered within its document.
    fn record(&self, number: usize) -> Stored {
        let at = self.records_start() + number * RECORD;
        let bytes = self.bytes();
        let doc = self.u32_at(at);
        let parent = self.u32_at(at + 16);
        let base = self.first_of(doc as usize) as u32;
        let sig_len = usize::from(bytes.get(at + 30).copied().unwrap_or(0));
        Stored {
            doc,
            symbol: Symbol {
                kind: SymbolKind::from_u8(bytes.get(at + 31).copied().unwrap_or(u8::MAX)),
                name: String::from_utf8_lossy(self.name_of(number)).into_owned(),
                line: self.u32_at(at + 4),
                start_line: self.u32_at(at + 8),
                end_line: self.u32_at(at + 12),
                parent: (parent != NO_PARENT).then(|| parent.saturating_sub(base)),
                signature: String::from_utf8_lossy(self.text(self.u32_at(at + 24), sig_len))
                    .into_owned(),
            },
        }
    }

    /// The symbols of document `doc`, in the order they start.
    pub(crate) fn of_doc(&self, doc: u32) -> Vec<Symbol> {
        let doc = doc as usize;
        if doc >= self.documents {
            return Vec::new();
        }
        (self.first_of(doc)..self.first_of(doc + 1))
            .map(|n| self.record(n).symbol)
            .collect()
    }

    /// The name of the `index`-th symbol of document `doc` (a [`Symbol::parent`]); empty
    /// when there is none.
    pub(crate) fn name_in_doc(&self, doc: u32, index: u32) -> String {
        let number = self.first_of(doc as usize) + index as usize;
        if number >= self.first_of(doc as usize + 1) {
            return String::new();
        }
        String::from_utf8_lossy(self.name_of(number)).into_owned()
    }

    /// Every symbol named exactly `name`, in document and line order.
    pub(crate) fn named(&self, name: &str) -> Vec<Stored> {
        let order = |i: usize| self.u32_at(self.order_start() + i * 4) as usize;
        let wanted = name.as_bytes();
        let start = partition(self.count, |i| self.name_of(order(i)) < wanted);
        let end = partition(self.count, |i| self.name_of(order(i)) <= wanted);
        (start..end).map(|i| self.record(order(i))).collect()
    }

    /// Whether document `doc` defines `name` on line `line` (the tests' check of the table).
    #[cfg(test)]
    pub(crate) fn defines(&self, doc: u32, line: u32, name: &str) -> bool {
        let doc = doc as usize;
        if doc >= self.documents {
            return false;
        }
        (self.first_of(doc)..self.first_of(doc + 1)).any(|n| {
            self.u32_at(self.records_start() + n * RECORD + 4) == line
                && self.name_of(n) == name.as_bytes()
        })
    }

    /// Symbols stored.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Size of the table's file.
    pub(crate) fn file_len(&self) -> usize {
        self.bytes().len()
    }
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

/// The first `i` in `0..n` for which `before(i)` is false (`before` must be monotone).
fn partition(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn symbol(name: &str, line: u32, parent: Option<u32>) -> Symbol {
        Symbol {
            kind: SymbolKind::Function,
            name: name.into(),
            line,
            start_line: line,
            end_line: line + 1,
            parent,
            signature: format!("fn {name}()"),
        }
    }

    fn round_trip(documents: usize, per_doc: &[(u32, Vec<Symbol>)]) -> SymbolTable {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbols.bin");
        write(&path, documents, per_doc).unwrap();
        let file = File::open(&path).unwrap();
        // SAFETY: the file is not modified while mapped (the temp dir is private).
        let map = unsafe { Mmap::map(&file) }.unwrap();
        SymbolTable::load(Some(map), documents).unwrap()
    }

    #[test]
    fn documents_names_and_parents_round_trip() {
        let table = round_trip(
            4,
            &[
                (1, vec![symbol("b", 1, None), symbol("a", 3, Some(0))]),
                (3, vec![symbol("a", 7, None)]),
            ],
        );
        assert_eq!(table.len(), 3);
        assert!(table.of_doc(0).is_empty());
        assert_eq!(
            table.of_doc(1),
            [symbol("b", 1, None), symbol("a", 3, Some(0))]
        );
        assert_eq!(table.of_doc(3), [symbol("a", 7, None)]);
        assert!(table.of_doc(9).is_empty());
        let named: Vec<_> = table
            .named("a")
            .into_iter()
            .map(|s| (s.doc, s.symbol.line))
            .collect();
        assert_eq!(named, [(1, 3), (3, 7)]);
        assert!(table.named("c").is_empty());
        assert!(table.named("").is_empty());
        assert!(table.defines(3, 7, "a"));
        assert!(!table.defines(3, 8, "a"));
        assert!(!table.defines(1, 3, "b"));
    }

    fn arbitrary_symbol(parents: u32) -> impl Strategy<Value = Symbol> {
        (
            0u8..10,
            "[a-zA-Z_\\p{L}]{1,12}",
            1u32..5000,
            0u32..40,
            proptest::option::of(0..parents.max(1)),
            ".{0,60}",
        )
            .prop_map(move |(kind, name, line, span, parent, signature)| Symbol {
                kind: SymbolKind::from_u8(kind),
                name,
                line,
                start_line: line,
                end_line: line + span,
                parent: parent.filter(|_| parents > 0),
                signature,
            })
    }

    proptest! {
        /// Whatever is written reads back the same, per document and by name.
        #[test]
        fn tables_round_trip(
            docs in proptest::collection::vec(proptest::collection::vec(arbitrary_symbol(4), 0..6), 1..8),
        ) {
            let per_doc: Vec<(u32, Vec<Symbol>)> = docs
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.is_empty())
                .map(|(doc, symbols)| {
                    // Parents point inside the document's own list.
                    let n = symbols.len() as u32;
                    let symbols = symbols
                        .iter()
                        .cloned()
                        .map(|mut s| {
                            s.parent = s.parent.map(|p| p % n);
                            s
                        })
                        .collect();
                    (doc as u32, symbols)
                })
                .collect();
            let table = round_trip(docs.len(), &per_doc);
            for (doc, symbols) in &per_doc {
                prop_assert_eq!(&table.of_doc(*doc), symbols);
                for symbol in symbols {
                    let found = table.named(&symbol.name);
                    prop_assert!(found.iter().any(|s| s.doc == *doc && &s.symbol == symbol));
                    prop_assert!(table.defines(*doc, symbol.line, &symbol.name));
                }
            }
            let total: usize = per_doc.iter().map(|(_, s)| s.len()).sum();
            prop_assert_eq!(table.len(), total);
        }
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbols.bin");
        write(&path, 2, &[(0, vec![symbol("main", 1, None)])]).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes.clone();
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).unwrap();
        let map = |p: &Path| unsafe { Mmap::map(&File::open(p).unwrap()) }.unwrap();
        assert!(SymbolTable::load(Some(map(&path)), 2).is_none());
        std::fs::write(&path, &whole).unwrap();
        // Another document count than the document table's.
        assert!(SymbolTable::load(Some(map(&path)), 3).is_none());
        assert!(SymbolTable::load(Some(map(&path)), 2).is_some());
    }
}
