//! Code search for Context Source Graph (SPEC S-1, S-3, S-4): one index per repository at
//! one commit, published atomically as a *generation*, searched with literal or regular
//! expression queries whose answers equal `git grep -n` on the same commit.
//!
//! How a search runs (module `search`, one step per module): the query (escaped when literal)
//! becomes a `regex` and, through its `regex-syntax` HIR, a boolean query over trigrams
//! (`plan`, `trigram`); the posting lists of the generation give the candidate documents
//! (`candidates`); each candidate's stored text (a memory-mapped content store, never the Git
//! pack) is verified line by line (`verify`); hits are ranked (file names, then
//! definition-looking lines, then the rest, each in repository/path/line order; `rank`), kept
//! for later pages (`cache`) and cut into pages with an opaque cursor bound to the generations
//! it was made from (`page`).
//!
//! How a build runs (module `publish`): the repository's lock taken (`repodir`), a generation
//! staged from the [`Source`] (`build`), published with one rename and made current
//! (`indexes`), then its symbol table extracted (`extract`, `symtab`) for `outline`,
//! `definitions` and `references` (`navigate`).
//!
//! Bounds and reuse: one search collects at most [`MAX_HITS`] hits (configurable with
//! [`Indexes::with_max_hits`]): all file-name hits first, then line hits in repository, path
//! and line order; verification stops at the cap and [`SearchStats::truncated`] says so. The
//! ranking then orders the hits collected, so with the cap reached it is over the first hits in
//! path order, not over every hit of the corpus. The complete ranked list of recent searches is
//! kept in a small LRU (32 lists, 64 MiB), keyed by the request without cursor and page size and
//! by the exact generations searched: a later page slices it instead of verifying again
//! ([`SearchStats::cached`], [`IndexesStats::result_cache_hits`]). Cursors carry a stable hash
//! of the request ([`SearchRequest::stable_hash`]), so they survive a server upgrade (as long
//! as the generations they name are current).
//!
//! A commit that is not indexed (S-8, module `overlay`): [`Indexes::search_overlay`] lays
//! the files that differ from the current generation ([`Overlay`]) over it, as an in-memory
//! generation in the same document order, so its answers are those of an index built at that
//! commit; the differing blobs' trigram sets and the recent overlays are kept for the next
//! call ([`Indexes::clear_result_cache`] drops them with the result cache).
//!
//! Cluster mode (module `shard`): replicas holding different repositories each answer the
//! head of their ranked list with its rank keys ([`Indexes::top_hits`]); the replica asked
//! merges them into the page and cursor one index set holding everything would give
//! ([`merge`], [`page_offset`]).
//!
//! On-disk layout (module `store`): `<dir>/<owner>/<name>/gen-<n>/` holding `content.bin`
//! (document texts), `docs.bin` (document table), `postings.bin` (trigram → document ids),
//! `symbols.bin` (module `symtab`) and `meta.json`; builds write `staging-<n>-<pid>/` and
//! publish it with one rename. Both files' readers share module `disk` (format version,
//! mapping), so modules depend one way: `store` uses `symtab`, never the reverse.
//!
//! Semantics worth knowing: a match never spans a line (like `git grep`), so a query
//! containing a line break finds nothing; case-insensitive means Unicode simple case folding
//! (the `regex` crate's `(?i)`); `\w`, `\d`, `\s`, `\b` and POSIX classes follow the
//! `regex` crate (Unicode-aware except POSIX classes, which are ASCII).

mod build;
mod cache;
mod candidates;
mod config;
mod disk;
mod error;
mod extract;
mod history;
mod indexes;
mod lang;
mod navigate;
mod overlay;
mod page;
mod plan;
mod publish;
mod rank;
mod repodir;
mod request;
mod search;
mod shard;
mod source;
mod store;
mod symtab;
mod trigram;
mod verify;

pub use config::{DEFAULT_MAX_FILE_BYTES, IndexConfig, plugin_part};
pub use error::SearchError;
pub use history::{
    HistoryBuildStats, HistoryError, HistoryHit, HistoryIndexes, HistoryKind, HistoryLine,
    HistoryRecord, HistoryRequest, HistoryResults, HistorySource, MAX_HISTORY_LIMIT,
    MAX_LIVE_COMMITS, MAX_SEGMENTS, history_cursor_tip,
};
pub use indexes::{IndexInfo, Indexes, IndexesStats};
pub use lang::{DocLang, MAX_LANG_BYTES, known_langs, lang_of};
pub use navigate::{
    Definition, Definitions, DefinitionsRequest, IndexedOutline, MAX_DEFINITIONS, MAX_SYMBOL_BYTES,
};
pub use overlay::{Overlay, OverlayDoc};
pub use page::{MAX_LIMIT, SNIPPET_CHARS};
pub use plan::{MAX_QUERY_BYTES, REGEX_SIZE_LIMIT};
pub use rank::{MAX_HITS, Tier};
pub use request::{Hit, PathOnly, RepoHits, SearchRequest, SearchResults, SearchStats};
pub use shard::{
    Mode, RankedHit, TopHits, check_definitions, merge, merge_definitions, page_offset,
};
pub use source::{BuildProgress, BuildStats, MAX_FAILURE_MESSAGES, Source, SourceEntry, Transform};
pub use symbols::{Symbol, SymbolKind};
pub use verify::SEARCH_BUDGET;
