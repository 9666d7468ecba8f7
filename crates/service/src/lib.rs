//! `service` holds the operations of Context Source Graph in plain Rust types: `read`,
//! `read_many`, `search`, `list`, `resolve`, `discovery`, `availability`, `sync` and `index`
//! (SPEC sections 2 and 3). Transports (`mcpserver`, `httpserver`) turn requests into these calls and answers
//! into their own formats; nothing here knows MCP, JSON-RPC or HTTP.
//!
//! Every operation that names a repository runs in the service frame (`frame.rs`): alias,
//! access check, registry snapshot and lease, statistics, in that order, once each.
//! Every operation is `async` but does its Git work on the blocking pool (or in place, when
//! it is cheap). Reads run on the registry snapshot of their lease and never wait on a lock
//! a registry change can hold; enrichment by repository plugins runs after the base
//! read.

mod background;
mod cost;
mod enrich;
mod error;
mod fanout;
mod frame;
mod highlight;
mod history;
mod history_search;
mod identity;
mod index;
mod lines;
mod lookup;
mod maintenance;
mod model;
mod navigate;
mod permissions;
mod placement;
mod pluginstatus;
mod prepare;
mod progress;
mod read;
mod revision_search;
mod serverplugins;
mod stats;

pub use access::{TOKEN_PREFIX, contains_token};
pub use background::{Shutdown, spawn_maintenance};
pub use budget::{Budget, Stop};
pub use cost::{Admit, Class, ClassStats, ClientKey, Cost, MAX_HEAVY_CALLS, share_of};
pub use enrich::catalog_cache::CATALOG_IDLE;
pub use enrich::prepare::PREPARED_BRANCHES;
pub use error::{ErrorKind, ServiceError};
pub use fanout::{
    PeerError, PeerFuture, Peers, ShardAnswer, ShardHit, ShardMode, ShardPathOnly, ShardRequest,
    ShardStats, ShardTier,
};
pub use highlight::{
    DEFAULT_HIGHLIGHT_LINES, DEFINITIONS_BUDGET, DefinitionLink, DefinitionTarget,
    HIGHLIGHT_CACHE_BYTES, HighlightAnswer, HighlightCacheStats, HighlightRequest, HighlightStatus,
    HighlightedFile, HighlightedLine, HighlightedText, MAX_DEFINITION_TARGETS, MAX_LINKED_NAMES,
    RAW_MAX_BYTES, RawAnswer, RawBytes, RawRequest, Token,
};
pub use history::{
    BlameAnswer, BlameLines, BlameRequest, ChangedFile, CommitAnswer, DEFAULT_LOG_LIMIT,
    DiffAnswer, DiffFile, DiffRequest, LogAnswer, LogEntry, LogRequest, MAX_BLAME_LINES,
    MAX_COMMIT_FILES, MAX_LOG_LIMIT, MAX_MESSAGE_BYTES, MergeBaseAnswer,
};
pub use identity::{GroupGrant, IdentityPolicy, SCOPE_PREPARE, user_name_of};
pub use index::{
    BuildProgress, BuildStats, DEFAULT_SEARCH_LIMIT, IndexConfig, IndexInfo, IndexesStats,
    LineChange, MAX_CONCURRENT_SEARCHES, SearchAnswer, SearchHit, SearchKind, SearchRepoHits,
    SearchRequest, SearchStatsAnswer,
};
pub use model::*;
pub use navigate::{
    DEFAULT_DEFINITIONS_LIMIT, DEFAULT_REFERENCES_LIMIT, DefinitionHit, DefinitionsAnswer,
    MAX_OUTLINE_BYTES, MAX_OUTLINE_SYMBOLS, OutlineAnswer, OutlineEntry, OutlineRequest,
    OutlineSymbol, Reference, ReferencesAnswer, ReferencesRequest, RepoReferences, SymbolQuery,
};
pub use permissions::{
    AuthFailure, Caller, NewToken, Principal, ProviderGrant, TOKEN_NEEDED, TokenInfo,
};
pub use placement::{
    ClusterStatus, ForwardedRefusal, Member, Membership, Placement, Readiness, RepoPlacement,
    Route, RoutedCall,
};
pub use prepare::{AddRepoAnswer, IndexReport, PrepareAction, PrepareAnswer, PrepareRequest};
pub use progress::TenthLog;
pub use pyplugin::HostConfig;
pub use pyplugin::{HookFailures, State as HostState, summary as failure_summary};
/// Hits a search counts at most when asked to count (S-10).
pub use search::COUNT_CAP as SEARCH_COUNT_CAP;
pub use serverplugins::{
    ArgumentRewrite, HostStatus, PluginHost, ServerPluginsStatus, StatusDetail, ToolPreset,
};
pub use stats::{LATENCY_BUCKETS_MICROS, OpSnapshot, OpStats, QueryStats, StatsSnapshot};
pub use wasmplugin::{ConnectionPlugins, InvalidConnectionPlugins, PluginConfig};

use gitstore::GitStore;
use std::sync::Arc;
use std::time::SystemTime;

/// Per-call context a transport hands to the service. One per call: its clones belong to the
/// same call (they share its server-plugin epoch and its budget).
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The connection's `plugins` parameter (M-2).
    pub plugins: ConnectionPlugins,
    /// Who is calling.
    pub caller: Caller,
    /// The server-plugin epoch of this call (P-12): empty until the call first needs it.
    pub server_plugins: EpochPin,
    /// Who the call counts against for the per-client shares of heavy classes (O-9).
    pub client: ClientKey,
    /// What the call may spend (O-9), as the tool or route that made it states; `None`
    /// (in-process callers): [`Cost::IN_PROCESS`]. Set with [`CallContext::with_cost`].
    pub cost: Option<Cost>,
    /// The call's budget: its deadline once a cost is set, and its cancellation (the
    /// transport cancels it when the caller goes away; the frame when its deadline passes).
    pub budget: Budget,
}

/// Contexts compare by who calls and how: the epoch a call happened to pin and the moment
/// its budget ends are not part of it.
impl PartialEq for CallContext {
    fn eq(&self, other: &Self) -> bool {
        self.plugins == other.plugins
            && self.caller == other.caller
            && self.client == other.client
            && self.cost == other.cost
    }
}

impl Eq for CallContext {}

impl CallContext {
    /// This call under `cost`: its budget starts now, inside the one it had (so whoever
    /// could cancel the call still can).
    pub fn with_cost(&self, cost: Cost) -> CallContext {
        CallContext {
            cost: Some(cost),
            budget: cost.budget(&self.budget),
            ..self.clone()
        }
    }

    /// The cost in force.
    pub fn cost(&self) -> Cost {
        self.cost.unwrap_or(Cost::IN_PROCESS)
    }
}

/// The server-plugin epoch a call runs on, taken once when the call first needs it and shared
/// by every clone of its [`CallContext`], so one call never sees two epochs (P-12).
#[derive(Clone, Default)]
pub struct EpochPin(Arc<std::sync::OnceLock<Option<pyplugin::Epoch>>>);

impl std::fmt::Debug for EpochPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get() {
            None => f.write_str("EpochPin(unpinned)"),
            Some(epoch) => write!(f, "EpochPin({:?})", epoch.as_ref().map(|e| e.number())),
        }
    }
}

/// Contexts compare by who calls and how: the epoch a call happened to pin is not part of it.
impl PartialEq for EpochPin {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EpochPin {}

/// Limits of the read operations. Defaults are the SPEC's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Body bytes one `read` may return (256 KiB).
    pub read_budget: usize,
    /// Body bytes one `read_many` shares across its items, in request order (512 KiB).
    pub batch_budget: usize,
    /// Items one `read_many` may ask for (50).
    pub max_batch_items: usize,
    /// A single line longer than this is cut inside the line (1 MiB).
    pub line_cap: usize,
    /// Lines a read returns when `end_line` is omitted (500).
    pub default_lines: u64,
    /// Entries one `list` returns at most (10 000).
    pub max_list_entries: usize,
    /// Deepest `list` (10).
    pub max_list_depth: u32,
    /// Repository-plugin budgets and switches (W-26).
    pub plugins: wasmplugin::PluginConfig,
    /// Search index settings (S-3).
    pub index: IndexConfig,
    /// Searches that run at once (twice the cores); a further one waits up to
    /// `search_queue_wait` for a slot, then is refused as [`ErrorKind::Busy`].
    pub max_concurrent_searches: usize,
    /// How long a search, or a call of any heavy class (O-9), waits for a free slot (1 s).
    pub search_queue_wait: std::time::Duration,
    /// Calls of one heavy class that run at once (history walks, blame, diffs, raw,
    /// reads of large files, README renders, overlays, first parses; the cores, at least 2);
    /// one client holds at most half of them ([`share_of`]).
    pub heavy_calls: usize,
    /// Anonymous HTTP callers may read public repositories (A-2; on by default, as the
    /// embedded default of O-2 serves its repository to the loopback).
    pub public_read: bool,
    /// Commits of a repository's history the commit and diff search index keeps, newest
    /// first (S-9); `None` (the default): the whole retained history.
    pub history_depth: Option<usize>,
    /// What callers of the identity provider may do by their groups (A-5, issue 44).
    pub identity: identity::IdentityPolicy,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            read_budget: 256 * 1024,
            batch_budget: 512 * 1024,
            max_batch_items: 50,
            line_cap: 1024 * 1024,
            default_lines: 500,
            max_list_entries: 10_000,
            max_list_depth: 10,
            plugins: wasmplugin::PluginConfig::default(),
            index: IndexConfig::default(),
            max_concurrent_searches: index::default_concurrent_searches(),
            heavy_calls: cost::default_heavy_calls(),
            search_queue_wait: std::time::Duration::from_secs(1),
            public_read: true,
            history_depth: None,
            identity: identity::IdentityPolicy::default(),
        }
    }
}

/// The operations. Cheap to clone; one per process.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    store: GitStore,
    config: ServiceConfig,
    stats: QueryStats,
    /// The repository-plugin host (W-*).
    plugins: enrich::Plugins,
    /// The search indexes (S-3), or why they could not open.
    indexes: Result<search::Indexes, String>,
    /// Admission per class (O-9): slots of searches (S-1) and of every heavy class.
    admission: cost::Admission,
    /// The server-plugin host (P-*): disabled unless the operator turned it on.
    server_plugins: PluginHost,
    /// What background preparation did per repository (W-31).
    preparations: enrich::prepare::Preparations,
    /// Epochs whose `on_source_file` shaped a published index generation, by derived
    /// fingerprint: incremental builds keep using them until a rebuild (P-7).
    derived_epochs: std::sync::Mutex<std::collections::HashMap<String, pyplugin::Epoch>>,
    /// Repositories this process built (or found current) at least once: until then a
    /// published generation's derived-state sources are not this process's (P-7).
    indexed_here: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Users, tokens and grants, or why they could not open (then only the local
    /// caller and anonymous reads of public repositories work).
    access: Result<Arc<access::AccessStore>, String>,
    /// Cluster mode: where repositories are served (unset: everything here).
    placement: std::sync::OnceLock<Arc<dyn placement::Placement>>,
    /// Cluster mode: the repositories this replica owns and holds, as the last maintenance
    /// round counted them (`usize::MAX` before the first), so a `/readyz` probe reads a
    /// number instead of walking every repository.
    served_here: std::sync::atomic::AtomicUsize,
    /// Overlays of commits searched at a revision (S-8), kept for the next call.
    overlays: std::sync::Mutex<revision_search::OverlayCache>,
    /// Highlighted files, by content (the website's code views).
    highlights: ::highlight::Cache,
    /// Definition links of names, per (repository, indexed commit).
    definition_links: highlight::LinkCache,
    /// The current epoch's `TOOL_PRESETS`, as JSON text: changed by a reload that changes
    /// them, so the MCP face can announce `notifications/tools/list_changed` (P-22).
    tool_list: tokio::sync::watch::Sender<String>,
}

/// The access store (users, tokens, grants) on the metadata `store`'s registry uses: the
/// SQLite file of its data directory, or a cluster's PostgreSQL.
pub fn open_access(store: &GitStore) -> Result<access::AccessStore, access::Error> {
    match store.metadata() {
        gitstore::Metadata::Sqlite => access::AccessStore::open(&store.metadata_path()),
        gitstore::Metadata::Postgres(database) => {
            access::AccessStore::open_postgres(database.clone())
        }
    }
}

impl Service {
    /// A service over `store`, without server plugins.
    pub fn new(store: GitStore, config: ServiceConfig) -> Self {
        Self::with_server_plugins(store, config, PluginHost::disabled())
    }

    /// A service over `store` whose calls run the server plugins of `server_plugins`.
    pub fn with_server_plugins(
        store: GitStore,
        config: ServiceConfig,
        server_plugins: PluginHost,
    ) -> Self {
        let access = open_access(&store).map(Arc::new).map_err(|e| e.to_string());
        let (tool_list, _) =
            tokio::sync::watch::channel(serverplugins::presets_text(&server_plugins));
        Self {
            inner: Arc::new(Inner {
                access,
                indexes: index::open(&store, config.index.clone()),
                store,
                stats: QueryStats::default(),
                plugins: enrich::Plugins::new(config.plugins.clone()),
                admission: cost::Admission::new(
                    config.heavy_calls.clamp(1, MAX_HEAVY_CALLS),
                    config
                        .max_concurrent_searches
                        .clamp(1, MAX_CONCURRENT_SEARCHES),
                    config.search_queue_wait,
                ),
                config,
                server_plugins,
                derived_epochs: Default::default(),
                indexed_here: Default::default(),
                preparations: enrich::prepare::Preparations::default(),
                placement: std::sync::OnceLock::new(),
                served_here: std::sync::atomic::AtomicUsize::new(usize::MAX),
                overlays: Default::default(),
                highlights: highlight::new_cache(),
                definition_links: Default::default(),
                tool_list,
            }),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ServiceConfig {
        &self.inner.config
    }

    /// Query statistics of the base operations.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Runs `work` on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || work(&this.inner))
            .await
            .map_err(|join| {
                tracing::error!(error = %join, "a blocking operation panicked or was cancelled");
                ServiceError::internal(
                    "internal error while reading the repository; see the server log",
                )
            })?
    }

    /// Runs `work` — heavy work that is no repository operation of its own, such as
    /// rendering a README for a page (O-9) — on the blocking pool with a slot of `class`
    /// for the caller, under the call's budget: `work` gets the budget to check between
    /// steps; past the deadline, or when the caller goes away, it is cancelled.
    pub async fn offload<T: Send + 'static>(
        &self,
        ctx: &CallContext,
        class: Class,
        work: impl FnOnce(&Budget) -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let budget = match ctx.cost {
            Some(_) => ctx.budget.clone(),
            None => Cost::IN_PROCESS.budget(&ctx.budget),
        };
        let slot = self
            .inner
            .admission
            .admit(class, ctx.client, &budget)
            .await?;
        let departure = budget.cancel_on_drop();
        let inside = budget.clone();
        let running = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            work(&inside)
        });
        let answered = match budget.deadline() {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), running)
                .await
                .map_err(|_| budget.cancel()),
            None => Ok(running.await),
        };
        departure.disarm();
        match answered {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(join)) => {
                tracing::error!(error = %join, class = class.name(), "offloaded work panicked");
                Err(ServiceError::internal(
                    "internal error while preparing the page; see the server log",
                ))
            }
            Err(()) => Err(ServiceError::timed_out(
                class.name(),
                ctx.cost().time,
                "retry in a moment",
            )),
        }
    }

    /// Slots, holders and refusals of every heavy class (O-9), for `/metrics`.
    pub fn admission_stats(&self) -> Vec<ClassStats> {
        self.inner.admission.stats()
    }
}

/// Formats a time as RFC 3339 UTC to the second (`2026-12-02T11:56:03Z`); a time before the
/// epoch or past jiff's range shows as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    jiff::Timestamp::try_from(time)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_796_212_563)),
            "2026-12-02T11:56:03Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }
}
