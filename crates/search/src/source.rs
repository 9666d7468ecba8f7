//! What a build reads and what it reports: the [`Source`] of a commit's files, the
//! [`Transform`] it may apply to each (P-21), and a build's progress and statistics.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::lang::DocLang;

/// Most transform failure messages a [`BuildStats`] keeps.
pub const MAX_FAILURE_MESSAGES: usize = 5;

/// One file of a commit as the caller lists it (blob id = git object id hex, a content digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    /// Repository-relative path with `/` separators.
    pub path: String,
    /// The blob's object id (hex): equal ids mean equal bytes, which lets builds reuse documents.
    pub blob_id: String,
    /// Size in bytes (lets files over the size limit be skipped without reading them).
    pub size: u64,
}

/// What a derived-state transform decided for one text document (P-21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transform {
    /// Index the file as it is.
    Keep,
    /// Leave the file out of the generation: no content hit, no file-name hit.
    Skip,
    /// Index the file with a text instead of its own (snippets and line numbers refer to
    /// it; `None` keeps the file's), under a language of its own for the `lang` filter
    /// ([`DocLang::FromPath`] keeps the path's).
    Replace {
        /// The text indexed instead of the file's.
        text: Option<String>,
        /// The language the `lang` filter sees.
        lang: DocLang,
    },
    /// The transform could not run at all (its host stopped answering): the build fails,
    /// strict or not, and the published generation keeps answering. A generation built
    /// without the transforms it should have run is never published (P-7).
    Abort(String),
}

/// Where the indexer gets files; the service implements it over its git store.
pub trait Source: Sync {
    /// Every regular file in scope (no symlinks, no submodules).
    fn entries(&self) -> Result<Vec<SourceEntry>, String>;
    /// The bytes of one entry. Called from several threads at once.
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String>;
    /// A derived-state transform of a text document before it is indexed (P-21); called
    /// only for files classified as text, from several threads at once. `Err` means the
    /// transform failed: the file is indexed as it is and the failure counted (or, with
    /// [`IndexConfig::strict_transforms`](crate::IndexConfig::strict_transforms), the build fails).
    fn transform(&self, _entry: &SourceEntry, _text: &str) -> Result<Transform, String> {
        Ok(Transform::Keep)
    }
    /// Identifies the transform (the sources of the hooks behind it); part of the index
    /// fingerprint, so a different transform rebuilds and never reuses documents a previous
    /// transform shaped. Empty: no transform.
    fn plugin_fingerprint(&self) -> String {
        String::new()
    }
}

/// Progress of a build: documents done of total (reported from the calling thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildProgress {
    /// Documents written so far.
    pub done: u64,
    /// Documents in the commit.
    pub total: u64,
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildStats {
    /// Documents (files) in the generation, path-only ones included.
    pub documents: u64,
    /// Documents whose content (or path-only verdict) came from the previous generation.
    pub reused: u64,
    /// Documents read from the [`Source`].
    pub read: u64,
    /// Documents indexed by path only (over the size limit, binary, or not UTF-8).
    pub path_only: u64,
    /// Bytes on disk of the new generation (content store and index).
    pub bytes: u64,
    /// Bytes of searchable text in the content store.
    pub content_bytes: u64,
    /// Sum of the sizes of all files of the commit.
    pub corpus_bytes: u64,
    /// Wall time of the build.
    pub elapsed: Duration,
    /// True when the same commit under the same fingerprint was already current (nothing done).
    pub skipped_same: bool,
    /// Documents whose indexed text a transform replaced (P-21).
    pub transformed: u64,
    /// Files a transform left out of the generation.
    pub skipped: u64,
    /// Files whose transform failed (indexed as they are, P-7).
    pub transform_failures: u64,
    /// The first few transform failure messages (at most [`MAX_FAILURE_MESSAGES`]).
    pub failure_messages: Vec<String>,
    /// Transform failures by the step that failed, when the [`Source`] names its steps (the
    /// service: one server-plugin file's `on_source_file`); empty otherwise.
    pub transform_failures_by_step: BTreeMap<String, u64>,
    /// The generation number now current.
    pub generation: u64,
    /// Definitions in the generation's symbol table (issue 12).
    pub symbols: u64,
    /// When the new generation began to answer searches (phase one); `elapsed` includes
    /// phase two, the symbol table. Zero when nothing was published.
    pub searchable_after: Duration,
}
