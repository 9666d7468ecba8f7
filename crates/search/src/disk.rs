//! The low-level pieces every file of a generation shares: the on-disk format version and the
//! read-only mapping of a published file. `store` (the generation) and `symtab` (its symbol
//! table) both build on this module, so neither needs the other's internals.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::SearchError;

/// Version of the on-disk format; part of the index fingerprint, so a change rebuilds.
/// 4: documents numbered in static-rank order (module `order`), not path order.
/// 5: `words.bin`, the word vocabulary (module `words`).
pub(crate) const FORMAT_VERSION: u32 = 5;

/// Maps a published index file read-only; `None` for an empty file (nothing to map).
pub(crate) fn map(path: &Path) -> Result<Option<Mmap>, SearchError> {
    let file = File::open(path).map_err(|e| SearchError::io("opening an index file", e))?;
    let len = file
        .metadata()
        .map_err(|e| SearchError::io("opening an index file", e))?
        .len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: index files are written once into a staging directory and never modified after
    // the rename that publishes them; they are only deleted (which keeps the mapping valid).
    let mmap =
        unsafe { Mmap::map(&file) }.map_err(|e| SearchError::io("mapping an index file", e))?;
    Ok(Some(mmap))
}
