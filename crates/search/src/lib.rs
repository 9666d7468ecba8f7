//! Code search for Context Source Graph (SPEC S-1, S-3, S-4): one index per repository at
//! one commit, published atomically as a *generation*, searched with literal or regular
//! expression queries whose answers equal `git grep -n` on the same commit.
//!
//! How a search runs (module `search`, one step per module): the query (escaped when literal)
//! becomes a `regex` and, through its `regex-syntax` HIR, a boolean query over trigrams
//! (`plan`, `trigram`); the posting lists of the generation give the candidate documents
//! (`candidates`); each candidate's stored text (a memory-mapped content store, never the Git
//! pack) is verified line by line (`verify`), in rank order, only until the page is full
//! (`rank`); the page is cut with an opaque cursor bound to the generations it was made from
//! and naming its last hit, where the next page starts (`page`), and kept for a repeat
//! (`cache`).
//!
//! Ranking (S-10, module `rank`): file-name hits first; then, for a literal query that is an
//! identifier, the lines where the symbol table says that exact name is defined (for
//! `references`, the name's definitions); then every other matching line. Within each tier,
//! hits follow the document's static rank (module `order`: source before tests, generated
//! or minified files and lockfiles, then vendored ones; shallower paths first), then the
//! repository name, then the path, then the line. Documents are numbered in that order when
//! a generation is built, so posting lists give candidates best first and a page costs in
//! proportion to the page: page N+1 starts where page N stopped. The order is a function of
//! (query, commit) alone.
//!
//! Totals ([`SearchStats::total_hits`]): what the page's work found, flagged
//! [`SearchStats::total_is_lower_bound`] ("at least N") unless it saw every hit; with
//! [`SearchRequest::count`], exact up to [`COUNT_CAP`].
//!
//! How a build runs (module `publish`): the repository's lock taken (`repodir`), a generation
//! staged from the [`Source`] (`build`), published with one rename and made current
//! (`indexes`), then its symbol table extracted (`extract`, `symtab`) for `outline`,
//! `definitions` and `references` (`navigate`).
//!
//! Reuse: the pages of recent searches are kept in a small LRU (32 pages, 64 MiB), keyed by
//! the request with its cursor, page size and count, and by the exact generations searched,
//! so the same page asked again is a lookup ([`SearchStats::cached`],
//! [`IndexesStats::result_cache_hits`]; [`Indexes::clear_result_cache`] empties it). Cursors
//! carry a stable hash of the request ([`SearchRequest::stable_hash`]), so they survive a
//! server upgrade (as long as the generations they name are current).
//!
//! A commit that is not indexed (S-8, module `overlay`): [`Indexes::search_overlay`] lays
//! the files that differ from the current generation ([`Overlay`]) over it, as an in-memory
//! generation in the same document order, so its answers are those of an index built at that
//! commit; the differing blobs' trigram sets and the recent overlays are kept for the next
//! call ([`Indexes::clear_result_cache`] drops them with the result cache).
//!
//! Cluster mode (module `shard`): replicas holding different repositories each answer the
//! head of their ranking ([`Indexes::top_hits`]); the replica asked merges them on the rank
//! key (tier, static rank, repository, path, line) into the page and cursor one index set
//! holding everything would give ([`merge`], [`page_offset`]).
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
mod definable;
mod disk;
mod error;
mod extract;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod indexes;
mod lang;
mod limits;
mod links;
mod navigate;
mod order;
mod overlay;
mod overlay_cache;
mod page;
mod plan;
mod postings;
mod publish;
mod rank;
mod repodir;
mod request;
mod search;
mod shard;
mod snippet;
mod source;
mod store;
mod symtab;
mod trigram;
mod verify;
mod words;

pub use config::{DEFAULT_MAX_FILE_BYTES, IndexConfig, plugin_part};
pub use error::SearchError;
pub use history::{
    HistoryBuildStats, HistoryError, HistoryHit, HistoryIndexes, HistoryKind, HistoryLine,
    HistoryRecord, HistoryRequest, HistoryResults, HistorySource, MAX_HISTORY_LIMIT,
    MAX_LIVE_COMMITS, MAX_SEGMENTS, history_cursor_tip,
};
pub use indexes::{IndexInfo, Indexes, IndexesStats};
pub use lang::{DocLang, MAX_LANG_BYTES, known_langs, lang_of};
pub use limits::SEARCH_BUDGET;
pub use links::{DefinitionSite, NameSites, SitesAnswer};
pub use navigate::{
    Definition, Definitions, DefinitionsRequest, IndexedOutline, MAX_DEFINITIONS, MAX_SYMBOL_BYTES,
};
pub use overlay::{Overlay, OverlayDoc};
pub use page::MAX_LIMIT;
pub use plan::{MAX_QUERY_BYTES, REGEX_SIZE_LIMIT};
pub use rank::{COUNT_CAP, MAX_HITS, Tier};
pub use request::{Hit, PathOnly, RepoHits, SearchRequest, SearchResults, SearchStats};
pub use shard::{
    Mode, RankedHit, TopHits, check_definitions, merge, merge_definitions, page_offset,
};
pub use snippet::{MAX_MARKS, SNIPPET_CHARS, marks_fit};
pub use source::{BuildProgress, BuildStats, MAX_FAILURE_MESSAGES, Source, SourceEntry, Transform};
pub use symbols::{Symbol, SymbolKind};
