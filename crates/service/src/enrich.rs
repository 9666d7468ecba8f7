//! Enrichment by repository plugins (W-33, W-34): after the base read, holding the snapshot
//! lease, never waiting on a lock a registry change can hold. Discovery results are cached per commit and scope
//! (W-29); the plugin host (`wasmplugin`) compiles, runs and bounds the plugins.

use crate::model::{Enrichment, PluginInfo, ReadItem};
use crate::{CallContext, Inner};
use gitstore::{CommitId, EntryKind, Lease, RepoName, RepoPath};
use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;
use wasmplugin::runtime::{
    ExecutionReport, HostFiles, HostReadError, InstanceKey, PrepareOutcome, Runtime,
};
use wasmplugin::{
    ArtifactEntry, ArtifactKind, Attachments, Catalog, Code, Diagnostic, ItemRef, PluginConfig,
    PluginSelection,
};

/// Catalogs kept (W-29).
const CATALOG_ENTRIES: usize = 64;
/// Artifact bytes kept in catalogs (W-29): the same 128 MiB budget that bounds what one
/// discovery reads.
const CATALOG_BYTES: usize = wasmplugin::CATALOG_ARTIFACT_BYTES as usize;

/// A catalog unused this long is dropped by the background sweep (W-29).
pub const CATALOG_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// What a catalog is cached under (W-29, G-2): storage root, repository, full commit SHA and
/// the registered scope, so a registration that changes the scope never finds a catalog of
/// the old one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CatalogKey {
    storage_root: String,
    repo: String,
    commit: String,
    scope: String,
}

/// One discovery in progress (W-29 single flight): later requests for its key wait for it,
/// each only until its own deadline.
#[derive(Default)]
struct Flight {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Flight {
    fn finish(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.finished.notify_all();
    }

    /// Waits for the flight to end; false when `deadline` passed first.
    fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            match deadline {
                None => {
                    done = self
                        .finished
                        .wait(done)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    done = self
                        .finished
                        .wait_timeout(done, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        true
    }
}

/// Ends the owner's flight when dropped (also on a panic): the flight leaves the table and
/// its waiters wake. The owner caches its catalog before this runs (W-29).
struct FlightEnd<'a> {
    flights: &'a Mutex<HashMap<CatalogKey, Arc<Flight>>>,
    key: &'a CatalogKey,
    flight: Arc<Flight>,
}

impl Drop for FlightEnd<'_> {
    fn drop(&mut self) {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(self.key);
        self.flight.finish();
    }
}

/// Discoveries of different commits that run at once, whatever their keys (O-9): each reads
/// and checks every artifact of a tree, so a flood of reads at distinct commits must not
/// run one discovery per caller. The cores, at least 2.
fn discovery_slots() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// A counting gate over discoveries: a request waits for a place until its deadline, then
/// answers PLUGIN_BUSY; background preparation waits as long as it takes.
struct Gate {
    max: usize,
    running: Mutex<usize>,
    freed: Condvar,
}

/// A place in the [`Gate`], given back when dropped (also on a panic).
struct Place<'a>(&'a Gate);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        *self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.freed.notify_one();
    }
}

impl Gate {
    fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            running: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// A place, or `None` when `deadline` passed first.
    fn enter(&self, deadline: Option<Instant>) -> Option<Place<'_>> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= self.max {
            running = match deadline {
                None => self
                    .freed
                    .wait(running)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    self.freed
                        .wait_timeout(running, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        *running += 1;
        Some(Place(self))
    }
}

/// The plugin host of one service: configuration, runtime and the catalog cache.
pub(crate) struct Plugins {
    pub(crate) config: PluginConfig,
    runtime: Option<Runtime>,
    catalogs: Mutex<CatalogCache>,
    /// Discoveries in progress, by catalog key.
    flights: Mutex<HashMap<CatalogKey, Arc<Flight>>>,
    /// Discoveries running at once, over every key.
    discovering: Gate,
    /// Discoveries run (cache misses that did the work), for tests and metrics.
    pub(crate) discoveries: std::sync::atomic::AtomicU64,
}

/// A small LRU of catalogs by [`CatalogKey`].
#[derive(Default)]
struct CatalogCache {
    entries: HashMap<CatalogKey, Cached>,
    order: VecDeque<CatalogKey>,
    bytes: usize,
    /// Lookups answered from the cache, for the hit ratio beside `discoveries`.
    hits: u64,
}

/// A cached catalog and when it was last used (for the idle sweep).
struct Cached {
    catalog: Arc<Catalog>,
    used: Instant,
    /// A request (a read or `availability`) used it; background preparation never evicts
    /// such an entry (W-31).
    requested: bool,
}

/// Who looks a catalog up: a request, bounded by its deadline, or background preparation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Request,
    Preparation,
}

impl CatalogCache {
    fn get(&mut self, key: &CatalogKey, lookup: Lookup) -> Option<Arc<Catalog>> {
        let found = self.entries.get_mut(key)?;
        if lookup == Lookup::Preparation {
            // Ready already: preparation neither refreshes it nor counts as its use.
            return Some(found.catalog.clone());
        }
        found.used = Instant::now();
        found.requested = true;
        let catalog = found.catalog.clone();
        self.order.retain(|k| k != key);
        self.order.push_back(key.clone());
        Some(catalog)
    }

    /// Caches `catalog`. A request's catalog evicts the least recently used ones as needed;
    /// a preparation's is kept only if it fits by evicting other prepared catalogs nobody
    /// asked for, never one a request used (W-31: warming new heads must not make current
    /// readers discover again).
    fn put(&mut self, key: CatalogKey, catalog: Arc<Catalog>, lookup: Lookup) {
        let bytes = catalog.artifact_bytes();
        if lookup == Lookup::Preparation && !self.entries.contains_key(&key) {
            let over = |entries: usize, total: usize| {
                entries + 1 > CATALOG_ENTRIES || total + bytes > CATALOG_BYTES
            };
            let (mut entries, mut total) = (self.entries.len(), self.bytes);
            let mut evict = Vec::new();
            for k in &self.order {
                if !over(entries, total) {
                    break;
                }
                if let Some(c) = self.entries.get(k).filter(|c| !c.requested) {
                    evict.push(k.clone());
                    entries -= 1;
                    total -= c.catalog.artifact_bytes();
                }
            }
            if over(entries, total) {
                return;
            }
            for k in &evict {
                self.remove(k);
            }
            self.order.retain(|k| self.entries.contains_key(k));
        }
        self.bytes += bytes;
        let cached = Cached {
            catalog,
            used: Instant::now(),
            requested: lookup == Lookup::Request,
        };
        if let Some(old) = self.entries.insert(key.clone(), cached) {
            self.bytes -= old.catalog.artifact_bytes();
        }
        self.order.retain(|k| *k != key);
        self.order.push_back(key);
        while self.entries.len() > CATALOG_ENTRIES || self.bytes > CATALOG_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, key: &CatalogKey) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.catalog.artifact_bytes();
        }
    }

    /// Drops the catalogs unused since `now - CATALOG_IDLE`; answers how many.
    fn sweep_idle(&mut self, now: Instant) -> usize {
        let idle: Vec<CatalogKey> = self
            .entries
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.used) >= CATALOG_IDLE)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &idle {
            self.remove(key);
        }
        self.order.retain(|k| self.entries.contains_key(k));
        idle.len()
    }
}

impl Plugins {
    /// The host; when the runtime cannot start, enrichment answers a diagnostic instead of
    /// attachments (never failing a base read).
    pub(crate) fn new(config: PluginConfig) -> Self {
        let runtime = if config.disabled {
            None
        } else {
            match Runtime::new(config.clone()) {
                Ok(runtime) => Some(runtime),
                Err(error) => {
                    tracing::error!(%error, "the repository plugin runtime did not start; plugins are off");
                    None
                }
            }
        };
        Self {
            config,
            runtime,
            catalogs: Mutex::new(CatalogCache::default()),
            flights: Mutex::default(),
            discoveries: Default::default(),
            discovering: Gate::new(discovery_slots()),
        }
    }

    pub(crate) fn runtime(&self) -> Option<&Runtime> {
        self.runtime.as_ref()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, CatalogCache> {
        self.catalogs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops catalogs idle for [`CATALOG_IDLE`] as of `now` (W-29); answers how many.
    pub(crate) fn sweep_catalogs(&self, now: Instant) -> usize {
        self.cache().sweep_idle(now)
    }

    /// Catalogs cached now.
    pub(crate) fn cached_catalogs(&self) -> usize {
        self.cache().entries.len()
    }

    /// Catalog lookups answered from the cache so far.
    pub(crate) fn catalog_hits(&self) -> u64 {
        self.cache().hits
    }
}

impl Inner {
    /// Background preparation (W-31): discovery, caching of metadata and bytes, and
    /// compilation of default-enabled modules of the leased commit, with no deadline. Never
    /// calls `enrich`. Answers how many modules are compiled and cached.
    pub(crate) fn prepare_plugins(&self, lease: &Lease) -> Result<usize, String> {
        let (repo, commit) = (lease.repo(), lease.commit());
        let catalog = self.catalog(lease, None).map_err(|diagnostic| {
            // The code tells a timeout from an unreadable artifact; the caller keeps the message.
            tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
            diagnostic.message
        })?;
        let Some(runtime) = self.plugins.runtime() else {
            return Ok(0);
        };
        let mut ready = 0;
        for plugin in catalog
            .plugins
            .iter()
            .filter(|p| p.metadata.default_enabled)
        {
            // Preparation never evicts a module a read used (W-31): with no room, the first
            // read compiles it on demand.
            match runtime.prepare_module(&plugin.digest, &plugin.bytes) {
                Ok(PrepareOutcome::Cached | PrepareOutcome::Compiled) => ready += 1,
                Ok(PrepareOutcome::NoRoom) => {
                    tracing::debug!(plugin = %plugin.name, dir = %plugin.dir, "plugin not prepared: every module slot holds one a read uses")
                }
                Err(diagnostic) => {
                    tracing::info!(plugin = %plugin.name, dir = %plugin.dir, %diagnostic, "plugin not prepared")
                }
            }
        }
        Ok(ready)
    }
}

/// Host reads of one execution: the same repository, commit and scope, inside the plugin
/// directory (W-22). Each read goes through the call's lease, so it uses the registry
/// snapshot of its call and re-checks retention there (W-33).
struct PluginFiles<'a> {
    lease: &'a Lease,
    dir: String,
    deadline: Instant,
}

impl HostFiles for PluginFiles<'_> {
    fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        if Instant::now() >= self.deadline {
            return Err("the request deadline passed".to_string().into());
        }
        let refused = |e: gitstore::Error| HostReadError::Refused(e.to_string());
        let relative = RepoPath::parse(path).map_err(refused)?;
        if relative.is_root() {
            return Err("an empty path names no file".to_string().into());
        }
        let full = if self.dir.is_empty() {
            relative.to_string()
        } else {
            format!("{}/{}", self.dir, relative)
        };
        let full = RepoPath::parse(&full).map_err(refused)?;
        match self.lease.read_bytes(&full, Some(max_bytes)) {
            Err(gitstore::Error::TooLarge { size, .. }) => Err(HostReadError::TooLarge(size)),
            other => other.map_err(refused),
        }
    }
}

/// One enrichment to run: the base answer's items and what selects the plugins.
#[derive(Clone, Copy)]
pub(crate) struct EnrichRequest<'a> {
    pub ctx: &'a CallContext,
    pub operation: &'a str,
    /// The base read's lease: its commit and registry snapshot (W-33).
    pub lease: &'a Lease,
    pub repo: &'a RepoName,
    pub commit: &'a CommitId,
    pub items: &'a [ReadItem],
    pub call: Option<&'a [PluginSelection]>,
}

impl Inner {
    /// Runs the selected plugins over the successful items. Never fails: every problem is a
    /// diagnostic, a panic inside enrichment included (W-25: plan, absorb and host glue are
    /// caught here, so a successful base read never becomes an error).
    pub(crate) fn enrich(&self, req: EnrichRequest<'_>) -> Enrichment {
        let started = Instant::now();
        let enrichment = contain_panics(|| self.enrich_unguarded(req, false).unwrap_or_default());
        self.record_enrichment(started, &enrichment);
        enrichment
    }

    /// W-38: enrichment's own figures; an enrichment with a fault diagnostic counts as an
    /// error (the base read it belongs to still succeeded).
    fn record_enrichment(&self, started: Instant, enrichment: &Enrichment) {
        self.stats
            .enrichment
            .record(started, enrichment.diagnostics.is_empty());
    }

    /// [`Inner::enrich`] when it is cheap enough for an async thread: nothing to run and the
    /// catalog (if one is needed) already cached. `None` when a discovery or a plugin would
    /// have to run (or anything panicked): then call [`Inner::enrich`] on a blocking thread.
    pub(crate) fn enrich_in_place(&self, req: EnrichRequest<'_>) -> Option<Enrichment> {
        let started = Instant::now();
        let enrichment =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.enrich_unguarded(req, true)))
                .unwrap_or(None)?;
        self.record_enrichment(started, &enrichment);
        Some(enrichment)
    }

    /// The enrichment; with `in_place`, `None` as soon as it would discover or execute.
    fn enrich_unguarded(&self, req: EnrichRequest<'_>, in_place: bool) -> Option<Enrichment> {
        let EnrichRequest {
            ctx,
            operation,
            lease,
            repo,
            commit,
            items,
            call,
        } = req;
        let started = Instant::now();
        // W-26: one TIMEOUT for the whole enrichment, discovery (artifact reads and the wait
        // on another request's discovery) included.
        let deadline = started + self.plugins.config.timeout;
        let refs = item_refs(items);
        let mut attachments = Attachments::default();
        if refs.is_empty() {
            return Some(Enrichment::default());
        }
        // W-10, W-11: `plugins: []`, connection `off` and the host switch are decided before
        // any discovery, so a failing discovery never shows where nothing may be shown.
        let disabled = self.plugins.config.disabled || self.plugins.runtime().is_none();
        if let Some(decided) = wasmplugin::plan_without_catalog(&ctx.plugins, call, disabled) {
            attachments.diagnostics.extend(decided.diagnostics);
            return Some(finish(attachments, started));
        }
        let catalog = if in_place {
            self.cached_catalog(lease)?
        } else {
            match self.catalog(lease, Some(deadline)) {
                Ok(catalog) => catalog,
                Err(diagnostic) => {
                    tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
                    attachments.diagnostics.push(diagnostic);
                    return Some(finish(attachments, started));
                }
            }
        };
        if let Some(truncated) = &catalog.truncated {
            attachments.diagnostics.push(truncated.clone());
        }
        let plan = wasmplugin::plan(&catalog, &ctx.plugins, call, operation, disabled, &refs);
        if in_place {
            if !plan.executions.is_empty() {
                return None;
            }
            // Counted only now: a probe that hands over to the blocking thread looks again.
            self.plugins.cache().hits += 1;
        }
        attachments.diagnostics.extend(plan.diagnostics);
        let Some(runtime) = self.plugins.runtime() else {
            return Some(finish(attachments, started));
        };
        let mut totals = Totals::default();
        for execution in &plan.executions {
            let plugin = &execution.plugin;
            let ids: Vec<String> = execution
                .items
                .iter()
                .map(|&i| refs[i].item_id.clone())
                .collect();
            let compiling = Instant::now();
            totals.compile_hits += u64::from(runtime.is_cached(&plugin.digest));
            let module = runtime.module(&plugin.digest, &plugin.bytes, Some(deadline));
            totals.compile += compiling.elapsed();
            let outcome = module.and_then(|module| {
                let key = InstanceKey {
                    storage_root: self.store.storage_root().to_string_lossy().into_owned(),
                    repo: repo.to_string(),
                    commit: commit.to_string(),
                    plugin_dir: plugin.dir.clone(),
                    args: execution.args.to_string(),
                };
                let input = execution.input(operation, repo.as_str(), commit.as_str(), &refs);
                let files = PluginFiles {
                    lease,
                    dir: plugin.dir.clone(),
                    deadline,
                };
                let (outcome, report) =
                    runtime.execute_reported(&module, &key, &input, &files, deadline);
                totals.add(&report);
                outcome
            });
            let failed = match outcome {
                Ok(executed) => {
                    attachments.absorb(execution, &refs, &executed.output);
                    executed.read_budget
                }
                Err(diagnostic) => Some(diagnostic),
            };
            if let Some(diagnostic) = failed {
                totals.faults.push(diagnostic.code.as_str());
                attachments
                    .diagnostics
                    .push(diagnostic.at(&plugin.name, &plugin.dir).for_items(ids));
            }
        }
        totals.log(plan.executions.len(), started);
        Some(finish(attachments, started))
    }

    /// What `availability(include_plugins: true)` shows (W-6): static information only.
    pub(crate) fn plugin_infos(
        &self,
        lease: &Lease,
        deadline: Instant,
    ) -> Result<Vec<PluginInfo>, String> {
        let (repo, commit) = (lease.repo(), lease.commit());
        let catalog = self.catalog(lease, Some(deadline)).map_err(|diagnostic| {
            // The answer carries the message only; the log keeps the code beside it.
            tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
            diagnostic.message
        })?;
        let runnable = catalog.plugins.iter().map(|p| PluginInfo {
            name: p.name.clone(),
            directory: p.dir.clone(),
            title: p.metadata.title.clone(),
            description: p.metadata.description.clone(),
            version: p.metadata.version.clone(),
            operations: p.metadata.operations.clone(),
            default_enabled: p.metadata.default_enabled,
            input_schema: p.metadata.input_schema.clone(),
            diagnostic: None,
        });
        let broken = catalog.broken.iter().map(|b| PluginInfo {
            name: b.name.clone(),
            directory: b.dir.clone(),
            title: None,
            description: None,
            version: None,
            operations: Vec::new(),
            default_enabled: false,
            input_schema: None,
            diagnostic: Some(b.diagnostic.to_string()),
        });
        let mut infos: Vec<PluginInfo> = runnable.chain(broken).collect();
        infos.sort_by(|a, b| {
            (a.name.as_bytes(), &a.directory).cmp(&(b.name.as_bytes(), &b.directory))
        });
        // A discovery that stopped at the catalog bounds says so, last, as an entry without a
        // name (the artifacts it left out are not listed).
        if let Some(truncated) = &catalog.truncated {
            infos.push(PluginInfo {
                name: String::new(),
                directory: String::new(),
                title: None,
                description: None,
                version: None,
                operations: Vec::new(),
                default_enabled: false,
                input_schema: None,
                diagnostic: Some(truncated.to_string()),
            });
        }
        Ok(infos)
    }

    /// The catalog of the leased commit in the scope of the lease's registration: cached,
    /// else discovered (W-29). A failure is never cached. `deadline` bounds the discovery and
    /// the wait on another request's discovery of the same key (PLUGIN_TIMEOUT); `None` only
    /// for background preparation.
    fn catalog(
        &self,
        lease: &Lease,
        deadline: Option<Instant>,
    ) -> Result<Arc<Catalog>, Diagnostic> {
        self.catalog_observed(lease, deadline, || {})
    }

    /// The catalog of the leased commit if it is cached now (no discovery, no wait).
    fn cached_catalog(&self, lease: &Lease) -> Option<Arc<Catalog>> {
        self.plugins
            .cache()
            .get(&self.catalog_key(lease), Lookup::Request)
    }

    /// The key of the leased commit's catalog. The scope comes from the lease's registration
    /// (G-2): a registration that changes the scope is another key, and a discovery under
    /// one lease reads and caches under that one scope only.
    fn catalog_key(&self, lease: &Lease) -> CatalogKey {
        CatalogKey {
            storage_root: self.store.storage_root().to_string_lossy().into_owned(),
            repo: lease.repo().to_string(),
            commit: lease.commit().to_string(),
            scope: lease.registered_path().to_string(),
        }
    }

    /// [`Inner::catalog`]; `discovered` runs in the owner after its discovery succeeded,
    /// before the catalog is cached (a test uses it to send a request into that moment).
    ///
    /// Nothing here holds a lock a registry change can take: the flight table's
    /// mutex is held for map operations only, and a waiter waits on its flight alone, until
    /// its own deadline (W-26).
    fn catalog_observed(
        &self,
        lease: &Lease,
        deadline: Option<Instant>,
        discovered: impl FnOnce(),
    ) -> Result<Arc<Catalog>, Diagnostic> {
        let mut discovered = Some(discovered);
        let key = self.catalog_key(lease);
        let lookup = match deadline {
            Some(_) => Lookup::Request,
            None => Lookup::Preparation,
        };
        let cached = || {
            let mut cache = self.plugins.cache();
            let found = cache.get(&key, lookup);
            cache.hits += u64::from(found.is_some());
            found
        };
        loop {
            if let Some(found) = cached() {
                return Ok(found);
            }
            // Single flight (W-29): concurrent cold requests for one key wait for the first
            // one's discovery instead of repeating it.
            let (flight, owner) = {
                let mut flights = self
                    .plugins
                    .flights
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                // An owner caches its catalog before it removes its flight, so a miss here
                // with no flight means no discovery of this key finished or is running.
                if let Some(found) = cached() {
                    return Ok(found);
                }
                match flights.get(&key) {
                    Some(flight) => (flight.clone(), false),
                    None => {
                        let flight = Arc::<Flight>::default();
                        flights.insert(key.clone(), flight.clone());
                        (flight, true)
                    }
                }
            };
            if !owner {
                if !flight.wait(deadline) {
                    return Err(Diagnostic::new(
                        Code::Timeout,
                        "the request deadline passed while another request discovered the plugins of this commit (TIMEOUT)",
                    ));
                }
                // Cached now, or that discovery failed: look again (and maybe discover).
                continue;
            }
            let end = FlightEnd {
                flights: &self.plugins.flights,
                key: &key,
                flight,
            };
            let Some(_place) = self.plugins.discovering.enter(deadline) else {
                return Err(Diagnostic::new(
                    Code::Busy,
                    "too many plugin discoveries of other commits run at once; the read is \
                     answered without plugins, retry in a moment",
                ));
            };
            self.plugins
                .discoveries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let catalog = Arc::new(self.discover(lease, deadline)?);
            if let Some(observe) = discovered.take() {
                observe();
            }
            self.plugins
                .cache()
                .put(key.clone(), catalog.clone(), lookup);
            drop(end);
            return Ok(catalog);
        }
    }

    /// Discovery proper: the artifacts of the leased commit inside the lease's scope, read
    /// and checked, within `deadline`. Holds no lock: the lease carries its snapshot.
    fn discover(&self, lease: &Lease, deadline: Option<Instant>) -> Result<Catalog, Diagnostic> {
        let failed = |e: gitstore::Error| {
            Diagnostic::new(Code::Artifact, format!("plugin discovery failed: {e}"))
        };
        let found = lease
            .find_files(wasmplugin::ARTIFACT_SUFFIX)
            .map_err(failed)?;
        let entries: Vec<ArtifactEntry> = found
            .into_iter()
            .map(|f| ArtifactEntry {
                path: f.path,
                path_utf8: f.path_utf8,
                kind: match f.kind {
                    EntryKind::Symlink => ArtifactKind::Symlink,
                    EntryKind::Submodule => ArtifactKind::Submodule,
                    _ => ArtifactKind::Blob,
                },
                size: f.size,
                digest: f.id,
            })
            .collect();
        wasmplugin::discover(&entries, &self.plugins.config, deadline, |entry| {
            let path = RepoPath::parse(&entry.path).map_err(failed)?;
            lease.read_bytes(&path, None).map_err(failed)
        })
    }
}

/// The items plugins see (W-13, W-14): those that returned lines, with their request-order
/// ids. A failed item, and an item the shared batch budget left without lines, are not
/// passed; an empty file (no lines to return) still is.
fn item_refs(items: &[ReadItem]) -> Vec<ItemRef> {
    items
        .iter()
        .enumerate()
        .filter_map(|(index, item)| {
            let range = item.outcome.as_ref().ok()?;
            let returned = range.end_line >= range.start_line || range.total_lines == 0;
            returned.then(|| ItemRef {
                item_id: format!("read-{index}"),
                repository_path: item.path.clone(),
                start_line: range.start_line,
                end_line: range.end_line,
                content: range.content.clone(),
                truncated: range.truncated,
                has_more: Some(range.has_more),
                next_start_line: range.next_start_line,
            })
        })
        .collect()
}

/// Runs one enrichment; a panic inside it (a host bug, never the guest's: guest faults are
/// diagnostics already) becomes one diagnostic and no attachments (W-25).
fn contain_panics(enrichment: impl FnOnce() -> Enrichment) -> Enrichment {
    std::panic::catch_unwind(AssertUnwindSafe(enrichment)).unwrap_or_else(|_| {
        tracing::error!("repository-plugin enrichment panicked; answered without attachments");
        Enrichment {
            diagnostics: vec![
                Diagnostic::new(
                    Code::Trap,
                    "the plugin host failed internally while enriching this read (logged); the read itself is complete",
                )
                .to_string(),
            ],
            ..Enrichment::default()
        }
    })
}

/// The W-36 figures of one enrichment, summed over its executions.
#[derive(Default)]
struct Totals {
    compile: std::time::Duration,
    compile_hits: u64,
    instantiate: std::time::Duration,
    execute: std::time::Duration,
    host_read: std::time::Duration,
    read_calls: u64,
    read_bytes: u64,
    instance_reuses: u64,
    faults: Vec<&'static str>,
}

impl Totals {
    fn add(&mut self, report: &ExecutionReport) {
        self.instantiate += report.instantiate;
        self.execute += report.execute;
        self.host_read += report.host_read;
        self.read_calls += report.read_calls;
        self.read_bytes += report.read_bytes;
        self.instance_reuses += u64::from(report.instance_reused);
    }

    /// One debug line per enrichment (W-36): timings, reads, cache hits and fault codes;
    /// never args, bodies or output.
    fn log(&self, executions: usize, started: Instant) {
        let us = |d: std::time::Duration| d.as_micros() as u64;
        tracing::debug!(
            executions,
            total_us = us(started.elapsed()),
            compile_us = us(self.compile),
            instantiate_us = us(self.instantiate),
            execute_us = us(self.execute),
            host_read_us = us(self.host_read),
            read_calls = self.read_calls,
            read_bytes = self.read_bytes,
            compile_cache_hits = self.compile_hits,
            instance_reuses = self.instance_reuses,
            faults = %self.faults.join(","),
            "plugin enrichment"
        );
    }
}

fn finish(attachments: Attachments, started: Instant) -> Enrichment {
    tracing::debug!(
        elapsed_us = started.elapsed().as_micros() as u64,
        attachments = attachments.per_item.len() + attachments.whole.len(),
        diagnostics = attachments.diagnostics.len(),
        "enrichment"
    );
    Enrichment {
        per_item: attachments.per_item,
        whole: attachments.whole,
        diagnostics: attachments
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect(),
        operator_notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O-9: discoveries of different commits have a global cap: past it a request waits
    /// only until its deadline (then PLUGIN_BUSY), and a place given back lets the next in.
    #[test]
    fn o9_discoveries_over_every_commit_are_capped() {
        use std::time::Duration;
        let gate = Gate::new(2);
        let soon = || Some(Instant::now() + Duration::from_millis(30));
        let first = gate.enter(soon()).expect("a place");
        let second = gate.enter(soon()).expect("a place");
        let started = Instant::now();
        assert!(
            gate.enter(soon()).is_none(),
            "the third waits, then gives up"
        );
        assert!(started.elapsed() >= Duration::from_millis(25));
        drop(first);
        let third = gate.enter(soon()).expect("the place given back");
        // Without a deadline (background preparation) a waiter is let in once one leaves.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| gate.enter(None).is_some());
            std::thread::sleep(Duration::from_millis(20));
            drop(second);
            assert!(waiter.join().expect("the waiter"));
        });
        drop(third);
        assert_eq!(*gate.running.lock().unwrap(), 0);
    }

    /// W-25: a panic inside enrichment is one diagnostic, never an error of the read.
    #[test]
    fn w25_panic_in_enrichment_is_a_diagnostic() {
        let enrichment = contain_panics(|| panic!("a bug in the host glue"));
        assert!(enrichment.per_item.is_empty() && enrichment.whole.is_empty());
        assert_eq!(enrichment.diagnostics.len(), 1);
        assert!(
            enrichment.diagnostics[0].starts_with("code=PLUGIN_TRAP")
                && !enrichment.diagnostics[0].contains("a bug in the host glue"),
            "{:?}",
            enrichment.diagnostics
        );
        let fine = contain_panics(|| Enrichment {
            whole: vec!["w".into()],
            ..Enrichment::default()
        });
        assert_eq!(fine.whole, ["w"]);
    }

    /// W-29: a request arriving after the owner's discovery finished but before its catalog
    /// is cached joins the flight (which ends only after caching) instead of discovering
    /// again; it waits until its own deadline at most. Here the owner blocks in that moment
    /// until the newcomer is done, so the newcomer times out, and nothing is discovered twice.
    #[test]
    fn w29_request_between_discovery_and_caching_never_discovers_twice() {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let service = crate::Service::new(
            source.store("test/repo", ""),
            crate::ServiceConfig::default(),
        );
        let inner = service.inner.clone();
        let repo = RepoName::parse("test/repo").unwrap();
        let commit = CommitId::parse(&source.head()).unwrap();
        let discoveries = || {
            inner
                .plugins
                .discoveries
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let lease = || inner.store.lease(&repo, &commit).unwrap();
        let mut newcomer = None;
        let owner = inner.catalog_observed(&lease(), None, || {
            let (inner, lease) = (inner.clone(), lease());
            let bounded = Instant::now() + std::time::Duration::from_millis(200);
            newcomer = Some(
                std::thread::spawn(move || inner.catalog(&lease, Some(bounded)))
                    .join()
                    .unwrap(),
            );
        });
        assert!(owner.is_ok());
        let newcomer = newcomer.expect("the newcomer ran inside the window");
        assert_eq!(
            newcomer.map(|_| ()).unwrap_err().code,
            Code::Timeout,
            "the newcomer waited for the flight"
        );
        assert_eq!(discoveries(), 1);
        assert!(inner.catalog(&lease(), None).is_ok());
        assert_eq!(discoveries(), 1, "cached");
    }

    /// W-26, R-8: `availability` with plugins, finding another request's discovery of the
    /// same commit in flight, waits only until its own TIMEOUT and answers the discovery as
    /// failed with PLUGIN_TIMEOUT's message; and while the discovery is parked, a registry
    /// change (removing the very repository) completes: nothing the discovery holds is a
    /// lock a registry change takes.
    #[test]
    fn w26_r8_availability_waits_for_a_flight_only_until_its_timeout() {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let config = crate::ServiceConfig {
            plugins: PluginConfig {
                timeout: std::time::Duration::from_millis(300),
                ..PluginConfig::default()
            },
            ..crate::ServiceConfig::default()
        };
        let service = crate::Service::new(source.store("test/repo", ""), config);
        let inner = service.inner.clone();
        let repo = RepoName::parse("test/repo").unwrap();
        let commit = CommitId::parse(&source.head()).unwrap();
        let lease = inner.store.lease(&repo, &commit).unwrap();
        let guard = std::time::Duration::from_secs(20);
        let mut seen = None;
        let owner = inner.catalog_observed(&lease, None, || {
            let service = service.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                let asked = Instant::now();
                let answer = runtime.block_on(service.availability(
                    &CallContext::default(),
                    crate::AvailabilityRequest {
                        repo: "test/repo".into(),
                        revision: None,
                        include_plugins: true,
                    },
                ));
                let waited = asked.elapsed();
                let removed = runtime.block_on(service.unregister("test/repo".into()));
                let _ = tx.send((answer, waited, removed));
            });
            seen = Some(
                rx.recv_timeout(guard)
                    .expect("availability and the removal answered while the discovery was parked"),
            );
        });
        assert!(owner.is_ok());
        let (answer, waited, removed) = seen.unwrap();
        match answer.unwrap().plugins {
            Some(crate::PluginDiscovery::Failed(why)) => assert!(why.contains("TIMEOUT"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(
            waited < guard,
            "bounded by TIMEOUT, not by the flight: {waited:?}"
        );
        removed.expect("the registry change completed");
    }

    /// W-26, W-29: a request waiting on another request's discovery waits only until its own
    /// deadline; a finished flight wakes every waiter at once.
    #[test]
    fn w26_w29_flight_wait_ends_at_the_deadline() {
        let flight = Arc::new(Flight::default());
        assert!(
            !flight.wait(Some(Instant::now())),
            "deadline already passed"
        );
        let waiter = {
            let flight = flight.clone();
            std::thread::spawn(move || flight.wait(None))
        };
        flight.finish();
        assert!(waiter.join().unwrap());
        assert!(
            flight.wait(Some(Instant::now())),
            "a finished flight never waits"
        );
    }

    /// W-29: the owner's flight ends only when its guard drops (after the catalog is cached),
    /// also when discovery panics, so waiters never hang.
    #[test]
    fn w29_flight_end_removes_and_wakes_even_on_panic() {
        let flights: Mutex<HashMap<CatalogKey, Arc<Flight>>> = Mutex::default();
        let key = CatalogKey {
            storage_root: "/data".into(),
            repo: "a/b".into(),
            commit: "c".repeat(40),
            scope: String::new(),
        };
        let flight = Arc::new(Flight::default());
        flights.lock().unwrap().insert(key.clone(), flight.clone());
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _end = FlightEnd {
                flights: &flights,
                key: &key,
                flight: flight.clone(),
            };
            assert!(
                flights.lock().unwrap().contains_key(&key),
                "still in flight"
            );
            panic!("discovery failed badly");
        }));
        assert!(outcome.is_err());
        assert!(flights.lock().unwrap().is_empty());
        assert!(flight.wait(Some(Instant::now())));
    }
}
