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
mod index;
mod lines;
mod model;
mod navigate;
mod permissions;
mod placement;
mod pluginstatus;
mod prepare;
mod progress;
mod revision_search;
mod serverplugins;
mod stats;

pub use access::{TOKEN_PREFIX, contains_token};
pub use background::{Shutdown, spawn_maintenance};
pub use budget::{Budget, Stop};
pub use cost::{Admit, Class, ClassStats, ClientKey, Cost, MAX_HEAVY_CALLS, share_of};
pub use enrich::catalog_cache::CATALOG_IDLE;
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
pub use permissions::{AuthFailure, Caller, NewToken, Principal, TOKEN_NEEDED, TokenInfo};
pub use placement::{
    ClusterStatus, ForwardedRefusal, Member, Membership, Placement, Readiness, Route, RoutedCall,
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

use frame::{Op, RepoCall};
use gitstore::{GitStore, RepoName, RepoPath};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Branch heads of one repository whose plugins background preparation keeps warm (W-31).
pub const PREPARED_BRANCHES: usize = 16;

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
    preparations: Preparations,
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
        let (tool_list, _) = tokio::sync::watch::channel(serverplugins::presets_text(
            &server_plugins,
        ));
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
                preparations: Preparations::default(),
                placement: std::sync::OnceLock::new(),
                served_here: std::sync::atomic::AtomicUsize::new(usize::MAX),
                overlays: Default::default(),
                highlights: highlight::new_cache(),
                definition_links: Default::default(),
                tool_list,
            }),
        }
    }

    /// Registers a repository (G-1, G-2), or reuses the same registration; answers whether
    /// the registration is new. Does not fetch: call [`Service::sync`].
    pub async fn register(&self, req: RegisterRequest) -> Result<bool, ServiceError> {
        self.registry_change(move |store| {
            let name = RepoName::parse(&req.name)?;
            let existed = store.repo(&name).is_ok();
            store.register(gitstore::Registration {
                name,
                source: req.source,
                registered_path: RepoPath::parse(&req.registered_path)?,
                branch: req.branch,
                private: req.private,
            })?;
            Ok(!existed)
        })
        .await
    }

    /// Removes a registration, its metadata and its mirror; its index goes with the next
    /// maintenance round ([`Service::prune_indexes`]).
    pub async fn unregister(&self, repo: String) -> Result<(), ServiceError> {
        let name = RepoName::parse(&repo)?;
        let forget = name.clone();
        self.registry_change(move |store| Ok(store.unregister(&name)?))
            .await?;
        // A later registration under the name must not inherit the grants (after the
        // registration is gone: a failure here leaves grants on a name nobody can read).
        self.inner.access()?.forget_repo(forget.as_str())?;
        Ok(())
    }

    /// Runs a registry change on the blocking pool. It publishes a new registry snapshot and
    /// takes no lock a read takes: a read in flight finishes on the snapshot its lease
    /// holds, so one `read_many` never sees its repository's scope change between items.
    async fn registry_change<T: Send + 'static>(
        &self,
        change: impl FnOnce(&GitStore) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || change(&inner.store))
            .await
            .map_err(|_| {
                ServiceError::internal("a registry change was interrupted; see the server log")
            })?
    }

    /// The limits in force.
    pub fn config(&self) -> &ServiceConfig {
        &self.inner.config
    }

    /// Figures of the repository-plugin runtime (W-38), kept apart from the base-query
    /// statistics; `None` when plugins are disabled.
    pub fn plugin_stats(&self) -> Option<wasmplugin::runtime::RuntimeStats> {
        self.inner.plugins.runtime().map(|r| r.stats())
    }

    /// Plugin discoveries run so far (catalog cache misses that did the work, W-29).
    pub fn plugin_discoveries(&self) -> u64 {
        self.inner
            .plugins
            .discoveries
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops plugin catalogs unused for 10 minutes as of `now` (W-29; the maintenance loop
    /// calls it with the current time). Answers how many were dropped.
    pub fn sweep_plugin_catalogs(&self, now: std::time::Instant) -> usize {
        self.inner.plugins.sweep_catalogs(now)
    }

    /// Plugin catalogs cached now (W-29).
    pub fn plugin_catalogs(&self) -> usize {
        self.inner.plugins.cached_catalogs()
    }

    /// Plugin catalog lookups answered from the cache (W-29; with
    /// [`Service::plugin_discoveries`], the hit ratio).
    pub fn plugin_catalog_hits(&self) -> u64 {
        self.inner.plugins.catalog_hits()
    }

    /// Prepares the repository plugins of `repo`'s branch heads in the background sense of
    /// W-31: discovery plus compilation of default-enabled modules, never `enrich`. The
    /// default branch comes first; at most [`PREPARED_BRANCHES`] distinct heads, and only
    /// heads not prepared by an earlier call, so the every-minute round costs nothing for a
    /// repository that did not move. What preparation caches never evicts a catalog or
    /// module that reads use. One preparation per repository at a time: a call while
    /// another runs answers 0 at once. Answers how many modules this call made ready.
    pub async fn prepare_plugins(&self, repo: String) -> Result<usize, ServiceError> {
        self.blocking(move |inner| {
            if inner.plugins.config.disabled {
                return Ok(0);
            }
            // Maintenance, not a caller's operation: the local caller reads every repository.
            let resolved = RepoName::parse(&repo).and_then(|name| {
                let head = inner.store.resolve(&name, None)?;
                Ok((name, head))
            });
            let Some(_running) = inner.preparations.start(&repo, resolved.is_ok()) else {
                return Ok(0);
            };
            let (name, head) = resolved?;
            let mut heads = vec![head];
            for (_, commit) in inner.store.branch_heads(&name)? {
                if heads.len() >= PREPARED_BRANCHES {
                    break;
                }
                if !heads.contains(&commit) {
                    heads.push(commit);
                }
            }
            let mut ready = 0;
            let mut prepared = Vec::new();
            for commit in &heads {
                let lease = inner.store.lease(&name, commit)?;
                let key = format!("{commit}:{}", lease.registered_path());
                if inner.preparations.done(&repo, &key) {
                    prepared.push(key);
                    continue;
                }
                match inner.prepare_plugins(&lease) {
                    Ok(modules) => {
                        ready += modules;
                        prepared.push(key);
                    }
                    // Not recorded: the next round tries this head again.
                    Err(why) => {
                        tracing::debug!(repo = %name, %commit, %why, "plugin preparation failed")
                    }
                }
            }
            inner.preparations.finish(&repo, prepared);
            Ok(ready)
        })
        .await
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

    /// `read` and `read_many` in the service frame: the base read (`check` the request,
    /// alias, access, lease, `base`) is what the frame counts (R-7: the base figures stop
    /// there); enrichment follows while the lease still holds the commit and its registry
    /// snapshot (W-33).
    ///
    /// A read that is cheap runs right here on the async thread: a thread hand-off costs more
    /// than reading a cached or small file. What is not cheap moves to the blocking pool: a
    /// base read that would inflate more than [`INLINE_INFLATE_BYTES`] of uncached blobs (it
    /// is then redone there from the start) and an enrichment that has to discover or run a
    /// plugin.
    async fn read_frame<A, B>(
        &self,
        ctx: &CallContext,
        request: ReadFrame,
        check: impl FnOnce() -> Result<(), ServiceError>,
        items: fn(&A) -> &[ReadItem],
        base: B,
    ) -> Result<(A, Enrichment), ServiceError>
    where
        A: Send + 'static,
        B: Fn(&Inner, &gitstore::Lease, &mut Allowance) -> Result<Option<A>, ServiceError>
            + Send
            + Sync
            + 'static,
    {
        let ReadFrame {
            op,
            repo,
            revision,
            plugins,
            enrich,
        } = request;
        let (frame, answer, lease) = self
            .framed(ctx, op, repo, move |call| async move {
                check()?;
                let mut frame = Frame {
                    call,
                    revision,
                    plugins,
                    enrich,
                };
                let base: Arc<Base<A>> = Arc::new(base);
                let mut allowance = Allowance::inline();
                if let Some(read) = self.inner.base_read(&frame, &*base, &mut allowance) {
                    return read.map(|(answer, lease)| (Arc::new(frame), answer, lease));
                }
                // Issue 42 point 5: a read that inflates a large blob takes a slot of its
                // class first; one that will wait for another call's decode of the blob
                // inflates nothing and takes none (nor does one moved for a follow).
                if allowance.inflates
                    && let Err(busy) = frame.call.admit(&self.inner, Class::LargeRead).await
                {
                    // Refused after its wait: meanwhile another call may have decoded the
                    // blob (cached now) or be decoding it (to be shared), which needs no slot.
                    let mut again = Allowance::inline();
                    match self.inner.base_read(&frame, &*base, &mut again) {
                        Some(read) => {
                            return read.map(|(answer, lease)| (Arc::new(frame), answer, lease));
                        }
                        None if !again.inflates && busy.kind == ErrorKind::Busy => {}
                        None => return Err(busy),
                    }
                }
                let frame = Arc::new(frame);
                let read = {
                    let (frame, base) = (frame.clone(), base.clone());
                    self.blocking(move |inner| {
                        frame::on_blocking_pool(|| {
                            inner.base_read(&frame, &*base, &mut Allowance::unlimited())
                        })
                        .unwrap_or_else(|| {
                            Err(ServiceError::internal(
                                "a read without allowance stopped early; see the server log",
                            ))
                        })
                    })
                    .await
                };
                read.map(|(answer, lease)| (frame, answer, lease))
            })
            .await?;
        if !frame.enrich {
            return Ok((answer, Enrichment::default()));
        }
        let in_place = frame.enrichment(ctx, &lease, items(&answer));
        if let Some(enrichment) = self.inner.enrich_in_place(in_place) {
            return Ok((answer, enrichment));
        }
        let ctx = ctx.clone();
        self.blocking(move |inner| {
            let enrichment = inner.enrich(frame.enrichment(&ctx, &lease, items(&answer)));
            drop(lease);
            Ok((answer, enrichment))
        })
        .await
    }

    /// `read` (R-1..R-3), base only: no plugin runs. A failed base read is an error.
    pub async fn read(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
    ) -> Result<ReadItem, ServiceError> {
        self.read_with(ctx, req, false).await.map(|(item, _)| item)
    }

    /// `read` followed by repository-plugin enrichment (W-33): a successful base read is
    /// never turned into an error by anything the plugins do.
    pub async fn read_enriched(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
    ) -> Result<(ReadItem, Enrichment), ServiceError> {
        self.read_with(ctx, req, true).await
    }

    async fn read_with(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
        enrich: bool,
    ) -> Result<(ReadItem, Enrichment), ServiceError> {
        let frame = ReadFrame {
            op: Op::READ,
            repo: req.repo,
            revision: req.revision,
            plugins: req.plugins,
            enrich,
        };
        let file = FileRange {
            path: req.path,
            start_line: req.start_line,
            end_line: req.end_line,
        };
        let base = move |inner: &Inner, lease: &gitstore::Lease, allowance: &mut Allowance| {
            let mut budget = lines::Budget::single(&inner.config);
            let mut read = Reading::new(allowance);
            let Some((path, range)) = inner.read_range(lease, &file, &mut budget, &mut read)?
            else {
                return Ok(None);
            };
            Ok(Some(ReadItem {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                path,
                outcome: Ok(range),
            }))
        };
        let (item, mut enrichment) = self
            .read_frame(ctx, frame, || Ok(()), std::slice::from_ref, base)
            .await?;
        if enrich {
            enrichment.operator_notes = self
                .read_notes(
                    ctx,
                    "read",
                    &item.repo,
                    &item.commit,
                    std::slice::from_ref(&item),
                )
                .await;
        }
        Ok((item, enrichment))
    }

    /// `read_many`, base only: one item per entry in request order, one shared
    /// budget; no plugin runs.
    pub async fn read_many(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
    ) -> Result<ReadManyAnswer, ServiceError> {
        self.read_many_with(ctx, req, false)
            .await
            .map(|(answer, _)| answer)
    }

    /// `read_many` followed by repository-plugin enrichment (W-33).
    pub async fn read_many_enriched(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
    ) -> Result<(ReadManyAnswer, Enrichment), ServiceError> {
        self.read_many_with(ctx, req, true).await
    }

    async fn read_many_with(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
        enrich: bool,
    ) -> Result<(ReadManyAnswer, Enrichment), ServiceError> {
        let max = self.inner.config.max_batch_items;
        let asked = req.files.len();
        let check = move || {
            if asked == 0 {
                return Err(ServiceError::invalid(format!(
                    "`files` is empty; give 1 to {max} entries of {{path, start_line?, end_line?}}"
                )));
            }
            if asked > max {
                return Err(ServiceError::invalid(format!(
                    "`files` has {asked} entries; at most {max} per read_many: split the batch"
                )));
            }
            Ok(())
        };
        let frame = ReadFrame {
            op: Op::READ_MANY,
            repo: req.repo,
            revision: req.revision,
            plugins: req.plugins,
            enrich,
        };
        let files = req.files;
        let base = move |inner: &Inner, lease: &gitstore::Lease, allowance: &mut Allowance| {
            let mut budget = lines::Budget::batch(&inner.config);
            // One memo for the whole batch: items of one file decode it once (issue 42).
            let mut read = Reading::new(allowance);
            let items = files
                .iter()
                .map(|file| inner.read_item(lease, file, &mut budget, &mut read))
                .collect::<Option<Vec<_>>>();
            Ok(items.map(|items| ReadManyAnswer {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                items,
            }))
        };
        let (answer, mut enrichment) = self
            .read_frame(ctx, frame, check, ReadManyAnswer::items, base)
            .await?;
        if enrich {
            enrichment.operator_notes = self
                .read_notes(
                    ctx,
                    "read_many",
                    &answer.repo,
                    &answer.commit,
                    &answer.items,
                )
                .await;
        }
        Ok((answer, enrichment))
    }

    /// `list` (S-7): the tree below a directory, inside the registered scope.
    pub async fn list(
        &self,
        ctx: &CallContext,
        req: ListRequest,
    ) -> Result<ListAnswer, ServiceError> {
        let ListRequest {
            repo,
            revision,
            path,
            depth,
        } = req;
        self.framed_blocking(ctx, Op::LIST, repo, move |call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let (name, commit) = (lease.repo(), lease.commit());
            let path = RepoPath::parse(path.as_deref().unwrap_or(""))?;
            let max_depth = inner.config.max_list_depth;
            let depth = depth.unwrap_or(1);
            if depth == 0 || depth > max_depth {
                return Err(ServiceError::invalid(format!(
                    "depth must be between 1 and {max_depth}"
                )));
            }
            let (entries, truncated) = inner.store.list_tree_limited(
                name,
                commit,
                &path,
                depth,
                inner.config.max_list_entries,
            )?;
            Ok(ListAnswer {
                repo: name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                depth,
                entries: entries
                    .into_iter()
                    .map(|e| ListEntry {
                        path: e.path,
                        kind: e.kind.into(),
                        size: e.size,
                    })
                    .collect(),
                truncated,
            })
        })
        .await
    }

    /// `resolve` (S-6): a revision to the full SHA, or why not.
    pub async fn resolve(
        &self,
        ctx: &CallContext,
        repo: String,
        revision: String,
    ) -> Result<ResolveAnswer, ServiceError> {
        self.framed_blocking(ctx, Op::RESOLVE, repo, move |call, inner| {
            // Leased like every framed operation: the SHA answered is readable on the
            // registry snapshot it was resolved on.
            let lease = call.lease(inner, Some(&revision))?;
            Ok(ResolveAnswer {
                repo: lease.repo().to_string(),
                revision,
                commit: lease.commit().to_string(),
            })
        })
        .await
    }

    /// `discovery` (S-5): the repositories the caller may read.
    pub async fn discovery(&self, ctx: &CallContext) -> Result<Vec<RepoSummary>, ServiceError> {
        let caller = ctx.caller.clone();
        self.blocking(move |inner| {
            if caller == Caller::Anonymous && !inner.config.public_read {
                return Err(ServiceError::unauthenticated(permissions::TOKEN_NEEDED));
            }
            Ok(inner
                .store
                .repos()?
                .into_iter()
                .filter(|info| inner.may_read(&caller, &info.name))
                .map(|info| RepoSummary {
                    name: info.name.to_string(),
                    registered_path: info.registered_path.to_string(),
                    default_branch: info.default_branch,
                    indexed: inner.indexed(&info.name, info.head.as_ref()),
                    head: info.head.map(|c| c.to_string()),
                    last_sync: info.last_sync.map(rfc3339),
                    last_sync_error: info.last_error,
                })
                .collect())
        })
        .await
    }

    /// `availability` (SPEC §9): is the repository visible, does the revision resolve and is
    /// it readable. Repository-plugin discovery (`include_plugins`) joins with the plugin
    /// host.
    pub async fn availability(
        &self,
        ctx: &CallContext,
        req: AvailabilityRequest,
    ) -> Result<AvailabilityAnswer, ServiceError> {
        let AvailabilityRequest {
            repo,
            revision,
            include_plugins,
        } = req;
        self.framed_blocking(ctx, Op::AVAILABILITY, repo, move |call, inner| {
            // a repository the caller may not read is answered as an unknown one.
            let opened = match call.open(inner) {
                Ok(opened) => opened,
                Err(e) if e.kind == ErrorKind::NotFound => {
                    let name = RepoName::parse(call.repo())?;
                    return Ok(AvailabilityAnswer {
                        repo: name.to_string(),
                        visible: false,
                        revision,
                        commit: None,
                        readable: false,
                        reason: Some(gitstore::Error::UnknownRepo(name).to_string()),
                        indexed: false,
                        plugins: None,
                    });
                }
                Err(other) => return Err(other),
            };
            let name = opened.name().clone();
            let mut answer = AvailabilityAnswer {
                repo: name.to_string(),
                visible: true,
                revision: revision.clone(),
                commit: None,
                readable: false,
                reason: None,
                indexed: false,
                plugins: None,
            };
            // One lease: the answer and the plugin discovery use one registry snapshot.
            match opened.lease(inner, revision.as_deref()) {
                Ok(lease) => {
                    let commit = lease.commit();
                    answer.commit = Some(commit.to_string());
                    answer.readable = true;
                    answer.indexed = inner.indexed(&name, Some(commit));
                    if include_plugins {
                        // W-26: TIMEOUT bounds the discovery, and the wait on another
                        // request's discovery of the same commit, as it bounds enrichment.
                        let deadline = Instant::now() + inner.plugins.config.timeout;
                        answer.plugins = Some(match inner.plugin_infos(&lease, deadline) {
                            Ok(found) => PluginDiscovery::Found(found),
                            Err(why) => PluginDiscovery::Failed(why),
                        });
                    }
                }
                Err(gitstore::Error::OutsideRetention { commit, .. }) => {
                    answer.commit = Some(commit.to_string());
                    answer.reason =
                        Some(gitstore::Error::OutsideRetention { repo: name, commit }.to_string());
                }
                Err(other) => answer.reason = Some(other.to_string()),
            }
            Ok(answer)
        })
        .await
    }

    /// Fetches one repository now (G-3). Reads keep answering from the last good state while
    /// it runs and if it fails.
    pub async fn sync(&self, repo: String) -> Result<SyncAnswer, ServiceError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let synced = inner.sync(&repo);
            inner.stats.sync.record(started, synced.is_ok());
            synced
        })
        .await
        .map_err(|_| ServiceError::internal("sync was interrupted; see the server log"))?
    }

    /// Drops commits that left retention (G-5); leased commits are kept (G-8). The store
    /// guards object removal per repository, so reads of other repositories never wait.
    pub async fn sweep(&self) -> Result<SweepAnswer, ServiceError> {
        let store = self.inner.store.clone();
        tokio::task::spawn_blocking(move || Ok(store.sweep()?.into()))
            .await
            .map_err(|_| {
                ServiceError::internal("retention sweep was interrupted; see the server log")
            })?
    }
}

impl Inner {
    /// [`Service::sync`] on the calling (blocking) thread.
    fn sync(&self, repo: &str) -> Result<SyncAnswer, ServiceError> {
        let name = RepoName::parse(repo)?;
        let mut log = TenthLog::default();
        let outcome = self.store.sync_with_progress(&name, &mut |p| {
            // A small transfer says only that a phase is done; a large one each tenth.
            if let Some(total) = p.total
                && (total >= 100 || p.done == total)
                && log.crossed(&p.phase, p.done, total)
            {
                tracing::info!(repo = %name, phase = %p.phase, done = p.done, total, "fetching");
            }
        })?;
        Ok(SyncAnswer {
            repo: name.to_string(),
            head: outcome.head.map(|c| c.to_string()),
            changed: outcome
                .changed
                .into_iter()
                .map(|(branch, commit)| (branch, commit.to_string()))
                .collect(),
        })
    }

    /// The base read of a frame: access, then resolve and lease on one look at the registry
    /// (the lease keeps that snapshot for the whole call, R-8), then `base`. In place
    /// (`allowance` set), `None` when `base` ran out of allowance: redo it on the blocking
    /// pool.
    fn base_read<A>(
        &self,
        frame: &Frame,
        base: &Base<A>,
        allowance: &mut Allowance,
    ) -> Option<Result<(A, gitstore::Lease), ServiceError>> {
        let mut read = || -> Result<Option<(A, gitstore::Lease)>, ServiceError> {
            let opened = frame.call.open(self)?;
            let revision = frame.revision.as_deref();
            // In place, on the async thread, the lease never walks the history (issue 42
            // point 7): a commit only the retention walk can decide is redone on the
            // blocking pool (no large read: it takes no slot), where the walk runs under
            // the call's budget.
            let leased = if allowance.left.is_some() {
                opened.lease_inline(self, revision)
            } else {
                opened.lease(self, revision).map(Some)
            };
            let lease = match leased {
                Ok(Some(lease)) => lease,
                Ok(None) => return Ok(None),
                // Cluster mode: a copy still following a head another replica recorded. An
                // async thread must not wait for that; the blocking pool may (bounded), so
                // the read is redone there rather than answered "not synced".
                Err(gitstore::Error::NotSynced(_))
                    if allowance.left.is_some()
                        && self.store.holds_copy(opened.name()).unwrap_or(false) =>
                {
                    return Ok(None);
                }
                Err(error) => return Err(error.into()),
            };
            Ok(base(self, &lease, allowance)?.map(|answer| (answer, lease)))
        };
        read().transpose()
    }

    /// Reads one range under `budget`; answers the normalised path with it.
    /// `None`: the file is not cached and bigger than what is left of the allowance.
    fn read_range(
        &self,
        lease: &gitstore::Lease,
        file: &FileRange,
        budget: &mut lines::Budget,
        read: &mut Reading<'_>,
    ) -> Result<Option<(String, ReadRange)>, ServiceError> {
        let path = RepoPath::parse(&file.path)?;
        let Reading { allowance, memo } = read;
        let text = match lease.read_text_shared(&path, allowance.left.as_mut(), memo)? {
            gitstore::TextRead::Text(text) => text,
            gitstore::TextRead::Deferred { shared } => {
                allowance.inflates = !shared;
                return Ok(None);
            }
        };
        let window = lines::window(
            &text,
            file.start_line,
            file.end_line,
            self.config.default_lines,
        )
        .map_err(|e| ServiceError::invalid(e.message(path.as_str())))?;
        Ok(Some((path.to_string(), budget.take(&text, window))))
    }

    /// Reads one batch item under `budget`; a failure stays inside the item. `None` as
    /// for [`Inner::read_range`].
    fn read_item(
        &self,
        lease: &gitstore::Lease,
        file: &FileRange,
        budget: &mut lines::Budget,
        read: &mut Reading<'_>,
    ) -> Option<ReadItem> {
        let (path, outcome) = match self.read_range(lease, file, budget, read) {
            Ok(None) => return None,
            Ok(Some((path, range))) => (path, Ok(range)),
            Err(error) => {
                // Show the path as asked, escaped and bounded: it may be hostile input.
                let shown = file
                    .path
                    .chars()
                    .take(200)
                    .collect::<String>()
                    .escape_debug()
                    .to_string();
                (shown, Err(error.message))
            }
        };
        Some(ReadItem {
            repo: lease.repo().to_string(),
            commit: lease.commit().to_string(),
            path,
            outcome,
        })
    }
}

/// Background preparation's memory (W-31): the heads each repository had prepared (as
/// `commit:scope`), and which repositories are being prepared now.
#[derive(Default)]
struct Preparations {
    state: std::sync::Mutex<PreparationState>,
}

#[derive(Default)]
struct PreparationState {
    prepared: std::collections::HashMap<String, std::collections::HashSet<String>>,
    running: std::collections::HashSet<String>,
}

/// A preparation of one repository in progress; ends when dropped.
struct Preparing<'a> {
    preparations: &'a Preparations,
    repo: String,
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        self.preparations.state().running.remove(&self.repo);
    }
}

impl Preparations {
    fn state(&self) -> std::sync::MutexGuard<'_, PreparationState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts preparing `repo`, unless that runs already (`None`). A repository that is not
    /// registered (`registered` false) forgets what it had prepared.
    fn start(&self, repo: &str, registered: bool) -> Option<Preparing<'_>> {
        let mut state = self.state();
        if !registered {
            state.prepared.remove(repo);
        }
        state.running.insert(repo.to_string()).then(|| Preparing {
            preparations: self,
            repo: repo.to_string(),
        })
    }

    /// Whether `head` of `repo` was prepared by an earlier call.
    fn done(&self, repo: &str, head: &str) -> bool {
        self.state()
            .prepared
            .get(repo)
            .is_some_and(|heads| heads.contains(head))
    }

    /// Records the heads prepared now; heads no longer current are forgotten.
    fn finish(&self, repo: &str, heads: Vec<String>) {
        self.state()
            .prepared
            .insert(repo.to_string(), heads.into_iter().collect());
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

/// What differs between `read` and `read_many`, as they ask for a frame.
struct ReadFrame {
    op: Op,
    repo: String,
    revision: Option<String>,
    plugins: Option<Vec<PluginSelection>>,
    enrich: bool,
}

/// A `read` or `read_many` inside the service frame.
struct Frame {
    /// Access and lease go through it.
    call: RepoCall<String>,
    revision: Option<String>,
    plugins: Option<Vec<PluginSelection>>,
    enrich: bool,
}

impl Frame {
    /// The enrichment of this frame's answer, read under `lease`.
    fn enrichment<'a>(
        &'a self,
        ctx: &'a CallContext,
        lease: &'a gitstore::Lease,
        items: &'a [ReadItem],
    ) -> enrich::EnrichRequest<'a> {
        enrich::EnrichRequest {
            ctx,
            operation: self.call.operation(),
            lease,
            repo: lease.repo(),
            commit: lease.commit(),
            items,
            call: self.plugins.as_deref(),
        }
    }
}

/// Blob bytes not in the blob cache one read may inflate on the async thread that received
/// it (about a quarter of a millisecond of inflate); a read that needs more is moved to the
/// blocking pool. Whole-file reads of source files, tens of KiB each, stay in place.
const INLINE_INFLATE_BYTES: u64 = 256 * 1024;

/// How much a base read may still inflate, and what it found when it ran out.
struct Allowance {
    /// `Some(bytes)` in place, `None` without limit (on the blocking pool).
    left: Option<u64>,
    /// The read ran out of allowance on a blob it must inflate itself (no other call decodes
    /// it right now, which it would wait for instead).
    inflates: bool,
}

impl Allowance {
    /// What a read may inflate on the async thread that received it.
    fn inline() -> Self {
        Allowance {
            left: Some(INLINE_INFLATE_BYTES),
            inflates: false,
        }
    }

    /// No limit: on the blocking pool.
    fn unlimited() -> Self {
        Allowance {
            left: None,
            inflates: false,
        }
    }
}

/// One base read's allowance and the texts it read already (a `read_many` names one file in
/// several items: decoded once per call).
struct Reading<'a> {
    allowance: &'a mut Allowance,
    memo: gitstore::TextMemo,
}

impl<'a> Reading<'a> {
    fn new(allowance: &'a mut Allowance) -> Self {
        Reading {
            allowance,
            memo: gitstore::TextMemo::new(),
        }
    }
}

/// The base read of a frame, given its lease; `Ok(None)`: out of allowance.
type Base<A> = dyn Fn(&Inner, &gitstore::Lease, &mut Allowance) -> Result<Option<A>, ServiceError>
    + Send
    + Sync;

impl ReadManyAnswer {
    fn items(&self) -> &[ReadItem] {
        &self.items
    }
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
